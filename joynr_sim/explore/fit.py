"""Whether each step of a schedule fits where it stands: the rules the generator draws steps
by (``generate.World``), applied to a schedule some steps were taken out of.

A step fits when what it names exists and is in the state it needs: a call on a proxy whose
runtime has been up since the proxy was built, a start of a runtime that is down (and whose
cluster controller, brokers and links let it connect), a heal of a link that has a fault, a
publication of a provider registered in its runtime's current life, ... ``consistent``
drops the steps that do not fit, so a shrunk candidate is a valid scenario before it costs
a run.
"""

from __future__ import annotations

from typing import Any

from ..scenario.model import CHECKING_STEPS, CHECKING_WHEN_EXPECTING

Doc = dict[str, Any]

CLUSTER_CONTROLLER = "cluster-controller"
RUNTIME_STEPS = ("crash", "stop", "start", "restart")
LINK_FAULTS = ("partition", "blackhole", "delay")
# Faults that keep a link from connecting: a runtime behind one cannot start (its start
# waits for the connection).
BLOCKING = ("partition", "blackhole")
SUBSCRIPTION_USES = ("unsubscribe", "expect_publications")


def kind_args(step: dict) -> tuple[str, Any]:
    ((kind, args),) = step.items()
    return kind, args


def target(args: Any, key: str) -> str | None:
    """The runtime or GBID a lifecycle step names (``crash: cc1`` or ``crash: {runtime: cc1}``)."""
    if isinstance(args, str):
        return args
    if isinstance(args, dict):
        return args.get(key)
    return None


class State:
    """The runtimes', brokers', links', providers', proxies' and subscriptions' states along
    a schedule."""

    def __init__(self, doc: Doc) -> None:
        self.kind = {r["id"]: r["kind"] for r in doc["runtimes"]}
        self.cc = {r["id"]: r["cc"] for r in doc["runtimes"] if r["kind"] != CLUSTER_CONTROLLER}
        self.backends = set(doc["backends"])
        self.up = dict.fromkeys(self.kind, True)
        self.epoch = dict.fromkeys(self.kind, 0)
        self.brokers_up = dict.fromkeys(doc["backends"], True)
        self.providers: dict[str, tuple[str, int]] = {}  # name -> (runtime, epoch registered in)
        self.proxies: dict[str, tuple[str, int]] = {}  # name -> (runtime, epoch built in)
        self.subscriptions: dict[str, str] = {}  # name -> its proxy
        self.faults: dict[tuple[str, str | None], str] = {}  # (runtime, GBID or None) -> fault

    def usable(self, rt: str) -> bool:
        cc = self.cc.get(rt)
        return rt in self.kind and self.up[rt] and (cc is None or self.up[cc])

    def blocked(self, rt: str) -> bool:
        """A link of the runtime refuses or swallows its connection."""
        links = [(rt, None)] if rt in self.cc else [(rt, g) for g in self.backends]
        return any(self.faults.get(link) in BLOCKING for link in links)

    def startable(self, rt: str) -> bool:
        cc = self.cc.get(rt)
        ready = self.up[cc] if cc is not None else all(self.brokers_up.values())
        return ready and not self.blocked(rt)

    def live(self, table: dict[str, tuple[str, int]], name: str) -> bool:
        if name not in table:
            return False
        rt, epoch = table[name]
        return self.usable(rt) and self.epoch[rt] == epoch

    def lifecycle(self, kind: str, rt: str | None) -> bool:
        """Apply a runtime step; False when it does not fit (and nothing changed)."""
        if rt not in self.kind:
            return False
        if kind == "start":
            if self.up[rt] or not self.startable(rt):
                return False
        elif not self.up[rt] or (kind == "restart" and not self.startable(rt)):
            return False
        self.epoch[rt] += 1
        self.up[rt] = kind in ("start", "restart")
        return True

    def broker(self, kind: str, gbid: str | None) -> bool:
        if gbid not in self.backends:
            return False
        down = kind in ("crash_broker", "stop_broker")
        if self.brokers_up[gbid] != down:  # crash only what runs, restart only what is down
            return False
        self.brokers_up[gbid] = not down
        return True

    def link(self, kind: str, args: dict) -> bool:
        """A fault on a link, or its heal; a link is a cluster controller's GBID or a
        libjoynr runtime's connection to its cluster controller."""
        rt, gbid = args.get("runtime"), args.get("gbid")
        if rt not in self.kind or (gbid is None) != (rt in self.cc) or (gbid is not None and gbid not in self.backends):
            return False
        if kind == "heal":
            return self.faults.pop((rt, gbid), None) is not None
        self.faults[(rt, gbid)] = kind
        return True

    def step(self, kind: str, args: Any) -> Any | None:
        """The step's arguments as they fit here (GBIDs of dropped backends left out), or
        None when the step does not fit."""
        if kind in RUNTIME_STEPS:
            return args if self.lifecycle(kind, target(args, "runtime")) else None
        if kind.endswith("_broker"):
            return args if self.broker(kind, target(args, "gbid")) else None
        if not isinstance(args, dict):
            return args
        if kind in (*LINK_FAULTS, "heal"):
            return args if self.link(kind, args) else None
        if "runtime" in args and args["runtime"] not in self.kind:
            return None
        if "gbids" in args and not set(args["gbids"]) <= self.backends:
            kept = [g for g in args["gbids"] if g in self.backends]
            args = {k: v for k, v in args.items() if k != "gbids"}
            if kept:
                args["gbids"] = kept
        return args if self._fits(kind, args) else None

    def _fits(self, kind: str, args: dict) -> bool:
        if kind == "register":
            if not self.usable(args["runtime"]):
                return False
            self.providers[args["provider"]] = (args["runtime"], self.epoch[args["runtime"]])
        elif kind == "unregister":
            live = self.live(self.providers, args["provider"])
            if not live or self.providers[args["provider"]][0] != args["runtime"]:
                return False
            del self.providers[args["provider"]]
        elif kind == "proxy":
            if not self.usable(args["runtime"]):
                return False
            self.proxies[args["name"]] = (args["runtime"], self.epoch[args["runtime"]])
        elif kind in ("call", "one_way"):
            return self.live(self.proxies, args["proxy"])
        elif kind == "subscribe":
            if not self.live(self.proxies, args["proxy"]):
                return False
            self.subscriptions[args["name"]] = args["proxy"]
        elif kind in SUBSCRIPTION_USES:
            proxy = self.subscriptions.get(args["subscription"])
            if proxy is None or not self.live(self.proxies, proxy):
                return False
            if kind == "unsubscribe":
                del self.subscriptions[args["subscription"]]
        elif kind == "publish":
            return self.live(self.providers, args["provider"])
        elif kind == "clock_skew":
            return self.up[args["runtime"]]
        return True


