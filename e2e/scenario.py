#!/usr/bin/env python3
"""The end-to-end scenario, shared by `just e2e-local` (local control plane, operator and
stand-in as processes) and `just e2e` (kind, Helm, images): apply docs/examples, wait until
every object is Ready, verify on the server (teams, ladders, switches, integrations, a live
webhook key), check the operator's /metrics with promtool, delete everything and verify it is
gone on the server. Stdlib only.

Environment: KUBECTL (path), KUBECONFIG, ADMIN_URL (stand-in admin base), METRICS_URL,
PROMTOOL (optional), STANDIN_MODE=local|cluster, STANDIN_BIN (local mode), KEEP=1 (demo: stop
after convergence, leave everything running).
"""
import base64
import json
import os
import subprocess
import sys
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLES = os.path.join(ROOT, "docs", "examples")
KUBECTL = os.environ.get("KUBECTL", "kubectl")
ADMIN = os.environ.get("ADMIN_URL", "http://127.0.0.1:8080")
STANDIN_PORT = 8080  # docs/examples/10-terdutserver.yaml spec.networking.servicePort
SERVER_NS, SERVER = "platform-oncall", "terdut"
TEAMS = [("platform-oncall", "platform", "Platform"), ("team-payments", "payments", "Payments")]
SOURCES = [("platform-oncall", "prod-alertmanager", "platform"), ("team-payments", "payments-grafana", "payments")]
checks = {"passed": 0, "failed": 0}


def log(msg):
    print(f"[e2e] {msg}", flush=True)


def kubectl(*args, check=True):
    out = subprocess.run([KUBECTL, *args], capture_output=True, text=True)
    if check and out.returncode != 0:
        raise SystemExit(f"kubectl {' '.join(args)} failed:\n{out.stdout}{out.stderr}")
    return out.stdout


def get_json(*args):
    out = subprocess.run([KUBECTL, "get", "-o", "json", *args], capture_output=True, text=True)
    return json.loads(out.stdout) if out.returncode == 0 else None


def http(method, url, body=None):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as r:
        text = r.read().decode()
        return json.loads(text) if text.strip().startswith(("{", "[")) else text


def wait(what, probe, timeout=120):
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            v = probe()
            if v:
                return v
        except Exception:  # noqa: BLE001 - the thing may not exist yet
            pass
        time.sleep(1)
    raise SystemExit(f"timed out waiting for {what}")


def check(name, ok, detail=""):
    checks["passed" if ok else "failed"] += 1
    log(f"{'ok  ' if ok else 'FAIL'} {name}{(': ' + detail) if detail and not ok else ''}")


def ready(kind, ns, name):
    o = get_json(kind, "-n", ns, name)
    conds = (o or {}).get("status", {}).get("conditions", [])
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conds)


def start_local_standin():
    secret = wait("the operator key Secret", lambda: get_json("secret", "-n", SERVER_NS, f"{SERVER}-operator-key"))
    key = base64.b64decode(secret["data"]["token"]).decode()
    env = dict(os.environ, TERDUT_OPERATOR_KEY=key)
    log(f"starting the stand-in terdut-server on 127.0.0.1:{STANDIN_PORT} with the operator's key")
    proc = subprocess.Popen([os.environ["STANDIN_BIN"], "--listen", f"127.0.0.1:{STANDIN_PORT}", "--admin"], env=env,
                            stdout=open(os.environ.get("STANDIN_LOG", "/dev/null"), "w"), stderr=subprocess.STDOUT)
    wait("the stand-in", lambda: http("GET", f"{ADMIN}/healthz") is not None, 30)
    return proc


