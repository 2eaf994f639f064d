//! The order of a run (docs/reliability.md "`just chaos`"): bring-up, the create storm, per
//! round the change and stand-in storms, then the kube-apiserver, stand-in fault,
//! conflicting-writer and leader storms, each followed by the invariants; the final checks,
//! the counts and the figures.

use std::time::Instant;

use crate::chaos::Chaos;
use crate::cost::Cost;
use crate::counts::bump;
use crate::measure::apiserver_409s;
use crate::report::{log, summary};
use crate::{apiserver, conflicts, faults, leader, storms};

impl Chaos {
    pub async fn run(&mut self) -> anyhow::Result<()> {
        let started = Instant::now();
        log(&self.plan.describe());
        self.bring_up().await?;
        let kc = storms::create(self).await?;
        self.verify("create+kill", None, &kc).await?;
        for r in 1..=self.plan.rounds {
            if self.plan.runs("change") {
                let before = self.fingerprints().await?;
                let kc = storms::change(self).await?;
                self.verify(&format!("round {r} change+kill"), Some(&before), &kc)
                    .await?;
            }
            if self.plan.runs("standin") {
                let before = self.fingerprints().await?;
                let kc = storms::standin(self).await?;
                self.verify(&format!("round {r} stand-in restarts"), Some(&before), &kc)
                    .await?;
            }
            bump(&self.counts.iterations, 1);
        }
        if self.plan.runs("apiserver") {
            self.apiserver_storm().await?;
        }
        if self.plan.runs("faults") {
            self.fault_storm().await?;
        }
        if self.plan.runs("conflicts") {
            self.conflict_storm().await?;
        }
        if self.plan.runs("leader") {
            self.leader_storm().await?;
        }
        self.final_checks()?;
        log(&format!(
            "{}, duration {:.0}s, operator logs in {}",
            self.counts.describe(),
            started.elapsed().as_secs_f64(),
            self.work.display()
        ));
        self.report.print_figures();
        Ok(())
    }

    async fn apiserver_storm(&mut self) -> anyhow::Result<()> {
        if self.cluster.is_none() {
            self.report.check(
                "kube-apiserver restarts possible (LOCAL_CLUSTER_PID set)",
                false,
                "not set",
            );
            return Ok(());
        }
        let before = self.fingerprints().await?;
        let cost = Cost::start(&self.http, &self.metrics_url, &self.operator_log).await?;
        let (kc, downtimes) = apiserver::storm(self).await?;
        self.verify("kube-apiserver restarts", Some(&before), &kc)
            .await?;
        self.report.figure(
            "kube-apiserver restart (signal to ready)",
            summary(&downtimes),
        );
        let spent = cost.finish(&self.http).await?;
        self.report
            .figure("kube-apiserver storm cost", spent.describe());
        Ok(())
    }

    async fn fault_storm(&mut self) -> anyhow::Result<()> {
        let before = self.fingerprints().await?;
        self.admin.reset_calls().await?;
        let cost = Cost::start(&self.http, &self.metrics_url, &self.operator_log).await?;
        let out = faults::storm(self).await?;
        let api_calls: u64 = self
            .admin
            .calls()
            .await?
            .0
            .iter()
            .filter(|(e, _)| e.contains(" /api/"))
            .map(|(_, n)| n)
            .sum();
        let spent = cost.finish(&self.http).await?;
        self.verify(
            "stand-in faults (cleared)",
            Some(&before),
            &out.kind_changed,
        )
        .await?;
        self.report.figure(
            "stand-in faults: with the faults still on,",
            match out.took {
                Some(t) => format!("converged after {t:.0}s"),
                None => format!(
                    "{} objects still pending after {}s",
                    out.pending, self.plan.faults_on_wait
                ),
            },
        );
        bump(&self.counts.faults, out.resets + out.errors);
        self.report.figure(
            "stand-in faults: calls to /api/ with faults on",
            format!(
                "{api_calls}, of which {} reset and {} answered 5xx",
                out.resets, out.errors
            ),
        );
        self.report.figure("stand-in faults cost", spent.describe());
        self.check_proportionate("stand-in faults", &spent);
        Ok(())
    }

    async fn conflict_storm(&mut self) -> anyhow::Result<()> {
        let before = self.fingerprints().await?;
        let c409 = apiserver_409s(&self.kube.apiserver_metrics().await);
        let cost = Cost::start(&self.http, &self.metrics_url, &self.operator_log).await?;
        let (kc, writes) = conflicts::storm(self).await?;
        let spent = cost.finish(&self.http).await?;
        let after409 = apiserver_409s(&self.kube.apiserver_metrics().await);
        let answered: Vec<String> = ["terdutteams", "terdutalertsources", "secrets"]
            .iter()
            .map(|r| {
                let n = after409.get(*r).unwrap_or(&0.0) - c409.get(*r).unwrap_or(&0.0);
                format!("{r} {n:.0}")
            })
            .collect();
        // The bound counts every 409 of the window, whatever the resource: the operator's
        // conflict count also covers its server actor (Deployments, TerdutServer status),
        // which the writer does not touch but which can still meet a 409 of its own.
        let conflicts = after409.values().sum::<f64>() - c409.values().sum::<f64>();
        let requeued = spent.errors.get("kube_conflict").copied().unwrap_or(0.0);
        self.verify("conflicting writer", Some(&before), &kc)
            .await?;
        self.report.figure(
            "conflicting writer",
            format!(
                "{writes} annotation writes; the apiserver answered 409 {conflicts:.0} times \
                 ({}); {requeued:.0} passes failed on a conflict (requeued)",
                answered.join(", ")
            ),
        );
        self.report
            .figure("conflicting writer cost", spent.describe());
        self.report.check(
            &format!(
                "conflicting writer: each conflict costs at most one requeue ({requeued:.0} \
                 requeues, {conflicts:.0} 409s)"
            ),
            requeued <= conflicts,
            "",
        );
        self.check_proportionate("conflicting writer", &spent);
        Ok(())
    }

    async fn leader_storm(&mut self) -> anyhow::Result<()> {
        let before = self.fingerprints().await?;
        // The single --leader-elect=false operator makes way for the pair.
        self.operator()?.kill();
        self.pair_up = true;
        let started = Instant::now();
        let first = self.pair.start(&self.kube, &self.http).await?;
        log(&format!(
            "two replicas up, {first} leads after {:.1}s",
            started.elapsed().as_secs_f64()
        ));
        let (kc, times) = leader::storm(self).await?;
        self.verify("leader kills (two replicas)", Some(&before), &kc)
            .await?;
        for (how, t) in [("crash", &times.crash), ("voluntary", &times.voluntary)] {
            let lease: Vec<f64> = t.iter().map(|(l, _)| *l).collect();
            let ready: Vec<f64> = t.iter().map(|(_, r)| *r).collect();
            self.report.figure(
                format!("leader failover, {how}: lease taken over"),
                summary(&lease),
            );
            self.report.figure(
                format!("leader failover, {how}: new leader reconciling"),
                summary(&ready),
            );
        }
        Ok(())
    }
}
