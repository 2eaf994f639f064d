"""kube-apiserver restarts for `just chaos`: local-cluster (e2e/harness/src/bin/local-cluster.rs)
restarts its apiserver in place on SIGUSR1 (SIGTERM, graceful) or SIGUSR2 (SIGKILL) with the
same flags, port, etcd data, certificate and keys, and counts completed restarts in
`<kubeconfig>.restarts`. The operator's watches must notice, reconnect and resume."""
import os
import signal
import time

from .procs import apply, kubectl, log
from .workload import NS, Model


class LocalCluster:
    def __init__(self, pid, restarts_file):
        self.pid, self.restarts_file = pid, restarts_file

    def completed(self):
        with open(self.restarts_file) as f:
            text = f.read().strip()
        if text.startswith("error"):
            raise RuntimeError(f"local-cluster: {text}")
        return int(text or 0)

    def restart(self, graceful, timeout=60):
        """Restarts the apiserver and waits until it is ready again; returns the seconds taken."""
        before, t0 = self.completed(), time.time()
        os.kill(self.pid, signal.SIGUSR1 if graceful else signal.SIGUSR2)
        while time.time() - t0 < timeout:
            if self.completed() > before:
                return time.time() - t0
            time.sleep(0.1)
        raise RuntimeError(f"the kube-apiserver was not ready {timeout}s after a restart")


def apply_retrying(manifests, deletions=(), tries=20):
    """apply (and delete) through a freshly restarted apiserver: its first seconds of answers
    can still be 5xx while it warms up its caches."""
    for attempt in range(tries):
        try:
            apply(manifests)
            if deletions:
                kubectl("delete", "-n", NS, "--wait=false", "--ignore-not-found",
                        *[f"{kind}/{name}" for kind, name in deletions])
            return
        except RuntimeError:
            if attempt == tries - 1:
                raise
            time.sleep(0.5)


def apiserver_storm(model: Model, cluster: LocalCluster, restarts, rng, counts):
    """Storm D: the kube-apiserver restarted `restarts` times, alternating SIGKILL and SIGTERM,
    with renames, ladder edits, kind changes, deletions and new pairs landing between the
    restarts (and so before the operator's watches have reconnected)."""
    kind_changed, downtimes = set(), []
    for i in range(restarts):
        manifests, deletions, kinds = model.mutate(0.08)
        manifests += model.new_pair()
        kind_changed |= kinds
        apply_retrying(manifests, deletions)
        time.sleep(rng.uniform(0.5, 2))
        graceful = i % 2 == 1
        took = cluster.restart(graceful)
        downtimes.append(took)
        counts["apiserver_restarts"] += 1
        log(f"kube-apiserver {'SIGTERM' if graceful else 'SIGKILL'}ed and back in {took:.1f}s; "
            f"{len(manifests)} applied, {len(deletions)} deleted just before")
    # One more wave right after the last restart, while the watches are still reconnecting.
    manifests, deletions, kinds = model.mutate(0.05, allow_kind_change=False)
    kind_changed |= kinds
    apply_retrying(manifests, deletions)
    return kind_changed, downtimes
