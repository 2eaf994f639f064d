//! The operator's /metrics, as Prometheus reads it: OpenMetrics with `# EOF`, no Event that
//! failed to publish, no reconcile pass left holding or waiting for a slot once converged,
//! Events recorded, and `promtool check metrics` clean.

use std::io::Write as _;
use std::process::{Command, Stdio};
use std::time::Duration;

use k8s_openapi::api::events::v1::Event;
use kube::Api;
use kube::api::ListParams;

use crate::run::Run;

const OPENMETRICS: &str = "application/openmetrics-text;version=1.0.0";

async fn get(run: &Run, url: &str, accept: Option<&str>) -> anyhow::Result<String> {
    let mut req = run.http.get(url);
    if let Some(a) = accept {
        req = req.header("Accept", a);
    }
    Ok(req.send().await?.error_for_status()?.text().await?)
}

/// `metrics_url`: the leader's `/metrics` (the replica that reconciles).
pub async fn check(run: &Run, metrics_url: &str) -> anyhow::Result<()> {
    let c = &run.checks;
    let om = get(run, metrics_url, Some(OPENMETRICS)).await?;
    c.check(
        "/metrics serves OpenMetrics to Prometheus",
        om.trim_end().ends_with("# EOF") && om.contains("reconciles_total"),
        "no # EOF or no reconciles_total",
    );
    let text = get(run, metrics_url, None).await?;
    let failures: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("terdut_operator_event_publish_failures_total"))
        .collect();
    c.check(
        "no Event failed to publish",
        !failures.is_empty() && failures.iter().all(|l| value(l) == Some(0.0)),
        format!("{failures:?}"),
    );
    // Converged, no pass holds or waits for a slot of --max-concurrent-reconciles (a leaked
    // slot would stall every later pass of its kind once the limit is reached).
    let idle = |text: &str| {
        let lines: Vec<String> = text
            .lines()
            .filter(|l| {
                l.starts_with("terdut_operator_reconcile_passes_waiting{")
                    || l.starts_with("terdut_operator_reconcile_passes_running{")
            })
            .map(str::to_owned)
            .collect();
        let ok = lines.len() == 4 && lines.iter().all(|l| value(l) == Some(0.0));
        (ok, lines)
    };
    let mut verdict = idle(&text);
    for _ in 0..30 {
        if verdict.0 {
            break;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
        verdict = idle(&get(run, metrics_url, None).await?);
    }
    c.check(
        "no reconcile pass left holding or waiting for a slot",
        verdict.0,
        format!("{:?}", verdict.1),
    );
    let events = Api::<Event>::all(run.client.clone())
        .list(&ListParams::default())
        .await?;
    let ours = events
        .items
        .iter()
        .filter(|e| e.reporting_controller.as_deref() == Some("terdut-operator"))
        .count();
    c.check(
        "the operator recorded Events",
        ours > 0,
        format!("{ours} events"),
    );
    if let Some(promtool) = &run.promtool {
        let (ok, out) = promtool_check(promtool, &text)?;
        c.check("promtool check metrics", ok, out);
    }
    Ok(())
}

/// The sample value at the end of an exposition line.
fn value(line: &str) -> Option<f64> {
    line.rsplit(' ').next()?.parse().ok()
}

fn promtool_check(promtool: &std::path::Path, text: &str) -> anyhow::Result<(bool, String)> {
    let mut child = Command::new(promtool)
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()?;
    if let Some(mut pipe) = child.stdin.take() {
        pipe.write_all(text.as_bytes())?;
    }
    let out = child.wait_with_output()?;
    let mut msg = String::from_utf8_lossy(&out.stdout).into_owned();
    msg.push_str(&String::from_utf8_lossy(&out.stderr));
    Ok((out.status.success(), msg))
}
