#!/usr/bin/env bash
# Builds the binaries a kind node image holds beyond what e2e/control-plane/build.sh already
# builds for the single-node cluster, each at the version kind v0.33.0 pins (its
# images/base/Dockerfile, pkg/build/nodeimage and images/*/Makefile) or, for the control plane's
# images, the version kubeadm v1.37.2 asks for (`kubeadm config images list`), from the Go module
# proxy into a per-version cache outside the repository (docs/node.md "kind node image"):
#   crictl                          sigs.k8s.io/cri-tools v1.36.0
#   host-local loopback ptp portmap github.com/containernetworking/plugins v1.9.1
#   containerd-fuse-overlayfs-grpc  github.com/containerd/fuse-overlayfs-snapshotter/v2 v2.1.7
#   local-path-provisioner          github.com/rancher/local-path-provisioner v0.0.33 (kind pins
#                                   v0.0.34, which the module proxy does not serve)
#   etcd                            go.etcd.io/etcd/server/v3 v3.7.0 (kubeadm's 3.7.0-0)
#   coredns                         github.com/coredns/coredns v1.14.6 with the plugins of
#                                   kubeadm's Corefile (e2e/kind/coredns/main.go)
#   pause                           pause.c of k8s.io/kubernetes, as kind's sandbox image 3.10
# kubeadm comes from build.sh (`build.sh kubeadm`), beside kubelet and kubectl.
# Idempotent; prints the folder. Usage: bins.sh [all|path|<one of the above>]
set -euo pipefail

KIND_VERSION="${KIND_VERSION:-v0.33.0}"
CRICTL_VERSION=v1.36.0
CNI_PLUGINS_VERSION=v1.9.1
FUSE_OVERLAYFS_VERSION=v2.1.7
LOCAL_PATH_VERSION=v0.0.33
KIND_ETCD_VERSION=v3.7.0
KIND_COREDNS_VERSION=v1.14.6
KIND_PAUSE_VERSION=3.10
K8S_VERSION="${K8S_VERSION:-v1.37.2}"
CACHE="${TERDUT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/terdut-operator}"
BIN="$CACHE/kind-$KIND_VERSION/bin"
WORK="$CACHE/build"
mkdir -p "$BIN" "$WORK"
export GOFLAGS=-mod=mod GOTOOLCHAIN=local CGO_ENABLED=0
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
log() { printf '[kind-bins] %s\n' "$*" >&2; }
have() { for b in "$@"; do [ -x "$BIN/$b" ] || return 1; done; }

# A wrapper module in $WORK/$1 requiring nothing, then `go get -tool` of each package $2...
tool_module() {
  local w="$WORK/$1" p
  shift
  rm -rf "$w" && mkdir -p "$w" && cd "$w"
  printf 'module local/%s\n\ngo 1.26.0\n' "$(basename "$w")" > go.mod
  for p in "$@"; do go get -tool "$p"; done
  go mod tidy
}

build_crictl() {
  have crictl && return 0
  log "building crictl $CRICTL_VERSION"
  tool_module "kind-crictl-$CRICTL_VERSION" "sigs.k8s.io/cri-tools/cmd/crictl@$CRICTL_VERSION"
  go build -trimpath -ldflags "-s -w -X sigs.k8s.io/cri-tools/pkg/version.Version=$CRICTL_VERSION" \
    -o "$BIN/crictl" sigs.k8s.io/cri-tools/cmd/crictl
}

# The four plugins kind's base image installs in /opt/cni/bin.
build_cni() {
  have host-local loopback ptp portmap && return 0
  log "building CNI plugins $CNI_PLUGINS_VERSION (host-local, loopback, ptp, portmap)"
  local m=github.com/containernetworking/plugins p
  tool_module "kind-cni-$CNI_PLUGINS_VERSION" "$m/plugins/ipam/host-local@$CNI_PLUGINS_VERSION" \
    "$m/plugins/main/loopback@$CNI_PLUGINS_VERSION" "$m/plugins/main/ptp@$CNI_PLUGINS_VERSION" \
    "$m/plugins/meta/portmap@$CNI_PLUGINS_VERSION"
  for p in ipam/host-local main/loopback main/ptp meta/portmap; do
    go build -trimpath -ldflags "-s -w -X $m/pkg/utils/buildversion.BuildVersion=$CNI_PLUGINS_VERSION" \
      -o "$BIN/$(basename "$p")" "$m/plugins/$p"
  done
}

