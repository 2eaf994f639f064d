//! Supervision, reconciliation and the terdut-server API client.
pub mod api;
pub mod clock;
pub mod consent;
pub mod context;
pub mod crash_loop;
pub mod error;
pub mod informers;
pub mod key;
pub mod operator;
pub mod pacing;
pub mod pass_limit;
pub mod runtime;
pub mod server;
pub mod source;
pub mod stores;
pub mod supervisor;
pub mod team;
