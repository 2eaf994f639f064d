//! The node's own processes stopped and started again, for real (the processes signalled,
//! init.sh starting them again as systemd would): the kubelet and containerd restarted (the
//! pods keep running through both), CoreDNS down for the outage (every name in the cluster
//! fails to resolve, the Service names the operator reaches servers by among them).

use std::time::Instant;

use terdut_testenv::NodeComponent;
use terdut_testenv::signal::Signal;

use super::{Ctx, Outcome};
use crate::checks::log;

/// A wave, the component stopped (SIGTERM or SIGKILL, seeded), another wave while it is down
/// (2-5 s, seeded), then it starts again and serves.
pub async fn restart(ctx: &mut Ctx<'_>, component: NodeComponent) -> anyhow::Result<Outcome> {
    let signal = if ctx.rng.below(2) == 0 {
        Signal::Term
    } else {
        Signal::Kill
    };
    let down = ctx.rng.millis(2_000, 5_000);
    ctx.wave()?;
    let started = Instant::now();
    ctx.cluster.stop_component(component, signal).await?;
    ctx.wave()?;
    tokio::time::sleep(down).await;
    ctx.cluster.start_component(component).await?;
    let ended = Instant::now();
    log(&format!(
        "{} stopped ({signal:?}), down {down:.1?}, serving again after {:.1?}",
        component.name(),
        ended - started
    ));
    Ok(Outcome {
        ended,
        lasted: ended - started,
        notes: vec![format!(
            "SIG{} and {:.1} s down",
            if signal == Signal::Term {
                "TERM"
            } else {
                "KILL"
            },
            down.as_secs_f64()
        )],
    })
}

/// CoreDNS stopped for the outage, with a wave as it stops and another halfway.
pub async fn coredns_down(ctx: &mut Ctx<'_>) -> anyhow::Result<Outcome> {
    ctx.wave()?;
    let started = Instant::now();
    ctx.cluster
        .stop_component(NodeComponent::Coredns, Signal::Term)
        .await?;
    let half = ctx.outage / 2;
    tokio::time::sleep(half).await;
    ctx.wave()?;
    tokio::time::sleep(ctx.outage - half).await;
    ctx.cluster.start_component(NodeComponent::Coredns).await?;
    let ended = Instant::now();
    Ok(Outcome {
        ended,
        lasted: ended - started,
        notes: vec![],
    })
}
