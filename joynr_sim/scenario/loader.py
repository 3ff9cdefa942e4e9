"""Loading scenario files: YAML with line numbers, validation, the model.

One table (``TOP`` and ``STEP_ARGS`` below) describes the format. The loader validates a
file against it and ``build_schema()`` turns it into the JSON Schema shipped next to this
module (``scenario.schema.json``), so the schema an editor checks and the loader cannot
disagree on structure. What a schema cannot say (that a runtime named in a step exists and
is of the right kind, that a GBID is one of the backends, that ``@name`` was defined by an
earlier step) is checked here after the structure.

Bad input raises ``ScenarioError`` naming the file, the line and the field; the first error
stops the load.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Mapping

import yaml

from ..runtime.participants import INTERFACES
from ..trace import EVENTS
from .model import (
    BROKER_STEPS,
    CLUSTER_CONTROLLER,
    DEFAULT_BROKER,
    DEFAULT_POLICY,
    LIBJOYNR,
    POLICY_NAMES,
    REF_PREFIX,
    RUNTIME_STEPS,
    STEP_KINDS,
    Reproduces,
    RuntimeSpec,
    Scenario,
    Step,
    freeze,
    participant_ref,
)

SCHEMA_PATH = Path(__file__).with_name("scenario.schema.json")
SCHEMA_ID = "https://joynr-sim.invalid/scenario.schema.json"

Path_ = tuple[str | int, ...]  # where a value sits in the document: keys and list indices


class ScenarioError(ValueError):
    """``path:line: field: what is wrong``; line 0 when the file could not be read at all."""

    def __init__(self, path: str | os.PathLike[str], line: int, field: str, message: str) -> None:
        self.path = Path(path)
        self.line = line
        self.field = field
        self.message = message
        where = f"{self.path}:{line}" if line else f"{self.path}"
        super().__init__(f"{where}: {field}: {message}")


# -- the format, as data ---------------------------------------------------------------

_NO_DEFAULT = object()
ID_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]*$"  # runtime ids name trace files; GBIDs name brokers
NAME_PATTERN = r"^[a-z0-9-]+$"
PARTICIPANT_PATTERN = r"^(@[A-Za-z0-9][A-Za-z0-9_.-]*|[^@\s]\S*)$"
LITERAL_PARTICIPANT_PATTERN = r"^[^@\s]\S*$"
BROKER_PATTERN = (
    r"^(amqtt|mosquitto|[A-Za-z0-9][A-Za-z0-9_.-]*=mqtts?://[^,\s]+"
    r"(,[A-Za-z0-9][A-Za-z0-9_.-]*=mqtts?://[^,\s]+)*)$"
)
ADDRESS_TYPES = ("InProcess", "WebSocket", "WebSocketClient", "Mqtt", "Channel")
ROUTE_TYPES = (*ADDRESS_TYPES, "absent")


@dataclass(frozen=True)
class F:
    """One field of the format: its JSON type and constraints, default and description."""

    type: str  # str | int | bool | any | list | object | variant
    doc: str = ""
    required: bool = False
    default: Any = None
    nullable: bool = False
    enum: tuple[str, ...] | None = None
    pattern: str | None = None
    minimum: int | None = None
    const: Any = _NO_DEFAULT
    items: "F | None" = None
    min_items: int = 0
    unique: bool = False
    fields: Mapping[str, "F"] = field(default_factory=dict)
    exactly_one: tuple[str, ...] = ()  # object: exactly one of these keys is given
    tag: str = ""  # variant: the key that selects the variant
    variants: Mapping[str, Mapping[str, "F"]] = field(default_factory=dict)


def _id(doc: str, **kw: Any) -> F:
    return F("str", doc, pattern=ID_PATTERN, **kw)


def _gbids(doc: str, **kw: Any) -> F:
    return F("list", doc, items=_id("a GBID"), min_items=1, unique=True, **kw)


def _participant(doc: str = "a participant id, or @name of a provider or proxy defined earlier") -> F:
    return F("str", doc, required=True, pattern=PARTICIPANT_PATTERN)


_RUNTIME = _id("a runtime id", required=True)
_EXPECT = F(
    "object",
    "what the call must end with; absent: not checked",
    fields={
        "result": F("any", "the result the provider returns"),
        "error": F("str", "a modeled error name or an exception type name", pattern=r"^\S+$"),
        "timeout": F("bool", "the call times out", const=True),
    },
    exactly_one=("result", "error", "timeout"),
)
_ROUTE_BODY = {
    "runtime": _RUNTIME,
    "participant": _participant(),
    "type": F("str", "the routing entry's address type, or absent", required=True, enum=ROUTE_TYPES),
    "gbid": _id("the GBID of an Mqtt entry"),
    "sticky": F("bool", "the entry's sticky flag; absent: not checked"),
    "visible": F("bool", "the entry's globally-visible flag; absent: not checked"),
}
_GCD_BODY = {
    "participant": _participant(),
    "gbids": _gbids("the backends to look in; absent: all backends"),
    "present": F("bool", "false: no entry in any of those backends", default=True),
}
_CALL_ARGS = {
    "proxy": _id("the name of a proxy built by an earlier step", required=True),
    "method": F("str", "a method of the proxy's interface", required=True, pattern=r"^[A-Za-z_]\w*$"),
    "args": F("list", "the call's parameters", items=F("any"), default=()),
    "ttl_ms": F("int", "the message's time to live; absent: the runtime's default", minimum=1),
    "expect": _EXPECT,
}

STEP_ARGS: dict[str, F] = {
    "register": F("object", "register a provider", fields={
        "runtime": _RUNTIME,
        "provider": _id("a name for the provider, unique in the file", required=True),
        "domain": F("str", "the provider's domain", required=True, pattern=r"^\S+$"),
        "interface": F("str", "the provider's interface", required=True, enum=tuple(INTERFACES)),
        "participant_id": F("str", "a fixed participant id; absent: generated",
                            pattern=LITERAL_PARTICIPANT_PATTERN),
        "scope": F("str", "the provider's scope", enum=("LOCAL", "GLOBAL"), default="GLOBAL"),
        "gbids": _gbids("the backends to register in; absent: the cluster controller's default"),
        "expect_error": F("str", "the registration fails with this error", nullable=True,
                          pattern=r"^\S+$"),
    }),
    "unregister": F("object", "unregister a provider", fields={
        "runtime": _RUNTIME,
        "provider": _id("the name of a provider registered earlier", required=True),
    }),
    "proxy": F("object", "build a proxy by domain and interface, or for a known participant", fields={
        "runtime": _RUNTIME,
        "name": _id("a name for the proxy, unique in the file", required=True),
        "domain": F("str", "the provider's domain", pattern=r"^\S+$"),
        "participant": F("str", "build against this provider (id or @name) instead of a lookup",
                         pattern=PARTICIPANT_PATTERN),
        "interface": F("str", "the provider's interface", required=True, enum=tuple(INTERFACES)),
        "scope": F("str", "the discovery scope",
                   enum=("LOCAL_ONLY", "LOCAL_THEN_GLOBAL", "LOCAL_AND_GLOBAL", "GLOBAL_ONLY"),
                   default="LOCAL_THEN_GLOBAL"),
        "gbids": _gbids("the backends to look in; absent: the cluster controller's default"),
        "cache_max_age_ms": F("int", "discovery cache max age; absent: the runtime's default",
                              minimum=0),
        "expect_error": F("str", "building the proxy fails with this error", nullable=True,
                          pattern=r"^\S+$"),
    }, exactly_one=("domain", "participant")),
    "call": F("object", "call a method and wait for the reply", fields=_CALL_ARGS),
    "one_way": F("object", "send a fire-and-forget request", fields={
        k: v for k, v in _CALL_ARGS.items() if k != "expect"
    }),
    **{k: _id(f"{k} this runtime") for k in RUNTIME_STEPS},
    **{k: _id(f"{k.replace('_', ' ')}: the GBID of its backend") for k in BROKER_STEPS},
    "cut": F("object", "cut a cluster controller off a broker", fields={
        "runtime": _RUNTIME, "gbid": _id("a GBID of the cluster controller", required=True),
    }),
    "heal": F("object", "reconnect a cluster controller to a broker", fields={
        "runtime": _RUNTIME, "gbid": _id("a GBID of the cluster controller", required=True),
    }),
    "advance": F("int", "move simulated time forward by this many ms", minimum=0),
    "wait": F("object", "wait until a condition holds", fields={
        "until": F("object", "the condition", required=True, fields={
            "route": F("object", "a routing entry as expect_route describes it",
                       fields=_ROUTE_BODY),
            "gcd": F("object", "a GCD row as expect_gcd describes it", fields=_GCD_BODY),
            "connected": F("object", "a cluster controller is connected to a broker", fields={
                "runtime": _RUNTIME, "gbid": _id("a GBID of the cluster controller", required=True),
            }),
            "event": F("object", "the trace holds an event (e.g. link.takeover-storm)", fields={
                "ev": F("str", "the trace event name", required=True, enum=tuple(sorted(EVENTS))),
                "runtime": _id("only events of this runtime"),
                "count": F("int", "at least this many such events", minimum=1, default=1),
            }),
        }, exactly_one=("route", "gcd", "connected", "event")),
        "timeout_ms": F("int", "fail when the condition does not hold by then", minimum=1,
                        default=5000),
    }),
    "expect_route": F("object", "check a runtime's routing entry", fields=_ROUTE_BODY),
    "expect_gcd": F("object", "check the global capabilities directory", fields=_GCD_BODY),
    "add_route": F("object", "provision a routing entry", fields={
        "runtime": _RUNTIME,
        "participant": _participant(),
        "address": F("variant", "the entry's address", required=True, tag="type", variants={
            "Mqtt": {"gbid": _id("the broker's GBID", required=True),
                     "topic": F("str", "the MQTT topic", required=True, pattern=r"^\S+$")},
            "WebSocketClient": {"id": F("str", "the client id", required=True, pattern=r"^\S+$")},
            "WebSocket": {"host": F("str", "host", required=True, pattern=r"^\S+$"),
                          "port": F("int", "port", required=True, minimum=1),
                          "protocol": F("str", "protocol", enum=("WS", "WSS"), default="WS"),
                          "path": F("str", "path", default="")},
            "Channel": {"url": F("str", "the messaging endpoint URL", required=True,
                                 pattern=r"^\S+$"),
                        "channel": F("str", "the channel id", required=True, pattern=r"^\S+$")},
        }),
        "sticky": F("bool", "the entry's sticky flag", default=True),
        "visible": F("bool", "the entry's globally-visible flag", default=True),
    }),
    "expect_calls": F("object", "make several calls, each checked like call", fields={
        **_CALL_ARGS,
        "count": F("int", "how many calls", required=True, minimum=1),
    }),
}
assert tuple(STEP_ARGS) == STEP_KINDS

TOP = F("object", "a joynr-sim scenario", fields={
    "name": F("str", "the scenario's name", required=True, pattern=NAME_PATTERN),
    "description": F("str", "free text", default=""),
    "reproduces": F("object", "the seed scenario this file reproduces", required=True, fields={
        "seed": F("str", "a file name in the seeds", required=True, pattern=r"^[^/\s]+$"),
        "scenario": F("str", "the seed's wording of the scenario", required=True,
                      pattern=r"\S"),
    }),
    "policy": F("str", "the routing policy", enum=POLICY_NAMES, default=DEFAULT_POLICY),
    "broker": F("str", "amqtt, mosquitto, or external brokers as gbid=mqtt://host:port,...",
                pattern=BROKER_PATTERN, default=DEFAULT_BROKER),
    "backends": _gbids("the GBIDs, one broker each", required=True),
    "runtimes": F("list", "the runtimes", required=True, items=F(
        "variant", "a runtime", tag="kind", variants={
            CLUSTER_CONTROLLER: {
                "id": _id("the runtime's id", required=True),
                "gbids": _gbids("the backends it connects to; absent: all"),
                "cc_id": _id("its cluster-controller id (MQTT topic); absent: the runtime id"),
                "old_joynr": F("bool", "it uses the GCD's old single-backend API", default=False),
                "detached_timeout_ms": F("int", "a broker session detached this long is purged; "
                                         "absent: never", minimum=0, nullable=True),
            },
            LIBJOYNR: {
                "id": _id("the runtime's id", required=True),
                "cc": _id("the cluster controller it connects to", required=True),
            },
        })),
    "steps": F("list", "the steps, in order", required=True, items=F("step")),
})


# -- YAML with line numbers ------------------------------------------------------------

class _Doc:
    """The parsed file: plain values plus the line of every value, keyed by its path."""

    def __init__(self, path: Path, text: str) -> None:
        self.path = path
        self.lines: dict[Path_, int] = {}
        loader = yaml.SafeLoader(text)
        try:
            node = loader.get_single_node()
            if node is None:
                raise ScenarioError(path, 1, "(file)", "empty file; expected a mapping")
            self.data = self._build(loader, node, ())
        except yaml.MarkedYAMLError as exc:
            mark = exc.problem_mark or exc.context_mark
            line = mark.line + 1 if mark else 1
            raise ScenarioError(path, line, "(yaml)", ": ".join(
                p for p in (exc.context, exc.problem) if p) or str(exc)) from None
        except yaml.YAMLError as exc:
            raise ScenarioError(path, 1, "(yaml)", str(exc)) from None
        finally:
            loader.dispose()

    def _build(self, loader: yaml.SafeLoader, node: yaml.Node, at: Path_) -> Any:
        self.lines.setdefault(at, node.start_mark.line + 1)
        if isinstance(node, yaml.MappingNode):
            loader.flatten_mapping(node)  # resolves << merge keys
            out: dict[str, Any] = {}
            for key_node, value_node in node.value:
                key = loader.construct_object(key_node)
                where = _field(at)
                if not isinstance(key, str):
                    raise ScenarioError(self.path, key_node.start_mark.line + 1, where or "(top)",
                                        f"keys must be strings, got {key!r}")
                if key in out:
                    raise ScenarioError(self.path, key_node.start_mark.line + 1,
                                        _field((*at, key)), "duplicate key")
                # A key's line is where a reader looks for it, also for a block value below it.
                self.lines[(*at, key)] = key_node.start_mark.line + 1
                out[key] = self._build(loader, value_node, (*at, key))
            return out
        if isinstance(node, yaml.SequenceNode):
            return [self._build(loader, item, (*at, i)) for i, item in enumerate(node.value)]
        return loader.construct_object(node)

    def line(self, at: Path_) -> int:
        while at not in self.lines and at:
            at = at[:-1]
        return self.lines.get(at, 1)

    def error(self, at: Path_, message: str) -> ScenarioError:
        return ScenarioError(self.path, self.line(at), _field(at) or "(top)", message)


def _field(at: Path_) -> str:
    out = ""
    for part in at:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else part)
    return out


# -- structure ---------------------------------------------------------------------------

_TYPE_NAMES = {"str": "a string", "int": "an integer", "bool": "true or false",
               "list": "a list", "object": "a mapping", "variant": "a mapping", "step": "a mapping"}


def _got(value: Any) -> str:
    if value is None:
        return "nothing (null)"
    return f"{value!r} ({type(value).__name__})"


def _check(doc: _Doc, value: Any, spec: F, at: Path_) -> Any:
    """The value with defaults filled in, or ScenarioError at the first problem."""
    if value is None and spec.nullable:
        return None
    t = spec.type
    if t == "any":
        return value
    ok = {
        "str": isinstance(value, str),
        "int": isinstance(value, int) and not isinstance(value, bool),
        "bool": isinstance(value, bool),
        "list": isinstance(value, list),
        "object": isinstance(value, dict),
        "variant": isinstance(value, dict),
        "step": isinstance(value, dict),
    }[t]
    if not ok:
        hint = " (quote it)" if t == "str" and isinstance(value, (int, float, bool)) else ""
        raise doc.error(at, f"expected {_TYPE_NAMES[t]}, got {_got(value)}{hint}")
    if spec.const is not _NO_DEFAULT and value != spec.const:
        raise doc.error(at, f"must be {json.dumps(spec.const)}, got {_got(value)}")
    if spec.enum is not None and value not in spec.enum:
        raise doc.error(at, f"{value!r} is not one of {', '.join(spec.enum)}")
    if spec.pattern is not None and not re.search(spec.pattern, value):
        raise doc.error(at, f"{value!r} does not match {spec.pattern}")
    if spec.minimum is not None and value < spec.minimum:
        raise doc.error(at, f"must be at least {spec.minimum}, got {value}")
    if t == "list":
        if len(value) < spec.min_items:
            raise doc.error(at, f"must have at least {spec.min_items} item(s)")
        items = [_check(doc, v, spec.items or F("any"), (*at, i)) for i, v in enumerate(value)]
        if spec.unique:
            seen: set[Any] = set()
            for i, v in enumerate(items):
                if v in seen:
                    raise doc.error((*at, i), f"{v!r} is listed twice")
                seen.add(v)
        return items
    if t == "object":
        return _check_fields(doc, value, spec.fields, spec.exactly_one, at)
    if t == "variant":
        if spec.tag not in value:
            raise doc.error(at, f"missing required key {spec.tag!r}")
        tag = value[spec.tag]
        if tag not in spec.variants:
            raise doc.error((*at, spec.tag), f"{tag!r} is not one of {', '.join(spec.variants)}")
        rest = {k: v for k, v in value.items() if k != spec.tag}
        return {spec.tag: tag, **_check_fields(doc, rest, spec.variants[tag], (), at,
                                               what=f"{spec.tag} {tag}")}
    if t == "step":
        if len(value) != 1:
            keys = ", ".join(map(str, value)) or "none"
            raise doc.error(at, f"a step is a mapping with one key, its kind; got keys {keys}")
        (kind, args), = value.items()
        if kind not in STEP_ARGS:
            raise doc.error((*at, kind), f"unknown step kind {kind!r}; "
                                         f"choose one of {', '.join(STEP_KINDS)}")
        return {kind: _check(doc, args, STEP_ARGS[kind], (*at, kind))}
    return value


def _check_fields(doc: _Doc, value: dict[str, Any], fields: Mapping[str, F],
                  exactly_one: tuple[str, ...], at: Path_, what: str = "") -> dict[str, Any]:
    for key in value:
        if key not in fields:
            where = f" for {what}" if what else ""
            raise doc.error((*at, key), f"unknown key{where}; expected one of {', '.join(fields)}")
    if exactly_one:
        given = [k for k in exactly_one if k in value]
        if len(given) != 1:
            raise doc.error(at, f"give exactly one of {', '.join(exactly_one)}"
                                f"{'; got ' + ', '.join(given) if given else ''}")
    # A union (expect, until) keeps only its one key; other objects get every key.
    union = set(exactly_one) == set(fields)
    out: dict[str, Any] = {}
    for key, spec in fields.items():
        if key in value:
            out[key] = _check(doc, value[key], spec, (*at, key))
        elif spec.required:
            raise doc.error(at, f"missing required key {key!r}")
        elif not (union and key in exactly_one):
            out[key] = list(spec.default) if isinstance(spec.default, tuple) else spec.default
    return out


# -- meaning -------------------------------------------------------------------------------

class _Meaning:
    """The checks a schema cannot make, in file order, as a reader would: names must exist
    before they are used."""

    def __init__(self, doc: _Doc, data: dict[str, Any]) -> None:
        self.doc = doc
        self.backends: list[str] = data["backends"]
        self.runtimes: dict[str, dict[str, Any]] = {}
        self.providers: dict[str, str] = {}  # name -> runtime id
        self.proxies: dict[str, str] = {}  # name -> interface

    def runtimes_(self, runtimes: list[dict[str, Any]]) -> None:
        for i, rt in enumerate(runtimes):
            at: Path_ = ("runtimes", i)
            if rt["id"] in self.runtimes:
                raise self.doc.error((*at, "id"), f"runtime id {rt['id']!r} is used twice")
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
                    raise self.doc.error(("runtimes", i, "cc"),
                                         f"{rt['cc']!r} is not a cluster-controller runtime; "
                                         f"cluster controllers: {', '.join(self._ccs()) or 'none'}")

    def _ccs(self) -> list[str]:
        return [k for k, v in self.runtimes.items() if v["kind"] == CLUSTER_CONTROLLER]

    def broker(self, broker: str) -> None:
        if broker in ("amqtt", "mosquitto"):
            return
        named = [part.split("=", 1)[0] for part in broker.split(",")]
        for gbid in named:
            if gbid not in self.backends:
                raise self.doc.error(("broker",), f"GBID {gbid!r} is not one of the backends "
                                                  f"({', '.join(self.backends)})")
        missing = [g for g in self.backends if g not in named]
        if missing:
            raise self.doc.error(("broker",), f"no broker URL for backend(s) {', '.join(missing)}")

    def runtime(self, rid: str, at: Path_, cc_only: bool = False) -> dict[str, Any]:
        rt = self.runtimes.get(rid)
        if rt is None:
            raise self.doc.error(at, f"unknown runtime {rid!r}; runtimes: {', '.join(self.runtimes)}")
        if cc_only and rt["kind"] != CLUSTER_CONTROLLER:
            raise self.doc.error(at, f"{rid!r} is a {rt['kind']} runtime; this needs a "
                                     f"cluster controller ({', '.join(self._ccs()) or 'none'})")
        return rt

    def cc_gbids(self, rid: str) -> list[str]:
        rt = self.runtimes[rid]
        return rt["gbids"] if rt["kind"] == CLUSTER_CONTROLLER else self.runtimes[rt["cc"]]["gbids"]

    def gbids(self, gbids: Iterable[str], at: Path_, within: list[str] | None = None,
              owner: str = "") -> None:
        for i, gbid in enumerate(gbids):
            here = (*at, i) if at and at[-1] in ("gbids",) else at
            if gbid not in self.backends:
                raise self.doc.error(here, f"GBID {gbid!r} is not one of the backends "
                                           f"({', '.join(self.backends)})")
            if within is not None and gbid not in within:
                raise self.doc.error(here, f"GBID {gbid!r} is not one of {owner}'s GBIDs "
                                           f"({', '.join(within)})")

    def participant(self, value: str | None, at: Path_) -> None:
        if value is None:
            return
        name = participant_ref(value)
        if name is not None and name not in self.providers and name not in self.proxies:
            known = ", ".join([*self.providers, *self.proxies]) or "none yet"
            raise self.doc.error(at, f"{REF_PREFIX}{name} names no provider or proxy defined by "
                                     f"an earlier step (defined: {known})")

    def new_name(self, name: str, at: Path_) -> None:
        if name in self.providers or name in self.proxies:
            raise self.doc.error(at, f"name {name!r} is already used by an earlier step")

    def proxy_method(self, args: dict[str, Any], at: Path_) -> None:
        interface = self.proxies.get(args["proxy"])
        if interface is None:
            raise self.doc.error((*at, "proxy"), f"{args['proxy']!r} names no proxy built by an "
                                                 f"earlier step (proxies: "
                                                 f"{', '.join(self.proxies) or 'none yet'})")
        methods = _methods(interface)
        if args["method"] not in methods:
            raise self.doc.error((*at, "method"), f"{interface} has no method {args['method']!r}; "
                                                  f"methods: {', '.join(methods)}")

    def route_body(self, body: dict[str, Any], at: Path_) -> None:
        self.runtime(body["runtime"], (*at, "runtime"))
        self.participant(body["participant"], (*at, "participant"))
        if body["gbid"] is not None:
            if body["type"] != "Mqtt":
                raise self.doc.error((*at, "gbid"), f"a gbid only goes with type Mqtt, "
                                                    f"not {body['type']}")
            self.gbids([body["gbid"]], (*at, "gbid"))

    def gcd_body(self, body: dict[str, Any], at: Path_) -> None:
        self.participant(body["participant"], (*at, "participant"))
        if body["gbids"] is not None:
            self.gbids(body["gbids"], (*at, "gbids"))

    def cc_gbid(self, body: dict[str, Any], at: Path_) -> None:
        self.runtime(body["runtime"], (*at, "runtime"), cc_only=True)
        self.gbids([body["gbid"]], (*at, "gbid"), within=self.cc_gbids(body["runtime"]),
                   owner=body["runtime"])

    def step(self, kind: str, args: dict[str, Any], at: Path_) -> None:
        if kind == "register":
            self.runtime(args["runtime"], (*at, "runtime"))
            self.new_name(args["provider"], (*at, "provider"))
            if args["gbids"] is not None:
                # A step that expects an error may name a foreign GBID on purpose.
                within = None if args["expect_error"] else self.cc_gbids(args["runtime"])
                self.gbids(args["gbids"], (*at, "gbids"), within, self._cc_name(args["runtime"]))
            self.providers[args["provider"]] = args["runtime"]
        elif kind == "unregister":
            self.runtime(args["runtime"], (*at, "runtime"))
            owner = self.providers.get(args["provider"])
            if owner is None:
                raise self.doc.error((*at, "provider"), f"{args['provider']!r} names no provider "
                                                        f"registered by an earlier step")
            if owner != args["runtime"]:
                raise self.doc.error((*at, "runtime"), f"provider {args['provider']!r} lives in "
                                                       f"{owner!r}, not {args['runtime']!r}")
        elif kind == "proxy":
            self.runtime(args["runtime"], (*at, "runtime"))
            self.new_name(args["name"], (*at, "name"))
            self.participant(args.get("participant"), (*at, "participant"))
            if args["gbids"] is not None:
                within = None if args["expect_error"] else self.cc_gbids(args["runtime"])
                self.gbids(args["gbids"], (*at, "gbids"), within, self._cc_name(args["runtime"]))
            self.proxies[args["name"]] = args["interface"]
        elif kind in ("call", "one_way", "expect_calls"):
            self.proxy_method(args, at)
        elif kind in RUNTIME_STEPS:
            self.runtime(args["runtime"], at)
        elif kind in BROKER_STEPS:
            self.gbids([args["gbid"]], at)
        elif kind in ("cut", "heal"):
            self.cc_gbid(args, at)
        elif kind == "wait":
            (what, body), = args["until"].items()
            here = (*at, "until", what)
            if what == "route":
                self.route_body(body, here)
            elif what == "gcd":
                self.gcd_body(body, here)
            elif what == "event":
                if body.get("runtime") is not None:
                    self.runtime(body["runtime"], (*here, "runtime"))
            else:
                self.cc_gbid(body, here)
        elif kind == "expect_route":
            self.route_body(args, at)
        elif kind == "expect_gcd":
            self.gcd_body(args, at)
        elif kind == "add_route":
            self.runtime(args["runtime"], (*at, "runtime"))
            self.participant(args["participant"], (*at, "participant"))
            if args["address"]["type"] == "Mqtt":
                self.gbids([args["address"]["gbid"]], (*at, "address", "gbid"))

    def _cc_name(self, rid: str) -> str:
        rt = self.runtimes[rid]
        return rid if rt["kind"] == CLUSTER_CONTROLLER else f"{rid}'s cluster controller {rt['cc']}"


def _methods(interface: str) -> list[str]:
    cls = INTERFACES[interface]
    return sorted(m for m in vars(cls) if not m.startswith("_") and callable(getattr(cls, m)))


# -- loading -------------------------------------------------------------------------------

def _normalise(kind: str, args: Any) -> dict[str, Any]:
    if kind in RUNTIME_STEPS:
        return {"runtime": args}
    if kind in BROKER_STEPS:
        return {"gbid": args}
    if kind == "advance":
        return {"ms": args}
    return args


def parse_scenario(text: str, path: str | os.PathLike[str] = "<string>") -> Scenario:
    """A scenario from YAML text; ``path`` names it in errors."""
    doc = _Doc(Path(path), text)
    data = _check(doc, doc.data, TOP, ())
    meaning = _Meaning(doc, data)
    meaning.runtimes_(data["runtimes"])
    meaning.broker(data["broker"])
    steps: list[Step] = []
    for i, item in enumerate(data["steps"]):
        (kind, raw), = item.items()
        args = _normalise(kind, raw)
        at: Path_ = ("steps", i, kind)
        meaning.step(kind, args, at)
        steps.append(Step(index=i, kind=kind, args=freeze(args), line=doc.line(("steps", i))))
    return Scenario(
        name=data["name"],
        description=data["description"],
        reproduces=Reproduces(**data["reproduces"]),
        policy=data["policy"],
        broker=data["broker"],
        backends=tuple(data["backends"]),
        runtimes=tuple(
            RuntimeSpec(
                id=rt["id"],
                kind=rt["kind"],
                gbids=tuple(rt.get("gbids") or ()),
                cc_id=rt.get("cc_id"),
                cc=rt.get("cc"),
                old_joynr=bool(rt.get("old_joynr", False)),
                detached_timeout_ms=rt.get("detached_timeout_ms"),
            )
            for rt in data["runtimes"]
        ),
        steps=tuple(steps),
        path=Path(path) if path != "<string>" else None,
    )


def load_scenario(path: str | os.PathLike[str]) -> Scenario:
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ScenarioError(path, 0, "(file)", f"cannot read: {exc}") from None
    return parse_scenario(text, path)


def scenario_files(paths: Iterable[str | os.PathLike[str]]) -> list[Path]:
    """Files as given, and every ``*.yaml`` of a folder (sorted), in the order given."""
    files: list[Path] = []
    for p in map(Path, paths):
        files.extend(sorted(p.glob("*.yaml")) if p.is_dir() else [p])
    return files


def load_scenarios(paths: str | os.PathLike[str] | Iterable[str | os.PathLike[str]]) -> list[Scenario]:
    """Scenarios from files and folders; the first bad file raises ScenarioError."""
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    return [load_scenario(f) for f in scenario_files(paths)]


# -- the JSON Schema ----------------------------------------------------------------------

def _schema(spec: F) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if spec.doc:
        out["description"] = spec.doc
    t = spec.type
    json_type = {"str": "string", "int": "integer", "bool": "boolean", "list": "array",
                 "object": "object", "variant": "object", "step": "object"}.get(t)
    if json_type:
        out["type"] = [json_type, "null"] if spec.nullable else json_type
    if spec.const is not _NO_DEFAULT:
        out["const"] = spec.const
    if spec.enum is not None:
        out["enum"] = list(spec.enum) + ([None] if spec.nullable else [])
    if spec.pattern is not None:
        out["pattern"] = spec.pattern
    if spec.minimum is not None:
        out["minimum"] = spec.minimum
    if spec.default is not None and not spec.required:
        out["default"] = list(spec.default) if isinstance(spec.default, tuple) else spec.default
    if t == "list":
        out["items"] = _schema(spec.items or F("any"))
        if spec.min_items:
            out["minItems"] = spec.min_items
        if spec.unique:
            out["uniqueItems"] = True
    elif t == "object":
        out.update(_object_schema(spec.fields, spec.exactly_one))
    elif t == "variant":
        out["required"] = [spec.tag]
        out["properties"] = {spec.tag: {"enum": list(spec.variants)}}
        out["allOf"] = [
            {"if": {"properties": {spec.tag: {"const": tag}}},
             "then": _object_schema({spec.tag: F("any"), **fields}, ())}
            for tag, fields in spec.variants.items()
        ]
    elif t == "step":
        out.update(minProperties=1, maxProperties=1, additionalProperties=False,
                   properties={k: _schema(v) for k, v in STEP_ARGS.items()})
    return out


def _object_schema(fields: Mapping[str, F], exactly_one: tuple[str, ...]) -> dict[str, Any]:
    out: dict[str, Any] = {"properties": {k: _schema(v) for k, v in fields.items()},
                           "additionalProperties": False}
    required = [k for k, v in fields.items() if v.required]
    if required:
        out["required"] = required
    if exactly_one:
        out["oneOf"] = [{"required": [k]} for k in exactly_one]
    return out


def build_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of the format, as shipped in scenario.schema.json."""
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_ID,
        "title": "joynr-sim scenario",
        **_schema(TOP),
    }


def schema_text() -> str:
    """The shipped file's text; a test holds the two equal. To regenerate: python -c
    'from joynr_sim.scenario.loader import schema_text as s; print(s(), end="")' > scenario.schema.json
    """
    return json.dumps(build_schema(), indent=2) + "\n"
