#!/usr/bin/env bash
# Builds the release's tools from the Go module proxy into the same per-version cache as
# build.sh: `registry` (the CNCF distribution registry, the OCI registry `just e2e-node` runs
# beside its node), `crane` (go-containerregistry's OCI client: `just release` pushes the
# image with it, byte for byte, so the digest the chart names is the digest pulled) and
# `amtool` (Alertmanager's config checker, for the Alertmanager snippet of the docs). A sibling
# of build.sh and chart-tools.sh, with the same conventions (idempotent, GOFLAGS=-mod=mod,
# GOTOOLCHAIN=local, a wrapper module taking the command with `go get -tool`).
#   release-tools.sh [all|registry|crane|amtool|path]   prints the binaries' folder
set -euo pipefail

K8S_VERSION="${K8S_VERSION:-v1.37.2}"
DISTRIBUTION_VERSION="${DISTRIBUTION_VERSION:-v3.1.2}"
CRANE_VERSION="${CRANE_VERSION:-v0.22.1}"
ALERTMANAGER_VERSION="${ALERTMANAGER_VERSION:-v0.35.0}"
CACHE="${TERDUT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/terdut-operator}"
BIN="$CACHE/k8s-$K8S_VERSION/bin"
WORK="$CACHE/build"
mkdir -p "$BIN" "$WORK"
export GOFLAGS=-mod=mod GOTOOLCHAIN=local CGO_ENABLED=0

log() { printf '[release-tools] %s\n' "$*" >&2; }

have() { for b in "$@"; do [ -x "$BIN/$b" ] || return 1; done; }

# A wrapper module in $WORK/$1 requiring nothing, then `go get -tool` of the package $2.
tool_module() {
  local w="$WORK/$1"
  rm -rf "$w" && mkdir -p "$w" && cd "$w"
  printf 'module local/%s\n\ngo 1.26.0\n' "$(basename "$w")" > go.mod
  go get -tool "$2"
  go mod tidy
}

build_registry() {
  have registry && return 0
  log "building registry (distribution) $DISTRIBUTION_VERSION"
  local p=github.com/distribution/distribution/v3/cmd/registry
  tool_module "registry-$DISTRIBUTION_VERSION" "$p@$DISTRIBUTION_VERSION"
  go build -trimpath -ldflags "-s -w -X github.com/distribution/distribution/v3/version.version=$DISTRIBUTION_VERSION" \
    -o "$BIN/registry" "$p"
}

build_crane() {
  have crane && return 0
  log "building crane $CRANE_VERSION"
  local p=github.com/google/go-containerregistry/cmd/crane
  tool_module "crane-$CRANE_VERSION" "$p@$CRANE_VERSION"
  go build -trimpath -ldflags "-s -w -X github.com/google/go-containerregistry/cmd/crane/cmd.Version=$CRANE_VERSION" \
    -o "$BIN/crane" "$p"
}

build_amtool() {
  have amtool && return 0
  log "building amtool (alertmanager) $ALERTMANAGER_VERSION"
  local p=github.com/prometheus/alertmanager/cmd/amtool
  tool_module "amtool-$ALERTMANAGER_VERSION" "$p@$ALERTMANAGER_VERSION"
  go build -trimpath -ldflags "-s -w" -o "$BIN/amtool" "$p"
}

what="${1:-all}"
# Builds take turns with build.sh's (they share $WORK and the Go build cache).
if [ "$what" != path ]; then
  exec 9>"$CACHE/build.lock"
  flock 9
fi
case "$what" in
  all) build_registry; build_crane; build_amtool ;;
  registry|crane|amtool) "build_$what" ;;
  path) ;;
  *) echo "usage: $0 [all|registry|crane|amtool|path]" >&2; exit 2 ;;
esac
echo "$BIN"
