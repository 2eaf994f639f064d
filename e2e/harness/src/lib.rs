//! test env
