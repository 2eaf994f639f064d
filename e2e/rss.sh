#!/usr/bin/env bash
# `just bench-rss`: the operator's memory as a process of its own (e2e/rss.py): the local
# control plane from local-up.sh without its operator, the release operator binary and the
# stand-in as separate processes. Arguments go to rss.py (e.g. --teams 1000,10000).
RUN_NAME=rss LOCAL_UP_OPERATOR=0
source "$(dirname "$0")/local-up.sh"
LOCAL_CLUSTER_PID=${PIDS[0]}
echo "[rss] building the release operator"
cargo build -q --release -p terdut-operator
OPERATOR_BIN="${CARGO_TARGET_DIR:-$PWD/target}/release/terdut-operator"
export WORK LOCAL_CLUSTER_PID OPERATOR_BIN
PYTHONDONTWRITEBYTECODE=1 python3 e2e/rss.py "$@"
