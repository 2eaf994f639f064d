# terdut-operator tasks. `just --list` is the menu; a fresh machine starts with
# `bash e2e/bootstrap.sh <recipe>`, which installs just itself first.

set shell := ["bash", "-euo", "pipefail", "-c"]

export CARGO_TERM_COLOR := "never"

# Where `just test` collects the kube-apiserver audit logs of the operator's identities.
audit_dir := justfile_directory() + "/target/audit"

# The pinned Kubernetes binaries (see docs/adr/0002-control-plane-harness.md).
bin := `bash e2e/control-plane/build.sh path 2>/dev/null`

# Show the recipes.
default:
    @just --list

# Build the pinned kube-apiserver, etcd, kube-controller-manager and kubectl (cached).
control-plane:
    bash e2e/control-plane/build.sh core

# terdut-health is kstatus and gopher-lua, the health gitops tools read (docs/gitops.md).
# Build helm, promtool (chart and metrics checks), amtool (the docs' Alertmanager snippet) and
# terdut-health as well.
tools: control-plane
    bash e2e/control-plane/build.sh helm
    bash e2e/control-plane/build.sh promtool
    bash e2e/control-plane/release-tools.sh amtool >/dev/null
    bash e2e/gitops/build.sh >/dev/null

# Regenerate the CRD YAML in the chart from the Rust types.
crds:
    cargo run -q -p terdut-crds --bin crdgen -- chart/terdut-operator/crds

# Render the Argo CD health checks from crds/src/health.lua.tmpl and the kinds' typed reasons,
# and the argocd-cm patch that embeds them (crds/tests/health.rs and actors/tests/gitops_health.rs
# fail when the committed files are stale).
health:
    cargo run -q -p terdut-crds --bin healthgen -- deploy/argocd/resource_customizations
    "$(bash e2e/gitops/build.sh)" argocd-cm deploy/argocd/resource_customizations > deploy/argocd/argocd-cm.yaml

# Every file a document cites exists (e2e/docs/paths.py).
# The chart's checks are e2e/chart/lint.sh: README freshness, helm-unittest, kube-score,
# promtool on the alert rules, their unit tests and the dashboard's expressions.
# The Argo CD health checks' cases (deploy/argocd) run in gopher-lua (docs/gitops.md).
# Formatting and lints (warnings are errors), helm lint, the chart's and the health checks.
lint: tools
    cargo fmt --all -- --check
    cargo clippy --workspace --all-targets -- -D warnings
    cargo run -q -p terdut-modules --bin module-cycles -- actors/src/lib.rs crds/src/lib.rs src/main.rs cli/src/lib.rs e2e/standin/src/lib.rs e2e/harness/src/lib.rs e2e/runner/src/lib.rs e2e/runner/src/main.rs e2e/runner/src/chaos/main.rs
    python3 e2e/docs/paths.py
    {{bin}}/helm lint chart/terdut-operator
    {{bin}}/helm lint chart/terdut-operator -f chart/terdut-operator/ci/all-features-values.yaml
    bash e2e/chart/lint.sh
    "$(bash e2e/gitops/build.sh)" lua-tests deploy/argocd/resource_customizations
    cargo deny check bans licenses sources

# The kubectl-terdut archive and krew manifest with its checksum (target/krew/, docs/cli.md).
krew:
    bash cli/krew/package.sh

# The workspace's version: what the binaries print, and the release `just test` builds.
version := `cargo metadata --no-deps --format-version 1 2>/dev/null | python3 -c 'import json,sys; print(next(p["version"] for p in json.load(sys.stdin)["packages"] if p["name"]=="terdut-operator"))' 2>/dev/null || true`

# The image as an OCI archive on digest-pinned bases, the chart, kubectl-terdut's archive and
# krew manifest, the SBOMs, CHANGELOG.md and SHA256SUMS, into target/dist/VERSION; pushes
# nothing (docs/releasing.md; release/publish.sh pushes).
# Every artifact of a release, from a clean tree.
release VERSION: tools
    bash e2e/control-plane/release-tools.sh all >/dev/null
    bash release/release.sh {{VERSION}}

# RustSec advisories, nothing ignored: fetched where github.com answers, else offline from the
# snapshot the repository carries (e2e/advisories/; refresh: `bash e2e/advisories.sh refresh`;
# docs/adr/0003-supply-chain.md).
audit:
    bash e2e/advisories.sh

