//! Command-line flags; every flag also reads an environment variable (docs/configuration.md).

use std::net::SocketAddr;
use std::time::Duration;

use clap::Parser;

#[derive(Debug, Parser)]
#[command(
    name = "terdut-operator",
    version,
    about = "Kubernetes operator for terdut-server"
)]
pub struct Cli {
    /// Address of /metrics, /healthz and /readyz.
    #[arg(
        long,
        env = "TERDUT_OPERATOR_HTTP_ADDR",
        default_value = "0.0.0.0:8080"
    )]
    pub http_addr: SocketAddr,

    /// How the operator reaches a TerdutServer's API; {name}, {namespace}, {clusterDomain}
    /// and {port} are replaced. The host must be an IP address, localhost or a name ending in
    /// a dot (no DNS search path). Out of cluster, e.g. http://127.0.0.1:{port}.
    #[arg(
        long,
        env = "TERDUT_SERVER_URL_TEMPLATE",
        default_value = terdut_actors::url_template::DEFAULT_TEMPLATE
    )]
    pub server_url_template: String,

    /// The cluster's DNS domain (the kubelet's clusterDomain), for {clusterDomain}.
    #[arg(
        long,
        env = "TERDUT_CLUSTER_DOMAIN",
        default_value = terdut_actors::url_template::DEFAULT_CLUSTER_DOMAIN
    )]
    pub cluster_domain: String,

    /// Periodic resync of every object (docs/design.md §5), as a Go duration.
    #[arg(long, env = "TERDUT_RESYNC", default_value = "5m", value_parser = parse_duration)]
    pub resync: Duration,

    /// Timeout of one terdut-server request, as a Go duration.
    #[arg(long, env = "TERDUT_API_TIMEOUT", default_value = "15s", value_parser = parse_duration)]
    pub api_timeout: Duration,

    /// TerdutTeam passes, and separately TerdutAlertSource passes, that run at once. Bounds
    /// the memory of a cold start or relist of many objects (docs/performance.md).
    #[arg(long, env = "TERDUT_MAX_CONCURRENT_RECONCILES", default_value_t = 256,
          value_parser = clap::value_parser!(u16).range(1..))]
    pub max_concurrent_reconciles: u16,

    /// How long a converged TerdutTeam or TerdutAlertSource actor with nothing due stays up
    /// before it is stopped and kept as an entry only (passivation, ADR 0008); `0s`: never.
    #[arg(long, env = "TERDUT_PASSIVATE_AFTER", default_value = "2s", value_parser = parse_duration)]
    pub passivate_after: Duration,

    /// TerdutTeam, and separately TerdutAlertSource, actors one TerdutServer's actor starts at
    /// once when no change of their own asks for it (a relist, a dependency, an adoption):
    /// bounds the actors alive, and so the memory, of a relist of thousands (ADR 0011).
    #[arg(long, env = "TERDUT_WAKE_BUDGET", default_value_t = 1024,
          value_parser = clap::value_parser!(u32).range(1..))]
    pub wake_budget: u32,

    /// How long the root supervisor, the holding host or the routing writer may leave a
    /// message unanswered before /healthz fails and the kubelet restarts the pod (a stall;
    /// docs/reliability.md "Liveness").
    #[arg(long, env = "TERDUT_LIVENESS_STALL_AFTER", default_value = "30s",
          value_parser = parse_duration)]
    pub liveness_stall_after: Duration,

    /// Run leader election on a Lease, so that several replicas can run (only the leader acts).
    #[arg(long, env = "TERDUT_LEADER_ELECT", default_value_t = true, action = clap::ArgAction::Set)]
    pub leader_elect: bool,

    /// Namespace of the leader-election Lease (in cluster: the operator's own namespace).
    #[arg(long, env = "POD_NAMESPACE", default_value = "terdut-system")]
    pub lease_namespace: String,

    /// Name of the leader-election Lease.
    #[arg(long, env = "TERDUT_LEASE_NAME", default_value = "terdut-operator")]
    pub lease_name: String,

    /// This replica's identity (the pod name in cluster).
    #[arg(long, env = "POD_NAME", default_value_t = default_identity())]
    pub identity: String,

    /// Namespaces to watch, comma-separated; empty (the default) watches every namespace.
    /// With a list the operator needs only namespaced Roles there, plus read access to
    /// Namespaces (chart value `rbac.namespaced`; docs/design.md §9, §13).
    #[arg(
        long,
        env = "TERDUT_WATCH_NAMESPACES",
        value_delimiter = ',',
        default_value = ""
    )]
    pub watch_namespaces: Vec<String>,

    /// A label selector on TerdutServers, TerdutTeams and TerdutAlertSources: this instance
    /// reconciles only what it selects (sharding; give each shard its own --lease-name).
    #[arg(long, env = "TERDUT_SELECTOR")]
    pub selector: Option<String>,

    /// A label selector on Namespaces: only objects in the selected namespaces are
    /// reconciled, picked up and dropped live as namespaces are labelled (needs the
    /// cluster-wide RBAC; excludes --watch-namespaces).
    #[arg(long, env = "TERDUT_WATCH_NAMESPACE_SELECTOR")]
    pub watch_namespace_selector: Option<String>,

    /// Log format: json or text.
    #[arg(long, env = "TERDUT_LOG_FORMAT", default_value = "json")]
    pub log_format: String,

    /// Default log filter when RUST_LOG is not set.
    #[arg(long, env = "TERDUT_LOG_LEVEL", default_value = "info")]
    pub log_level: String,

    /// Test-only fault injection by annotation, and on the operator's own parts through a
    /// listener on --test-hooks-addr. Never enable in production.
    #[arg(long, env = "TERDUT_TEST_HOOKS", default_value_t = false, hide = true)]
    pub test_hooks: bool,

    /// Where the test hooks listen (with --test-hooks): a loopback address, or refused. Port 0
    /// (the default) takes a free one and logs it, so processes side by side do not collide.
    #[arg(
        long,
        env = "TERDUT_TEST_HOOKS_ADDR",
        default_value = "127.0.0.1:0",
        hide = true
    )]
    pub test_hooks_addr: SocketAddr,
}

fn default_identity() -> String {
    std::fs::read_to_string("/etc/hostname")
        .map(|s| s.trim().to_owned())
        .ok()
        .filter(|s| !s.is_empty())
        .unwrap_or_else(|| format!("terdut-operator-{}", std::process::id()))
}

fn parse_duration(s: &str) -> Result<Duration, String> {
    terdut_crds::GoDuration::from(s)
        .nanos()
        .map(|n| Duration::from_nanos(u64::try_from(n).unwrap_or(u64::MAX)))
        .map_err(|e| e.to_string())
}
