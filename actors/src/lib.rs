//! Supervision, reconciliation and the terdut-server API client.
