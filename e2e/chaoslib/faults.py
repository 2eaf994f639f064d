"""Fault storms for `just chaos`: the stand-in misbehaving (5xx, random latency, connection
resets) while objects change, and a conflicting writer on the kube side (annotations on every
CR and webhook Secret, many times a second) while objects are created, changed and deleted.
Each returns the sources whose kind changed; `Cost` measures what a storm cost from the
operator's /metrics and log (chaoslib/measure.py)."""
import json
import re
import ssl
import threading
import time
import urllib.error
import urllib.request

from . import measure
from .procs import apply, http, kubectl, log
from .workload import GROUP, NS, Model

# 20% 5xx (500 and 503), a random 0..2 s delay on every call, 5% connection resets. Delays of
# all matching rules add up, and the first rule that fires decides (docs/terdut-api.md), so the
# delay lives on one rule only.
FAULT_RULES = [
    {"endpoint": "* /api/*", "jitter_ms": 2000, "reset_rate": 0.05},
    {"endpoint": "* /api/*", "error_rate": 0.1, "status": 500},
    {"endpoint": "* /api/*", "error_rate": 0.111, "status": 503},  # 0.9 * 0.111 = 0.1 of all
]


def set_faults(admin):
    for rule in FAULT_RULES:
        http("POST", f"{admin}/admin/faults", rule)


def clear_faults(admin):
    http("DELETE", f"{admin}/admin/faults")


class Cost:
    """Counters and log lines of one storm."""

    def __init__(self, metrics_url, log_path):
        self.url = metrics_url
        self.before = measure.scrape(metrics_url)
        self.window = measure.LogWindow(log_path)

    def finish(self):
        d = measure.delta(self.before, measure.scrape(self.url))
        lines = self.window.lines()
        warn, err = measure.levels(lines)
        return {
            "reconciles": measure.total(d, "reconciles"),
            "errors": measure.by_label(d, "reconcile_errors", "category"),
            "error_total": measure.total(d, "reconcile_errors"),
            "kube_writes": measure.total(d, "kube_writes"),
            "warn": warn, "error_lines": err,
            "top": measure.warn_messages(lines),
        }


def describe(cost):
    errs = ", ".join(f"{k} {v:.0f}" for k, v in sorted(cost["errors"].items()) if v) or "none"
    top = "; ".join(f"{n}x {m}" for m, n in cost["top"]) or "none"
    return (f"{cost['reconciles']:.0f} passes, {cost['error_total']:.0f} failed ({errs}), "
            f"{cost['kube_writes']:.0f} kube writes, {cost['warn']} WARN + {cost['error_lines']} ERROR "
            f"log lines; most frequent: {top}")


def fault_storm(model: Model, admin, waves, rng, pending, converge_within):
    """Storm E: faults on, `waves` waves of changes, then wait (faults still on) until
    everything converged (at most `converge_within` seconds); the faults are cleared on the way
    out. Returns (kind_changed, seconds to converge with the faults on or None, what is still
    pending, {"resets", "5xx"}: the calls the stand-in's rules failed)."""
    set_faults(admin)
    kind_changed = set()
    try:
        for _ in range(waves):
            manifests, deletions, kinds = model.mutate(0.15)
            kind_changed |= kinds
            manifests += model.new_pair()
            apply(manifests)
            if deletions:
                kubectl("delete", "-n", NS, "--wait=false", *[f"{k}/{n}" for k, n in deletions])
            log(f"faults on: {len(manifests)} applied, {len(deletions)} deleted, {len(kinds)} kind changes")
            time.sleep(rng.uniform(2, 4))
        t0, left = time.time(), ["not read yet"]
        while time.time() - t0 < converge_within:
            left = pending()
            if not left:
                break
            time.sleep(2)
        took = time.time() - t0 if not left else None
        rules = http("GET", f"{admin}/admin/faults")
        injected = {"resets": sum(r.get("fired", 0) for r in rules if r.get("reset_rate")),
                    "5xx": sum(r.get("fired", 0) for r in rules if r.get("error_rate"))}
        log(f"faults on: {'converged after %.0fs' % took if took is not None else 'NOT converged'} "
            f"with the faults still on ({len(left)} pending); injected {injected}")
        return kind_changed, took, left, injected
    finally:
        clear_faults(admin)


