"""Random scenarios in the library's format: a topology, then a schedule of steps drawn from
what the format offers, each step valid where it stands (a call only on a proxy whose runtime
has been up since the proxy was built, a start only of what is down, a heal only of a link
with a fault, ...): providers of joynrsim/Echo and joynrsim/Counter, proxies, calls,
attribute and broadcast subscriptions and multicast receivers, publications, the runtimes'
and brokers' lifecycle, link faults (partition, blackhole, delay, heal), clock skews (when
the scenario format has them) and time advancing.

Everything is drawn from one ``random.Random``, so a seed gives the same scenarios. The step
kinds are a table (``STEP_KINDS``) of weighted makers; a team adds its own with
``Generator(extra_kinds=[StepKind(...)])``. ``scenarios()`` wraps the generator as a
Hypothesis strategy for property tests of one's own invariants.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from . import kinds

INTERFACE = "joynrsim/Echo"
COUNTER = kinds.COUNTER  # an attribute, a multicast and a selective broadcast
DOMAIN = "dom"
PROVIDER_SCOPES = ("LOCAL", "GLOBAL")
PROXY_SCOPES = ("LOCAL_ONLY", "LOCAL_THEN_GLOBAL", "GLOBAL_ONLY", "LOCAL_AND_GLOBAL")
# Fixed participant ids, per interface: restarts re-use them, and one id taken by two
# providers of different interfaces would be a conflict no deployment has.
FIXED_IDS = ("fixed-echo-1", "fixed-echo-2")
FIXED_IDS_BY_INTERFACE = {INTERFACE: FIXED_IDS, COUNTER: ("fixed-counter-1",)}


@dataclass
class World:
    """What the schedule has made so far: the loader's references and the runtimes' states."""

    backends: list[str]
    ccs: list[str]
    libjoynr: dict[str, str]  # libjoynr runtime -> its cluster controller
    up: dict[str, bool] = field(default_factory=dict)  # runtime -> running
    epoch: dict[str, int] = field(default_factory=dict)  # runtime -> restarts so far
    brokers_up: dict[str, bool] = field(default_factory=dict)
    # provider name -> (runtime, fixed id, epoch registered in)
    providers: dict[str, tuple[str, str | None, int]] = field(default_factory=dict)
    proxies: dict[str, tuple[str, int]] = field(default_factory=dict)  # name -> (runtime, epoch built)
    interfaces: dict[str, str] = field(default_factory=dict)  # provider or proxy -> interface (absent: Echo)
    subscriptions: dict[str, tuple[str, str]] = field(default_factory=dict)  # name -> (proxy, what)
    faults: dict[tuple[str, str | None], str] = field(default_factory=dict)  # link -> its fault
    counter: int = 0

    @property
    def runtimes(self) -> list[str]:
        return [*self.ccs, *self.libjoynr]

    def name(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    def usable(self, runtime: str) -> bool:
        """Up, and so is the cluster controller a libjoynr runtime speaks through."""
        cc = self.libjoynr.get(runtime)
        return self.up[runtime] and (cc is None or self.up[cc])

    def live_proxies(self, interface: str | None = None) -> list[str]:
        return [n for n, (rt, ep) in self.proxies.items() if self.usable(rt) and self.epoch[rt] == ep
                and (interface is None or self.interface(n) == interface)]

    def live_providers(self, interface: str | None = None) -> list[str]:
        return [n for n, (rt, _, ep) in self.providers.items() if self.usable(rt) and self.epoch[rt] == ep
                and (interface is None or self.interface(n) == interface)]

    def interface(self, name: str) -> str:
        return self.interfaces.get(name, INTERFACE)

    def links(self) -> list[tuple[str, str | None]]:
        """Every cluster controller's broker links, every libjoynr runtime's link to its
        cluster controller."""
        return [(cc, g) for cc in self.ccs for g in self.backends] + [(lib, None) for lib in self.libjoynr]

    def blocked(self, runtime: str) -> bool:
        """A link of the runtime refuses or swallows connections: it cannot start."""
        links = [(runtime, None)] if runtime in self.libjoynr else [(runtime, g) for g in self.backends]
        return any(self.faults.get(link) in ("partition", "blackhole") for link in links)


Maker = Callable[[random.Random, World], dict[str, Any] | None]


@dataclass(frozen=True)
class StepKind:
    name: str
    weight: int
    make: Maker  # a step ({kind: args}), or None when none fits the world now


def _register(rng: random.Random, w: World) -> dict | None:
    hosts = [rt for rt in w.runtimes if w.usable(rt)]
    if not hosts:
        return None
    interface = COUNTER if rng.random() < 0.3 else INTERFACE
    # A fixed id whose holder is down may be registered again elsewhere: the stale-entry
    # conflicts the routing rules decide.
    used = {fixed for rt, fixed, _ in w.providers.values() if w.usable(rt)}
    free = [f for f in FIXED_IDS_BY_INTERFACE[interface] if f not in used]
    fixed = rng.choice(free) if free and rng.random() < 0.5 else None
    name = w.name("prov")
    runtime = rng.choice(hosts)
    args: dict[str, Any] = {"runtime": runtime, "provider": name, "domain": DOMAIN, "interface": interface,
                            "scope": rng.choice(PROVIDER_SCOPES)}
    if fixed:
        args["participant_id"] = fixed
    if args["scope"] == "GLOBAL" and len(w.backends) > 1 and rng.random() < 0.5:
        args["gbids"] = sorted(rng.sample(w.backends, rng.randint(1, len(w.backends))))
    w.providers[name] = (runtime, fixed, w.epoch[runtime])
    if interface != INTERFACE:
        w.interfaces[name] = interface
    return {"register": args}


def _unregister(rng: random.Random, w: World) -> dict | None:
    # Only what is registered now: a crash forgets, a restarted runtime's providers are new.
    names = [n for n, (rt, _, ep) in w.providers.items() if w.usable(rt) and w.epoch[rt] == ep]
    if not names:
        return None
    name = rng.choice(names)
    runtime = w.providers.pop(name)[0]
    return {"unregister": {"runtime": runtime, "provider": name}}


def _proxy(rng: random.Random, w: World) -> dict | None:
    hosts = [rt for rt in w.runtimes if w.usable(rt)]
    if not hosts or not w.providers:
        return None
    runtime = rng.choice(hosts)
    interface = w.interface(rng.choice(sorted(w.providers)))  # one some provider has had
    name = w.name("px")
    args: dict[str, Any] = {"runtime": runtime, "name": name, "domain": DOMAIN, "interface": interface,
                            "scope": rng.choice(PROXY_SCOPES)}
    if len(w.backends) > 1 and args["scope"] != "LOCAL_ONLY" and rng.random() < 0.3:
        args["gbids"] = [rng.choice(w.backends)]
    w.proxies[name] = (runtime, w.epoch[runtime])
    if interface != INTERFACE:
        w.interfaces[name] = interface
    return {"proxy": args}


def _call(rng: random.Random, w: World) -> dict | None:
    live = w.live_proxies()
    if not live:
        return None
    kind = "one_way" if rng.random() < 0.2 else "call"
    proxy = rng.choice(live)
    args: dict[str, Any] = {"proxy": proxy, "method": "echo", "args": [w.name("m")]}
    if w.interface(proxy) == COUNTER:
        args = {"proxy": proxy, "method": rng.choice(("increment", "get"))}
    args["ttl_ms"] = rng.choice((2_000, 5_000, 10_000))
    return {kind: args}


def _startable(w: World, runtime: str) -> bool:
    """A libjoynr runtime starts only while its cluster controller runs, a cluster controller
    only while its brokers run, neither while a link of its own refuses or swallows its
    connection: the simulator's start waits for those connections."""
    cc = w.libjoynr.get(runtime)
    ready = w.up[cc] if cc is not None else all(w.brokers_up.values())
    return ready and not w.blocked(runtime)


