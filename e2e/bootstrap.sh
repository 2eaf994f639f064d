#!/usr/bin/env bash
# Entry point for a fresh machine: installs what the project needs that the machine may lack
# (just, openssl, the pinned Kubernetes binaries via `just control-plane`), then runs
# `just <args>`. Used by README's two commands and by .ci/run.
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v just >/dev/null 2>&1; then
  echo "[bootstrap] installing just (PyPI package rust-just)" >&2
  python3 -m pip install --quiet rust-just || pip install --quiet rust-just
  hash -r
fi
if ! command -v openssl >/dev/null 2>&1; then
  echo "[bootstrap] installing openssl" >&2
  apt-get update -qq && apt-get install -y -qq openssl
fi
if ! command -v cargo-deny >/dev/null 2>&1; then
  # Pinned: e2e/advisories.sh relies on where this version keeps its advisory database.
  echo "[bootstrap] installing cargo-deny 0.20.2 (cargo install, ~6 minutes once)" >&2
  cargo install cargo-deny --version 0.20.2 --locked --quiet
fi
for tool in cargo go; do
  command -v "$tool" >/dev/null 2>&1 || { echo "[bootstrap] $tool is required" >&2; exit 1; }
done
exec just "$@"
