//! Test hooks that kill or stall a long-lived part of the leader (docs/adr/0017-liveness.md):
//! the tests prove that each part is restarted, or fails liveness, by doing it to them.
//!
//! Compiled in, inert unless the operator runs with `--test-hooks`: [`Faults::default`] arms
//! nothing and every fault point is a no-op. Armed only through [`Faults::arm`], which the
//! in-process tests call and the loopback-only listener of `runtime/hook_http.rs` exposes to
//! the node scenario (`kubectl port-forward`, i.e. `pods/portforward` in the operator's
//! namespace). Nothing a tenant writes (an object, an annotation, a label) reaches it.

use std::collections::BTreeMap;
use std::str::FromStr;
use std::sync::{Arc, Mutex};

use tokio::sync::watch;

/// What a hook does to a part.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// Panic once, where the part runs (its task, or its actor's message handler).
    Panic,
    /// Panic at every start, for ever: the part goes past its restart limit.
    PanicAlways,
    /// End once, as if its task returned (an actor stops).
    End,
    /// Stop making progress, for ever, without ending: the stall watchdog's case.
    Stall,
}

impl Fault {
    /// Taken when it fires, or armed for every incarnation.
    fn once(self) -> bool {
        !matches!(self, Self::PanicAlways)
    }
}

impl FromStr for Fault {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "panic" => Ok(Self::Panic),
            "panic-always" => Ok(Self::PanicAlways),
            "end" => Ok(Self::End),
            "stall" => Ok(Self::Stall),
            other => Err(format!(
                "unknown fault {other:?} (panic, panic-always, end, stall)"
            )),
        }
    }
}

#[derive(Debug)]
struct Armed {
    faults: Mutex<BTreeMap<String, Fault>>,
    /// Bumped on every arming, so a waiting fault point looks again.
    changed: watch::Sender<u64>,
}

/// The armed faults by part name; clones share them. The default is inert.
#[derive(Clone, Debug, Default)]
pub struct Faults(Option<Arc<Armed>>);

impl Faults {
    /// Hooks that can be armed (`--test-hooks`).
    pub fn enabled() -> Self {
        Self(Some(Arc::new(Armed {
            faults: Mutex::default(),
            changed: watch::channel(0).0,
        })))
    }

    pub fn is_enabled(&self) -> bool {
        self.0.is_some()
    }

    /// Arms `fault` for `part`; refused when the hooks are off.
    pub fn arm(&self, part: &str, fault: Fault) -> Result<(), &'static str> {
        let armed = self.0.as_ref().ok_or("test hooks are off")?;
        armed
            .faults
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(part.to_owned(), fault);
        armed.changed.send_modify(|n| *n += 1);
        Ok(())
    }

    /// The fault armed for `part`, if any, leaving it armed.
    pub fn peek(&self, part: &str) -> Option<Fault> {
        let armed = self.0.as_ref()?;
        let faults = armed.faults.lock().unwrap_or_else(|p| p.into_inner());
        faults.get(part).copied()
    }

    /// The fault armed for `part`, if any: a one-shot fault is disarmed by taking it.
    pub fn take(&self, part: &str) -> Option<Fault> {
        let armed = self.0.as_ref()?;
        let mut faults = armed.faults.lock().unwrap_or_else(|p| p.into_inner());
        let fault = faults.get(part).copied()?;
        if fault.once() {
            faults.remove(part);
        }
        Some(fault)
    }

    /// Resolves once a fault is armed for `part` (never when the hooks are off), leaving it
    /// armed for whoever takes it.
    pub async fn armed(&self, part: &str) -> Fault {
        let Some(armed) = &self.0 else {
            return std::future::pending().await;
        };
        let mut changed = armed.changed.subscribe();
        loop {
            if let Some(fault) = self.peek(part) {
                return fault;
            }
            if changed.changed().await.is_err() {
                return std::future::pending().await;
            }
        }
    }

    /// The fault point of `part`.
    pub fn point(&self, part: &str) -> FaultPoint {
        FaultPoint {
            faults: self.clone(),
            part: part.to_owned(),
        }
    }
}

/// Where a part meets its armed fault; a no-op while none is armed.
#[derive(Clone, Debug, Default)]
pub struct FaultPoint {
    faults: Faults,
    part: String,
}

impl FaultPoint {
    /// Fires the armed fault: panics, or never returns for a stall. `true` asks the caller
    /// to end (an `End` fault).
    pub async fn reached(&self) -> bool {
        match self.faults.take(&self.part) {
            None => false,
            Some(Fault::Panic | Fault::PanicAlways) => {
                panic!("injected fault: the test hook panicked {}", self.part)
            }
            Some(Fault::End) => true,
            Some(Fault::Stall) => std::future::pending().await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn inert_hooks_arm_nothing() {
        let faults = Faults::default();
        assert!(faults.arm("writer", Fault::Panic).is_err());
        assert_eq!(faults.take("writer"), None);
    }

    #[test]
    fn a_one_shot_fault_fires_once_and_a_lasting_one_every_time() {
        let faults = Faults::enabled();
        faults.arm("writer", Fault::Panic).unwrap();
        assert_eq!(faults.take("writer"), Some(Fault::Panic));
        assert_eq!(faults.take("writer"), None);
        faults.arm("root", Fault::PanicAlways).unwrap();
        assert_eq!(faults.take("root"), Some(Fault::PanicAlways));
        assert_eq!(faults.take("root"), Some(Fault::PanicAlways));
        assert_eq!("stall".parse::<Fault>(), Ok(Fault::Stall));
        assert!("explode".parse::<Fault>().is_err());
    }

    #[tokio::test]
    async fn a_waiting_part_sees_its_fault_when_it_is_armed() {
        let faults = Faults::enabled();
        let waiter = tokio::spawn({
            let faults = faults.clone();
            async move { faults.armed("holding").await }
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        faults.arm("writer", Fault::End).unwrap();
        faults.arm("holding", Fault::Stall).unwrap();
        let fault = tokio::time::timeout(Duration::from_secs(1), waiter)
            .await
            .expect("woken")
            .unwrap();
        assert_eq!(fault, Fault::Stall);
        assert_eq!(faults.peek("holding"), Some(Fault::Stall), "left armed");
    }

    #[tokio::test]
    async fn a_fault_point_ends_or_panics_as_armed() {
        let faults = Faults::enabled();
        let point = faults.point("census");
        assert!(!point.reached().await);
        faults.arm("census", Fault::End).unwrap();
        assert!(point.reached().await);
        faults.arm("census", Fault::Panic).unwrap();
        let panicked = tokio::spawn(async move { point.reached().await }).await;
        assert!(panicked.unwrap_err().is_panic());
    }
}
