#!/usr/bin/env python3
"""The Grafana dashboard's expressions (chart/terdut-operator/files/dashboard.json), two ways:

  dashboard.py rules OUT.yaml      every panel expression as a recording rule, for
                                   `promtool check rules`, which parses the PromQL (`just lint`)
  dashboard.py check PROMETHEUS    runs every expression against a live Prometheus (its base
                                   URL, e.g. http://127.0.0.1:9090) and fails when one returns
                                   no series: what the node scenario calls, so a panel that
                                   shows "No data" on a real install is a failed test

Dashboard variables are replaced as Grafana would with everything selected: `$job` by `.+`,
`$__rate_interval` by --rate-interval (default 5m)."""

import argparse
import json
import pathlib
import sys
import urllib.parse
import urllib.request

DASHBOARD = (pathlib.Path(__file__).resolve().parents[2]
             / "chart" / "terdut-operator" / "files" / "dashboard.json")


def expressions(path=DASHBOARD):
    """(panel title, refId, expr) of every target of every panel, rows included."""
    dash = json.loads(pathlib.Path(path).read_text())
    out = []

    def panels(ps):
        for p in ps:
            yield p
            yield from panels(p.get("panels", []))

    for p in panels(dash["panels"]):
        for t in p.get("targets", []):
            out.append((p["title"], t["refId"], t["expr"]))
    if not out:
        sys.exit(f"{path}: no panel expressions")
    return out


def substitute(expr, rate_interval):
    return expr.replace("$__rate_interval", rate_interval).replace('"$job"', '".+"')


def rules(out, rate_interval):
    lines = ["groups:", "  - name: dashboard-expressions", "    rules:"]
    for i, (title, ref, expr) in enumerate(expressions()):
        lines.append(f"      # {title} ({ref})")
        lines.append(f"      - record: dashboard:panel_{i}")
        lines.append(f"        expr: {json.dumps(substitute(expr, rate_interval))}")
    pathlib.Path(out).write_text("\n".join(lines) + "\n")


def check(base, rate_interval):
    failed = 0
    exprs = expressions()
    for title, ref, expr in exprs:
        q = substitute(expr, rate_interval)
        url = base.rstrip("/") + "/api/v1/query?" + urllib.parse.urlencode({"query": q})
        try:
            with urllib.request.urlopen(url, timeout=10) as r:
                body = json.load(r)
        except Exception as e:  # noqa: BLE001 - any failure of one query is a failed panel
            print(f"FAIL  {title} ({ref}): {e}")
            failed += 1
            continue
        result = body.get("data", {}).get("result", [])
        if body.get("status") != "success" or not result:
            print(f"FAIL  {title} ({ref}): no series for {q}")
            failed += 1
        else:
            print(f"ok    {title} ({ref}): {len(result)} series")
    print(f"{len(exprs) - failed} passed, {failed} failed")
    return 1 if failed else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("command", choices=["rules", "check"])
    ap.add_argument("target", help="rules: output file; check: Prometheus base URL")
    ap.add_argument("--rate-interval", default="5m")
    a = ap.parse_args()
    if a.command == "rules":
        rules(a.target, a.rate_interval)
        return 0
    return check(a.target, a.rate_interval)


if __name__ == "__main__":
    sys.exit(main())
