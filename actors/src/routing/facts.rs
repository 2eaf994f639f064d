//! What routing reads of each object (PURE): the few facts the index decides on, so it never
//! holds the objects themselves.

use kube::ResourceExt;
use terdut_crds::v1alpha1::{TerdutAlertSource, TerdutServer, TerdutTeam};

use super::index::{ServerFacts, SourceFacts, TeamFacts};
use crate::server::observe::team_server_key;

pub fn server_facts(server: &TerdutServer) -> ServerFacts {
    ServerFacts {
        uid: server.metadata.uid.clone(),
        generation: server.metadata.generation,
        deleting: server.metadata.deletion_timestamp.is_some(),
        allowed: server.spec.allowed_teams.clone(),
    }
}

pub fn team_facts(team: &TerdutTeam) -> TeamFacts {
    let status = team.status.as_ref();
    TeamFacts {
        server: team_server_key(team),
        ready: status.is_some_and(|s| terdut_crds::v1alpha1::conditions::is_ready(&s.conditions)),
        team_id: status.and_then(|s| s.team_id),
        deleting: team.metadata.deletion_timestamp.is_some(),
        paused: crate::pipeline::paused_by_annotation(team),
        resource_version: team.resource_version(),
    }
}

pub fn source_facts(source: &TerdutAlertSource) -> SourceFacts {
    SourceFacts {
        team: source.spec.team_ref.name.clone(),
        resource_version: source.resource_version(),
    }
}
