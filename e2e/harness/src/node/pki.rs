//! The node cluster's certificates, made with openssl: one CA; the kube-apiserver's serving
//! certificate for every name and address pods and the host use (the `kubernetes` Service's IP
//! first: pods verify it with the CA their ServiceAccount volume carries); the kubelet's
//! serving certificate; the client certificate the kube-apiserver shows the kubelet; the
//! registry's serving certificate.

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};

use crate::process::openssl;

#[derive(Debug, Clone)]
pub struct Pki {
    pub ca_crt: PathBuf,
    pub apiserver_crt: PathBuf,
    pub apiserver_key: PathBuf,
    pub kubelet_client_crt: PathBuf,
    pub kubelet_client_key: PathBuf,
}

/// Writes everything into `dir` (created), valid for two days: a test cluster's lifetime.
pub fn create(
    dir: &Path,
    kubernetes_ip: Ipv4Addr,
    host_ip: Ipv4Addr,
    node_ip: Ipv4Addr,
    node_name: &str,
) -> anyhow::Result<Pki> {
    std::fs::create_dir_all(dir)?;
    let ec = [
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
    ];
    let mut ca = vec!["req", "-x509"];
    ca.extend_from_slice(&ec);
    ca.extend_from_slice(&[
        "-keyout",
        "ca.key",
        "-out",
        "ca.crt",
        "-days",
        "2",
        "-subj",
        "/CN=terdut-node-ca",
    ]);
    openssl(&ca, dir)?;
    let apiserver_sans = format!(
        "subjectAltName=IP:{kubernetes_ip},IP:{host_ip},IP:127.0.0.1,DNS:kubernetes,\
         DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local\n\
         extendedKeyUsage=serverAuth\n"
    );
    sign(dir, "apiserver", "/CN=kube-apiserver", &apiserver_sans)?;
    sign(
        dir,
        "kubelet",
        &format!("/CN={node_name}"),
        &format!("subjectAltName=IP:{node_ip},DNS:{node_name}\nextendedKeyUsage=serverAuth\n"),
    )?;
    // The registry beside the node (registry.rs), on the host end of the link.
    sign(
        dir,
        "registry",
        "/CN=terdut-node-registry",
        &format!("subjectAltName=IP:{host_ip}\nextendedKeyUsage=serverAuth\n"),
    )?;
    sign(
        dir,
        "apiserver-kubelet-client",
        "/O=system:masters/CN=kube-apiserver-kubelet-client",
        "extendedKeyUsage=clientAuth\n",
    )?;
    Ok(Pki {
        ca_crt: dir.join("ca.crt"),
        apiserver_crt: dir.join("apiserver.crt"),
        apiserver_key: dir.join("apiserver.key"),
        kubelet_client_crt: dir.join("apiserver-kubelet-client.crt"),
        kubelet_client_key: dir.join("apiserver-kubelet-client.key"),
    })
}

/// `<name>.key` and `<name>.crt` signed by the CA, with the extensions `ext`.
fn sign(dir: &Path, name: &str, subject: &str, ext: &str) -> anyhow::Result<()> {
    let (key, csr, crt, extfile) = (
        format!("{name}.key"),
        format!("{name}.csr"),
        format!("{name}.crt"),
        format!("{name}.ext"),
    );
    std::fs::write(dir.join(&extfile), ext)?;
    openssl(
        &[
            "req",
            "-new",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:prime256v1",
            "-nodes",
            "-keyout",
            &key,
            "-out",
            &csr,
            "-subj",
            subject,
        ],
        dir,
    )?;
    openssl(
        &[
            "x509",
            "-req",
            "-in",
            &csr,
            "-CA",
            "ca.crt",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-days",
            "2",
            "-out",
            &crt,
            "-extfile",
            &extfile,
        ],
        dir,
    )?;
    Ok(())
}
