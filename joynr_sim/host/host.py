"""A host: the runtimes of one host process, each created, driven and queried by id.

The runner asks through the control protocol (``protocol``); ``Host.handle`` carries out one
validated request against the runtime it names and returns what goes back on the wire. A
host holds any number of runtimes; the runner starts one per process for a scenario, so a
crash is the end of that process.

What a runtime is made from arrives in its ``create`` spec and is checked here field by
field: the broker endpoints and credentials it connects with (resolved by the runner, so the
fault proxies and passwords stay the runner's), the tokens of the libjoynr runtimes its
cluster controller admits, the WebSocket port it listened on before (a restarted cluster
controller listens where its libjoynr runtimes expect it), and constructor options by name.

A host watches the run directory of every runtime it creates: a write there that fails is
the host's ``write_failure`` (``joynr_sim.write_failure``), which every answer carries back
to the runner from then on.
"""

from __future__ import annotations

import asyncio
import inspect
import ipaddress
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..clock import SimClock
from ..core.address import AddressError, WebSocketAddress, from_dict
from ..core.routing import Origin
from ..core.subscription_wire import (
    SubscriptionPayloadError,
    check_filter,
    check_name,
    check_partitions,
    qos_from_dict,
)
from ..runtime.base import Proxy, Runtime
from ..runtime.cluster_controller import ClusterController
from ..runtime.libjoynr import LibjoynrRuntime
from ..runtime.load import drive_calls
from ..runtime.participants import INTERFACES
from ..runtime.subscriptions import Subscription
from ..write_failure import Failures, WriteFailure, watch
from .profiling import HostProfiler
from .protocol import ProtocolError, entry_from_wire, entry_to_wire, failure_to_wire, put_result_to_wire

KINDS = {"cluster-controller": ClusterController, "libjoynr": LibjoynrRuntime}
# Set by the host from the spec, never by an option.
_RESERVED = {"self", "cc_id", "gbids", "brokers", "runtime_id", "provisioned", "link_registry", "cc_address",
             "token", "run_dir", "run_id", "clock", "policy", "max_hops", "seed", "incarnation", "kwargs"}
_SCALARS = (bool, int, float, str, type(None))
MAX_AWAIT_MS = 600_000  # the longest a runner may wait for publications in one request

_COMMON = {"run_dir": (str,), "run_id": (str,), "policy": (str,), "max_hops": (int,), "seed": (int, type(None)),
           "incarnation": (int,), "options": (dict,)}
_SPECS = {
    "cluster-controller": {**_COMMON, "cc_id": (str,), "gbids": (list,), "brokers": (dict,),
                           "provisioned": (list,), "ws_host": (str,), "ws_port": (int,), "tokens": (dict,)},
    "libjoynr": {**_COMMON, "cc_id": (str,), "cc_address": (dict,), "token": (str, type(None))},
}


class StaticBrokers:
    """The broker directory of a runtime in a host: endpoints and credentials as the runner
    resolved them when it started the process."""

    def __init__(self, brokers: Mapping[str, Mapping[str, Any]]) -> None:
        self._brokers = dict(brokers)

    def endpoint(self, gbid: str) -> tuple[str, int]:
        try:
            b = self._brokers[gbid]
        except KeyError:
            raise ValueError(f"gbid: {gbid!r} is not one of this runtime's GBIDs {list(self._brokers)}") from None
        return b["host"], b["port"]

    def credentials(self, client_id: str, gbid: str | None = None) -> tuple[str, str] | None:
        b = self._brokers.get(gbid or next(iter(self._brokers), ""))
        if b is None or b["username"] is None:
            return None
        return b["username"], b["password"]


def _field(spec: Mapping[str, Any], name: str, types: tuple[type, ...]) -> Any:
    value = spec.get(name)
    if name not in spec or not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
        raise ProtocolError(f"create.spec.{name}: expected {'/'.join(t.__name__ for t in types)}, got {value!r}")
    return value


def _check_spec(kind: str, spec: Mapping[str, Any]) -> None:
    schema = _SPECS[kind]
    unknown = set(spec) - set(schema)
    if unknown:
        raise ProtocolError(f"create.spec: unknown fields {sorted(unknown)}")
    for name, types in schema.items():
        _field(spec, name, types)
    if not all(isinstance(g, str) for g in spec.get("gbids", ())):
        raise ProtocolError("create.spec.gbids: expected a list of strings")


