#!/usr/bin/env bash
# Tears a node down (docs/node.md); idempotent. Run by NodeCluster::stop, and by the watchdog
# once the process that started the node is gone.
#   teardown.sh <node dir> <netns> <host-side veth> <cgroup name>
W=$1 NETNS=$2 VETH=$3 CGROUP=$4

# Every process in the node's network namespace is the node's: its PID 1 among them, and when
# a PID namespace's first process dies the kernel kills all the others (containers, shims).
for _ in $(seq 1 50); do
  pids=$(ip netns pids "$NETNS" 2>/dev/null)
  [ -z "$pids" ] && break
  kill -9 $pids 2>/dev/null
  sleep 0.1
done
ip netns del "$NETNS" 2>/dev/null
# Gone with the namespace once nothing holds it; removed here in case something still does.
ip link del "$VETH" 2>/dev/null

# The pods' cgroups under the node's cgroup root, deepest first, in every v1 hierarchy.
for h in /sys/fs/cgroup/*/; do
  [ -d "$h$CGROUP" ] || continue
  for _ in $(seq 1 50); do
    find "$h$CGROUP" -depth -type d -exec rmdir {} + 2>/dev/null
    [ -d "$h$CGROUP" ] || break
    sleep 0.1
  done
done
# A node that failed keeps its logs beside where it was (NodeCluster says where).
[ -f "$W/failed" ] && [ -d "$W/logs" ] && rm -rf "$W.logs" && mv "$W/logs" "$W.logs"
rm -rf "$W"
