#!/usr/bin/env python3
"""`just chaos`: a reproducible kill-anywhere run against the local control plane (started by
e2e/chaos.sh through local-up.sh). One TerdutServer, the stand-in on a data file, the operator
as a process with test hooks; then storms (operator SIGKILLs while K teams and sources are
created and changed, stand-in restarts, kube-apiserver restarts, stand-in faults, a conflicting
kube writer, two replicas with the leader killed), each followed by the invariants of
docs/reliability.md. The seed fixes the workload and the kill delays; where a kill lands still
depends on timing, which is the point. Ends with `chaos: N passed, M failed`. Stdlib only.

Environment (set by chaos.sh): KUBECTL, KUBECONFIG, TARGET_BIN, STANDIN_BIN, WORK (logs, operator
kubeconfig, stand-in data file), LOCAL_CLUSTER_PID (restarts the kube-apiserver on SIGUSR1/2).
"""
import argparse
import base64
import os
import random
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from chaoslib import invariants as inv  # noqa: E402
from chaoslib import faults, measure, replicas, storms  # noqa: E402
from chaoslib.control import LocalCluster, apiserver_storm  # noqa: E402
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
    p.add_argument("--apiserver-restarts", type=int, help="kube-apiserver restarts (SIGKILL, SIGTERM alternately)")
    p.add_argument("--fault-waves", type=int, help="waves of changes with the stand-in faults on")
    p.add_argument("--faults-on-wait", type=int, help="at most this many seconds for convergence with the faults "
                   "still on (a figure, not a check). The longer the faults stay on, the longer the retry "
                   "backoff (up to 60 s) that the 60 s check after clearing them must absorb")
    p.add_argument("--conflict-waves", type=int, help="waves of changes with the conflicting writer on")
    p.add_argument("--leader-kills", type=int, help="SIGKILLs of the leader of two replicas")
    p.add_argument("--leader-stepdowns", type=int, help="SIGTERMs (voluntary release) of the leader")
    p.add_argument("--skip", default="", help="comma list of storms to skip: "
                   "change,standin,apiserver,faults,conflicts,leader")
    p.add_argument("--port", type=int, default=18300, help="the stand-in's port (servicePort)")
    a = p.parse_args()
    for name, bounded, long in (("pairs", 40, 200), ("kills", 8, 15), ("standin_restarts", 3, 5), ("rounds", 1, 3),
                                ("apiserver_restarts", 3, 6), ("fault_waves", 1, 3), ("faults_on_wait", 20, 180),
                                ("conflict_waves", 2, 3),
                                ("leader_kills", 2, 5), ("leader_stepdowns", 2, 5)):
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
        self.counts = {"kills": 0, "standin_restarts": 0, "iterations": 0, "operator_exits": 0,
                       "apiserver_restarts": 0, "leader_kills": 0, "leader_stepdowns": 0}
        self.figures = []  # (what, text) lines of the summary
        self.skip = set(filter(None, a.skip.split(",")))
        self.results = {"passed": 0, "failed": 0}
        self.seen_keys = set()  # every webhook key read, to prove none reached the operator log
        env = dict(os.environ, KUBECONFIG=os.path.join(self.work, "operator.kubeconfig"), RUST_BACKTRACE="0")
        http_port = os.environ.get("OPERATOR_HTTP_PORT", "19464")
        self.metrics_url = f"http://127.0.0.1:{http_port}/metrics"
        target = os.environ.get("TARGET_BIN", os.path.join(ROOT, "target/debug"))
        self.pair = replicas.Pair(target, self.work, env, (int(http_port) + 1, int(http_port) + 2))
        self.pair_up = False
        pid = os.environ.get("LOCAL_CLUSTER_PID")
        self.cluster = LocalCluster(int(pid), os.environ["KUBECONFIG"] + ".restarts") if pid else None
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
        if self.pair_up:
            self.pair.restart_dead()
        elif not self.operator.running():
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
        self.figures.append((f"{storm}: converged after", f"{took:.0f}s"))

    def final_checks(self):
        logs = [self.operator.log_path] + [p.log_path for p in self.pair.procs.values() if p.starts]
        text = "".join(open(path, errors="replace").read() for path in logs)
        panics = [l for l in text.splitlines() if "panicked at" in l]
        unexpected = [l for l in panics if "hooks.rs" not in l]
        log(f"injected crash-window panics: {len(panics) - len(unexpected)}")
        self.check("no unexpected panic in the operator log", not unexpected, "\n".join(unexpected[:5]))
        exits = self.counts["operator_exits"] + self.pair.exits
        self.check("operator never exited on its own", exits == 0, f"{exits} exits")
        leaked = sum(1 for k in self.seen_keys | {self.operator_key} if k in text)
        self.check(f"no webhook or operator key in the operator log ({len(self.seen_keys)} keys)", leaked == 0,
                   f"{leaked} keys found")

    def run(self):
        a, t0 = self.a, time.time()
        log(f"seed {a.seed}: {a.pairs} pairs, {a.kills} kills per storm, "
            f"{a.standin_restarts} stand-in restarts, {a.rounds} round(s), {a.apiserver_restarts} kube-apiserver "
            f"restarts, {a.fault_waves} fault waves, {a.conflict_waves} conflict waves, "
            f"{a.leader_kills}+{a.leader_stepdowns} leader kills+step-downs"
            + (f"; skipping {','.join(sorted(self.skip))}" if self.skip else ""))
        self.bring_up()
        kc = storms.create_storm(self.model, self.operator, a.pairs, a.kills, self.kill_rng, self.counts)
        self.verify("create+kill", None, kc)
        for r in range(1, a.rounds + 1):
            if "change" not in self.skip:
                before = self.fingerprints()
                kc = storms.change_storm(self.model, self.operator, a.kills, self.kill_rng, self.counts)
                self.verify(f"round {r} change+kill", before, kc)
            if "standin" not in self.skip:
                before = self.fingerprints()
                kc = storms.standin_storm(self.model, self.standin, self.admin, a.standin_restarts, self.rng,
                                          self.counts)
                self.verify(f"round {r} stand-in restarts", before, kc)
            self.counts["iterations"] += 1
        if "apiserver" not in self.skip:
            self.apiserver_storm()
        if "faults" not in self.skip:
            self.fault_storm()
        if "conflicts" not in self.skip:
            self.conflict_storm()
        if "leader" not in self.skip:
            self.leader_storm()
        self.final_checks()
        c = self.counts
        log(f"kills {c['kills']}, stand-in restarts {c['standin_restarts']}, injected stand-in faults "
            f"{c.get('faults', 0)}, kube-apiserver restarts "
            f"{c['apiserver_restarts']}, leader kills {c['leader_kills']}, leader step-downs "
            f"{c['leader_stepdowns']}, iterations {c['iterations']}, duration {time.time() - t0:.0f}s, "
            f"operator logs in {self.work}")
        for what, text in self.figures:
            log(f"figure: {what} {text}")

    # --- the storms beyond operator kills and stand-in restarts ------------------------------
    def apiserver_storm(self):
        if self.cluster is None:
            self.check("kube-apiserver restarts possible (LOCAL_CLUSTER_PID set)", False, "not set")
            return
        before = self.fingerprints()
        cost = faults.Cost(self.metrics_url, self.operator.log_path)
        kc, downtimes = apiserver_storm(self.model, self.cluster, self.a.apiserver_restarts, self.rng, self.counts)
        self.verify("kube-apiserver restarts", before, kc)
        self.figures.append(("kube-apiserver restart (signal to ready)", replicas.summary(downtimes)))
        self.figures.append(("kube-apiserver storm cost", faults.describe(cost.finish())))

    def fault_storm(self):
        before = self.fingerprints()
        http("DELETE", f"{self.admin}/admin/calls")
        cost = faults.Cost(self.metrics_url, self.operator.log_path)
        wait = self.a.faults_on_wait
        kc, took, left, injected = faults.fault_storm(self.model, self.admin, self.a.fault_waves, self.rng,
                                            lambda: inv.pending(self.model, inv.World(self.admin)), wait)
        calls = http("GET", f"{self.admin}/admin/calls")
        api_calls = sum(n for e, n in calls.items() if " /api/" in e)
        c = cost.finish()
        self.verify("stand-in faults (cleared)", before, kc)
        self.figures.append(("stand-in faults: with the faults still on,",
                             f"converged after {took:.0f}s" if took is not None
                             else f"{len(left)} objects still pending after {wait}s"))
        self.counts["faults"] = self.counts.get("faults", 0) + injected["resets"] + injected["5xx"]
        self.figures.append(("stand-in faults: calls to /api/ with faults on",
                             f"{api_calls}, of which {injected['resets']} reset and {injected['5xx']} answered 5xx"))
        self.figures.append(("stand-in faults cost", faults.describe(c)))
        self.check_proportionate("stand-in faults", c)

    def conflict_storm(self):
        before = self.fingerprints()
        c409 = measure.apiserver_409s(kubectl)
        cost = faults.Cost(self.metrics_url, self.operator.log_path)
        kc, writes = faults.conflict_storm(self.model, self.a.conflict_waves, self.rng, os.environ["KUBECONFIG"])
        c = cost.finish()
        after409 = measure.apiserver_409s(kubectl)
        answered = {r: after409.get(r, 0) - c409.get(r, 0) for r in ("terdutteams", "terdutalertsources", "secrets")}
        # The bound counts every 409 of the window, whatever the resource: the operator's
        # conflict count also covers its server actor (Deployments, TerdutServer status), which
        # the writer does not touch but which can still meet a 409 of its own.
        conflicts = sum(after409.values()) - sum(c409.values())
        requeued = c["errors"].get("kube_conflict", 0)
        self.verify("conflicting writer", before, kc)
        self.figures.append(("conflicting writer", f"{writes} annotation writes; the apiserver answered 409 "
                             f"{conflicts:.0f} times ({', '.join(f'{r} {n:.0f}' for r, n in answered.items())}); "
                             f"{requeued:.0f} passes failed on a conflict (requeued)"))
        self.figures.append(("conflicting writer cost", faults.describe(c)))
        self.check(f"conflicting writer: each conflict costs at most one requeue ({requeued:.0f} requeues, "
                   f"{conflicts:.0f} 409s)", requeued <= conflicts)
        self.check_proportionate("conflicting writer", c)

    def check_proportionate(self, storm, c):
        """One WARN per failure streak, not one per retry: log lines at WARN or ERROR stay within
        the failed passes (plus a little for watch reconnects and supervisor restarts)."""
        lines = c["warn"] + c["error_lines"]
        budget = c["error_total"] + 10
        self.check(f"{storm}: logs proportionate ({lines} WARN/ERROR lines for {c['error_total']:.0f} failed passes)",
                   lines <= budget, f"{lines} > {budget:.0f}")

    def leader_storm(self):
        before = self.fingerprints()
        self.operator.kill()  # the single --leader-elect=false operator makes way for the pair
        self.pair_up = True
        t = time.time()
        first = self.pair.start()
        log(f"two replicas up, {first} leads after {time.time() - t:.1f}s")
        kc, times = replicas.leader_storm(self.model, self.pair, self.a.leader_kills, self.a.leader_stepdowns,
                                          self.kill_rng, self.counts)
        self.verify("leader kills (two replicas)", before, kc)
        for how in ("crash", "voluntary"):
            self.figures.append((f"leader failover, {how}: lease taken over",
                                 replicas.summary([lease for lease, _ in times[how]])))
            self.figures.append((f"leader failover, {how}: new leader reconciling",
                                 replicas.summary([ready for _, ready in times[how]])))

    def stop(self):
        for p in (self.operator, self.standin, *self.pair.procs.values()):
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
