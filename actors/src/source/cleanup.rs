//! The IO of a TerdutAlertSource's deletion: answers the questions of its plan (`finalize.rs`),
//! one read, write or server call each; what to do with the answers is the plan's, and
//! releasing the finalizer is the pipeline driver's (`pipeline::deletion`).

use std::sync::Arc;

use k8s_openapi::api::core::v1::Secret;
use kube::ResourceExt;
use kube::api::{Api, PostParams};
use kube::runtime::reflector::ObjectRef;
use terdut_crds::v1alpha1::{TerdutAlertSource, TerdutTeam};

use super::SourceMemory;
use super::finalize::{self, Facts, Question, detached};
use super::names::{FINALIZER, external_id, secret_name};
use super::observe::{self, Read, verify_team};
use super::plan::desired;
use super::status::DesiredStatus;
use crate::api::{ApiError, Id, TerdutClient};
use crate::context::Ctx;
use crate::error::{KubeCall, ReconcileError};
use crate::key::ObjectKey;
use crate::pipeline::{Deletion, Note, Pass, Step};
use crate::server::observe::team_server_key;
use crate::tree::Credentials;
use crate::write::finalizer;

/// The TerdutAlertSource's deletion.
#[derive(Debug)]
pub struct SourceDeletion;

impl Deletion for SourceDeletion {
    type Object = TerdutAlertSource;
    type Memory = SourceMemory;
    type Desired = DesiredStatus;
    type Facts = Facts;
    type Question = Question;

    const FINALIZER: Option<&'static str> = Some(FINALIZER);

    fn step(
        source: &TerdutAlertSource,
        _memory: &SourceMemory,
        facts: &Facts,
    ) -> Step<Question, DesiredStatus> {
        finalize::step(source, facts)
    }

    async fn learn<'a>(
        pass: Pass<'a>,
        source: &'a TerdutAlertSource,
        question: Question,
        f: &'a mut Facts,
        _memory: &'a mut SourceMemory,
    ) -> Result<(), ReconcileError> {
        let ctx = pass.ctx;
        let key = ObjectKey::of(source);
        let uid = source.uid().unwrap_or_default();
        match question {
            Question::SecretLive => {
                f.secret_live =
                    Some(live::<Secret>(ctx, &key.namespace, &secret_name(&key.name)).await?);
            }
            Question::Detach => {
                let Some(Some(secret)) = f.secret_live.take() else {
                    return Err(unasked("detaching a Secret it did not read", source));
                };
                let name = secret_name(&key.name);
                let secrets: Api<Secret> = Api::namespaced(ctx.kube.clone(), &key.namespace);
                let replaced = secrets
                    .replace(&name, &PostParams::default(), &detached(secret, &uid))
                    .await
                    .map_err(|e| {
                        ReconcileError::kube(
                            KubeCall::DetachWebhookSecret,
                            format!("Secret {}/{name}", key.namespace),
                            e,
                        )
                    })?;
                ctx.metrics.kube_write("Secret", "replace");
                f.secret_live = Some(Some(replaced));
                f.detached = true;
            }
            Question::Team => {
                let team_name = &source.spec.team_ref.name;
                let cached = ctx
                    .stores
                    .teams
                    .get(&ObjectRef::new(team_name).within(&key.namespace));
                f.team = Some(match cached {
                    Some(t) => Some(t),
                    None => live::<TerdutTeam>(ctx, &key.namespace, team_name)
                        .await?
                        .map(Arc::new),
                });
            }
            Question::Server => {
                let Some(Some(team)) = &f.team else {
                    return Err(unasked("the server of a team it did not find", source));
                };
                let server = team_server_key(team);
                let cached = ctx
                    .stores
                    .servers
                    .get(&ObjectRef::new(&server.name).within(&server.namespace))
                    .is_some();
                f.server = Some(if cached {
                    None
                } else {
                    Some(crate::team::observe::uncached(ctx, &server).await?)
                });
            }
            Question::Secret => {
                f.secret = Some(
                    observe::secret(
                        ctx,
                        &key.namespace,
                        &secret_name(&key.name),
                        &uid,
                        Read::Cache { checked: None },
                    )
                    .await?,
                );
            }
            Question::Access => {
                let Some(Some(team)) = &f.team else {
                    return Err(unasked("the access to a team it did not find", source));
                };
                let server = team_server_key(team);
                f.access = Some(pass.parent.access(ctx, &server, &key.namespace).await);
            }
            Question::VerifyTeam(team_id) => {
                let client = client(f, source)?;
                let check =
                    verify_team(&client, team_id, &key.namespace, &source.spec.team_ref.name)
                        .await?;
                f.team_check = Some(check);
            }
            Question::Integration { team_id, id } => {
                let client = client(f, source)?;
                let want = external_id(&key.namespace, &key.name);
                f.verified = Some(match client.get_integration(team_id, id).await {
                    Ok(i) if i.id == id && i.external_id == want => Some(id),
                    // Someone else's id in a tenant-writable hint: never deleted.
                    Ok(_) | Err(ApiError::NotFound) => None,
                    Err(e) => return Err(e.into()),
                });
            }
            Question::ByExternalId { team_id } => {
                let client = client(f, source)?;
                f.by_external_id = Some(by_external_id(ctx, source, &client, team_id).await?);
            }
            Question::Delete { team_id, id } => {
                let client = client(f, source)?;
                f.deleted = Some(client.delete_integration(team_id, id).await?);
            }
        }
        Ok(())
    }

    fn failed(_source: &TerdutAlertSource, error: &ReconcileError) -> Option<Note> {
        Some(finalize::failed(error))
    }
}