class Kube:
    """Direct merge patches to the kube-apiserver with the admin kubeconfig (a kubectl process
    costs ~0.2 s; this costs a few ms, so the writer can keep pace with the operator)."""

    def __init__(self, kubeconfig):
        text = open(kubeconfig).read()
        self.server = re.search(r"server:\s*(\S+)", text).group(1)
        self.token = re.search(r"token:\s*(\S+)", text).group(1)
        self.ctx = ssl.create_default_context()
        self.ctx.check_hostname, self.ctx.verify_mode = False, ssl.CERT_NONE

    def request(self, method, path, body=None):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.server + path, data=data, method=method, headers={
            "Authorization": f"Bearer {self.token}", "Content-Type": "application/merge-patch+json"})
        try:
            with urllib.request.urlopen(req, timeout=5, context=self.ctx) as r:
                return r.status, json.loads(r.read() or b"null")
        except urllib.error.HTTPError as e:
            return e.code, None
        except (urllib.error.URLError, OSError):
            return 0, None


def paths(kube: Kube):
    """API paths of every TerdutTeam, TerdutAlertSource and webhook Secret in the namespace."""
    out = []
    for base in (f"/apis/{GROUP}/namespaces/{NS}/terdutteams", f"/apis/{GROUP}/namespaces/{NS}/terdutalertsources",
                 f"/api/v1/namespaces/{NS}/secrets"):
        status, body = kube.request("GET", base)
        for o in (body or {}).get("items", []) if status == 200 else []:
            name = o["metadata"]["name"]
            if "secrets" not in base or name.endswith("-terdut-webhook"):
                out.append(f"{base}/{name}")
    return out


class ConflictingWriter(threading.Thread):
    """Overwrites an annotation on every TerdutTeam, TerdutAlertSource and webhook Secret over
    and over, hottest first: the objects of the current wave (new, deleted, kind changed) are
    patched on every turn, the rest every fifth. Every write bumps the resourceVersion that
    the operator's guarded writes (finalizer patches, Secret replaces) were computed from."""

    def __init__(self, kube: Kube):
        super().__init__(daemon=True)
        self.kube, self.writes, self.turns = kube, 0, 0
        self.hot = []
        self.stop = threading.Event()

    def run(self):
        everything = []
        while not self.stop.is_set():
            if self.turns % 5 == 0:
                everything = paths(self.kube)
            targets = list(self.hot) + (everything if self.turns % 5 == 0 else [])
            self.turns += 1
            for path in targets:
                status, _ = self.kube.request("PATCH", path, {"metadata": {"annotations": {
                    "chaos.example/poke": str(self.turns)}}})
                self.writes += status == 200
            self.stop.wait(0.02)


def conflict_storm(model: Model, waves, rng, kubeconfig):
    """Storm F: the conflicting writer runs while new pairs (finalizer added, Secret created),
    deletions (finalizer removed) and kind changes (Secret replaced) land."""
    writer = ConflictingWriter(Kube(kubeconfig))
    writer.start()
    kind_changed = set()
    team_base = f"/apis/{GROUP}/namespaces/{NS}/terdutteams"
    source_base = f"/apis/{GROUP}/namespaces/{NS}/terdutalertsources"
    secret_base = f"/api/v1/namespaces/{NS}/secrets"
    try:
        for _ in range(waves):
            manifests, deletions, kinds = model.mutate(0.15)
            kind_changed |= kinds
            for _ in range(max(2, len(model.teams) // 20)):
                manifests += model.new_pair()
            hot = [f"{team_base if m['kind'] == 'TerdutTeam' else source_base}/{m['metadata']['name']}"
                   for m in manifests]
            hot += [f"{secret_base}/{m['metadata']['name']}-terdut-webhook" for m in manifests
                    if m["kind"] == "TerdutAlertSource"]
            hot += [f"{team_base if k == 'terdutteam' else source_base}/{n}" for k, n in deletions]
            writer.hot = hot
            apply(manifests)
            if deletions:
                kubectl("delete", "-n", NS, "--wait=false", *[f"{k}/{n}" for k, n in deletions])
            log(f"conflicting writer on: {len(manifests)} applied, {len(deletions)} deleted, "
                f"{len(kinds)} kind changes; {len(hot)} objects patched without pause")
            time.sleep(rng.uniform(4, 6))
    finally:
        writer.stop.set()
        writer.join()
    log(f"conflicting writer: {writer.writes} annotation writes in {writer.turns} turns")
    return kind_changed, writer.writes
