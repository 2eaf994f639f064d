//! Whether the operator key may be sent to a TerdutServer's address (docs/design.md §6 step 5,
//! docs/security.md "The server's key goes only to the server"). PURE: the caller reads the
//! Service and the Deployment live, right before it sends the key (`client.rs`), because the
//! label-filtered caches cannot show a foreign object that replaced the operator's own.
//!
//! The key goes to the URL of the Service named after the server, whose endpoints are the pods
//! its selector picks. Whoever controls that Service (an `ExternalName` to an outside host, a
//! selector onto their own pod) or a Deployment under the server's name (pods carrying the
//! selector's labels) would receive the key, and with it every attached tenant's teams. So the
//! key is sent only while the Service is controlled by this TerdutServer and is what the
//! operator applies (a `ClusterIP` selecting the server's pods, no external name), and the
//! Deployment, if there is one, is controlled by it too. Otherwise the children wait, with the
//! reason in `KeyAccepted` and in their own `WaitingForServer` message.

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::names::{Parent, deployment_name, selector_labels, service_name};
use super::service::SERVICE_TYPE;

/// May the key be sent?
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Endpoint {
    /// The Service and the Deployment are this TerdutServer's own.
    Trusted,
    /// Not now; why, in words a user acts on.
    Withheld(String),
}

/// Whether `meta` carries a controller reference to `parent`'s uid.
pub fn controlled_by(meta: &ObjectMeta, parent: &Parent) -> bool {
    meta.owner_references
        .iter()
        .flatten()
        .any(|o| o.controller == Some(true) && o.uid == parent.owner.uid)
}

/// Judges the Service and the Deployment as read live (`None`: not there).
pub fn judge(
    parent: &Parent,
    service: Option<&Service>,
    deployment: Option<&ObjectMeta>,
) -> Endpoint {
    let svc_name = service_name(&parent.name);
    let Some(svc) = service else {
        return Endpoint::Withheld(format!(
            "its Service {svc_name} does not exist yet, so nothing the operator made answers at \
             its address"
        ));
    };
    if !controlled_by(&svc.metadata, parent) {
        return Endpoint::Withheld(format!(
            "Service {svc_name} at its address is not controlled by this TerdutServer \
             (ResourceNotOwned): whoever made it could receive the key"
        ));
    }
    let spec = svc.spec.clone().unwrap_or_default();
    let kind = spec.type_.as_deref().unwrap_or(SERVICE_TYPE);
    if kind != SERVICE_TYPE || spec.external_name.is_some() {
        return Endpoint::Withheld(format!(
            "Service {svc_name} has been changed to type {kind}{}; the operator puts its \
             ClusterIP back at its next pass",
            spec.external_name
                .as_deref()
                .map(|n| format!(" (external name {n})"))
                .unwrap_or_default()
        ));
    }
    if spec.selector.as_ref() != Some(&selector_labels(&parent.name)) {
        return Endpoint::Withheld(format!(
            "Service {svc_name} no longer selects only this server's pods (its selector was \
             changed); the operator puts it back at its next pass"
        ));
    }
    if let Some(d) = deployment
        && !controlled_by(d, parent)
    {
        return Endpoint::Withheld(format!(
            "Deployment {} is not controlled by this TerdutServer (ResourceNotOwned): its pods \
             could answer at the server's address",
            deployment_name(&parent.name)
        ));
    }
    Endpoint::Trusted
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::names::tests::{byo_server, parent};
    use crate::server::service::service;
    use k8s_openapi::api::core::v1::ServiceSpec;

    fn ours() -> Service {
        service(&parent(), &byo_server().spec)
    }

    fn owned_meta() -> ObjectMeta {
        ObjectMeta {
            name: Some("terdut".into()),
            owner_references: Some(vec![parent().owner]),
            ..Default::default()
        }
    }

    fn withheld(e: Endpoint) -> String {
        match e {
            Endpoint::Withheld(why) => why,
            Endpoint::Trusted => panic!("trusted"),
        }
    }

    #[test]
    fn the_operators_own_service_and_deployment_are_trusted() {
        assert_eq!(
            judge(&parent(), Some(&ours()), Some(&owned_meta())),
            Endpoint::Trusted
        );
        // No Deployment yet (the database is not wired): the Service alone decides.
        assert_eq!(judge(&parent(), Some(&ours()), None), Endpoint::Trusted);
    }

    #[test]
    fn no_service_means_no_key() {
        assert!(withheld(judge(&parent(), None, None)).contains("does not exist"));
    }

    #[test]
    fn a_foreign_service_gets_no_key_whatever_it_looks_like() {
        // A copy of ours, labels and all, without the controller reference.
        let mut copy = ours();
        copy.metadata.owner_references = None;
        assert!(withheld(judge(&parent(), Some(&copy), None)).contains("ResourceNotOwned"));
        // An owner reference to the server that is not a controller reference.
        let mut weak = ours();
        weak.metadata.owner_references.as_mut().unwrap()[0].controller = Some(false);
        assert!(withheld(judge(&parent(), Some(&weak), None)).contains("not controlled"));
        // An ExternalName Service to an outside host.
        let external = Service {
            metadata: ObjectMeta {
                name: Some("terdut".into()),
                ..Default::default()
            },
            spec: Some(ServiceSpec {
                type_: Some("ExternalName".into()),
                external_name: Some("collector.example.net".into()),
                ..Default::default()
            }),
            status: None,
        };
        assert!(withheld(judge(&parent(), Some(&external), None)).contains("not controlled"));
    }

    #[test]
    fn our_service_changed_by_someone_else_gets_no_key_until_it_is_put_back() {
        let mut external = ours();
        let spec = external.spec.as_mut().unwrap();
        spec.type_ = Some("ExternalName".into());
        spec.external_name = Some("collector.example.net".into());
        let why = withheld(judge(&parent(), Some(&external), None));
        assert!(
            why.contains("ExternalName") && why.contains("collector.example.net"),
            "{why}"
        );
        let mut reselected = ours();
        reselected.spec.as_mut().unwrap().selector =
            Some([("app".to_owned(), "theirs".to_owned())].into());
        assert!(withheld(judge(&parent(), Some(&reselected), None)).contains("selector"));
        // A selector widened with a label of theirs is not ours either.
        let mut widened = ours();
        widened
            .spec
            .as_mut()
            .unwrap()
            .selector
            .as_mut()
            .unwrap()
            .insert("extra".into(), "x".into());
        assert!(withheld(judge(&parent(), Some(&widened), None)).contains("selector"));
    }

    #[test]
    fn a_foreign_deployment_under_the_servers_name_gets_no_key() {
        let theirs = ObjectMeta {
            name: Some("terdut".into()),
            ..Default::default()
        };
        let why = withheld(judge(&parent(), Some(&ours()), Some(&theirs)));
        assert!(why.contains("Deployment terdut"), "{why}");
    }
}
