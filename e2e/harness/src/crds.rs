//! Installs CRDs and waits until they can be used: Established first, then listed by
//! discovery (engineering-notes: Established comes before discovery lists a new resource).

use std::time::Duration;

use anyhow::{Context as _, bail};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Patch, PatchParams};
use kube::{Api, Client};

pub async fn install_crds(
    client: &Client,
    crds: Vec<CustomResourceDefinition>,
) -> anyhow::Result<()> {
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let pp = PatchParams::apply("terdut-testenv").force();
    for crd in &crds {
        let name = crd.metadata.name.clone().context("CRD without a name")?;
        api.patch(&name, &pp, &Patch::Apply(crd))
            .await
            .with_context(|| format!("applying {name}"))?;
    }
    for crd in &crds {
        let name = crd.metadata.name.clone().unwrap_or_default();
        wait_until(Duration::from_secs(60), || async {
            let got = api.get(&name).await.ok()?;
            let est = got
                .status?
                .conditions?
                .into_iter()
                .any(|c| c.type_ == "Established" && c.status == "True");
            est.then_some(())
        })
        .await
        .with_context(|| format!("{name} never became Established"))?;
        let gv = format!("{}/{}", crd.spec.group, crd.spec.versions[0].name);
        let plural = crd.spec.names.plural.clone();
        wait_until(Duration::from_secs(60), || async {
            let list = client.list_api_group_resources(&gv).await.ok()?;
            list.resources
                .iter()
                .any(|r| r.name == plural)
                .then_some(())
        })
        .await
        .with_context(|| format!("{plural} never appeared in discovery"))?;
    }
    Ok(())
}

async fn wait_until<F, Fut>(limit: Duration, mut probe: F) -> anyhow::Result<()>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<()>>,
{
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        if probe().await.is_some() {
            return Ok(());
        }
        if tokio::time::Instant::now() > deadline {
            bail!("timed out after {limit:?}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}
