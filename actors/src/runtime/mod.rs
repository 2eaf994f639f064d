//! Operator-process infrastructure: HTTP endpoints and metrics, logging, leader election,
//! Kubernetes Events, graceful shutdown and the allocator's figures. Nothing here knows about
//! terdut resources.

pub mod event_series;
pub mod events;
pub mod exposition;
pub mod heap_stats;
pub mod http;
pub mod leader;
pub mod leader_pod;
pub mod metrics;
pub mod shutdown;
pub mod telemetry;
