//! `helm install` of the chart, as docs/installation.md tells a user, with the image built
//! here: a real install (Helm's release, its hooks, `--wait`), not a rendered apply.

use std::path::PathBuf;
use std::process::Command;

use anyhow::bail;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::ListParams;

use crate::checks::log;
use crate::golden::label_restricted;
use crate::run::Run;

pub const RELEASE: &str = "terdut-operator";
pub const NAMESPACE: &str = "terdut-system";

pub fn chart() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../chart/terdut-operator")
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
pub async fn install(run: &Run, helm: &Helm, image: &str, pull_policy: &str) -> anyhow::Result<()> {
    let (repository, tag) = image
        .rsplit_once(':')
        .ok_or_else(|| anyhow::anyhow!("image {image} has no tag"))?;
    run.kubectl.apply_yaml(&format!(
        "apiVersion: v1\nkind: Namespace\nmetadata: {{name: {NAMESPACE}}}\n"
    ))?;
    label_restricted(run, NAMESPACE)?;
    log(&format!("helm install {RELEASE} with image {image}"));
    let chart = chart().display().to_string();
    let sets = [
        format!("image.repository={repository}"),
        format!("image.tag={tag}"),
        format!("image.pullPolicy={pull_policy}"),
        "podDisruptionBudget.enabled=true".into(),
    ];
    let mut args = vec![
        "install",
        RELEASE,
        &chart,
        "--namespace",
        NAMESPACE,
        "--wait",
        "--timeout",
        "3m",
    ];
    for s in &sets {
        args.extend(["--set", s.as_str()]);
    }
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
    default_url(run, &dep, &helm_default_template(helm)?);
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
