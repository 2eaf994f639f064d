//! The one driver of every kind's [`Pipeline`]: one pass of one object, and the delay until
//! the next. Callable by anything that keeps a [`Memory`] per object: the tree's actors, or
//! the benchmark's kube-runtime `Controller` baselines.

use std::time::Duration;

use kube::{Resource, ResourceExt};
use terdut_crds::v1alpha1::conditions::{READY, find};
use tracing::{debug, info, warn};

use terdut_crds::v1alpha1::Management;

use super::deletion::{ACTION, Deletion, Note, Then};
use super::{Next, Observation, Pass, Pipeline, Streak, Verdict, paused_by_annotation};
use crate::context::Ctx;
use crate::crash_loop::Conditioned;
use crate::error::ReconcileError;
use crate::key::ObjectKey;
use crate::tree::Parent;
use crate::write::shared::{PausedBy, Shared};
use crate::write::{self, Managed, finalizer};

/// What the driver keeps for one object between passes.
pub struct Memory<P: Pipeline> {
    /// The object (by a hash of its uid) this memory is about: a new object under an old name
    /// (deleted and created again while the actor lived, or while a watch missed the delete)
    /// must not inherit what the old one's passes learnt, e.g. the team id it owned (ADR 0007).
    pub uid: Option<u64>,
    pub streak: Streak,
    /// The status last written (see `write::status::stale_but_equal`).
    pub written: Option<<P::Object as Managed>::Status>,
    /// The kind's own.
    pub kind: P::Memory,
}

impl<P: Pipeline> Default for Memory<P> {
    fn default() -> Self {
        Self {
            uid: None,
            streak: Streak::default(),
            written: None,
            kind: P::Memory::default(),
        }
    }
}

/// What a passivated actor hands to its next incarnation (its parent keeps it meanwhile): the
/// streak and the kind's memory, not the status last written, since passivation comes an idle
/// period after the last write, when the cache shows it. Its own type, without room for that
/// status, since every passive object keeps one (~230 bytes less per idle team than a whole
/// [`Memory`], docs/performance.md run 18).
pub struct Keepsake<P: Pipeline> {
    uid: Option<u64>,
    streak: Streak,
    kind: P::Memory,
}

impl<P: Pipeline> std::fmt::Debug for Keepsake<P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Keepsake")
            .field("kind", &P::KIND)
            .field("streak", &self.streak)
            .finish_non_exhaustive()
    }
}

impl<P: Pipeline> Memory<P> {
    /// See [`Keepsake`].
    pub fn keepsake(&self) -> Keepsake<P> {
        Keepsake {
            uid: self.uid,
            streak: self.streak.clone(),
            kind: self.kind.clone(),
        }
    }

    /// The memory a new incarnation starts with, from its predecessor's keepsake.
    pub fn resume(keepsake: Keepsake<P>) -> Self {
        Self {
            uid: keepsake.uid,
            streak: keepsake.streak,
            written: None,
            kind: keepsake.kind,
        }
    }
}

/// More questions than any kind's deletion plan asks in one pass: a plan that keeps asking
/// is a bug, failed rather than looped on.
const MAX_QUESTIONS: usize = 32;

/// The hash [`Memory::uid`] holds: 8 bytes instead of the 36-character uid.
fn uid_hash(uid: &Option<String>) -> Option<u64> {
    use std::hash::{Hash as _, Hasher as _};
    uid.as_ref().map(|uid| {
        let mut h = std::hash::DefaultHasher::new();
        uid.hash(&mut h);
        h.finish()
    })
}

impl<P: Pipeline> std::fmt::Debug for Memory<P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Memory")
            .field("kind", &P::KIND)
            .field("streak", &self.streak)
            .finish_non_exhaustive()
    }
}

/// Runs the passes of one kind; cheap to clone when `P` is.
#[derive(Clone, Debug)]
pub struct Driver<P> {
    pub ctx: Ctx,
    pub pipeline: P,
}

impl<P: Pipeline> Driver<P> {
    pub fn new(ctx: Ctx, pipeline: P) -> Self {
        Self { ctx, pipeline }
    }

