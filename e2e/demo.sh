#!/usr/bin/env bash
# `just demo` (README's first command): the local control plane, the operator and the
# stand-in terdut-server; applies docs/examples and shows them converge to Ready. Leaves it all
# running until Ctrl-C (or returns at once under CI=true).
RUN_NAME=demo
source "$(dirname "$0")/local-up.sh"
cargo build -q -p terdut-e2e
"$TARGET_BIN/terdut-e2e" local --keep &
SCENARIO=$!
PIDS+=($SCENARIO)
# Show the objects converging.
for _ in $(seq 1 60); do
  clear 2>/dev/null || true
  echo "== kubectl get terdut -A   ($(date +%T))"
  "$KUBECTL" get terdut -A 2>/dev/null || true
  pending=$("$KUBECTL" get terdutteams,terdutalertsources -A --no-headers 2>/dev/null | grep -cv ' True ' || true)
  total=$("$KUBECTL" get terdutteams,terdutalertsources -A --no-headers 2>/dev/null | wc -l)
  [ "$total" -ge 4 ] && [ "$pending" -eq 0 ] && break
  sleep 2
done
echo
echo "Everything above is live. The TerdutServer itself stays Ready=False/Progressing here:"
echo "this control plane has no kubelet, so its Deployment never gets a pod; the stand-in"
echo "terdut-server on 127.0.0.1:8080 plays the server's part. On a real cluster it turns Ready:"
echo "\`just node-demo\` runs all of it in pods (docs/node.md)."
echo "Look around:"
echo "  export KUBECONFIG=$KUBECONFIG"
echo "  $KUBECTL get terdut -A"
echo "  $KUBECTL -n platform-oncall describe terdutteam platform"
echo "  $KUBECTL -n platform-oncall get secret prod-alertmanager-terdut-webhook"
echo "  curl -s $METRICS_URL | head;  curl -s $ADMIN_URL/admin/state"
echo "Logs: $WORK"
if [ -t 0 ] && [ -z "${CI:-}" ]; then
  echo "Stop: press Ctrl-C."
  wait $SCENARIO
fi
