#!/usr/bin/env bash
# The previous version for `just upgrade-check` (docs/upgrade.md): the operator image and the
# chart of an earlier commit of this repository, built from that commit's own Dockerfile
# (`git archive` of the commit, the same local bases as e2e/images/build.sh).
#   e2e/upgrade-previous.sh <commit>
# Prints a folder holding images/terdut-operator.tar (the image terdut-operator:prev-<commit>)
# and chart/terdut-operator. The image tar is cached by commit: a warm run only extracts the
# chart. Cargo judges freshness by file times, and `git archive` gives every file the
# commit's time: in this tree's target cache the older sources would look fresh and this
# tree's artifacts would be reused (and a newer time would make this tree's next build reuse
# the commit's). So the commit builds in a target cache of its own (cache id
# terdut-target-previous), with every file touched first: each build there recompiles the
# workspace's crates and reuses only the dependencies, whatever was built there before.
# An empty one is first seeded with a copy of this tree's release build (the cache
# terdut-target, mounted read-only): the dependencies both lock files share are not compiled
# again, which on a fresh machine is most of the build (docs/upgrade.md).
set -euo pipefail
cd "$(dirname "$0")/.."
# A shallow clone lacks the commit: ask its origin for it once.
git rev-parse --verify --quiet "${1:?usage: upgrade-previous.sh <commit>}^{commit}" >/dev/null ||
  git fetch --quiet origin "$1" 2>/dev/null || true
COMMIT=$(git rev-parse --verify --quiet "$1^{commit}") || {
  echo "[previous] commit $1 is not in this clone (a shallow clone? fetch its history)" >&2
  exit 1
}
SHORT=${COMMIT:0:7}
CACHE="${TERDUT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/terdut-operator}"
OUT="$CACHE/images/previous/$SHORT"
REF="terdut-operator:prev-$SHORT"
log() { printf '[previous] %s\n' "$*" >&2; }
mkdir -p "$OUT/images"

rm -rf "$OUT/chart"
git archive --format=tar "$COMMIT" chart/terdut-operator | tar -x -C "$OUT"

if [ -s "$OUT/images/terdut-operator.tar" ]; then
  log "$REF cached ($OUT/images/terdut-operator.tar)"
  echo "$OUT"
  exit 0
fi

DOCKER=$(bash e2e/images/engine.sh)
export DOCKER_BUILDKIT=1
args=()
if [ "${BASES:-local}" = local ]; then
  eval "$(bash e2e/images/bases.sh | tail -1)"  # BUILDER=... RUNTIME=...
  args=(--build-arg "BUILDER=$BUILDER" --build-arg "RUNTIME=$RUNTIME")
fi
CONTEXT=$(mktemp -d)
trap 'rm -rf "$CONTEXT"' EXIT
git archive --format=tar "$COMMIT" | tar -x -C "$CONTEXT"
find "$CONTEXT" -exec touch {} +
grep -q 'id=terdut-target,' "$CONTEXT/Dockerfile" || {
  log "$SHORT's Dockerfile has no target cache mount named terdut-target; see this script"
  exit 1
}
sed -i \
  -e 's|--mount=type=cache,id=terdut-target,target=/src/target|--mount=type=cache,id=terdut-target-previous,target=/src/target --mount=type=cache,id=terdut-target,target=/seed,readonly|' \
  -e 's|rm -f rust-toolchain.toml|{ [ -d target/release ] \|\| [ ! -d /seed/release ] \|\| cp -a /seed/release target/; } \&\& rm -f rust-toolchain.toml|' \
  "$CONTEXT/Dockerfile"
grep -q 'cp -a /seed/release' "$CONTEXT/Dockerfile" || {
  log "$SHORT's Dockerfile does not build as this script expects (no seeded target); see this script"
  exit 1
}
t0=$SECONDS
buildlog="$OUT/build.log"
(cd "$CONTEXT" && "$DOCKER" build --progress=plain "${args[@]}" -t "$REF" . > "$buildlog" 2>&1) || {
  tail -30 "$buildlog" >&2
  log "building $REF failed (log: $buildlog)"
  exit 1
}
"$DOCKER" save -o "$OUT/images/terdut-operator.tar.part" "$REF"
mv "$OUT/images/terdut-operator.tar.part" "$OUT/images/terdut-operator.tar"
log "$REF built from $SHORT in $((SECONDS - t0)) s"
echo "$OUT"
