#!/usr/bin/env bash
# The chart's checks in `just lint`, each failing the run:
#   - README.md is what e2e/chart/readme.py makes of values.yaml (and every value is documented)
#   - helm-unittest on chart/terdut-operator/tests/*_test.yaml
#   - kube-score on the chart rendered with every feature (default and namespaced RBAC), no
#     CRITICAL finding except the tests e2e/chart/kube-score-ignore names with a reason
#   - the PrometheusRule as rendered: `promtool check rules`, then its unit tests
#     (chart/terdut-operator/tests/promtool/alerts_test.yaml) with `promtool test rules`
#   - every dashboard panel expression parsed by `promtool check rules`
#   - the templated CRDs (crds.templated=true) are exactly the crds/ folder's, plus metadata
# Tools come from e2e/control-plane/build.sh (helm, promtool) and chart-tools.sh (helm-unittest,
# kube-score), both cached per version.
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=$(bash e2e/control-plane/chart-tools.sh all)
CHART=chart/terdut-operator
OUT=${CARGO_TARGET_DIR:-target}/chart-checks
rm -rf "$OUT" && mkdir -p "$OUT"
log() { printf '[chart] %s\n' "$*" >&2; }
render() { "$BIN/helm" template terdut-operator "$CHART" --namespace terdut-system --kube-version 1.37.2 "$@"; }

log "README.md is fresh"
python3 e2e/chart/readme.py --check

log "helm-unittest"
"$BIN/helm-unittest" --color=false "$CHART"

log "kube-score"
ignores=()
while read -r t; do ignores+=(--ignore-test "$t"); done < <(grep -v '^#' e2e/chart/kube-score-ignore | grep .)
everything=(--set prometheusRule.enabled=true --set dashboard.enabled=true --set crds.templated=true)
render -f "$CHART/ci/all-features-values.yaml" "${everything[@]}" > "$OUT/all-features.yaml"
render -f "$CHART/ci/namespaced-values.yaml" > "$OUT/namespaced.yaml"
render > "$OUT/default.yaml"
for f in default all-features namespaced; do
  "$BIN/kube-score" score --kubernetes-version v1.37 --output-format ci "${ignores[@]}" "$OUT/$f.yaml" \
    > "$OUT/kube-score-$f.txt" || { cat "$OUT/kube-score-$f.txt"; log "kube-score: CRITICAL findings in the $f render"; exit 1; }
done

log "promtool: alert rules and their unit tests"
render --set prometheusRule.enabled=true --show-only templates/prometheusrule.yaml |
  python3 -c 'import sys, yaml; print(yaml.safe_dump({"groups": yaml.safe_load(sys.stdin)["spec"]["groups"]}, sort_keys=False))' \
  > "$OUT/alerts.yaml"
"$BIN/promtool" check rules "$OUT/alerts.yaml"
cp "$CHART/tests/promtool/alerts_test.yaml" "$OUT/"
"$BIN/promtool" test rules "$OUT/alerts_test.yaml"

log "promtool: dashboard expressions"
python3 e2e/chart/dashboard.py rules "$OUT/dashboard-rules.yaml"
"$BIN/promtool" check rules "$OUT/dashboard-rules.yaml"

log "templated CRDs match crds/"
render --set crds.templated=true --show-only templates/crds.yaml | python3 -c '
import glob, sys, yaml
rendered = {d["metadata"]["name"]: d for d in yaml.safe_load_all(sys.stdin) if d}
files = {}
for f in glob.glob(sys.argv[1] + "/crds/*.yaml"):
    for d in yaml.safe_load_all(open(f)):
        if d:
            files[d["metadata"]["name"]] = d
assert rendered.keys() == files.keys(), (sorted(rendered), sorted(files))
for name, d in files.items():
    r = rendered[name]
    assert r["spec"] == d["spec"], name + ": spec differs from crds/"
    assert r["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep", name
print(len(files), "CRDs match")' "$CHART"
