#!/usr/bin/env bash
# Builds the release archive krew installs (linux/amd64, the platform this project builds on)
# and the manifest with its real version and checksum, into target/krew/. `just krew`.
set -euo pipefail
cd "$(dirname "$0")/../.."
out=target/krew
version=$(cargo metadata --no-deps --format-version 1 |
  python3 -c 'import json,sys; print(next(p["version"] for p in json.load(sys.stdin)["packages"] if p["name"]=="kubectl-terdut"))')
cargo build -q --release -p kubectl-terdut
rm -rf "$out" && mkdir -p "$out/stage"
cp "${CARGO_TARGET_DIR:-target}/release/kubectl-terdut" "$out/stage/"
# The workspace is Apache-2.0 (Cargo.toml); krew wants the licence beside the binary.
printf 'kubectl-terdut is part of terdut-operator, licensed under the Apache License 2.0\n(https://www.apache.org/licenses/LICENSE-2.0).\n' > "$out/stage/LICENSE"
tar -C "$out/stage" --owner=0 --group=0 --mtime=@0 -czf "$out/kubectl-terdut-linux-amd64.tar.gz" kubectl-terdut LICENSE
sha=$(sha256sum "$out/kubectl-terdut-linux-amd64.tar.gz" | cut -d' ' -f1)
sed -e "s/@VERSION@/$version/g" -e "s/@SHA256_LINUX_AMD64@/$sha/" cli/krew/terdut.yaml > "$out/terdut.yaml"
rm -rf "$out/stage"
echo "$out/terdut.yaml"
