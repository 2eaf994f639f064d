"""What must hold after every storm, read from the stand-in's admin view and kubectl: no
duplicate and no orphan on the server, everything converged and Ready, every webhook key live,
no key rotated that no spec change asked for. Keys are held in memory only, never printed."""
import base64
import hashlib
from collections import Counter

from .procs import http, http_retry, list_items
from .workload import NS, Model

SECONDS = {"1m": 60, "5m": 300, "10m": 600}


class World:
    """One read of everything: the CRs, the webhook Secrets and the stand-in's state."""

    def __init__(self, admin):
        self.teams = {o["metadata"]["name"]: o for o in list_items("terdutteams", "-n", NS)}
        self.sources = {o["metadata"]["name"]: o for o in list_items("terdutalertsources", "-n", NS)}
        self.state = http_retry("GET", f"{admin}/admin/state")
        self.server_teams = {t["external_id"]: t for t in self.state["teams"]}

    def webhook_keys(self):
        """{source: key} from the webhook Secrets."""
        secrets = list_items("secrets", "-n", NS)
        keys = {}
        for sec in secrets:
            name = sec["metadata"]["name"]
            if name.endswith("-terdut-webhook") and "key" in sec.get("data", {}):
                keys[name[: -len("-terdut-webhook")]] = base64.b64decode(sec["data"]["key"]).decode()
        return keys

    def integration(self, model: Model, s):
        team = self.server_teams.get(f"{NS}/{model.sources[s]['team']}", {})
        found = [i for i in team.get("integrations", []) if i["external_id"] == f"{NS}/{s}"]
        return found[0] if len(found) == 1 else None


def fingerprint(key):
    return hashlib.sha256(key.encode()).hexdigest()[:16]


def ready(obj):
    st = obj.get("status", {})
    ok = any(c["type"] == "Ready" and c["status"] == "True" for c in st.get("conditions", []))
    return ok and st.get("observedGeneration") == obj["metadata"].get("generation")


def _why(cr):
    """What a not-Ready CR shows: generation, observed generation, its Ready condition."""
    if cr is None:
        return " (missing)"
    st = cr.get("status") or {}
    c = next((c for c in st.get("conditions", []) if c.get("type") == "Ready"), {})
    return (f" (generation {cr['metadata'].get('generation')}, observed {st.get('observedGeneration')}, "
            f"Ready={c.get('status')} {c.get('reason')} at {c.get('observedGeneration')}: {c.get('message', '')[:120]})")


def pending(model: Model, w: World):
    """Why the system has not converged yet (empty when it has)."""
    out = []
    for kind, crs, want in (("team", w.teams, model.teams), ("source", w.sources, model.sources)):
        for name in sorted(set(crs) - set(want)):
            out.append(f"deleted {kind} {name} still exists")
        for name in sorted(want):
            if name not in crs or not ready(crs[name]):
                out.append(f"{kind} {name} not Ready at its generation{_why(crs.get(name))}")
    for t in sorted(model.teams):
        st = w.server_teams.get(f"{NS}/{t}")
        spec = model.teams[t]
        levels = [{"timeout_seconds": SECONDS[to],
                   "targets": [{"kind": "oncall"}] + ([{"kind": "user", "username": u}] if u else [])}
                  for to, u in spec["levels"]]
        if st is None:
            out.append(f"team {t} missing on the server")
        elif (st["name"] != model.display(t) or [{k: lv[k] for k in ("timeout_seconds", "targets")}
                                                 for lv in (st.get("ladder") or {}).get("levels", [])] != levels
              or sorted(s["name"] for s in st["switches"]) != spec["switches"]):
            out.append(f"team {t} differs on the server")
    for s in sorted(model.sources):
        i, src = w.integration(model, s), model.sources[s]
        if i is None or i["kind"] != src["kind"] or i["name"] != src["name"]:
            out.append(f"source {s} missing or different on the server")
    return out


def structural(model: Model, w: World):
    """(name, ok, detail) for the duplicate and orphan invariants."""
    team_ids = Counter(t["external_id"] for t in w.state["teams"])
    dup_teams = [e for e, n in team_ids.items() if n > 1]
    ints = [(t["external_id"], i["external_id"]) for t in w.state["teams"] for i in t["integrations"]]
    int_ids = Counter(e for _, e in ints)
    dup_ints = [e for e, n in int_ids.items() if n > 1]
    live_teams = {f"{NS}/{n}" for n in w.teams}
    orphan_teams = [e for e in team_ids if e not in live_teams]
    # An integration belongs to a CR only if that CR exists and names this team.
    owner = {f"{NS}/{n}": f"{NS}/{o['spec']['teamRef']['name']}" for n, o in w.sources.items()}
    orphan_ints = [f"{e} on {t}" for t, e in ints if owner.get(e) != t]
    return [
        ("0 duplicate teams", not dup_teams, str(dup_teams)),
        ("0 duplicate integrations", not dup_ints, str(dup_ints)),
        ("0 server teams without a CR", not orphan_teams, str(orphan_teams)),
        ("0 integrations without a CR", not orphan_ints, str(orphan_ints)),
    ]


def keys_live(model: Model, w: World, admin, keys):
    """Every source's Secret holds the key of exactly its integration, and it is live."""
    bad = []
    for s in sorted(model.sources):
        i = w.integration(model, s)
        if s not in keys:
            bad.append(f"{s}: no Secret")
            continue
        kc = http("POST", f"{admin}/admin/integrations/key-check", {"key": keys[s]})
        if not kc.get("live") or i is None or kc.get("integration_id") != i["id"]:
            bad.append(f"{s}: live={kc.get('live')} id={kc.get('integration_id')} want={i and i['id']}")
    return ("every webhook Secret's key is live and its own", not bad, "; ".join(bad[:10]))


def rotations(before, after, kind_changed):
    """No key rotated unless the kind changed: `before`/`after` are {source: fingerprint} of
    the sources present at both ends. Returns the check and the count of expected rotations."""
    unexpected, expected, missing = [], 0, []
    for s, fp in sorted(before.items()):
        if s not in after:
            continue
        if s in kind_changed:
            expected += 1
            if after[s] == fp:
                missing.append(s)
        elif after[s] != fp:
            unexpected.append(s)
    ok = not unexpected and not missing
    detail = f"rotated without a spec change: {unexpected}; kind changed but same key: {missing}"
    return ("no key rotated without a spec change", ok, detail), expected
