//! A real Prometheus in the cluster, as a user runs one: its own namespace (restricted), a
//! ServiceAccount allowed to discover Services, endpoint slices and pods, and a scrape job
//! made from the chart's ServiceMonitor (rendered with `metrics.serviceMonitor.enabled`): the
//! same namespace, label selector, port name and path the Prometheus operator would use. Then
//! PromQL: both replicas `up`, one leader, and the objects' counts from the terdut metrics.

use std::collections::BTreeMap;
use std::time::Duration;

use anyhow::Context as _;
use serde_json::Value;

use super::helm::{Helm, NAMESPACE};
use crate::checks::log;
use crate::golden::label_restricted;
use crate::run::Run;
use crate::wait;

pub const PROM_NS: &str = "monitoring";
const SCRAPE_INTERVAL: &str = "5s";

/// The scrape job's parts a ServiceMonitor defines.
#[derive(Debug, PartialEq)]
pub struct Monitor {
    pub namespace: String,
    pub match_labels: BTreeMap<String, String>,
    pub port: String,
    pub path: String,
    pub interval: String,
}

/// Reads the chart's ServiceMonitor.
pub fn monitor(helm: &Helm) -> anyhow::Result<Monitor> {
    let yaml = helm.template(
        "templates/servicemonitor.yaml",
        &[
            "metrics.serviceMonitor.enabled=true",
            // The chart's 30 s default, shortened so the test need not wait for it.
            &format!("metrics.serviceMonitor.interval={SCRAPE_INTERVAL}"),
        ],
    )?;
    parse_monitor(&yaml)
}

pub fn parse_monitor(yaml: &str) -> anyhow::Result<Monitor> {
    let sm: Value = serde_yaml_ng::from_str(yaml)?;
    let endpoint = &sm["spec"]["endpoints"][0];
    let labels = sm["spec"]["selector"]["matchLabels"]
        .as_object()
        .context("the ServiceMonitor selects by matchLabels")?;
    let text = |v: &Value, what: &str| {
        v.as_str()
            .map(str::to_owned)
            .with_context(|| format!("no {what}"))
    };
    Ok(Monitor {
        namespace: text(&sm["metadata"]["namespace"], "namespace")?,
        match_labels: labels
            .iter()
            .map(|(k, v)| Ok((k.clone(), text(v, k)?)))
            .collect::<anyhow::Result<_>>()?,
        port: text(&endpoint["port"], "endpoint port")?,
        path: text(&endpoint["path"], "endpoint path")?,
        interval: text(&endpoint["interval"], "endpoint interval")?,
    })
}

/// A Prometheus label name for a Kubernetes label key (what service discovery exposes).
fn sanitize(key: &str) -> String {
    key.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect()
}

/// prometheus.yml: the job the Prometheus operator generates for this ServiceMonitor.
pub fn config(m: &Monitor) -> String {
    let mut relabel = String::new();
    for (k, v) in &m.match_labels {
        relabel.push_str(&format!(
            "      - {{action: keep, source_labels: [__meta_kubernetes_service_label_{}], regex: '{v}'}}\n",
            sanitize(k)
        ));
    }
    format!(
        "global: {{scrape_interval: {iv}, evaluation_interval: {iv}}}
scrape_configs:
  - job_name: serviceMonitor/{ns}/terdut-operator/0
    scrape_interval: {iv}
    metrics_path: {path}
    kubernetes_sd_configs:
      - {{role: endpointslice, namespaces: {{names: [{ns}]}}}}
    relabel_configs:
{relabel}      - {{action: keep, source_labels: [__meta_kubernetes_endpointslice_port_name], regex: '{port}'}}
      - {{source_labels: [__meta_kubernetes_namespace], target_label: namespace}}
      - {{source_labels: [__meta_kubernetes_pod_name], target_label: pod}}
",
        iv = m.interval,
        ns = m.namespace,
        path = m.path,
        port = m.port,
    )
}