def _lifecycle(rng: random.Random, w: World) -> dict | None:
    runtime = rng.choice(w.runtimes)
    if not w.up[runtime]:
        if not _startable(w, runtime):
            return None
        w.up[runtime] = True
        w.epoch[runtime] += 1
        return {"start": runtime}
    kind = rng.choice(("crash", "stop", "restart", "restart"))
    if kind == "restart" and not _startable(w, runtime):
        kind = "crash"
    w.epoch[runtime] += 1
    if kind == "stop":
        # A graceful stop unregisters what the runtime registered.
        for name in [n for n, (rt, _, _) in w.providers.items() if rt == runtime]:
            del w.providers[name]
    w.up[runtime] = kind == "restart"
    return {kind: runtime}


def _broker(rng: random.Random, w: World) -> dict | None:
    gbid = rng.choice(w.backends)
    if w.brokers_up[gbid]:
        w.brokers_up[gbid] = False
        return {"crash_broker": gbid}
    w.brokers_up[gbid] = True
    return {"restart_broker": gbid}


def _advance(rng: random.Random, w: World) -> dict | None:
    return {"advance": rng.choice((500, 2_000, 10_000, 60_000))}


STEP_KINDS: tuple[StepKind, ...] = (
    StepKind("register", 5, _register),
    StepKind("unregister", 1, _unregister),
    StepKind("proxy", 4, _proxy),
    StepKind("call", 6, _call),
    StepKind("lifecycle", 2, _lifecycle),
    StepKind("broker", 1, _broker),
    StepKind("advance", 1, _advance),
    StepKind("subscribe", 2, kinds.subscribe),
    StepKind("multicast", 2, kinds.multicast),
    StepKind("unsubscribe", 1, kinds.unsubscribe),
    StepKind("publish", 2, kinds.publish),
    StepKind("expect_publications", 1, kinds.expect_publications),
    StepKind("link_fault", 2, kinds.link_fault),
    *((StepKind("clock_skew", 1, kinds.clock_skew),) if kinds.schema_knows("clock_skew") else ()),
)


