#!/usr/bin/env python3
"""Writes chart/terdut-operator/README.md (what `helm show readme` prints) from Chart.yaml and
the `# --` comments of values.yaml, helm-docs style: a `# -- text` comment (continued by plain
`#` lines) documents the key right below it. `--check` fails when the committed README differs,
so a value cannot be added or changed without its documentation (`just lint`)."""

import json
import pathlib
import re
import sys

import yaml

CHART = pathlib.Path(__file__).resolve().parents[2] / "chart" / "terdut-operator"

INTRO = """# {name}

{description}

Version {version}, appVersion {app_version}, Kubernetes {kube_version}. This README is generated
from `values.yaml` by `e2e/chart/readme.py`; edit the `# --` comments there, not this file.

## Install

```sh
helm install terdut-operator oci://git.ryuvia.com/niklas/charts/terdut-operator --version {version} \\
  --namespace terdut-system --create-namespace
kubectl get terdut -A
```

- Every release publishes this chart and the image it names by digest (`image.digest`); from a
  mirror, set `image.repository` and keep the digest (installation.md in the repository's docs).
- The CRDs come from the chart's `crds/` folder by default (installed once, never upgraded by
  Helm); with `crds.templated=true` and `--skip-crds` Helm upgrades them with the release
  (installation.md in the repository's docs, "Upgrading the CRDs").
- Alerts (`prometheusRule.enabled`) and a Grafana dashboard (`dashboard.enabled`) are
  described in the repository's docs/observability.md; every value below in docs/configuration.md.
- `kubectl terdut status -A` (the repository's `kubectl-terdut` plugin, docs/cli.md) shows the
  TerdutServer → team → alert source tree.

## Values

| Key | Type | Default | Description |
|---|---|---|---|
"""


def documented(lines):
    """(dotted key, description) for each key preceded by a `# --` comment."""
    out, path, doc = [], [], None
    for line in lines:
        m = re.match(r"^(\s*)# -- (.*)$", line)
        if m:
            doc = [m.group(2).strip()]
            continue
        m = re.match(r"^(\s*)#\s?(.*)$", line)
        if m:
            if doc is not None:
                doc.append(m.group(2).strip())
            continue
        m = re.match(r"^(\s*)([A-Za-z0-9_]+):", line)
        if m:
            depth = len(m.group(1)) // 2
            path = path[:depth] + [m.group(2)]
            if doc is not None:
                out.append((".".join(path), " ".join(doc)))
        doc = None if line.strip() == "" or m else doc
    return out


def lookup(values, key):
    v = values
    for part in key.split("."):
        v = v[part]
    return v


def type_of(v):
    return {bool: "bool", int: "int", float: "float", str: "string", list: "list",
            dict: "object", type(None): "null"}[type(v)]


def cell(text):
    return text.replace("|", "\\|")


def render():
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    text = (CHART / "values.yaml").read_text()
    values = yaml.safe_load(text)
    out = INTRO.format(name=chart["name"], description=chart["description"],
                       version=chart["version"], app_version=chart["appVersion"],
                       kube_version=chart.get("kubeVersion", "any"))
    for key, doc in documented(text.splitlines()):
        v = lookup(values, key)
        default = json.dumps(v, separators=(", ", ": "), ensure_ascii=False)
        out += f"| `{key}` | {type_of(v)} | `{cell(default)}` | {cell(doc)} |\n"
    return out


def undocumented():
    """Keys of values.yaml that neither carry a `# --` comment nor sit under one."""
    text = (CHART / "values.yaml").read_text()
    docs = {k for k, _ in documented(text.splitlines())}
    missing = []

    def walk(v, path):
        key = ".".join(path)
        if key in docs:
            return
        if isinstance(v, dict) and v and not any(d.startswith(key + ".") for d in docs) and path:
            missing.append(key)
        elif isinstance(v, dict) and v:
            for k, child in v.items():
                walk(child, path + [k])
        elif path:
            missing.append(key)

    walk(yaml.safe_load(text), [])
    return missing


def main():
    global CHART
    args = sys.argv[1:]
    if args[:1] == ["--chart"]:
        # A copy of the chart (`just release` writes the released version's README).
        CHART, args = pathlib.Path(args[1]), args[2:]
    readme = CHART / "README.md"
    want = render()
    missing = undocumented()
    if missing:
        sys.exit("values.yaml keys without a `# --` comment: " + ", ".join(missing))
    if args == ["--check"]:
        if not readme.exists() or readme.read_text() != want:
            sys.exit(f"{readme} is stale: run `python3 e2e/chart/readme.py` and commit it")
        return
    readme.write_text(want)
    print(readme)


if __name__ == "__main__":
    main()
