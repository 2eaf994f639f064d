#!/usr/bin/env bash
# `just chaos` / `just chaos-long`: the local control plane from local-up.sh without its
# operator; e2e/chaos.py starts, kills and restarts the operator and the stand-in itself.
# Arguments go to chaos.py (e.g. --long, --seed N). The stand-in's port (18300) and the
# operator's HTTP port (19464) differ from e2e-local's, so both can run side by side.
RUN_NAME=chaos LOCAL_UP_OPERATOR=0 OPERATOR_HTTP_PORT=${OPERATOR_HTTP_PORT:-19464}
source "$(dirname "$0")/local-up.sh"
export WORK OPERATOR_HTTP_PORT
PYTHONDONTWRITEBYTECODE=1 python3 e2e/chaos.py "$@" || { echo "--- operator log (tail)"; tail -40 "$WORK/operator.log"; exit 1; }
