#!/usr/bin/env bash
# `just e2e-node`: the e2e scenario as a user runs it, in pods (docs/node.md). Builds what the
# node needs (cached per version), makes sure the container engine runs, builds the operator,
# stand-in and Prometheus images from the project's Dockerfiles and the release (`just release`,
# or one of the working tree), then `terdut-e2e node` starts the single-node cluster with an OCI
# registry beside it, imports the images into its containerd, pushes the release to the
# registry, `helm install`s it from there (containerd pulls the image by digest) and runs the
# scenario (key rotation, disruption budgets, leader failover, a rolling restart, a
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
# The release the node installs from its registry: RELEASE_DIR (`just test` passes the one
# `just release` wrote), else one made here from the working tree (its image build is the one
# above, from BuildKit's cache).
bash e2e/control-plane/release-tools.sh all >/dev/null
if [ -z "${RELEASE_DIR:-}" ]; then
  t2=$SECONDS
  version=$(cargo metadata --no-deps --format-version 1 |
    python3 -c 'import json,sys; print(next(p["version"] for p in json.load(sys.stdin)["packages"] if p["name"]=="terdut-operator"))')
  RELEASE_DIR=$(RELEASE_FROM_TREE=1 bash release/release.sh "$version-e2e")
  echo "[e2e-node] release $version-e2e of the working tree ready ($((SECONDS - t2)) s)"
fi
cargo build -q -p terdut-e2e
exec "${CARGO_TARGET_DIR:-target}/debug/terdut-e2e" node --images "$IMAGES" --release "$RELEASE_DIR"
