//! The three kinds, how a user names them on the command line, and the API resources behind
//! them. Constants are spelled out here rather than taken from terdut-crds (see Cargo.toml).

use std::fmt;
use std::str::FromStr;

use kube::api::{ApiResource, DynamicObject};
use kube::core::GroupVersionKind;
use kube::{Api, Client};

pub const GROUP: &str = "terdut.ryuvia.com";
pub const VERSION: &str = "v1alpha1";

/// One of the operator's kinds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Kind {
    Server,
    Team,
    Source,
}

impl Kind {
    pub const ALL: [Kind; 3] = [Kind::Server, Kind::Team, Kind::Source];

    /// The Kubernetes kind.
    pub fn kind(self) -> &'static str {
        match self {
            Kind::Server => "TerdutServer",
            Kind::Team => "TerdutTeam",
            Kind::Source => "TerdutAlertSource",
        }
    }

    pub fn plural(self) -> &'static str {
        match self {
            Kind::Server => "terdutservers",
            Kind::Team => "terdutteams",
            Kind::Source => "terdutalertsources",
        }
    }

    /// The word the tree and the messages use.
    pub fn word(self) -> &'static str {
        match self {
            Kind::Server => "server",
            Kind::Team => "team",
            Kind::Source => "source",
        }
    }

    /// Which runbook documents this kind's reasons, and the anchor of its section.
    pub fn runbook(self) -> (&'static str, &'static str) {
        match self {
            Kind::Server => ("docs/runbook-server.md", ""),
            Kind::Team => ("docs/runbook.md", "#terdutteam"),
            Kind::Source => ("docs/runbook.md", "#terdutalertsource"),
        }
    }

    pub fn api_resource(self) -> ApiResource {
        ApiResource::from_gvk_with_plural(
            &GroupVersionKind::gvk(GROUP, VERSION, self.kind()),
            self.plural(),
        )
    }

    pub fn api(self, client: &Client, namespace: Option<&str>) -> Api<DynamicObject> {
        let ar = self.api_resource();
        match namespace {
            Some(ns) => Api::namespaced_with(client.clone(), ns, &ar),
            None => Api::all_with(client.clone(), &ar),
        }
    }
}

impl fmt::Display for Kind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.kind())
    }
}

impl FromStr for Kind {
    type Err = String;

    /// Every name kubectl accepts for the kind (kind, plural, singular, short name), any case,
    /// plus the tree's own words (`server`, `team`, `source`).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let s = s.to_ascii_lowercase();
        let s = s.strip_suffix(&format!(".{GROUP}")).unwrap_or(&s);
        Ok(match s {
            "server" | "servers" | "tds" | "terdutserver" | "terdutservers" => Kind::Server,
            "team" | "teams" | "tdt" | "terdutteam" | "terdutteams" => Kind::Team,
            "source" | "sources" | "alertsource" | "tdas" | "terdutalertsource"
            | "terdutalertsources" => Kind::Source,
            other => {
                return Err(format!(
                    "unknown kind {other:?}: one of server (tds), team (tdt), source (tdas)"
                ));
            }
        })
    }
}

/// `KIND/NAME` as kubectl writes it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KindName {
    pub kind: Kind,
    pub name: String,
}

impl FromStr for KindName {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let (kind, name) = s
            .split_once('/')
            .ok_or_else(|| format!("{s:?}: expected KIND/NAME, e.g. team/payments"))?;
        if name.is_empty() || name.contains('/') {
            return Err(format!("{s:?}: expected KIND/NAME, e.g. team/payments"));
        }
        Ok(KindName {
            kind: kind.parse()?,
            name: name.to_owned(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_what_kubectl_accepts() {
        for (s, k) in [
            ("tds", Kind::Server),
            ("TerdutTeam", Kind::Team),
            ("terdutalertsources.terdut.ryuvia.com", Kind::Source),
            ("source", Kind::Source),
        ] {
            assert_eq!(s.parse::<Kind>(), Ok(k), "{s}");
        }
        assert!("pod".parse::<Kind>().is_err());
    }

    #[test]
    fn kind_name() {
        assert_eq!(
            "tdt/payments".parse::<KindName>(),
            Ok(KindName {
                kind: Kind::Team,
                name: "payments".into()
            })
        );
        assert!("payments".parse::<KindName>().is_err());
        assert!("team/".parse::<KindName>().is_err());
        assert!("team/a/b".parse::<KindName>().is_err());
    }
}
