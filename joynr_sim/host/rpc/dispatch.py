"""A host: the runtimes of one host process, each created, driven and queried by id.

The runner asks through the control protocol; ``Host.handle`` carries out one request, its
op decoded and checked (``ops``), in the op's handler ``on_<op>``, and returns what goes back
on the wire. A host holds any number of runtimes; the runner starts one per process for a
scenario, so a crash is the end of that process.

A host watches the run directory of every runtime it creates: a write there that fails is
the host's ``write_failure`` (``joynr_sim.write_failure``), which every answer carries back
to the runner from then on.
"""

from __future__ import annotations

import asyncio
import gc
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import msgspec

from ...clock import RuntimeClock, SimClock
from ...core.subscription_wire import (
    SubscriptionPayloadError,
    check_filter,
    check_name,
    check_partitions,
    qos_from_dict,
)
from ...runtime.cluster_controller import ClusterController
from ...runtime.joynr_runtime import JoynrRuntime, Proxy
from ...runtime.libjoynr import LibjoynrRuntime
from ...runtime.participants import INTERFACES
from ...runtime.subscriptions import Subscription
from ...write_failure import Failures, WriteFailure, watch
from ..process.event_loop import loop_name
from ..process.profiling import HostProfiler
from . import ops
from .framing import VERSION, ProtocolError, failure_to_wire
from .specs import ClusterControllerSpec, LibjoynrSpec
from .wire import WireEntry, WirePutResult


