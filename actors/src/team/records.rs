//! The operator's record of which TerdutTeams it sent a create call for (ADR 0013): the
//! evidence of [`super::guard`], kept where no tenant can write, the operator's own namespace.
//!
//! **Layout.** [`SHARDS`] ConfigMaps `terdut-team-records-<h>` (`h` the first hex character of
//! the object's uid, which the API server chooses at random), labelled
//! `terdut.ryuvia.com/records=teams`; one data key per object: its uid, valued `made <ns>/<name>`
//! (a create call was sent for it; written before the first one) or `declined <ns>/<name>` (an
//! object made before the records existed, judged once not to have made the team found). At
//! ~90 bytes an entry, 10,000 teams are ~56 KB a ConfigMap; ~150,000 fit under the 1 MiB limit.
//!
//! **Memory.** Loaded once, on the first question, into a map of 64-bit uid hashes (19-39 bytes
//! a team, ADR 0013 and 0005), then kept in step by this process's own writes: only this operator (and
//! other instances sharing its namespace, see below) writes them. A removal or a decline is
//! made in memory before it is written, so a write that fails never leaves this process
//! trusting a record it meant to take back.
//!
//! **Instances sharing the namespace** (shards, docs/configuration.md "Sharding") share the
//! records, so an object relabelled into another shard is still known there: a question the
//! map cannot answer re-reads that object's ConfigMap once before the answer is "never
//! recorded", unless no instance can have recorded the object yet (a new object's first
//! create: [`may_be_recorded_elsewhere`]).
//!
//! **Writes** are merge patches of single keys, so writers never conflict; the writes of one
//! ConfigMap are queued and sent together (one request carries everything queued meanwhile),
//! so a cold start of thousands of teams costs far fewer requests than teams.
//!
//! **Before the records existed** (an upgrade): the ConfigMaps are made on the first load, and
//! an object created before them is judged by ADR 0007's rule once (`guard::Legacy`), then
//! recorded. Deleting all of them makes every existing object such an object again.

use std::collections::BTreeMap;
use std::sync::Mutex;

use dashmap::DashMap;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, ListParams, ObjectMeta, Patch, PatchParams, PostParams};
use serde_json::json;
use tokio::sync::{OnceCell, oneshot};

use super::guard::Record;
use crate::error::{KubeCall, ReconcileError};
use crate::key::ObjectKey;
use crate::names::FIELD_MANAGER;

/// How many ConfigMaps hold the records: one per hex character a uid can start with.
pub const SHARDS: usize = 16;
/// The label every records ConfigMap carries (`terdut.ryuvia.com/records=teams`).
pub const LABEL: &str = "terdut.ryuvia.com/records";
pub const LABEL_VALUE: &str = "teams";
const NAME_PREFIX: &str = "terdut-team-records-";
const MADE: &str = "made";
const DECLINED: &str = "declined";

/// The name of the ConfigMap holding `uid`'s record.
pub fn shard_name(uid: &str) -> String {
    format!("{NAME_PREFIX}{:x}", shard_of(uid))
}

fn shard_of(uid: &str) -> usize {
    uid.bytes()
        .next()
        .and_then(|b| (b as char).to_digit(16))
        .map_or(0, |d| d as usize)
}

/// PURE: a record's value, as written.
pub fn value(record: Record, key: &ObjectKey) -> Option<String> {
    match record {
        Record::None => None,
        Record::Made => Some(format!("{MADE} {key}")),
        Record::Declined => Some(format!("{DECLINED} {key}")),
    }
}

/// PURE: what a value read back says (anything else, e.g. edited by hand, is no record).
pub fn parse(value: &str) -> Record {
    match value.split_once(' ').map_or(value, |(word, _)| word) {
        MADE => Record::Made,
        DECLINED => Record::Declined,
        _ => Record::None,
    }
}

