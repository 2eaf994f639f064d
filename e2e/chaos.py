#!/usr/bin/env python3
"""`just chaos`: a reproducible kill-anywhere run against the local control plane (started by
e2e/chaos.sh through local-up.sh). One TerdutServer, the stand-in on a data file, the operator
as a process with test hooks; then storms (operator SIGKILLs while K teams and sources are
created and changed, stand-in restarts), each followed by the invariants of
docs/reliability.md. The seed fixes the workload and the kill delays; where a kill lands still
depends on timing, which is the point. Ends with `chaos: N passed, M failed`. Stdlib only.

Environment (set by chaos.sh): KUBECTL, KUBECONFIG, TARGET_BIN, STANDIN_BIN, WORK (logs, operator
kubeconfig, stand-in data file).
"""
import argparse
import base64
import os
import random
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from chaoslib import invariants as inv  # noqa: E402
from chaoslib import storms  # noqa: E402
from chaoslib.procs import ROOT, Proc, apply, get_json, http, kubectl, log, wait_for  # noqa: E402
from chaoslib.workload import NS, SERVER, USERS, Model, server_manifest  # noqa: E402

QUIESCE = 60  # seconds every CR gets to be Ready after a storm (the promise)


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--long", action="store_true", help="200 pairs, more kills, 3 rounds")
    p.add_argument("--seed", type=int, default=int(os.environ.get("CHAOS_SEED", "1")))
    p.add_argument("--pairs", type=int, help="teams (and as many sources) to create")
    p.add_argument("--kills", type=int, help="operator SIGKILLs per operator storm")
    p.add_argument("--standin-restarts", type=int, help="stand-in restarts per round")
    p.add_argument("--rounds", type=int, help="change storm + stand-in storm repetitions")
    p.add_argument("--hook-every", type=int, default=4, help="every Nth source has the crash hook")
    p.add_argument("--port", type=int, default=18300, help="the stand-in's port (servicePort)")
    a = p.parse_args()
    for name, bounded, long in (("pairs", 40, 200), ("kills", 8, 15), ("standin_restarts", 3, 5), ("rounds", 1, 3)):
        if getattr(a, name) is None:
            setattr(a, name, long if a.long else bounded)
    return a


