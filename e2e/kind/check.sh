#!/usr/bin/env bash
# `just e2e-kind-check`: what of `just e2e` can be checked on a machine that reaches no
# container registry (docs/node.md "kind"). kind (from PATH, else built into the cache) must
# refuse a broken config, and take e2e/kind/cluster.yaml up to the one step these machines
# cannot do: pulling kind's node image. Where the image can be pulled, the cluster is created
# and deleted again. The images themselves load as `kind load` loads them (a `docker save` tar
# imported into containerd's k8s.io namespace): `just e2e-node` does that on every run.
set -euo pipefail
cd "$(dirname "$0")/../.."
KIND=$(command -v kind || echo "$(bash e2e/control-plane/build.sh kind)/kind")
bash e2e/images/engine.sh >/dev/null
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "[kind-check] FAIL $*" >&2; exit 1; }

printf 'kind: Cluster\napiVersion: kind.x-k8s.io/v1alpha4\nnodes: [{role: nonsense}]\n' > "$tmp/bad.yaml"
"$KIND" create cluster --name terdut-kind-check --config "$tmp/bad.yaml" > "$tmp/bad.out" 2>&1 \
  && fail "kind accepted a config with no control-plane node"
grep -q "invalid configuration" "$tmp/bad.out" || fail "kind refused the broken config for another reason: $(tail -1 "$tmp/bad.out")"
echo "[kind-check] ok   kind validates configs (a broken one is refused: invalid configuration)"

if "$KIND" create cluster --name terdut-kind-check --config e2e/kind/cluster.yaml --wait 60s > "$tmp/good.out" 2>&1; then
  "$KIND" delete cluster --name terdut-kind-check >/dev/null 2>&1
  echo "[kind-check] ok   e2e/kind/cluster.yaml: the cluster came up (and is deleted again)"
  exit 0
fi
"$KIND" delete cluster --name terdut-kind-check >/dev/null 2>&1 || true
grep -q "invalid configuration" "$tmp/good.out" && fail "e2e/kind/cluster.yaml: $(grep 'invalid configuration' "$tmp/good.out")"
grep -q "failed to pull image" "$tmp/good.out" || fail "e2e/kind/cluster.yaml: $(tail -3 "$tmp/good.out")"
echo "[kind-check] ok   e2e/kind/cluster.yaml is valid: kind stops only at pulling its node image ($(grep -o 'kindest/node:v[0-9.]*' "$tmp/good.out" | head -1)), which needs a registry"
