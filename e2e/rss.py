#!/usr/bin/env python3
"""`just bench-rss`: the operator's own memory, as a process of its own (docs/performance.md).

`just bench` runs the operator in the bench process next to its in-process stand-ins, so its
RSS is an upper bound. Here the operator is the release binary, alone in its process, under the
chart's RBAC (e2e/local-up.sh), with the stand-in as a separate process. For each step of
--teams (default 1000,10000) it creates TerdutTeams (two dead man's switches each) up to that
count, waits until all are Ready, and reads the operator's VmRSS; then it restarts the
kube-apiserver (SIGUSR1 to local-cluster), so every watch relists, and reads VmHWM (the peak)
once the watches are back, and how long the relist took to absorb (every team it woke has had
its pass and passivated again, read from `actors_active`/`actors_waiting`). Prints a table;
the raw numbers go to .tmp/bench/rss.json.

With --heap-profile FILE the operator runs under heaptrack (LD_PRELOAD; every allocation with
its backtrace), is killed (SIGKILL) at the end, and the peak consumers are printed to
FILE.txt (`heaptrack_print`). The RSS figures of such a run include heaptrack's own buffers.

Environment (set by rss.sh through local-up.sh): KUBECTL, KUBECONFIG, WORK, LOCAL_CLUSTER_PID,
STANDIN_BIN, OPERATOR_BIN. Stdlib only.
"""
import argparse
import base64
import json
import os
import re
import signal
import subprocess
import sys
import time

import urllib.request

NS, SERVER, GROUP, PORT = "rss", "terdut", "terdut.ryuvia.com/v1alpha1", 18400
KUBECTL = os.environ.get("KUBECTL", "kubectl")


