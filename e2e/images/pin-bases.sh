#!/usr/bin/env bash
# Moves the public base images' digest pins in the project's Dockerfiles to what their tags
# name today, on a machine that reaches docker.io and gcr.io (the project's own machines reach
# no container registry: there `just images` assembles the bases locally and `just release`
# records their digests instead). Review the diff, then commit it: the next release builds on
# exactly those bytes.
#   e2e/images/pin-bases.sh          rewrite the pins
#   e2e/images/pin-bases.sh --check  only check that every base is pinned by digest and that
#                                    Dockerfile and e2e/standin/Dockerfile pin the same ones
#                                    (their build stage is shared); `just release` runs it
set -euo pipefail
cd "$(dirname "$0")/../.."
# The first two share their build stage, so their bases must agree.
shared=(Dockerfile e2e/standin/Dockerfile)
files=("${shared[@]}" e2e/images/prometheus/Dockerfile)

pins() { grep -hE '^ARG (BUILDER|RUNTIME)=' "$@" | sort -u; }

check() {
  local want got f
  want=$(pins "${shared[0]}")
  for f in "${shared[@]}"; do
    got=$(pins "$f")
    [ "$got" = "$want" ] || { echo "pin-bases: $f pins other bases than ${shared[0]}:" >&2; diff <(echo "$want") <(echo "$got") >&2; exit 1; }
  done
  for f in "${files[@]}"; do
    grep -qE '^ARG (BUILDER|RUNTIME)=' "$f" || { echo "pin-bases: $f names no base" >&2; exit 1; }
    if grep -E '^ARG (BUILDER|RUNTIME)=' "$f" | grep -vqE '@sha256:[0-9a-f]{64}$'; then
      echo "pin-bases: $f has a base without a digest:" >&2
      grep -E '^ARG (BUILDER|RUNTIME)=' "$f" >&2
      exit 1
    fi
  done
}

if [ "${1:-}" = --check ]; then
  check
  exit 0
fi

CRANE=$(bash e2e/control-plane/release-tools.sh crane)/crane
for f in "${files[@]}"; do
  while IFS= read -r line; do
    arg=${line%%=*}; arg=${arg#ARG }
    ref=${line#*=}; tag=${ref%@*}
    digest=$("$CRANE" digest "$tag")
    echo "$f $arg: $tag@$digest" >&2
    sed -i -E "s|^ARG $arg=.*$|ARG $arg=$tag@$digest|" "$f"
  done < <(pins "$f")
done
check
git --no-pager diff --stat -- "${files[@]}"