class Chaos:
    def __init__(self, a):
        self.a = a
        self.rng, self.kill_rng = random.Random(a.seed), random.Random(a.seed + 1)
        self.model = Model(self.rng, a.hook_every)
        self.admin = f"http://127.0.0.1:{a.port}"
        self.work = os.environ["WORK"]
        self.counts = {"kills": 0, "standin_restarts": 0, "iterations": 0, "operator_exits": 0}
        self.results = {"passed": 0, "failed": 0}
        self.seen_keys = set()  # every webhook key read, to prove none reached the operator log
        env = dict(os.environ, KUBECONFIG=os.path.join(self.work, "operator.kubeconfig"), RUST_BACKTRACE="0")
        http_port = os.environ.get("OPERATOR_HTTP_PORT", "19464")
        target = os.environ.get("TARGET_BIN", os.path.join(ROOT, "target/debug"))
        self.operator = Proc("operator", [
            os.path.join(target, "terdut-operator"), "--leader-elect=false", "--test-hooks",
            "--log-format=text", "--http-addr", f"127.0.0.1:{http_port}",
            "--server-url-template", "http://127.0.0.1:{port}"], env, os.path.join(self.work, "operator.log"))
        self.standin = None

    def check(self, name, ok, detail=""):
        self.results["passed" if ok else "failed"] += 1
        log(f"{'ok  ' if ok else 'FAIL'} {name}{(': ' + detail[:800]) if detail and not ok else ''}")

    def bring_up(self):
        kubectl("create", "namespace", NS)
        self.operator.start()
        apply([server_manifest(self.a.port)])
        secret = wait_for("the operator key Secret",
                          lambda: get_json("secret", "-n", NS, f"{SERVER}-operator-key"), 120)
        self.operator_key = base64.b64decode(secret["data"]["token"]).decode()
        env = dict(os.environ, TERDUT_OPERATOR_KEY=self.operator_key)
        self.standin = Proc("standin", [
            os.environ["STANDIN_BIN"], "--listen", f"127.0.0.1:{self.a.port}", "--admin",
            "--data-file", os.path.join(self.work, "standin-data.json")], env, os.path.join(self.work, "standin.log"))
        self.standin.start()
        wait_for("the stand-in", lambda: http("GET", f"{self.admin}/healthz", timeout=2) is not None, 30)
        http("POST", f"{self.admin}/admin/users", {"usernames": USERS})
        log(f"up: TerdutServer {NS}/{SERVER}, stand-in at {self.admin}, operator with --test-hooks")

    def fingerprints(self):
        keys = inv.World(self.admin).webhook_keys()
        self.seen_keys |= set(keys.values())
        return {s: inv.fingerprint(k) for s, k in keys.items()}

    def verify(self, storm, before, kind_changed):
        """Quiescence, then every invariant, each as one check named after the storm."""
        if not self.operator.running():
            self.counts["operator_exits"] += 1
            self.operator.start()
        started, left = time.time(), ["not read yet"]
        while time.time() - started < 2 * QUIESCE:
            left = inv.pending(self.model, inv.World(self.admin))
            if not left:
                break
            time.sleep(2)
        took = time.time() - started
        self.check(f"{storm}: every CR Ready and in sync within {QUIESCE}s (took {took:.0f}s)",
                   not left and took <= QUIESCE, "; ".join(left[:10]))
        w = inv.World(self.admin)
        for name, ok, detail in inv.structural(self.model, w):
            self.check(f"{storm}: {name}", ok, detail)
        keys = w.webhook_keys()
        self.seen_keys |= set(keys.values())
        self.check(*_named(storm, inv.keys_live(self.model, w, self.admin, keys)))
        if before is not None:
            after = {s: inv.fingerprint(k) for s, k in keys.items()}
            result, expected = inv.rotations(before, after, kind_changed)
            self.check(*_named(storm, result))
            log(f"{storm}: {expected} keys rotated because their kind changed (expected)")
        state = "converged" if not left else "NOT converged"
        log(f"{storm}: {state} after {took:.0f}s; {len(self.model.teams)} teams, {len(self.model.sources)} sources")

    def final_checks(self):
        text = open(self.operator.log_path, errors="replace").read()
        panics = [l for l in text.splitlines() if "panicked at" in l]
        unexpected = [l for l in panics if "hooks.rs" not in l]
        log(f"injected crash-window panics: {len(panics) - len(unexpected)}")
        self.check("no unexpected panic in the operator log", not unexpected, "\n".join(unexpected[:5]))
        self.check("operator never exited on its own", self.counts["operator_exits"] == 0,
                   f"{self.counts['operator_exits']} exits")
        leaked = sum(1 for k in self.seen_keys | {self.operator_key} if k in text)
        self.check(f"no webhook or operator key in the operator log ({len(self.seen_keys)} keys)", leaked == 0,
                   f"{leaked} keys found")

    def run(self):
        a, t0 = self.a, time.time()
        log(f"seed {a.seed}: {a.pairs} pairs, {a.kills} kills per storm, "
            f"{a.standin_restarts} stand-in restarts, {a.rounds} round(s)")
        self.bring_up()
        kc = storms.create_storm(self.model, self.operator, a.pairs, a.kills, self.kill_rng, self.counts)
        self.verify("create+kill", None, kc)
        for r in range(1, a.rounds + 1):
            before = self.fingerprints()
            kc = storms.change_storm(self.model, self.operator, a.kills, self.kill_rng, self.counts)
            self.verify(f"round {r} change+kill", before, kc)
            before = self.fingerprints()
            kc = storms.standin_storm(self.model, self.standin, self.admin, a.standin_restarts, self.rng, self.counts)
            self.verify(f"round {r} stand-in restarts", before, kc)
            self.counts["iterations"] += 1
        log("kube-apiserver restarts: skipped (local-cluster cannot restart its apiserver in place)")
        self.final_checks()
        c = self.counts
        log(f"kills {c['kills']}, stand-in restarts {c['standin_restarts']}, iterations {c['iterations']}, "
            f"duration {time.time() - t0:.0f}s, operator log {self.operator.log_path}")

    def stop(self):
        for p in (self.operator, self.standin):
            if p:
                p.kill()


def _named(storm, result):
    name, ok, detail = result
    return f"{storm}: {name}", ok, detail


def main():
    chaos = Chaos(parse_args())
    try:
        chaos.run()
    except Exception as e:  # noqa: BLE001 - a broken run is one more failure, still reported
        chaos.check("the run completed", False, repr(e))
    finally:
        chaos.stop()
    r = chaos.results
    print(f"chaos: {r['passed']} passed, {r['failed']} failed", flush=True)
    return 0 if r["failed"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
