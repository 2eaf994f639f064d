//! Test hooks of the TerdutAlertSource actor, active only when the operator runs with
//! `test_hooks` (never in production). They prove the crash-window recovery by crashing the
//! actor at the exact point it must survive, not only by reasoning about it.

use std::collections::HashSet;
use std::sync::{LazyLock, Mutex};

use kube::ResourceExt;
use terdut_crds::v1alpha1::TerdutAlertSource;

use crate::api::Id;
use crate::context::Ctx;
use crate::server::TEST_FAULT_ANNOTATION;

/// Annotation value: panic right after the POST that created the integration and before the
/// webhook Secret is written, once per object (a restarted actor must recover, not crash again).
pub const CRASH_AFTER_CREATE: &str = "crash-after-create";

/// Objects (by uid) whose one-shot fault already fired in this process.
static FIRED: LazyLock<Mutex<HashSet<String>>> = LazyLock::new(Default::default);

/// Called between the POST and the Secret write. Panics when the hook is armed on `source`.
/// The panic message names the integration id only: the key dies with the actor, unseen.
pub fn after_create(ctx: &Ctx, source: &TerdutAlertSource, created: Id) {
    if !ctx.config.test_hooks
        || source
            .annotations()
            .get(TEST_FAULT_ANNOTATION)
            .map(String::as_str)
            != Some(CRASH_AFTER_CREATE)
    {
        return;
    }
    let uid = source.uid().unwrap_or_default();
    let first = FIRED
        .lock()
        .map(|mut fired| fired.insert(uid))
        .unwrap_or(false);
    if first {
        panic!(
            "injected fault on TerdutAlertSource {}: crashed after creating integration {created}, \
             before writing its Secret",
            source.name_any()
        );
    }
}
