//! The reads of a TerdutTeam pass: the three GETs that show drift (see `plan.rs` for why a GET
//! and not the idempotent POST). The ladder and switches are read concurrently.

use crate::api::{ApiError, Id, Team, TerdutClient};

use super::plan::Observed;

/// The team with id `team_id` as the server has it, with its ladder and switches; `None`
/// when there is no such team, or it is another one (another `external_id`: the server's
/// database was replaced and the id reused). Then only the POST can tell.
pub async fn known_team(
    client: &TerdutClient,
    team_id: Id,
    external_id: &str,
) -> Result<Option<Observed>, ApiError> {
    let team = match client.get_team(team_id).await {
        Ok(t) if t.external_id == external_id => t,
        Ok(_) | Err(ApiError::NotFound) => return Ok(None),
        Err(e) => return Err(e),
    };
    rest(client, team).await.map(Some)
}

/// The ladder and switches of `team`, e.g. one the POST found by its `external_id`.
pub async fn rest(client: &TerdutClient, team: Team) -> Result<Observed, ApiError> {
    let (ladder, switches) = tokio::try_join!(
        client.get_escalation(team.id),
        client.list_switches(team.id)
    )?;
    Ok(Observed {
        team,
        ladder,
        switches,
    })
}

/// A team the POST just created (201): nothing on it yet, so nothing to read.
pub fn fresh(team: Team) -> Observed {
    Observed {
        team,
        ladder: None,
        switches: vec![],
    }
}
