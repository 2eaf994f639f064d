#!/usr/bin/env bash
# The archive krew installs (linux/amd64, the platform this project builds on) and the krew
# manifest with its real version and checksum.
#   package.sh                     `just krew`: builds the plugin here, into target/krew/
#   package.sh --binary B --version V --out DIR
#                                  `just release`: packs the plugin the image's build stage
#                                  made (the Dockerfile's `artifacts` stage) for release V
# The archive is the same bytes for the same binary (release/tgz.py: sorted entries, fixed
# times and owners, gzip without a time). Prints the manifest's path.
set -euo pipefail
cd "$(dirname "$0")/../.."
binary="" version="" out=target/krew
while [ $# -gt 0 ]; do
  case "$1" in
    --binary) binary=$2; shift 2 ;;
    --version) version=$2; shift 2 ;;
    --out) out=$2; shift 2 ;;
    *) echo "usage: $0 [--binary PATH --version V] [--out DIR]" >&2; exit 2 ;;
  esac
done
if [ -z "$version" ]; then
  version=$(cargo metadata --no-deps --format-version 1 |
    python3 -c 'import json,sys; print(next(p["version"] for p in json.load(sys.stdin)["packages"] if p["name"]=="kubectl-terdut"))')
fi
if [ -z "$binary" ]; then
  cargo build -q --release -p kubectl-terdut
  binary="${CARGO_TARGET_DIR:-target}/release/kubectl-terdut"
fi
mkdir -p "$out"
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
install -m 0755 "$binary" "$stage/kubectl-terdut"
# The workspace is Apache-2.0 (Cargo.toml); krew wants the licence beside the binary.
printf 'kubectl-terdut is part of terdut-operator, licensed under the Apache License 2.0\n(https://www.apache.org/licenses/LICENSE-2.0).\n' > "$stage/LICENSE"
chmod 0644 "$stage/LICENSE"
epoch=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct HEAD)}
python3 release/tgz.py pack "$stage" "$out/kubectl-terdut-linux-amd64.tar.gz" --epoch "$epoch" kubectl-terdut LICENSE
sha=$(sha256sum "$out/kubectl-terdut-linux-amd64.tar.gz" | cut -d' ' -f1)
sed -e "s/@VERSION@/$version/g" -e "s/@SHA256_LINUX_AMD64@/$sha/" cli/krew/terdut.yaml > "$out/terdut.yaml"
echo "$out/terdut.yaml"
