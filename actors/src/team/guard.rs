//! Whether this TerdutTeam made the team the server has under its `external_id` (ADR 0013,
//! which supersedes ADR 0007). PURE; every path of a pass that reaches an existing team asks
//! it: the create-or-find POST answered 200, the GET of a known id (from status, which the
//! tenant writes, or the actor's memory), and the deletion's lookup.
//!
//! The evidence is the operator's record (`records.rs`): before the first create call for an
//! object the operator writes the object's uid into ConfigMaps of its own namespace, which no
//! tenant can write, and a uid is the API server's, never the tenant's choice. What the tenant
//! writes (`status.teamID`, the finalizer, labels, annotations) proves nothing, except for
//! objects made before those records existed (an upgrade), judged once by the rule they were
//! made under and recorded from then on.

use crate::api::Id;

/// How the pass reached the team.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reached {
    /// The POST created it just now (201): certainly this object's.
    Created,
    /// The POST found it by `external_id` (200).
    Found,
    /// A GET of a known id found a team with this object's `external_id`.
    ById,
}

/// What the operator recorded of this object (by uid) before this pass.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Record {
    /// Nothing: the operator never sent a create call for it.
    None,
    /// A create call was sent for it (the record is written before the first one): the team
    /// with its `external_id` is the one that call made, whether its answer arrived or not.
    Made,
    /// Made before the records existed and judged then not to have made the team found.
    Declined,
}

/// What an object made before the records existed shows, as ADR 0007 read it: a known id
/// that still names a team of its `external_id` (reached [`Reached::ById`]), or one that is gone,
/// or the operator's finalizer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Legacy {
    /// It carried the operator's finalizer before this pass.
    pub had_finalizer: bool,
    /// Its status named a team id whose team is gone.
    pub lost_id: bool,
}

/// Everything the judgement reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Evidence {
    pub reached: Reached,
    /// The team's id on the server.
    pub team: Id,
    /// The record as it was before this pass wrote anything.
    pub record: Record,
    /// `Some` only for an object created before the records existed and never judged.
    pub legacy: Option<Legacy>,
    /// The id the adopt annotation names, if it parses.
    pub opt_in: Option<Id>,
}

/// The judgement.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Judgement {
    /// This object's team: go on silently.
    Ours,
    /// Not made by this object, but the adopt annotation names exactly this team: take it
    /// over, with a Warning, and record it as this object's.
    Adopt,
    /// Not this object's: change nothing on it (`Adopted`).
    Decline,
}

/// See the module doc. In order: a team just created, or one a recorded create call made, is
/// ours; an object made before the records is judged by ADR 0007's rule once; the opt-in for
/// exactly this team adopts it; anything else declines.
pub fn judge(e: &Evidence) -> Judgement {
    if e.reached == Reached::Created || e.record == Record::Made {
        return Judgement::Ours;
    }
    if e.record == Record::None
        && let Some(l) = e.legacy
        && (e.reached == Reached::ById || l.had_finalizer || l.lost_id)
    {
        return Judgement::Ours;
    }
    if e.opt_in == Some(e.team) {
        return Judgement::Adopt;
    }
    Judgement::Decline
}

/// PURE: what the records keep of an object after a pass declined the team it reached
/// (`before`: its record before the pass). An object older than the records (`legacy`, or
/// judged so before: `Declined`) keeps its judgement, so a finalizer or status it shows later
/// never reopens it; any other object keeps no record (it made nothing).
pub fn kept_after_decline(before: Record, legacy: bool) -> Record {
    if legacy || before == Record::Declined {
        Record::Declined
    } else {
        Record::None
    }
}

/// The id an adopt annotation's value names: a plain decimal id, nothing else.
pub fn opt_in(annotation: Option<&str>) -> Option<Id> {
    let v = annotation?.trim();
    if v.is_empty() || !v.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    v.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn evidence(reached: Reached, record: Record) -> Evidence {
        Evidence {
            reached,
            team: 42,
            record,
            legacy: None,
            opt_in: None,
        }
    }

    #[test]
    fn a_team_just_created_or_made_by_a_recorded_create_is_ours() {
        for record in [Record::None, Record::Made, Record::Declined] {
            assert_eq!(judge(&evidence(Reached::Created, record)), Judgement::Ours);
        }
        // The answer to the create that made it was lost (a crash, a timeout): found later.
        assert_eq!(
            judge(&evidence(Reached::Found, Record::Made)),
            Judgement::Ours
        );
        assert_eq!(
            judge(&evidence(Reached::ById, Record::Made)),
            Judgement::Ours
        );
    }

    #[test]
    fn what_a_tenant_writes_proves_nothing() {
        // A forged status.teamID (reached by id), a self-added finalizer (no legacy: made after
        // the records existed), a reused namespace/name (found by the POST): all decline.
        for reached in [Reached::Found, Reached::ById] {
            assert_eq!(judge(&evidence(reached, Record::None)), Judgement::Decline);
        }
    }

    #[test]
    fn only_an_opt_in_naming_exactly_this_team_adopts_it() {
        let mut e = evidence(Reached::Found, Record::None);
        e.opt_in = Some(7);
        assert_eq!(judge(&e), Judgement::Decline, "another team's id");
        e.opt_in = Some(42);
        assert_eq!(judge(&e), Judgement::Adopt);
        e.reached = Reached::ById;
        assert_eq!(judge(&e), Judgement::Adopt);
    }

    #[test]
    fn an_object_older_than_the_records_is_judged_once_by_the_old_rule() {
        let mut e = evidence(Reached::Found, Record::None);
        for (had_finalizer, lost_id, want) in [
            (true, false, Judgement::Ours),
            (false, true, Judgement::Ours),
            (false, false, Judgement::Decline),
        ] {
            e.legacy = Some(Legacy {
                had_finalizer,
                lost_id,
            });
            assert_eq!(judge(&e), want, "{had_finalizer} {lost_id}");
        }
        // A known id that still names a team of its external_id was what ADR 0007 trusted.
        e.legacy = Some(Legacy {
            had_finalizer: false,
            lost_id: false,
        });
        e.reached = Reached::ById;
        assert_eq!(judge(&e), Judgement::Ours);
        // Once judged not ours, its finalizer or status written later proves nothing.
        e.record = Record::Declined;
        e.legacy = Some(Legacy {
            had_finalizer: true,
            lost_id: true,
        });
        assert_eq!(judge(&e), Judgement::Decline);
    }

    #[test]
    fn a_declined_old_object_stays_declined_at_every_later_pass() {
        // First judged: older than the records, not ours.
        assert_eq!(kept_after_decline(Record::None, true), Record::Declined);
        // Every later pass reaches it with that record (and no legacy evidence any more):
        // the judgement stays, or the pass after would judge it by the old rule again.
        assert_eq!(
            kept_after_decline(Record::Declined, false),
            Record::Declined
        );
        // An object made after the records made nothing: nothing is kept.
        assert_eq!(kept_after_decline(Record::None, false), Record::None);
    }

    #[test]
    fn the_opt_in_is_a_plain_id() {
        assert_eq!(opt_in(Some("42")), Some(42));
        assert_eq!(opt_in(Some(" 42 ")), Some(42));
        for bad in ["", "-1", "4 2", "0x2a", "42a", "99999999999999999999"] {
            assert_eq!(opt_in(Some(bad)), None, "{bad:?}");
        }
        assert_eq!(opt_in(None), None);
    }
}
