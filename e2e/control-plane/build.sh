#!/usr/bin/env bash
# Builds the pinned Kubernetes test binaries (kube-apiserver, kube-controller-manager, kubectl,
# etcd, helm, promtool) from the Go module proxy into a per-version cache outside the repository.
# Idempotent: a binary already in the cache is not rebuilt. See docs/adr/0002-control-plane-harness.md.
set -euo pipefail

K8S_VERSION="${K8S_VERSION:-v1.37.2}"
ETCD_VERSION="${ETCD_VERSION:-v3.7.3}"
HELM_VERSION="${HELM_VERSION:-v3.22.0}"
PROM_VERSION="${PROM_VERSION:-v0.316.0}"
CACHE="${TERDUT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/terdut-operator}"
BIN="$CACHE/k8s-$K8S_VERSION/bin"
WORK="$CACHE/build"
mkdir -p "$BIN" "$WORK"
export GOFLAGS=-mod=mod GOTOOLCHAIN=local CGO_ENABLED=0

log() { printf '[control-plane] %s\n' "$*" >&2; }

have() { for b in "$@"; do [ -x "$BIN/$b" ] || return 1; done; }

build_kube() {
  have kube-apiserver kube-controller-manager kubectl && return 0
  log "building kube-apiserver, kube-controller-manager, kubectl $K8S_VERSION (10-25 min cold)"
  local w="$WORK/kube-$K8S_VERSION" staging="v0${K8S_VERSION#v1}"
  rm -rf "$w" && mkdir -p "$w" && cd "$w"
  printf 'module local/k8s-bins\n\ngo 1.26.0\n\nrequire k8s.io/kubernetes %s\n' "$K8S_VERSION" > go.mod
  local mod
  mod=$(go mod download -json "k8s.io/kubernetes@$K8S_VERSION" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
  # kubernetes' go.mod requires its staging modules at v0.0.0 with local replaces: point each at
  # its published version instead (k8s.io/utils is not a staging module and keeps its version).
  for m in $(awk '$1 ~ /^k8s\.io\// && $2=="v0.0.0"{print $1}' "$mod"); do
    go mod edit -replace="$m=$m@$staging"
  done
  for c in kube-apiserver kube-controller-manager kubectl; do
    go get -tool "k8s.io/kubernetes/cmd/$c@$K8S_VERSION"
  done
  go mod tidy
  local ld="-s -w" major minor
  major=$(echo "$K8S_VERSION" | cut -d. -f1 | tr -d v); minor=$(echo "$K8S_VERSION" | cut -d. -f2)
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    ld="$ld -X $p.gitVersion=$K8S_VERSION -X $p.gitMajor=$major -X $p.gitMinor=$minor -X $p.gitTreeState=clean"
  done
  go build -trimpath -tags selinux,notest -ldflags "$ld" -o "$BIN/" \
    k8s.io/kubernetes/cmd/kube-apiserver k8s.io/kubernetes/cmd/kube-controller-manager k8s.io/kubernetes/cmd/kubectl
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
  local w="$WORK/prom-$PROM_VERSION"
  rm -rf "$w" && mkdir -p "$w" && cd "$w"
  printf 'module local/promtool-bin\n\ngo 1.26.0\n' > go.mod
  go get -tool "github.com/prometheus/prometheus/cmd/promtool@$PROM_VERSION"
  go mod tidy
  go build -trimpath -ldflags "-s -w" -o "$BIN/promtool" github.com/prometheus/prometheus/cmd/promtool
}

what="${1:-all}"
case "$what" in
  all) build_etcd; build_kube; build_helm; build_promtool ;;
  core) build_etcd; build_kube ;;
  etcd|kube|helm|promtool) "build_$what" ;;
  path) ;;
  *) echo "usage: $0 [all|core|etcd|kube|helm|promtool|path]" >&2; exit 2 ;;
esac
echo "$BIN"
