//! `kubectl terdut`, as a library: `main.rs` only parses the command line, builds the client
//! and asks for confirmations; [`run`] does the rest and returns the text to print, so the
//! tests drive exactly what a user runs against a real apiserver (docs/cli.md).

pub mod actions;
pub mod age;
pub mod args;
pub mod collect;
pub mod complete;
pub mod escape;
pub mod kinds;
pub mod output;
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

/// The candidates for `__complete`: the plan, with object names read from the cluster (none when
/// it cannot be read: completion never fails loudly).
async fn completions(client: &Client, cli: &Cli, words: &[String]) -> String {
    match complete::plan(words) {
        complete::Want::Words(list, directive) => complete::cobra(&list, directive),
        complete::Want::Objects {
            kind,
            namespace,
            prefix,
            lead,
        } => {
            let ns = namespace
                .or_else(|| cli.namespace.clone())
                .unwrap_or_else(|| client.default_namespace().to_owned());
            let names = kind
                .api(client, Some(&ns))
                .list_metadata(&kube::api::ListParams::default())
                .await
                .map(|l| l.items)
                .unwrap_or_default();
            let list: Vec<String> = names
                .into_iter()
                .filter_map(|o| o.metadata.name)
                .filter(|n| n.starts_with(&prefix))
                .map(|n| format!("{lead}{n}"))
                .collect();
            complete::cobra(&list, 4)
        }
    }
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
        Command::Status {
            all_namespaces,
            output,
        } => {
            let scope = if *all_namespaces {
                Scope::All
            } else {
                Scope::Namespace(ns)
            };
            let inv = collect::inventory(client, &scope).await?;
            let tree = tree::build(inv);
            match output {
                None => Ok(status::render(&tree, now)),
                Some(format) => output::render(&tree, *format),
            }
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
        Command::Completion { shell } => Ok(complete::script(*shell)),
        Command::Complete { words } => Ok(completions(client, cli, words).await),
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
