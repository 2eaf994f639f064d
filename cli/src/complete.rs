//! Shell completion, two ways (docs/cli.md "Completion"):
//! - `kubectl terdut completion bash|zsh|fish|powershell`: clap's script for the binary run as
//!   `kubectl-terdut`;
//! - `kubectl terdut <TAB>`: kubectl (1.26+) runs an executable `kubectl_complete-terdut` from
//!   PATH with the words typed so far and reads candidates in Cobra's `__complete` format (one
//!   per line, then `:DIRECTIVE`). `completion kubectl` prints that executable (it calls
//!   `kubectl-terdut __complete`), and [`plan`] decides what to offer: subcommands, flags,
//!   kinds, or the names of objects of a kind, which `main.rs` lists from the cluster.

use clap::CommandFactory as _;

use crate::args::{Cli, Shell};
use crate::kinds::Kind;

/// The `kubectl_complete-terdut` script: put it on PATH, executable.
pub const KUBECTL_PLUGIN_SCRIPT: &str = "#!/bin/sh\n# kubectl runs this for `kubectl terdut <TAB>` (kubectl 1.26+): keep it on PATH, executable.\nexec kubectl-terdut __complete \"$@\"\n";

/// The completion script for `shell`.
pub fn script(shell: Shell) -> String {
    use clap_complete::Shell as S;
    let s = match shell {
        Shell::Kubectl => return KUBECTL_PLUGIN_SCRIPT.to_owned(),
        Shell::Bash => S::Bash,
        Shell::Zsh => S::Zsh,
        Shell::Fish => S::Fish,
        Shell::Powershell => S::PowerShell,
    };
    let mut out = Vec::new();
    clap_complete::generate(s, &mut Cli::command(), "kubectl-terdut", &mut out);
    String::from_utf8_lossy(&out).into_owned()
}

/// Cobra's directives (spf13/cobra `ShellCompDirective`).
const NO_SPACE: u8 = 2;
const NO_FILE_COMP: u8 = 4;

/// What to offer for the last word.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Want {
    /// These words (already filtered by the prefix).
    Words(Vec<String>, u8),
    /// Names of objects of `kind` starting with `prefix`, in `namespace` (None: the context's),
    /// each written after `lead` (`team/` for `team/<TAB>`, empty for `team <TAB>`).
    Objects {
        kind: Kind,
        namespace: Option<String>,
        prefix: String,
        lead: String,
    },
}

/// Global options that take a value.
const VALUED_GLOBALS: [&str; 4] = ["--kubeconfig", "--context", "-n", "--namespace"];

/// What to complete, given the words after `kubectl terdut` (the last one is being typed and
/// may be empty).
pub fn plan(words: &[String]) -> Want {
    let (last, done) = match words.split_last() {
        Some((last, done)) => (last.as_str(), done),
        None => ("", &[][..]),
    };
    let mut namespace = None;
    let mut positional: Vec<&str> = vec![];
    let mut i = 0;
    while i < done.len() {
        let w = done[i].as_str();
        if VALUED_GLOBALS.contains(&w) || w == "-o" || w == "--output" || w == "--events" {
            if matches!(w, "-n" | "--namespace") {
                namespace = done.get(i + 1).cloned();
            }
            i += 2;
            continue;
        }
        if let Some(ns) = w.strip_prefix("--namespace=") {
            namespace = Some(ns.to_owned());
        } else if !w.starts_with('-') {
            positional.push(w);
        }
        i += 1;
    }
    let words = |list: Vec<String>, directive: u8| {
        Want::Words(
            list.into_iter().filter(|w| w.starts_with(last)).collect(),
            directive,
        )
    };
    let previous = done.last().map(String::as_str);
    if matches!(previous, Some("-o" | "--output")) {
        return words(vec!["json".into(), "yaml".into()], NO_FILE_COMP);
    }
    if matches!(
        previous,
        Some("-n" | "--namespace" | "--context" | "--events")
    ) {
        return Want::Words(vec![], NO_FILE_COMP);
    }
    if previous == Some("--kubeconfig") {
        // Files: let the shell complete them.
        return Want::Words(vec![], 0);
    }
    let cli = Cli::command();
    let Some((&sub, args)) = positional.split_first() else {
        if last.starts_with('-') {
            return words(flags(&cli), NO_FILE_COMP);
        }
        let subs = cli
            .get_subcommands()
            .filter(|c| !c.is_hide_set())
            .map(|c| c.get_name().to_owned())
            .collect();
        return words(subs, NO_FILE_COMP);
    };
    if last.starts_with('-') {
        let mut list = flags(&cli);
        if let Some(c) = cli.find_subcommand(sub) {
            list.extend(flags(c));
        }
        return words(list, NO_FILE_COMP);
    }
    let objects = |kind: Kind, prefix: &str, lead: &str| Want::Objects {
        kind,
        namespace: namespace.clone(),
        prefix: prefix.to_owned(),
        lead: lead.to_owned(),
    };
    match (sub, args) {
        ("why" | "pause" | "resume" | "reconcile", []) => match last.split_once('/') {
            Some((kind, prefix)) => match kind.parse::<Kind>() {
                Ok(k) => objects(k, prefix, &format!("{kind}/")),
                Err(_) => Want::Words(vec![], NO_FILE_COMP),
            },
            None => words(
                Kind::ALL.iter().map(|k| format!("{}/", k.word())).collect(),
                NO_SPACE | NO_FILE_COMP,
            ),
        },
        ("why" | "pause" | "resume" | "reconcile", [kind]) => match kind.parse::<Kind>() {
            Ok(k) => objects(k, last, ""),
            Err(_) => Want::Words(vec![], NO_FILE_COMP),
        },
        ("rotate", []) => words(vec!["source".into(), "server-key".into()], NO_FILE_COMP),
        ("rotate", ["source"]) => objects(Kind::Source, last, ""),
        ("rotate", ["server-key"]) => objects(Kind::Server, last, ""),
        ("completion", []) => words(
            ["bash", "zsh", "fish", "powershell", "kubectl"]
                .map(str::to_owned)
                .to_vec(),
            NO_FILE_COMP,
        ),
        _ => Want::Words(vec![], NO_FILE_COMP),
    }
}

