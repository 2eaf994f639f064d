#!/usr/bin/env bash
# `just e2e`: the scenario of `just e2e-node` (e2e/runner, `terdut-e2e kind`) on a kind cluster
# of one control-plane and two workers (e2e/kind/cluster.yaml), for machines with Docker and
# kind. The node image: KIND_NODE_IMAGE if set, else kind's default where a registry gives it,
# else the one e2e/kind/node-image.sh assembles here (docs/node.md "kind node image"). Builds the
# images from the project's Dockerfiles (public bases where a registry answers, else
# BASES=local), loads them with `kind load`, runs the scenario (it installs the chart with helm
# itself) and deletes the cluster and its network. KEEP=1 (`just kind-demo`) stops after the
# golden path and leaves the cluster up.
set -euo pipefail
cd "$(dirname "$0")/.."
CLUSTER=${KIND_CLUSTER:-terdut-e2e}
# A network of its own, not kind's shared "kind".
export KIND_EXPERIMENTAL_DOCKER_NETWORK=${KIND_EXPERIMENTAL_DOCKER_NETWORK:-terdut-kind}
for t in docker kubectl helm cargo go; do command -v "$t" >/dev/null || { echo "$t is required" >&2; exit 1; }; done
# kind from PATH, else built from the Go module proxy into the cache.
command -v kind >/dev/null || PATH="$(bash e2e/control-plane/build.sh kind):$PATH"
log() { printf '[e2e-kind] %s\n' "$*" >&2; }

KIND_SRC=$(GOFLAGS=-mod=mod go mod download -json "sigs.k8s.io/kind@$(kind version | awk '{print $2}')" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')
DEFAULT_IMAGE=$(sed -n 's/^const Image = "\(.*\)"/\1/p' "$KIND_SRC/pkg/apis/config/defaults/image.go")
BASES=${BASES:-public}
if [ -z "${KIND_NODE_IMAGE:-}" ]; then
  if docker image inspect "$DEFAULT_IMAGE" >/dev/null 2>&1 || docker pull -q "$DEFAULT_IMAGE" >/dev/null 2>&1; then
    KIND_NODE_IMAGE=$DEFAULT_IMAGE
  else
    log "no registry gives $DEFAULT_IMAGE: assembling a node image here (e2e/kind/node-image.sh)"
    KIND_NODE_IMAGE=$(bash e2e/kind/node-image.sh)
    BASES=local
  fi
fi
log "node image $KIND_NODE_IMAGE"

cleanup() {
  kind delete cluster --name "$CLUSTER" >/dev/null 2>&1 || true
  docker network rm "$KIND_EXPERIMENTAL_DOCKER_NETWORK" >/dev/null 2>&1 || true
}
cleanup
[ "${KEEP:-0}" = 1 ] || trap cleanup EXIT
kind create cluster --name "$CLUSTER" --config e2e/kind/cluster.yaml --image "$KIND_NODE_IMAGE" --wait 180s

# The image tags are shared with `just e2e-node`: built and loaded under its lock.
flock /tmp/terdut-e2e-node.lock bash -c '
  BASES='"$BASES"' WITH_PAUSE=0 bash e2e/images/build.sh >/dev/null
  kind load docker-image --name '"$CLUSTER"' terdut-operator:e2e terdut-standin:e2e terdut-prometheus:e2e'

cargo build -q -p terdut-e2e
KUBECTL=kubectl HELM=helm PROMTOOL="$(command -v promtool || true)" \
  "${CARGO_TARGET_DIR:-target}/debug/terdut-e2e" kind
if [ "${KEEP:-0}" = 1 ]; then
  cat <<EOF
The cluster stays up (kind cluster $CLUSTER, kubectl context kind-$CLUSTER). Look around:
  kubectl get nodes -o wide
  kubectl get terdutservers,terdutteams,terdutalertsources -A
  kubectl -n terdut-system get pods -o wide
  kubectl -n terdut-system logs deploy/terdut-operator
Delete it with: kind delete cluster --name $CLUSTER && docker network rm $KIND_EXPERIMENTAL_DOCKER_NETWORK
EOF
fi
