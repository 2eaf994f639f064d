#!/usr/bin/env bash
# Makes sure a Docker engine answers, starting Debian's dockerd in the background when none does
# (these machines have no systemd; `apt-get install docker.io` leaves the daemon stopped).
# Idempotent. Prints the docker client to use: Debian's own 20.10 client, which drives the
# engine's built-in BuildKit itself (a newer client in PATH would want a buildx plugin).
set -euo pipefail

DOCKER=/usr/bin/docker
[ -x "$DOCKER" ] || DOCKER=$(command -v docker || true)
[ -n "$DOCKER" ] || { echo "[engine] no docker client: apt-get install -y docker.io" >&2; exit 1; }
CACHE="${TERDUT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/terdut-operator}"

if ! "$DOCKER" info >/dev/null 2>&1; then
  command -v dockerd >/dev/null || { echo "[engine] dockerd missing: apt-get install -y docker.io" >&2; exit 1; }
  mkdir -p "$CACHE/docker"
  echo "[engine] starting dockerd (log: $CACHE/docker/dockerd.log)" >&2
  # setsid: the daemon outlives the recipe that started it, like a system service would.
  # Only stdin/out/err: a daemon that inherited a caller's lock (`flock FILE just ...` keeps
  # it on an open descriptor) would hold that lock for as long as it runs.
  (
    for fd in /proc/self/fd/*; do
      fd=${fd##*/}
      if [ "$fd" -gt 2 ]; then eval "exec $fd>&-" 2>/dev/null || true; fi
    done
    exec setsid dockerd > "$CACHE/docker/dockerd.log" 2>&1 < /dev/null
  ) &
  for _ in $(seq 1 120); do "$DOCKER" info >/dev/null 2>&1 && break; sleep 0.5; done
  "$DOCKER" info >/dev/null 2>&1 || { tail -20 "$CACHE/docker/dockerd.log" >&2; exit 1; }
fi
echo "$DOCKER"