/// PURE: whether another instance sharing the records (a shard that handed the object over)
/// may have recorded an object this process has no record of. `Made` is written only after
/// the operator's finalizer is on the object (the driver adds it before any call that can
/// create a team), and `Declined` only for an object older than the records, whose finalizer
/// the decline releases. So an object created after the records that never carried the
/// finalizer has no record anywhere. A tenant who removes the finalizer from a recorded object
/// and moves it to another shard is answered "no record": its pass declines the team it finds
/// (`Adopted`), the safe side, and the adopt annotation takes it back.
pub fn may_be_recorded_elsewhere(had_finalizer: bool, older_than_records: bool) -> bool {
    had_finalizer || older_than_records
}

/// 64-bit hash of a uid (SipHash with fixed keys: stable within and across processes).
fn uid_hash(uid: &str) -> u64 {
    use std::hash::{Hash as _, Hasher as _};
    let mut h = std::hash::DefaultHasher::new();
    uid.hash(&mut h);
    h.finish()
}

/// What the first load found.
struct Loaded {
    /// When the records were first made (the oldest ConfigMap's creation): objects created
    /// before were made under ADR 0007.
    since: Option<Timestamp>,
    index: DashMap<u64, Record>,
}

/// One queued write of one ConfigMap.
struct Pending {
    uid: String,
    value: Option<String>,
    done: oneshot::Sender<Result<(), String>>,
}

#[derive(Default)]
struct Shard {
    queue: Mutex<Vec<Pending>>,
    writer: tokio::sync::Mutex<()>,
}

/// The records, shared by every team pass (`Ctx::records`).
pub struct TeamRecords {
    kube: kube::Client,
    namespace: String,
    loaded: OnceCell<Loaded>,
    shards: [Shard; SHARDS],
}

impl std::fmt::Debug for TeamRecords {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TeamRecords")
            .field("namespace", &self.namespace)
            .finish_non_exhaustive()
    }
}

impl TeamRecords {
    /// The records in `namespace` (the operator's own); nothing is read until the first
    /// question.
    pub fn new(kube: kube::Client, namespace: impl Into<String>) -> Self {
        Self {
            kube,
            namespace: namespace.into(),
            loaded: OnceCell::new(),
            shards: Default::default(),
        }
    }

    fn api(&self) -> Api<ConfigMap> {
        Api::namespaced(self.kube.clone(), &self.namespace)
    }

    fn what(&self) -> String {
        format!("the team records in namespace {}", self.namespace)
    }

    async fn loaded(&self) -> Result<&Loaded, ReconcileError> {
        self.loaded.get_or_try_init(|| self.load()).await
    }

    async fn load(&self) -> Result<Loaded, ReconcileError> {
        let api = self.api();
        let lp = ListParams::default().labels(&format!("{LABEL}={LABEL_VALUE}"));
        let mut list = api
            .list(&lp)
            .await
            .map_err(|e| ReconcileError::kube(KubeCall::ListRecords, self.what(), e))?;
        if list.items.is_empty() {
            // The first start with records: make every ConfigMap, so their creation says
            // from when on objects are recorded.
            for shard in 0..SHARDS {
                let name = format!("{NAME_PREFIX}{shard:x}");
                match api.create(&PostParams::default(), &empty(&name)).await {
                    Ok(_) => {}
                    Err(kube::Error::Api(e)) if e.code == 409 => {}
                    Err(e) => {
                        return Err(ReconcileError::kube(
                            KubeCall::CreateRecords,
                            self.what(),
                            e,
                        ));
                    }
                }
            }
            list = api
                .list(&lp)
                .await
                .map_err(|e| ReconcileError::kube(KubeCall::ListRecords, self.what(), e))?;
        }
        let since = list
            .items
            .iter()
            .filter_map(|c| c.metadata.creation_timestamp.as_ref().map(|t| t.0))
            .min();
        let index = DashMap::new();
        for cm in &list.items {
            for (uid, v) in cm.data.iter().flatten() {
                let record = parse(v);
                if record != Record::None {
                    index.insert(uid_hash(uid), record);
                }
            }
        }
        tracing::info!(namespace = %self.namespace, records = index.len(), "team records loaded");
        Ok(Loaded { since, index })
    }

