"""Two operator replicas with leader election for `just chaos`: the leader (the Lease's
holderIdentity) is SIGKILLed (crash: the standby waits out the 15 s lease) or SIGTERMed
(voluntary: the leader releases the lease on its way out) while changes land, then restarted as
the new standby. Failover is measured from the signal to (a) the other replica holding the Lease
and (b) its /readyz answering `ready: leader` (caches synced, reconciling)."""
import json
import os
import signal
import statistics
import subprocess
import time
import urllib.request

from .procs import KUBECTL, Proc, apply, kubectl, log
from .workload import NS, Model

LEASE_NS, LEASE = "terdut-system", "terdut-operator"


def replica(name, port, target, work, base_env):
    env = dict(base_env, POD_NAME=f"chaos-{name}")
    return Proc(f"operator-{name}", [
        os.path.join(target, "terdut-operator"), "--leader-elect=true", f"--lease-namespace={LEASE_NS}",
        "--test-hooks", "--log-format=text", "--http-addr", f"127.0.0.1:{port}",
        "--server-url-template", "http://127.0.0.1:{port}"], env, os.path.join(work, f"operator-{name}.log"))


def holder():
    out = subprocess.run([KUBECTL, "get", "lease", "-n", LEASE_NS, LEASE, "-o", "json"],
                         capture_output=True, text=True)
    if out.returncode != 0:
        return None
    return (json.loads(out.stdout).get("spec") or {}).get("holderIdentity") or None


def readyz(port):
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=1) as r:
            return r.read().decode().strip()
    except Exception:  # noqa: BLE001 - 503 while standing by, refused while starting
        return ""


def _signal(proc: Proc, graceful):
    if proc.running():
        if graceful:
            proc.proc.send_signal(signal.SIGTERM)
        else:
            proc.kill()


def _reap(proc: Proc, timeout=30):
    """Waits for a SIGTERMed replica to exit (SIGKILL after `timeout`)."""
    try:
        proc.proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()


class Pair:
    """Replicas a and b; `ports` are their HTTP ports."""

    def __init__(self, target, work, base_env, ports):
        self.procs = {f"chaos-{n}": replica(n, p, target, work, base_env) for n, p in zip("ab", ports)}
        self.ports = {f"chaos-{n}": p for n, p in zip("ab", ports)}
        self.exits = 0  # replicas that exited without being signalled by us

    def start(self, timeout=60):
        for p in self.procs.values():
            p.start()
        t0 = time.time()
        while time.time() - t0 < timeout:
            h = holder()
            if h in self.procs and readyz(self.ports[h]) == "ready: leader":
                return h
            time.sleep(0.3)
        raise RuntimeError("no replica became a ready leader")

    def restart_dead(self):
        for p in self.procs.values():
            if not p.running():
                self.exits += 1
                p.start()

    def stop(self):
        for p in self.procs.values():
            _signal(p, graceful=True)
        for p in self.procs.values():
            if p.proc:
                _reap(p)

    def running(self):
        return all(p.running() for p in self.procs.values())

    def failover(self, graceful, timeout=60):
        """Signals the leader; returns (seconds to the other holding the Lease, seconds to it
        reconciling) and restarts the old leader as standby."""
        old = holder()
        for _ in range(10):  # a failed kubectl read is no verdict on the Lease
            if old in self.procs:
                break
            time.sleep(0.5)
            old = holder()
        if old not in self.procs:
            raise RuntimeError(f"lease held by {old!r}, not by a replica")
        new = next(n for n in self.procs if n != old)
        if not self.procs[new].running():
            self.exits += 1
            self.procs[new].start()
            time.sleep(2)
        t0 = time.time()
        _signal(self.procs[old], graceful)
        lease_at = ready_at = None
        while time.time() - t0 < timeout and ready_at is None:
            if lease_at is None and holder() == new:
                lease_at = time.time() - t0
            if lease_at is not None and readyz(self.ports[new]) == "ready: leader":
                ready_at = time.time() - t0
            time.sleep(0.1)
        if ready_at is None:
            raise RuntimeError(f"{new} did not take over within {timeout}s (lease at {lease_at})")
        _reap(self.procs[old])
        self.procs[old].start()
        return lease_at, ready_at


def leader_storm(model: Model, pair: Pair, crashes, voluntary, rng, counts):
    """Storm G: `crashes` SIGKILLs and `voluntary` SIGTERMs of the current leader, interleaved,
    each with a wave of changes landing just before and one during the failover."""
    kinds_all, times = set(), {"crash": [], "voluntary": []}
    plan = ["crash"] * crashes + ["voluntary"] * voluntary
    rng.shuffle(plan)
    for how in plan:
        manifests, deletions, kinds = model.mutate(0.08)
        kinds_all |= kinds
        manifests += model.new_pair()
        apply(manifests)
        if deletions:
            kubectl("delete", "-n", NS, "--wait=false", *[f"{k}/{n}" for k, n in deletions])
        time.sleep(rng.uniform(0.5, 1.5))
        lease_s, ready_s = pair.failover(graceful=how == "voluntary")
        times[how].append((lease_s, ready_s))
        counts["leader_kills" if how == "crash" else "leader_stepdowns"] += 1
        log(f"leader {how}: lease taken over after {lease_s:.1f}s, reconciling after {ready_s:.1f}s")
        # Changes while the replica just restarted is still coming up as standby.
        manifests, _, _ = model.mutate(0.05, allow_kind_change=False, allow_delete=False)
        apply(manifests)
        time.sleep(rng.uniform(1, 2))
    return kinds_all, times


def summary(values):
    if not values:
        return "n/a"
    return f"min {min(values):.1f}s, median {statistics.median(values):.1f}s, max {max(values):.1f}s (n={len(values)})"
