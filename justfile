# terdut-operator tasks. `just --list` is the menu; a fresh machine starts with
# `bash e2e/bootstrap.sh <recipe>`, which installs just itself first.

set shell := ["bash", "-euo", "pipefail", "-c"]

export CARGO_TERM_COLOR := "never"

# The pinned Kubernetes binaries (see docs/adr/0002-control-plane-harness.md).
bin := `bash e2e/control-plane/build.sh path 2>/dev/null`

# Show the recipes.
default:
    @just --list

# Build the pinned kube-apiserver, etcd, kube-controller-manager and kubectl (cached).
control-plane:
    bash e2e/control-plane/build.sh core

# Build helm and promtool as well (chart and metrics checks).
tools: control-plane
    bash e2e/control-plane/build.sh helm
    bash e2e/control-plane/build.sh promtool

# Regenerate the CRD YAML in the chart from the Rust types.
crds:
    cargo run -q -p terdut-crds --bin crdgen -- chart/terdut-operator/crds

# Formatting and lints (warnings are errors), and helm lint of the chart.
lint: tools
    cargo fmt --all -- --check
    cargo clippy --workspace --all-targets -- -D warnings
    {{bin}}/helm lint chart/terdut-operator
    {{bin}}/helm lint chart/terdut-operator -f chart/terdut-operator/ci/all-features-values.yaml
    cargo deny check bans licenses sources

# RustSec advisories (needs GitHub access; docs/adr/0003-supply-chain.md).
audit:
    cargo deny check advisories

# Every test, against a real kube-apiserver and the stand-in server, then the e2e scenario.
test: tools lint
    cargo test --workspace --no-fail-fast
    bash e2e/e2e-local.sh

# The whole system on this machine: control plane, operator, stand-in, docs/examples.
demo: tools
    bash e2e/demo.sh

# The e2e scenario on kind (needs Docker, kind, helm, kubectl; not runnable on CI here).
e2e:
    bash e2e/e2e-kind.sh

# The e2e scenario against the local control plane (what CI runs).
e2e-local: tools
    bash e2e/e2e-local.sh