/// The client the plan's access answered with.
fn client(f: &Facts, source: &TerdutAlertSource) -> Result<Arc<TerdutClient>, ReconcileError> {
    match f.access.as_ref().map(|a| &a.credentials) {
        Some(Credentials::Ready(client)) => Ok(client.clone()),
        _ => Err(unasked("a server call without a client", source)),
    }
}

/// A plan that asks what it cannot have asked yet is a bug in the plan.
fn unasked(what: &str, source: &TerdutAlertSource) -> ReconcileError {
    ReconcileError::Invalid(format!(
        "the deletion plan of TerdutAlertSource {} asked for {what}",
        ObjectKey::of(source)
    ))
}

/// The id of this source's integration on team `team_id`, found by its external_id, for a
/// deletion that knows no (live) id. The POST may create: only for the object itself, still
/// holding the finalizer (`None` otherwise: nothing to do). A pass on a stale copy after the
/// release would make an integration that, were the operator killed before the DELETE that
/// follows, no CR is left to delete. Any key in the answer is dropped unread.
async fn by_external_id(
    ctx: &Ctx,
    source: &TerdutAlertSource,
    client: &TerdutClient,
    team_id: Id,
) -> Result<Option<Id>, ReconcileError> {
    let key = ObjectKey::of(source);
    let live = live::<TerdutAlertSource>(ctx, &key.namespace, &key.name).await?;
    if !live.is_some_and(|l| l.uid() == source.uid() && finalizer::has(&l, FINALIZER)) {
        return Ok(None);
    }
    let new = desired(source).new_integration(external_id(&key.namespace, &key.name));
    Ok(Some(
        client
            .create_integration(team_id, &new)
            .await?
            .integration()
            .id,
    ))
}

/// The object read live. Releasing the finalizer because the team or server is gone abandons
/// the integration on the server, so their absence from the cache is never enough: right after
/// a restart the cache may not have listed them yet, and an integration released on that
/// word stays on the server with no CR left to delete it (found by `just chaos`).
async fn live<K>(ctx: &Ctx, namespace: &str, name: &str) -> Result<Option<K>, ReconcileError>
where
    K: kube::Resource<Scope = kube::core::NamespaceResourceScope, DynamicType = ()>
        + Clone
        + serde::de::DeserializeOwned
        + std::fmt::Debug,
{
    Api::<K>::namespaced(ctx.kube.clone(), namespace)
        .get_opt(name)
        .await
        .map_err(|e| {
            ReconcileError::kube(
                KubeCall::ReadSourceParent,
                format!("{} {namespace}/{name}", K::kind(&())),
                e,
            )
        })
}