def log(msg):
    print(f"[rss {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def kubectl(*args, stdin=None):
    out = subprocess.run([KUBECTL, *args], input=stdin, capture_output=True, text=True)
    if out.returncode != 0:
        raise RuntimeError(f"kubectl {' '.join(args[:3])} failed: {out.stderr.strip()[:500]}")
    return out.stdout


def get_json(*args):
    out = subprocess.run([KUBECTL, "get", "-o", "json", *args], capture_output=True, text=True)
    return json.loads(out.stdout) if out.returncode == 0 else None


def apply(manifests):
    """Server-side apply of many objects in one kubectl call (one call costs ~0.3 s here)."""
    if manifests:
        doc = json.dumps({"apiVersion": "v1", "kind": "List", "items": manifests})
        kubectl("apply", "--server-side", "--field-manager=rss", "-f", "-", stdin=doc)


def healthy(url):
    with urllib.request.urlopen(url, timeout=2) as r:
        return r.status == 200


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
    """A child process with its output appended to a log."""

    def __init__(self, argv, env, log_path):
        self.argv, self.env, self.log_path = argv, env, log_path
        self.proc = None

    def start(self):
        with open(self.log_path, "a") as out:
            self.proc = subprocess.Popen(self.argv, env=self.env, stdout=out, stderr=subprocess.STDOUT)

    def kill(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait()


def proc_kib(pid, field):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"no {field} for {pid}")


def team(i):
    return {
        "apiVersion": GROUP, "kind": "TerdutTeam",
        "metadata": {"name": f"t-{i:05d}", "namespace": NS},
        "spec": {"serverRef": {"name": SERVER}, "displayName": f"RSS team {i}",
                 "deadmanSwitches": [{"name": "heartbeat", "matcher": f"alertname=Heartbeat,team={i}",
                                      "timeout": "15m", "severity": "critical"},
                                     {"name": "backup", "matcher": f"alertname=Backup,team={i}",
                                      "timeout": "1h", "severity": "warning"}]},
    }


def operator_pid(operator, wrapped):
    """The operator's own pid: under heaptrack, the child of its wrapper script."""
    if not wrapped:
        return operator.proc.pid
    exe = os.path.basename(os.environ["OPERATOR_BIN"])
    found = wait_for("the profiled operator", lambda: subprocess.run(
        ["pgrep", "-P", str(operator.proc.pid), "-x", exe[:15]], capture_output=True, text=True).stdout.split(), 60)
    return int(found[0])


def stop_profiled(operator, pid, path):
    """SIGKILL after the idle window, so what heaptrack saw unfreed is what the idle operator
    holds (a clean exit would free it); then the peak consumers and those live at the end."""
    os.kill(pid, signal.SIGKILL)
    operator.proc.wait(timeout=300)
    data = next((f"{path}{ext}" for ext in (".zst", ".gz", "") if os.path.exists(f"{path}{ext}")), None)
    if data is None:
        log(f"heaptrack wrote no {path}.*")
        return
    with open(f"{path}.txt", "w") as out:
        subprocess.run(["heaptrack_print", "-f", data, "--print-peaks=1", "--peak-limit=40",
                        "--sub-peak-limit=3", "--print-allocators=0", "--print-leaks=1",
                        "--print-temporary=0"], stdout=out, check=False)
    log(f"heap profile: {data}; peak consumers and those live at the end (\"leaked\") in {path}.txt")


def ready_count():
    out = kubectl("get", "terdutteams", "-n", NS, "-o",
                  "jsonpath={range .items[*]}{.status.conditions[?(@.type==\"Ready\")].status}{\"\\n\"}{end}")
    return sum(1 for line in out.splitlines() if line.strip() == "True")


def scrape():
    """The operator's /metrics: `actors_active` by kind, and `heap_bytes` by state (MiB) with
    the allocator that reported them."""
    with urllib.request.urlopen("http://127.0.0.1:19564/metrics", timeout=5) as r:
        body = r.read().decode()
    actors, heap = {}, {}
    for line in body.splitlines():
        m = re.match(r'terdut_operator_actors_active\{kind="(\w+)"\} (\S+)', line)
        if m:
            actors[m.group(1)] = float(m.group(2))
        m = re.match(r'terdut_operator_actors_waiting\{kind="(\w+)"\} (\S+)', line)
        if m:
            actors[f"{m.group(1)}_waiting"] = float(m.group(2))
        m = re.match(r'terdut_operator_heap_bytes\{allocator="(\w+)",state="(\w+)"\} (\S+)', line)
        if m:
            heap["allocator"] = m.group(1)
            heap[m.group(2)] = round(float(m.group(3)) / 2**20, 1)
    return actors, heap


def absorb_relist(restarted, timeout):
    """After a kube-apiserver restart: sample the operator's actors every second until the relist
    is absorbed, i.e. team actors were started by it (or 20 s passed) and none is running or
    waiting any more. Returns when that was (seconds after the restart) and the maxima seen."""
    seen = {"max_team_actors": 0.0, "max_waiting": 0.0}
    deadline = restarted + timeout
    while time.time() < deadline:
        time.sleep(1)
        try:
            actors = scrape()[0]
        except Exception:  # noqa: BLE001 - a scrape can time out under load
            continue
        running, waiting = actors.get("team", 0.0), actors.get("team_waiting", 0.0)
        seen["max_team_actors"] = max(seen["max_team_actors"], running)
        seen["max_waiting"] = max(seen["max_waiting"], waiting)
        started = seen["max_team_actors"] > 0 or time.time() - restarted > 20
        if started and running == 0 and waiting == 0:
            return {"done_secs": round(time.time() - restarted, 1), **seen}
    raise RuntimeError(f"the relist was not absorbed within {timeout}s")


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--teams", default="1000,10000", help="comma list of team counts, ascending")
    p.add_argument("--batch", type=int, default=500, help="teams per kubectl apply")
    p.add_argument("--timeout", type=int, default=1200, help="seconds for each step to converge")
    p.add_argument("--idle", type=int, default=60,
                   help="seconds to wait after each step for idle actors to passivate (the operator's "
                        "--passivate-after is 2s) and freed heap to be returned (checked every 10s), "
                        "before RSS and actors alive are read again")
    p.add_argument("--heap-profile", metavar="FILE",
                   help="run the operator under heaptrack, writing FILE; heaptrack sees only what goes "
                        "through malloc, and the operator allocates through the jemalloc linked into it "
                        "(ADR 0010), so the profile holds the C libraries' allocations alone")
    a = p.parse_args()
    work = os.environ["WORK"]
    kubectl("create", "namespace", NS)
    env = dict(os.environ, KUBECONFIG=os.path.join(work, "operator.kubeconfig"), RUST_LOG="warn")
    wrap = ["heaptrack", "-o", os.path.abspath(a.heap_profile)] if a.heap_profile else []
    operator = Proc([*wrap, os.environ["OPERATOR_BIN"], "--leader-elect=false", "--log-format=text",
                                 "--http-addr", "127.0.0.1:19564",
                                 "--server-url-template", "http://127.0.0.1:{port}"],
                    env, os.path.join(work, "operator.log"))
    operator.start()
    apply([{"apiVersion": GROUP, "kind": "TerdutServer", "metadata": {"name": SERVER, "namespace": NS},
            "spec": {"image": {"tag": "v0.9.3"},
                     "networking": {"hostname": "terdut.rss.example", "servicePort": PORT},
                     "database": {"dsn": "postgres://terdut@pg:5432/terdut",
                                  "passwordSecretRef": {"name": "pg", "key": "password"}}}}])
    secret = wait_for("the operator key", lambda: get_json("secret", "-n", NS, f"{SERVER}-operator-key"), 120)
    key = base64.b64decode(secret["data"]["token"]).decode()
    standin = Proc([os.environ["STANDIN_BIN"], "--listen", f"127.0.0.1:{PORT}"],
                   dict(os.environ, TERDUT_OPERATOR_KEY=key), os.path.join(work, "standin.log"))
    standin.start()
    wait_for("the stand-in", lambda: healthy(f"http://127.0.0.1:{PORT}/healthz"), 30)
    pid = operator_pid(operator, bool(wrap))
    idle = proc_kib(pid, "VmRSS")
    log(f"operator pid {pid}: {idle / 1024:.1f} MiB with one TerdutServer and no team")
    results, created = {"idle_rss_kib": idle, "steps": []}, 0
    try:
        for target in [int(x) for x in a.teams.split(",")]:
            t0 = time.time()
            while created < target:
                n = min(a.batch, target - created)
                apply([team(i) for i in range(created, created + n)])
                created += n
            made = time.time() - t0
            deadline = time.time() + a.timeout
            while (ready := ready_count()) < target and time.time() < deadline:
                time.sleep(5)
            if ready < target:
                raise RuntimeError(f"only {ready} of {target} teams Ready after {a.timeout}s")
            took = time.time() - t0
            time.sleep(5)
            rss, hwm_before = proc_kib(pid, "VmRSS"), proc_kib(pid, "VmHWM")
            heap_ready = scrape()[1]
            log(f"{target} teams Ready in {took:.0f}s (created in {made:.0f}s): RSS {rss / 1024:.1f} MiB, "
                f"heap MiB {heap_ready}")
            # The peak of the relist alone: the high-water mark starts over at the current RSS
            # (proc(5), clear_refs "5"), so the convergence's own peak does not stand in for it.
            with open(f"/proc/{pid}/clear_refs", "w") as f:
                f.write("5")
            restarted = time.time()
            os.kill(int(os.environ["LOCAL_CLUSTER_PID"]), signal.SIGUSR1)  # apiserver restart: relist
            relist = absorb_relist(restarted, a.timeout)
            log(f"  relist: every team's pass done {relist['done_secs']:.0f}s after the restart; "
                f"at most {relist['max_team_actors']:.0f} team actors, {relist['max_waiting']:.0f} waiting")
            wait_for("teams readable again", lambda: ready_count() >= target, 180)
            time.sleep(10)
            hwm = proc_kib(pid, "VmHWM")
            after = proc_kib(pid, "VmRSS")
            heap_relist = scrape()[1]
            log(f"  after a kube-apiserver restart (every watch relists): peak {hwm / 1024:.1f} MiB, "
                f"RSS {after / 1024:.1f} MiB, heap MiB {heap_relist}")
            time.sleep(a.idle)
            idle_rss, (alive, heap_idle) = proc_kib(pid, "VmRSS"), scrape()
            log(f"  after {a.idle}s idle: RSS {idle_rss / 1024:.1f} MiB, actors alive {alive}, "
                f"heap MiB {heap_idle}")
            results["steps"].append({"teams": target, "ready_secs": round(took, 1), "rss_kib": rss,
                                     "hwm_before_relist_kib": hwm_before, "hwm_after_relist_kib": hwm,
                                     "rss_after_relist_kib": after, "relist": relist, "rss_after_idle_kib": idle_rss,
                                     "actors_after_idle": alive, "heap_mib_ready": heap_ready,
                                     "heap_mib_after_relist": heap_relist, "heap_mib_after_idle": heap_idle})
    finally:
        if wrap:
            stop_profiled(operator, pid, a.heap_profile)
        operator.kill()
        standin.kill()
    os.makedirs(".tmp/bench", exist_ok=True)
    with open(".tmp/bench/rss.json", "w") as f:
        json.dump(results, f, indent=1)
    print("| teams | time to all Ready | operator RSS | peak during a relist | relist absorbed in | RSS after it "
          f"| RSS after {a.idle} s idle | actors alive then (team/source/server) |")
    print("|---|---|---|---|---|---|---|---|")
    print(f"| 0 (one TerdutServer) | | {idle / 1024:.1f} MiB | | | | | |")
    for s in results["steps"]:
        alive = s["actors_after_idle"]
        print(f"| {s['teams']} | {s['ready_secs']:.0f} s | {s['rss_kib'] / 1024:.1f} MiB | "
              f"{s['hwm_after_relist_kib'] / 1024:.1f} MiB | {s['relist']['done_secs']:.0f} s | "
              f"{s['rss_after_relist_kib'] / 1024:.1f} MiB | "
              f"{s['rss_after_idle_kib'] / 1024:.1f} MiB | "
              f"{alive.get('team', 0):.0f} / {alive.get('source', 0):.0f} / {alive.get('server', 0):.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
