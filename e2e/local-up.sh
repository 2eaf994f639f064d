# Sourced by e2e-local.sh and demo.sh: builds the binaries, starts the local control plane
# (etcd, kube-apiserver, kube-controller-manager on loopback, CRDs installed) and the operator
# as a process that reaches TerdutServers at http://127.0.0.1:{servicePort}. Sets KUBECTL,
# KUBECONFIG, METRICS_URL, PROMTOOL, STANDIN_BIN, WORK; stops everything on exit.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
BIN=$(bash e2e/control-plane/build.sh path)
WORK="$PWD/.tmp/${RUN_NAME:-local}"
rm -rf "$WORK" && mkdir -p "$WORK"
export KUBECONFIG="$WORK/kubeconfig" KUBECTL="$BIN/kubectl" PROMTOOL="$BIN/promtool"
export STANDIN_BIN="$PWD/target/debug/terdut-standin" STANDIN_LOG="$WORK/standin.log"
export METRICS_URL="http://127.0.0.1:${OPERATOR_HTTP_PORT:-9464}/metrics"
export ADMIN_URL="http://127.0.0.1:8080"

echo "[up] building the operator, the stand-in and the local control plane launcher"
cargo build -q -p terdut-operator -p terdut-standin -p terdut-testenv --bins

PIDS=()
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  pkill -f "terdut-standin --listen 127.0.0.1:8080" 2>/dev/null || true
}
trap cleanup EXIT

./target/debug/local-cluster "$KUBECONFIG" > "$WORK/local-cluster.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 1 240); do [ -f "$KUBECONFIG" ] && break; sleep 0.5; done
[ -f "$KUBECONFIG" ] || { cat "$WORK/local-cluster.log"; exit 1; }
echo "[up] control plane ready (logs: $WORK)"

./target/debug/terdut-operator --leader-elect=false --log-format=text \
  --http-addr "127.0.0.1:${OPERATOR_HTTP_PORT:-9464}" \
  --server-url-template 'http://127.0.0.1:{port}' > "$WORK/operator.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 1 120); do curl -fs "http://127.0.0.1:${OPERATOR_HTTP_PORT:-9464}/readyz" >/dev/null 2>&1 && break; sleep 0.5; done
curl -fs "http://127.0.0.1:${OPERATOR_HTTP_PORT:-9464}/readyz" >/dev/null || { tail -30 "$WORK/operator.log"; exit 1; }
echo "[up] operator running (log: $WORK/operator.log)"
