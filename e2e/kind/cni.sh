#!/usr/bin/env bash
# The pod network of a kind cluster whose node image has no default CNI (the image
# e2e/kind/node-image.sh assembles: kindnetd cannot be built here). Run once after
# `kind create cluster` (which does not wait for Ready when `disableDefaultCNI` is set) and
# before waiting for the nodes to turn Ready. It gives every node what kindnetd gives it
# (kind's images/kindnetd/cmd/kindnetd, cni.go and routes.go), written once from the host:
#   - the CNI config kindnetd templates (cni.go cniConfigTemplate, single-stack IPv4): the
#     `ptp` plugin without IP masquerade, host-local IPAM over the node's spec.podCIDR with
#     its state in /run/cni-ipam-state and a default route, the MTU of the node's eth0, then
#     `portmap`; written to a temporary name and renamed, as kindnetd does, but under a name
#     of its own (10-terdut-ptp.conflist, network "terdut-ptp"), not kindnet's
#   - a route to every other node's spec.podCIDR via that node's InternalIP (routes.go
#     syncRoute: an existing route to the range through another gateway is replaced)
# What kindnetd does and this does not (docs/node.md "The network without kindnetd"): no
# masquerade of pod traffic leaving the cluster's pod range (pods reach other pods, nodes and
# Services, not the outside), no NetworkPolicy, and nothing is kept up to date: a node added,
# removed or restarted after this ran gets no config or routes.
#   usage: cni.sh <cluster name> <docker|podman>
set -euo pipefail
CLUSTER=$1 ENGINE=$2
log() { printf '[kind-cni] %s\n' "$*" >&2; }
kubectl() { command kubectl --context "kind-$CLUSTER" "$@"; }

# kube-controller-manager assigns each node its podCIDR once the node has registered (kind
# runs it with --allocate-node-cidrs); every node must have one before anything is written.
nodes=$(kind get nodes --name "$CLUSTER")
want=$(echo "$nodes" | wc -w)
for i in $(seq 1 120); do
  have=$(kubectl get nodes -o jsonpath='{range .items[?(@.spec.podCIDR)]}{.metadata.name}{"\n"}{end}' | wc -w)
  [ "$have" -ge "$want" ] && break
  [ "$i" = 120 ] && { log "after 60 s only $have of $want nodes have a podCIDR"; kubectl get nodes -o wide >&2; exit 1; }
  sleep 0.5
done

declare -A CIDR=() IP=()
for n in $nodes; do
  CIDR[$n]=$(kubectl get node "$n" -o jsonpath='{.spec.podCIDR}')
  IP[$n]=$(kubectl get node "$n" -o jsonpath='{.status.addresses[?(@.type=="InternalIP")].address}')
  case "${CIDR[$n]}" in *:*) log "node $n: podCIDR ${CIDR[$n]} is IPv6; this covers single-stack IPv4 only"; exit 1 ;; esac
done

for n in $nodes; do
  mtu=$("$ENGINE" exec "$n" cat /sys/class/net/eth0/mtu)
  "$ENGINE" exec -i "$n" sh -c 'mkdir -p /etc/cni/net.d && cat > /etc/cni/net.d/10-terdut-ptp.conflist.temp && mv /etc/cni/net.d/10-terdut-ptp.conflist.temp /etc/cni/net.d/10-terdut-ptp.conflist' <<EOF
{
  "cniVersion": "0.3.1",
  "name": "terdut-ptp",
  "plugins": [
    {
      "type": "ptp",
      "ipMasq": false,
      "ipam": {
        "type": "host-local",
        "dataDir": "/run/cni-ipam-state",
        "routes": [{ "dst": "0.0.0.0/0" }],
        "ranges": [[{ "subnet": "${CIDR[$n]}" }]]
      },
      "mtu": $mtu
    },
    {
      "type": "portmap",
      "capabilities": { "portMappings": true }
    }
  ]
}
EOF
  for m in $nodes; do
    [ "$m" = "$n" ] && continue
    "$ENGINE" exec "$n" ip route replace "${CIDR[$m]}" via "${IP[$m]}"
  done
  log "$n (${IP[$n]}): ptp over ${CIDR[$n]}, mtu $mtu, routes to the other $((want - 1)) nodes' ranges"
done
