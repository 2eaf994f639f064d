//! The example TerdutServer for the day-two runs, with its data on disk: the stand-in keeps
//! its state in a data file on a PersistentVolume (a hostPath volume on the node, bound by
//! name), so a restarted or rescheduled server pod keeps its teams, integrations and keys, as
//! the real server does with its database. Without it every server restart would empty the
//! server, and "nothing lost, no key rotated" could not be asked of a node restart.

use std::path::Path;

use crate::examples;

const VOLUME: &str = "terdut-standin-data";
const MOUNT: &str = "/data";

/// The PersistentVolume (hostPath `dir`, on the node) and the claim bound to it, in the
/// server's namespace. A claim is a volume type the `restricted` Pod Security level allows.
pub fn volume_yaml(dir: &Path) -> String {
    format!(
        "apiVersion: v1
kind: PersistentVolume
metadata: {{name: {VOLUME}}}
spec:
  capacity: {{storage: 64Mi}}
  accessModes: [ReadWriteOnce]
  persistentVolumeReclaimPolicy: Retain
  storageClassName: \"\"
  claimRef: {{namespace: {ns}, name: {VOLUME}}}
  hostPath: {{path: \"{dir}\", type: Directory}}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {{name: {VOLUME}, namespace: {ns}}}
spec:
  accessModes: [ReadWriteOnce]
  storageClassName: \"\"
  volumeName: {VOLUME}
  resources: {{requests: {{storage: 64Mi}}}}
",
        ns = examples::SERVER_NS,
        dir = dir.display(),
    )
}

/// docs/examples' TerdutServer as the node runs it ([`examples::server_for_cluster`]), with the
/// stand-in's data file on the claim.
pub fn server_yaml(image: &str, pull_policy: &str) -> anyhow::Result<String> {
    let mut server: serde_json::Value =
        serde_json::from_str(&examples::server_for_cluster(image, pull_policy)?)?;
    let pod = &mut server["spec"]["pod"];
    pod["extraEnv"] = serde_json::json!([
        {"name": "TERDUT_STANDIN_DATA_FILE", "value": format!("{MOUNT}/standin.json")},
    ]);
    pod["extraVolumes"] = serde_json::json!([
        {"name": "data", "persistentVolumeClaim": {"claimName": VOLUME}},
    ]);
    pod["extraVolumeMounts"] = serde_json::json!([{"name": "data", "mountPath": MOUNT}]);
    Ok(serde_json::to_string(&server)?)
}

/// The volume's folder on the node, writable by the stand-in's user (65532): a hostPath
/// volume gets no `fsGroup` ownership.
pub fn create_volume_dir(dir: &Path) -> anyhow::Result<()> {
    use std::os::unix::fs::PermissionsExt as _;
    std::fs::create_dir_all(dir)?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o777))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_server_keeps_its_data_on_the_claim() {
        let yaml = server_yaml("terdut-standin:e2e", "Never").unwrap();
        let v: serde_json::Value = serde_json::from_str(&yaml).unwrap();
        let pod = &v["spec"]["pod"];
        assert_eq!(pod["extraEnv"][0]["value"], "/data/standin.json");
        assert_eq!(
            pod["extraVolumes"][0]["persistentVolumeClaim"]["claimName"],
            VOLUME
        );
        assert_eq!(v["spec"]["replicas"], 1);
        let docs: Vec<serde_json::Value> = volume_yaml(Path::new("/x/y"))
            .split("---\n")
            .map(|d| serde_yaml_ng::from_str(d).unwrap())
            .collect();
        assert_eq!(docs[0]["spec"]["hostPath"]["path"], "/x/y");
        assert_eq!(docs[1]["spec"]["volumeName"], VOLUME);
    }
}
