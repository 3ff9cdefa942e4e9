"""A scenario as the loader hands it to the runner: validated, defaults filled in, read-only.

Every step keeps its arguments as a read-only mapping with every optional argument present
(absent ones hold their default, often ``None``), so the runner reads ``args["scope"]``
without asking whether it was written; only the one-of mappings ``expect`` ({result} |
{error} | {timeout}) and ``wait``'s ``until`` ({route} | {gcd} | {connected} | {event}) hold
just the key given. Lists are tuples; ``thaw()`` gives plain lists and dicts back, e.g. to compare an
expected result with a decoded reply. Scalar forms are normalised: ``crash: app1`` becomes
``{"runtime": "app1"}``, ``crash_broker: gbid1`` becomes ``{"gbid": "gbid1"}``, ``advance:
5000`` becomes ``{"ms": 5000}``.

A participant field (``participant:`` of ``proxy``, ``expect_route``, ``expect_gcd``,
``add_route`` and of ``wait``'s ``route``/``gcd``) holds either a literal participant id or
``@name``: the participant id of the provider (``provider:``) or proxy (``name:``) an earlier
step created. The loader has checked that the name exists; the runner resolves it when the
step runs, because generated participant ids are only known then.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from ..core.gcd import OWN_GCD
from ..wire.codecs import DEFAULT_WIRE

if TYPE_CHECKING:  # pragma: no cover
    from .fleet_model import Fleet

CLUSTER_CONTROLLER = "cluster-controller"
LIBJOYNR = "libjoynr"

POLICY_NAMES = ("precedence", "local-remote", "gcd-trust", "last-writer-wins")
DEFAULT_POLICY = "precedence"
DEFAULT_BROKER = "amqtt"

RUNTIME_STEPS = ("crash", "stop", "start", "restart")
BROKER_STEPS = ("crash_broker", "stop_broker", "start_broker", "restart_broker")
# Faults on a link (sim.faults): a cluster controller's broker connection or a libjoynr
# runtime's connection to its cluster controller; ``heal`` also ends a ``cut``.
LINK_FAULT_STEPS = ("partition", "blackhole", "delay", "duplicate", "reorder")
# The link faults only the memory network shows: TCP delivers a stream once and in order.
MEMORY_ONLY_STEPS = ("duplicate", "reorder")
STEP_KINDS = (
    "register", "unregister", "proxy", "call", "one_way",
    "subscribe", "unsubscribe", "publish", "expect_publications",
    *RUNTIME_STEPS, *BROKER_STEPS,
    "cut", *LINK_FAULT_STEPS, "heal", "clock_skew", "advance", "wait",
    "expect_route", "expect_gcd", "add_route", "expect_calls",
    "start_calls", "await_calls", "gcd_call",
)
# The steps that check something: a scenario needs at least one. ``wait`` is not one, it
# only waits; a call checks that it is answered as expected; register and proxy check
# only when they expect an error (CHECKING_WHEN_EXPECTING).
CHECKING_STEPS = ("expect_route", "expect_gcd", "gcd_call", "call", "expect_calls", "await_calls",
                  "expect_publications")
CHECKING_WHEN_EXPECTING = ("register", "unregister", "proxy", "subscribe")

REF_PREFIX = "@"

# A subscribe step's qos with nothing given (the schema fills in only keys that are written).
QOS_DEFAULTS = {"kind": "on-change", "expiry_ms": None, "min_interval_ms": 0, "max_interval_ms": 0,
                "period_ms": 0, "alert_after_ms": 0}


def qos_args(qos: Mapping[str, Any] | None) -> dict[str, Any]:
    return {**QOS_DEFAULTS, **(qos or {})}


def participant_ref(value: str) -> str | None:
    """The provider or proxy name ``value`` refers to (``@name``), or None for a literal id."""
    return value[len(REF_PREFIX):] if value.startswith(REF_PREFIX) else None


@dataclass(frozen=True)
class Reproduces:
    seed: str  # a file name in the seeds
    scenario: str  # the seed's wording of the scenario


@dataclass(frozen=True)
class RuntimeSpec:
    id: str
    kind: str  # cluster-controller | libjoynr
    # A cluster controller's backends (default: all); empty for a libjoynr runtime.
    gbids: tuple[str, ...]
    # A cluster controller's id (its MQTT topic; default: its runtime id); None for libjoynr.
    cc_id: str | None
    cc: str | None  # the cluster controller a libjoynr runtime connects to; None for a CC
    old_joynr: bool  # a cluster controller that speaks the GCD's old (single-backend) API
    # A cluster controller's broker sessions detached this long are purged (None: never).
    detached_timeout_ms: int | None = None
    # A cluster controller: keep or remove a libjoynr runtime's routes when it disconnects.
    on_client_disconnect: str = "keep"
    # A libjoynr runtime: send what came from the cluster controller back to it (joynr < 1.17.3).
    route_back_to_parent: bool = False
    # How long a cluster controller waits after each start before its removeStale.
    remove_stale_delay_ms: int = 0
    # A cluster controller without joynr's echo guard: it publishes received multicasts again.
    republish_received_multicasts: bool = False
    # A cluster controller keeps its learned routes across a restart (joynr's routing-table
    # persistency, off by default).
    persist_routing_table: bool = False

    @property
    def is_cluster_controller(self) -> bool:
        return self.kind == CLUSTER_CONTROLLER


@dataclass(frozen=True)
class Step:
    index: int  # position in ``steps``, from 0
    kind: str  # one of STEP_KINDS
    args: Mapping[str, Any]  # read-only, nested mappings and lists frozen too
    line: int  # line of the step in its file, from 1

    @property
    def checks(self) -> bool:
        """Whether the step checks something (a wait only waits)."""
        if self.kind in CHECKING_STEPS:
            return True
        return self.kind in CHECKING_WHEN_EXPECTING and self.args.get("expect_error") is not None

    @property
    def title(self) -> str:
        """A short label for reports: ``call px.echo``, ``crash app1``, ``advance 5000 ms``."""
        a = self.args
        k = self.kind
        if k == "register":
            return f"register {a['provider']} on {a['runtime']} ({a['interface']}, {a['scope']})"
        if k == "unregister":
            return f"unregister {a['provider']}"
        if k == "proxy":
            target = a["participant"] if a.get("participant") else f"{a['domain']}/{a['interface']}"
            return f"proxy {a['name']} on {a['runtime']} -> {target}"
        if k in ("call", "one_way"):
            return f"{k.replace('_', '-')} {a['proxy']}.{a['method']}"
        if k == "expect_calls":
            return f"{a['count']}x call {a['proxy']}.{a['method']}"
        if k in RUNTIME_STEPS:
            return f"{k} {a['runtime']}"
        if k in BROKER_STEPS:
            return f"{k.replace('_', ' ')} {a['gbid']}"
        if k == "cut":
            return f"cut {a['runtime']} from {a['gbid']}"
        if k in (*LINK_FAULT_STEPS, "heal"):
            where = f"{a['runtime']}-{a['gbid']}" if a.get("gbid") else f"{a['runtime']}-cc"
            extra = (f" {a['ms']}±{a['jitter_ms']} ms" if k == "delay" else f" {a['percent']}%" if k == "duplicate"
                     else f" 0..{a['ms']} ms" if k == "reorder" else "")
            return f"{k} {where}{extra}"
        if k == "clock_skew":
            return f"clock skew {a['runtime']} {a['ms']:+d} ms"
        if k == "start_calls":
            return f"start {a['count']}x {a['proxy']}.{a['method']} as {a['name']}"
        if k == "await_calls":
            return f"await calls {a['name']}" + (" (drops recorded)" if a["drops"] == "recorded" else "")
        if k == "subscribe":
            what = f"attribute {a['attribute']}" if a.get("attribute") else f"broadcast {a['broadcast']}"
            return f"subscribe {a['name']}: {a['proxy']} to {what}"
        if k == "unsubscribe":
            return f"unsubscribe {a['subscription']}"
        if k == "publish":
            times = f" {a['count']}x" if a["count"] != 1 else ""
            return f"publish{times} {a['provider']}.{a['method']}"
        if k == "expect_publications":
            if a.get("values") is not None:
                want = f"values {list(thaw(a['values']))}"
            elif "last" in a and a.get("count") is None and a.get("at_least") is None:
                want = f"latest {thaw(a['last'])!r}"
            else:
                want = f"{a['count']}" if a.get("count") is not None else f"at least {a['at_least']}"
            return f"expect publications {a['subscription']}: {want}"
        if k == "advance":
            return f"advance {a['ms']} ms"
        if k == "wait":
            (what, body), = a["until"].items()
            return f"wait for {what} {_describe(what, body)}"
        if k == "expect_route":
            return f"expect route {_describe('route', a)}"
        if k == "expect_gcd":
            return f"expect gcd {_describe('gcd', a)}"
        if k == "gcd_call":
            return f"gcd call {a['method']} from {a['runtime']} to {a['gbid'] or 'its default backend'}"
        if k == "add_route":
            return f"add route {a['participant']} on {a['runtime']} -> {a['address']['type']}"
        return k  # pragma: no cover - the loader admits no other kind


def _describe(what: str, body: Mapping[str, Any]) -> str:
    if what == "route":
        return f"{body['participant']} on {body['runtime']} = {body['type']}"
    if what == "gcd":
        where = ",".join(body["gbids"]) if body.get("gbids") else "all backends"
        if body.get("exact"):
            where = f"exactly {where}"
        return f"{body['participant']} {'in' if body.get('present', True) else 'not in'} {where}"
    if what == "event":
        where = f" of {body['runtime']}" if body.get("runtime") else ""
        return f"{body['ev']}{where}"
    return f"{body['runtime']} to {body['gbid']}"  # connected


@dataclass(frozen=True)
class Scenario:
    name: str
    description: str
    reproduces: Reproduces
    policy: str
    # The policies under which the scenario must fail (a step or, with --check, the checker),
    # or, instead, why no rule set can break it (smoke); a library scenario gives one.
    guards: tuple[str, ...]
    smoke: str | None
    broker: str  # amqtt | mosquitto | "gbid1=mqtt://host:port,..."
    backends: tuple[str, ...]
    runtimes: tuple[RuntimeSpec, ...]
    steps: tuple[Step, ...]
    path: Path | None = None
    # A fleet scenario: populations, load and waves instead of runtimes and steps.
    fleet: Fleet | None = None
    # The GCD's last-seen sweep (seed 001's removal of outdated entries): on with a timeout.
    gcd_last_seen_timeout_ms: int | None = None
    # The bytes the run's messages travel in (joynr_sim.wire.codecs): the run's choice
    # (run --wire), not the file's: the routing a scenario tests is the same on every wire.
    wire: str = DEFAULT_WIRE
    # Where the GCD is (core.gcd.GCD_PLACES): the run's choice (run --gcd), as the wire.
    gcd: str = OWN_GCD

    @property
    def checks(self) -> bool:
        """Whether any step checks something: a scenario that only acts and waits proves
        nothing, and ``joynr-sim list`` and ``run`` flag it. A fleet's ``expect`` is its check."""
        return self.fleet is not None or any(step.checks for step in self.steps)

    def runtime(self, runtime_id: str) -> RuntimeSpec:
        for spec in self.runtimes:
            if spec.id == runtime_id:
                return spec
        raise KeyError(runtime_id)

    def cluster_controller_of(self, runtime_id: str) -> RuntimeSpec:
        """The runtime itself if it is a cluster controller, else the one it connects to."""
        spec = self.runtime(runtime_id)
        return spec if spec.cc is None else self.runtime(spec.cc)


def freeze(value: Any) -> Any:
    """A read-only copy: mappings become MappingProxyType, lists become tuples."""
    if isinstance(value, Mapping):
        return MappingProxyType({k: freeze(v) for k, v in value.items()})
    if isinstance(value, (list, tuple)):
        return tuple(freeze(v) for v in value)
    return value


def thaw(value: Any) -> Any:
    """Plain dicts and lists again, e.g. to compare an expected result with a decoded reply."""
    if isinstance(value, Mapping):
        return {k: thaw(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [thaw(v) for v in value]
    return value
