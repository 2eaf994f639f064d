//! `helm install` of a chart folder (this tree's, or a previous version's for the upgrade
//! check) with an image imported into the node, as `just e2e-node` installs it: into
//! `terdut-system`, labelled `restricted`, the chart's PodDisruptionBudget on, `--wait`; plus
//! what a run adds (`--set`s, e.g. a deliberately broken operator's switch).

use std::path::{Path, PathBuf};

use anyhow::bail;
use k8s_openapi::api::apps::v1::Deployment;
use kube::Api;

use crate::checks::log;
use crate::cluster::helm::{Helm, NAMESPACE, RELEASE};
use crate::golden::label_restricted;
use crate::run::Run;

/// What the day-two runs deploy the operator with.
#[derive(Debug, Clone, clap::Args)]
pub struct DeployArgs {
    /// node-chaos, upgrade: the operator image to test (already among the imported tars).
    #[arg(long, default_value = "terdut-operator:e2e")]
    pub operator_image: String,
    /// node-chaos, upgrade: a folder of more image tars to import (e.g. a patched operator).
    #[arg(long)]
    pub extra_images: Option<PathBuf>,
    /// node-chaos, upgrade: more `helm --set`s for this tree's chart (repeatable).
    #[arg(long = "set")]
    pub sets: Vec<String>,
}

/// `image.repository`, `image.tag` and `image.pullPolicy=Never` for `image`, then the chart's
/// PodDisruptionBudget on, then `extra`.
pub fn sets(image: &str, extra: &[String]) -> anyhow::Result<Vec<String>> {
    let Some((repository, tag)) = image.rsplit_once(':') else {
        bail!("image {image} has no tag");
    };
    let mut out = vec![
        format!("image.repository={repository}"),
        format!("image.tag={tag}"),
        "image.pullPolicy=Never".to_owned(),
        "podDisruptionBudget.enabled=true".to_owned(),
    ];
    out.extend(extra.iter().cloned());
    Ok(out)
}

/// `helm <verb> <release> <chart> ... --wait` with `sets`.
pub fn helm_args<'a>(verb: &'a str, chart: &'a str, sets: &'a [String]) -> Vec<&'a str> {
    let mut args = vec![
        verb,
        RELEASE,
        chart,
        "--namespace",
        NAMESPACE,
        "--wait",
        "--timeout",
        "4m",
    ];
    for s in sets {
        args.extend(["--set", s.as_str()]);
    }
    args
}

/// The release installed from `chart` and both replicas Ready.
pub async fn install(run: &Run, helm: &Helm, chart: &Path, sets: &[String]) -> anyhow::Result<()> {
    run.kubectl.apply_yaml(&format!(
        "apiVersion: v1\nkind: Namespace\nmetadata: {{name: {NAMESPACE}}}\n"
    ))?;
    label_restricted(run, NAMESPACE)?;
    let chart = chart.display().to_string();
    log(&format!("helm install {RELEASE} from {chart}"));
    helm.run(&helm_args("install", &chart, sets))?;
    crate::cluster::deployment_available(run, NAMESPACE, RELEASE).await?;
    let dep = Api::<Deployment>::namespaced(run.client.clone(), NAMESPACE)
        .get(RELEASE)
        .await?;
    let ready = dep.status.and_then(|s| s.ready_replicas).unwrap_or(0);
    if ready != 2 {
        bail!("{ready} operator replicas Ready, not 2");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_image_splits_at_its_last_colon_and_extra_sets_come_last() {
        let s = sets("reg:5000/terdut-operator:prev", &["a=b".into()]).unwrap();
        assert_eq!(s[0], "image.repository=reg:5000/terdut-operator");
        assert_eq!(s[1], "image.tag=prev");
        assert_eq!(s.last().map(String::as_str), Some("a=b"));
        assert!(sets("untagged", &[]).is_err());
        let args = helm_args("upgrade", "/c", &s);
        assert_eq!(&args[..3], ["upgrade", RELEASE, "/c"]);
        assert_eq!(args.iter().filter(|a| **a == "--set").count(), 5);
    }
}
