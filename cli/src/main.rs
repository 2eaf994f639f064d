//! `kubectl-terdut`: the command line, the client and the confirmation prompt; everything
//! else is the library (src/lib.rs).

use std::io::{BufRead as _, IsTerminal as _, Write as _};

use clap::Parser as _;
use kubectl_terdut::Cli;

/// Asks on the terminal; without one (a script, CI) the answer is no: pass `--yes`.
fn confirm(question: &str) -> bool {
    let stdin = std::io::stdin();
    if !stdin.is_terminal() {
        eprintln!("{question}\nNot a terminal: pass --yes to confirm.");
        return false;
    }
    eprint!("{question} [y/N] ");
    let _ = std::io::stderr().flush();
    let mut answer = String::new();
    if stdin.lock().read_line(&mut answer).is_err() {
        return false;
    }
    matches!(answer.trim(), "y" | "Y" | "yes")
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> std::process::ExitCode {
    let cli = Cli::parse();
    // A completion script, and completion of anything but object names, need no cluster.
    match &cli.command {
        kubectl_terdut::Command::Completion { shell } => {
            print!("{}", kubectl_terdut::complete::script(*shell));
            return std::process::ExitCode::SUCCESS;
        }
        kubectl_terdut::Command::Complete { words } => {
            use kubectl_terdut::complete::{Want, cobra, plan};
            if let Want::Words(list, directive) = plan(words) {
                print!("{}", cobra(&list, directive));
                return std::process::ExitCode::SUCCESS;
            }
        }
        _ => {}
    }
    let result = async {
        let client = kubectl_terdut::client(&cli).await?;
        let now = k8s_openapi::jiff::Timestamp::now();
        kubectl_terdut::run(&client, &cli, now, &mut confirm).await
    }
    .await;
    match result {
        Ok(out) => {
            print!("{out}");
            std::process::ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::ExitCode::FAILURE
        }
    }
}
