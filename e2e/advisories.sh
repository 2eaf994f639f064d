#!/usr/bin/env bash
# `just audit`: `cargo deny check advisories` against the RustSec database, nothing ignored
# (docs/adr/0003-supply-chain.md).
#
# Where github.com answers, cargo-deny fetches the database itself. Where it does not (the
# project's CI machines reach package registries only), a local snapshot of
# github.com/rustsec/advisory-db is used offline: $ADVISORY_DB_MIRROR, a git repository (bare
# or not), by default the snapshot this machine keeps at /work/.mirror. The snapshot's date is
# printed, and a snapshot older than $ADVISORY_DB_MAX_AGE_DAYS (default 180) fails the check:
# an old database would pass a tree a current one fails.
set -euo pipefail
cd "$(dirname "$0")/.."

if timeout 15 git ls-remote https://github.com/rustsec/advisory-db HEAD >/dev/null 2>&1; then
  echo "[audit] github.com reachable: cargo-deny fetches the RustSec database" >&2
  exec cargo deny check advisories
fi

mirror=${ADVISORY_DB_MIRROR:-/work/.mirror/rustsec+advisory-db/repo}
max_age_days=${ADVISORY_DB_MAX_AGE_DAYS:-180}
if ! git -C "$mirror" rev-parse --verify -q HEAD >/dev/null 2>&1; then
  echo "[audit] github.com is unreachable and there is no RustSec snapshot at $mirror;" >&2
  echo "[audit] set ADVISORY_DB_MIRROR to a clone of github.com/rustsec/advisory-db" >&2
  exit 1
fi

# cargo-deny (0.20, pinned in e2e/bootstrap.sh) keeps the database of the default URL in
# <db-path>/advisory-db-3157b0e258782691; with --offline it reads that clone as it is.
db_path=.tmp/advisory-dbs
clone=$db_path/advisory-db-3157b0e258782691
rm -rf "$clone"
mkdir -p "$db_path"
git clone --quiet "$mirror" "$clone"
commit=$(git -C "$clone" log -1 --format='%h %cs')
age_days=$(( ( $(date +%s) - $(git -C "$clone" log -1 --format=%ct) ) / 86400 ))
echo "[audit] offline: RustSec snapshot $commit ($age_days days old) from $mirror" >&2
if (( age_days > max_age_days )); then
  echo "[audit] the snapshot is older than $max_age_days days; refresh it" >&2
  exit 1
fi

config=$db_path/deny.toml
sed "s|^\[advisories\]\$|[advisories]\ndb-path = \"$PWD/$db_path\"|" deny.toml > "$config"
grep -q '^db-path' "$config" || { echo "[audit] deny.toml has no [advisories] table" >&2; exit 1; }
cargo deny --offline --config "$config" check advisories
