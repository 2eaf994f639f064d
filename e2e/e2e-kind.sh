#!/usr/bin/env bash
# `just e2e`: the scenario on a kind cluster, for machines with Docker and kind (it cannot run
# on the project's CI machines, which have no container engine; `just e2e-local` runs the same
# scenario there). Builds both images, loads them into kind, installs the chart, runs
# e2e/scenario.py against the stand-in as the TerdutServer's image, deletes the cluster.
#   TERDUT_SERVER_IMAGE=registry/terdut-server:v0.9.3 just e2e   # against the real server image
set -euo pipefail
cd "$(dirname "$0")/.."
CLUSTER=${KIND_CLUSTER:-terdut-e2e}
SERVER_IMAGE=${TERDUT_SERVER_IMAGE:-terdut-standin:e2e}
for t in docker kind helm kubectl python3; do command -v "$t" >/dev/null || { echo "$t is required" >&2; exit 1; }; done

kind create cluster --name "$CLUSTER" --wait 120s
trap 'kind delete cluster --name "$CLUSTER"' EXIT
docker build -t terdut-operator:e2e .
docker build -f e2e/standin/Dockerfile --build-arg STANDIN_ADMIN=1 -t terdut-standin:e2e .
kind load docker-image --name "$CLUSTER" terdut-operator:e2e terdut-standin:e2e

helm install terdut-operator chart/terdut-operator --namespace terdut-system --create-namespace \
  --set image.repository=terdut-operator --set image.tag=e2e --set image.pullPolicy=Never --wait --timeout 5m
kubectl -n terdut-system port-forward svc/terdut-operator-metrics 9464:8080 >/dev/null 2>&1 &
PF=$!
trap 'kill $PF 2>/dev/null; kind delete cluster --name "$CLUSTER"' EXIT

STANDIN_MODE=cluster TERDUT_SERVER_IMAGE="$SERVER_IMAGE" KUBECTL=kubectl \
  METRICS_URL=http://127.0.0.1:9464/metrics ADMIN_URL=http://127.0.0.1:8080 \
  PROMTOOL="$(command -v promtool || true)" python3 e2e/scenario.py
