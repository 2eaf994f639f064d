//! `kubectl terdut`, as a library: `main.rs` only parses the command line, builds the client
//! and asks for confirmations; [`run`] does the rest and returns the text to print, so the
//! tests drive exactly what a user runs against a real apiserver (docs/cli.md).

pub mod actions;
pub mod age;
pub mod args;
pub mod collect;
pub mod escape;
pub mod kinds;
pub mod runbook;
pub mod status;
pub mod table;
pub mod tree;
pub mod view;
pub mod why;

use anyhow::Context as _;
use k8s_openapi::jiff::Timestamp;
use kube::Client;
use kube::config::{KubeConfigOptions, Kubeconfig};

pub use args::{Cli, Command, Rotate};
pub use collect::Scope;

/// A client for the kubeconfig and context the command line names; its default namespace is
/// the context's (kubectl's rule).
pub async fn client(cli: &Cli) -> anyhow::Result<Client> {
    let options = KubeConfigOptions {
        context: cli.context.clone(),
        ..Default::default()
    };
    let config = match &cli.kubeconfig {
        Some(path) => {
            let kc = Kubeconfig::read_from(path)
                .with_context(|| format!("reading {}", path.display()))?;
            kube::Config::from_custom_kubeconfig(kc, &options).await?
        }
        None if cli.context.is_some() => kube::Config::from_kubeconfig(&options).await?,
        None => kube::Config::infer().await?,
    };
    Ok(Client::try_from(config)?)
}

/// Runs one command; `confirm` is asked before a rotation.
pub async fn run(
    client: &Client,
    cli: &Cli,
    now: Timestamp,
    confirm: actions::Confirm<'_>,
) -> anyhow::Result<String> {
    let ns = cli
        .namespace
        .clone()
        .unwrap_or_else(|| client.default_namespace().to_owned());
    let target = |t: &args::Target| t.resolve().map_err(anyhow::Error::msg);
    match &cli.command {
        Command::Status { all_namespaces } => {
            let scope = if *all_namespaces {
                Scope::All
            } else {
                Scope::Namespace(ns)
            };
            let inv = collect::inventory(client, &scope).await?;
            Ok(status::render(&tree::build(inv), now))
        }
        Command::Why { target: t, events } => {
            let t = target(t)?;
            let why = why::collect(client, &ns, &t).await?;
            Ok(why::render(t.kind, &why, *events, now))
        }
        Command::Rotate { what } => match what {
            Rotate::Source { name, yes } => {
                let mut ok = |q: &str| *yes || confirm(q);
                actions::rotate_source(client, &ns, name, now, &mut ok).await
            }
            Rotate::ServerKey { name, yes } => {
                let mut ok = |q: &str| *yes || confirm(q);
                actions::rotate_server_key(client, &ns, name, &mut ok).await
            }
        },
        Command::Pause { target: t } => actions::pause(client, &ns, &target(t)?).await,
        Command::Resume { target: t } => actions::resume(client, &ns, &target(t)?).await,
        Command::Reconcile { target: t } => actions::reconcile(client, &ns, &target(t)?, now).await,
    }
    .map(|s| {
        // Each renderer escapes the fields it prints; this catches any text that reached
        // the output another way (`escape.rs`).
        let mut s = escape::output(&s).into_owned();
        if !s.ends_with('\n') {
            s.push('\n');
        }
        s
    })
}
