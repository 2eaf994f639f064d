#!/usr/bin/env bash
# `just kind-down`: removes what e2e/e2e-kind.sh set up for its kind cluster, whether the run
# finished, failed or was `just kind-demo`: the cluster (kind deletes the node containers and
# their volumes), its network, the firewall rule for the network's bridge, the shared data
# folder, the empty /lib/modules it created, its kubeconfig. Each step only undoes what the
# run recorded in .tmp/kind/ (or what carries the cluster's and network's names), so nothing
# else on the host is touched. Idempotent.
set -uo pipefail
cd "$(dirname "$0")/../.."
CLUSTER=${KIND_CLUSTER:-terdut-e2e}
STATE=.tmp/kind
NETWORK=$(cat "$STATE/network" 2>/dev/null || echo terdut-kind)
PROVIDER=$(cat "$STATE/provider" 2>/dev/null || echo docker)
KIND=$(command -v kind || echo "$(bash e2e/control-plane/build.sh path)/kind")
log() { printf '[kind-down] %s\n' "$*" >&2; }

if [ "$PROVIDER" = podman ]; then
  export KIND_EXPERIMENTAL_PROVIDER=podman CONTAINERS_CONF=$PWD/e2e/kind/podman-containers.conf
fi
if [ -x "$KIND" ] && command -v "$PROVIDER" >/dev/null; then
  "$KIND" delete cluster --name "$CLUSTER" --kubeconfig "$STATE/kubeconfig" >/dev/null 2>&1 || true
  "$PROVIDER" network rm "$NETWORK" >/dev/null 2>&1 || true
fi
# The rule e2e-kind.sh inserted, deleted by the very arguments it was inserted with.
if [ -f "$STATE/firewall" ]; then
  mapfile -t rule < "$STATE/firewall"
  iptables -D "${rule[@]}" 2>/dev/null || true
  rm -f "$STATE/firewall"
fi
# The stand-in writes its data file there as uid 65532; root removes it.
rm -rf .tmp/kind-shared
if [ -f "$STATE/lib-modules-created" ]; then
  rmdir /lib/modules 2>/dev/null || log "/lib/modules is not empty any more: left as it is"
  rm -f "$STATE/lib-modules-created"
fi
rm -f "$STATE/kubeconfig" "$STATE/provider" "$STATE/network" "$STATE/cluster.yaml"
