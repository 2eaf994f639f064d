"""What `just chaos` asks of the operator: K TerdutTeams and K TerdutAlertSources (one source per
team) and seeded random changes to them. The model here is the truth the checks compare the
stand-in and the cluster against."""
import random

NS = "chaos"
SERVER = "terdut"
GROUP = "terdut.ryuvia.com/v1alpha1"
# Ladders page these users; the stand-in must know them or teams stay UnknownUser.
USERS = ["alice", "bob", "carol", "dave"]
KINDS = ["alertmanager", "grafana", "generic"]
HOOK = {"terdut.ryuvia.com/test-fault": "crash-after-create"}


def server_manifest(port):
    return {
        "apiVersion": GROUP, "kind": "TerdutServer", "metadata": {"name": SERVER, "namespace": NS},
        "spec": {
            "image": {"tag": "v0.9.3"},
            "networking": {"hostname": "terdut.chaos.example", "servicePort": port},
            "database": {"dsn": "postgres://terdut@pg:5432/terdut",
                         "passwordSecretRef": {"name": "pg", "key": "password"}},
        },
    }


class Model:
    def __init__(self, rng: random.Random, hook_every: int):
        self.rng = rng
        self.hook_every = hook_every
        self.teams = {}  # CR name -> spec fields we vary
        self.sources = {}  # CR name -> {team, kind, name, hook}
        self.next_index = 0

    # --- objects ---------------------------------------------------------------------------
    def new_pair(self):
        """A new team and its source; every `hook_every`-th source carries the crash-window
        hook, so the operator crashes between the POST and the Secret write once per process."""
        i = self.next_index
        self.next_index += 1
        t, s = f"t-{i:03d}", f"s-{i:03d}"
        self.teams[t] = {"rev": 0, "levels": self.random_levels(), "switches": self.random_switches()}
        hook = self.hook_every > 0 and i % self.hook_every == 0
        self.sources[s] = {"team": t, "kind": self.rng.choice(KINDS), "name": f"src-{i}", "hook": hook}
        return [self.team_manifest(t), self.source_manifest(s)]

    def display(self, t):
        # Display names are unique on the server (409 team_name_taken): the CR name keeps them so.
        return f"Chaos {t} r{self.teams[t]['rev']}"

    def team_manifest(self, t):
        spec = self.teams[t]
        return {
            "apiVersion": GROUP, "kind": "TerdutTeam", "metadata": {"name": t, "namespace": NS},
            "spec": {
                "serverRef": {"name": SERVER}, "displayName": self.display(t),
                "escalation": {"repeatCount": 1, "levels": [
                    {"timeout": to, "targets": [{"kind": "oncall"}] + ([{"kind": "user", "username": u}] if u else [])}
                    for to, u in spec["levels"]]},
                "deadmanSwitches": [
                    {"name": sw, "matcher": f"alertname={sw}", "timeout": "15m", "severity": "critical"}
                    for sw in spec["switches"]],
            },
        }

    def source_manifest(self, s):
        src = self.sources[s]
        meta = {"name": s, "namespace": NS}
        if src["hook"]:
            meta["annotations"] = dict(HOOK)
        return {"apiVersion": GROUP, "kind": "TerdutAlertSource", "metadata": meta,
                "spec": {"teamRef": {"name": src["team"]}, "kind": src["kind"], "name": src["name"]}}

    def random_levels(self):
        return [(self.rng.choice(["1m", "5m", "10m"]), self.rng.choice(USERS + [None]))
                for _ in range(self.rng.randint(1, 2))]

    def random_switches(self):
        return sorted(self.rng.sample(["watchdog", "heartbeat", "backup"], self.rng.randint(0, 2)))

    # --- changes ---------------------------------------------------------------------------
    def mutate(self, fraction, allow_kind_change=True, allow_delete=True):
        """Changes about `fraction` of the objects. Returns (manifests to apply, (kind, name)
        to delete, sources whose kind changed: the only ones whose key may rotate)."""
        rng, apply_, delete, kind_changed = self.rng, [], [], set()
        for t in sorted(self.teams):
            if rng.random() >= fraction:
                continue
            what = rng.choice(["rename", "ladder", "switches"])
            spec = self.teams[t]
            if what == "rename":
                spec["rev"] += 1
            elif what == "ladder":
                spec["levels"] = self.random_levels()
            else:
                spec["switches"] = self.random_switches()
            apply_.append(self.team_manifest(t))
        for s in sorted(self.sources):
            if rng.random() >= fraction:
                continue
            src = self.sources[s]
            if allow_kind_change and rng.random() < 0.3:
                src["kind"] = rng.choice([k for k in KINDS if k != src["kind"]])
                kind_changed.add(s)
            else:
                src["name"] = f"{s}-n{rng.randint(1, 999)}"
            apply_.append(self.source_manifest(s))
        if allow_delete:
            # A few whole pairs (team and source) and a few lone sources go away.
            pairs = [s for s in sorted(self.sources) if s not in kind_changed]
            for s in rng.sample(pairs, max(1, len(pairs) // 40)):
                t = self.sources.pop(s)["team"]
                delete.append(("terdutalertsource", s))
                if rng.random() < 0.5 and not any(x["team"] == t for x in self.sources.values()):
                    del self.teams[t]
                    delete.append(("terdutteam", t))
        apply_ = [m for m in apply_ if m["metadata"]["name"] in self.teams or m["metadata"]["name"] in self.sources]
        return apply_, delete, kind_changed
