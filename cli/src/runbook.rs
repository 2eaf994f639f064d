//! The runbook rows for a condition's reason, read from the runbooks themselves
//! (docs/runbook.md, docs/runbook-server.md, compiled in), so `why` and the docs cannot drift:
//! a reason without a row is reported as such, and a test fails for every reason the CRDs
//! define that has none.

use terdut_crds::v1alpha1::conditions::READY;

use crate::kinds::Kind;

const RUNBOOK: &str = include_str!("../../docs/runbook.md");
const RUNBOOK_SERVER: &str = include_str!("../../docs/runbook-server.md");

/// One row of a reasons table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Entry {
    /// `docs/runbook.md#terdutteam`.
    pub link: String,
    pub condition: String,
    pub reason: String,
    pub status: String,
    pub meaning: String,
    pub todo: String,
}

/// The row for `reason` of condition `condition` on `kind`.
pub fn lookup(kind: Kind, condition: &str, reason: &str) -> Option<Entry> {
    entries(kind)
        .into_iter()
        .find(|e| e.condition == condition && e.reason == reason)
}

/// Every row documented for `kind`.
pub fn entries(kind: Kind) -> Vec<Entry> {
    let (file, text, section) = match kind {
        Kind::Server => ("docs/runbook-server.md", RUNBOOK_SERVER, None),
        Kind::Team => ("docs/runbook.md", RUNBOOK, Some("TerdutTeam")),
        Kind::Source => ("docs/runbook.md", RUNBOOK, Some("TerdutAlertSource")),
    };
    let mut out = vec![];
    // The level-1 or level-2 heading the current line is under, and its anchor.
    let mut heading = String::new();
    let mut anchor = String::new();
    let mut columns: Vec<String> = vec![];
    for line in text.lines() {
        if let Some(h) = line.strip_prefix("# ").or_else(|| line.strip_prefix("## ")) {
            heading = h.trim().to_owned();
            anchor = slug(&heading);
            columns.clear();
            continue;
        }
        let in_section = match section {
            Some(s) => heading == s,
            // The server's runbook is all about the server; its Events table has no reasons.
            None => heading != "Events",
        };
        if !in_section || !line.starts_with('|') {
            if !line.starts_with('|') {
                columns.clear();
            }
            continue;
        }
        let cells = cells(line);
        if columns.is_empty() {
            columns = cells;
            continue;
        }
        if cells
            .iter()
            .all(|c| c.chars().all(|ch| ch == '-' || ch == ':'))
        {
            continue;
        }
        let col = |name: &str| {
            columns
                .iter()
                .position(|c| c == name)
                .and_then(|i| cells.get(i))
                .map(|c| plain(c))
        };
        let (Some(reason), Some(meaning), Some(todo)) =
            (col("Reason"), col("What it means"), col("What to do"))
        else {
            continue;
        };
        out.push(Entry {
            link: format!("{file}#{anchor}"),
            condition: col("Condition").unwrap_or_else(|| READY.into()),
            reason,
            status: col("Ready").or_else(|| col("Status")).unwrap_or_default(),
            meaning,
            todo,
        });
    }
    out
}

fn cells(line: &str) -> Vec<String> {
    let inner = line.trim().trim_start_matches('|').trim_end_matches('|');
    inner.split('|').map(|c| c.trim().to_owned()).collect()
}

/// A cell without its Markdown: code spans and emphasis unmarked, links as their text.
fn plain(cell: &str) -> String {
    let mut out = String::new();
    let mut rest = cell;
    while let Some(start) = rest.find('[') {
        let Some(mid) = rest[start..].find("](") else {
            break;
        };
        let Some(end) = rest[start + mid..].find(')') else {
            break;
        };
        out.push_str(&rest[..start]);
        out.push_str(&rest[start + 1..start + mid]);
        rest = &rest[start + mid + end + 1..];
    }
    out.push_str(rest);
    out.replace("**", "").replace('`', "")
}

/// The anchor a Markdown renderer gives a heading (GitHub's and Gitea's rule).
fn slug(heading: &str) -> String {
    heading
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_rows_of_each_kind() {
        let e = lookup(Kind::Team, "Ready", "UnknownUser").expect("row");
        assert_eq!(e.link, "docs/runbook.md#terdutteam");
        assert_eq!(e.status, "False");
        assert!(e.todo.contains("sign up"), "{e:?}");
        let e = lookup(Kind::Source, "Ready", "WebhookSecretLost").expect("row");
        assert_eq!(e.link, "docs/runbook.md#terdutalertsource");
        assert!(e.todo.contains("terdut.ryuvia.com/rotate-webhook-key"));
        let e = lookup(Kind::Server, "Ready", "KeySecretInvalid").expect("row");
        assert_eq!(
            e.link,
            "docs/runbook-server.md#runbook-terdutserver-conditions"
        );
        let e = lookup(Kind::Server, "KeyAccepted", "KeyRejected").expect("row");
        assert_eq!(e.link, "docs/runbook-server.md#other-conditions");
        assert_eq!(e.status, "False");
        // Team reasons are not the source's, and Events tables are not reasons.
        assert!(lookup(Kind::Source, "Ready", "UnknownUser").is_none());
        assert!(lookup(Kind::Server, "Ready", "OperatorKeyCreated").is_none());
    }

    #[test]
    fn markdown_is_unmarked() {
        assert_eq!(
            plain("see [runbook-server.md](runbook-server.md) and **no call** `x`"),
            "see runbook-server.md and no call x"
        );
        assert_eq!(
            slug("Runbook: TerdutServer conditions"),
            "runbook-terdutserver-conditions"
        );
    }
}
