#!/usr/bin/env python3
"""Release notes from git: the commits since the previous release tag.

Tags are `vMAJOR.MINOR.PATCH[-PRE]`. The notes of VERSION are the commits reachable from HEAD
and not from the newest earlier tag (all of them for a first release), newest first, each as its
subject and short hash; CHANGELOG.md is those notes followed by the same section for every
earlier tag, so it is the whole history grouped by release. Dates are the commits' own, so the
files depend on the commits only.

Usage: changelog.py VERSION --changelog OUT.md --notes OUT.md --changes OUT.yaml
  --changes writes the newest entries as Artifact Hub's `artifacthub.io/changes` (YAML list).
Stdlib only.
"""
import argparse
import re
import subprocess
import sys

TAG = re.compile(r"^v(\d+)\.(\d+)\.(\d+)(?:-([0-9A-Za-z.-]+))?$")
ARTIFACT_HUB_ENTRIES = 30


def git(*args):
    return subprocess.run(["git", *args], check=True, capture_output=True, text=True).stdout


def version_key(tag):
    m = TAG.match(tag)
    major, minor, patch, pre = m.groups()
    # A prerelease sorts before its release (semver).
    return (int(major), int(minor), int(patch), pre is None, pre or "")


def release_tags(version):
    """Tags reachable from HEAD, oldest first, without VERSION's own."""
    tags = [t for t in git("tag", "--merged", "HEAD").split() if TAG.match(t) and t != f"v{version}"]
    return sorted(tags, key=version_key)


def commits(rev_range):
    out = git("log", "--no-merges", "--format=%h%x1f%s%x1f%cs", *rev_range)
    return [line.split("\x1f") for line in out.splitlines() if line]


def section(title, entries, since):
    date = entries[0][2] if entries else ""
    head = f"## {title}" + (f" ({date})" if date else "")
    what = f"{len(entries)} commit{'s' if len(entries) != 1 else ''} since {since}."
    lines = [head, "", what, ""] + [f"- {subject} ({h})" for h, subject, _ in entries]
    return "\n".join(lines) + "\n"


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("version")
    p.add_argument("--changelog", required=True)
    p.add_argument("--notes", required=True)
    p.add_argument("--changes", required=True)
    a = p.parse_args()
    if not TAG.match("v" + a.version):
        sys.exit(f"changelog: {a.version!r} is not MAJOR.MINOR.PATCH[-PRE]")

    tags = release_tags(a.version)
    # (title, range, since) newest first: this version, then each earlier tag.
    sections = []
    bounds = ["HEAD"] + list(reversed(tags))
    for i, upper in enumerate(bounds):
        lower = bounds[i + 1] if i + 1 < len(bounds) else None
        rng = [f"{lower}..{upper}"] if lower else [upper]
        title = a.version if upper == "HEAD" else upper[1:]
        since = lower if lower else "the first commit"
        sections.append(section(title, commits(rng), since))

    notes = sections[0]
    with open(a.notes, "w") as f:
        f.write(notes)
    with open(a.changelog, "w") as f:
        f.write("# Changelog\n\nEvery release of terdut-operator: the commits since the release before, "
                "newest first (written by `just release`).\n\n" + "\n".join(sections))
    entries = commits([f"{tags[-1]}..HEAD"] if tags else ["HEAD"])
    with open(a.changes, "w") as f:
        for _, subject, _ in entries[:ARTIFACT_HUB_ENTRIES]:
            f.write(f"- kind: changed\n  description: {yaml_quote(subject)}\n")
        if len(entries) > ARTIFACT_HUB_ENTRIES:
            more = len(entries) - ARTIFACT_HUB_ENTRIES
            f.write(f"- kind: changed\n  description: {yaml_quote(f'and {more} more: see CHANGELOG.md of the release')}\n")
    return 0


def yaml_quote(s):
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


if __name__ == "__main__":
    sys.exit(main())
