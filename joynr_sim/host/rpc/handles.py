"""The runner's handles on runtimes that run in host processes.

A ``RemoteRuntime`` (of each kind: ``kinds``) is a ``RuntimeHandle``
(``joynr_sim.runtime.handle``) as the in-process runtimes are, for the scenario steps, the
pytest plugin and the Simulation: each method asks its op (``ops``) of the runtime's host
process. Each start is a new process (an incarnation) that
knows only what the runtime persisted; ``crash`` is SIGKILL of that process, after which the
handle writes ``life.crash`` with the pid it killed into the runtime's trace. A runtime
given a ``HostGroup`` shares its group's process with the others in it (``groups``): a
stop leaves them running, a crash kills them too.

Providers in a host are the built-in interfaces (``participants.INTERFACES``), created
there; an implementation of one's own needs the runtime in the runner's process
(``Simulation(processes=False)``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...clock import SimClock
from ...core.discovery import DiscoveryScope
from ...core.routing import Origin, PutResult, RoutingEntry
from ...runtime.handle import DEFAULT_TTL_MS
from ...runtime.participants import INTERFACES, ProviderSkeleton
from ...trace import TraceWriter
from ...wire.codecs import DEFAULT_WIRE
from ..process.groups import HostGroup
from ..process.host_process import HostProcess
from ..process.pool import HostPool
from . import ops
from .errors import HostGone
from .framing import ProtocolError
from .host_handle import HostHandle
from .remote_views import RemoteProxy, RemoteTable
from .specs import check_options
from .wire import WireEntry

if TYPE_CHECKING:
    from ..join.joined_hosts import JoinedHosts


def host_lost(process: HostHandle, runtimes: Iterable[object]) -> None:
    """A host process that ended without the runner ending it (the kernel killed it, or
    Ray saw it die with its actor): every
    runtime it held is traced ``life.crash`` with its pid, as a crash the runner caused would
    be, and stays down until it is started again (in a new process of its group)."""
    held = [r for r in runtimes if isinstance(r, RemoteRuntime) and r.process is process]
    dead = {id(r): r for r in held}
    for runtime in held:
        if runtime.group is not None:
            dead.update((id(r), r) for r in runtime.group.killed(process))
    for runtime in dead.values():
        if runtime.process is process:
            runtime._died(process.pid)


class RemoteRuntime:
    kind: str

    def __init__(
        self, runtime_id: str, *, run_dir: str | Path, run_id: str, clock: SimClock, policy: str = "precedence",
        max_hops: int = 32, seed: int | None = None, options: Mapping[str, Any] | None = None,
        hosts: HostPool | JoinedHosts | None = None, group: HostGroup | None = None, wire: str = DEFAULT_WIRE,
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
        # The wire is a constructor option of the runtime in the host (not the spec's: a host
        # of the default wire is asked nothing new).
        wired = {} if wire == DEFAULT_WIRE else {"wire": wire}
        self.options = check_options(self.kind, {**(options or {}), **wired})
        self.running = False
        self.process: HostHandle | None = None
        self.incarnation = 0  # how many processes this runtime has had
        self.skew_ms = 0  # how far off its clock reads the run's time (clock_skew)
        self.providers: dict[str, ProviderSkeleton] = {}
        self.table = RemoteTable(self)  # a read view, for callers that do not await

    @property
    def pid(self) -> int | None:
        return self.process.pid if self.process is not None else None

    def _spec(self) -> dict[str, Any]:
        return dict(run_dir=str(self.run_dir), run_id=self.run_id, policy=self.policy, max_hops=self.max_hops,
                    seed=self.seed, incarnation=self.incarnation, options=self.options)

    def _started(self, result: ops.Started) -> None:
        """What the host answered to start."""

    def _placed(self, process: HostHandle) -> None:
        """The process it is about to start in."""

    async def _log_in(self) -> None:
        """Whatever ``_spec`` needs that may have to wait (before it is asked for)."""

    def _running_in(self) -> HostHandle:
        if self.process is None or not self.running:
            raise HostGone(f"runtime {self.runtime_id!r} is not running")
        return self.process

    async def ask(self, op: ops.Op) -> Any:
        """``op`` asked of the runtime's process over the control channel."""
        return await self._running_in().request(op)

    def query(self, op: ops.Op) -> Any:
        """``op`` asked on the blocking query channel: for the read views."""
        return self._running_in().query(op)

    # -- lifecycle -------------------------------------------------------------------
    async def start(self) -> None:
        await self._launch(restart=False)

    @ops.asks(ops.ClockSkew)
    async def clock_skew(self, ms: int) -> None:
        """The runtime reads the run's time ``ms`` off, in this process and every later one."""
        self.skew_ms = ms
        if self.running:
            await self.ask(ops.ClockSkew(runtime=self.runtime_id, ms=ms))

    @ops.asks(ops.Create, ops.Start)
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
                process.advance(self.clock.offset_ms)
            await process.request(ops.Create(runtime=self.runtime_id, kind=self.kind, spec=self._spec()))
            if self.skew_ms:  # the machine's clock: a new process of the runtime reads it as the last did
                await process.request(ops.ClockSkew(runtime=self.runtime_id, ms=self.skew_ms))
            result = await process.request(ops.Start(runtime=self.runtime_id, restart=restart))
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

    @ops.asks(ops.Stop)
    async def stop(self) -> None:
        """Graceful: the runtime unregisters and says goodbye, then its process exits."""
        if not self.running or self.process is None:
            return
        process = self.process
        try:
            await self.ask(ops.Stop(runtime=self.runtime_id))
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
                self.process.advance(offset_ms)

    # -- providers, proxies, calls ---------------------------------------------------------
    @ops.asks(ops.RegisterProvider)
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
        pid = await self.ask(ops.RegisterProvider(
            runtime=self.runtime_id, domain=domain, interface=interface_name, participant_id=participant_id,
            scope=str(getattr(scope, "value", scope)), gbids=list(gbids) if gbids else None, priority=priority))
        skeleton = ProviderSkeleton(pid, domain, interface_name, implementation)
        self.providers[pid] = skeleton
        return skeleton

    @ops.asks(ops.UnregisterProvider)
    async def unregister_provider(self, participant_id: str) -> None:
        await self.ask(ops.UnregisterProvider(runtime=self.runtime_id, participant_id=participant_id))
        self.providers.pop(participant_id, None)

    @ops.asks(ops.InvokeProvider)
    async def invoke_provider(self, participant_id: str, method: str, params: list[Any]) -> Any:
        return await self.ask(ops.InvokeProvider(runtime=self.runtime_id, participant_id=participant_id,
                                                 method=method, params=list(params)))

    @ops.asks(ops.CreateProxy)
    async def create_proxy(
        self, interface_name: str, provider_participant_id: str, is_globally_visible: bool = False
    ) -> RemoteProxy:
        pid, provider = await self.ask(ops.CreateProxy(runtime=self.runtime_id, interface=interface_name,
                                                       provider=provider_participant_id, visible=is_globally_visible))
        return RemoteProxy(self, pid, provider)

    @ops.asks(ops.DiscoverProxy)
    async def discover_proxy(
        self, interface_name: str, domain: str | None = None, *, participant_id: str | None = None,
        scope: DiscoveryScope | str = DiscoveryScope.LOCAL_THEN_GLOBAL, gbids: Sequence[str] | None = None,
        cache_max_age_ms: int = 0,
    ) -> RemoteProxy:
        pid, provider = await self.ask(ops.DiscoverProxy(
            runtime=self.runtime_id, interface=interface_name, domain=domain, participant_id=participant_id,
            scope=str(getattr(scope, "value", scope)), gbids=list(gbids) if gbids else None,
            cache_max_age_ms=cache_max_age_ms))
        return RemoteProxy(self, pid, provider)

    @ops.asks(ops.Request)
    async def request(self, sender: str, recipient: str, method: str, params: list[Any],
                      ttl_ms: int = DEFAULT_TTL_MS, gbid: str | None = None) -> Any:
        return await self.ask(ops.Request(runtime=self.runtime_id, sender=sender, recipient=recipient, method=method,
                                          params=list(params), ttl_ms=ttl_ms, gbid=gbid))

    @ops.asks(ops.OneWay)
    async def one_way(self, sender: str, recipient: str, method: str, params: list[Any],
                      ttl_ms: int = DEFAULT_TTL_MS) -> str:
        return await self.ask(ops.OneWay(runtime=self.runtime_id, sender=sender, recipient=recipient, method=method,
                                         params=list(params), ttl_ms=ttl_ms))

    @ops.asks(ops.Load)
    async def load(self, sender: str, recipient: str, method: str, params: list[Any], *, calls: int,
                   concurrency: int, ttl_ms: int = DEFAULT_TTL_MS) -> dict[str, Any]:
        """``calls`` requests driven inside the host: ok, failed, seconds."""
        return await self.ask(ops.Load(runtime=self.runtime_id, sender=sender, recipient=recipient, method=method,
                                       params=list(params), ttl_ms=ttl_ms, calls=calls, concurrency=concurrency))

    # -- the routing table: a runtime that is down has none ---------------------------------
    @ops.asks(ops.AddNextHop)
    async def add_next_hop(self, participant_id: str, entry: RoutingEntry, origin: str) -> PutResult:
        """The runtime's add_next_hop, in its process: what waited for the route goes there."""
        entry_ = WireEntry.of(entry)
        assert entry_ is not None
        result = await self.ask(ops.AddNextHop(runtime=self.runtime_id, participant_id=participant_id, entry=entry_,
                                               origin=Origin(origin)))
        return result.put_result()

    @ops.asks(ops.RemoveNextHop)
    async def remove_next_hop(self, participant_id: str) -> str:
        return await self.ask(ops.RemoveNextHop(runtime=self.runtime_id, participant_id=participant_id))

    @ops.asks(ops.LookupRoute)
    async def lookup_route(self, participant_id: str, gbid: str | None = None) -> RoutingEntry | None:
        if not self.running:
            return None
        found = await self.ask(ops.LookupRoute(runtime=self.runtime_id, participant_id=participant_id, gbid=gbid))
        return None if found is None else found.routing_entry()

    @ops.asks(ops.Routes)
    async def routes(self) -> list[tuple[str, RoutingEntry]]:
        if not self.running:
            return []
        return [(pid, entry.routing_entry()) for pid, entry in await self.ask(ops.Routes(runtime=self.runtime_id))]

    @ops.asks(ops.Queued)
    async def queued(self, participant_id: str | None = None) -> int:
        if not self.running:
            return 0
        return await self.ask(ops.Queued(runtime=self.runtime_id, participant_id=participant_id))
