//! `node-cluster`: the single-node cluster (docs/node.md) as a long-running process, to look
//! around in or to debug the node. Imports the image tars given, writes the admin kubeconfig
//! to the path given and runs until interrupted; everything stops with it.
//!
//! ```text
//! node-cluster <kubeconfig out> <image.tar>...
//! ```

use terdut_testenv::{NodeCluster, NodeOptions};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let out = args.next().unwrap_or_else(|| ".tmp/node/kubeconfig".into());
    let images = args.map(Into::into).collect();
    let started = std::time::Instant::now();
    let cluster = NodeCluster::start(NodeOptions {
        images,
        registry: false,
    })
    .await?;
    if let Some(parent) = std::path::Path::new(&out).parent() {
        std::fs::create_dir_all(parent)?;
    }
    // Through a temporary name, so a waiting script never reads half a file.
    let tmp = format!("{out}.partial");
    std::fs::copy(cluster.control_plane().kubeconfig(), &tmp)?;
    std::fs::rename(&tmp, &out)?;
    let l = cluster.layout();
    eprintln!(
        "node cluster up in {:.1?}: kube-apiserver {}, node {} ({}), pods {}, services {}, \
         DNS {}; node logs in {}; kubeconfig: {out}",
        started.elapsed(),
        cluster.control_plane().server,
        terdut_testenv::NODE_NAME,
        l.node_ip,
        l.pod_cidr,
        l.service_cidr,
        l.dns_ip,
        cluster.dir().join("logs").display(),
    );
    tokio::signal::ctrl_c().await?;
    cluster.stop();
    let _ = std::fs::remove_file(&out);
    Ok(())
}
