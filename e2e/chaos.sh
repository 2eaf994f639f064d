#!/usr/bin/env bash
# `just chaos` / `just chaos-long`: the local control plane from local-up.sh without its
# operator; terdut-chaos (e2e/runner/src/chaos) starts, kills and restarts the operator (one,
# or two replicas with leader election) and the stand-in itself, and restarts the
# kube-apiserver through local-cluster (SIGUSR1/SIGUSR2). Arguments go to terdut-chaos (e.g.
# --long, --seed N). The stand-in's port (18300) and the operator's HTTP ports (19464, and
# 19465/19466 for the replicas) differ from e2e-local's, so both can run side by side.
RUN_NAME=chaos LOCAL_UP_OPERATOR=0 OPERATOR_HTTP_PORT=${OPERATOR_HTTP_PORT:-19464}
source "$(dirname "$0")/local-up.sh"
# local-up.sh starts local-cluster first.
LOCAL_CLUSTER_PID=${PIDS[0]}
export WORK OPERATOR_HTTP_PORT LOCAL_CLUSTER_PID
cargo build -q -p terdut-e2e --bin terdut-chaos
set -o pipefail
"$TARGET_BIN/terdut-chaos" "$@" 2>&1 | tee "$WORK/chaos.out" || {
  for f in "$WORK"/operator*.log "$WORK"/standin.log; do echo "--- $f (tail)"; tail -40 "$f"; done
  # Last, so that a CI excerpt (the end of the output) names what failed.
  echo "--- what failed (from $WORK/chaos.out)"
  grep -E "FAIL|not converged|NOT converged|chaos: [0-9]+ passed" "$WORK/chaos.out" | cut -c1-2000
  exit 1
}
