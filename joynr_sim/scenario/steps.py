"""The steps of a scenario, carried out against a running Simulation.

A step either holds or raises ``StepFailed``, whose message says what did not hold and
whose ``context`` shows the routing entries and the last trace events that matter.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from ..core.address import ChannelAddress, MqttAddress, WebSocketAddress, WebSocketClientAddress, type_name
from ..core.discovery import DiscoveryErrorException
from ..core.errors import ApplicationException, JoynrRuntimeException, JoynrTimeoutException
from ..core.routing import RoutingEntry
from ..runtime.base import FOREVER_MS
from ..runtime.handle import ClusterControllerHandle, ProxyHandle, RuntimeHandle
from ..runtime.participants import INTERFACES
from ..simulation import Simulation
from ..trace import entry_record, read_events, read_run
from . import background
from .failure import StepFailed
from .gcd_steps import GcdSteps
from .model import Scenario, Step, participant_ref, thaw
from .subscription_steps import SubscriptionSteps

DEFAULT_WAIT_MS = 10_000
__all__ = ["DEFAULT_WAIT_MS", "ScenarioRunner", "StepFailed"]


class ScenarioRunner(GcdSteps, SubscriptionSteps):
    """Executes one scenario's steps against a running Simulation."""

    def __init__(self, scenario: Scenario, sim: Simulation) -> None:
        self.scenario = scenario
        self.sim = sim
        self.providers: dict[str, tuple[RuntimeHandle, str]] = {}  # name -> (runtime, participant id)
        self.proxies: dict[str, ProxyHandle] = {}
        self.calls: dict[str, background.Batch] = {}  # background calls by name
        self.subscriptions: dict[str, tuple[ProxyHandle, Any]] = {}  # name -> (proxy, subscription)

    # -- topology --------------------------------------------------------------------
    async def build(self) -> None:
        for spec in self.scenario.runtimes:
            if spec.is_cluster_controller:
                await self.sim.cluster_controller(
                    spec.cc_id or spec.id, list(spec.gbids) or None, runtime_id=spec.id,
                    old_joynr=spec.old_joynr, detached_timeout_ms=spec.detached_timeout_ms,
                    on_client_disconnect=spec.on_client_disconnect,
                    remove_stale_delay_ms=spec.remove_stale_delay_ms,
                    **({"republish_received_multicasts": True} if spec.republish_received_multicasts else {}),
                    **({"persist_routing_table": True} if spec.persist_routing_table else {}),
                )
        for spec in self.scenario.runtimes:
            if not spec.is_cluster_controller:
                await self.sim.libjoynr(spec.id, self._cc(spec.cc), route_back_to_parent=spec.route_back_to_parent)

    def _runtime(self, runtime_id: str) -> RuntimeHandle:
        return self.sim.runtimes[runtime_id]

    def _cc(self, runtime_id: str) -> ClusterControllerHandle:
        runtime = self._runtime(runtime_id)
        assert runtime.kind == "cluster-controller"  # in this process or a host process
        return runtime  # type: ignore[return-value]

    def participant(self, value: str) -> str:
        name = participant_ref(value)
        if name is None:
            return value
        if name in self.providers:
            return self.providers[name][1]
        if name in self.proxies:
            return self.proxies[name].participant_id
        raise StepFailed(f"@{name} is not a provider or proxy created so far")

    def _provider(self, name: str) -> tuple[Any, str]:
        # The loader saw the register step; it may have failed (a run that keeps going).
        if name not in self.providers:
            raise StepFailed(f"provider {name} is not registered: its register step failed")
        return self.providers[name]

    def _proxy(self, name: str) -> Any:
        if name not in self.proxies:
            raise StepFailed(f"proxy {name} was not built: its proxy step failed")
        return self.proxies[name]

    # -- steps -----------------------------------------------------------------------
    async def run_step(self, step: Step) -> None:
        handler: Callable[[Mapping[str, Any]], Any] = getattr(self, f"_step_{step.kind}")
        await handler(step.args)

    async def _expecting_error(self, args: Mapping[str, Any], action) -> Any:
        expected = args.get("expect_error")
        try:
            result = await action()
        except (JoynrRuntimeException, DiscoveryErrorException) as exc:
            name = _error_name(exc)
            if expected is None:
                raise StepFailed(f"failed with {name}: {exc}") from None
            if name != expected:
                raise StepFailed(f"expected error {expected}, got {name}: {exc}") from None
            return None
        if expected is not None:
            raise StepFailed(f"expected error {expected}, but it succeeded")
        return result

    async def _step_register(self, a: Mapping[str, Any]) -> None:
        runtime = self._runtime(a["runtime"])
        implementation = INTERFACES[a["interface"]]()

        async def register():
            return await runtime.register_provider(
                a["domain"], a["interface"], implementation, participant_id=a.get("participant_id"),
                scope=a.get("scope") or "GLOBAL", gbids=_list(a.get("gbids")),
            )

        skeleton = await self._expecting_error(a, register)
        if skeleton is not None:
            self.providers[a["provider"]] = (runtime, skeleton.participant_id)

    async def _step_proxy(self, a: Mapping[str, Any]) -> None:
        runtime = self._runtime(a["runtime"])
        participant = self.participant(a["participant"]) if a.get("participant") else None

        async def build():
            return await runtime.discover_proxy(
                a["interface"], None if participant else a["domain"], participant_id=participant,
                scope=a.get("scope") or "LOCAL_THEN_GLOBAL", gbids=_list(a.get("gbids")),
                cache_max_age_ms=a.get("cache_max_age_ms") or 0,
            )

        proxy = await self._expecting_error(a, build)
        if proxy is not None:
            self.proxies[a["name"]] = proxy

    async def _call_once(self, a: Mapping[str, Any]) -> None:
        proxy = self._proxy(a["proxy"])
        expect = dict(a.get("expect") or {"timeout": False})
        ttl = a.get("ttl_ms") or 10_000
        try:
            result = await proxy.call(a["method"], *(a.get("args") or ()), ttl_ms=ttl)
        except JoynrTimeoutException as exc:
            if expect.get("timeout"):
                return
            raise StepFailed(f"timed out: {exc}", await self._context(proxy.provider_participant_id)) from None
        except JoynrRuntimeException as exc:
            name = _error_name(exc)
            if expect.get("error") == name:
                return
            raise StepFailed(f"failed with {name}: {exc}", await self._context(proxy.provider_participant_id)) from None
        if expect.get("timeout"):
            raise StepFailed(f"expected a timeout, got {result!r}", await self._context(proxy.provider_participant_id))
        if "error" in expect:
            raise StepFailed(f"expected error {expect['error']}, got {result!r}")
        if "result" in expect and thaw(expect["result"]) != result:
            raise StepFailed(f"expected result {thaw(expect['result'])!r}, got {result!r}")

    async def _step_call(self, a: Mapping[str, Any]) -> None:
        await self._call_once(a)

    async def _step_expect_calls(self, a: Mapping[str, Any]) -> None:
        for _ in range(a["count"]):
            await self._call_once(a)

    async def _step_one_way(self, a: Mapping[str, Any]) -> None:
        proxy = self._proxy(a["proxy"])
        await proxy.one_way(a["method"], *(a.get("args") or ()), ttl_ms=a.get("ttl_ms") or 10_000)

    async def _step_crash(self, a): await self._runtime(a["runtime"]).crash()
    async def _step_stop(self, a): await self._runtime(a["runtime"]).stop()
    async def _step_start(self, a): await self._runtime(a["runtime"]).start()
    async def _step_restart(self, a): await self._runtime(a["runtime"]).restart()
    async def _step_crash_broker(self, a): await self.sim.brokers.crash_broker(a["gbid"])
    async def _step_stop_broker(self, a): await self.sim.brokers.stop_broker(a["gbid"])
    async def _step_start_broker(self, a): await self.sim.brokers.start_broker(a["gbid"])
    async def _step_restart_broker(self, a): await self.sim.brokers.restart_broker(a["gbid"])
    async def _step_cut(self, a): await self._cc(a["runtime"]).cut(a["gbid"])
    async def _step_partition(self, a): await self.sim.faults.partition(a["runtime"], a.get("gbid"))
    async def _step_blackhole(self, a): await self.sim.faults.blackhole(a["runtime"], a.get("gbid"))

    async def _step_delay(self, a: Mapping[str, Any]) -> None:
        await self.sim.faults.delay(a["runtime"], a.get("gbid"), a["ms"], a.get("jitter_ms") or 0)

    async def _step_duplicate(self, a: Mapping[str, Any]) -> None:
        await _memory_only(self.sim.faults.duplicate(a["runtime"], a.get("gbid"), percent=a["percent"]))

    async def _step_reorder(self, a: Mapping[str, Any]) -> None:
        await _memory_only(self.sim.faults.reorder(a["runtime"], a.get("gbid"), ms=a["ms"]))

    async def _step_heal(self, a: Mapping[str, Any]) -> None:
        """Ends the link's fault; a cluster controller's broker link without one was cut."""
        if self.sim.faults.enabled and self.sim.faults.active(a["runtime"], a.get("gbid")) is not None:
            await self.sim.faults.heal(a["runtime"], a.get("gbid"))
        elif a.get("gbid") is not None:
            await self._cc(a["runtime"]).heal(a["gbid"])
        else:
            raise StepFailed(f"the link of {a['runtime']} to its cluster controller has no fault to heal")

    async def _step_clock_skew(self, a: Mapping[str, Any]) -> None:
        await self.sim.clock_skew(a["runtime"], a["ms"])

    async def _step_start_calls(self, a: Mapping[str, Any]) -> None:
        self.calls[a["name"]] = await background.start(self._proxy(a["proxy"]), a)

    async def _step_await_calls(self, a: Mapping[str, Any]) -> None:
        batch = self.calls[a["name"]]
        outcomes = await background.finish(batch)
        found = await background.problems(outcomes, a, self.sim.run_dir)
        if found:
            provider = self.proxies[batch.proxy].provider_participant_id
            raise StepFailed(f"calls {a['name']}: " + "; ".join(found), await self._context(provider))

    async def cancel_background(self) -> None:
        """Stop background calls a failed step left running, before the teardown."""
        for batch in self.calls.values():
            await background.cancel(batch)

    async def _step_advance(self, a: Mapping[str, Any]) -> None:
        self.sim.clock.advance(a["ms"])
        await asyncio.sleep(0)  # let the purges the advance scheduled run

    async def _step_add_route(self, a: Mapping[str, Any]) -> None:
        runtime = self._runtime(a["runtime"])
        expiry_ms = FOREVER_MS if a.get("expiry_ms") is None else self.sim.clock.now_ms() + a["expiry_ms"]
        entry = RoutingEntry(_address(a["address"]), bool(a.get("visible", True)), expiry_ms,
                             bool(a.get("sticky", True)))
        await runtime.add_next_hop(self.participant(a["participant"]), entry, "provisioned")

    async def _step_expect_route(self, a: Mapping[str, Any]) -> None:
        problem = await self._route_problem(a)
        if problem:
            raise StepFailed(problem, await self._context(self.participant(a["participant"]), a["runtime"]))

    async def _step_wait(self, a: Mapping[str, Any]) -> None:
        (what, body), = a["until"].items()
        timeout_s = (a.get("timeout_ms") or DEFAULT_WAIT_MS) / 1000
        loop = asyncio.get_running_loop()  # its clock: virtual on a virtual-time loop, as the polling is
        deadline = loop.time() + timeout_s
        while True:
            if what == "route":
                problem = await self._route_problem(body)
            elif what == "gcd":
                problem = await self._gcd_problem(body)
            elif what == "event":
                # Polled: read only the runtime's own file when the condition names one.
                trace_dir = self.sim.run_dir / "trace"
                files = ([trace_dir / f"{body['runtime']}.ndjson"] if body.get("runtime")
                         else sorted(trace_dir.glob("*.ndjson")))
                seen = [e for f in files for e in read_events(f) if e["ev"] == body["ev"]]
                want = body.get("count") or 1
                problem = None if len(seen) >= want else f"{len(seen)} of {want} {body['ev']} events"
            else:  # connected
                problem = None if await self._cc(body["runtime"]).connected(body["gbid"]) else \
                    f"{body['runtime']} is not connected to {body['gbid']}"
            if problem is None:
                return
            if loop.time() > deadline:
                context = await self._context(self.participant(body["participant"])) if "participant" in body else ""
                raise StepFailed(f"not within {timeout_s:g} s: {problem}", context)
            await asyncio.sleep(0.02)

    # -- expectations ----------------------------------------------------------------
    async def _route_problem(self, a: Mapping[str, Any]) -> str | None:
        runtime = self._runtime(a["runtime"])
        pid = self.participant(a["participant"])
        entry = await runtime.lookup_route(pid)
        want = a["type"]
        if want == "absent":
            return None if entry is None else f"{a['runtime']} has a {type_name(entry.address)} route for {pid}"
        if entry is None:
            return f"{a['runtime']} has no route for {pid}, expected {want}"
        problems = []
        if type_name(entry.address) != want:
            problems.append(f"type {type_name(entry.address)}, expected {want}")
        if a.get("gbid") is not None and getattr(entry.address, "broker_uri", None) != a["gbid"]:
            problems.append(f"gbid {getattr(entry.address, 'broker_uri', None)}, expected {a['gbid']}")
        if a.get("topic") is not None and getattr(entry.address, "topic", None) != a["topic"]:
            problems.append(f"topic {getattr(entry.address, 'topic', None)}, expected {a['topic']}")
        if a.get("client_id") is not None and getattr(entry.address, "id", None) != a["client_id"]:
            problems.append(f"client id {getattr(entry.address, 'id', None)}, expected {a['client_id']}")
        if a.get("expires") is not None:
            problems.extend(_expiry_problems(entry.expiry_date_ms, a["expires"], self.sim.clock.now_ms()))
        if a.get("sticky") is not None and entry.is_sticky != a["sticky"]:
            problems.append(f"sticky {entry.is_sticky}, expected {a['sticky']}")
        if a.get("visible") is not None and entry.is_globally_visible != a["visible"]:
            problems.append(f"visible {entry.is_globally_visible}, expected {a['visible']}")
        return f"route for {pid} on {a['runtime']}: " + "; ".join(problems) if problems else None

    async def _context(self, participant_id: str, runtime_id: str | None = None) -> str:
        """The routing entries for the participant everywhere and its last trace events."""
        lines = ["routing entries:"]
        for rid, runtime in self.sim.runtimes.items():
            if runtime.kind == "gcd":  # the backend, always in this process: no RuntimeHandle
                if runtime_id is not None and rid != runtime_id:
                    continue
                entry = runtime.table.lookup(participant_id) if runtime.running else None
            else:
                entry = await runtime.lookup_route(participant_id) if runtime.running else None
            if entry is not None:
                lines.append(f"  {rid}: {json.dumps(entry_record(entry))}")
        relevant = [
            e for e in read_run(self.sim.run_dir)
            if participant_id in (e.get("participant"), e.get("to"), e.get("from"))
        ][-8:]
        lines.append("last trace events:")
        lines.extend(f"  {json.dumps(e, separators=(',', ':'))}" for e in relevant)
        return "\n".join(lines)


