//! The `terdut.ryuvia.com/v1alpha1` API: the three CRDs of docs/design.md §3, their schemas (with
//! the CEL rules that make a bad object fail at admission) and pure helpers over them.
//!
//! This crate carries no client and no runtime: the operator, the CRD generator and the tests
//! all build on the same types, so the committed YAML is always what the code means.

pub mod duration;
pub mod health;
pub mod manifest;
pub mod v1alpha1;

pub use duration::{DurationError, GoDuration};

/// The API group of every kind here (docs/design.md §3).
pub const GROUP: &str = "terdut.ryuvia.com";
/// The one served and stored version.
pub const VERSION: &str = "v1alpha1";
