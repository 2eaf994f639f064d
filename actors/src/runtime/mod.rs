//! Operator-process infrastructure: HTTP endpoints and metrics, logging, leader election,
//! Kubernetes Events and graceful shutdown. Nothing here knows about terdut resources.

pub mod event_series;
pub mod events;
pub mod exposition;
pub mod http;
pub mod leader;
pub mod metrics;
pub mod shutdown;
pub mod telemetry;