    /// One pass over `object` (the newest copy the caller has); returns when the next pass is
    /// due. Never fails: failures are in the status, Events, logs, metrics and the delay.
    pub async fn reconcile(
        &self,
        parent: &Parent,
        object: &P::Object,
        memory: &mut Memory<P>,
    ) -> Duration {
        let ctx = &self.ctx;
        let kind = P::KIND.label();
        let uid = uid_hash(&object.meta().uid);
        if memory.uid != uid {
            *memory = Memory {
                uid,
                ..Memory::default()
            };
        }
        if let Some(keeper) = self.kept_elsewhere(object).await {
            debug!(kind, object = %ObjectKey::of(object), %keeper, "selected by another instance too; left to it");
            return memory.streak.after(Next::Resync, &ctx.config);
        }
        let started = ctx.clock.now();
        let pass = Pass { ctx, parent };
        let paused = if paused_by_annotation(object) {
            Some(PausedBy::Annotation)
        } else {
            P::paused_by(ctx, object)
        };
        let result = if object.meta().deletion_timestamp.is_some() {
            // Deletion cleans up even while paused (docs/design.md §5 "Pause").
            self.finalize(pass, object, memory).await
        } else if let Some(by) = paused {
            debug!(kind, object = %ObjectKey::of(object), ?by, "paused");
            self.pipeline
                .read_only(pass, object, None, &mut memory.kind)
                .await;
            let shared = Shared {
                paused: Some(by),
                ..Shared::default()
            };
            write::status::write::<_, P::Desired>(
                ctx,
                object,
                None,
                P::patch,
                &mut memory.written,
                &shared,
            )
            .await
            .map(|()| Next::Resync)
        } else {
            self.converge(pass, object, memory).await
        };
        let took = ctx.clock.now() - started;
        let next = match result {
            Ok(next) => {
                ctx.metrics.reconciled(kind, next.outcome(), took);
                next
            }
            Err(e) => {
                ctx.metrics.reconciled(kind, "error", took);
                ctx.metrics.reconcile_error(kind, e.category());
                let key = ObjectKey::of(object);
                let next = if e.is_retryable() {
                    Next::Failed
                } else {
                    Next::Resync
                };
                // One warn per failure streak, debug after: no error-per-retry floods.
                if memory.streak.failures == 0 {
                    warn!(kind, object = %key, error = %e, "reconcile failed");
                } else {
                    debug!(kind, object = %key, error = %e, attempt = memory.streak.failures + 1, "reconcile failed again");
                }
                if let Some(desired) = P::failed(object, &e)
                    && let Err(w) = write::status::write(
                        ctx,
                        object,
                        Some(&desired),
                        P::patch,
                        &mut memory.written,
                        &Shared::default(),
                    )
                    .await
                {
                    debug!(kind, object = %key, error = %w, "could not record the failure in status");
                }
                // Non-retryable errors count once and wait for a change or the resync.
                if next == Next::Resync {
                    memory.streak.failures = memory.streak.failures.saturating_add(1);
                }
                next
            }
        };
        memory.streak.after(next, &ctx.config)
    }

    /// Overlapping shards (`routing::claims`): when another live instance selects this object
    /// too and keeps it, this instance changes nothing of it and says so (a Warning Event,
    /// folded into one series by repeats); the keeper's name.
    async fn kept_elsewhere(&self, object: &P::Object) -> Option<String> {
        let ctx = &self.ctx;
        let meta = object.meta();
        let namespace = meta.namespace.as_deref().unwrap_or_default();
        let namespace_labels = ctx
            .stores
            .namespaces
            .get(&kube::runtime::reflector::ObjectRef::new(namespace))
            .map(|n| n.metadata.labels.clone().unwrap_or_default());
        let labels = meta.labels.clone().unwrap_or_default();
        let keeper = ctx
            .claims
            .kept_by(namespace, namespace_labels.as_ref(), &labels)?;
        let show = |s: &Option<String>| s.clone().unwrap_or_else(|| "(none)".into());
        let note = format!(
            "this {} is selected by two operator instances: {} (--selector {}) and {} \
             (--selector {}); {} reconciles it and {} leaves it alone. Change the selectors, or \
             this object's labels, so that exactly one instance selects it",
            P::KIND.resource(),
            ctx.config.instance_name,
            show(&ctx.config.selector),
            keeper.instance,
            show(&keeper.scope.selector),
            keeper.instance,
            ctx.config.instance_name,
        );
        warn!(kind = P::KIND.label(), object = %ObjectKey::of(object), keeper = %keeper.instance, "selected by two operator instances");
        write::events::publish(
            ctx,
            object,
            crate::runtime::events::EventType::Warning,
            "SelectedByTwoInstances",
            "Reconcile",
            note,
        )
        .await;
        Some(keeper.instance)
    }