build_fuse_overlayfs() {
  have containerd-fuse-overlayfs-grpc && return 0
  log "building containerd-fuse-overlayfs-grpc $FUSE_OVERLAYFS_VERSION"
  local m=github.com/containerd/fuse-overlayfs-snapshotter/v2
  tool_module "kind-fuse-overlayfs-$FUSE_OVERLAYFS_VERSION" "$m/cmd/containerd-fuse-overlayfs-grpc@$FUSE_OVERLAYFS_VERSION"
  go build -trimpath -ldflags "-s -w" -o "$BIN/containerd-fuse-overlayfs-grpc" "$m/cmd/containerd-fuse-overlayfs-grpc"
}

build_local_path() {
  have local-path-provisioner && return 0
  log "building local-path-provisioner $LOCAL_PATH_VERSION"
  local m=github.com/rancher/local-path-provisioner
  tool_module "kind-local-path-$LOCAL_PATH_VERSION" "$m@$LOCAL_PATH_VERSION"
  go build -trimpath -ldflags "-s -w -X main.VERSION=$LOCAL_PATH_VERSION" -o "$BIN/local-path-provisioner" "$m"
}

build_etcd() {
  have etcd && return 0
  log "building etcd $KIND_ETCD_VERSION (kubeadm's)"
  tool_module "kind-etcd-$KIND_ETCD_VERSION" "go.etcd.io/etcd/server/v3@$KIND_ETCD_VERSION"
  go build -trimpath -ldflags "-s -w" -o "$BIN/etcd" go.etcd.io/etcd/server/v3
}

# kubeadm's Corefile (errors, health, ready, kubernetes, prometheus, forward, cache, loop,
# reload, loadbalance) and log: the full plugin set pulls in every cloud provider's SDK.
build_coredns() {
  have coredns && return 0
  log "building coredns $KIND_COREDNS_VERSION (plugins: e2e/kind/coredns/main.go)"
  local w="$WORK/kind-coredns-$KIND_COREDNS_VERSION"
  rm -rf "$w" && mkdir -p "$w" && cp "$ROOT/e2e/kind/coredns/main.go" "$w/" && cd "$w"
  printf 'module local/coredns-bin\n\ngo 1.26.0\n\nrequire github.com/coredns/coredns %s\n' "$KIND_COREDNS_VERSION" > go.mod
  go mod tidy
  go build -trimpath -ldflags "-s -w -X github.com/coredns/coredns/coremain.GitCommit=$KIND_COREDNS_VERSION" -o "$BIN/coredns" .
}

# kind's containerd config names registry.k8s.io/pause:3.10 as its sandbox image; pause.c is
# the same program, its version string is the one that differs.
build_pause() {
  have pause && return 0
  log "building pause $KIND_PAUSE_VERSION from k8s.io/kubernetes@$K8S_VERSION build/pause/linux/pause.c"
  local dir
  dir=$(go mod download -json "k8s.io/kubernetes@$K8S_VERSION" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')
  gcc -Os -Wall -Werror -static -DVERSION="v$KIND_PAUSE_VERSION" -o "$BIN/pause" "$dir/build/pause/linux/pause.c"
  strip "$BIN/pause"
}

what="${1:-all}"
if [ "$what" != path ]; then
  exec 9>"$CACHE/kind-bins.lock"
  flock 9
fi
case "$what" in
  all) build_crictl; build_cni; build_fuse_overlayfs; build_local_path; build_etcd; build_coredns; build_pause ;;
  crictl|cni|fuse_overlayfs|local_path|etcd|coredns|pause) "build_$what" ;;
  path) ;;
  *) echo "usage: $0 [all|path|crictl|cni|fuse_overlayfs|local_path|etcd|coredns|pause]" >&2; exit 2 ;;
esac
echo "$BIN"
