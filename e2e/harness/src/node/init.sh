#!/usr/bin/env bash
# PID 1 of a node (docs/node.md): runs inside the node's network namespace and in a PID and
# mount namespace of its own (`nsenter --net=<ns> unshare --pid --fork --kill-child
# --mount-proc`), so that whatever the node starts (containerd, its shims, every container)
# dies with this process and every mount made on the node goes with its mount namespace.
# Starts containerd, then the kubelet, kube-proxy and CoreDNS. A component that exits on its
# own breaks the node, and this exits (taking the rest with it). A component a fault test
# stops (NodeCluster::stop_component writes hold/<name>, then signals it) is started again,
# as systemd would, once hold/<name> is gone.
#   init.sh <node dir> <binaries dir>
set -euo pipefail
W=$1
export PATH="$2:/usr/lib/cni:/usr/sbin:/usr/bin:/sbin:/bin"
cd "$W"
mkdir -p "$W/hold"

# Paths CNI plugins write to whatever they are told, kept inside the node's folder.
mkdir -p /var/lib/cni "$W/state/cni"
mount --bind "$W/state/cni" /var/lib/cni

# supervise <name> <command...>: runs it, logging to logs/<name>.log; see above.
supervise() {
  local name=$1 rc
  shift
  while :; do
    echo "=== $(date -u +%H:%M:%S) $name starting" >> "$W/logs/$name.log"
    rc=0
    "$@" >> "$W/logs/$name.log" 2>&1 || rc=$?
    if [ ! -e "$W/hold/$name" ]; then
      echo "$name exited ($rc); stopping the node" >&2
      return 1
    fi
    echo "=== $(date -u +%H:%M:%S) $name stopped on request ($rc)" >> "$W/logs/$name.log"
    while [ -e "$W/hold/$name" ]; do sleep 0.1; done
  done
}

supervise containerd containerd --config "$W/config/containerd.toml" &
for _ in $(seq 1 200); do [ -S "$W/state/containerd.sock" ] && break; sleep 0.05; done

supervise kubelet kubelet --config="$W/config/kubelet.yaml" \
  --kubeconfig="$W/config/kubelet.kubeconfig" \
  --root-dir="$W/state/kubelet" --cert-dir="$W/state/kubelet-pki" \
  --hostname-override="$NODE_NAME" --node-ip="$NODE_IP" --v=1 &
supervise kube-proxy kube-proxy --config="$W/config/kube-proxy.yaml" --v=1 &
supervise coredns coredns -conf "$W/config/Corefile" &

set +e
wait -n
echo "a node process exited ($?); stopping the node" >&2
exit 1
