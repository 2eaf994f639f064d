#!/usr/bin/env python3
"""`just lint`: every file a document of the repository cites exists.

A citation is a markdown link to a local file, or a path in backticks with a file extension
(`actors/src/tree/writer.rs`, `tree/writer.rs`, `writer.rs`). It holds when it names a tracked
file from the repository's root or the document's folder, or is the tail of a tracked file's
path (the docs shorten `actors/src/team/plan.rs` to `team/plan.rs` where the crate is clear).
Left alone: URLs, absolute paths (this machine's, not the repository's), paths with
placeholders (`<name>`, `*`, `{}`, `...`, `VERSION`), what builds write (`target/`, `.tmp/`,
and the release's files named in NOT_OURS) and files of other projects the docs name.
"""
import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
EXT = r"(?:rs|sh|py|md|yaml|yml|toml|json|lua|go|txt|tpl|lock|mod|sum)"
TICKED = re.compile(r"`([A-Za-z0-9_.\-/]+\." + EXT + r")(?::\d+)?`")
LINK = re.compile(r"\]\(([^)\s]+)\)")
# Named in the docs, never in this repository: a release's generated files (release/release.sh)
# and files of other projects (containerd's hosts.toml, kind's cri-base.json, kindnetd's sources).
NOT_OURS = {"CHANGELOG.md", "RELEASE-NOTES.md", "release.json", "hosts.toml", "cri-base.json",
            "cni.go", "routes.go"}
SKIP_PREFIX = ("target/", ".tmp/", "/", "~", "-", "http:", "https:", "mailto:", "#")


def tracked():
    out = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"],
                         cwd=ROOT, capture_output=True, text=True, check=True).stdout
    return [p for p in out.splitlines() if os.path.exists(os.path.join(ROOT, p))]


def holds(cited, doc, files, tails):
    cited = cited.split("#", 1)[0]
    if not cited:
        return True
    doc_dir = os.path.dirname(doc)
    for base in ("", doc_dir):
        p = os.path.normpath(os.path.join(base, cited))
        if p in files or os.path.isdir(os.path.join(ROOT, p)):
            return True
    return cited.lstrip("./") in tails


def main():
    files = set(tracked())
    tails = set()
    for f in files:
        parts = f.split("/")
        for i in range(len(parts)):
            tails.add("/".join(parts[i:]))
    bad = []
    for doc in sorted(f for f in files if f.endswith(".md")):
        text = open(os.path.join(ROOT, doc), encoding="utf-8").read()
        cites = [(m.group(1), "link") for m in LINK.finditer(text)]
        cites += [(m.group(1), "path") for m in TICKED.finditer(text)]
        for cited, how in cites:
            if cited.startswith(SKIP_PREFIX) or any(c in cited for c in "<>*{}$") or "..." in cited:
                continue
            if cited in NOT_OURS or "VERSION" in cited:
                continue
            if how == "link" and ":" in cited.split("/")[0]:
                continue
            if not holds(cited, doc, files, tails):
                line = text[: text.find(cited)].count("\n") + 1
                bad.append(f"{doc}:{line}: {cited}")
    for b in bad:
        print(f"doc-paths: no such file: {b}", file=sys.stderr)
    if bad:
        print(f"doc-paths: {len(bad)} citation(s) of files that do not exist", file=sys.stderr)
        return 1
    print(f"doc-paths: every cited file exists ({len(files)} files)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
