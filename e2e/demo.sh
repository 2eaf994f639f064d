#!/usr/bin/env bash
# `just demo`: bring up the local control plane, install the CRDs, apply docs/examples and
# show `kubectl get terdut -A`. Leaves the cluster running until Ctrl-C.
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=$(bash e2e/control-plane/build.sh path)
KUBECONFIG_PATH="$PWD/.tmp/demo/kubeconfig"
mkdir -p .tmp/demo && rm -f "$KUBECONFIG_PATH"

cargo build -q -p terdut-testenv --bin local-cluster
./target/debug/local-cluster "$KUBECONFIG_PATH" > .tmp/demo/local-cluster.log 2>&1 &
CLUSTER=$!
trap 'kill $CLUSTER 2>/dev/null || true' EXIT
for _ in $(seq 1 120); do [ -f "$KUBECONFIG_PATH" ] && break; sleep 0.5; done
[ -f "$KUBECONFIG_PATH" ] || { cat .tmp/demo/local-cluster.log; exit 1; }
kubectl() { "$BIN/kubectl" --kubeconfig "$KUBECONFIG_PATH" "$@"; }

echo "== applying docs/examples"
kubectl apply --server-side -f docs/examples/
echo
echo "== kubectl get terdut -A"
kubectl get terdut -A
echo
echo "Look around:  $BIN/kubectl --kubeconfig $KUBECONFIG_PATH get terdut -A"
if [ -t 0 ] && [ -z "${CI:-}" ]; then
  echo "Stop: press Ctrl-C."
  wait $CLUSTER
fi
