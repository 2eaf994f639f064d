//! The TerdutServer actor's pure half: builders, decisions and status (issue 4, part 3).
//! Nothing here does IO; the actor observes, calls [`plan::plan`], applies and writes status.

pub mod actor;
pub mod apply;
pub mod database;
pub mod deployment;
pub mod drift;
pub mod env;
pub mod key;
pub mod names;
pub mod observe;
pub mod pdb;
pub mod plan;
pub mod pod_security;
pub mod references;
pub mod service;
pub mod status;
pub mod warning;
