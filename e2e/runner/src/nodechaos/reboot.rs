//! The whole node restarted, as a machine reboots (`NodeCluster::power_off`, then `boot`):
//! every component and every pod dies at once; the control plane keeps running, so changes
//! keep landing in the API while the node is down. Then the kubelet starts every pod again
//! (the operator's replicas, the server's pod with its data on its volume).

use std::time::Instant;

use super::{Ctx, Outcome};
use crate::checks::log;

pub async fn node(ctx: &mut Ctx<'_>) -> anyhow::Result<Outcome> {
    let down = ctx.rng.millis(2_000, 5_000);
    ctx.wave()?;
    let started = Instant::now();
    ctx.cluster.power_off().await?;
    let off = started.elapsed();
    ctx.wave()?;
    tokio::time::sleep(down).await;
    let booted = ctx.cluster.boot().await?;
    let ended = Instant::now();
    log(&format!(
        "node powered off in {off:.1?}, down {down:.1?}, Ready again {booted:.1?} after its start"
    ));
    Ok(Outcome {
        ended,
        lasted: ended - started,
        notes: vec![format!(
            "off for {:.1} s; the node Ready {:.1} s after its start",
            (off + down).as_secs_f64(),
            booted.as_secs_f64()
        )],
    })
}
