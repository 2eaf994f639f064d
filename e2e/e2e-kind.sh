#!/usr/bin/env bash
# `just e2e`: the scenario of `just e2e-node` (e2e/runner, `terdut-e2e kind`) on a kind
# cluster, for machines with Docker and kind. Creates the cluster from e2e/kind/cluster.yaml,
# builds the images from the project's Dockerfiles (public bases by default: BASES=local
# assembles them from Debian's packages as e2e-node does), loads them into kind, runs the
# scenario (it installs the chart with helm itself) and deletes the cluster.
# kind needs its node image from a registry, which the project's CI machines cannot reach:
# there `just e2e-node` runs the same scenario on a node of their own (docs/node.md).
set -euo pipefail
cd "$(dirname "$0")/.."
CLUSTER=${KIND_CLUSTER:-terdut-e2e}
for t in docker kubectl helm cargo go; do command -v "$t" >/dev/null || { echo "$t is required" >&2; exit 1; }; done
# kind from PATH, else built from the Go module proxy into the cache.
command -v kind >/dev/null || PATH="$(bash e2e/control-plane/build.sh kind):$PATH"

kind create cluster --name "$CLUSTER" --config e2e/kind/cluster.yaml ${KIND_NODE_IMAGE:+--image "$KIND_NODE_IMAGE"} --wait 120s
trap 'kind delete cluster --name "$CLUSTER"' EXIT
BASES=${BASES:-public} WITH_PAUSE=0 bash e2e/images/build.sh >/dev/null
kind load docker-image --name "$CLUSTER" terdut-operator:e2e terdut-standin:e2e terdut-prometheus:e2e

cargo build -q -p terdut-e2e
KUBECTL=kubectl HELM=helm PROMTOOL="$(command -v promtool || true)" \
  "${CARGO_TARGET_DIR:-target}/debug/terdut-e2e" kind