fn manifests(image: &str, config: &str) -> String {
    let config: String = config.lines().map(|l| format!("    {l}\n")).collect();
    format!(
        r#"apiVersion: v1
kind: ServiceAccount
metadata: {{name: prometheus, namespace: {PROM_NS}}}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {{name: e2e-prometheus}}
rules:
  - apiGroups: [""]
    resources: [services, endpoints, pods]
    verbs: [get, list, watch]
  - apiGroups: [discovery.k8s.io]
    resources: [endpointslices]
    verbs: [get, list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {{name: e2e-prometheus}}
roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: e2e-prometheus}}
subjects: [{{kind: ServiceAccount, name: prometheus, namespace: {PROM_NS}}}]
---
apiVersion: v1
kind: ConfigMap
metadata: {{name: prometheus, namespace: {PROM_NS}}}
data:
  prometheus.yml: |
{config}---
apiVersion: apps/v1
kind: Deployment
metadata: {{name: prometheus, namespace: {PROM_NS}}}
spec:
  replicas: 1
  selector: {{matchLabels: {{app: prometheus}}}}
  template:
    metadata: {{labels: {{app: prometheus}}}}
    spec:
      serviceAccountName: prometheus
      securityContext: {{runAsNonRoot: true, runAsUser: 65532, runAsGroup: 65532, fsGroup: 65532, seccompProfile: {{type: RuntimeDefault}}}}
      containers:
        - name: prometheus
          image: {image}
          imagePullPolicy: IfNotPresent
          args: [--config.file=/etc/prometheus/prometheus.yml, --storage.tsdb.path=/prometheus, --web.listen-address=:9090]
          ports: [{{name: web, containerPort: 9090}}]
          readinessProbe: {{httpGet: {{path: /-/ready, port: web}}, periodSeconds: 2}}
          securityContext: {{allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: {{drop: [ALL]}}}}
          volumeMounts:
            - {{name: config, mountPath: /etc/prometheus}}
            - {{name: data, mountPath: /prometheus}}
      volumes:
        - {{name: config, configMap: {{name: prometheus}}}}
        - {{name: data, emptyDir: {{}}}}
---
apiVersion: v1
kind: Service
metadata: {{name: prometheus, namespace: {PROM_NS}}}
spec:
  selector: {{app: prometheus}}
  ports: [{{name: web, port: 9090, targetPort: web}}]
"#
    )
}

/// Deploys it; returns once it is Ready.
pub async fn deploy(run: &Run, helm: &Helm, image: &str) -> anyhow::Result<()> {
    let m = monitor(helm)?;
    anyhow::ensure!(
        m.namespace == NAMESPACE,
        "the ServiceMonitor lives in {}",
        m.namespace
    );
    run.kubectl.apply_yaml(&format!(
        "apiVersion: v1\nkind: Namespace\nmetadata: {{name: {PROM_NS}}}\n"
    ))?;
    label_restricted(run, PROM_NS)?;
    log(&format!(
        "deploying Prometheus ({image}) with the chart's ServiceMonitor as its job"
    ));
    run.kubectl.apply_yaml(&manifests(image, &config(&m)))?;
    run.kubectl.run(&[
        "rollout",
        "status",
        "-n",
        PROM_NS,
        "deployment/prometheus",
        "--timeout=180s",
    ])?;
    Ok(())
}

/// An instant query's result: `(labels, value)` per series.
pub async fn query(
    run: &Run,
    promql: &str,
) -> anyhow::Result<Vec<(BTreeMap<String, String>, f64)>> {
    let base = run
        .reach
        .service(&run.client, PROM_NS, "prometheus", 9090)
        .await?;
    let mut url = reqwest::Url::parse(&format!("{base}/api/v1/query"))?;
    url.query_pairs_mut().append_pair("query", promql);
    let body: Value = run
        .http
        .get(url)
        .send()
        .await?
        .error_for_status()?
        .json()
        .await?;
    let series = body["data"]["result"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    Ok(series
        .iter()
        .map(|s| {
            let labels = s["metric"]
                .as_object()
                .map(|m| {
                    m.iter()
                        .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_owned()))
                        .collect()
                })
                .unwrap_or_default();
            let value = s["value"][1]
                .as_str()
                .and_then(|v| v.parse().ok())
                .unwrap_or(f64::NAN);
            (labels, value)
        })
        .collect())
}

