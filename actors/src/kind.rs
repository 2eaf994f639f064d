//! The three kinds the operator reconciles, as a type instead of strings: metric labels, log
//! fields, own-write records and the actors' routing all name a kind through [`Kind`].

use std::fmt;

/// One of the operator's custom resources.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    Server,
    Team,
    Source,
}

impl Kind {
    /// The `kind` label of metrics and logs.
    pub const fn label(self) -> &'static str {
        match self {
            Self::Server => "server",
            Self::Team => "team",
            Self::Source => "source",
        }
    }

    /// The Kubernetes kind, for messages.
    pub const fn resource(self) -> &'static str {
        match self {
            Self::Server => "TerdutServer",
            Self::Team => "TerdutTeam",
            Self::Source => "TerdutAlertSource",
        }
    }

    pub const ALL: [Kind; 3] = [Self::Server, Self::Team, Self::Source];
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.label())
    }
}

/// What the operator records its own writes of (see `context::OwnWrites`): one of the kinds,
/// or the webhook Secret a source writes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Written {
    Object(Kind),
    WebhookSecret,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn labels_are_the_metric_values_and_distinct() {
        let labels: Vec<_> = Kind::ALL.iter().map(|k| k.label()).collect();
        assert_eq!(labels, ["server", "team", "source"]);
        assert_eq!(Kind::Source.resource(), "TerdutAlertSource");
        assert_eq!(Kind::Team.to_string(), "team");
    }
}
