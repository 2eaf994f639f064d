"""What a storm cost, read from the operator's /metrics and its log: reconcile passes, errors by
category, kube writes, and the WARN/ERROR lines written meanwhile. Stdlib only."""
import re
import urllib.request
from collections import defaultdict

_LINE = re.compile(r'^terdut_operator_([a-z_]+?)(?:_total)?\{([^}]*)\}\s+([0-9.eE+-]+)$')


def scrape(url):
    """{(family, frozenset(labels)): value} of the counters at `url`, {} when unreachable."""
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            text = r.read().decode()
    except Exception:  # noqa: BLE001 - the process may be between incarnations
        return {}
    out = {}
    for line in text.splitlines():
        m = _LINE.match(line)
        if m:
            labels = frozenset(tuple(kv.split("=", 1)) for kv in m.group(2).replace('"', "").split(",") if kv)
            out[(m.group(1), labels)] = float(m.group(3))
    return out


def total(sample, family, **want):
    return sum(v for (f, labels), v in sample.items()
               if f == family and all((k, val) in labels for k, val in want.items()))


def by_label(sample, family, label):
    out = defaultdict(float)
    for (f, labels), v in sample.items():
        if f == family:
            out[dict(labels).get(label, "")] += v
    return dict(out)


def delta(before, after):
    """Counter increases (a restarted process starts at 0: its whole value is the increase)."""
    return {k: v - before.get(k, 0) if v >= before.get(k, 0) else v for k, v in after.items()}


class LogWindow:
    """The lines appended to a log between `open()` and `lines()`."""

    def __init__(self, path):
        self.path = path
        with open(path, "rb") as f:
            f.seek(0, 2)
            self.offset = f.tell()

    def lines(self):
        with open(self.path, "rb") as f:
            f.seek(self.offset)
            return f.read().decode(errors="replace").splitlines()


_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_LEVEL = re.compile(r"^\S+\s+(WARN|ERROR)\s")


# Not the operator's doing: kube-client warns once per client built from a kubeconfig with
# insecure-skip-tls-verify (the local control plane's), and the supervisor warns when the
# crash-window test hook (`--test-hooks`) panics an actor on purpose.
_SETUP_NOISE = ("Server cert bypassed", "injected fault on ")


def _noise(line):
    return any(n in line for n in _SETUP_NOISE)


def levels(lines):
    """(warn, error) line counts of text-format tracing lines (colour codes stripped)."""
    found = [m.group(1) for m in (_LEVEL.match(_ANSI.sub("", l)) for l in lines if not _noise(l)) if m]
    return found.count("WARN"), found.count("ERROR")


def warn_messages(lines, top=5):
    """The most frequent WARN/ERROR messages (fields dropped), for the report."""
    counts = defaultdict(int)
    for l in lines:
        plain = _ANSI.sub("", l)
        m = _LEVEL.match(plain)
        if m and not _noise(plain):
            rest = plain[m.end():]
            msg = rest.split(": ", 1)[1] if ": " in rest else rest
            counts[re.split(r"\s\w+=", msg, maxsplit=1)[0].strip()[:80]] += 1
    return sorted(counts.items(), key=lambda kv: -kv[1])[:top]


def apiserver_409s(kubectl):
    """{resource: count} of 409 answers the kube-apiserver gave since it started (its own
    /metrics, `apiserver_request_total{code="409"}`)."""
    text = kubectl("get", "--raw", "/metrics", check=False)
    out = defaultdict(float)
    for line in text.splitlines():
        if line.startswith("apiserver_request_total{") and 'code="409"' in line:
            m = re.search(r'resource="([^"]*)"', line)
            out[m.group(1) if m else ""] += float(line.rsplit(" ", 1)[1])
    return dict(out)