/// The checks, each waiting for the scrapes that make it true.
pub async fn check(run: &Run) -> anyhow::Result<()> {
    let limit = Duration::from_secs(90);
    let up = wait::until("both operator replicas up in Prometheus", limit, || async {
        let up = query(run, r#"up{job=~"serviceMonitor/.*terdut-operator.*"}"#).await?;
        Ok((up.len() == 2 && up.iter().all(|(_, v)| *v == 1.0)).then_some(up))
    })
    .await;
    run.checks
        .check_result("Prometheus discovers both operator pods: up == 1", &up);
    let leader = wait::until("one leader", limit, || async {
        let l = query(run, "sum(terdut_operator_leader)").await?;
        Ok((l.len() == 1 && l[0].1 == 1.0).then_some(()))
    })
    .await;
    run.checks
        .check_result("PromQL sum(terdut_operator_leader) == 1", &leader);
    // The operator links jemalloc (ADR 0010); it reports which allocator answered.
    let jemalloc = wait::until("heap figures from jemalloc", limit, || async {
        let q = r#"count(terdut_operator_heap_bytes{allocator="jemalloc",state="in_use"} > 0)"#;
        let n = query(run, q).await?;
        Ok((n.len() == 1 && n[0].1 == 2.0).then_some(()))
    })
    .await;
    run.checks.check_result(
        "both operator pods run on jemalloc: heap_bytes{allocator=\"jemalloc\"} > 0",
        &jemalloc,
    );
    let want = BTreeMap::from([
        ("server".to_owned(), 1.0),
        ("team".into(), 2.0),
        ("source".into(), 2.0),
    ]);
    let counts = wait::until("the objects' counts", limit, || async {
        let got: BTreeMap<String, f64> =
            // Alive or passivated (ADR 0008): the leader's tree holds every object either way.
            query(
                run,
                r#"max by (kind) (sum by (kind, instance) ({__name__=~"terdut_operator_actors_(active|passive)"}))"#,
            )
                .await?
                .into_iter()
                .map(|(l, v)| (l.get("kind").cloned().unwrap_or_default(), v))
                .collect();
        Ok((got == want).then_some(()))
    })
    .await;
    run.checks.check_result(
        "PromQL actors alive + passive, by kind: 1 server, 2 teams, 2 sources",
        &counts,
    );
    // The gauge the alert TerdutObjectsNotReady and the dashboard's object panels read.
    let objects = wait::until("the objects gauge", limit, || async {
        let got: BTreeMap<String, f64> = query(run, "sum by (kind) (terdut_operator_objects)")
            .await?
            .into_iter()
            .map(|(l, v)| (l.get("kind").cloned().unwrap_or_default(), v))
            .collect();
        Ok((got == want).then_some(()))
    })
    .await;
    run.checks.check_result(
        "PromQL sum by (kind) (terdut_operator_objects): 1 server, 2 teams, 2 sources",
        &objects,
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_job_keeps_what_the_service_monitor_selects() {
        let m = parse_monitor(
            "apiVersion: monitoring.coreos.com/v1
kind: ServiceMonitor
metadata: {name: x, namespace: terdut-system}
spec:
  selector: {matchLabels: {app.kubernetes.io/name: terdut-operator, app.kubernetes.io/instance: r}}
  endpoints: [{port: http-metrics, path: /metrics, interval: 5s}]
",
        )
        .unwrap();
        let c = config(&m);
        assert!(c.contains(
            "[__meta_kubernetes_service_label_app_kubernetes_io_name], regex: 'terdut-operator'"
        ));
        assert!(
            c.contains("[__meta_kubernetes_service_label_app_kubernetes_io_instance], regex: 'r'")
        );
        assert!(c.contains("[__meta_kubernetes_endpointslice_port_name], regex: 'http-metrics'"));
        assert!(c.contains("namespaces: {names: [terdut-system]}"));
        let parsed: Value = serde_yaml_ng::from_str(&c).unwrap();
        assert_eq!(parsed["scrape_configs"][0]["metrics_path"], "/metrics");
    }
}
