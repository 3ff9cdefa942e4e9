"""What the scenario schema cannot say: the names a file uses must be defined, in file order,
as a reader would check them. A runtime named in a step exists and is of the right kind, a
GBID is one of the backends (and of the cluster controller's), a libjoynr runtime's ``cc``
is a cluster controller, ``@name`` and proxies were defined by an earlier step, a method is
one of the interface's, a trace event exists, and the broker URLs name exactly the backends.

The data has passed the schema and holds every default; a problem is reported through
``fail(at, message)``, which returns the exception to raise.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from brokers import BrokerSpecError, parse_broker

from ..core.subscriptions import NO_EXPIRY, SubscriptionError, SubscriptionQos
from ..runtime.participants import INTERFACES
from ..trace import EVENTS
from .model import (
    BROKER_STEPS,
    CLUSTER_CONTROLLER,
    LIBJOYNR,
    LINK_FAULT_STEPS,
    REF_PREFIX,
    RUNTIME_STEPS,
    participant_ref,
    qos_args,
)
from .schema import At

Fail = Callable[[At, str], Exception]


class References:
    def __init__(self, data: dict[str, Any], fail: Fail) -> None:
        self.fail = fail
        self.backends: list[str] = data["backends"]
        self.runtimes: dict[str, dict[str, Any]] = {}
        self.providers: dict[str, str] = {}  # name -> runtime id
        self.proxies: dict[str, str] = {}  # name -> interface
        self.calls: dict[str, bool] = {}  # background calls: name -> awaited yet
        self.provider_interfaces: dict[str, str] = {}  # provider name -> interface
        self.subscriptions: set[str] = set()

    def check(self, data: dict[str, Any]) -> None:
        """Every check, in file order; fills in a cluster controller's gbids and cc_id."""
        self.guards(data)
        self.runtimes_(data["runtimes"])
        self.broker(data["broker"])
        for i, item in enumerate(data["steps"]):
            (kind, args), = item.items()
            self.step(kind, args, ("steps", i, kind))
        for name, awaited in self.calls.items():
            if not awaited:
                raise self.fail(("steps",), f"background calls {name!r} are started but never "
                                            f"awaited (add an await_calls step)")

    def guards(self, data: dict[str, Any]) -> None:
        if data["guards"] is not None and data["smoke"] is not None:
            raise self.fail(("smoke",), "give guards or smoke, not both")
        if data["guards"] is not None and data["policy"] in data["guards"]:
            i = data["guards"].index(data["policy"])
            raise self.fail(("guards", i), f"{data['policy']!r} is the scenario's own policy, under "
                                           f"which it must hold; guards lists the others it must fail under")

    def runtimes_(self, runtimes: list[dict[str, Any]]) -> None:
        for i, rt in enumerate(runtimes):
            at: At = ("runtimes", i)
            if rt["id"] in self.runtimes:
                raise self.fail((*at, "id"), f"runtime id {rt['id']!r} is used twice")
            if rt["kind"] == CLUSTER_CONTROLLER:
                if rt["gbids"] is None:
                    rt["gbids"] = list(self.backends)
                self.gbids(rt["gbids"], (*at, "gbids"))
                if rt["cc_id"] is None:
                    rt["cc_id"] = rt["id"]
            self.runtimes[rt["id"]] = rt
        for i, rt in enumerate(runtimes):
            if rt["kind"] == LIBJOYNR:
                cc = self.runtimes.get(rt["cc"])
                if cc is None or cc["kind"] != CLUSTER_CONTROLLER:
                    raise self.fail(("runtimes", i, "cc"),
                                    f"{rt['cc']!r} is not a cluster-controller runtime; "
                                    f"cluster controllers: {', '.join(self._ccs()) or 'none'}")

    def _ccs(self) -> list[str]:
        return [k for k, v in self.runtimes.items() if v["kind"] == CLUSTER_CONTROLLER]

    def broker(self, broker: str) -> None:
        try:
            parse_broker(broker, gbids=self.backends)
        except BrokerSpecError as exc:
            raise self.fail(("broker",), str(exc).removeprefix("broker: ")) from None

    def runtime(self, rid: str, at: At, cc_only: bool = False) -> dict[str, Any]:
        rt = self.runtimes.get(rid)
        if rt is None:
            raise self.fail(at, f"unknown runtime {rid!r}; runtimes: {', '.join(self.runtimes)}")
        if cc_only and rt["kind"] != CLUSTER_CONTROLLER:
            raise self.fail(at, f"{rid!r} is a {rt['kind']} runtime; this needs a "
                                f"cluster controller ({', '.join(self._ccs()) or 'none'})")
        return rt

    def cc_gbids(self, rid: str) -> list[str]:
        rt = self.runtimes[rid]
        return rt["gbids"] if rt["kind"] == CLUSTER_CONTROLLER else self.runtimes[rt["cc"]]["gbids"]

    def gbids(self, gbids: Iterable[str], at: At, within: list[str] | None = None,
              owner: str = "") -> None:
        for i, gbid in enumerate(gbids):
            here = (*at, i) if at and at[-1] == "gbids" else at
            if gbid not in self.backends:
                raise self.fail(here, f"GBID {gbid!r} is not one of the backends "
                                      f"({', '.join(self.backends)})")
            if within is not None and gbid not in within:
                raise self.fail(here, f"GBID {gbid!r} is not one of {owner}'s GBIDs "
                                      f"({', '.join(within)})")

    def participant(self, value: str | None, at: At) -> None:
        if value is None:
            return
        name = participant_ref(value)
        if name is not None and name not in self.providers and name not in self.proxies:
            known = ", ".join([*self.providers, *self.proxies]) or "none yet"
            raise self.fail(at, f"{REF_PREFIX}{name} names no provider or proxy defined by "
                                f"an earlier step (defined: {known})")

    def new_name(self, name: str, at: At) -> None:
        if name in self.providers or name in self.proxies:
            raise self.fail(at, f"name {name!r} is already used by an earlier step")

    def proxy_method(self, args: dict[str, Any], at: At) -> None:
        interface = self.proxies.get(args["proxy"])
        if interface is None:
            raise self.fail((*at, "proxy"), f"{args['proxy']!r} names no proxy built by an "
                                            f"earlier step (proxies: "
                                            f"{', '.join(self.proxies) or 'none yet'})")
        methods = _methods(interface)
        if args["method"] not in methods:
            raise self.fail((*at, "method"), f"{interface} has no method {args['method']!r}; "
                                             f"methods: {', '.join(methods)}")

    def route_body(self, body: dict[str, Any], at: At) -> None:
        self.runtime(body["runtime"], (*at, "runtime"))
        self.participant(body["participant"], (*at, "participant"))
        if body["gbid"] is not None:
            if body["type"] != "Mqtt":
                raise self.fail((*at, "gbid"), f"a gbid only goes with type Mqtt, "
                                               f"not {body['type']}")
            self.gbids([body["gbid"]], (*at, "gbid"))
        for key, type_ in (("topic", "Mqtt"), ("client_id", "WebSocketClient")):
            if body[key] is not None and body["type"] != type_:
                raise self.fail((*at, key), f"a {key} only goes with type {type_}, not {body['type']}")
        if body["expires"] is not None and body["type"] == "absent":
            raise self.fail((*at, "expires"), "an absent route has no expiry")

    def gcd_body(self, body: dict[str, Any], at: At) -> None:
        self.participant(body["participant"], (*at, "participant"))
        if body["gbids"] is not None:
            self.gbids(body["gbids"], (*at, "gbids"))

    def cc_gbid(self, body: dict[str, Any], at: At) -> None:
        self.runtime(body["runtime"], (*at, "runtime"), cc_only=True)
        self.gbids([body["gbid"]], (*at, "gbid"), within=self.cc_gbids(body["runtime"]),
                   owner=body["runtime"])

    def link(self, body: dict[str, Any], at: At) -> None:
        rt = self.runtime(body["runtime"], (*at, "runtime"))
        if rt["kind"] == CLUSTER_CONTROLLER:
            if body["gbid"] is None:
                raise self.fail(at, f"{body['runtime']!r} is a cluster controller: name the "
                                    f"broker link with gbid ({', '.join(rt['gbids'])})")
            self.gbids([body["gbid"]], (*at, "gbid"), within=rt["gbids"], owner=body["runtime"])
        elif body["gbid"] is not None:
            raise self.fail((*at, "gbid"), f"{body['runtime']!r} is a libjoynr runtime: its one link "
                                           f"is to its cluster controller; leave gbid out")

    def event(self, body: dict[str, Any], at: At) -> None:
        if body["ev"] not in EVENTS:
            raise self.fail((*at, "ev"), f"{body['ev']!r} is not a trace event; events: "
                                         f"{', '.join(sorted(EVENTS))}")
        if body["runtime"] is not None:
            self.runtime(body["runtime"], (*at, "runtime"))

    def step(self, kind: str, args: Any, at: At) -> None:
        if kind == "register":
            self.runtime(args["runtime"], (*at, "runtime"))
            self.new_name(args["provider"], (*at, "provider"))
            if args["gbids"] is not None:
                # A step that expects an error may name a foreign GBID on purpose.
                within = None if args["expect_error"] else self.cc_gbids(args["runtime"])
                self.gbids(args["gbids"], (*at, "gbids"), within, self._cc_name(args["runtime"]))
            self.providers[args["provider"]] = args["runtime"]
            self.provider_interfaces[args["provider"]] = args["interface"]
        elif kind == "unregister":
            self.runtime(args["runtime"], (*at, "runtime"))
            owner = self.providers.get(args["provider"])
            if owner is None:
                raise self.fail((*at, "provider"), f"{args['provider']!r} names no provider "
                                                   f"registered by an earlier step")
            if owner != args["runtime"]:
                raise self.fail((*at, "runtime"), f"provider {args['provider']!r} lives in "
                                                  f"{owner!r}, not {args['runtime']!r}")
        elif kind == "proxy":
            self.runtime(args["runtime"], (*at, "runtime"))
            self.new_name(args["name"], (*at, "name"))
            self.participant(args["participant"], (*at, "participant"))
            if args["gbids"] is not None:
                within = None if args["expect_error"] else self.cc_gbids(args["runtime"])
                self.gbids(args["gbids"], (*at, "gbids"), within, self._cc_name(args["runtime"]))
            self.proxies[args["name"]] = args["interface"]
        elif kind in ("call", "one_way", "expect_calls"):
            self.proxy_method(args, at)
        elif kind in RUNTIME_STEPS:
            self.runtime(args, at)
        elif kind in BROKER_STEPS:
            self.gbids([args], at)
        elif kind == "cut":
            self.cc_gbid(args, at)
        elif kind in (*LINK_FAULT_STEPS, "heal"):
            self.link(args, at)
        elif kind == "clock_skew":
            # Any runtime of the file: each is a cluster controller or a libjoynr runtime, and
            # both keep a clock of their own (the GCD instances are the backend's, not the file's).
            self.runtime(args["runtime"], (*at, "runtime"))
        elif kind == "start_calls":
            self.proxy_method(args, at)
            if args["name"] in self.calls:
                raise self.fail((*at, "name"), f"background calls {args['name']!r} were started "
                                               f"by an earlier step")
            self.calls[args["name"]] = False
        elif kind == "await_calls":
            if self.calls.get(args["name"]) is not False:
                what = "awaited already" if args["name"] in self.calls else "never started"
                raise self.fail((*at, "name"), f"background calls {args['name']!r} were {what} "
                                               f"(started: {', '.join(self.calls) or 'none yet'})")
            self.calls[args["name"]] = True
        elif kind == "wait":
            (what, body), = args["until"].items()
            here = (*at, "until", what)
            {"route": self.route_body, "gcd": self.gcd_body, "event": self.event,
             "connected": self.cc_gbid}[what](body, here)
        elif kind == "expect_route":
            self.route_body(args, at)
        elif kind == "expect_gcd":
            self.gcd_body(args, at)
        elif kind == "gcd_call":
            self.runtime(args["runtime"], (*at, "runtime"), cc_only=True)
            if args["gbid"] is not None:
                self.gbids([args["gbid"]], (*at, "gbid"), self.cc_gbids(args["runtime"]), args["runtime"])
        elif kind == "subscribe":
            self.subscribe(args, at)
        elif kind in ("unsubscribe", "expect_publications"):
            if args["subscription"] not in self.subscriptions:
                raise self.fail((*at, "subscription"), f"{args['subscription']!r} names no subscription made by an "
                                                       f"earlier step (subscriptions: "
                                                       f"{', '.join(sorted(self.subscriptions)) or 'none yet'})")
        elif kind == "publish":
            interface = self.provider_interfaces.get(args["provider"])
            if interface is None:
                raise self.fail((*at, "provider"), f"{args['provider']!r} names no provider registered by an "
                                                   f"earlier step")
            methods = _methods(interface)
            if args["method"] not in methods:
                raise self.fail((*at, "method"), f"{interface} has no method {args['method']!r}; "
                                                 f"methods: {', '.join(methods)}")
        elif kind == "add_route":
            self.runtime(args["runtime"], (*at, "runtime"))
            self.participant(args["participant"], (*at, "participant"))
            if args["address"]["type"] == "Mqtt":
                self.gbids([args["address"]["gbid"]], (*at, "address", "gbid"))

    def subscribe(self, args: dict[str, Any], at: At) -> None:
        interface = self.proxies.get(args["proxy"])
        if interface is None:
            raise self.fail((*at, "proxy"), f"{args['proxy']!r} names no proxy built by an earlier step "
                                            f"(proxies: {', '.join(self.proxies) or 'none yet'})")
        if args["name"] in self.subscriptions:
            raise self.fail((*at, "name"), f"subscription {args['name']!r} was made by an earlier step")
        cls = INTERFACES[interface]
        attributes = getattr(cls, "ATTRIBUTES", ())
        selective, multicast = getattr(cls, "SELECTIVE_BROADCASTS", ()), getattr(cls, "BROADCASTS", ())
        if args["attribute"] is not None:
            if args["attribute"] not in attributes:
                raise self.fail((*at, "attribute"), f"{interface} has no attribute {args['attribute']!r}; "
                                                    f"attributes: {', '.join(attributes) or 'none'}")
            for key, empty in (("filter", None), ("partitions", [])):
                if args[key] != empty:
                    raise self.fail((*at, key), f"an attribute subscription has no {key}")
        else:
            name = args["broadcast"]
            if name not in (*selective, *multicast):
                raise self.fail((*at, "broadcast"), f"{interface} has no broadcast {name!r}; broadcasts: "
                                                    f"{', '.join((*multicast, *selective)) or 'none'}")
            if args["filter"] is not None and name not in selective:
                raise self.fail((*at, "filter"), f"{name!r} is not a selective broadcast: it has no filter")
            if args["partitions"] and name not in multicast:
                raise self.fail((*at, "partitions"), f"{name!r} is a selective broadcast: it has no partitions")
            partitions = args["partitions"]
            if "*" in partitions[:-1]:
                raise self.fail((*at, "partitions"), "'*' may only be the last partition")
            check = getattr(cls, f"_check_filter_{name}", None)
            if args["filter"] is not None and check is not None:
                try:
                    check(args["filter"])
                except ValueError as exc:
                    raise self.fail((*at, "filter"), str(exc)) from None
        q = qos_args(args["qos"])
        try:
            SubscriptionQos(q["kind"], NO_EXPIRY, q["min_interval_ms"], q["max_interval_ms"], q["period_ms"],
                            q["alert_after_ms"]).check()
        except SubscriptionError as exc:
            raise self.fail((*at, "qos"), str(exc)) from None
        self.subscriptions.add(args["name"])

    def _cc_name(self, rid: str) -> str:
        rt = self.runtimes[rid]
        return rid if rt["kind"] == CLUSTER_CONTROLLER else f"{rid}'s cluster controller {rt['cc']}"


def _methods(interface: str) -> list[str]:
    cls = INTERFACES[interface]
    return sorted(m for m in vars(cls) if not m.startswith("_") and callable(getattr(cls, m)))
