#!/usr/bin/env bash
# `just e2e-local`: the `just e2e` scenario against the local control plane, with the operator
# as a process and the stand-in terdut-server on loopback. Run by .ci/run.
RUN_NAME=e2e-local
source "$(dirname "$0")/local-up.sh"
STANDIN_MODE=local python3 e2e/scenario.py || { echo "--- operator log (tail)"; tail -40 "$WORK/operator.log"; exit 1; }
