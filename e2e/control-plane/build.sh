#!/usr/bin/env bash
# Builds the pinned Kubernetes test binaries (kube-apiserver, kube-controller-manager, kubectl,
# etcd, helm, promtool) from the Go module proxy into a per-version cache outside the repository,
# and with `node` what a single-node cluster adds (docs/node.md): kubelet, kube-proxy,
# kube-scheduler, containerd v2 with its runc shim and ctr, runc, CoreDNS, Prometheus and
# Kubernetes' own pause binary.
# Idempotent: a binary already in the cache is not rebuilt. See docs/adr/0002-control-plane-harness.md.
set -euo pipefail

K8S_VERSION="${K8S_VERSION:-v1.37.2}"
ETCD_VERSION="${ETCD_VERSION:-v3.7.3}"
HELM_VERSION="${HELM_VERSION:-v3.22.0}"
PROM_VERSION="${PROM_VERSION:-v0.316.0}"
CONTAINERD_VERSION="${CONTAINERD_VERSION:-v2.4.2}"
RUNC_VERSION="${RUNC_VERSION:-v1.3.3}"
COREDNS_VERSION="${COREDNS_VERSION:-v1.15.0}"
KIND_VERSION="${KIND_VERSION:-v0.33.0}"
# The sandbox image Kubernetes v1.37 expects (kubeadm's constant); built from its pause.c.
PAUSE_VERSION="${PAUSE_VERSION:-3.10.1}"
CACHE="${TERDUT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/terdut-operator}"
BIN="$CACHE/k8s-$K8S_VERSION/bin"
WORK="$CACHE/build"
mkdir -p "$BIN" "$WORK"
export GOFLAGS=-mod=mod GOTOOLCHAIN=local CGO_ENABLED=0

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
log() { printf '[control-plane] %s\n' "$*" >&2; }

have() { for b in "$@"; do [ -x "$BIN/$b" ] || return 1; done; }

