//! `helm install` of the chart, as docs/installation.md tells a user: a real install (Helm's
//! release, its hooks, `--wait`), not a rendered apply. Either the release as published
//! ([`ChartSource::Oci`]: the chart from an OCI registry, the image by the digest it names,
//! pulled by the node's container runtime) or the chart folder with an image already on the
//! nodes ([`ChartSource::Folder`]).

use std::path::PathBuf;
use std::process::Command;

use anyhow::bail;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::ListParams;

use crate::checks::log;
use crate::cluster::Images;
use crate::golden::label_restricted;
use crate::run::Run;

pub const RELEASE: &str = "terdut-operator";
pub const NAMESPACE: &str = "terdut-system";

/// The port of the operator's test hooks (`--test-hooks-addr`, loopback in the pod), reached
/// with `kubectl port-forward`.
pub const HOOKS_PORT: u16 = 8081;

/// The `--set`s that turn the test hooks on (inert until a test arms one;
/// docs/adr/0017-liveness.md). Each flag one argument: the chart's schema takes only flags in
/// extraArgs.
pub fn test_hooks_sets() -> [String; 2] {
    [
        "extraArgs[0]=--test-hooks".to_owned(),
        format!("extraArgs[1]=--test-hooks-addr=127.0.0.1:{HOOKS_PORT}"),
    ]
}

pub fn chart() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../chart/terdut-operator")
}

/// Where `helm install` takes the chart and the operator image from.
#[derive(Debug, Clone)]
pub enum ChartSource {
    /// chart/terdut-operator of this checkout, with `Images::operator` (on the nodes already).
    Folder,
    /// A published release: `helm install oci://...` of `version`, its image from
    /// `repository` by the digest the chart carries, pulled with `imagePullPolicy: Always`.
    Oci {
        /// `oci://<registry>/charts/terdut-operator`.
        url: String,
        version: String,
        /// The registry's CA, for Helm.
        ca_file: PathBuf,
        /// `<registry>/terdut-operator`: the release's image, mirrored (same digest).
        repository: String,
        /// The image digest the release published (release.json).
        digest: String,
    },
}

#[derive(Debug, Clone)]
pub struct Helm {
    pub bin: PathBuf,
    pub kubeconfig: Option<PathBuf>,
}

impl Helm {
    pub fn run(&self, args: &[&str]) -> anyhow::Result<String> {
        let mut c = Command::new(&self.bin);
        if let Some(kc) = &self.kubeconfig {
            c.arg("--kubeconfig").arg(kc);
        }
        let out = c.args(args).output()?;
        let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
        if !out.status.success() {
            text.push_str(&String::from_utf8_lossy(&out.stderr));
            bail!("helm {} failed: {}", args.join(" "), text.trim());
        }
        Ok(text)
    }

    /// The chart's manifests with `sets`, rendered for the pinned Kubernetes version.
    pub fn template(&self, show_only: &str, sets: &[&str]) -> anyhow::Result<String> {
        let chart = chart().display().to_string();
        let mut args = vec![
            "template",
            RELEASE,
            &chart,
            "--namespace",
            NAMESPACE,
            "--kube-version",
            "1.37.2",
            "--show-only",
            show_only,
        ];
        for s in sets {
            args.extend(["--set", s]);
        }
        self.run(&args)
    }
}

