#!/usr/bin/env bash
# `just e2e-local`: the e2e scenario (e2e/runner, `terdut-e2e local`) against the local control
# plane, with the operator as a process and the stand-in terdut-server on loopback. Run by
# .ci/run.
RUN_NAME=e2e-local
source "$(dirname "$0")/local-up.sh"
cargo build -q -p terdut-e2e
"$TARGET_BIN/terdut-e2e" local || { echo "--- operator log (tail)"; tail -40 "$WORK/operator.log"; exit 1; }
