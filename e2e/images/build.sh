#!/usr/bin/env bash
# `just images`: builds the operator and stand-in images from the project's Dockerfiles and
# saves each as a tar (for containerd or kind to import), in the cache:
#   terdut-operator:e2e, terdut-standin:e2e (STANDIN_ADMIN=1), terdut-prometheus:e2e and
#   registry.k8s.io/pause:3.10.1
# BASES=local (default) takes the base images e2e/images/bases.sh assembles from Debian's
# packages, so nothing is pulled; BASES=public uses the Dockerfiles' defaults (docker.io and
# gcr.io). The build context is the working tree; SOURCE=HEAD builds the last commit instead
# (`git archive`), which a tree in the middle of an edit cannot break.
# ONLY=operator builds the operator image alone and saves no tar (`just release` takes it from
# there); ARTIFACTS=DIR also writes the build stage's binaries to DIR (the Dockerfile's
# `artifacts` stage, from the same cached build: kubectl-terdut for the release).
# Prints the folder holding the tars; image sizes and build times go to stderr.
set -euo pipefail
cd "$(dirname "$0")/../.."
DOCKER=$(bash e2e/images/engine.sh)
CACHE="${TERDUT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/terdut-operator}"
OUT="$CACHE/images/tars"
TAG="${IMAGE_TAG:-e2e}"
mkdir -p "$OUT"
log() { printf '[images] %s\n' "$*" >&2; }
export DOCKER_BUILDKIT=1

args=()
if [ "${BASES:-local}" = local ]; then
  eval "$(bash e2e/images/bases.sh | tail -1)"  # BUILDER=... RUNTIME=...
  args=(--build-arg "BUILDER=$BUILDER" --build-arg "RUNTIME=$RUNTIME")
fi

# The last commit as a folder (a plain folder context: BuildKit keys COPY by content and file
# mode). `git archive` writes modes with its own umask (0002: 664 and 775) where a checkout has
# 644 and 755, so it is archived with this shell's umask into a 755 folder. A tree with nothing
# to commit is built the same way: a tree's context also holds what git ignores and
# .dockerignore does not, and empty folders, which made a clean clone's `just e2e-node` miss
# `just release`'s build stage and compile the operator a second time (~3 min).
CONTEXT=$PWD
SOURCE=${SOURCE:-tree}
if [ "$SOURCE" = tree ] && git rev-parse --verify -q HEAD >/dev/null &&
  [ -z "$(git status --porcelain --untracked-files=all)" ]; then
  SOURCE=HEAD
fi
if [ "$SOURCE" = HEAD ]; then
  CONTEXT=$(mktemp -d)
  trap 'rm -rf "$CONTEXT"' EXIT
  chmod 755 "$CONTEXT"  # mktemp's 700; a checkout's folder is 755
  git -c tar.umask="$(umask)" archive --format=tar HEAD | tar -x -C "$CONTEXT"
fi

# The build stage is shared (see Dockerfile): the second build reuses the first's.
build() {
  local ref=$1; shift
  local t0=$SECONDS log="$CACHE/images/build-$(echo "$ref" | tr '/:' '__').log"
  local ok=0
  (cd "$CONTEXT" && "$DOCKER" build --progress=plain "${args[@]}" "$@" -t "$ref" . > "$log" 2>&1) || ok=$?
  if [ "$ok" != 0 ]; then
    tail -30 "$log" >&2
    log "building $ref failed (log: $log)"
    exit 1
  fi
  log "$ref built in $((SECONDS - t0)) s, $("$DOCKER" image inspect -f '{{.Size}}' "$ref" | awk '{printf "%.1f MB", $1/1e6}')"
}
build "terdut-operator:$TAG"
if [ -n "${ARTIFACTS:-}" ]; then
  mkdir -p "$ARTIFACTS"
  t0=$SECONDS
  (cd "$CONTEXT" && "$DOCKER" build --progress=plain "${args[@]}" --target artifacts \
    --output "type=local,dest=$ARTIFACTS" . > "$CACHE/images/build-artifacts.log" 2>&1) ||
    { tail -30 "$CACHE/images/build-artifacts.log" >&2; log "exporting the build stage's binaries failed"; exit 1; }
  log "binaries of the build stage in $ARTIFACTS ($((SECONDS - t0)) s)"
fi
[ "${ONLY:-}" = operator ] && { echo "$OUT"; exit 0; }
build "terdut-standin:$TAG" -f e2e/standin/Dockerfile --build-arg STANDIN_ADMIN=1

# Prometheus for the scenario's scrape checks, from the pinned module (a static Go binary).
PROM_CTX=$(mktemp -d)
cp "$(bash e2e/control-plane/build.sh prometheus)/prometheus" "$PROM_CTX/"
prom_args=()
[ "${BASES:-local}" = local ] && prom_args=(--build-arg "RUNTIME=$RUNTIME")
t0=$SECONDS
"$DOCKER" build -q "${prom_args[@]}" -f e2e/images/prometheus/Dockerfile -t "terdut-prometheus:$TAG" "$PROM_CTX" >/dev/null
rm -rf "$PROM_CTX"
log "terdut-prometheus:$TAG built in $((SECONDS - t0)) s"

# Kubernetes' own pause container, from pause.c in the pinned module (e2e/control-plane/build.sh
# pause): the sandbox image containerd is pinned to, imported instead of pulled.
# kind brings its own (WITH_PAUSE=0).
PAUSE=registry.k8s.io/pause:3.10.1
refs=("terdut-operator:$TAG" "terdut-standin:$TAG" "terdut-prometheus:$TAG")
[ "${WITH_PAUSE:-1}" = 1 ] && refs+=("$PAUSE")
if [ "${WITH_PAUSE:-1}" = 1 ] && ! "$DOCKER" image inspect "$PAUSE" >/dev/null 2>&1; then
  BIN=$(bash e2e/control-plane/build.sh pause)
  tmp=$(mktemp -d)
  install -m 0755 "$BIN/pause" "$tmp/pause"
  tar -C "$tmp" --numeric-owner --owner=0 --group=0 -cf - pause | "$DOCKER" import \
    --change 'ENTRYPOINT ["/pause"]' --change 'USER 65535:65535' - "$PAUSE" >/dev/null
  rm -rf "$tmp"
fi

# A tar per image, rewritten only when the image changed (containerd imports them per run).
for ref in "${refs[@]}"; do
  id=$("$DOCKER" image inspect -f '{{.Id}}' "$ref")
  tar="$OUT/$(echo "$ref" | tr '/:' '__').tar"
  if [ "$(cat "$tar.id" 2>/dev/null)" != "$id" ]; then
    "$DOCKER" save -o "$tar" "$ref"
    echo "$id" > "$tar.id"
  fi
done
echo "$OUT"