def check_options(kind: str, options: Mapping[str, Any]) -> dict[str, Any]:
    """Constructor options of a runtime of ``kind``, by name; each a scalar."""
    if kind not in KINDS:
        raise ProtocolError(f"create.kind: expected one of {sorted(KINDS)}, got {kind!r}")
    cls = KINDS[kind]
    accepted = set(inspect.signature(cls.__init__).parameters) | set(inspect.signature(Runtime.__init__).parameters)
    for name, value in options.items():
        if name in _RESERVED or name not in accepted:
            raise ProtocolError(f"create.spec.options: {cls.__name__} has no option {name!r}")
        if not isinstance(value, _SCALARS):
            raise ProtocolError(f"create.spec.options.{name}: expected a scalar, got {type(value).__name__}")
    return dict(options)


def _brokers(spec: Mapping[str, Any]) -> StaticBrokers:
    brokers = spec["brokers"]
    for gbid, b in brokers.items():
        if not isinstance(b, dict) or set(b) != {"host", "port", "username", "password"} \
                or not isinstance(b["host"], str) or type(b["port"]) is not int or not 0 < b["port"] < 65536 \
                or not isinstance(b["username"], (str, type(None))) or not isinstance(b["password"], (str, type(None))):
            raise ProtocolError(f"create.spec.brokers.{gbid}: expected {{host, port, username, password}}")
    if set(brokers) != set(spec["gbids"]):
        raise ProtocolError(f"create.spec.brokers: GBIDs {sorted(brokers)} differ from {spec['gbids']}")
    return StaticBrokers(brokers)


def check_ws_host(value: str) -> str:
    """An IP address to listen on (a host joined from another machine listens on its own)."""
    try:
        return str(ipaddress.ip_address(value))
    except ValueError:
        raise ProtocolError(f"create.spec.ws_host: expected an IP address, got {value[:64]!r}") from None


def _address(where: str, data: Any) -> Any:
    try:
        return from_dict(data)
    except AddressError as exc:
        raise ProtocolError(f"{where}: {exc}") from None


