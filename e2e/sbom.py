#!/usr/bin/env python3
"""`just sbom`: a CycloneDX 1.5 JSON SBOM of what a shipped binary links.

Built from `cargo metadata --locked` (the resolved graph for one target platform) and the
checksums of Cargo.lock, so it needs no extra tool: every crate reachable from the binary's
package through normal and build dependencies (dev-dependencies are not shipped), each with its
purl, licence expression, SHA-256 from the registry and the dependency edges. The file is then
checked: a component per reachable crate, no registry crate without a checksum or a licence.

Usage: e2e/sbom.py [--package terdut-operator] [--platform x86_64-unknown-linux-gnu] [--out F]
                   [--version V]
With SOURCE_DATE_EPOCH set (`just release` sets the commit's time) the file is the same bytes for
the same inputs: that time is its timestamp and its serial number is derived from the package,
the version and the time. --version names the release (default: the crate's version).
Stdlib only.
"""
import argparse
import datetime
import json
import os
import subprocess
import sys
import tomllib
import uuid

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REGISTRY = "registry+https://github.com/rust-lang/crates.io-index"


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--package", default="terdut-operator", help="the binary's package")
    # The release image's binary is glibc-dynamic (Dockerfile); the graph differs per platform.
    p.add_argument("--platform", default="x86_64-unknown-linux-gnu")
    p.add_argument("--out", help="default: target/sbom/<package>.cdx.json")
    p.add_argument("--version", help="the release's version (default: the crate's)")
    return p.parse_args()


def metadata(platform):
    out = subprocess.run(
        ["cargo", "metadata", "--format-version", "1", "--locked", "--filter-platform", platform],
        cwd=ROOT, check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def lock_checksums():
    with open(os.path.join(ROOT, "Cargo.lock"), "rb") as f:
        lock = tomllib.load(f)
    return {(p["name"], p["version"]): p.get("checksum") for p in lock.get("package", [])}


def reachable(root_id, nodes):
    """Package ids reachable from `root_id` through normal and build edges."""
    seen, todo = set(), [root_id]
    while todo:
        pid = todo.pop()
        if pid in seen:
            continue
        seen.add(pid)
        for dep in nodes[pid]["deps"]:
            if any(k["kind"] in (None, "build") for k in dep["dep_kinds"]):
                todo.append(dep["pkg"])
    return seen


def component(pkg, checksums):
    c = {
        "type": "library",
        "bom-ref": pkg["id"],
        "name": pkg["name"],
        "version": pkg["version"],
        "purl": f"pkg:cargo/{pkg['name']}@{pkg['version']}",
    }
    if pkg.get("license"):
        c["licenses"] = [{"expression": pkg["license"]}]
    checksum = checksums.get((pkg["name"], pkg["version"]))
    if pkg.get("source") == REGISTRY and checksum:
        c["hashes"] = [{"alg": "SHA-256", "content": checksum}]
    refs = []
    if pkg.get("repository"):
        refs.append({"type": "vcs", "url": pkg["repository"]})
    if pkg.get("source") == REGISTRY:
        refs.append({"type": "distribution",
                     "url": f"https://crates.io/api/v1/crates/{pkg['name']}/{pkg['version']}/download"})
    if refs:
        c["externalReferences"] = refs
    if pkg.get("source") is None:
        c["type"] = "application" if any("bin" in t["kind"] for t in pkg["targets"]) else "library"
    return c


def build(a):
    meta = metadata(a.platform)
    packages = {p["id"]: p for p in meta["packages"]}
    nodes = {n["id"]: n for n in meta["resolve"]["nodes"]}
    roots = [pid for pid in meta["workspace_members"] if packages[pid]["name"] == a.package]
    if len(roots) != 1:
        sys.exit(f"sbom: no workspace package named {a.package}")
    root = roots[0]
    ids = reachable(root, nodes)
    checksums = lock_checksums()
    shipped = sorted(ids - {root}, key=lambda i: (packages[i]["name"], packages[i]["version"]))
    deps = []
    for pid in [root] + shipped:
        edges = sorted({d["pkg"] for d in nodes[pid]["deps"]
                        if d["pkg"] in ids and any(k["kind"] in (None, "build") for k in d["dep_kinds"])})
        deps.append({"ref": pid, "dependsOn": edges})
    main = component(packages[root], checksums)
    main["type"] = "application"
    if a.version:
        main["version"] = a.version
    epoch = os.environ.get("SOURCE_DATE_EPOCH")
    if epoch:
        when = datetime.datetime.fromtimestamp(int(epoch), datetime.timezone.utc)
        serial = uuid.uuid5(uuid.NAMESPACE_URL, f"terdut-operator/{a.package}@{main['version']}/{epoch}")
    else:
        when, serial = datetime.datetime.now(datetime.timezone.utc), uuid.uuid4()
    return {
        "bomFormat": "CycloneDX",
        "specVersion": "1.5",
        "serialNumber": f"urn:uuid:{serial}",
        "version": 1,
        "metadata": {
            "timestamp": when.replace(microsecond=0).isoformat(),
            "tools": {"components": [{"type": "application", "name": "e2e/sbom.py (cargo metadata)"}]},
            "component": main,
            "properties": [{"name": "cargo:target", "value": a.platform}],
        },
        "components": [component(packages[i], checksums) for i in shipped],
        "dependencies": deps,
    }


def check(bom):
    """The promises of the file, so a broken generator fails CI instead of shipping."""
    problems = []
    comps = bom["components"]
    if not comps:
        problems.append("no components")
    refs = {c["bom-ref"] for c in comps} | {bom["metadata"]["component"]["bom-ref"]}
    for c in comps:
        registry = c["bom-ref"].startswith(REGISTRY)
        if registry and not c.get("hashes"):
            problems.append(f"{c['name']}@{c['version']}: no checksum")
        if registry and not c.get("licenses"):
            problems.append(f"{c['name']}@{c['version']}: no licence")
    for d in bom["dependencies"]:
        problems += [f"dangling edge {d['ref']} -> {t}" for t in d["dependsOn"] if t not in refs]
    if len(bom["dependencies"]) != len(refs):
        problems.append("a component without its dependency entry")
    return problems


def main():
    a = parse_args()
    bom = build(a)
    problems = check(bom)
    if problems:
        print("sbom: " + "; ".join(problems[:20]), file=sys.stderr)
        return 1
    out = a.out or os.path.join(os.environ.get("CARGO_TARGET_DIR", os.path.join(ROOT, "target")),
                                "sbom", f"{a.package}.cdx.json")
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w") as f:
        json.dump(bom, f, indent=1)
        f.write("\n")
    licences = sorted({c["licenses"][0]["expression"] for c in bom["components"] if c.get("licenses")})
    print(f"sbom: {out}: {a.package} for {a.platform}, {len(bom['components'])} crates, "
          f"{len(licences)} distinct licence expressions")
    return 0


if __name__ == "__main__":
    sys.exit(main())