def consistent(doc: Doc) -> Doc | None:
    """The scenario with the steps that no longer fit removed (a call whose proxy step went,
    an unregister whose register went, a start of a runtime that runs, a register in a
    runtime that is down, a heal of a link without a fault), or None when no step is left."""
    state = State(doc)
    steps = []
    for step in doc["steps"]:
        kind, args = kind_args(step)
        fitted = state.step(kind, args)
        if fitted is not None:
            steps.append({kind: fitted})
    if not steps:
        return None
    return {**doc, "steps": steps}


def checks_something(doc: Doc) -> bool:
    """Whether a step checks something (a call, an expectation): a scenario that only acts
    and waits proves nothing when it holds, and ``joynr-sim run`` says so and fails it."""
    for step in doc["steps"]:
        kind, args = kind_args(step)
        if kind in CHECKING_STEPS:
            return True
        if kind in CHECKING_WHEN_EXPECTING and isinstance(args, dict) and args.get("expect_error") is not None:
            return True
    return False


def names(step: dict) -> set[str]:
    """Every runtime, provider, proxy, subscription and GBID a step names."""
    _, args = kind_args(step)
    if isinstance(args, str):
        return {args}
    if not isinstance(args, dict):
        return set()
    keys = ("runtime", "provider", "name", "proxy", "subscription", "gbid", "participant_id")
    return {args[k] for k in keys if k in args} | set(args.get("gbids", []))


def with_a_check(doc: Doc) -> Doc | None:
    """The schedule with a check at its end that a working routing table passes: a call,
    through a LOCAL_ONLY proxy in the provider's own runtime, of the last provider still
    registered. A schedule that checks nothing holds under any policy; with it, it can
    hold under one and fail under another. None when no provider is left to call."""
    state = State(doc)
    registered: dict[str, dict] = {}
    for step in doc["steps"]:
        kind, args = kind_args(step)
        if state.step(kind, args) is not None and kind == "register":
            registered[args["provider"]] = args
    live = [name for name in registered if state.live(state.providers, name)]
    if not live:
        return None
    provider = registered[live[-1]]
    taken = set().union(*(names(s) for s in doc["steps"]))
    name = next(f"check{n}" for n in range(1, len(taken) + 2) if f"check{n}" not in taken)
    proxy = {"runtime": provider["runtime"], "name": name, "domain": provider["domain"],
             "interface": provider["interface"], "scope": "LOCAL_ONLY"}
    echo = provider["interface"] == "joynrsim/Echo"
    call = {"proxy": name, "method": "echo" if echo else "get", **({"args": ["check"]} if echo else {})}
    return {**doc, "steps": [*doc["steps"], {"proxy": proxy}, {"call": call}]}