# CycloneDX SBOM of the operator binary (target/sbom/terdut-operator.cdx.json), checked.
sbom:
    python3 e2e/sbom.py

# Every test, against a real kube-apiserver and the stand-in server, then the e2e scenario
# (operator as a process, then in pods: docs/node.md), the faults a node has, bounded, and
# `helm upgrade`/`rollback` from the previous version (docs/reliability.md, docs/upgrade.md),
# and the bounded chaos run (docs/reliability.md).
# Property tests run with a pinned seed so a verdict can be reproduced; `just fuzz` explores
# with random seeds (docs/adr/0006-property-test-seeds.md).
test: tools lint audit sbom
    rm -rf {{audit_dir}} && mkdir -p {{audit_dir}}
    TERDUT_AUDIT_DIR={{audit_dir}} PROPTEST_RNG_SEED=20261129 python3 e2e/test-lanes.py
    TERDUT_AUDIT_DIR={{audit_dir}} bash e2e/e2e-local.sh
    just release {{version}}
    RELEASE_DIR="${CARGO_TARGET_DIR:-target}/dist/{{version}}" TERDUT_AUDIT_DIR={{audit_dir}} bash e2e/e2e-node.sh
    bash e2e/node-chaos.sh
    bash e2e/upgrade-check.sh
    TERDUT_AUDIT_DIR={{audit_dir}} bash e2e/chaos.sh
    just rbac-audit

# Formatting, clippy and the unit tests (no control plane, no Go binaries): a minute or two warm.
# The edit-test loop; `just test` is the whole suite.
quick:
    cargo fmt --all -- --check
    cargo clippy --workspace --all-targets -- -D warnings
    cargo test --workspace --lib --bins -q

# The Argo CD checks' cases in gopher-lua, then kstatus (sigs.k8s.io/cli-utils) and the checks
# on live objects (docs/gitops.md); both are also in `just test`.
# The health gitops tools read, checked alone.
gitops: tools
    "$(bash e2e/gitops/build.sh)" lua-tests deploy/argocd/resource_customizations
    cargo test -p terdut-actors --test gitops_health --test health_table

# Least privilege, measured: the chart's RBAC must grant exactly what the operator used in the audited `just test` run (docs/security.md).
rbac-audit:
    cargo run -q -p terdut-testenv --bin rbac-audit -- {{audit_dir}}

# The property tests and fuzzers, SCALE times their cases, each with a fresh random seed:
# the duration parser, the plans, the client's response handling, the stand-in's contract.
# Not part of `just test` (docs/adr/0006-property-test-seeds.md); ~5 min at the default.
fuzz SCALE="25":
    TERDUT_FUZZ_SCALE={{SCALE}} cargo test -p terdut-crds --lib duration
    TERDUT_FUZZ_SCALE={{SCALE}} cargo test -p terdut-actors --test fuzz_plans --test fuzz_client
    TERDUT_FUZZ_SCALE={{SCALE}} cargo test -p terdut-standin --test invariants

# The whole system on this machine: control plane, operator, stand-in, docs/examples.
demo: tools
    bash e2e/demo.sh

# kind's published node image where a registry answers, else the one assembled here (no kindnetd:
# e2e/kind/cni.sh gives the nodes their network); Docker where it can start privileged
# containers, else kind's podman provider (docs/node.md "kind"). Not in `test`: ~4 min warm here.
# The e2e scenario on a kind cluster of three nodes, then a worker drained.
e2e:
    bash e2e/e2e-kind.sh

# `just e2e`'s golden path, then the kind cluster stays up; prints how to look around.
kind-demo:
    KEEP=1 bash e2e/e2e-kind.sh

# The cluster, its network, the firewall rule and /lib/modules, if e2e-kind.sh made them.
# Remove what `just e2e` / `just kind-demo` set up on this host.
kind-down:
    bash e2e/kind/down.sh

# kind's base image, the images a node preloads and the node image, assembled here for the pinned
# Kubernetes, without kindnetd, which cannot be built here (docs/node.md "kind node image").
# A kind node image with no registry.
kind-node-image:
    bash e2e/kind/node-image.sh

# kind validates e2e/kind/cluster.yaml and stops only at pulling its node image (docs/node.md).
# What of `just e2e` a machine without a registry can check.
e2e-kind-check:
    bash e2e/kind/check.sh

# The e2e scenario against the local control plane, operator and stand-in as processes.
e2e-local: tools
    bash e2e/e2e-local.sh

