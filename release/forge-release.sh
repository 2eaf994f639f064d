#!/usr/bin/env bash
# The forge release of tag vVERSION (Forgejo/Gitea API): the release notes as its text and
# every file of the release as an asset. The final step of .forgejo/workflows/release.yaml,
# after release/publish.sh; the only step no machine of the project can run (it needs the
# forge). DRY_RUN=1 prints the requests instead of sending them.
#   FORGE_URL=https://git.ryuvia.com FORGE_REPO=niklas/terdut-operator FORGE_TOKEN=... \
#     forge-release.sh DIST
set -euo pipefail
DIST=${1:?usage: forge-release.sh DIST}
: "${FORGE_URL:=https://git.ryuvia.com}" "${FORGE_REPO:=niklas/terdut-operator}"
VERSION=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["version"])' "$DIST/release.json")
api="$FORGE_URL/api/v1/repos/$FORGE_REPO"
body=$(python3 -c 'import json,sys; print(json.dumps({"tag_name": "v"+sys.argv[1], "name": "v"+sys.argv[1],
  "body": open(sys.argv[2]).read(), "prerelease": "-" in sys.argv[1]}))' "$VERSION" "$DIST/RELEASE-NOTES.md")
call() {
  if [ -n "${DRY_RUN:-}" ]; then echo "$*" >&2; echo '{"id": 0}'; return; fi
  curl -fsS -H "Authorization: token ${FORGE_TOKEN:?FORGE_TOKEN is required}" "$@"
}
id=$(call -X POST -H 'Content-Type: application/json' -d "$body" "$api/releases" |
  python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
for f in "$DIST"/*; do
  call -X POST -F "attachment=@$f" "$api/releases/$id/assets?name=$(basename "$f")" >/dev/null
  echo "uploaded $(basename "$f")" >&2
done
echo "$FORGE_URL/$FORGE_REPO/releases/tag/v$VERSION"