    async fn converge(
        &self,
        pass: Pass<'_>,
        object: &P::Object,
        memory: &mut Memory<P>,
    ) -> Result<Next, ReconcileError> {
        let observed = match self
            .pipeline
            .observe(pass, object, &mut memory.kind)
            .await?
        {
            Observation::Go(observed) => observed,
            Observation::End(outcome) => return self.ended(pass, object, memory, outcome).await,
        };
        let plan = P::plan(object, &observed);
        debug!(kind = P::KIND.label(), object = %ObjectKey::of(object), ?plan, "planned");
        let changes = P::changes(object, &observed, &plan);
        if object.management() == Management::ObserveOnly {
            // docs/design.md §5 "Management": the plan, in status; nothing else is written.
            self.pipeline
                .read_only(pass, object, Some(&observed), &mut memory.kind)
                .await;
            let verdict = P::planned(object, &observed, &plan, changes.as_deref(), &memory.kind);
            let shared = Shared {
                plan: changes,
                ..Shared::default()
            };
            return self.conclude(object, verdict, memory, &shared).await;
        }
        // The one place a finalizer is added (`finalize` is where it is released).
        if P::holds(&observed)
            && let Some(name) = <P::Deletion as Deletion>::FINALIZER
        {
            finalizer::add(&self.ctx, object, name).await?;
        }
        let applied = self
            .pipeline
            .apply(pass, object, observed, plan, &mut memory.kind)
            .await?;
        let verdict = P::status(object, &applied);
        let shared = Shared {
            plan: Some(vec![]),
            applied: changes.filter(|_| P::completed(&applied)),
            ..Shared::default()
        };
        self.conclude(object, verdict, memory, &shared).await
    }

    /// A pass that observing ended with `outcome`: its status, and no plan (`ObserveOnly`
    /// leaves the status's plan as it is, as when nothing could be planned; `Full` clears it,
    /// as after an apply).
    async fn ended(
        &self,
        pass: Pass<'_>,
        object: &P::Object,
        memory: &mut Memory<P>,
        outcome: P::Applied,
    ) -> Result<Next, ReconcileError> {
        let observe_only = object.management() == Management::ObserveOnly;
        if observe_only {
            self.pipeline
                .read_only(pass, object, None, &mut memory.kind)
                .await;
        }
        let shared = Shared {
            plan: (!observe_only).then(Vec::new),
            ..Shared::default()
        };
        self.conclude(object, P::status(object, &outcome), memory, &shared)
            .await
    }

    /// The end of every pass that converges (applied, observed only, or ended by observing):
    /// the verdict's Event, then its status with the `shared` part.
    async fn conclude(
        &self,
        object: &P::Object,
        verdict: Verdict<P::Desired>,
        memory: &mut Memory<P>,
        shared: &Shared,
    ) -> Result<Next, ReconcileError> {
        self.announce(object, &verdict).await;
        write::status::write(
            &self.ctx,
            object,
            Some(&verdict.desired),
            P::patch,
            &mut memory.written,
            shared,
        )
        .await?;
        Ok(verdict.next)
    }

    /// A pass of an object being deleted: the kind's plan ([`Deletion::step`]) asked until it
    /// releases the finalizer or waits. The only place a finalizer is released after
    /// deletion, so every kind releases it the same way: after what the plan says first, and
    /// before what it says of the release.
    async fn finalize(
        &self,
        pass: Pass<'_>,
        object: &P::Object,
        memory: &mut Memory<P>,
    ) -> Result<Next, ReconcileError> {
        let result = self.delete(pass, object, memory).await;
        if let Err(e) = &result
            && let Some(note) = <P::Deletion as Deletion>::failed(object, e)
        {
            self.tell(object, &note, &mut memory.kind).await;
        }
        result
    }

