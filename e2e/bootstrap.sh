#!/usr/bin/env bash
# Entry point for a fresh machine: installs what the project needs that the machine may lack
# (just, openssl, jemalloc, cargo-deny, and for the recipes that run pods Debian's container engine and
# node packages), then runs `just <args>`. Used by README's commands and by .ci/run.
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
# jemalloc, which the image preloads (ADR 0010): the heap figures' test and `just bench-rss`
# run the operator with it as the image does.
if [ ! -e /usr/lib/x86_64-linux-gnu/libjemalloc.so.2 ]; then
  echo "[bootstrap] installing libjemalloc2" >&2
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libjemalloc2 >/dev/null
fi
if ! command -v cargo-deny >/dev/null 2>&1; then
  # Pinned: e2e/advisories.sh relies on where this version keeps its advisory database.
  echo "[bootstrap] installing cargo-deny 0.20.2 (cargo install, ~6 minutes once)" >&2
  cargo install cargo-deny --version 0.20.2 --locked --quiet
fi
# The single-node cluster and the images (docs/node.md): Debian's container engine (dockerd
# builds the images), iptables for kube-proxy, the CNI plugins, libseccomp for runc's seccomp
# filter, debootstrap for the offline builder image. ~20 s once.
case " $* " in
  *" test "*|*" e2e-node "*|*" node-demo "*|*" images "*|*" node "*|*" e2e "*|*" kind-demo "*|*" kind-node-image "*)
    pkgs=()
    command -v dockerd >/dev/null 2>&1 || pkgs+=(docker.io)
    command -v iptables >/dev/null 2>&1 || pkgs+=(iptables)
    command -v conntrack >/dev/null 2>&1 || pkgs+=(conntrack)
    command -v debootstrap >/dev/null 2>&1 || pkgs+=(debootstrap)
    [ -x /usr/lib/cni/bridge ] || pkgs+=(containernetworking-plugins)
    pkg-config --exists libseccomp 2>/dev/null || pkgs+=(libseccomp-dev pkg-config)
    if [ "${#pkgs[@]}" -gt 0 ]; then
      echo "[bootstrap] installing ${pkgs[*]}" >&2
      apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${pkgs[@]}" >/dev/null
    fi ;;
esac
for tool in cargo go; do
  command -v "$tool" >/dev/null 2>&1 || { echo "[bootstrap] $tool is required" >&2; exit 1; }
done
exec just "$@"
