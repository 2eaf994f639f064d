//! Reads what `status` shows from the apiserver: the three kinds in a scope, plus the two
//! things that are not on the objects themselves: a server outside the scope that a team in it
//! names, and each server's key fingerprint.

use anyhow::Context as _;
use k8s_openapi::api::apps::v1::Deployment;
use kube::api::ListParams;
use kube::{Api, Client};

use crate::kinds::Kind;
use crate::view::{ServerView, SourceView, TeamView};

/// The pod-template annotation of a server's Deployment: a 16-hex truncated SHA-256 of the
/// operator key (never the key). Read only when the server's status carries no fingerprint.
pub const KEY_HASH_ANNOTATION: &str = "terdut.ryuvia.com/operator-key-hash";

/// Where to look: one namespace, or all (`-A`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Scope {
    Namespace(String),
    All,
}

impl Scope {
    fn namespace(&self) -> Option<&str> {
        match self {
            Scope::Namespace(ns) => Some(ns),
            Scope::All => None,
        }
    }
}

/// Everything in a scope.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Inventory {
    pub servers: Vec<ServerView>,
    pub teams: Vec<TeamView>,
    pub sources: Vec<SourceView>,
}

pub async fn inventory(client: &Client, scope: &Scope) -> anyhow::Result<Inventory> {
    let list = |kind: Kind| {
        let api = kind.api(client, scope.namespace());
        async move {
            api.list(&ListParams::default())
                .await
                .with_context(|| format!("listing {}", kind.plural()))
        }
    };
    let (servers, teams, sources) =
        tokio::try_join!(list(Kind::Server), list(Kind::Team), list(Kind::Source))?;
    let mut inv = Inventory {
        servers: servers.items.iter().map(ServerView::of).collect(),
        teams: teams.items.iter().map(TeamView::of).collect(),
        sources: sources.items.iter().map(SourceView::of).collect(),
    };
    // A team may name a server in another namespace (by consent); show that server when the
    // user may read it, else the tree says it could not be read.
    let mut outside: Vec<(String, String)> = inv
        .teams
        .iter()
        .map(|t| t.server.clone())
        .filter(|k| !inv.servers.iter().any(|s| &s.common.key() == k))
        .collect();
    outside.sort();
    outside.dedup();
    for (ns, name) in outside {
        if let Ok(Some(obj)) = Kind::Server.api(client, Some(&ns)).get_opt(&name).await {
            inv.servers.push(ServerView::of(&obj));
        }
    }
    for server in &mut inv.servers {
        if server.key_fingerprint.is_none() {
            server.key_fingerprint = deployment_fingerprint(client, server).await;
        }
    }
    Ok(inv)
}

/// The key-hash annotation of the server's own Deployment (same name, controlled by the
/// server): a Deployment someone else made carries no fingerprint of this server's key.
async fn deployment_fingerprint(client: &Client, server: &ServerView) -> Option<String> {
    let api: Api<Deployment> = Api::namespaced(client.clone(), &server.common.namespace);
    let deploy = api.get_opt(&server.common.name).await.ok()??;
    let owned = deploy
        .metadata
        .owner_references
        .iter()
        .flatten()
        .any(|o| o.controller == Some(true) && o.uid == server.common.uid);
    if !owned {
        return None;
    }
    deploy
        .spec
        .template
        .metadata?
        .annotations?
        .get(KEY_HASH_ANNOTATION)
        .cloned()
}
