//! `kubectl terdut status`: the tree as text. Rendering is pure (a [`Tree`] and a clock in,
//! text out) so the golden test can pin it.

use k8s_openapi::jiff::Timestamp;
use terdut_crds::v1alpha1::server::key_accepted;

use crate::age::age;
use crate::table::layout;
use crate::tree::{ServerNode, TeamNode, Tree};
use crate::view::{Common, ServerView, SourceView, TeamView};

const HEADER: [&str; 6] = ["NAME", "READY", "REASON", "AGE", "ID", "DETAILS"];

pub fn render(tree: &Tree, now: Timestamp) -> String {
    let mut rows: Vec<Vec<String>> = vec![HEADER.iter().map(|s| s.to_string()).collect()];
    let mut count = Counts::default();
    for node in &tree.servers {
        server_rows(&mut rows, &mut count, node, now);
    }
    for ((ns, team), sources) in &tree.lost_sources {
        rows.push(vec![
            format!("team {ns}/{team}"),
            "-".into(),
            "-".into(),
            "-".into(),
            "-".into(),
            "no such TerdutTeam".into(),
        ]);
        for (i, s) in sources.iter().enumerate() {
            let last = i + 1 == sources.len();
            rows.push(source_row(s, branch("", last), now));
            count.add(&s.common);
        }
    }
    if rows.len() == 1 {
        return "No TerdutServers, TerdutTeams or TerdutAlertSources found.\n".into();
    }
    let mut out = layout(&rows);
    out.push_str(&count.summary());
    out
}

fn server_rows(rows: &mut Vec<Vec<String>>, count: &mut Counts, node: &ServerNode, now: Timestamp) {
    let (ns, name) = &node.key;
    match &node.server {
        Some(s) => {
            count.add(&s.common);
            rows.push(common_row(
                &s.common,
                format!("server {ns}/{name}"),
                "-".into(),
                server_details(s),
                now,
            ));
        }
        None => rows.push(vec![
            format!("server {ns}/{name}"),
            "-".into(),
            "-".into(),
            "-".into(),
            "-".into(),
            "not found, or not readable with these credentials".into(),
        ]),
    }
    for (i, t) in node.teams.iter().enumerate() {
        let last = i + 1 == node.teams.len();
        team_rows(rows, count, t, ns, last, now);
    }
}

fn team_rows(
    rows: &mut Vec<Vec<String>>,
    count: &mut Counts,
    node: &TeamNode,
    server_ns: &str,
    last: bool,
    now: Timestamp,
) {
    let t = &node.team;
    count.add(&t.common);
    // A team beside its server goes by its name; one attached from elsewhere by namespace/name.
    let name = if t.common.namespace == server_ns {
        t.common.name.clone()
    } else {
        format!("{}/{}", t.common.namespace, t.common.name)
    };
    rows.push(common_row(
        &t.common,
        format!("{}team {name}", branch("", last)),
        id(t.team_id),
        team_details(t),
        now,
    ));
    let indent = if last { "   " } else { "│  " };
    for (i, s) in node.sources.iter().enumerate() {
        let last_source = i + 1 == node.sources.len();
        rows.push(source_row(s, branch(indent, last_source), now));
        count.add(&s.common);
    }
}

fn source_row(s: &SourceView, prefix: String, now: Timestamp) -> Vec<String> {
    let mut details = vec![];
    if let Some(k) = &s.source_kind {
        details.push(k.clone());
    }
    if let Some(secret) = &s.webhook_secret {
        details.push(format!("secret {secret}"));
    }
    details.extend(flags(&s.common));
    common_row(
        &s.common,
        format!("{prefix}source {}", s.common.name),
        id(s.integration_id),
        details.join(", "),
        now,
    )
}

fn branch(indent: &str, last: bool) -> String {
    format!("{indent}{}", if last { "└─ " } else { "├─ " })
}

fn id(v: Option<i64>) -> String {
    v.map_or_else(|| "-".into(), |v| v.to_string())
}

fn common_row(
    c: &Common,
    name: String,
    id: String,
    details: String,
    now: Timestamp,
) -> Vec<String> {
    let (ready, reason) = match c.ready() {
        Some(r) => (r.status.clone(), or_dash(&r.reason)),
        None => ("-".into(), "-".into()),
    };
    vec![name, ready, reason, age(c.created, now), id, details]
}

fn or_dash(s: &str) -> String {
    if s.is_empty() { "-".into() } else { s.into() }
}

fn server_details(s: &ServerView) -> String {
    let key = s.key_fingerprint.as_deref().unwrap_or("-");
    let accepted = s
        .common
        .condition(key_accepted::TYPE)
        .map_or_else(|| "-".into(), |c| or_dash(&c.reason));
    let mut d = vec![
        format!("key {key} ({accepted})"),
        format!("consent {}", s.consent),
    ];
    if let (Some(a), Some(r)) = (s.teams_accepted, s.teams_refused) {
        d.push(format!("teams {a} accepted, {r} refused"));
    }
    d.extend(flags(&s.common));
    d.join(", ")
}

fn team_details(t: &TeamView) -> String {
    let mut d = vec![];
    if let Some(n) = &t.display_name {
        d.push(format!("{n:?}"));
    }
    d.extend(flags(&t.common));
    d.join(", ")
}

/// What a user should notice about any object: paused, being deleted, a spec not yet seen.
fn flags(c: &Common) -> Vec<String> {
    let mut f = vec![];
    if c.paused {
        f.push("paused".to_string());
    }
    if c.deleting {
        f.push("deleting".into());
    }
    if let (Some(g), Some(o)) = (c.generation, c.observed_generation)
        && o < g
    {
        f.push(format!("generation {g} not yet observed ({o})"));
    }
    f
}

#[derive(Default)]
struct Counts {
    objects: [usize; 3],
    not_ready: usize,
}

impl Counts {
    fn add(&mut self, c: &Common) {
        self.objects[c.kind as usize] += 1;
        if c.ready().is_none_or(|r| r.status != "True") {
            self.not_ready += 1;
        }
    }

    fn summary(&self) -> String {
        let [s, t, a] = self.objects;
        format!(
            "\n{s} server{}, {t} team{}, {a} alert source{}; {} not Ready\n",
            plural(s),
            plural(t),
            plural(a),
            self.not_ready
        )
    }
}

fn plural(n: usize) -> &'static str {
    if n == 1 { "" } else { "s" }
}
