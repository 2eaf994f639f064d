#!/usr/bin/env bash
# Builds the chart's test tools from the Go module proxy into the same per-version cache as
# build.sh: helm-unittest (run standalone: it renders with helm's library, no plugin install
# needed) and kube-score. A sibling of build.sh rather than more targets in it, so the two
# scripts can change independently; same conventions (idempotent, GOFLAGS=-mod=mod,
# GOTOOLCHAIN=local, a wrapper module taking the command with `go get -tool`).
set -euo pipefail

K8S_VERSION="${K8S_VERSION:-v1.37.2}"
HELM_UNITTEST_VERSION="${HELM_UNITTEST_VERSION:-v1.1.2}"
KUBE_SCORE_VERSION="${KUBE_SCORE_VERSION:-v1.20.0}"
CACHE="${TERDUT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/terdut-operator}"
BIN="$CACHE/k8s-$K8S_VERSION/bin"
WORK="$CACHE/build"
mkdir -p "$BIN" "$WORK"
export GOFLAGS=-mod=mod GOTOOLCHAIN=local CGO_ENABLED=0

log() { printf '[chart-tools] %s\n' "$*" >&2; }

have() { for b in "$@"; do [ -x "$BIN/$b" ] || return 1; done; }

# A wrapper module in $WORK/$1 requiring the module $2 at version $3, with that module's own
# replace directives (a dependency's replaces do not apply to the module requiring it; without
# them helm-unittest builds against the upstream yaml-jsonpath and fails), then `go get -tool`
# of the command package $4.
tool_module() {
  local w="$WORK/$1" mod r
  rm -rf "$w" && mkdir -p "$w" && cd "$w"
  printf 'module local/%s\n\ngo 1.26.0\n\nrequire %s %s\n' "$(basename "$w")" "$2" "$3" > go.mod
  mod=$(go mod download -json "$2@$3" | sed -n 's/.*"GoMod": "\(.*\)".*/\1/p')
  for r in $(go mod edit -json "$mod" | python3 -c '
import json, sys
for r in json.load(sys.stdin).get("Replace") or []:
    o, n = r["Old"], r["New"]
    old = o["Path"] + ("@" + o["Version"] if o.get("Version") else "")
    print(old + "=" + n["Path"] + ("@" + n["Version"] if n.get("Version") else ""))'); do
    go mod edit -replace="$r"
  done
  go get -tool "$4@$3"
  go mod tidy
}

build_helm_unittest() {
  have helm-unittest && return 0
  log "building helm-unittest $HELM_UNITTEST_VERSION"
  local p=github.com/helm-unittest/helm-unittest/cmd/helm-unittest
  tool_module "helm-unittest-$HELM_UNITTEST_VERSION" github.com/helm-unittest/helm-unittest "$HELM_UNITTEST_VERSION" "$p"
  go build -trimpath -ldflags "-s -w" -o "$BIN/helm-unittest" "$p"
}

build_kube_score() {
  have kube-score && return 0
  log "building kube-score $KUBE_SCORE_VERSION"
  local p=github.com/zegl/kube-score/cmd/kube-score
  tool_module "kube-score-$KUBE_SCORE_VERSION" github.com/zegl/kube-score "$KUBE_SCORE_VERSION" "$p"
  go build -trimpath -ldflags "-s -w -X main.version=${KUBE_SCORE_VERSION#v}" -o "$BIN/kube-score" "$p"
}

what="${1:-all}"
case "$what" in
  all) build_helm_unittest; build_kube_score ;;
  helm-unittest) build_helm_unittest ;;
  kube-score) build_kube_score ;;
  path) ;;
  *) echo "usage: $0 [all|helm-unittest|kube-score|path]" >&2; exit 2 ;;
esac
echo "$BIN"