def start_cluster_standin():
    """kind: the TerdutServer runs the stand-in image; reach it through a port-forward."""
    image = os.environ.get("TERDUT_SERVER_IMAGE")
    if image:
        repo, _, tag = image.rpartition(":")
        patch = {"spec": {"image": {"repository": repo, "tag": tag, "pullPolicy": "IfNotPresent"}}}
        kubectl("patch", "terdutserver", "-n", SERVER_NS, SERVER, "--type=merge", "-p", json.dumps(patch))
    wait("TerdutServer Ready", lambda: ready("terdutserver", SERVER_NS, SERVER), 300)
    proc = subprocess.Popen([KUBECTL, "port-forward", "-n", SERVER_NS, f"svc/{SERVER}", f"{STANDIN_PORT}:{STANDIN_PORT}"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    wait("the port-forward", lambda: http("GET", f"{ADMIN}/healthz") is not None, 30)
    return proc


def main():
    keep = os.environ.get("KEEP") == "1"
    log("applying namespaces and the TerdutServer")
    kubectl("apply", "--server-side", "-f", os.path.join(EXAMPLES, "00-namespaces.yaml"))
    kubectl("apply", "--server-side", "-f", os.path.join(EXAMPLES, "10-terdutserver.yaml"))
    standin = start_local_standin() if os.environ.get("STANDIN_MODE", "local") == "local" else start_cluster_standin()
    # The ladder pages alice: she must exist on the server (UnknownUser until then).
    http("POST", f"{ADMIN}/admin/users", {"usernames": ["alice"]})
    log("applying the TerdutTeams and TerdutAlertSources")
    kubectl("apply", "--server-side", "-f", os.path.join(EXAMPLES, "20-terdutteams.yaml"))
    kubectl("apply", "--server-side", "-f", os.path.join(EXAMPLES, "30-terdutalertsources.yaml"))

    for ns, name, _ in TEAMS:
        wait(f"TerdutTeam {ns}/{name} Ready", lambda: ready("terdutteam", ns, name))
    for ns, name, _ in SOURCES:
        wait(f"TerdutAlertSource {ns}/{name} Ready", lambda: ready("terdutalertsource", ns, name))
    log("everything is Ready:\n" + kubectl("get", "terdut", "-A"))

    state = http("GET", f"{ADMIN}/admin/state")
    by_ext = {t["external_id"]: t for t in state["teams"]}
    for ns, name, display in TEAMS:
        t = by_ext.get(f"{ns}/{name}")
        check(f"team {ns}/{name} exists on the server", t is not None and t["name"] == display, json.dumps(t))
    platform = by_ext.get("platform-oncall/platform", {})
    ladder = platform.get("ladder") or {}
    check("platform ladder has 2 levels, 300s then 900s",
          [lv["timeout_seconds"] for lv in ladder.get("levels", [])] == [300, 900], json.dumps(ladder))
    check("platform switch watchdog exists", [s["name"] for s in platform.get("switches", [])] == ["watchdog"])
    for ns, name, team in SOURCES:
        t = by_ext.get(f"{ns}/{team}", {})
        ints = [i for i in t.get("integrations", []) if i["external_id"] == f"{ns}/{name}"]
        check(f"integration {ns}/{name} exists once", len(ints) == 1, json.dumps(t.get("integrations")))
        sec = get_json("secret", "-n", ns, f"{name}-terdut-webhook")
        key = base64.b64decode(sec["data"]["key"]).decode() if sec else ""
        live = http("POST", f"{ADMIN}/admin/integrations/key-check", {"key": key}) if key else {"live": False}
        check(f"webhook Secret of {ns}/{name} holds a live key", live.get("live") is True)

    metrics_url = os.environ.get("METRICS_URL")
    if metrics_url:
        req = urllib.request.Request(metrics_url, headers={"Accept": "application/openmetrics-text;version=1.0.0"})
        with urllib.request.urlopen(req, timeout=10) as r:
            om = r.read().decode()
        check("/metrics serves OpenMetrics to Prometheus", om.rstrip().endswith("# EOF") and "reconciles_total" in om)
        text = http("GET", metrics_url)
        failures = [l for l in text.splitlines() if l.startswith("terdut_operator_event_publish_failures_total")]
        check("no Event failed to publish", failures and all(l.split()[-1] in ("0", "0.0") for l in failures), str(failures))
        # Converged, no pass holds or waits for a slot of --max-concurrent-reconciles (a
        # leaked slot would stall every later pass of its kind once the limit is reached).
        def pass_gauges():
            return [l for l in http("GET", metrics_url).splitlines()
                    if l.startswith(("terdut_operator_reconcile_passes_waiting{",
                                     "terdut_operator_reconcile_passes_running{"))]
        def idle(lines):
            return len(lines) == 4 and all(l.split()[-1] == "0" for l in lines)
        deadline = time.time() + 30
        lines = pass_gauges()
        while not idle(lines) and time.time() < deadline:
            time.sleep(1)
            lines = pass_gauges()
        check("no reconcile pass left holding or waiting for a slot", idle(lines), str(lines))
        events = get_json("events.events.k8s.io", "-A") or {"items": []}
        ours = [e for e in events["items"] if e.get("reportingController") == "terdut-operator"]
        check("the operator recorded Events", len(ours) > 0, f"{len(ours)} events")
        promtool = os.environ.get("PROMTOOL")
        if promtool:
            p = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True, text=True)
            check("promtool check metrics", p.returncode == 0, p.stdout + p.stderr)

    if keep:
        log(f"{checks['passed']} passed, {checks['failed']} failed")
        return checks["failed"] == 0, standin

    log("deleting everything")
    for f in ["30-terdutalertsources.yaml", "20-terdutteams.yaml", "10-terdutserver.yaml"]:
        kubectl("delete", "--wait=true", "--timeout=120s", "-f", os.path.join(EXAMPLES, f))
    state = http("GET", f"{ADMIN}/admin/state")
    check("no team left on the server", state["teams"] == [], json.dumps(state["teams"]))
    if standin:
        standin.terminate()
    print(f"e2e: {checks['passed']} passed, {checks['failed']} failed", flush=True)
    return checks["failed"] == 0, None


if __name__ == "__main__":
    ok, standin = main()
    if os.environ.get("KEEP") == "1" and standin is not None:
        # The demo keeps the stand-in running until the caller stops this process.
        try:
            standin.wait()
        except KeyboardInterrupt:
            standin.terminate()
    sys.exit(0 if ok else 1)