/// `--long` (and `-s`) flags of one command, without clap's own help and version.
fn flags(c: &clap::Command) -> Vec<String> {
    c.get_arguments()
        .filter(|a| !a.is_positional() && !a.is_hide_set())
        .flat_map(|a| {
            let mut v = vec![];
            if let Some(l) = a.get_long() {
                v.push(format!("--{l}"));
            }
            if let Some(s) = a.get_short() {
                v.push(format!("-{s}"));
            }
            v
        })
        .collect()
}

/// Cobra's output: one candidate a line, then `:DIRECTIVE`.
pub fn cobra(candidates: &[String], directive: u8) -> String {
    let mut out = String::new();
    for c in candidates {
        // A candidate is one line: a name with a newline in it would be two.
        if !c.contains(['\n', '\r']) {
            out.push_str(c);
            out.push('\n');
        }
    }
    out.push_str(&format!(":{directive}\n"));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan_of(line: &str) -> Want {
        let mut words: Vec<String> = line.split(' ').map(str::to_owned).collect();
        if line.is_empty() {
            words = vec![String::new()];
        }
        plan(&words)
    }

    fn words(line: &str) -> Vec<String> {
        match plan_of(line) {
            Want::Words(w, _) => w,
            other => panic!("{line:?}: {other:?}"),
        }
    }

    #[test]
    fn subcommands_then_their_flags() {
        assert_eq!(
            words(""),
            [
                "status",
                "why",
                "rotate",
                "pause",
                "resume",
                "reconcile",
                "completion"
            ]
        );
        assert_eq!(words("re"), ["resume", "reconcile"]);
        assert!(words("status --o").contains(&"--output".to_owned()));
        assert!(words("status -").contains(&"--all-namespaces".to_owned()));
        assert_eq!(words("status -o "), ["json", "yaml"]);
        assert_eq!(words("status --output y"), ["yaml"]);
    }

    #[test]
    fn kinds_then_names_from_the_cluster() {
        assert_eq!(words("why "), ["server/", "team/", "source/"]);
        assert_eq!(
            plan_of("-n team-payments pause team/pay"),
            Want::Objects {
                kind: Kind::Team,
                namespace: Some("team-payments".into()),
                prefix: "pay".into(),
                lead: "team/".into()
            }
        );
        assert_eq!(
            plan_of("why tds "),
            Want::Objects {
                kind: Kind::Server,
                namespace: None,
                prefix: String::new(),
                lead: String::new()
            }
        );
        assert_eq!(
            plan_of("rotate source --namespace=oncall p"),
            Want::Objects {
                kind: Kind::Source,
                namespace: Some("oncall".into()),
                prefix: "p".into(),
                lead: String::new()
            }
        );
        assert_eq!(words("why nonsense/x"), Vec::<String>::new());
    }

    #[test]
    fn cobra_format_ends_with_the_directive() {
        assert_eq!(cobra(&["a".into(), "b\nc".into()], NO_FILE_COMP), "a\n:4\n");
    }

    #[test]
    fn every_shell_has_a_script() {
        for shell in [Shell::Bash, Shell::Zsh, Shell::Fish, Shell::Powershell] {
            assert!(script(shell).contains("kubectl-terdut"), "{shell:?}");
        }
        assert!(script(Shell::Kubectl).contains("kubectl-terdut __complete"));
    }
}
