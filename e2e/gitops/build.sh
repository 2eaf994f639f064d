#!/usr/bin/env bash
# Builds terdut-health (this folder: kstatus of sigs.k8s.io/cli-utils and gopher-lua, the
# versions pinned by go.mod and go.sum) from the Go module proxy into the project's cache, as
# e2e/control-plane/build.sh does for the Kubernetes binaries, and prints the binary's path.
# The cache is keyed by a hash of the sources, so a change rebuilds and an unchanged tree
# costs a hash. `just tools` runs it; so does the test that uses it (actors/tests/gitops_health.rs).
set -euo pipefail
SRC=$(cd "$(dirname "$0")" && pwd)
CACHE="${TERDUT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/terdut-operator}"
hash=$(cd "$SRC" && cat go.mod go.sum ./*.go | sha256sum | cut -c1-16)
DIR="$CACHE/gitops-$hash"
OUT="$DIR/terdut-health"
if [ ! -x "$OUT" ]; then
  printf '[gitops] building terdut-health (kstatus, gopher-lua; a minute or two cold)\n' >&2
  mkdir -p "$DIR"
  tmp=$(mktemp "$DIR/.terdut-health.XXXXXX")
  (cd "$SRC" && GOFLAGS="-mod=readonly -buildvcs=false" GOTOOLCHAIN=local CGO_ENABLED=0 \
    go build -trimpath -ldflags "-s -w" -o "$tmp" .)
  mv "$tmp" "$OUT"
  # Builds of older sources are never used again.
  find "$CACHE" -maxdepth 1 -name 'gitops-*' ! -name "gitops-$hash" -exec rm -rf {} +
fi
echo "$OUT"
