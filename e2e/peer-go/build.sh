#!/usr/bin/env bash
# Builds peer (d) of `just bench`, terdut-peer-go (this module: controller-runtime v0.25.3,
# client-go v0.37.2 from the Go module proxy, go.sum committed), into the machine's cache like
# the other Go tools (e2e/control-plane/build.sh), keyed by a hash of this folder's sources so a
# change rebuilds it. Prints the binary's path.
set -euo pipefail
cd "$(dirname "$0")"
CACHE="${TERDUT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/terdut-operator}"
HASH=$(cat go.mod go.sum ./*.go | sha256sum | cut -c1-12)
BIN="$CACHE/peer-go-$HASH/terdut-peer-go"
if [ ! -x "$BIN" ]; then
  echo "[peer-go] building terdut-peer-go ($HASH)" >&2
  mkdir -p "$(dirname "$BIN")"
  GOTOOLCHAIN=local GOFLAGS=-mod=readonly CGO_ENABLED=0 \
    go build -trimpath -ldflags "-s -w" -o "$BIN.tmp" .
  mv "$BIN.tmp" "$BIN"
fi
echo "$BIN"
