#!/usr/bin/env bash
# `just bench-memory`: the operator's RSS after a cold start with (a) the actor tree and with
# (b) the kube-runtime Controller baseline, each alone in a process of its own, on the jemalloc
# linked into every binary (ADR 0010), at the same size (default: 1 server, 10,000 teams). Arguments
# go to terdut-bench; the raw numbers go to .tmp/bench/memory-{a,b}.json (docs/performance.md).
set -euo pipefail
cd "$(dirname "$0")/.."
bash e2e/control-plane/build.sh core >&2
cargo build -q --release -p terdut-bench
bin="${CARGO_TARGET_DIR:-$PWD/target}/release/terdut-bench"
args=("$@")
[ "${#args[@]}" -gt 0 ] || args=(--servers 1 --teams 10000 --sources 0)
for variant in a b; do
  echo "[bench-memory] variant ($variant)" >&2
  "$bin" --memory-only "$variant" --out ".tmp/bench/memory-$variant.json" "${args[@]}" >/dev/null
done
python3 - <<'PY'
import json
a, b = (json.load(open(f".tmp/bench/memory-{v}.json")) for v in "ab")
print(f"| {a['teams']} teams, {a['sources']} sources, {a['servers']} server(s) | all Ready | RSS over the process before, converged | after settling | peak | actors alive then | heap in use |")
print("|---|---|---|---|---|---|---|")
for name, r in (("(a) actor tree", a), ("(b) kube-runtime Controller", b)):
    heap = r.get("heap") or {}
    print(f"| {name} | {r['all_ready_ms'] / 1000:.1f} s | {r['converged_over_before_mib']} MiB | "
          f"{r['settled_over_before_mib']} MiB | {r['peak_over_before_mib']} MiB | "
          f"{r['actors_alive_settled']:.0f} | {heap.get('in_use_mib', '-')} MiB |")
print(f"(a) / (b) after settling: {a['settled_over_before_mib'] / max(b['settled_over_before_mib'], 0.1):.2f}")
PY