class Host:
    def __init__(self, clock: SimClock) -> None:
        self.clock = clock
        self.runtimes: dict[str, Runtime] = {}
        # The subscriptions made through this host, by runtime and id: their publications
        # stay readable after they ended.
        self.subscriptions: dict[tuple[str, str], Subscription] = {}
        self.profiler = HostProfiler()
        self._failures: dict[str, Failures] = {}  # run directory -> the writes that failed there

    @property
    def write_failure(self) -> WriteFailure | None:
        """The first write that failed in a run directory of this host's runtimes."""
        for failures in self._failures.values():
            if failures.failure is not None:
                return failures.failure
        return None

    def _runtime(self, args: Mapping[str, Any]) -> Runtime:
        try:
            return self.runtimes[args["runtime"]]
        except KeyError:
            raise ProtocolError(f"runtime: no runtime {args['runtime']!r} in this host") from None

    def _cc(self, args: Mapping[str, Any]) -> ClusterController:
        runtime = self._runtime(args)
        if not isinstance(runtime, ClusterController):
            raise ProtocolError(f"runtime: {args['runtime']!r} is not a cluster controller")
        return runtime

    def create(self, runtime_id: str, kind: str, spec: Mapping[str, Any]) -> dict[str, Any]:
        if kind not in KINDS:
            raise ProtocolError(f"create.kind: expected one of {sorted(KINDS)}, got {kind!r}")
        if runtime_id in self.runtimes:
            raise ProtocolError(f"create.runtime: {runtime_id!r} exists already in this host")
        _check_spec(kind, spec)
        common = dict(run_dir=Path(spec["run_dir"]), run_id=spec["run_id"], clock=self.clock,
                      policy=spec["policy"], max_hops=spec["max_hops"], seed=spec["seed"],
                      incarnation=spec["incarnation"])
        options = check_options(kind, spec["options"])
        if spec["run_dir"] not in self._failures:  # before the runtime writes its first line
            self._failures[spec["run_dir"]] = watch(spec["run_dir"])
        if kind == "cluster-controller":
            provisioned = []
            for item in spec["provisioned"]:
                if not (isinstance(item, list) and len(item) == 3 and isinstance(item[0], str)
                        and isinstance(item[2], bool)):
                    raise ProtocolError("create.spec.provisioned: expected [participant id, address, visible]")
                provisioned.append((item[0], _address("create.spec.provisioned", item[1]), item[2]))
            if not all(isinstance(k, str) and isinstance(v, str) for k, v in spec["tokens"].items()):
                raise ProtocolError("create.spec.tokens: expected client id -> token strings")
            ws_host = check_ws_host(spec["ws_host"])
            runtime: Runtime = ClusterController(
                spec["cc_id"], spec["gbids"], _brokers(spec), runtime_id=runtime_id, provisioned=provisioned,
                **common, **options,
            )
            runtime.ws_host = ws_host
            runtime.ws_port = spec["ws_port"]
            for client, token in spec["tokens"].items():
                runtime._ws_tokens[client] = token
        else:
            address = _address("create.spec.cc_address", spec["cc_address"])
            if not isinstance(address, WebSocketAddress):
                raise ProtocolError("create.spec.cc_address: expected a WebSocketAddress")
            runtime = LibjoynrRuntime(runtime_id, spec["cc_id"], address, token=spec["token"], **common, **options)
        self.runtimes[runtime_id] = runtime
        print(f"host {os.getpid()}: {kind} {runtime_id!r}, incarnation {spec['incarnation']}", file=sys.stderr)
        return {}

    async def handle(self, op: str, args: dict[str, Any]) -> Any:
        """Carry out one validated request; what it returns goes back as the result."""
        if op == "create":
            return self.create(args["runtime"], args["kind"], args["spec"])
        if op == "advance":
            self.clock.advance_to(args["offset_ms"])
            return self.clock.offset_ms
        if op == "profile":
            return self.profiler.switch(args["enable"])
        if op == "write_failure":
            return failure_to_wire(self.write_failure)
        runtime = self._runtime(args)
        if op == "start":
            if args["restart"]:
                runtime.emit("life.restart", target=runtime.runtime_id, target_kind=runtime.kind)
            await runtime.start()
            return {"ws_port": getattr(runtime, "ws_port", None)}
        if op == "stop":
            await runtime.stop()
            return None
        if op == "close":  # the host forgets it: a later start creates it anew
            self.close(runtime)
            del self.runtimes[runtime.runtime_id]
            return None
        return await self._participants(runtime, op, args)

    async def _participants(self, runtime: Runtime, op: str, args: dict[str, Any]) -> Any:
        if op == "register_provider":
            cls = INTERFACES.get(args["interface"])
            if cls is None:
                raise ValueError(f"interface: {args['interface']!r} is no built-in interface ({sorted(INTERFACES)})")
            skeleton = await runtime.register_provider(
                args["domain"], args["interface"], cls(), participant_id=args["participant_id"],
                scope=args["scope"], gbids=args["gbids"], priority=args["priority"],
            )
            return skeleton.participant_id
        if op == "unregister_provider":
            await runtime.unregister_provider(args["participant_id"])
            return None
        if op == "invoke_provider":
            return await runtime.invoke_provider(args["participant_id"], args["method"], args["params"])
        if op in ("create_proxy", "discover_proxy"):
            if op == "create_proxy":
                proxy = await runtime.create_proxy(args["interface"], args["provider"], args["visible"])
            else:
                proxy = await runtime.discover_proxy(
                    args["interface"], args["domain"], participant_id=args["participant_id"], scope=args["scope"],
                    gbids=args["gbids"], cache_max_age_ms=args["cache_max_age_ms"],
                )
            return [proxy.participant_id, proxy.provider_participant_id]
        if op == "call":
            return await runtime.request(args["sender"], args["recipient"], args["method"], args["params"],
                                         args["ttl_ms"], gbid=args["gbid"])
        if op == "load":
            try:
                return await drive_calls(runtime, args["sender"], args["recipient"], args["method"], args["params"],
                                         calls=args["calls"], concurrency=args["concurrency"], ttl_ms=args["ttl_ms"])
            except ValueError as exc:
                raise ProtocolError(f"load.{exc}") from None
        if op == "one_way":
            return runtime.one_way(args["sender"], args["recipient"], args["method"], args["params"], args["ttl_ms"])
        if op in ("subscribe", "unsubscribe", "await_publications", "publications"):
            return await self._subscriptions(runtime, op, args)
        if op in ("cut", "heal"):
            cc = self._cc(args)
            await (cc.cut(args["gbid"]) if op == "cut" else cc.heal(args["gbid"]))
            return None
        return self._table(runtime, op, args)

    async def _subscriptions(self, runtime: Runtime, op: str, args: dict[str, Any]) -> Any:
        if op == "subscribe":
            skeleton = runtime.proxies.get(args["proxy"])
            if skeleton is None:
                raise ProtocolError(f"subscribe.proxy: no proxy {args['proxy']!r} in {runtime.runtime_id!r}")
            try:
                name = check_name(args["name"])
                qos = qos_from_dict(args["qos"])
                flt = check_filter(args["filter"])
                partitions = check_partitions(args["partitions"])
            except SubscriptionPayloadError as exc:
                raise ProtocolError(f"subscribe.{exc.field}: {exc}") from None
            proxy = Proxy(runtime, skeleton)
            if args["kind"] == "attribute":
                if flt is not None or partitions:
                    raise ProtocolError("subscribe: an attribute subscription has no filter or partitions")
                sub = await proxy.subscribe_attribute(name, qos)
            elif args["kind"] == "broadcast":
                sub = await proxy.subscribe_broadcast(name, qos, filter=flt, partitions=partitions)
            else:
                raise ProtocolError(f"subscribe.kind: expected attribute or broadcast, got {args['kind']!r}")
            self.subscriptions[(runtime.runtime_id, sub.subscription_id)] = sub
            return sub.subscription_id
        sub = self.subscriptions.get((runtime.runtime_id, args["subscription_id"]))
        if sub is None:
            raise KeyError(f"subscription_id: no subscription {args['subscription_id']!r} in {runtime.runtime_id!r}")
        if op == "unsubscribe":
            await runtime.subscriptions.unsubscribe(sub.subscription_id)
            return None
        if op == "await_publications":
            if args["count"] < 0 or not 0 <= args["timeout_ms"] <= MAX_AWAIT_MS:
                raise ProtocolError(f"await_publications: count from 0, timeout_ms 0..{MAX_AWAIT_MS}")
            await sub.wait_for(args["count"], args["timeout_ms"] / 1000)
        return {"values": list(sub.values), "ended": sub.ended}

    def _table(self, runtime: Runtime, op: str, args: dict[str, Any]) -> Any:
        if op == "table_lookup":
            return entry_to_wire(runtime.table.lookup(args["participant_id"], args["gbid"]))
        if op == "table_put":
            entry = entry_from_wire(args["entry"], in_process=False)
            try:
                origin = Origin(args["origin"])
            except ValueError:
                raise ProtocolError(f"table_put.origin: unknown origin {args['origin']!r}") from None
            return put_result_to_wire(runtime.add_next_hop(args["participant_id"], entry, origin))
        if op == "table_remove":
            return runtime.remove_next_hop(args["participant_id"])
        if op == "table_items":
            return [[pid, entry_to_wire(entry)] for pid, entry in runtime.table.items()]
        if op == "queued":
            return runtime.queued(args["participant_id"])
        cc = self._cc(args)
        if op == "connected":
            conn = cc.mqtt.get(args["gbid"])
            return conn is not None and conn.connected.is_set()
        if op == "admit":
            cc._ws_tokens[args["client"]] = args["token"]
            return None
        raise ProtocolError(f"op: {op!r} is not for a runtime")

    async def flush_traces(self) -> None:
        """Before an answer: the runner may read the trace of what it asked for. A batched
        trace with lines pending has its flush queued on the loop (``TraceWriter.emit``), so
        one loop turn writes every one of them, and only those. Asking each of a host's
        traces whether it had lines pending cost a scan of all of them per answer: with 850
        runtimes in a host, 10.6 million checks were a twelfth of a 300-controller fleet's
        start (profiled)."""
        await asyncio.sleep(0)

    def close(self, runtime: Runtime) -> None:
        runtime.close()
        registry = getattr(runtime, "link_registry", None)
        if registry is not None and registry.store is not None:
            registry.store.close()

    async def shutdown(self) -> None:
        """Stop every runtime gracefully (the runner asked the host to exit)."""
        for runtime in list(self.runtimes.values()):
            try:
                await runtime.stop()
            finally:
                self.close(runtime)