    /// What is recorded for the object `uid`: the map, and on a miss the ConfigMap read again
    /// (another instance sharing the namespace may have recorded it).
    pub async fn get(&self, uid: &str) -> Result<Record, ReconcileError> {
        let loaded = self.loaded().await?;
        let h = uid_hash(uid);
        if let Some(r) = loaded.index.get(&h) {
            return Ok(*r);
        }
        let cm = self
            .api()
            .get_opt(&shard_name(uid))
            .await
            .map_err(|e| ReconcileError::kube(KubeCall::ReadRecord, self.what(), e))?;
        let record = cm
            .and_then(|c| c.data)
            .and_then(|d| d.get(uid).map(|v| parse(v)))
            .unwrap_or(Record::None);
        if record != Record::None {
            loaded.index.entry(h).or_insert(record);
        }
        Ok(record)
    }

    /// What is recorded for the object `uid` before its first create call in this process
    /// (`had_finalizer`: it carried the operator's finalizer when the pass read it; `created`:
    /// its creation). Only an object [`may_be_recorded_elsewhere`] can have a record this map
    /// lacks, so only its miss reads the ConfigMap again ([`Self::get`]); a new object's miss is
    /// the answer, which spares every new team of a cold start one GET (ADR 0013, "Reads").
    pub async fn get_before_create(
        &self,
        uid: &str,
        had_finalizer: bool,
        created: Option<Timestamp>,
    ) -> Result<Record, ReconcileError> {
        if may_be_recorded_elsewhere(had_finalizer, self.older_than_records(created).await?) {
            return self.get(uid).await;
        }
        let loaded = self.loaded().await?;
        Ok(loaded
            .index
            .get(&uid_hash(uid))
            .map_or(Record::None, |r| *r))
    }

    /// Whether an object created at `created` was made before the records existed.
    pub async fn older_than_records(
        &self,
        created: Option<Timestamp>,
    ) -> Result<bool, ReconcileError> {
        let loaded = self.loaded().await?;
        Ok(matches!((created, loaded.since), (Some(c), Some(s)) if c < s))
    }

    /// Records that a create call is about to be sent for the object `uid` (`key`), or that it
    /// adopted its team: durable before this returns, so the call may go out.
    pub async fn made(&self, uid: &str, key: &ObjectKey) -> Result<(), ReconcileError> {
        let loaded = self.loaded().await?;
        if loaded.index.get(&uid_hash(uid)).as_deref() == Some(&Record::Made) {
            return Ok(());
        }
        self.write(uid, value(Record::Made, key)).await?;
        loaded.index.insert(uid_hash(uid), Record::Made);
        Ok(())
    }

    /// Records that an object made before the records did not make the team it found.
    pub async fn declined(&self, uid: &str, key: &ObjectKey) -> Result<(), ReconcileError> {
        let loaded = self.loaded().await?;
        if loaded.index.insert(uid_hash(uid), Record::Declined) == Some(Record::Declined) {
            return Ok(());
        }
        self.write(uid, value(Record::Declined, key)).await
    }

    /// Forgets the object `uid`: it is gone, or the create call it was recorded for found
    /// another object's team. In memory first (see the module doc).
    pub async fn forget(&self, uid: &str) -> Result<(), ReconcileError> {
        let loaded = self.loaded().await?;
        if loaded.index.remove(&uid_hash(uid)).is_none() {
            return Ok(());
        }
        self.write(uid, None).await
    }

