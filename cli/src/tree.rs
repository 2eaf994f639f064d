//! Server → teams → alert sources, from an [`Inventory`]. Pure: the same inventory always
//! gives the same tree, sorted by namespace and name. A team whose server is not there still
//! appears, under a placeholder for that server; a source whose team is not there likewise.

use crate::collect::Inventory;
use crate::view::{ServerView, SourceView, TeamView};

#[derive(Clone, Debug, PartialEq)]
pub struct Tree {
    pub servers: Vec<ServerNode>,
    /// Sources whose TerdutTeam is not in the inventory, by (namespace, team name).
    pub lost_sources: Vec<((String, String), Vec<SourceView>)>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct ServerNode {
    /// (namespace, name) the teams name.
    pub key: (String, String),
    /// None when no such TerdutServer could be read.
    pub server: Option<ServerView>,
    pub teams: Vec<TeamNode>,
}

#[derive(Clone, Debug, PartialEq)]
pub struct TeamNode {
    pub team: TeamView,
    pub sources: Vec<SourceView>,
}

pub fn build(inv: Inventory) -> Tree {
    let Inventory {
        mut servers,
        mut teams,
        mut sources,
    } = inv;
    servers.sort_by_key(|s| s.common.key());
    teams.sort_by_key(|t| t.common.key());
    sources.sort_by_key(|s| s.common.key());

    let mut nodes: Vec<ServerNode> = servers
        .into_iter()
        .map(|s| ServerNode {
            key: s.common.key(),
            server: Some(s),
            teams: vec![],
        })
        .collect();
    let mut team_nodes: Vec<TeamNode> = teams
        .into_iter()
        .map(|team| TeamNode {
            team,
            sources: vec![],
        })
        .collect();

    let mut lost_sources: Vec<((String, String), Vec<SourceView>)> = vec![];
    for source in sources {
        let team_key = (source.common.namespace.clone(), source.team.clone());
        if let Some(t) = team_nodes
            .iter_mut()
            .find(|t| t.team.common.key() == team_key)
        {
            t.sources.push(source);
        } else if let Some((_, list)) = lost_sources.iter_mut().find(|(k, _)| *k == team_key) {
            list.push(source);
        } else {
            lost_sources.push((team_key, vec![source]));
        }
    }

    for team in team_nodes {
        match nodes.iter_mut().find(|n| n.key == team.team.server) {
            Some(n) => n.teams.push(team),
            None => nodes.push(ServerNode {
                key: team.team.server.clone(),
                server: None,
                teams: vec![team],
            }),
        }
    }
    nodes.sort_by(|a, b| a.key.cmp(&b.key));
    Tree {
        servers: nodes,
        lost_sources,
    }
}
