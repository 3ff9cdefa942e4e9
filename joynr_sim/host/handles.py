"""The runner's handles on runtimes that run in host processes.

A ``RemoteClusterController`` or ``RemoteLibjoynr`` answers what a ``ClusterController`` or
``LibjoynrRuntime`` does for the scenario steps, the pytest plugin and the Simulation —
lifecycle, providers, proxies and calls, the routing table, MQTT connection state, cut and
heal — by asking its host process. Each start is a new process (an incarnation) that knows
only what the runtime persisted; ``crash`` is SIGKILL of that process, after which the
handle writes ``life.crash`` with the pid it killed into the runtime's trace. A runtime
given a ``HostGroup`` shares its group's process with the others in it (``groups``): a
stop leaves them running, a crash kills them too.

Providers in a host are the built-in interfaces (``participants.INTERFACES``), created
there; an implementation of one's own needs the runtime in the runner's process
(``Simulation(processes=False)``).
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..clock import SimClock
from ..core.address import Address, WebSocketAddress, WebSocketClientAddress, to_dict
from ..core.discovery import DiscoveryScope
from ..core.routing import PutResult, RoutingEntry
from ..runtime.base import DEFAULT_TTL_MS
from ..runtime.cluster_controller import CcAddresses, ClusterController, routing_provider_participant_id
from ..runtime.libjoynr import LibjoynrRuntime
from ..runtime.mqtt_endpoint import BrokerDirectory
from ..runtime.participants import INTERFACES, ProviderSkeleton
from ..trace import TraceWriter
from .groups import HostGroup
from .host import check_options
from .process import HostGone, HostPool, HostProcess
from .protocol import ProtocolError
from .remote_subscription import CALL_SLACK_S
from .remote_views import RemoteProxy, RemoteTable

START_TIMEOUT_S = 60.0


class RemoteRuntime:
    kind: str

    def __init__(
        self, runtime_id: str, *, run_dir: str | Path, run_id: str, clock: SimClock, policy: str = "precedence",
        max_hops: int = 32, seed: int | None = None, options: Mapping[str, Any] | None = None,
        hosts: HostPool | None = None, group: HostGroup | None = None,
    ) -> None:
        if not isinstance(policy, str):
            raise TypeError(
                f"policy: {runtime_id} runs in its own process, which is given a policy by name; for the policy "
                f"object {type(policy).__name__}, use Simulation(processes=False)"
            )
        self.runtime_id = runtime_id
        self.hosts = hosts
        self.group = group
        self.run_dir = Path(run_dir)
        self.run_id = run_id
        self.clock = clock
        self.policy = policy
        self.max_hops = max_hops
        self.seed = seed
        self.options = check_options(self.kind, dict(options or {}))
        self.running = False
        self.process: HostProcess | None = None
        self.incarnation = 0  # how many processes this runtime has had
        self.providers: dict[str, ProviderSkeleton] = {}
        self.table = RemoteTable(self)

    def add_next_hop(self, participant_id: str, entry: RoutingEntry, origin: str) -> PutResult:
        """The runtime's add_next_hop, in its process: what waited for the route goes there."""
        return self.table.put(participant_id, entry, origin)

    def remove_next_hop(self, participant_id: str) -> str:
        return self.table.remove(participant_id)

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    def _spec(self) -> dict[str, Any]:
        return dict(run_dir=str(self.run_dir), run_id=self.run_id, policy=self.policy, max_hops=self.max_hops,
                    seed=self.seed, incarnation=self.incarnation, options=self.options)

    def _started(self, result: Mapping[str, Any]) -> None:
        """What the host answered to start."""

    def _placed(self, process: HostProcess) -> None:
        """The process it is about to start in."""

    async def _log_in(self) -> None:
        """Whatever ``_spec`` needs that may have to wait (before it is asked for)."""

    def query(self, op: str, **args: Any) -> Any:
        if self.process is None or not self.running:
            raise HostGone(f"runtime {self.runtime_id!r} is not running")
        return self.process.query(op, args)

    async def _ask(self, op: str, timeout: float = START_TIMEOUT_S, **args: Any) -> Any:
        if self.process is None or not self.running:
            raise HostGone(f"runtime {self.runtime_id!r} is not running")
        return await self.process.request(op, {"runtime": self.runtime_id, **args}, timeout)

    # -- lifecycle -------------------------------------------------------------------
    async def start(self) -> None:
        await self._launch(restart=False)

    async def _launch(self, restart: bool) -> None:
        if self.running:
            raise RuntimeError(f"runtime {self.runtime_id!r} is already running")
        if self.group is not None:
            process = await self.group.process_for(self)
        elif self.hosts is not None:
            process = await self.hosts.take(self.runtime_id)
        else:
            process = HostProcess(self.runtime_id, self.run_dir / "log")
            await process.spawn()
        self._placed(process)
        try:
            await self._log_in()
            if self.group is not None:
                self.group.advance(process, self.clock.offset_ms)
            else:
                process.query("advance", {"offset_ms": self.clock.offset_ms})
            await process.request("create", {"runtime": self.runtime_id, "kind": self.kind, "spec": self._spec()})
            result = await process.request("start", {"runtime": self.runtime_id, "restart": restart},
                                           START_TIMEOUT_S)
        except BaseException:
            if self.group is not None and self.group.shared(self):
                with contextlib.suppress(ProtocolError):  # not created: nothing to close
                    await self.group.release(self, process)  # the others in the host go on
            else:
                if self.group is not None:
                    self.group.killed(process)
                await process.kill()
            raise
        self.process = process
        self.incarnation += 1
        self._started(result)
        self.running = True

    async def stop(self) -> None:
        """Graceful: the runtime unregisters and says goodbye, then its process exits."""
        if not self.running or self.process is None:
            return
        process = self.process
        try:
            await self._ask("stop")
        finally:
            self.running = False
            self.process = None
            self.providers.clear()
            if self.group is not None:
                await self.group.release(self, process)
            else:
                await process.close()

    async def crash(self) -> None:
        """SIGKILL of the runtime's process: nothing it had not persisted survives."""
        if not self.running or self.process is None:
            return
        process = self.process
        self.running = False
        self.process = None
        pid = await process.kill()
        dead = self.group.killed(process) if self.group is not None else []
        for runtime in [self, *(r for r in dead if r is not self and r.process is process)]:
            runtime._died(pid)

    def _died(self, pid: int | None) -> None:
        """Its process was SIGKILLed: written into its trace, as the process cannot."""
        self.running = False
        self.process = None
        self.providers.clear()
        trace = TraceWriter(self.run_dir, self.run_id, self.runtime_id, self.kind, self.clock)
        try:
            trace.emit("life.crash", target=self.runtime_id, target_kind=self.kind, pid=pid)
        finally:
            trace.close()

    async def restart(self) -> None:
        """Same ids, a new process."""
        if self.running:
            await self.crash()
        await self._launch(restart=True)

    async def close(self) -> None:
        """Nothing may outlive the simulation: a process still there is killed."""
        if self.process is not None:
            process, self.process = self.process, None
            self.running = False
            if self.group is not None and self.group.shared(self):
                await self.group.release(self, process)  # the others in the host go on
            else:
                if self.group is not None:
                    self.group.killed(process)
                await process.kill()

    def advance(self, offset_ms: int) -> None:
        if self.running and self.process is not None:
            if self.group is not None:
                self.group.advance(self.process, offset_ms)
            else:
                self.process.query("advance", {"offset_ms": offset_ms})

    # -- providers, proxies, calls ---------------------------------------------------------
    async def register_provider(
        self, domain: str, interface_name: str, implementation: Any, participant_id: str | None = None,
        scope: str = "GLOBAL", gbids: Sequence[str] | None = None, priority: int = 0,
    ) -> ProviderSkeleton:
        builtin = INTERFACES.get(interface_name)
        if builtin is None or type(implementation) is not builtin:
            raise TypeError(
                f"implementation: {self.runtime_id} runs in its own process, where only the built-in providers "
                f"({', '.join(sorted(INTERFACES))}) can be created; for {type(implementation).__name__} of "
                f"{interface_name!r}, use Simulation(processes=False)"
            )
        pid = await self._ask("register_provider", domain=domain, interface=interface_name,
                              participant_id=participant_id, scope=str(getattr(scope, "value", scope)),
                              gbids=list(gbids) if gbids else None, priority=priority)
        skeleton = ProviderSkeleton(pid, domain, interface_name, implementation)
        self.providers[pid] = skeleton
        return skeleton

    async def unregister_provider(self, participant_id: str) -> None:
        await self._ask("unregister_provider", participant_id=participant_id)
        self.providers.pop(participant_id, None)

    async def invoke_provider(self, participant_id: str, method: str, params: list[Any]) -> Any:
        return await self._ask("invoke_provider", participant_id=participant_id, method=method, params=list(params))

    async def create_proxy(
        self, interface_name: str, provider_participant_id: str, is_globally_visible: bool = False
    ) -> RemoteProxy:
        pid, provider = await self._ask("create_proxy", interface=interface_name, provider=provider_participant_id,
                                        visible=is_globally_visible)
        return RemoteProxy(self, pid, provider)

    async def discover_proxy(
        self, interface_name: str, domain: str | None = None, *, participant_id: str | None = None,
        scope: DiscoveryScope | str = DiscoveryScope.LOCAL_THEN_GLOBAL, gbids: Sequence[str] | None = None,
        cache_max_age_ms: int = 0,
    ) -> RemoteProxy:
        pid, provider = await self._ask(
            "discover_proxy", interface=interface_name, domain=domain, participant_id=participant_id,
            scope=str(getattr(scope, "value", scope)), gbids=list(gbids) if gbids else None,
            cache_max_age_ms=cache_max_age_ms,
        )
        return RemoteProxy(self, pid, provider)

    async def request(self, sender: str, recipient: str, method: str, params: list[Any],
                      ttl_ms: int = DEFAULT_TTL_MS, gbid: str | None = None) -> Any:
        return await self._ask("call", ttl_ms / 1000 + CALL_SLACK_S, sender=sender, recipient=recipient,
                               method=method, params=list(params), ttl_ms=ttl_ms, gbid=gbid)

    async def load(self, sender: str, recipient: str, method: str, params: list[Any], *, calls: int,
                   concurrency: int, ttl_ms: int = DEFAULT_TTL_MS) -> dict[str, Any]:
        """``calls`` requests driven inside the host (``runtime.load``): ok, failed, seconds."""
        rounds = -(-calls // max(concurrency, 1))
        return await self._ask("load", rounds * ttl_ms / 1000 + CALL_SLACK_S, sender=sender, recipient=recipient,
                               method=method, params=list(params), ttl_ms=ttl_ms, calls=calls,
                               concurrency=concurrency)

    def one_way(self, sender: str, recipient: str, method: str, params: list[Any],
                ttl_ms: int = DEFAULT_TTL_MS) -> str:
        return self.query("one_way", runtime=self.runtime_id, sender=sender, recipient=recipient, method=method,
                          params=list(params), ttl_ms=ttl_ms)

    def queued(self, participant_id: str | None = None) -> int:
        return self.query("queued", runtime=self.runtime_id, participant_id=participant_id)


class _Connected:
    def __init__(self, cc: RemoteClusterController, gbid: str) -> None:
        self._cc, self._gbid = cc, gbid

    def is_set(self) -> bool:
        return self._cc.running and self._cc.query("connected", runtime=self._cc.runtime_id, gbid=self._gbid)


class RemoteConnection:
    """A cluster controller's MQTT connection, as a step looks at it."""

    def __init__(self, cc: RemoteClusterController, gbid: str) -> None:
        self.gbid = gbid
        self.connected = _Connected(cc, gbid)


class RemoteClusterController(CcAddresses, RemoteRuntime):
    kind = ClusterController.kind

    def __init__(
        self, cc_id: str, gbids: Sequence[str], brokers: BrokerDirectory, *, runtime_id: str | None = None,
        provisioned: Sequence[tuple[str, Address, bool]] = (), **kwargs: Any,
    ) -> None:
        self.cc_id = cc_id
        self.gbids = tuple(gbids)
        if not self.gbids:
            raise ValueError(f"gbids: a cluster controller needs at least one GBID ({cc_id!r})")
        self.topic = self.client_id = cc_id
        self.routing_provider_id = routing_provider_participant_id(cc_id)
        self.brokers = brokers
        self.provisioned = [(pid, to_dict(address), bool(visible)) for pid, address, visible in provisioned]
        self.ws_port = 0
        self._ws_tokens: dict[str, str] = {}
        super().__init__(runtime_id or cc_id, **kwargs)

    async def admit(self, runtime_id: str) -> str:
        """Provision a libjoynr runtime: its token, kept here so every process is given it,
        and handed to the running controller over the control channel. (A blocking query
        held the runner's event loop until the host answered: with busy hosts, a fleet's
        libjoynr runtimes started one at a time.)"""
        if runtime_id not in self._ws_tokens:
            self._ws_tokens[runtime_id] = secrets.token_hex(16)
            if self.running:
                await self._ask("admit", client=runtime_id, token=self._ws_tokens[runtime_id])
        return self._ws_tokens[runtime_id]

    @property
    def mqtt(self) -> dict[str, RemoteConnection]:
        return {gbid: RemoteConnection(self, gbid) for gbid in self.gbids}

    async def _log_in(self) -> None:
        # A client id new to Mosquitto waits until the brokers have reloaded their logins,
        # a reload that costs more the more clients are connected: in a thread, the runner
        # goes on meanwhile, and the logins of cluster controllers starting together share
        # one reload. _spec then finds them loaded.
        await asyncio.to_thread(lambda: [self.brokers.credentials(self.client_id, g) for g in self.gbids])

    def _spec(self) -> dict[str, Any]:
        brokers = {}
        for gbid in self.gbids:  # resolved at every start: a fault proxy or broker may have moved
            host, port = self.brokers.endpoint(gbid)
            username, password = self.brokers.credentials(self.client_id, gbid) or (None, None)
            brokers[gbid] = {"host": host, "port": port, "username": username, "password": password}
        return {**super()._spec(), "cc_id": self.cc_id, "gbids": list(self.gbids), "brokers": brokers,
                "provisioned": [list(p) for p in self.provisioned], "ws_host": self.ws_host, "ws_port": self.ws_port,
                "tokens": dict(self._ws_tokens)}

    def _placed(self, process: HostProcess) -> None:
        self.ws_host = process.address  # a host joined from another machine listens on its own

    def _started(self, result: Mapping[str, Any]) -> None:
        port = result.get("ws_port") if isinstance(result, dict) else None
        if type(port) is int and 0 <= port < 65536:
            self.ws_port = port

    async def cut(self, gbid: str) -> None:
        await self._ask("cut", gbid=gbid)

    async def heal(self, gbid: str) -> None:
        await self._ask("heal", gbid=gbid)


class RemoteLibjoynr(RemoteRuntime):
    kind = LibjoynrRuntime.kind

    def __init__(self, runtime_id: str, cc_id: str, cc_address: WebSocketAddress, *, token: str | None = None,
                 **kwargs: Any) -> None:
        self.cc_id = cc_id
        self.cc_address = cc_address
        self.token = token
        super().__init__(runtime_id, **kwargs)

    @property
    def client_address(self) -> WebSocketClientAddress:
        return WebSocketClientAddress(self.runtime_id)

    def _spec(self) -> dict[str, Any]:
        return {**super()._spec(), "cc_id": self.cc_id, "cc_address": to_dict(self.cc_address), "token": self.token}
