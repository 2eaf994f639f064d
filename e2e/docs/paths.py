#!/usr/bin/env python3
"""`just lint`: every file a document of the repository cites exists.

A citation is a markdown link to a local file, a path in backticks with a file extension
(`actors/src/tree/writer.rs`, `tree/writer.rs`, `writer.rs`), or one in prose with at least
one folder (then in team/delete.rs). It holds when it names a tracked
file from the repository's root or the document's folder, or is the tail of a tracked file's
path (the docs shorten `actors/src/team/plan.rs` to `team/plan.rs` where the crate is clear).
A Rust path in backticks (`team::plan::decide`, `terdut_crds::v1alpha1::Reason`) is a citation
too when its first segment is a module of one of the workspace's crates (CRATES): each
lowercase segment must then be a module file under it, or an item the module defines or
re-exports; the first uppercase segment (a type, a variant) ends the check.
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
PLAIN = re.compile(r"(?<![A-Za-z0-9_./:~<>{}$*@=-])((?:[A-Za-z0-9_-][A-Za-z0-9_.-]*/)+[A-Za-z0-9_.-]+\." + EXT + r")(?![A-Za-z0-9_-]|\.[A-Za-z0-9])")
LINK = re.compile(r"\]\(([^)\s]+)\)")
# Named in the docs, never in this repository: a release's generated files (release/release.sh)
# and files of other projects (containerd's hosts.toml, kind's cri-base.json, kindnetd's sources,
# the Go operator's controller that docs/design.md compares with).
NOT_OURS = {"CHANGELOG.md", "RELEASE-NOTES.md", "release.json", "hosts.toml", "cri-base.json",
            "cni.go", "routes.go", "internal/controller/terdutserver_deployment.go"}
# Each crate's source root and the names its own paths start with.
CRATES = {
    "actors/src": ("terdut_actors",),
    "crds/src": ("terdut_crds",),
    "src": ("terdut_operator",),
    "cli/src": ("kubectl_terdut",),
    "heap/src": ("terdut_heap",),
    "e2e/harness/src": ("terdut_testenv",),
    "e2e/standin/src": ("terdut_standin",),
    "e2e/runner/src": ("terdut_e2e",),
    "e2e/runner/src/chaos": (),
    "e2e/modules/src": ("terdut_modules",),
    "e2e/bench/src": ("terdut_bench",),
    # Integration tests, cited as `FILE::test` (`cargo test --test FILE test`).
    "actors/tests": (),
    "crds/tests": (),
    "cli/tests": (),
    "tests": (),
    "e2e/harness/tests": (),
    "e2e/standin/tests": (),
}
RUST_PATH = re.compile(r"`((?:crate::)?[a-z_][a-z0-9_]*(?:::[A-Za-z_][A-Za-z0-9_]*)+)(?:\(\))?`")
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


def module_file(path):
    """The file of the module at `path` (no extension), if there is one."""
    for f in (path + ".rs", os.path.join(path, "mod.rs")):
        if os.path.isfile(os.path.join(ROOT, f)):
            return f
    return None


def defines(module, name):
    """Whether the module's source defines `name` or brings it in with a `use`."""
    text = open(os.path.join(ROOT, module), encoding="utf-8").read()
    item = r"\b(?:fn|const|static|mod|type|struct|enum|trait|macro_rules!)\s+" + re.escape(name) + r"\b"
    if re.search(item, text):
        return True
    return any(re.search(r"\b" + re.escape(name) + r"\b", u)
               for u in re.findall(r"^\s*(?:pub(?:\([a-z]+\))?\s+)?use\s[^;]*;", text, re.M | re.S))


def resolves(root, segments):
    """Whether `segments` name modules (and then an item) under the crate root `root`."""
    here = root
    module = next((os.path.join(root, f) for f in ("lib.rs", "main.rs")
                   if os.path.isfile(os.path.join(ROOT, root, f))), None)
    for i, seg in enumerate(segments):
        if seg[:1].isupper():
            return True
        found = module_file(os.path.join(here, seg))
        if found:
            module, here = found, os.path.join(here, seg)
            continue
        # Not a module: an item of the module so far (a function, a constant); what follows
        # it (a method, a field) is not checked.
        return i > 0 and module is not None and defines(module, seg)
    return True


def rust_path_holds(cited):
    """None when `cited` is not a path into the workspace's crates, else whether it resolves."""
    segments = cited.split("::")
    if segments[0] == "crate":
        segments = segments[1:]
    candidates = []
    for root, names in CRATES.items():
        if segments[0] in names:
            candidates.append((root, segments[1:]))
        elif module_file(os.path.join(root, segments[0])):
            candidates.append((root, segments))
    if not candidates:
        return None
    return any(resolves(root, segs) for root, segs in candidates)


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
        cites += [(m.group(1), "path") for m in PLAIN.finditer(text)]
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
        for m in RUST_PATH.finditer(text):
            if rust_path_holds(m.group(1)) is False:
                line = text[: m.start()].count("\n") + 1
                bad.append(f"{doc}:{line}: {m.group(1)} (no such module or item)")
    bad = sorted(set(bad))
    for b in bad:
        print(f"doc-paths: no such file: {b}", file=sys.stderr)
    if bad:
        print(f"doc-paths: {len(bad)} citation(s) of files that do not exist", file=sys.stderr)
        return 1
    print(f"doc-paths: every cited file exists ({len(files)} files)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
