#!/usr/bin/env bash
# PID 1 of a node (docs/node.md): runs inside the node's network namespace and in a PID and
# mount namespace of its own (`nsenter --net=<ns> unshare --pid --fork --kill-child
# --mount-proc`), so that whatever the node starts (containerd, its shims, every container)
# dies with this process and every mount made on the node goes with its mount namespace.
# Starts containerd, then the kubelet, kube-proxy and CoreDNS; when any of them exits the node
# is broken, and this exits (taking the rest with it).
#   init.sh <node dir> <binaries dir>
set -euo pipefail
W=$1
export PATH="$2:/usr/lib/cni:/usr/sbin:/usr/bin:/sbin:/bin"
cd "$W"

# Paths CNI plugins write to whatever they are told, kept inside the node's folder.
mkdir -p /var/lib/cni "$W/state/cni"
mount --bind "$W/state/cni" /var/lib/cni

containerd --config "$W/config/containerd.toml" > "$W/logs/containerd.log" 2>&1 &
for _ in $(seq 1 200); do [ -S "$W/state/containerd.sock" ] && break; sleep 0.05; done

kubelet --config="$W/config/kubelet.yaml" --kubeconfig="$W/config/kubelet.kubeconfig" \
  --root-dir="$W/state/kubelet" --cert-dir="$W/state/kubelet-pki" \
  --hostname-override="$NODE_NAME" --node-ip="$NODE_IP" --v=1 > "$W/logs/kubelet.log" 2>&1 &
kube-proxy --config="$W/config/kube-proxy.yaml" --v=1 > "$W/logs/kube-proxy.log" 2>&1 &
coredns -conf "$W/config/Corefile" > "$W/logs/coredns.log" 2>&1 &

set +e
wait -n
echo "a node process exited ($?); stopping the node" >&2
exit 1