@dataclass
class Generator:
    """Scenarios of 1-4 cluster controllers, 1-3 GBIDs and up to two libjoynr runtimes per
    controller, with ``min_steps``..``max_steps`` steps."""

    min_steps: int = 6
    max_steps: int = 24
    extra_kinds: list[StepKind] = field(default_factory=list)
    kinds: tuple[StepKind, ...] = STEP_KINDS

    def scenario(self, rng: random.Random, name: str, policy: str | None = None) -> dict[str, Any]:
        backends = [f"gbid{n}" for n in range(1, rng.randint(1, 3) + 1)]
        ccs = [f"cc{n}" for n in range(1, rng.randint(1, 4) + 1)]
        libjoynr = {f"app{cc[2:]}{chr(97 + k)}": cc for cc in ccs for k in range(rng.randint(0, 2))}
        w = World(backends, ccs, libjoynr)
        w.up = {rt: True for rt in w.runtimes}
        w.epoch = {rt: 0 for rt in w.runtimes}
        w.brokers_up = {g: True for g in backends}
        kinds = [*self.kinds, *self.extra_kinds]
        weights = [k.weight for k in kinds]
        steps: list[dict[str, Any]] = []
        target = rng.randint(self.min_steps, self.max_steps)
        attempts = 0
        while len(steps) < target and attempts < target * 20:
            attempts += 1
            step = rng.choices(kinds, weights)[0].make(rng, w)
            if step is not None:
                steps.append(step)
        runtimes = [{"kind": "cluster-controller", "id": cc} for cc in ccs]
        runtimes += [{"kind": "libjoynr", "id": lib, "cc": cc} for lib, cc in libjoynr.items()]
        doc: dict[str, Any] = {
            "name": name,
            "description": "A schedule drawn by joynr-sim explore.",
            "reproduces": {"seed": "explore", "scenario": "a generated schedule of steps and faults"},
            "backends": backends,
            "runtimes": runtimes,
            "steps": steps,
        }
        if policy:
            doc["policy"] = policy
        return doc


def scenarios(generator: Generator | None = None, policy: str | None = None):
    """A Hypothesis strategy of generated scenarios (shrinks by its random choices)."""
    from hypothesis import strategies as st

    gen = generator or Generator()
    return st.randoms(use_true_random=False).map(lambda rng: gen.scenario(rng, "hypothesis", policy))
