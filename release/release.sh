#!/usr/bin/env bash
# `just release VERSION`: every artifact of release VERSION, from the commit the clean tree is
# at, into target/dist/VERSION/ (docs/releasing.md):
#   terdut-operator-VERSION.oci.tar    the operator image, an OCI image layout as a tar, built
#                                      on bases pinned by digest (e2e/images/oci.py): the same
#                                      commit and bases give the same bytes
#   terdut-operator-VERSION.tgz        the chart: version = appVersion = the image's tag, the
#                                      image's digest in values.yaml, Artifact Hub annotations
#   kubectl-terdut-linux-amd64.tar.gz  the kubectl plugin, and terdut.yaml its krew manifest
#   *.cdx.json                         CycloneDX SBOMs of the operator and the plugin
#   CHANGELOG.md, RELEASE-NOTES.md     the commits since the previous tag (release/changelog.py)
#   release.json                       commit, time, image digest, bases and their digests
#   SHA256SUMS                         every file above
# Nothing is pushed: release/publish.sh does that (the forge's workflow, `just e2e-node`).
# BASES=local (default) builds on the bases e2e/images/bases.sh assembles from Debian's
# packages, recorded by their digest; BASES=public on the Dockerfile's digest-pinned defaults.
# The image build is e2e/images/build.sh's, from the commit, so after `just images` of the same
# tree the build stage comes from BuildKit's cache.
set -euo pipefail
cd "$(dirname "$0")/.."
log() { printf '[release] %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

VERSION=${1:-}
[[ $VERSION =~ ^[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$ ]] || die "usage: just release MAJOR.MINOR.PATCH[-PRE] (got '$VERSION')"
crate=$(cargo metadata --no-deps --format-version 1 |
  python3 -c 'import json,sys; print(next(p["version"] for p in json.load(sys.stdin)["packages"] if p["name"]=="terdut-operator"))')
# The binaries print the crate's version: the release's must be it, or a prerelease of it.
[ "${VERSION%%-*}" = "$crate" ] || die "VERSION $VERSION is not the workspace's version $crate (Cargo.toml) or a prerelease of it"
dirty=$(git status --porcelain --untracked-files=normal)
# RELEASE_FROM_TREE=1 (`just e2e-node`, while editing): the same artifacts from the working tree
# as it is, marked so in release.json; never a release anyone publishes.
SOURCE=HEAD
if [ "${RELEASE_FROM_TREE:-}" = 1 ]; then
  SOURCE=tree
elif [ -n "$dirty" ]; then
  die "the tree is not clean (a release is built from a commit):
$dirty"
fi

t0=$SECONDS
COMMIT=$(git rev-parse HEAD)
EPOCH=$(git log -1 --format=%ct HEAD)
export SOURCE_DATE_EPOCH=$EPOCH
REPOSITORY=git.ryuvia.com/niklas/terdut-operator
SOURCE_URL=https://git.ryuvia.com/niklas/terdut-operator
DIST="${CARGO_TARGET_DIR:-target}/dist/$VERSION"
WORK="$DIST/.work"
rm -rf "$DIST" && mkdir -p "$WORK"
DIST=$(cd "$DIST" && pwd) WORK=$(cd "$WORK" && pwd)
DOCKER=$(bash e2e/images/engine.sh)
BIN=$(bash e2e/control-plane/build.sh path)

# The bases, by digest. The Dockerfiles' public defaults must be pinned whichever bases this
# build takes: they are what a user's `docker build` and the forge's workflow get.
bash e2e/images/pin-bases.sh --check
if [ "${BASES:-local}" = local ]; then
  eval "$(bash e2e/images/bases.sh | tail -1)"   # BUILDER=... RUNTIME=...
  base_name=$RUNTIME base_digest=""
else
  RUNTIME=$(sed -n 's/^ARG RUNTIME=//p' Dockerfile)
  BUILDER=$(sed -n 's/^ARG BUILDER=//p' Dockerfile)
  base_name=${RUNTIME%@*} base_digest=${RUNTIME#*@}
fi

log "image: building from $COMMIT (BASES=${BASES:-local})"
t1=$SECONDS
ONLY=operator SOURCE=$SOURCE IMAGE_TAG=release ARTIFACTS="$WORK/bin" bash e2e/images/build.sh >/dev/null
"$DOCKER" save -o "$WORK/image.tar" terdut-operator:release
"$DOCKER" save -o "$WORK/base.tar" "$("$DOCKER" image inspect -f '{{.Id}}' "$RUNTIME")"
oci_args=(--image "$WORK/image.tar" --base "$WORK/base.tar" --epoch "$EPOCH" --ref-name "$VERSION"
  --base-name "$base_name"
  --annotation "org.opencontainers.image.version=$VERSION"
  --annotation "org.opencontainers.image.revision=$COMMIT"
  --annotation "org.opencontainers.image.source=$SOURCE_URL"
  --annotation "org.opencontainers.image.licenses=Apache-2.0"
  --annotation "org.opencontainers.image.title=terdut-operator"
  --annotation "org.opencontainers.image.description=Kubernetes operator for terdut-server")
[ -n "$base_digest" ] && oci_args+=(--base-digest "$base_digest")
IMAGE_ARCHIVE="$DIST/terdut-operator-$VERSION.oci.tar"
python3 e2e/images/oci.py "${oci_args[@]}" --out "$WORK/oci" --archive "$IMAGE_ARCHIVE" --info "$WORK/image.json" >/dev/null
# Assembled twice from the same inputs, the bytes must not differ (no clock, no order of a
# directory listing leaks in).
python3 e2e/images/oci.py "${oci_args[@]}" --out "$WORK/oci-again" --archive "$WORK/again.oci.tar" >/dev/null
cmp -s "$WORK/again.oci.tar" "$IMAGE_ARCHIVE" || die "the image archive is not reproducible: two assemblies differ"
read -r DIGEST base_digest < <(python3 -c 'import json,sys; i=json.load(open(sys.argv[1])); print(i["digest"], i["baseDigest"])' "$WORK/image.json")
log "image: $REPOSITORY:$VERSION@$DIGEST on $base_name@$base_digest ($((SECONDS - t1)) s)"

log "changelog: the commits since the previous tag"
python3 release/changelog.py "$VERSION" --changelog "$DIST/CHANGELOG.md" --notes "$DIST/RELEASE-NOTES.md" \
  --changes "$WORK/changes.yaml"

log "chart: version $VERSION, image $DIGEST"
mkdir -p "$WORK/chart"
if [ "$SOURCE" = HEAD ]; then
  git archive --format=tar HEAD chart/terdut-operator | tar -x -C "$WORK/chart" --strip-components=1
else
  cp -r chart/terdut-operator "$WORK/chart/"
fi
python3 release/chart.py "$WORK/chart/terdut-operator" --version "$VERSION" --digest "$DIGEST" \
  --image "$REPOSITORY:$VERSION@$DIGEST" --changes "$WORK/changes.yaml" --prerelease "$([[ $VERSION == *-* ]] && echo true || echo false)"
"$BIN/helm" lint --quiet "$WORK/chart/terdut-operator" >&2
"$BIN/helm" package "$WORK/chart/terdut-operator" --destination "$WORK" >/dev/null
python3 release/tgz.py repack "$WORK/terdut-operator-$VERSION.tgz" "$DIST/terdut-operator-$VERSION.tgz" --epoch "$EPOCH"

log "kubectl-terdut: the archive, the krew manifest"
bash cli/krew/package.sh --binary "$WORK/bin/kubectl-terdut" --version "$VERSION" --out "$DIST" >/dev/null

log "SBOMs"
python3 e2e/sbom.py --package terdut-operator --version "$VERSION" --out "$DIST/terdut-operator-$VERSION.cdx.json" >&2
python3 e2e/sbom.py --package kubectl-terdut --version "$VERSION" --out "$DIST/kubectl-terdut-$VERSION.cdx.json" >&2

python3 - "$DIST/release.json" <<EOF
import json, sys
json.dump({
    "version": "$VERSION", "commit": "$COMMIT", "sourceDateEpoch": $EPOCH, "source": "$SOURCE",
    "image": {"repository": "$REPOSITORY", "tag": "$VERSION", "digest": "$DIGEST",
              "archive": "terdut-operator-$VERSION.oci.tar"},
    "bases": {"runtime": {"name": "$base_name", "digest": "$base_digest"}, "builder": "$BUILDER"},
    "chart": {"archive": "terdut-operator-$VERSION.tgz", "oci": "oci://git.ryuvia.com/niklas/charts/terdut-operator"},
}, open(sys.argv[1], "w"), indent=1)
open(sys.argv[1], "a").write("\n")
EOF
rm -rf "$WORK"
(cd "$DIST" && sha256sum -- * | grep -v ' SHA256SUMS$' > SHA256SUMS)
log "release $VERSION in $DIST ($((SECONDS - t0)) s):"
(cd "$DIST" && for f in *; do printf '  %-44s %10s  %s\n' "$f" "$(stat -c %s "$f")" "$(sha256sum "$f" | cut -c1-16)"; done) >&2
echo "$DIST"
