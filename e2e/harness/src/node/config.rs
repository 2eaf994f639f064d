//! The node's configuration files: containerd, the CNI network, the kubelet, kube-proxy and
//! CoreDNS. Pure text from [`Layout`] and paths, so each file can be read whole here.

use std::path::Path;

use super::net::Layout;

/// The sandbox image containerd is pinned to: built from Kubernetes' own `pause.c` and imported
/// (e2e/images/build.sh), never pulled.
pub const PAUSE_IMAGE: &str = "registry.k8s.io/pause:3.10.1";
pub const CLUSTER_DOMAIN: &str = "cluster.local";

/// containerd 2 (config version 3) with everything under the node's folder; registries are
/// configured per host under `config/certs.d` (the registry beside the node: registry.rs).
/// `restrict_oom_score_adj`: the sandbox asks for an OOM score of -998, which needs
/// CAP_SYS_RESOURCE, which these hosts do not grant; without it every sandbox fails in runc
/// ("can't get final child's PID from pipe"). cgroupfs, not systemd: there is no systemd.
pub fn containerd(w: &Path, bin: &Path) -> String {
    let w = w.display();
    let runc = bin.join("runc");
    let runc = runc.display();
    format!(
        r#"version = 3
root = "{w}/state/containerd"
state = "{w}/state/containerd-run"
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.blockfile", "io.containerd.tracing.processor.v1.otlp", "io.containerd.internal.v1.tracing"]

[grpc]
  address = "{w}/state/containerd.sock"

[ttrpc]
  address = "{w}/state/containerd.sock.ttrpc"

[plugins.'io.containerd.cri.v1.images']
  snapshotter = "overlayfs"
  [plugins.'io.containerd.cri.v1.images'.pinned_images]
    sandbox = "{PAUSE_IMAGE}"
  # One folder per registry host, each with its hosts.toml (registry.rs).
  [plugins.'io.containerd.cri.v1.images'.registry]
    config_path = "{w}/config/certs.d"

[plugins.'io.containerd.cri.v1.runtime']
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  enable_criu = false
  [plugins.'io.containerd.cri.v1.runtime'.containerd]
    default_runtime_name = "runc"
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
        BinaryName = "{runc}"
        SystemdCgroup = false
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = ["/usr/lib/cni"]
    conf_dir = "{w}/config/cni"

[plugins.'io.containerd.grpc.v1.cri']
  stream_server_address = "127.0.0.1"
"#
    )
}

/// One bridge for every pod, addresses from the pod range, the bridge as their gateway.
/// `hairpinMode` lets a pod reach itself through its own Service.
pub fn cni(layout: &Layout, w: &Path) -> String {
    let w = w.display();
    format!(
        r#"{{
  "cniVersion": "1.0.0",
  "name": "terdut-pods",
  "plugins": [
    {{
      "type": "bridge",
      "bridge": "cni0",
      "isGateway": true,
      "ipMasq": true,
      "hairpinMode": true,
      "ipam": {{
        "type": "host-local",
        "dataDir": "{w}/state/cni-ipam",
        "ranges": [[{{"subnet": "{pods}"}}]],
        "routes": [{{"dst": "0.0.0.0/0"}}]
      }}
    }},
    {{"type": "portmap", "capabilities": {{"portMappings": true}}}}
  ]
}}
"#,
        pods = layout.pod_cidr,
    )
}

/// The kubelet. `failCgroupV1: false`: these hosts mount cgroup v1, which 1.35+ refuses by
/// default. Eviction and image GC thresholds are set low and high: the images were imported
/// and cannot be pulled again, and a test machine's disk may be fuller than a node's would be.
pub fn kubelet(layout: &Layout, w: &Path, cgroup_root: &str) -> String {
    let w = w.display();
    format!(
        r#"apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
failCgroupV1: false
cgroupDriver: cgroupfs
cgroupRoot: /{cgroup_root}
containerRuntimeEndpoint: unix://{w}/state/containerd.sock
clusterDNS: [{dns}]
clusterDomain: {CLUSTER_DOMAIN}
resolvConf: {w}/config/resolv.conf
podLogsDir: {w}/state/pod-logs
address: {node}
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
authentication:
  anonymous: {{enabled: false}}
  webhook: {{enabled: false}}
  x509: {{clientCAFile: {w}/pki/ca.crt}}
authorization:
  mode: AlwaysAllow
tlsCertFile: {w}/pki/kubelet.crt
tlsPrivateKeyFile: {w}/pki/kubelet.key
evictionHard:
  memory.available: 100Mi
  nodefs.available: 1%
  imagefs.available: 1%
  nodefs.inodesFree: 1%
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
serializeImagePulls: false
maxPods: 60
"#,
        dns = layout.dns_ip,
        node = layout.node_ip,
    )
}

/// kube-proxy in iptables mode (Debian's iptables), touching no conntrack sysctl: the node's
/// network namespace keeps the host's defaults.
pub fn kube_proxy(layout: &Layout, w: &Path, node_name: &str) -> String {
    let w = w.display();
    format!(
        r#"apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
clientConnection:
  kubeconfig: {w}/config/kube-proxy.kubeconfig
hostnameOverride: {node_name}
mode: iptables
clusterCIDR: {pods}
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
nodePortAddresses: [primary]
conntrack:
  maxPerCore: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
"#,
        pods = layout.pod_cidr,
    )
}

/// CoreDNS on the node's address, serving the cluster domain from the Kubernetes API. There is
/// no upstream: nothing outside this machine is reachable, so other names fail fast.
pub fn corefile(layout: &Layout, w: &Path) -> String {
    let w = w.display();
    format!(
        r#".:53 {{
    bind {node}
    errors
    health {node}:8181
    ready {node}:8182
    kubernetes {CLUSTER_DOMAIN} in-addr.arpa ip6.arpa {{
        kubeconfig {w}/config/coredns.kubeconfig
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
    }}
    cache 30
}}
"#,
        node = layout.node_ip,
    )
}

/// A kubeconfig for one node component: the cluster's CA, a static token.
pub fn kubeconfig(server: &str, ca: &Path, user: &str, token: &str) -> String {
    format!(
        "apiVersion: v1
kind: Config
clusters: [{{name: node, cluster: {{server: \"{server}\", certificate-authority: \"{ca}\"}}}}]
users: [{{name: {user}, user: {{token: \"{token}\"}}}}]
contexts: [{{name: node, context: {{cluster: node, user: {user}}}}}]
current-context: node
",
        ca = ca.display(),
    )
}
