"""The storms of `just chaos`: operator SIGKILLs at random moments while objects are created
and changed, and stand-in restarts (SIGKILL, then the same data file and key) while objects
change. Each returns the sources whose kind changed, the only keys allowed to rotate."""
import random
import threading
import time

from .procs import Proc, apply, http, kubectl, log, wait_for
from .workload import NS, Model


class Killer(threading.Thread):
    """SIGKILLs the operator `kills` times, `lo`..`hi` seconds apart, restarting it at once. The
    moments are random (its own seeded generator), so over runs they land everywhere: startup,
    informer sync, between a POST and the write that records it."""

    def __init__(self, operator: Proc, kills, lo, hi, rng: random.Random, counts):
        super().__init__(daemon=True)
        self.operator, self.kills, self.lo, self.hi = operator, kills, lo, hi
        # Its own generator: the main thread draws from `rng` concurrently.
        self.rng = random.Random(rng.getrandbits(32))
        self.counts = counts
        self.stop = threading.Event()

    def run(self):
        for _ in range(self.kills):
            if self.stop.wait(self.rng.uniform(self.lo, self.hi)):
                return
            if not self.operator.running():
                # It died on its own: a bug, not chaos; the check after the storm reports it.
                self.counts["operator_exits"] += 1
            self.operator.kill()
            self.counts["kills"] += 1
            self.operator.start()


def create_storm(model: Model, operator, k, kills, rng, counts):
    """Storm A: K teams and K sources are created while the operator is killed."""
    killer = Killer(operator, kills, 2, 6, rng, counts)
    killer.start()
    batch = max(2, k // 10)
    made = 0
    while made < k:
        n = min(batch, k - made)
        apply([m for _ in range(n) for m in model.new_pair()])
        made += n
        time.sleep(rng.uniform(0.3, 1.5))
    log(f"created {k} teams and {k} sources; waiting for the last of {kills} kills")
    killer.join()
    return set()


def change_storm(model: Model, operator, kills, rng, counts, waves=3):
    """Storm B: renames, ladder edits, switch churn, kind changes, deletions and a few new
    (hook-tagged) pairs, in waves, while the operator is killed."""
    killer = Killer(operator, kills, 2, 6, rng, counts)
    killer.start()
    kind_changed = set()
    for _ in range(waves):
        manifests, deletions, kinds = model.mutate(0.15)
        kind_changed |= kinds
        for _ in range(max(1, len(model.teams) // 40)):
            manifests += model.new_pair()
        apply(manifests)
        if deletions:
            kubectl("delete", "-n", NS, "--wait=false", *[f"{kind}/{name}" for kind, name in deletions])
        log(f"wave: {len(manifests)} applied, {len(deletions)} deleted, {len(kinds)} kind changes")
        time.sleep(rng.uniform(2, 5))
    killer.join()
    return kind_changed


def standin_storm(model: Model, standin: Proc, admin, restarts, rng, counts):
    """Storm C: the stand-in is SIGKILLed and restarted on its data file while renames and
    ladder edits land; no kind change, so no key may rotate."""
    for _ in range(restarts):
        time.sleep(rng.uniform(0.5, 2))
        standin.kill()
        manifests, _, _ = model.mutate(0.1, allow_kind_change=False, allow_delete=False)
        apply(manifests)
        time.sleep(rng.uniform(1, 3))
        standin.start()
        counts["standin_restarts"] += 1
        wait_for("the stand-in", lambda: http("GET", f"{admin}/healthz", timeout=2) is not None, 30)
        log(f"stand-in restarted; {len(manifests)} objects changed while it was down")
    return set()