# kubernetes' go.mod requires its staging modules at v0.0.0 with local replaces: a wrapper
# module in $1 points each at its published version instead (k8s.io/utils is not a staging
# module and keeps its version), then takes the commands $2... as tools.
kube_module() {
  local w=$1 staging="v0${K8S_VERSION#v1}" mod m c
  shift
  rm -rf "$w" && mkdir -p "$w" && cd "$w"
  printf 'module local/k8s-bins\n\ngo 1.26.0\n\nrequire k8s.io/kubernetes %s\n' "$K8S_VERSION" > go.mod
  mod=$(go mod download -json "k8s.io/kubernetes@$K8S_VERSION" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
  for m in $(awk '$1 ~ /^k8s\.io\// && $2=="v0.0.0"{print $1}' "$mod"); do
    go mod edit -replace="$m=$m@$staging"
  done
  for c in "$@"; do
    go get -tool "k8s.io/kubernetes/cmd/$c@$K8S_VERSION"
  done
  go mod tidy
}

# Without these, /version reports v0.0.0 and clients that parse it may break.
kube_ldflags() {
  local ld="-s -w" major minor p
  major=$(echo "$K8S_VERSION" | cut -d. -f1 | tr -d v); minor=$(echo "$K8S_VERSION" | cut -d. -f2)
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ld="$ld -X $p.gitVersion=$K8S_VERSION -X $p.gitMajor=$major -X $p.gitMinor=$minor -X $p.gitTreeState=clean"
  done
  echo "$ld"
}

build_kube() {
  have kube-apiserver kube-controller-manager kubectl && return 0
  log "building kube-apiserver, kube-controller-manager, kubectl $K8S_VERSION (10-25 min cold)"
  kube_module "$WORK/kube-$K8S_VERSION" kube-apiserver kube-controller-manager kubectl
  go build -trimpath -tags selinux,notest -ldflags "$(kube_ldflags)" -o "$BIN/" \
    k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager k8s.io/kubernetes/cmd/kubectl
}

# The node's Kubernetes side: same module and versions as build_kube, so the Go build cache it
# left makes this mostly linking.
build_kubelet() {
  have kubelet kube-proxy kube-scheduler && return 0
  log "building kubelet, kube-proxy, kube-scheduler $K8S_VERSION"
  kube_module "$WORK/kube-node-$K8S_VERSION" kubelet kube-proxy kube-scheduler
  go build -trimpath -tags selinux,notest -ldflags "$(kube_ldflags)" -o "$BIN/" \
    k8s.io/kubernetes/cmd/kubelet k8s.io/kubernetes/cmd/kube-proxy k8s.io/kubernetes/cmd/kube-scheduler
}

# kubeadm, for the kind node image (e2e/kind/node-image.sh): kind's nodes run kubeadm init/join.
build_kubeadm() {
  have kubeadm && return 0
  log "building kubeadm $K8S_VERSION"
  kube_module "$WORK/kube-kubeadm-$K8S_VERSION" kubeadm
  go build -trimpath -tags selinux,notest -ldflags "$(kube_ldflags)" -o "$BIN/" k8s.io/kubernetes/cmd/kubeadm
}

# A wrapper module in $WORK/$1 requiring nothing, then `go get -tool` of each package $2...
tool_module() {
  local w="$WORK/$1" p
  shift
  rm -rf "$w" && mkdir -p "$w" && cd "$w"
  printf 'module local/%s\n\ngo 1.26.0\n' "$(basename "$w")" > go.mod
  for p in "$@"; do go get -tool "$p"; done
  go mod tidy
}

# Kubernetes 1.36+ needs containerd 2.x (Debian's 1.6 only serves dockerd). No btrfs: its
# snapshotter needs cgo and headers, and the node uses overlayfs.
build_containerd() {
  have containerd containerd-shim-runc-v2 ctr && return 0
  log "building containerd $CONTAINERD_VERSION"
  local m=github.com/containerd/containerd/v2 c
  tool_module "containerd-$CONTAINERD_VERSION" \
    "$m/cmd/containerd@$CONTAINERD_VERSION" "$m/cmd/containerd-shim-runc-v2@$CONTAINERD_VERSION" "$m/cmd/ctr@$CONTAINERD_VERSION"
  go build -trimpath -tags no_btrfs -ldflags "-s -w -X $m/version.Version=$CONTAINERD_VERSION" -o "$BIN/" \
    "$m/cmd/containerd" "$m/cmd/containerd-shim-runc-v2" "$m/cmd/ctr"
}

# runc needs cgo for its seccomp filter (apt-get install libseccomp-dev pkg-config).
build_runc() {
  have runc && return 0
  log "building runc $RUNC_VERSION"
  tool_module "runc-$RUNC_VERSION" "github.com/opencontainers/runc@$RUNC_VERSION"
  CGO_ENABLED=1 go build -trimpath -tags seccomp -ldflags "-s -w -X main.version=${RUNC_VERSION#v}" \
    -o "$BIN/runc" github.com/opencontainers/runc
}

# CoreDNS with only the plugins the node's cluster DNS uses (e2e/node/coredns/main.go): the
# full plugin set pulls in every cloud provider's SDK.
build_coredns() {
  have coredns && return 0
  log "building coredns $COREDNS_VERSION (plugins: e2e/node/coredns/main.go)"
  local w="$WORK/coredns-$COREDNS_VERSION"
  rm -rf "$w" && mkdir -p "$w" && cp "$ROOT/e2e/node/coredns/main.go" "$w/" && cd "$w"
  printf 'module local/coredns-bin\n\ngo 1.26.0\n\nrequire github.com/coredns/coredns %s\n' "$COREDNS_VERSION" > go.mod
  go mod tidy
  go build -trimpath -ldflags "-s -w -X github.com/coredns/coredns/coremain.GitCommit=$COREDNS_VERSION" -o "$BIN/coredns" .
}

build_etcd() {
  have etcd && return 0
  log "building etcd $ETCD_VERSION"
  local w="$WORK/etcd-$ETCD_VERSION"
  rm -rf "$w" && mkdir -p "$w" && cd "$w"
  printf 'module local/etcd-bin\n\ngo 1.26.0\n\nrequire go.etcd.io/etcd/server/v3 %s\n' "$ETCD_VERSION" > go.mod
  go get -tool "go.etcd.io/etcd/server/v3@$ETCD_VERSION"
  go mod tidy
  go build -trimpath -ldflags "-s -w" -o "$BIN/etcd" go.etcd.io/etcd/server/v3
}

build_helm() {
  have helm && return 0
  log "building helm $HELM_VERSION"
  local w="$WORK/helm-$HELM_VERSION"
  rm -rf "$w" && mkdir -p "$w" && cd "$w"
  printf 'module local/helm-bin\n\ngo 1.26.0\n' > go.mod
  go get -tool "helm.sh/helm/v3/cmd/helm@$HELM_VERSION"
  go mod tidy
  go build -trimpath -ldflags "-s -w -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION" -o "$BIN/helm" helm.sh/helm/v3/cmd/helm
}

build_promtool() {
  have promtool && return 0
  log "building promtool $PROM_VERSION"
  tool_module "prom-$PROM_VERSION" "github.com/prometheus/prometheus/cmd/promtool@$PROM_VERSION"
  go build -trimpath -ldflags "-s -w" -o "$BIN/promtool" github.com/prometheus/prometheus/cmd/promtool
}

# The Prometheus server from the module promtool comes from (so the packages are cached). Without
# the builtinassets tag it has no web UI; the API, discovery and scraping are all there.
build_prometheus() {
  have prometheus && return 0
  log "building prometheus $PROM_VERSION"
  tool_module "prometheus-$PROM_VERSION" "github.com/prometheus/prometheus/cmd/prometheus@$PROM_VERSION"
  # Module v0.316.0 is Prometheus 3.16.0.
  local v=${PROM_VERSION#v0.}
  v="${v:0:1}.${v:1:2}.${PROM_VERSION##*.}"
  go build -trimpath -ldflags "-s -w -X github.com/prometheus/common/version.Version=$v" \
    -o "$BIN/prometheus" github.com/prometheus/prometheus/cmd/prometheus
}

# kind, for `just e2e` on machines that have Docker and reach kind's node image.
build_kind() {
  have kind && return 0
  log "building kind $KIND_VERSION"
  tool_module "kind-$KIND_VERSION" "sigs.k8s.io/kind@$KIND_VERSION"
  go build -trimpath -ldflags "-s -w" -o "$BIN/kind" sigs.k8s.io/kind
}

# The pause container's binary, from pause.c inside the pinned kubernetes module.
build_pause() {
  have pause && return 0
  log "building pause $PAUSE_VERSION from k8s.io/kubernetes@$K8S_VERSION build/pause/linux/pause.c"
  local dir
  dir=$(go mod download -json "k8s.io/kubernetes@$K8S_VERSION" | sed -n 's/.*"Dir": "\(.*\)".*/\1/p')
  gcc -Os -Wall -Werror -static -DVERSION="v$PAUSE_VERSION" -o "$BIN/pause" "$dir/build/pause/linux/pause.c"
  strip "$BIN/pause"
}

what="${1:-all}"
# Two checkouts building at once would share $WORK's wrapper modules: builds take turns.
if [ "$what" != path ]; then
  exec 9>"$CACHE/build.lock"
  flock 9
fi
case "$what" in
  all) build_etcd; build_kube; build_helm; build_promtool ;;
  core) build_etcd; build_kube ;;
  node) build_kubelet; build_containerd; build_runc; build_coredns; build_prometheus; build_pause ;;
  etcd|kube|helm|promtool|kubelet|kubeadm|containerd|runc|coredns|prometheus|pause|kind) "build_$what" ;;
  path) ;;
  *) echo "usage: $0 [all|core|node|etcd|kube|helm|promtool|kubelet|kubeadm|containerd|runc|coredns|prometheus|pause|kind|path]" >&2; exit 2 ;;
esac
echo "$BIN"
