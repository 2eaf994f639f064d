//! The terdut-server API client: the operator's only view of a terdut-server (docs/design.md §5,
//! §6).
//!
//! The contract it implements is docs/terdut-api.md; the stand-in server (`terdut-standin`)
//! implements the same file, and `actors/tests/contract.rs` runs one suite against either.
//!
//! - [`client`]: [`TerdutClient`], one per TerdutServer, a method per contract row.
//! - [`budget`]: [`AnswerBudget`], what all answers being read may hold, per server and for
//!   the process.
//! - [`wire`]: the JSON bodies, durations already in whole seconds.
//! - [`error`]: [`ApiError`], the classification of every failure.
//! - [`secret`]: [`SecretString`], which keeps keys and webhook URLs out of every log.
//! - [`metrics`]: [`ApiMetrics`], request counter and duration histogram.

pub mod budget;
pub mod client;
pub mod endpoint;
pub mod error;
pub mod metrics;
pub mod secret;
pub mod wire;

pub use budget::AnswerBudget;
pub use client::{ClientConfig, MAX_RESPONSE_BYTES, TerdutClient, init_tls};
pub use endpoint::Endpoint;
pub use error::{ApiError, TransientCause};
pub use metrics::ApiMetrics;
pub use secret::{IntegrationKey, OperatorKey, SecretString, WebhookUrl};
pub use wire::{
    CreatedIntegration, Deletion, Id, Integration, IntegrationCreate, IntegrationKind,
    IntegrationPatch, Ladder, Level, NewIntegration, OidcGroups, Switch, SwitchSpec, Target, Team,
    TeamCreate, WhoAmI,
};