    async fn delete(
        &self,
        pass: Pass<'_>,
        object: &P::Object,
        memory: &mut Memory<P>,
    ) -> Result<Next, ReconcileError> {
        let ctx = &self.ctx;
        let kind = P::KIND.label();
        let Some(name) = <P::Deletion as Deletion>::FINALIZER.filter(|f| finalizer::has(object, f))
        else {
            // Not ours to hold: the API server removes the object once others let go.
            debug!(kind, object = %ObjectKey::of(object), "being deleted; no finalizer of ours");
            return Ok(Next::Resync);
        };
        let mut facts = <P::Deletion as Deletion>::Facts::default();
        let mut told = 0;
        // Each answer settles one question; a plan asks a handful of them.
        for _ in 0..MAX_QUESTIONS {
            let step = <P::Deletion as Deletion>::step(object, &memory.kind, &facts);
            for note in step.notes.iter().skip(told) {
                self.tell(object, note, &mut memory.kind).await;
            }
            told = told.max(step.notes.len());
            match step.then {
                Then::Ask(question) => {
                    debug!(kind, object = %ObjectKey::of(object), ?question, "deletion asks");
                    <P::Deletion as Deletion>::learn(
                        pass,
                        object,
                        question,
                        &mut facts,
                        &mut memory.kind,
                    )
                    .await?;
                }
                Then::Gone => return Ok(Next::Resync),
                Then::Release { after, log } => {
                    if let Some(log) = log {
                        info!(kind, object = %ObjectKey::of(object), "{log}");
                    }
                    finalizer::release(ctx, object, name).await?;
                    <P::Deletion as Deletion>::released(ctx, object).await;
                    for note in &after {
                        self.tell(object, note, &mut memory.kind).await;
                    }
                    return Ok(Next::Resync);
                }
                Then::Wait { desired, next } => {
                    if let Some(desired) = desired {
                        write::status::write(
                            ctx,
                            object,
                            Some(&desired),
                            P::patch,
                            &mut memory.written,
                            &Shared::default(),
                        )
                        .await?;
                    }
                    return Ok(next);
                }
            }
        }
        Err(ReconcileError::Invalid(format!(
            "the deletion plan of {} {} asked more than {MAX_QUESTIONS} questions",
            P::KIND.resource(),
            ObjectKey::of(object)
        )))
    }

    /// Publishes a deletion [`Note`].
    async fn tell(&self, object: &P::Object, note: &Note, memory: &mut P::Memory) {
        let message = note.message.clone();
        match <P::Deletion as Deletion>::warned(memory).filter(|_| note.once) {
            Some(warned) => {
                write::events::warn_once(&self.ctx, object, warned, note.reason, ACTION, message)
                    .await;
            }
            None => {
                write::events::publish(&self.ctx, object, note.type_, note.reason, ACTION, message)
                    .await;
            }
        }
    }

    /// Publishes the verdict's Event when the object's Ready condition does not say it yet:
    /// once per reason (or message, when asked), not once per retry.
    async fn announce(&self, object: &P::Object, verdict: &Verdict<P::Desired>) {
        let Some(a) = &verdict.announce else {
            return;
        };
        let conditions = object.conditions();
        let current = find(&conditions, READY);
        let same = current
            .is_some_and(|c| c.reason == a.reason && (!a.on_message || c.message == a.message));
        if same {
            return;
        }
        if a.type_ == crate::runtime::events::EventType::Warning {
            warn!(kind = P::KIND.label(), object = %ObjectKey::of(object), reason = %a.reason, message = %a.message, "not ready");
        } else {
            debug!(kind = P::KIND.label(), object = %object.name_any(), reason = %a.reason, "announced");
        }
        write::events::publish(
            &self.ctx,
            object,
            a.type_,
            &a.reason,
            "Reconcile",
            a.message.clone(),
        )
        .await;
    }
}
