#!/usr/bin/env bash
# Pushes a release `just release` built to an OCI registry, as the forge's workflow does on a tag
# and `just e2e-node` does to the registry beside its node (docs/releasing.md):
#   the image  with crane, byte for byte from the OCI archive: REGISTRY/terdut-operator:VERSION,
#              and the digest the registry answers must be the one the chart names
#   the chart  with `helm push`: oci://REGISTRY/charts/terdut-operator, version VERSION
# Logging in is the caller's (`crane auth login`, `helm registry login`).
#   publish.sh DIST REGISTRY [--ca-file CA.crt | --plain-http]
# Prints the image reference by digest and the chart reference.
set -euo pipefail
cd "$(dirname "$0")/.."
log() { printf '[publish] %s\n' "$*" >&2; }
DIST=${1:?usage: publish.sh DIST REGISTRY [--ca-file F | --plain-http]}
REGISTRY=${2:?usage: publish.sh DIST REGISTRY [--ca-file F | --plain-http]}
shift 2
crane_args=() helm_args=()
case "${1:-}" in
  --ca-file) export SSL_CERT_FILE=$2; helm_args=(--ca-file "$2") ;;  # Go's TLS reads SSL_CERT_FILE
  --plain-http) crane_args=(--insecure); helm_args=(--plain-http) ;;
  "") ;;
  *) echo "unknown option $1" >&2; exit 2 ;;
esac
TOOLS=$(bash e2e/control-plane/release-tools.sh crane)
BIN=$(bash e2e/control-plane/build.sh path)
read -r VERSION DIGEST < <(python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(r["version"], r["image"]["digest"])' "$DIST/release.json")
(cd "$DIST" && sha256sum --quiet -c SHA256SUMS) || { log "$DIST does not match its SHA256SUMS"; exit 1; }

layout=$(mktemp -d)
trap 'rm -rf "$layout"' EXIT
tar -xf "$DIST/terdut-operator-$VERSION.oci.tar" -C "$layout"
pushed=$("$TOOLS/crane" push "${crane_args[@]}" "$layout" "$REGISTRY/terdut-operator:$VERSION")
[ "${pushed#*@}" = "$DIGEST" ] || { log "the registry has $pushed, the release $DIGEST"; exit 1; }
log "image $pushed"

"$BIN/helm" push "$DIST/terdut-operator-$VERSION.tgz" "oci://$REGISTRY/charts" "${helm_args[@]}" >&2
shown=$("$BIN/helm" show chart "oci://$REGISTRY/charts/terdut-operator" --version "$VERSION" "${helm_args[@]}" 2>/dev/null |
  sed -n 's/^version: //p')
[ "$shown" = "$VERSION" ] || { log "helm show chart: version '$shown', want $VERSION"; exit 1; }
log "chart oci://$REGISTRY/charts/terdut-operator:$VERSION"
echo "$REGISTRY/terdut-operator:$VERSION@$DIGEST"
echo "oci://$REGISTRY/charts/terdut-operator"
