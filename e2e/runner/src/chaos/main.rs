//! `terdut-chaos` (`just chaos`, `just chaos-long`): a reproducible kill-anywhere run against
//! the local control plane that e2e/chaos.sh starts (through e2e/local-up.sh, the operator
//! under exactly the chart's RBAC). One TerdutServer, the stand-in on a data file, the
//! operator as a process with test hooks; then storms (operator SIGKILLs while K teams and
//! sources are created and changed, stand-in restarts, kube-apiserver restarts, stand-in
//! faults, a conflicting kube writer, two replicas with the leader killed), each followed by
//! the invariants of docs/reliability.md. The seed fixes the workload and the kill delays;
//! where a kill lands still depends on timing, which is the point. Ends with
//! `chaos: N passed, M failed`, exit status 1 on any failure.

mod apiserver;
mod args;
mod chaos;
mod cluster;
mod conflicts;
mod cost;
mod counts;
mod faults;
mod invariants;
mod killer;
mod leader;
mod measure;
mod pair;
mod pyrandom;
mod report;
mod run;
mod storms;
mod verify;
mod workload;
mod world;

use std::process::ExitCode;

use clap::Parser as _;

use crate::chaos::Chaos;

#[tokio::main]
async fn main() -> ExitCode {
    let plan = match args::Args::parse().plan() {
        Ok(p) => p,
        Err(e) => {
            eprintln!("terdut-chaos: {e:#}");
            return ExitCode::from(2);
        }
    };
    let mut chaos = match Chaos::new(plan).await {
        Ok(c) => c,
        Err(e) => {
            report::log(&format!("FAIL the run could not start: {e:#}"));
            println!("chaos: 0 passed, 1 failed");
            return ExitCode::FAILURE;
        }
    };
    if let Err(e) = chaos.run().await {
        // A broken run is one more failure, still reported.
        chaos
            .report
            .check("the run completed", false, &format!("{e:#}"));
    }
    chaos.stop();
    println!("{}", chaos.report.verdict());
    if chaos.report.failed() == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    }
}
