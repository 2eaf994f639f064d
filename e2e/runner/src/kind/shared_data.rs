//! The stand-in's state on storage every worker reaches, so that its pod can move to another
//! node and find the teams the operator made: what the real server's database gives it (the
//! stand-in has none, and without this keeps its state in its process). A hostPath
//! PersistentVolume over the folder every worker of e2e/kind/cluster.yaml mounts from the host,
//! claimed in the server's namespace (a claim passes the restricted Pod Security level, a
//! hostPath volume would not), and the TerdutServer's own `pod.extraVolumes`,
//! `pod.extraVolumeMounts` and `pod.extraEnv` pointing the stand-in's data file at it.

use serde_json::json;

use crate::examples::{SERVER, SERVER_NS};
use crate::run::Run;

/// e2e/kind/cluster.yaml: where each worker mounts the host's shared folder.
const NODE_PATH: &str = "/var/lib/terdut-shared";
const PV: &str = "terdut-e2e-standin-data";
const CLAIM: &str = "terdut-standin-data";
const MOUNT: &str = "/data";

fn manifests() -> String {
    let pv = json!({
        "apiVersion": "v1", "kind": "PersistentVolume",
        "metadata": {"name": PV},
        "spec": {
            "capacity": {"storage": "64Mi"},
            "accessModes": ["ReadWriteMany"],
            "persistentVolumeReclaimPolicy": "Retain",
            "storageClassName": "",
            "claimRef": {"namespace": SERVER_NS, "name": CLAIM},
            // No node affinity: every worker has the folder, so the pod may go to any.
            "hostPath": {"path": NODE_PATH, "type": "Directory"},
        },
    });
    let claim = json!({
        "apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": CLAIM, "namespace": SERVER_NS},
        "spec": {
            "accessModes": ["ReadWriteMany"],
            "storageClassName": "",
            "volumeName": PV,
            "resources": {"requests": {"storage": "64Mi"}},
        },
    });
    format!("{pv}\n---\n{claim}\n")
}

/// The volume and its claim, then the TerdutServer's pods given the data file (which rolls
/// them: the new pods start empty, then persist what the operator makes again).
pub fn apply(run: &Run) -> anyhow::Result<()> {
    run.kubectl.apply_yaml(&manifests())?;
    let patch = json!({"spec": {"pod": {
        "extraEnv": [{
            "name": terdut_standin::config::ENV_DATA_FILE,
            "value": format!("{MOUNT}/standin.json"),
        }],
        "extraVolumes": [{"name": "data", "persistentVolumeClaim": {"claimName": CLAIM}}],
        "extraVolumeMounts": [{"name": "data", "mountPath": MOUNT}],
    }}});
    patch_server(run, &patch)
}

/// A merge patch of the example TerdutServer (this scenario's and the drain's).
pub fn patch_server(run: &Run, patch: &serde_json::Value) -> anyhow::Result<()> {
    run.kubectl
        .run(&[
            "patch",
            "terdutserver",
            SERVER,
            "-n",
            SERVER_NS,
            "--type=merge",
            "-p",
            &patch.to_string(),
        ])
        .map(drop)
}

/// Deletes the claim and the volume without waiting: they stay (storage protection) until the
/// server's pods are gone with the TerdutServer at the end of the scenario.
pub fn delete(run: &Run) -> anyhow::Result<()> {
    run.kubectl.run(&[
        "delete",
        "pvc",
        CLAIM,
        "-n",
        SERVER_NS,
        "--wait=false",
        "--ignore-not-found",
    ])?;
    run.kubectl
        .run(&["delete", "pv", PV, "--wait=false", "--ignore-not-found"])
        .map(drop)
}
