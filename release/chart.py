#!/usr/bin/env python3
"""Turns a copy of chart/terdut-operator into release VERSION's chart, editing text so that
comments and layout stay as committed: version and appVersion are VERSION, values.yaml's
`image.digest` is the image's digest, the Artifact Hub annotations name that image and this
release's changes, and README.md is generated again for that version.

Usage: chart.py CHART_DIR --version V --digest sha256:... --image REF --changes FILE
                [--prerelease true|false]
Needs PyYAML (as e2e/chart/readme.py does) only to check the result.
"""
import argparse
import os
import re
import subprocess
import sys

import yaml


def block(text, key, body):
    """Replaces the literal block of annotation `key` (`  key: |` and its indented lines)."""
    pattern = re.compile(rf"^  {re.escape(key)}: \|\n(?:    .*\n)+", re.M)
    if not pattern.search(text):
        sys.exit(f"chart: Chart.yaml has no `{key}: |` annotation")
    lines = "".join(f"    {line}\n" for line in body.rstrip("\n").split("\n"))
    return pattern.sub(lambda _: f"  {key}: |\n{lines}", text, count=1)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("chart")
    p.add_argument("--version", required=True)
    p.add_argument("--digest", required=True)
    p.add_argument("--image", required=True)
    p.add_argument("--changes", required=True)
    p.add_argument("--prerelease", default="false")
    a = p.parse_args()
    chart_yaml = os.path.join(a.chart, "Chart.yaml")
    text = open(chart_yaml).read()
    text, n1 = re.subn(r"^version: .*$", f"version: {a.version}", text, count=1, flags=re.M)
    text, n2 = re.subn(r"^appVersion: .*$", f'appVersion: "{a.version}"', text, count=1, flags=re.M)
    text, n3 = re.subn(r'^  artifacthub.io/prerelease: .*$', f'  artifacthub.io/prerelease: "{a.prerelease}"',
                       text, count=1, flags=re.M)
    if (n1, n2, n3) != (1, 1, 1):
        sys.exit("chart: Chart.yaml lacks version, appVersion or artifacthub.io/prerelease")
    text = block(text, "artifacthub.io/images", f"- name: terdut-operator\n  image: {a.image}")
    text = block(text, "artifacthub.io/changes", open(a.changes).read())
    open(chart_yaml, "w").write(text)

    values_yaml = os.path.join(a.chart, "values.yaml")
    values = open(values_yaml).read()
    values, n = re.subn(r'^(  digest: )""$', rf'\g<1>"{a.digest}"', values, count=1, flags=re.M)
    if n != 1:
        sys.exit('chart: values.yaml has no `  digest: ""` under image')
    open(values_yaml, "w").write(values)

    meta = yaml.safe_load(text)
    assert meta["version"] == meta["appVersion"] == a.version, meta
    assert yaml.safe_load(values)["image"]["digest"] == a.digest
    for key in ("artifacthub.io/images", "artifacthub.io/changes", "artifacthub.io/crds",
                "artifacthub.io/crdsExamples", "artifacthub.io/links"):
        assert isinstance(yaml.safe_load(meta["annotations"][key]), list), key
    readme = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "e2e", "chart", "readme.py")
    subprocess.run([sys.executable, readme, "--chart", a.chart], check=True, stdout=subprocess.DEVNULL)
    return 0


if __name__ == "__main__":
    sys.exit(main())
