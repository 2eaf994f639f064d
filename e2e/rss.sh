#!/usr/bin/env bash
# `just bench-rss`: the operator's memory as a process of its own (e2e/rss.py): the local
# control plane from local-up.sh without its operator, the release operator binary and the
# release stand-in as separate processes. Arguments go to rss.py (e.g. --teams 1000,10000).
RUN_NAME=rss LOCAL_UP_OPERATOR=0
source "$(dirname "$0")/local-up.sh"
LOCAL_CLUSTER_PID=${PIDS[0]}
# Both release builds: a debug stand-in, not the operator, set the pace at 100,000 teams.
echo "[rss] building the release operator and stand-in"
cargo build -q --release -p terdut-operator -p terdut-standin
OPERATOR_BIN="${CARGO_TARGET_DIR:-$PWD/target}/release/terdut-operator"
STANDIN_BIN="${CARGO_TARGET_DIR:-$PWD/target}/release/terdut-standin"
export WORK LOCAL_CLUSTER_PID OPERATOR_BIN STANDIN_BIN
PYTHONDONTWRITEBYTECODE=1 python3 e2e/rss.py "$@"