    /// Writes one key of one ConfigMap, with whatever else is queued for it (see the module
    /// doc).
    async fn write(&self, uid: &str, value: Option<String>) -> Result<(), ReconcileError> {
        let shard = &self.shards[shard_of(uid)];
        let (done, answer) = oneshot::channel();
        shard
            .queue
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(Pending {
                uid: uid.to_owned(),
                value,
                done,
            });
        {
            let _writing = shard.writer.lock().await;
            let batch = std::mem::take(
                &mut *shard
                    .queue
                    .lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner),
            );
            if !batch.is_empty() {
                let data: BTreeMap<&str, Option<&str>> = batch
                    .iter()
                    .map(|p| (p.uid.as_str(), p.value.as_deref()))
                    .collect();
                let result = self
                    .send(&shard_name(uid), &data)
                    .await
                    .map_err(|e| e.to_string());
                for p in batch {
                    let _ = p.done.send(result.clone());
                }
            }
        }
        match answer.await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(e)) => Err(ReconcileError::Records(format!(
                "writing {} failed: {e}",
                self.what()
            ))),
            Err(_) => Err(ReconcileError::Records(format!(
                "writing {} was interrupted",
                self.what()
            ))),
        }
    }

    async fn send(
        &self,
        name: &str,
        data: &BTreeMap<&str, Option<&str>>,
    ) -> Result<(), ReconcileError> {
        let api = self.api();
        let patch = json!({ "data": data });
        match api
            .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => Ok(()),
            // Someone deleted it: make it again with what this write holds.
            Err(kube::Error::Api(e)) if e.code == 404 => {
                let mut cm = empty(name);
                cm.data = Some(
                    data.iter()
                        .filter_map(|(k, v)| v.map(|v| ((*k).to_owned(), v.to_owned())))
                        .collect(),
                );
                match api.create(&PostParams::default(), &cm).await {
                    Ok(_) => Ok(()),
                    Err(kube::Error::Api(e)) if e.code == 409 => api
                        .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
                        .await
                        .map(|_| ())
                        .map_err(|e| ReconcileError::kube(KubeCall::WriteRecord, self.what(), e)),
                    Err(e) => Err(ReconcileError::kube(
                        KubeCall::CreateRecords,
                        self.what(),
                        e,
                    )),
                }
            }
            Err(e) => Err(ReconcileError::kube(KubeCall::WriteRecord, self.what(), e)),
        }
    }
}

fn empty(name: &str) -> ConfigMap {
    ConfigMap {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            labels: Some(BTreeMap::from([
                (LABEL.to_owned(), LABEL_VALUE.to_owned()),
                (
                    "app.kubernetes.io/managed-by".to_owned(),
                    FIELD_MANAGER.to_owned(),
                ),
            ])),
            annotations: Some(BTreeMap::from([(
                "terdut.ryuvia.com/what".to_owned(),
                "which TerdutTeams (by uid) terdut-operator made a team for; see its ADR 0013 \
                 before editing"
                    .to_owned(),
            )])),
            ..Default::default()
        },
        ..Default::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_uid_picks_its_configmap_by_its_first_hex_character() {
        assert_eq!(
            shard_name("0f8e1c2a-0000-4000-8000-000000000000"),
            "terdut-team-records-0"
        );
        assert_eq!(
            shard_name("f18e1c2a-0000-4000-8000-000000000000"),
            "terdut-team-records-f"
        );
        assert_eq!(
            shard_name("A18e1c2a-0000-4000-8000-000000000000"),
            "terdut-team-records-a"
        );
        assert_eq!(shard_name(""), "terdut-team-records-0");
    }

    #[test]
    fn only_an_object_with_the_finalizer_or_older_than_the_records_is_looked_up_again() {
        // A new object, never passed with the finalizer: no instance can have recorded it.
        assert!(!may_be_recorded_elsewhere(false, false));
        // Another instance may have sent its create call (it added the finalizer first).
        assert!(may_be_recorded_elsewhere(true, false));
        // Older than the records: another instance may have declined it (and released the
        // finalizer), a judgement a forged status must not reopen.
        assert!(may_be_recorded_elsewhere(false, true));
        assert!(may_be_recorded_elsewhere(true, true));
    }

    #[test]
    fn values_say_what_and_which_object() {
        let key = ObjectKey::new("payments", "platform");
        let made = value(Record::Made, &key).unwrap();
        assert_eq!(made, "made payments/platform");
        assert_eq!(parse(&made), Record::Made);
        let declined = value(Record::Declined, &key).unwrap();
        assert_eq!(parse(&declined), Record::Declined);
        assert_eq!(value(Record::None, &key), None);
        for odd in ["", "made", "MADE x", "yes", "declined"] {
            let want = match odd {
                "made" => Record::Made,
                "declined" => Record::Declined,
                _ => Record::None,
            };
            assert_eq!(parse(odd), want, "{odd:?}");
        }
    }
}
