# Sourced by e2e-local.sh and demo.sh: builds the binaries, starts the local control plane
# (etcd, kube-apiserver, kube-controller-manager on loopback, CRDs installed) and the operator
# as a process, under the chart's RBAC, that reaches TerdutServers at
# http://127.0.0.1:{servicePort}. Sets KUBECTL,
# KUBECONFIG, METRICS_URL, PROMTOOL, STANDIN_BIN, WORK; stops everything on exit.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
BIN=$(bash e2e/control-plane/build.sh path)
WORK="$PWD/.tmp/${RUN_NAME:-local}"
rm -rf "$WORK" && mkdir -p "$WORK"
export KUBECONFIG="$WORK/kubeconfig" KUBECTL="$BIN/kubectl" PROMTOOL="$BIN/promtool"
# Honour CARGO_TARGET_DIR (a shared target dir) like cargo does.
TARGET_BIN="${CARGO_TARGET_DIR:-$PWD/target}/debug"
export TARGET_BIN STANDIN_BIN="$TARGET_BIN/terdut-standin" STANDIN_LOG="$WORK/standin.log"
# The scenario writes the id of the stand-in it starts here, so cleanup stops exactly that one.
export STANDIN_PID_FILE="$WORK/standin.pid"
export METRICS_URL="http://127.0.0.1:${OPERATOR_HTTP_PORT:-9464}/metrics"
export ADMIN_URL="http://127.0.0.1:8080"

echo "[up] building the operator, the stand-in and the local control plane launcher"
cargo build -q -p terdut-operator -p terdut-standin -p terdut-testenv --bins

PIDS=()
# Stops what this script started, by id: the processes it started itself and the stand-in
# whose id the scenario recorded.
cleanup() {
  for p in "${PIDS[@]}"; do kill "$p" 2>/dev/null || true; done
  local pid
  pid=$(cat "$STANDIN_PID_FILE" 2>/dev/null || true)
  if [ -n "$pid" ] && grep -qa terdut-standin "/proc/$pid/cmdline" 2>/dev/null; then
    kill "$pid" 2>/dev/null || true
  fi
}
trap cleanup EXIT

"$TARGET_BIN/local-cluster" "$KUBECONFIG" > "$WORK/local-cluster.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 1 240); do [ -f "$KUBECONFIG" ] && break; sleep 0.5; done
[ -f "$KUBECONFIG" ] || { cat "$WORK/local-cluster.log"; exit 1; }
echo "[up] control plane ready (logs: $WORK)"

# The operator runs with exactly the chart's RBAC: its ServiceAccount, ClusterRole and Lease
# Role, applied from the rendered chart, and a token minted for that ServiceAccount.
"$KUBECTL" create namespace terdut-system >/dev/null
"$BIN/helm" template terdut chart/terdut-operator --namespace terdut-system --kube-version 1.37.2 \
  --show-only templates/serviceaccount.yaml --show-only templates/rbac.yaml > "$WORK/chart-rbac.yaml"
"$KUBECTL" apply -f "$WORK/chart-rbac.yaml" >/dev/null
SA=$(awk '/^kind: ServiceAccount/{f=1} f && /^  name:/{print $2; exit}' "$WORK/chart-rbac.yaml")
TOKEN=$("$KUBECTL" -n terdut-system create token "$SA" --duration=2h)
SERVER_URL=$(awk '/server:/{print $2; exit}' "$KUBECONFIG")
cat > "$WORK/operator.kubeconfig" <<KC
apiVersion: v1
kind: Config
clusters: [{name: local, cluster: {server: $SERVER_URL, insecure-skip-tls-verify: true}}]
users: [{name: operator, user: {token: $TOKEN}}]
contexts: [{name: local, context: {cluster: local, user: operator}}]
current-context: local
KC
echo "[up] operator identity: system:serviceaccount:terdut-system:$SA (the chart's RBAC only)"

# `just chaos` starts (and kills) the operator itself: stop here, everything else up.
[ "${LOCAL_UP_OPERATOR:-1}" = 1 ] || return 0

KUBECONFIG="$WORK/operator.kubeconfig" POD_NAME=terdut-operator-local \
"$TARGET_BIN/terdut-operator" --leader-elect=true --lease-namespace=terdut-system --log-format=text \
  --http-addr "127.0.0.1:${OPERATOR_HTTP_PORT:-9464}" \
  --server-url-template 'http://127.0.0.1:{port}' > "$WORK/operator.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 1 120); do curl -fs "http://127.0.0.1:${OPERATOR_HTTP_PORT:-9464}/readyz" >/dev/null 2>&1 && break; sleep 0.5; done
curl -fs "http://127.0.0.1:${OPERATOR_HTTP_PORT:-9464}/readyz" >/dev/null || { tail -30 "$WORK/operator.log"; exit 1; }
echo "[up] operator running (log: $WORK/operator.log)"
