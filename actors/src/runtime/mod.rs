//! Operator-process infrastructure: HTTP endpoints and metrics, logging, leader election,
//! Kubernetes Events, graceful shutdown, the allocator's figures, and liveness (the parts'
//! health table, the stall watchdog, the test hooks). Nothing here knows about terdut
//! resources.

pub mod event_series;
pub mod events;
pub mod exposition;
pub mod faults;
pub mod health;
pub mod heap_stats;
pub mod hook_http;
pub mod http;
pub mod leader;
pub mod leader_pod;
pub mod metrics;
pub mod shutdown;
pub mod telemetry;
pub mod watchdog;
