//! The TerdutAlertSource actor and its pure half (issue 6; DESIGN §4.5, §5).
//!
//! - [`plan`]: PURE decision (create, rename, recreate, fail closed, noop) from the spec, the
//!   webhook Secret and what the server said.
//! - [`secret`]: PURE builder and reader of the webhook Secret; [`status`]: PURE status.
//! - [`names`]: names, labels, annotations, the finalizer.
//! - [`resolve`]: the team and its server's credentials (DESIGN §5 "Children resolve through
//!   the team"); [`observe`]: the Secret and the integration.
//! - [`execute`]: carries out a decision against the server; [`apply`]: every Kubernetes write.
//! - [`cleanup`]: the finalizer; [`hooks`]: the crash-window test hook.
//! - [`reconcile`]: one pass, its status write and Events, the next delay (runtime-independent).
//! - [`actor`]: the actor, its factory and its timers; a thin shell over [`reconcile`].

pub mod actor;
pub mod apply;
pub mod cleanup;
pub mod execute;
pub mod hooks;
pub mod names;
pub mod observe;
pub mod plan;
pub mod reconcile;
pub mod resolve;
pub mod secret;
pub mod status;
