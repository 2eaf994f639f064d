//! A webhook key from an alert source's Secret ingests an alert through the server's Service:
//! the Secret's URL names the server's public host (`spec.networking.hostname`), which has no
//! Ingress here, so the request keeps the URL's path and goes to the Service instead. A key
//! the server never issued is refused.

use crate::examples::SOURCES;
use crate::golden::webhook;
use crate::run::Run;

const ALERT: &str = r#"{"version":"4","status":"firing","receiver":"terdut","alerts":[{"status":"firing","labels":{"alertname":"E2EProbe","severity":"warning"}}]}"#;

pub async fn check(run: &Run) -> anyhow::Result<()> {
    let (ns, source, team) = SOURCES[0];
    let (url, key) = webhook(run, ns, source).await?;
    let path = url
        .splitn(4, '/')
        .nth(3)
        .map(|p| format!("/{p}"))
        .ok_or_else(|| anyhow::anyhow!("the webhook URL has no path"))?;
    let base = run.server_url().await?;
    let post = |key: String| {
        run.http
            .post(format!("{base}{path}"))
            .bearer_auth(key)
            .header("Content-Type", "application/json")
            .body(ALERT)
            .send()
    };
    let accepted = post(key).await?.status();
    let state = run.admin().await?.state().await?;
    let ingested = state
        .team_by_external_id(&format!("{ns}/{team}"))
        .and_then(|t| {
            t.integrations
                .iter()
                .find(|i| i.external_id == format!("{ns}/{source}"))
        })
        .map_or(0, |i| i.ingested);
    run.checks.check(
        &format!("the webhook key of {ns}/{source} ingests an alert through the Service"),
        accepted.as_u16() == 202 && ingested == 1,
        format!("HTTP {accepted}, {ingested} ingested"),
    );
    let forged = post(terdut_standin::generate_operator_key())
        .await?
        .status();
    run.checks.check(
        "a key the server never issued is refused",
        forged.as_u16() == 401 || forged.as_u16() == 403,
        format!("HTTP {forged}"),
    );
    Ok(())
}