class Host:
    def __init__(self, clock: SimClock) -> None:
        self.clock = clock
        self.runtimes: dict[str, JoynrRuntime] = {}
        # The subscriptions made through this host, by runtime and id: their publications
        # stay readable after they ended.
        self.subscriptions: dict[tuple[str, str], Subscription] = {}
        self.profiler = HostProfiler()
        self.exited = asyncio.Event()  # the runner asked the host to end
        self._failures: dict[str, Failures] = {}  # run directory -> the writes that failed there

    @property
    def write_failure(self) -> WriteFailure | None:
        """The first write that failed in a run directory of this host's runtimes."""
        for failures in self._failures.values():
            if failures.failure is not None:
                return failures.failure
        return None

    async def handle(self, op: str, args: ops.Op | Mapping[str, Any]) -> Any:
        """Carry out one request: op ``op`` with its arguments, as decoded from a frame
        (``ops.validate_request``) or still to be checked. What it returns goes back as the
        result."""
        request = args if isinstance(args, ops.Op) else ops.decode(op, dict(args), ops.OPS)
        if ops.name_of(request) != op:
            raise ProtocolError(f"op: {op!r} with the arguments of {ops.name_of(request)!r}")
        result = await getattr(self, f"on_{op}")(request)
        return msgspec.to_builtins(result, builtin_types=ops.KEEP_BYTES)

    def _runtime(self, op: ops.RuntimeOp) -> JoynrRuntime:
        try:
            return self.runtimes[op.runtime]
        except KeyError:
            raise ProtocolError(f"runtime: no runtime {op.runtime!r} in this host") from None

    def _cc(self, op: ops.RuntimeOp) -> ClusterController:
        runtime = self._runtime(op)
        if not isinstance(runtime, ClusterController):
            raise ProtocolError(f"runtime: {op.runtime!r} is not a cluster controller")
        return runtime

    # -- the host's own ops ------------------------------------------------------------------
    async def on_hello(self, op: ops.Hello) -> ops.HelloAnswer:
        return {"pid": os.getpid(), "version": VERSION, "event_loop": loop_name(),
                "gc_thresholds": list(gc.get_threshold())}

    async def on_exit(self, op: ops.Exit) -> None:
        await self.shutdown()
        self.exited.set()

    async def on_advance(self, op: ops.Advance) -> int:
        self.clock.advance_to(op.offset_ms)
        return self.clock.offset_ms

    async def on_profile(self, op: ops.Profile) -> dict[str, Any] | None:
        return self.profiler.switch(op.enable)

    async def on_write_failure(self, op: ops.WriteFailure) -> dict[str, str] | None:
        return failure_to_wire(self.write_failure)

    # -- a runtime's lifecycle -----------------------------------------------------------------
    async def on_create(self, op: ops.Create) -> None:
        self._make(op)

    def create(self, runtime_id: str, kind: str, spec: Mapping[str, Any]) -> None:
        """A runtime made here directly, its spec checked as a request's is."""
        self._make(ops.decode("create", {"runtime": runtime_id, "kind": kind, "spec": dict(spec)}, ops.OPS))

    def _make(self, op: ops.Create) -> None:
        if op.runtime in self.runtimes:
            raise ProtocolError(f"create.runtime: {op.runtime!r} exists already in this host")
        spec = op.runtime_spec()
        if spec.run_dir not in self._failures:  # before the runtime writes its first line
            self._failures[spec.run_dir] = watch(spec.run_dir)
        # Each runtime reads the host's clock through its own, which a clock skew shifts.
        common = dict(run_dir=Path(spec.run_dir), clock=RuntimeClock(self.clock), **spec.common(), **spec.options)
        if isinstance(spec, ClusterControllerSpec):
            runtime: JoynrRuntime = ClusterController(
                spec.cc_id, spec.gbids, spec.broker_directory(), runtime_id=op.runtime,
                provisioned=spec.provisioned_routes(), ws_host=spec.ws_host, ws_port=spec.ws_port,
                ws_tokens=spec.tokens, **common,
            )
        else:
            assert isinstance(spec, LibjoynrSpec)
            runtime = LibjoynrRuntime(op.runtime, spec.cc_id, spec.websocket_address(), token=spec.token, **common)
        self.runtimes[op.runtime] = runtime
        print(f"host {os.getpid()}: {op.kind} {op.runtime!r}, incarnation {spec.incarnation}", file=sys.stderr)

    async def on_clock_skew(self, op: ops.ClockSkew) -> None:
        self._runtime(op).clock.set_skew(op.ms)

    async def on_start(self, op: ops.Start) -> ops.Started:
        runtime = self._runtime(op)
        if op.restart:
            runtime.emit("life.restart", target=runtime.runtime_id, target_kind=runtime.kind)
        await runtime.start()
        return {"ws_port": getattr(runtime, "ws_port", None)}

    async def on_stop(self, op: ops.Stop) -> None:
        await self._runtime(op).stop()

    async def on_close(self, op: ops.Close) -> None:
        """The host forgets it: a later start creates it anew."""
        runtime = self._runtime(op)
        self.close(runtime)
        del self.runtimes[runtime.runtime_id]

    # -- providers, proxies and calls ------------------------------------------------------------
    async def on_register_provider(self, op: ops.RegisterProvider) -> str:
        cls = INTERFACES.get(op.interface)
        if cls is None:
            raise ValueError(f"interface: {op.interface!r} is no built-in interface ({sorted(INTERFACES)})")
        skeleton = await self._runtime(op).register_provider(
            op.domain, op.interface, cls(), participant_id=op.participant_id, scope=op.scope, gbids=op.gbids,
            priority=op.priority,
        )
        return skeleton.participant_id

    async def on_unregister_provider(self, op: ops.UnregisterProvider) -> None:
        await self._runtime(op).unregister_provider(op.participant_id)

    async def on_invoke_provider(self, op: ops.InvokeProvider) -> Any:
        return await self._runtime(op).invoke_provider(op.participant_id, op.method, op.params)

    async def on_create_proxy(self, op: ops.CreateProxy) -> ops.ProxyIds:
        proxy = await self._runtime(op).create_proxy(op.interface, op.provider, op.visible)
        return proxy.participant_id, proxy.provider_participant_id

    async def on_discover_proxy(self, op: ops.DiscoverProxy) -> ops.ProxyIds:
        proxy = await self._runtime(op).discover_proxy(
            op.interface, op.domain, participant_id=op.participant_id, scope=op.scope, gbids=op.gbids,
            cache_max_age_ms=op.cache_max_age_ms,
        )
        return proxy.participant_id, proxy.provider_participant_id

    async def on_request(self, op: ops.Request) -> Any:
        return await self._runtime(op).request(op.sender, op.recipient, op.method, op.params, op.ttl_ms,
                                               gbid=op.gbid)

    async def on_one_way(self, op: ops.OneWay) -> str:
        return await self._runtime(op).one_way(op.sender, op.recipient, op.method, op.params, op.ttl_ms)

    async def on_load(self, op: ops.Load) -> ops.LoadOutcome:
        return await self._runtime(op).load(op.sender, op.recipient, op.method, op.params, calls=op.calls,
                                            concurrency=op.concurrency, ttl_ms=op.ttl_ms)

    # -- subscriptions ---------------------------------------------------------------------------
    async def on_subscribe(self, op: ops.Subscribe) -> str:
        runtime = self._runtime(op)
        skeleton = runtime.proxies.get(op.proxy)
        if skeleton is None:
            raise ProtocolError(f"subscribe.proxy: no proxy {op.proxy!r} in {runtime.runtime_id!r}")
        try:
            name, qos = check_name(op.name), qos_from_dict(op.qos)
            flt, partitions = check_filter(op.filter), check_partitions(op.partitions)
        except SubscriptionPayloadError as exc:
            raise ProtocolError(f"subscribe.{exc.field}: {exc}") from None
        proxy = Proxy(runtime, skeleton)
        if op.kind == "attribute":
            if flt is not None or partitions:
                raise ProtocolError("subscribe: an attribute subscription has no filter or partitions")
            sub = await proxy.subscribe_attribute(name, qos)
        elif op.kind == "broadcast":
            sub = await proxy.subscribe_broadcast(name, qos, filter=flt, partitions=partitions)
        else:
            raise ProtocolError(f"subscribe.kind: expected attribute or broadcast, got {op.kind!r}")
        self.subscriptions[(runtime.runtime_id, sub.subscription_id)] = sub
        return sub.subscription_id

    def _subscription(self, op: ops.Unsubscribe | ops.AwaitPublications | ops.Publications) -> Subscription:
        runtime = self._runtime(op)
        sub = self.subscriptions.get((runtime.runtime_id, op.subscription_id))
        if sub is None:
            raise KeyError(f"subscription_id: no subscription {op.subscription_id!r} in {runtime.runtime_id!r}")
        return sub

    async def on_unsubscribe(self, op: ops.Unsubscribe) -> None:
        await self._runtime(op).subscriptions.unsubscribe(self._subscription(op).subscription_id)

    async def on_await_publications(self, op: ops.AwaitPublications) -> ops.Published:
        sub = self._subscription(op)
        await sub.wait_for(op.count, op.timeout_ms / 1000)
        return {"values": list(sub.values), "ended": sub.ended}

    async def on_publications(self, op: ops.Publications) -> ops.Published:
        sub = self._subscription(op)
        return {"values": list(sub.values), "ended": sub.ended}

    # -- the routing table -----------------------------------------------------------------------
    async def on_lookup_route(self, op: ops.LookupRoute) -> WireEntry | None:
        return WireEntry.of(await self._runtime(op).lookup_route(op.participant_id, op.gbid))

    async def on_add_next_hop(self, op: ops.AddNextHop) -> WirePutResult:
        result = await self._runtime(op).add_next_hop(op.participant_id, op.entry.routing_entry(), op.origin)
        return WirePutResult.of(result)

    async def on_remove_next_hop(self, op: ops.RemoveNextHop) -> str:
        return await self._runtime(op).remove_next_hop(op.participant_id)

    async def on_routes(self, op: ops.Routes) -> list[tuple[str, WireEntry | None]]:
        return [(pid, WireEntry.of(entry)) for pid, entry in await self._runtime(op).routes()]

    async def on_queued(self, op: ops.Queued) -> int:
        return await self._runtime(op).queued(op.participant_id)

    # -- a cluster controller ----------------------------------------------------------------------
    async def on_connected(self, op: ops.Connected) -> bool:
        return await self._cc(op).connected(op.gbid)

    async def on_admit(self, op: ops.Admit) -> str:
        return await self._cc(op).admit(op.client, op.token)

    async def on_cut(self, op: ops.Cut) -> None:
        await self._cc(op).cut(op.gbid)

    async def on_heal(self, op: ops.Heal) -> None:
        await self._cc(op).heal(op.gbid)

    # -- around the ops ----------------------------------------------------------------------------
    async def flush_traces(self) -> None:
        """Before an answer: the runner may read the trace of what it asked for. A batched
        trace with lines pending has its flush queued on the loop (``TraceWriter.emit``), so
        one loop turn writes every one of them, and only those. Asking each of a host's
        traces whether it had lines pending cost a scan of all of them per answer: with 850
        runtimes in a host, 10.6 million checks were a twelfth of a 300-controller fleet's
        start (profiled)."""
        await asyncio.sleep(0)

    def close(self, runtime: JoynrRuntime) -> None:
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