# kubelet, kube-proxy, kube-scheduler, containerd, runc, CoreDNS, Prometheus, pause (cached).
# Build what a single-node cluster adds to the control plane (docs/node.md).
node: tools
    bash e2e/control-plane/build.sh node

# Bases assembled from Debian's packages (BASES=public for the public ones); saved as tars.
# Build the operator, stand-in and Prometheus images from the project's Dockerfiles, offline.
images:
    bash e2e/images/build.sh

# The release (of the working tree) pushed to an OCI registry beside a single-node cluster of
# this machine, `helm install oci://...` with containerd pulling the image by digest, the golden
# path through Service DNS, key rotation, disruption budgets, leader failover, a rolling
# restart, a real Prometheus (docs/node.md; ~1 min once built).
# The e2e scenario in pods, as a user runs it.
e2e-node: node
    bash e2e/e2e-node.sh

# e2e-node's golden path, then everything stays up until Ctrl-C.
# The operator running in pods on this machine.
node-demo: node
    KEEP=1 bash e2e/e2e-node.sh

# Operator SIGKILLs, stand-in and kube-apiserver restarts, stand-in faults, a conflicting kube
# writer and two replicas with the leader killed, while 40 teams and sources converge and
# change; after each storm the invariants of docs/reliability.md. Args go to terdut-chaos
# (e2e/runner/src/chaos; --seed N, --kills N, --skip faults,leader ...).
# Kill-anywhere chaos run, bounded (~4.5 min).
chaos *ARGS: tools
    bash e2e/chaos.sh {{ARGS}}

# The long chaos run: 200 teams and sources, 15 kills per storm, 3 rounds, 6 apiserver restarts,
# 5+5 leader kills and step-downs (~17 min).
chaos-long *ARGS: tools
    bash e2e/chaos.sh --long {{ARGS}}

# The leader pod deleted mid-wave and OOM-killed, the kubelet and containerd restarted,
# CoreDNS down 60 s, the leader cut off from the kube-apiserver and from the server's pod
# for 60 s (iptables in the node), the node restarted; after each the invariants of
# docs/reliability.md. Args go to `terdut-e2e node-chaos` (--seed N, --faults a,b, ...).
# The faults a node has, on the node of `just e2e-node`, bounded: 12 pairs, each fault once.
node-chaos *ARGS: node
    bash e2e/node-chaos.sh {{ARGS}}

# The long node chaos run: 40 pairs, every fault three times in a shuffled order.
node-chaos-long *ARGS: node
    bash e2e/node-chaos.sh --long {{ARGS}}

# With teams and sources live: no write to the server, no needless server roll, one leader
# handover, nothing leaving Ready (docs/upgrade.md). The previous version's image is built
# once per commit (e2e/upgrade-previous.sh).
# helm upgrade from the previous version's chart and image to this tree's, then helm rollback.
upgrade-check *ARGS: node
    bash e2e/upgrade-check.sh {{ARGS}}

# The operator runs in-process against the local control plane and stand-ins with injected
# latency; full size by default (run it on an idle machine), a small run:
# `just bench --servers 2 --teams 50 --sources 50 --idle-secs 30 --spawn-actors 2000`.
# Not part of `just test`: it measures, it asserts nothing (docs/performance.md).
# Performance: cold start, steady state, memory; table on stdout, JSON in .tmp/bench/.
bench *ARGS:
    bash e2e/control-plane/build.sh core >&2
    cargo build -q --release -p terdut-operator -p terdut-bench
    TERDUT_AUDIT_DIR="$PWD/.tmp/bench/audit-$$" target/release/terdut-bench peers --peer-go "$(bash e2e/peer-go/build.sh)" {{ARGS}}

# The in-process run of the actor tree alone (docs/performance.md "What a run does").
bench-inprocess *ARGS:
    bash e2e/control-plane/build.sh core >&2
    cargo run -q --release -p terdut-bench -- {{ARGS}}


# The RSS of the actor tree (a) and of the kube-runtime Controller baseline (b) after the same
# cold start, each alone in a process (default 10,000 teams; e2e/bench-memory.sh; ~5 minutes).
bench-memory *ARGS:
    bash e2e/bench-memory.sh {{ARGS}}

# The operator's own RSS at 1,000 and 10,000 teams and its peak during a relist, with the
# release binary and the stand-in as separate processes (e2e/rss.py; takes ~15 minutes).
bench-rss *ARGS: tools
    bash e2e/rss.sh {{ARGS}}