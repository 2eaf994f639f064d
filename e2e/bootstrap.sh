#!/usr/bin/env bash
# Entry point for a fresh machine: installs what the recipe asked for needs and the machine
# lacks, then runs `just <args>`. Used by README's commands and by .ci/run.
#   every recipe  just: the binary of PyPI's rust-just wheel, unpacked into the project's cache
#                 (`pip download`: no root, nothing installed into a system Python), else
#                 `cargo install just` there; openssl and make (Debian's, as root; without root
#                 this says so and stops; make builds the jemalloc linked into the operator,
#                 ADR 0010)
#   test, lint, audit   also cargo-deny (`cargo install`, into ~/.cargo)
#   recipes that build images or run pods   also Debian's container engine and node packages
#                 (root: they run a node in a network namespace of this machine)
# `demo` needs no root once openssl and make are there: everything else it uses is built into
# ~/.cache/terdut-operator.
set -euo pipefail
cd "$(dirname "$0")/.."
CACHE="${TERDUT_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/terdut-operator}"
root() { [ "$(id -u)" = 0 ]; }
# A Debian package, installed as root; without root, what to run first.
need_deb() {
  local what=$1; shift
  if ! root; then
    echo "[bootstrap] $what is missing, and installing it needs root: run \`sudo apt-get install -y $*\`, then this again" >&2
    exit 1
  fi
  echo "[bootstrap] installing $*" >&2
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$@" >/dev/null
}

export PATH="$CACHE/bin:$PATH"
if ! command -v just >/dev/null 2>&1; then
  mkdir -p "$CACHE/bin"
  wheel=$(mktemp -d)
  echo "[bootstrap] fetching just (PyPI package rust-just) into $CACHE/bin" >&2
  if python3 -m pip download --quiet --no-deps --only-binary=:all: -d "$wheel" rust-just >/dev/null 2>&1 &&
    python3 - "$wheel" "$CACHE/bin/just" <<'PY'
import glob, os, sys, zipfile
wheel = glob.glob(os.path.join(sys.argv[1], "*.whl"))[0]
with zipfile.ZipFile(wheel) as z:
    name = next(n for n in z.namelist() if n.endswith(".data/scripts/just"))
    with open(sys.argv[2], "wb") as f:
        f.write(z.read(name))
os.chmod(sys.argv[2], 0o755)
PY
  then :
  else
    echo "[bootstrap] no wheel for this machine: cargo install just (a few minutes once)" >&2
    cargo install just --locked --quiet --root "$CACHE"
  fi
  rm -rf "$wheel"
  hash -r
fi
command -v openssl >/dev/null 2>&1 || need_deb openssl openssl
# make: tikv-jemalloc-sys builds the jemalloc linked into the operator with it (ADR 0010).
command -v make >/dev/null 2>&1 || need_deb make make
case " $* " in
  *" test "*|*" lint "*|*" audit "*)
    if ! command -v cargo-deny >/dev/null 2>&1; then
      # Pinned: e2e/advisories.sh relies on where this version keeps its advisory database.
      echo "[bootstrap] installing cargo-deny 0.20.2 (cargo install, ~6 minutes once)" >&2
      cargo install cargo-deny --version 0.20.2 --locked --quiet
    fi ;;
esac
# The single-node cluster and the images (docs/node.md): Debian's container engine (dockerd
# builds the images), iptables for kube-proxy, the CNI plugins, libseccomp for runc's seccomp
# filter, debootstrap for the offline builder image. ~20 s once.
case " $* " in
  *" test "*|*" e2e-node "*|*" node-demo "*|*" images "*|*" node "*|*" release "*|*" node-chaos "*|*" node-chaos-long "*|*" upgrade-check "*|*" e2e "*|*" kind-demo "*|*" kind-node-image "*)
    pkgs=()
    command -v dockerd >/dev/null 2>&1 || pkgs+=(docker.io)
    command -v iptables >/dev/null 2>&1 || pkgs+=(iptables)
    command -v conntrack >/dev/null 2>&1 || pkgs+=(conntrack)
    command -v debootstrap >/dev/null 2>&1 || pkgs+=(debootstrap)
    [ -x /usr/lib/cni/bridge ] || pkgs+=(containernetworking-plugins)
    pkg-config --exists libseccomp 2>/dev/null || pkgs+=(libseccomp-dev pkg-config)
    case " $* " in
      # kind's podman provider, where Debian's Docker cannot start a privileged node
      # (docs/node.md "kind's podman provider").
      *" e2e "*|*" kind-demo "*) command -v podman >/dev/null 2>&1 || pkgs+=(podman) ;;
    esac
    if [ "${#pkgs[@]}" -gt 0 ]; then
      need_deb "${pkgs[*]}" "${pkgs[@]}"
    fi ;;
esac
for tool in cargo go; do
  command -v "$tool" >/dev/null 2>&1 || { echo "[bootstrap] $tool is required" >&2; exit 1; }
done
exec just "$@"
