#!/usr/bin/env bash
# `just audit`: `cargo deny check advisories` against the RustSec database, nothing ignored
# (docs/adr/0003-supply-chain.md).
#
# Where github.com answers, cargo-deny fetches the database itself. Where it does not (the
# project's CI machines reach package registries only), the repository's own snapshot of
# github.com/rustsec/advisory-db is used offline: e2e/advisories/rustsec-advisory-db.tar.xz,
# described by e2e/advisories/SNAPSHOT (its commit, date and checksum). $ADVISORY_DB_MIRROR, a
# clone of the database, takes its place when set. Either way the database's date is printed,
# and one older than $ADVISORY_DB_MAX_AGE_DAYS (default 180) fails the check: an old database
# would pass a tree a current one fails. Then a canary crate with a known advisory
# (e2e/advisories/canary) must fail against the same database, so a database that is found but
# not read cannot pass.
#
#   bash e2e/advisories.sh                 the check
#   bash e2e/advisories.sh refresh [CLONE] rewrite the snapshot from CLONE (a clone of
#                                          github.com/rustsec/advisory-db; default: clone it)
set -euo pipefail
cd "$(dirname "$0")/.."

dir=e2e/advisories
tarball=$dir/rustsec-advisory-db.tar.xz
meta=$dir/SNAPSHOT
max_age_days=${ADVISORY_DB_MAX_AGE_DAYS:-180}
log() { printf '[audit] %s\n' "$*" >&2; }
field() { sed -n "s/^$1=//p" "$meta"; }

if [ "${1:-}" = refresh ]; then
  src=${2:-}
  if [ -z "$src" ]; then
    src=$(mktemp -d)
    trap 'rm -rf "$src"' EXIT
    git clone --quiet --depth 1 https://github.com/rustsec/advisory-db "$src"
  fi
  commit=$(git -C "$src" rev-parse HEAD)
  date=$(git -C "$src" log -1 --format=%cs)
  # Reproducible: the same commit gives the same bytes (sorted, fixed owner and time).
  git -C "$src" archive --format=tar HEAD crates rust LICENSE.txt support.toml \
    | (tmp=$(mktemp -d) && tar -x -C "$tmp" && tar -C "$tmp" --sort=name --mtime="$date 00:00Z" \
        --owner=0 --group=0 --numeric-owner -cf - . | xz -9e > "$tarball"; rm -rf "$tmp")
  cat > "$meta" <<EOF
# The RustSec advisory database (CC0-1.0) as e2e/advisories.sh reads it where github.com is
# unreachable; rewritten by \`bash e2e/advisories.sh refresh\`.
source=https://github.com/rustsec/advisory-db
commit=$commit
date=$date
sha256=$(sha256sum "$tarball" | cut -d' ' -f1)
EOF
  log "snapshot $commit of $date: $tarball ($(du -h "$tarball" | cut -f1))"
  exit 0
fi

# cargo-deny reads every package's manifest, and with --offline only from the local cache:
# fill it first (package registries answer where GitHub does not).
cargo metadata --format-version 1 >/dev/null
cargo metadata --format-version 1 --manifest-path "$dir/canary/Cargo.toml" >/dev/null

if timeout 15 git ls-remote https://github.com/rustsec/advisory-db HEAD >/dev/null 2>&1; then
  log "github.com reachable: cargo-deny fetches the RustSec database"
  cargo deny check advisories
  if cargo deny --manifest-path "$dir/canary/Cargo.toml" check advisories >/dev/null 2>&1; then
    log "the canary (time 0.1.45, RUSTSEC-2020-0071) passed: the database was not read"
    exit 1
  fi
  exit 0
fi

# cargo-deny (0.20, pinned in e2e/bootstrap.sh) keeps the database of the default URL in
# <db-path>/advisory-db-3157b0e258782691; with --offline it reads that clone as it is.
db_path=$PWD/.tmp/advisory-dbs
clone=$db_path/advisory-db-3157b0e258782691
rm -rf "$clone"
mkdir -p "$clone"
if [ -n "${ADVISORY_DB_MIRROR:-}" ]; then
  rm -rf "$clone"
  git clone --quiet "$ADVISORY_DB_MIRROR" "$clone"
  what="$(git -C "$clone" log -1 --format='%h') from $ADVISORY_DB_MIRROR"
  date=$(git -C "$clone" log -1 --format=%cs)
else
  want=$(field sha256)
  have=$(sha256sum "$tarball" | cut -d' ' -f1)
  if [ "$want" != "$have" ]; then
    log "$tarball does not match $meta (sha256 $have, expected $want)"
    exit 1
  fi
  tar -xJf "$tarball" -C "$clone"
  date=$(field date)
  what="$(field commit | cut -c1-12) (the repository's snapshot, $tarball)"
  # A git repository, as cargo-deny's own fetch leaves it.
  git -C "$clone" init --quiet
  git -C "$clone" add -A
  GIT_AUTHOR_DATE="${date}T00:00:00Z" GIT_COMMITTER_DATE="${date}T00:00:00Z" \
    git -C "$clone" -c user.name=snapshot -c user.email=snapshot@invalid commit --quiet -m "$what"
fi
age_days=$(( ( $(date +%s) - $(date -d "$date" +%s) ) / 86400 ))
log "offline: RustSec database $what, of $date ($age_days days old, at most $max_age_days)"
if (( age_days > max_age_days )); then
  log "the database is older than $max_age_days days: refresh it (docs/adr/0003-supply-chain.md)"
  exit 1
fi

config=$db_path/deny.toml
sed "s|^\[advisories\]\$|[advisories]\ndb-path = \"$db_path\"|" deny.toml > "$config"
grep -q '^db-path' "$config" || { log "deny.toml has no [advisories] table"; exit 1; }
cargo deny --offline --config "$config" check advisories
if cargo deny --offline --manifest-path "$dir/canary/Cargo.toml" --config "$config" \
    check advisories >/dev/null 2>&1; then
  log "the canary (time 0.1.45, RUSTSEC-2020-0071) passed: the database was not read"
  exit 1
fi
log "the canary (time 0.1.45) fails as it must: the database was read"
