//! What the fleet should be: K TerdutTeams in their own namespace, each with one
//! TerdutAlertSource, attached to the example TerdutServer across namespaces; and the waves of
//! renames the day-two runs make while a fault or an upgrade is under way. Pure: the objects
//! are rendered here as YAML, and the checks compare the server's state with this.

use std::collections::BTreeMap;

/// The fleet's namespace; the example server's `allowedTeams` selector consents to it.
pub const NS: &str = "node-fleet";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Team {
    pub display: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Source {
    pub team: String,
    /// `spec.kind`: never changed by a wave, so no webhook key may ever rotate.
    pub kind: &'static str,
    /// `spec.name`, the integration's name on the server.
    pub name: String,
}

#[derive(Debug, Clone, Default)]
pub struct Model {
    pub teams: BTreeMap<String, Team>,
    pub sources: BTreeMap<String, Source>,
    /// Waves applied so far (names carry the wave's number).
    pub waves: u32,
}

fn team_name(i: usize) -> String {
    format!("t-{i:03}")
}

fn source_name(i: usize) -> String {
    format!("s-{i:03}")
}

impl Model {
    /// `pairs` teams, each with one source (alertmanager and grafana in turn).
    pub fn new(pairs: usize) -> Self {
        let mut m = Self::default();
        for i in 0..pairs {
            m.teams.insert(
                team_name(i),
                Team {
                    display: format!("Team {i:03}"),
                },
            );
            m.sources.insert(
                source_name(i),
                Source {
                    team: team_name(i),
                    kind: if i % 2 == 0 {
                        "alertmanager"
                    } else {
                        "grafana"
                    },
                    name: format!("source-{i:03}"),
                },
            );
        }
        m
    }

    /// Renames the teams and sources of the pairs `picked` (indexes into the pairs) in a new
    /// wave; returns the YAML to apply.
    pub fn rename_wave(&mut self, picked: &[usize]) -> String {
        self.waves += 1;
        let w = self.waves;
        let mut docs = vec![];
        for &i in picked {
            let (t, s) = (team_name(i), source_name(i));
            if let Some(team) = self.teams.get_mut(&t) {
                team.display = format!("Team {i:03} w{w}");
            }
            if let Some(source) = self.sources.get_mut(&s) {
                source.name = format!("source-{i:03}-w{w}");
            }
            docs.push(self.team_yaml(&t));
            docs.push(self.source_yaml(&s));
        }
        docs.join("---\n")
    }

    /// Every object, as YAML documents.
    pub fn yaml(&self) -> String {
        let mut docs: Vec<String> = self.teams.keys().map(|t| self.team_yaml(t)).collect();
        docs.extend(self.sources.keys().map(|s| self.source_yaml(s)));
        docs.join("---\n")
    }

    pub fn pairs(&self) -> usize {
        self.teams.len()
    }

    fn team_yaml(&self, name: &str) -> String {
        let display = &self.teams[name].display;
        format!(
            "apiVersion: terdut.ryuvia.com/v1alpha1
kind: TerdutTeam
metadata: {{name: {name}, namespace: {NS}}}
spec:
  serverRef: {{name: {server}, namespace: {server_ns}}}
  displayName: \"{display}\"
  escalation:
    levels:
      - timeout: 10m
        targets: [{{kind: oncall}}]
",
            server = crate::examples::SERVER,
            server_ns = crate::examples::SERVER_NS,
        )
    }

    fn source_yaml(&self, name: &str) -> String {
        let s = &self.sources[name];
        format!(
            "apiVersion: terdut.ryuvia.com/v1alpha1
kind: TerdutAlertSource
metadata: {{name: {name}, namespace: {NS}}}
spec:
  teamRef: {{name: {team}}}
  kind: {kind}
  name: {source}
",
            team = s.team,
            kind = s.kind,
            source = s.name,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wave_renames_only_the_picked_pairs_and_renders_them() {
        let mut m = Model::new(4);
        let yaml = m.rename_wave(&[1, 3]);
        assert_eq!(m.teams["t-001"].display, "Team 001 w1");
        assert_eq!(m.teams["t-000"].display, "Team 000");
        assert_eq!(m.sources["s-003"].name, "source-003-w1");
        assert_eq!(yaml.matches("kind: TerdutTeam").count(), 2);
        assert!(yaml.contains("name: source-001-w1") && !yaml.contains("t-000"));
        let all = m.yaml();
        assert_eq!(all.matches("---").count(), 7);
        assert!(all.contains("kind: grafana") && all.contains("kind: alertmanager"));
    }

    #[test]
    fn every_document_parses() {
        let m = Model::new(2);
        for doc in m.yaml().split("---\n") {
            let v: serde_json::Value = serde_yaml_ng::from_str(doc).unwrap();
            assert_eq!(v["metadata"]["namespace"], NS);
        }
    }
}
