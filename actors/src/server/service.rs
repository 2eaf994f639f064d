//! The server's Service: `ClusterIP` only.
//!
//! External exposure (LoadBalancer, NodePort, Ingress, HTTPRoute) is a permanent non-goal
//! (docs/design.md §1): users bring their own, see `examples/networking`. The Service is also the
//! operator's own way in: `http://<server>.<namespace>.svc:<port>` (terdut-api.md "Transport").

use k8s_openapi::api::core::v1::{Service, ServicePort, ServiceSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use terdut_crds::v1alpha1::TerdutServerSpec;

use super::names::{PORT_NAME, Parent, labels, selector_labels, service_name};

/// The one Service type the operator ever creates.
pub const SERVICE_TYPE: &str = "ClusterIP";

/// Port `http` (`spec.networking.servicePort`) to the container port named `http`.
pub fn service(parent: &Parent, spec: &TerdutServerSpec) -> Service {
    Service {
        metadata: ObjectMeta {
            name: Some(service_name(&parent.name)),
            namespace: Some(parent.namespace.clone()),
            labels: Some(labels(&parent.name)),
            owner_references: Some(vec![parent.owner.clone()]),
            ..Default::default()
        },
        spec: Some(ServiceSpec {
            type_: Some(SERVICE_TYPE.into()),
            selector: Some(selector_labels(&parent.name)),
            ports: Some(vec![ServicePort {
                name: Some(PORT_NAME.into()),
                port: spec.networking.service_port,
                target_port: Some(IntOrString::String(PORT_NAME.into())),
                // Explicit: SSA keys Service ports by (port, protocol).
                protocol: Some("TCP".into()),
                ..Default::default()
            }]),
            ..Default::default()
        }),
        status: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::names::tests::{byo_server, parent, server};

    #[test]
    fn cluster_ip_service_targets_the_named_port() {
        let s = service(&parent(), &byo_server().spec);
        assert_eq!(s.metadata.name.as_deref(), Some("terdut"));
        assert_eq!(s.metadata.namespace.as_deref(), Some("oncall"));
        assert_eq!(s.metadata.owner_references, Some(vec![parent().owner]));
        let spec = s.spec.unwrap();
        assert_eq!(spec.type_.as_deref(), Some("ClusterIP"));
        assert_eq!(spec.selector, Some(selector_labels("terdut")));
        let ports = spec.ports.unwrap();
        assert_eq!(ports.len(), 1);
        assert_eq!(ports[0].name.as_deref(), Some("http"));
        assert_eq!(ports[0].port, 8080);
        assert_eq!(
            ports[0].target_port,
            Some(IntOrString::String("http".into()))
        );
    }

    #[test]
    fn never_exposes_outside_the_cluster() {
        let s = service(
            &parent(),
            &server(serde_json::json!({
                "database": {"dsn": "postgres://x"},
                "networking": {"hostname": "h", "servicePort": 443},
            }))
            .spec,
        );
        let spec = s.spec.unwrap();
        assert!(spec.ports.iter().flatten().all(|p| p.node_port.is_none()));
        assert_eq!(spec.ports.unwrap()[0].port, 443);
        assert!(spec.external_ips.is_none() && spec.load_balancer_ip.is_none());
        assert_eq!(spec.type_.as_deref(), Some(SERVICE_TYPE));
    }
}