/// The release namespace first, labelled restricted (Helm's `--create-namespace` cannot
/// label it), then the install with the chart's PodDisruptionBudget on.
pub async fn install(run: &Run, helm: &Helm, images: &Images) -> anyhow::Result<()> {
    run.kubectl.apply_yaml(&format!(
        "apiVersion: v1\nkind: Namespace\nmetadata: {{name: {NAMESPACE}}}\n"
    ))?;
    label_restricted(run, NAMESPACE)?;
    let folder = chart().display().to_string();
    let mut sets = vec!["podDisruptionBudget.enabled=true".to_owned()];
    let (chart_ref, mut extra, what) = match &images.chart {
        ChartSource::Folder => {
            let image = &images.operator;
            let (repository, tag) = image
                .rsplit_once(':')
                .ok_or_else(|| anyhow::anyhow!("image {image} has no tag"))?;
            sets.extend([
                format!("image.repository={repository}"),
                format!("image.tag={tag}"),
                format!("image.pullPolicy={}", images.pull_policy),
            ]);
            (folder, vec![], format!("chart folder, image {image}"))
        }
        ChartSource::Oci {
            url,
            version,
            ca_file,
            repository,
            ..
        } => {
            // Only the repository changes (a mirror): tag and digest are the chart's own.
            sets.extend([
                format!("image.repository={repository}"),
                "image.pullPolicy=Always".to_owned(),
            ]);
            let extra = vec![
                "--version".to_owned(),
                version.clone(),
                "--ca-file".to_owned(),
                ca_file.display().to_string(),
            ];
            (
                url.clone(),
                extra,
                format!("{url} {version}, image from {repository}"),
            )
        }
    };
    log(&format!("helm install {RELEASE} from {what}"));
    let mut args: Vec<String> = [
        "install",
        RELEASE,
        &chart_ref,
        "--namespace",
        NAMESPACE,
        "--wait",
        "--timeout",
        "3m",
    ]
    .map(str::to_owned)
    .to_vec();
    args.append(&mut extra);
    for s in &sets {
        args.extend(["--set".to_owned(), s.clone()]);
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let result = helm.run(&args);
    run.checks.check_result(
        "helm install: the operator's pods Ready under the restricted profile",
        &result,
    );
    if result.is_err() {
        readiness(run).await;
    }
    result?;
    let dep = Api::<Deployment>::namespaced(run.client.clone(), NAMESPACE)
        .get(RELEASE)
        .await?;
    let ready = dep
        .status
        .as_ref()
        .and_then(|s| s.ready_replicas)
        .unwrap_or(0);
    run.checks.check(
        "two operator replicas Ready",
        ready == 2,
        format!("{ready} ready"),
    );
    if let ChartSource::Oci {
        repository, digest, ..
    } = &images.chart
    {
        pulled_by_digest(run, &dep, repository, digest).await?;
    }
    default_url(run, &dep, &helm_default_template(helm)?);
    Ok(())
}

/// The Deployment names the image by the release's digest, and every operator pod runs exactly
/// that image, which the node's container runtime pulled from the registry (nothing of that
/// name was imported: only `terdut-operator:e2e` was).
async fn pulled_by_digest(
    run: &Run,
    dep: &Deployment,
    repository: &str,
    digest: &str,
) -> anyhow::Result<()> {
    let container = dep
        .spec
        .template
        .spec
        .as_ref()
        .and_then(|p| p.containers.first());
    let image = container.and_then(|c| c.image.clone()).unwrap_or_default();
    let policy = container
        .and_then(|c| c.image_pull_policy.clone())
        .unwrap_or_default();
    run.checks.check(
        "the chart from the registry names the release's image by digest, pull policy Always",
        image.starts_with(&format!("{repository}:"))
            && image.ends_with(&format!("@{digest}"))
            && policy == "Always",
        format!("image {image}, pull policy {policy}"),
    );
    let pods = Api::<Pod>::namespaced(run.client.clone(), NAMESPACE)
        .list(&ListParams::default().labels("app.kubernetes.io/name=terdut-operator"))
        .await?;
    let want = format!("{repository}@{digest}");
    let ids: Vec<String> = pods
        .items
        .iter()
        .flat_map(|p| {
            p.status
                .iter()
                .flat_map(|s| s.container_statuses.iter().flatten())
        })
        .map(|c| c.image_id.clone())
        .collect();
    run.checks.check(
        "containerd pulled the operator image from the registry by that digest",
        !ids.is_empty() && ids.iter().all(|id| id == &want),
        format!("imageIDs {ids:?}, want {want}"),
    );
    Ok(())
}

/// Why pods are not Ready: each operator pod's own `/readyz` answer.
async fn readiness(run: &Run) {
    let pods = Api::<Pod>::namespaced(run.client.clone(), NAMESPACE)
        .list(&ListParams::default().labels("app.kubernetes.io/name=terdut-operator"))
        .await
        .map(|l| l.items)
        .unwrap_or_default();
    for pod in pods {
        let name = pod.metadata.name.unwrap_or_default();
        let answer = match run.reach.pod(&run.client, NAMESPACE, &name, 8080).await {
            Ok(base) => match run.http.get(format!("{base}/readyz")).send().await {
                Ok(r) => format!(
                    "HTTP {}: {}",
                    r.status(),
                    r.text().await.unwrap_or_default().trim()
                ),
                Err(e) => format!("{e}"),
            },
            Err(e) => format!("{e:#}"),
        };
        log(&format!("pod {name} /readyz: {answer}"));
    }
}

/// The chart's default `operator.serverURLTemplate`.
fn helm_default_template(helm: &Helm) -> anyhow::Result<String> {
    let values: serde_json::Value =
        serde_yaml_ng::from_str(&helm.run(&["show", "values", &chart().display().to_string()])?)?;
    values["operator"]["serverURLTemplate"]
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| anyhow::anyhow!("the chart has no operator.serverURLTemplate"))
}

/// The operator runs with the chart's default server URL (a Service DNS name), not the
/// loopback template the local runs use: the golden path then goes through CoreDNS and
/// kube-proxy.
fn default_url(run: &Run, dep: &Deployment, template: &str) {
    let args: Vec<String> = dep
        .spec
        .template
        .spec
        .as_ref()
        .and_then(|p| p.containers.first())
        .and_then(|c| c.args.clone())
        .unwrap_or_default();
    let want = format!("--server-url-template={template}");
    run.checks.check(
        "the operator reaches servers by the chart's default URL (Service DNS)",
        args.contains(&want) && template.contains("{namespace}.svc"),
        format!("args {args:?}, want {want}"),
    );
}