def _expiry_problems(expiry_ms: int, want: Any, now_ms: int) -> list[str]:
    """What is wrong with an entry's expiry date against ``expires`` (never, or a window)."""
    if want == "never":
        return [] if expiry_ms >= FOREVER_MS else [f"expires in {expiry_ms - now_ms} ms, expected never"]
    if expiry_ms >= FOREVER_MS:
        shown = "never"
    else:
        shown = f"in {expiry_ms - now_ms} ms (at {expiry_ms})"
    problems = []
    if want.get("at_ms") is not None and expiry_ms != want["at_ms"]:
        problems.append(f"expires {shown}, expected at {want['at_ms']}")
    if want.get("after_ms") is not None and not expiry_ms - now_ms > want["after_ms"]:
        problems.append(f"expires {shown}, expected later than {want['after_ms']} ms from now")
    if want.get("before_ms") is not None and not expiry_ms - now_ms <= want["before_ms"]:
        problems.append(f"expires {shown}, expected within {want['before_ms']} ms from now")
    return problems


def _list(value: Any) -> list | None:
    return list(value) if value else None


def _error_name(exc: BaseException) -> str:
    if isinstance(exc, DiscoveryErrorException):
        return exc.error.value
    if isinstance(exc, ApplicationException):
        return exc.error
    return type(exc).__name__


def _address(spec: Mapping[str, Any]):
    kind = spec["type"]
    if kind == "Mqtt":
        return MqttAddress(spec["gbid"], spec["topic"])
    if kind == "WebSocketClient":
        return WebSocketClientAddress(spec["id"])
    if kind == "WebSocket":
        return WebSocketAddress("WS", spec.get("host", "127.0.0.1"), spec["port"], spec.get("path", "/"))
    if kind == "Channel":
        return ChannelAddress(spec["url"], spec["channel"])
    raise StepFailed(f"address type {kind!r} cannot be provisioned")


async def _memory_only(fault: Awaitable[None]) -> None:
    """A fault the network cannot show (TCP on real brokers) fails its step in the one line
    that says so: the scenario is wrong for the network, not the simulator broken."""
    try:
        await fault
    except ValueError as exc:
        raise StepFailed(str(exc)) from None
