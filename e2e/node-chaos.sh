#!/usr/bin/env bash
# `just node-chaos` / `just node-chaos-long`: the faults a node has, on this machine's node
# (docs/reliability.md "Node faults"). Builds what the node needs and the images as
# `just e2e-node` does, then `terdut-e2e node-chaos` starts the node, installs the chart,
# brings up a server with teams and sources, and runs the faults. Arguments go to
# `terdut-e2e node-chaos` (--long, --seed N, --faults a,b, --pairs N, --outage-secs S).
set -euo pipefail
cd "$(dirname "$0")/.."
t0=$SECONDS
bash e2e/control-plane/build.sh all >/dev/null
bash e2e/control-plane/build.sh node >/dev/null
IMAGES=$(bash e2e/images/build.sh)
echo "[node-chaos] node components and images ready ($((SECONDS - t0)) s)"
cargo build -q -p terdut-e2e
exec "${CARGO_TARGET_DIR:-target}/debug/terdut-e2e" node-chaos --images "$IMAGES" "$@"
