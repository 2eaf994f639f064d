//! The command line, as kubectl users expect it: `-n`/`-A`, `--context`, `--kubeconfig`, and
//! objects as `KIND/NAME` or `KIND NAME`.

use clap::{Args, Parser, Subcommand};

use crate::kinds::{Kind, KindName};

#[derive(Debug, Parser)]
#[command(
    name = "kubectl-terdut",
    bin_name = "kubectl terdut",
    version,
    about = "The TerdutServer → TerdutTeam → TerdutAlertSource tree, why an object is not \
             Ready, and the operator's annotations as commands (docs/cli.md)"
)]
pub struct Cli {
    /// Path of the kubeconfig (default: $KUBECONFIG, then ~/.kube/config).
    #[arg(long, global = true)]
    pub kubeconfig: Option<std::path::PathBuf>,
    /// The kubeconfig context to use.
    #[arg(long, global = true)]
    pub context: Option<String>,
    /// Namespace (default: the context's).
    #[arg(short, long, global = true)]
    pub namespace: Option<String>,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// The tree server → teams → alert sources with Ready, reason, age and ids.
    Status {
        /// Every namespace.
        #[arg(short = 'A', long)]
        all_namespaces: bool,
        /// The tree as data instead of a table.
        #[arg(short = 'o', long, value_enum)]
        output: Option<crate::output::Format>,
    },
    /// Conditions, last Events, the operator's plan and the runbook rows of one object.
    Why {
        #[command(flatten)]
        target: Target,
        /// How many Events to show, newest last.
        #[arg(long, default_value_t = 10)]
        events: usize,
    },
    /// Rotate a webhook key or a server's operator key (asks first).
    Rotate {
        #[command(subcommand)]
        what: Rotate,
    },
    /// Stop reconciling an object: server, team or source (terdut.ryuvia.com/paused=true).
    Pause {
        #[command(flatten)]
        target: Target,
    },
    /// Lift a pause.
    Resume {
        #[command(flatten)]
        target: Target,
    },
    /// Start a pass now (terdut.ryuvia.com/reconcile-requested-at=<now>).
    Reconcile {
        #[command(flatten)]
        target: Target,
    },
    /// A shell completion script (`kubectl`: the kubectl_complete-terdut executable kubectl
    /// runs for `kubectl terdut <TAB>`).
    Completion {
        #[arg(value_enum)]
        shell: Shell,
    },
    /// Candidates for the words typed so far, in Cobra's format (kubectl_complete-terdut).
    #[command(name = "__complete", hide = true)]
    Complete {
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        words: Vec<String>,
    },
}

#[derive(Debug, Subcommand)]
pub enum Rotate {
    /// New webhook key for a TerdutAlertSource (terdut.ryuvia.com/rotate-webhook-key).
    Source {
        name: String,
        /// Do not ask.
        #[arg(short, long)]
        yes: bool,
    },
    /// New operator key for a TerdutServer (deletes <name>-operator-key; the pods roll).
    ServerKey {
        name: String,
        /// Do not ask.
        #[arg(short, long)]
        yes: bool,
    },
}

/// `KIND/NAME`, or `KIND NAME`.
#[derive(Debug, Args)]
pub struct Target {
    /// KIND/NAME (kind: server|tds, team|tdt, source|tdas), or KIND followed by NAME.
    pub kind_or_target: String,
    pub name: Option<String>,
}

impl Target {
    pub fn resolve(&self) -> Result<KindName, String> {
        match &self.name {
            Some(name) => Ok(KindName {
                kind: self.kind_or_target.parse::<Kind>()?,
                name: name.clone(),
            }),
            None => self.kind_or_target.parse(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory as _;

    #[test]
    fn the_command_line_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn both_spellings_of_a_target() {
        let cli =
            Cli::try_parse_from(["kubectl-terdut", "why", "tdt", "payments", "-n", "x"]).unwrap();
        let Command::Why { target, .. } = cli.command else {
            panic!()
        };
        assert_eq!(target.resolve().unwrap().name, "payments");
        assert_eq!(cli.namespace.as_deref(), Some("x"));
        let cli =
            Cli::try_parse_from(["kubectl-terdut", "-n", "x", "pause", "team/payments"]).unwrap();
        let Command::Pause { target } = cli.command else {
            panic!()
        };
        assert_eq!(target.resolve().unwrap().kind, Kind::Team);
    }

    #[test]
    fn status_takes_an_output_format() {
        let cli = Cli::try_parse_from(["kubectl-terdut", "status", "-A", "-o", "yaml"]).unwrap();
        let Command::Status { output, .. } = cli.command else {
            panic!()
        };
        assert_eq!(output, Some(crate::output::Format::Yaml));
        assert!(Cli::try_parse_from(["kubectl-terdut", "status", "-o", "wide"]).is_err());
        // The hidden completion entry takes whatever was typed, flags included.
        let cli =
            Cli::try_parse_from(["kubectl-terdut", "__complete", "status", "-o", ""]).unwrap();
        let Command::Complete { words } = cli.command else {
            panic!()
        };
        assert_eq!(words, ["status", "-o", ""]);
    }
}

/// What `completion` prints.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Shell {
    Bash,
    Zsh,
    Fish,
    Powershell,
    /// The `kubectl_complete-terdut` executable kubectl runs for `kubectl terdut <TAB>`.
    Kubectl,
}
