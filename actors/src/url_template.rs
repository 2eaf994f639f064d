//! How the operator reaches a TerdutServer's API: `--server-url-template`, and why its host
//! must be absolute.
//!
//! A pod resolves names with `ndots:5`: a name with fewer than five dots is first tried with
//! every search domain appended. `terdut.oncall.svc` would be asked as
//! `terdut.oncall.svc.<operator-ns>.svc.cluster.local`, then `terdut.oncall.svc.svc.cluster.local`
//! — a name that whoever owns a namespace called `svc` can answer (a pod with `hostname` and
//! `subdomain` set), and the operator would send that pod the server's bearer key. A name
//! ending in a dot is absolute and skips the search path, so the default is
//! `http://{name}.{namespace}.svc.{clusterDomain}.:{port}` and a template whose host could
//! take the search path is refused at start (docs/design.md §6, docs/security.md).

use std::net::IpAddr;

/// The in-cluster default: the owned Service's fully qualified name, with the trailing dot.
pub const DEFAULT_TEMPLATE: &str = "http://{name}.{namespace}.svc.{clusterDomain}.:{port}";

/// The Kubernetes default cluster domain (kubelet `clusterDomain`).
pub const DEFAULT_CLUSTER_DOMAIN: &str = "cluster.local";

/// Fills a template for one server.
pub fn render(
    template: &str,
    cluster_domain: &str,
    name: &str,
    namespace: &str,
    port: i32,
) -> String {
    template
        .replace("{name}", name)
        .replace("{namespace}", namespace)
        .replace("{clusterDomain}", cluster_domain)
        .replace("{port}", &port.to_string())
}

/// Why a template or cluster domain is refused; the text says what to write instead.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct InvalidTemplate(pub String);

/// Checks `cluster_domain` and `template` once, at start: the template must give an http(s)
/// URL whose host is an IP address, `localhost`, or a name ending in a dot.
pub fn validate(template: &str, cluster_domain: &str) -> Result<(), InvalidTemplate> {
    let domain_ok = !cluster_domain.is_empty()
        && !cluster_domain.starts_with('.')
        && !cluster_domain.ends_with('.')
        && cluster_domain
            .split('.')
            .all(|l| !l.is_empty() && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-'));
    if !domain_ok {
        return Err(InvalidTemplate(format!(
            "--cluster-domain {cluster_domain:?} is not a DNS domain such as cluster.local \
             (no leading or trailing dot)"
        )));
    }
    // Sample values with no dots of their own, so the host's dots come from the template.
    let sample = render(template, cluster_domain, "name", "namespace", 8080);
    let url = reqwest::Url::parse(&sample).map_err(|e| {
        InvalidTemplate(format!(
            "--server-url-template {template:?} does not give a URL ({sample:?}: {e})"
        ))
    })?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err(InvalidTemplate(format!(
            "--server-url-template {template:?} must start with http:// or https://"
        )));
    }
    let host = url.host_str().unwrap_or_default();
    let bare = host.trim_start_matches('[').trim_end_matches(']');
    if bare.parse::<IpAddr>().is_ok() || host == "localhost" || host.ends_with('.') {
        return Ok(());
    }
    Err(InvalidTemplate(format!(
        "--server-url-template {template:?}: the host {host:?} does not end with a dot, so a \
         pod's resolver would try its search domains first (ndots:5) and a name in another \
         namespace could answer and receive the server's key; end the name with a dot, e.g. \
         {DEFAULT_TEMPLATE}, or use an IP address"
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_is_an_absolute_name_in_the_cluster_domain() {
        assert_eq!(
            render(DEFAULT_TEMPLATE, "cluster.local", "terdut", "oncall", 8080),
            "http://terdut.oncall.svc.cluster.local.:8080"
        );
        assert_eq!(
            render(DEFAULT_TEMPLATE, "corp.example", "t", "ns", 1),
            "http://t.ns.svc.corp.example.:1"
        );
        validate(DEFAULT_TEMPLATE, DEFAULT_CLUSTER_DOMAIN).unwrap();
    }

    #[test]
    fn addresses_loopback_and_absolute_names_are_accepted() {
        for t in [
            "http://127.0.0.1:{port}",
            "http://[::1]:{port}",
            "https://localhost:{port}/prefix",
            "http://{name}.{namespace}.svc.cluster.local.:{port}",
            "http://terdut.example.com.",
        ] {
            validate(t, "cluster.local").unwrap_or_else(|e| panic!("{t}: {e}"));
        }
    }

    #[test]
    fn a_name_the_search_path_could_complete_is_refused() {
        for t in [
            "http://{name}.{namespace}.svc:{port}",
            // Four dots are still fewer than ndots:5.
            "http://{name}.{namespace}.svc.{clusterDomain}:{port}",
            "http://{name}:{port}",
        ] {
            let e = validate(t, "cluster.local").unwrap_err();
            assert!(e.0.contains("does not end with a dot"), "{t}: {e}");
        }
    }

    #[test]
    fn other_schemes_broken_urls_and_bad_domains_are_refused() {
        assert!(validate("ftp://127.0.0.1:{port}", "cluster.local").is_err());
        assert!(validate("{name}", "cluster.local").is_err());
        for d in ["", ".cluster.local", "cluster.local.", "a..b", "clu ster"] {
            let e = validate(DEFAULT_TEMPLATE, d).unwrap_err();
            assert!(e.0.contains("--cluster-domain"), "{d:?}: {e}");
        }
    }
}
