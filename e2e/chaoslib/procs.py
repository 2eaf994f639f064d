"""The processes `just chaos` kills and restarts (the operator, the stand-in), and the small
kubectl and HTTP helpers the storms and checks share. Stdlib only."""
import json
import os
import signal
import subprocess
import time
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
KUBECTL = os.environ.get("KUBECTL", "kubectl")


def log(msg):
    print(f"[chaos {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def kubectl(*args, stdin=None, check=True):
    out = subprocess.run([KUBECTL, *args], input=stdin, capture_output=True, text=True)
    if check and out.returncode != 0:
        raise RuntimeError(f"kubectl {' '.join(args[:3])} failed: {out.stderr.strip()[:500]}")
    return out.stdout


def get_json(*args):
    out = subprocess.run([KUBECTL, "get", "-o", "json", *args], capture_output=True, text=True)
    return json.loads(out.stdout) if out.returncode == 0 else None


def list_items(kind, *args, tries=10):
    """The items of `kubectl get KIND ARGS`, retried: an invariant read from a failed kubectl
    call (an empty list) would report every server object as an orphan."""
    for attempt in range(tries):
        out = subprocess.run([KUBECTL, "get", "-o", "json", kind, *args], capture_output=True, text=True)
        if out.returncode == 0:
            return json.loads(out.stdout)["items"]
        time.sleep(1 + attempt)
    raise RuntimeError(f"kubectl get {kind} failed {tries} times: {out.stderr.strip()[:300]}")


def http_retry(method, url, body=None, tries=5):
    """`http`, retried on connection errors and timeouts (a read of the stand-in's admin view
    while it is busy must not end the run)."""
    for attempt in range(tries):
        try:
            return http(method, url, body)
        except OSError:
            if attempt == tries - 1:
                raise
            time.sleep(1 + attempt)


def apply(manifests):
    """Server-side apply of many objects in one kubectl call (one call costs ~0.3 s here)."""
    if manifests:
        doc = json.dumps({"apiVersion": "v1", "kind": "List", "items": manifests})
        kubectl("apply", "--server-side", "--field-manager=chaos", "-f", "-", stdin=doc)


def http(method, url, body=None, timeout=10):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        text = r.read().decode()
        return json.loads(text) if text.strip().startswith(("{", "[")) else text


def wait_for(what, probe, timeout):
    deadline = time.time() + timeout
    while time.time() < deadline:
        try:
            v = probe()
            if v:
                return v
        except Exception:  # noqa: BLE001 - not there yet
            pass
        time.sleep(0.5)
    raise RuntimeError(f"timed out after {timeout}s waiting for {what}")


class Proc:
    """A child process that is SIGKILLed and started again with the same command line. Every
    incarnation appends to one log, behind a marker line, so a failure can be traced to the
    incarnation that caused it."""

    def __init__(self, name, argv, env, log_path):
        self.name, self.argv, self.env, self.log_path = name, argv, env, log_path
        self.proc = None
        self.starts = 0

    def start(self):
        self.starts += 1
        with open(self.log_path, "a") as f:
            f.write(f"=== chaos: {self.name} start #{self.starts} at {time.strftime('%H:%M:%S')}\n")
        out = open(self.log_path, "a")
        self.proc = subprocess.Popen(self.argv, env=self.env, stdout=out, stderr=subprocess.STDOUT)
        out.close()

    def kill(self):
        """SIGKILL: no shutdown hook runs, which is the point."""
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()

    def running(self):
        return self.proc is not None and self.proc.poll() is None
