#!/usr/bin/env bash
# `just e2e-node`: the e2e scenario as a user runs it, in pods (docs/node.md). Builds what the
# node needs (cached per version), makes sure the container engine runs, builds the operator,
# stand-in and Prometheus images from the project's Dockerfiles, then `terdut-e2e node` starts
# the single-node cluster, imports the images into its containerd, `helm install`s the chart
# and runs the scenario (key rotation, disruption budgets, leader failover, a rolling restart, a
# real Prometheus), and stops the cluster. KEEP=1 (`just node-demo`) stops after the golden
# path and leaves the cluster up until Ctrl-C.
set -euo pipefail
cd "$(dirname "$0")/.."
t0=$SECONDS
bash e2e/control-plane/build.sh all >/dev/null
bash e2e/control-plane/build.sh node >/dev/null
echo "[e2e-node] node components ready ($((SECONDS - t0)) s)"
t1=$SECONDS
IMAGES=$(bash e2e/images/build.sh)
echo "[e2e-node] images ready ($((SECONDS - t1)) s)"
cargo build -q -p terdut-e2e
exec "${CARGO_TARGET_DIR:-target}/debug/terdut-e2e" node --images "$IMAGES"
