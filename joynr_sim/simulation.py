"""A simulation: one run directory, one simulated clock, a broker per GBID and the runtimes.

    async with Simulation(run_dir, gbids=["gbid1", "gbid2"], broker="amqtt") as sim:
        cc1 = await sim.cluster_controller("cc1", ["gbid1"])
        app = await sim.libjoynr("app1", cc1)

Every runtime traces under ``<run_dir>/trace/``, the broker set as runtime ``brokers``. Each
backend gets a GCD instance (``gcd-<gbid>``), one store for all; ``gcd="external"``: none, a
discovery service serves the external brokers' GCD topic (traced as ``life.outside``).
Closing heals every link, stops every runtime, then the brokers. The run directory is its
owner's only: it holds the brokers' password.

With ``faults=True`` (the default) every link can be faulted (``joynr_sim.faults``): each
MQTT connection of a cluster controller or GCD instance, and each libjoynr runtime's
WebSocket; on real brokers through a fault proxy on loopback per link. ``sim.faults``
partitions, blackholes, delays and heals them, traced as runtime ``faults``.

With ``processes=True`` (the default on real brokers) every cluster controller and libjoynr
runtime runs in a host process of its own (``joynr_sim.host``): a crash is SIGKILL of that
process, a restart a new process that knows only what was persisted; the handles given out
(``RemoteClusterController``, ``RemoteLibjoynr``) answer what in-process runtimes do.
``processes=False`` keeps every runtime here, as the memory network does (GCDs always).

A write to the run directory that fails (a trace, an outbox, a link store, a routing-table
store: ``joynr_sim.write_failure``), here or in any host process, is the simulation's
``write_failure``, the first one; ``check_write_failure`` also asks every host process, and
``close`` records what fails while closing rather than raising it. Whoever runs the
simulation ends the run on it (``joynr_sim.scenario.runner``).
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any

from brokers import BrokerSet
from trace_schema.run_location import run_location

from .clock import RuntimeClock, SimClock
from .core.address import Address, WebSocketAddress
from .core.gcd import GCD_TOPIC, OWN_GCD
from .core.ids import new_hex
from .core.links import LinkRegistry
from .core.variants import variant_of
from .faults import TRACE_RUNTIME_ID, Faults, ProxiedBrokers
from .host.join.joined_hosts import JOIN_TIMEOUT_S, JoinedHosts
from .host.placement import host_pool
from .host.process.groups import HostGroup
from .host.process.pool import HostPool
from .host.ray.ray_hosts import RayHosts
from .host.rpc.handles import RemoteRuntime, host_lost
from .host.rpc.kinds import RemoteClusterController, RemoteLibjoynr
from .network import MEMORY, choose_network, memory_processes, virtual_clock
from .network.memory import MemoryBrokers, MemoryNetwork
from .runtime.base import Runtime
from .runtime.cluster_controller import ClusterController
from .runtime.gcd_service import GcdService, gcd_place, gcd_runtime_id, trace_outside_gcds
from .runtime.libjoynr import LibjoynrRuntime
from .runtime.sessions import open_link_registry
from .trace import TraceWriter
from .wire.codecs import DEFAULT_WIRE, codec
from .write_failure import WRITE_ERRNOS, WriteFailure, unwatch, watch


class Simulation:
    def __init__(
        self,
        run_dir: str | Path,
        *,
        gbids: list[str],
        broker: str = "amqtt",
        network: str | None = None,
        broker_autosave: int | None = None,
        policy: str = "precedence",
        run_id: str | None = None,
        clock: SimClock | None = None,
        max_hops: int = 32,
        gcd_store: str | None = None,
        seed: int | None = None,
        gcd_last_seen_timeout_ms: int | None = None,
        faults: bool = True,
        processes: bool = True,
        hosts: int | str | None = None,
        join: str | None = None,
        join_hosts: int = 1,
        join_timeout_s: float = JOIN_TIMEOUT_S,
        ray_address: str | None = None,
        wire: str = DEFAULT_WIRE,
        gcd: str = OWN_GCD,
    ) -> None:
        """hosts: with processes, place the runtimes in this many host processes (a cluster
        controller in the next one in turn, its libjoynr runtimes with it; see
        ``joynr_sim.host.process.groups``), ``"cores"`` for one per core, ``"ray"`` for one per
        CPU of a Ray cluster, placed there (``joynr_sim.host.ray``; ``ray_address``: its head's
        host:port, None: a Ray instance of this process's own on loopback); None, the default:
        one process per runtime.

        join: the run name hosts on other machines joined (``joynr-sim host --join``); start
        waits for ``join_hosts`` of them and the runtimes' processes start there
        (``joynr_sim.host.join``). Needs external brokers and ``faults=False``.

        broker_autosave: Mosquitto's counted changes between saves of its persistence
        (``brokers.mosquitto``); None, the default: 1, every change, so a broker's SIGKILL
        loses nothing it acknowledged. Only with ``broker="mosquitto"``.

        network: ``memory`` (in-memory brokers, WebSockets and links, every runtime in this
        process, on a virtual-time loop: ``joynr_sim.network``), ``amqtt`` or ``mosquitto``;
        None, the default: the real brokers ``broker`` names. wire: the bytes every runtime's
        messages travel in, ``joynr-sim`` (the default) or ``joynr`` (``joynr_sim.wire.codecs``)."""
        network, broker = choose_network(network, broker)
        if network == MEMORY:
            processes = memory_processes(hosts, join)
        self.network_name, self.wire = network or broker, codec(wire).name
        self.run_dir = run_location(run_dir)  # a path or a file: URL; an object store is refused
        self.gcd_last_seen_timeout_ms = gcd_last_seen_timeout_ms
        self.run_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.write_failures = watch(self.run_dir)  # before anything here writes
        self._watching = True
        self.run_id = run_id or new_hex(6)
        self.clock = clock or (virtual_clock() if network == MEMORY else SimClock())
        self.gbids = list(gbids)
        self.policy = policy
        self.max_hops = max_hops
        self.seed = seed
        brokers_trace = TraceWriter(self.run_dir, self.run_id, "brokers", "broker", self.clock)
        self.network: MemoryNetwork | None = None
        if network == MEMORY:
            self.network = MemoryNetwork(list(gbids), seed, trace=brokers_trace)
            self.brokers: BrokerSet | MemoryBrokers = self.network.brokers
        else:
            self.brokers = BrokerSet(self.gbids, broker=broker, run_dir=self.run_dir, trace=brokers_trace,
                                     autosave=broker_autosave)
        if not isinstance(processes, bool):
            raise ValueError(f"processes: expected true or false, got {processes!r}")
        self.processes = processes
        self._hosts, hosts = host_pool(
            hosts, processes=processes, run_dir=self.run_dir, failures=self.write_failures, join=join,
            join_hosts=join_hosts, join_timeout_s=join_timeout_s, faults=faults, brokers=self.brokers,
            gbid=self.gbids[0], ray_address=ray_address)
        if isinstance(self._hosts, (HostPool, RayHosts)):  # a host that died: its runtimes crashed with it
            self._hosts.on_lost = lambda process: host_lost(process, self.runtimes.values())
        self.hosts = hosts
        self._groups = [HostGroup(f"host-{i + 1}", self._hosts) for i in range(hosts or 0)] if self._hosts else []
        self._group_of: dict[str, HostGroup] = {}  # cluster controller runtime id -> its group
        self.runtimes: dict[str, Runtime | RemoteRuntime] = {}
        # A runtime in a host process has its own clock: it follows this one's advances.
        self.clock.on_advance(self._advance_hosts)
        # All GCD instances share one store: SQLite in the run directory unless a URL is given.
        self.gcd_store, self.gcd = gcd_store or str(self.run_dir / "gcd.sqlite"), gcd_place(gcd, self.brokers.kind)
        self.gcds: dict[str, GcdService] = {}
        self._link_registries: dict[str, LinkRegistry] = {}
        if not isinstance(faults, bool):
            raise ValueError(f"faults: expected true or false, got {faults!r}")
        self.faults = Faults(
            lambda: TraceWriter(self.run_dir, self.run_id, TRACE_RUNTIME_ID, "runner", self.clock),
            enabled=faults, seed=seed, make_link=self.network.fault_link if self.network else None,
        )

    async def __aenter__(self) -> Simulation:
        await self.start()
        return self

    async def start(self) -> None:
        """Brokers first, then a GCD instance per backend (an external GCD: none)."""
        if self._hosts is not None:
            self._hosts.fill()
        await self.brokers.start()
        if isinstance(self._hosts, JoinedHosts):
            await self._hosts.connect()
        if self.gcd != OWN_GCD:  # traced, for the checks to know where its calls went
            return trace_outside_gcds(self.brokers.trace, self.gbids)
        for gbid in self.gbids:
            brokers = await self._mqtt_links(gcd_runtime_id(gbid), "gcd", [gbid])
            gcd = GcdService(
                gbid, self.gbids, brokers, store_url=self.gcd_store,
                link_registry=self.link_registry(GCD_TOPIC),
                last_seen_timeout_ms=self.gcd_last_seen_timeout_ms, **self._common(),
            )
            self._adopt(gcd)
            self.gcds[gbid] = gcd
            await gcd.start()

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.close()

    @property
    def write_failure(self) -> WriteFailure | None:
        """The first write to the run directory that failed, as far as it is known here."""
        return self.write_failures.failure

    async def check_write_failure(self) -> WriteFailure | None:
        """The first write that failed, after asking every running host process (each
        answer carries its host's failure, ``host.rpc.framing``): what a runner checks after
        every step. A host that does not answer is not waited for past the query bound."""
        processes = {id(p): p for r in self.runtimes.values() if isinstance(r, RemoteRuntime)
                     for p in (r.process,) if p is not None and p.alive}

        async def ask(process: Any) -> None:
            try:
                await process.ask_write_failure()
            except Exception:  # gone or busy: its runtimes' next answers still carry it
                pass

        await asyncio.gather(*(ask(p) for p in processes.values()))
        return self.write_failures.failure

    def _common(self, own_clock: bool = False) -> dict[str, Any]:
        """own_clock: an in-process runtime's clock of its own over the run's, for a skew."""
        common = dict(
            run_dir=self.run_dir, run_id=self.run_id, clock=RuntimeClock(self.clock) if own_clock else self.clock,
            policy=self.policy, max_hops=self.max_hops, seed=self.seed, wire=self.wire,
        )
        if self.network is not None:  # in-process runtimes only: a host process has its own
            common["network"] = self.network
        return common

    async def clock_skew(self, runtime_id: str, ms: int) -> None:
        """From now on ``runtime_id`` (a cluster controller or libjoynr runtime) reads the run's
        time ``ms`` off, stamping and judging expiry dates by it; traced as fault.clock_skew."""
        runtime = self.runtimes.get(runtime_id) if isinstance(runtime_id, str) else None
        if runtime is None or runtime.kind == "gcd":
            known = sorted(r for r, rt in self.runtimes.items() if rt.kind != "gcd")
            raise ValueError(f"runtime: no cluster controller or libjoynr runtime {runtime_id!r}; known: {known}")
        if isinstance(runtime, RemoteRuntime):
            await runtime.clock_skew(ms)
        else:  # its own RuntimeClock (``_common``)
            runtime.clock.set_skew(ms)  # type: ignore[union-attr]
        self.faults.trace(runtime_id, "clock_skew", None, target_kind=runtime.kind, ms=ms)

    def _advance_hosts(self, now_ms: int) -> None:
        for runtime in list(self.runtimes.values()):
            if isinstance(runtime, RemoteRuntime):
                runtime.advance(self.clock.offset_ms)

    def link_registry(self, cc_id: str, detached_timeout_ms: int | None = None) -> LinkRegistry:
        """The broker sessions of a CC id: one link store, shared by every runtime started
        with that id (as if its persistence file had been copied); each runtime opens its
        own registry over it at every start, as a restarted process would."""
        if cc_id not in self._link_registries:
            self._link_registries[cc_id] = open_link_registry(
                self.run_dir / "state", cc_id, self.clock.now_ms, detached_timeout_ms, variant_of(self.policy, "links")
            )
        return self._link_registries[cc_id]

    def _adopt(self, runtime: Runtime | RemoteRuntime) -> None:
        self._check_new(runtime.runtime_id)
        self.runtimes[runtime.runtime_id] = runtime

    def _check_new(self, runtime_id: str) -> None:
        if runtime_id == TRACE_RUNTIME_ID:
            raise ValueError(f"runtime_id: {runtime_id!r} is reserved for the faults' trace")
        if runtime_id in self.runtimes:
            raise ValueError(f"runtime_id: {runtime_id!r} exists already in this simulation")

    async def _mqtt_links(self, runtime_id: str, kind: str, gbids: list[str]) -> Any:
        """The broker directory a runtime connects through: its own proxy per GBID, else the broker set."""
        self._check_new(runtime_id)
        for gbid in (g for g in gbids if g not in self.gbids):
            raise ValueError(f"gbids: {gbid!r} is not one of this simulation's GBIDs {self.gbids}")
        if len(set(gbids)) != len(gbids):
            raise ValueError(f"gbids: repeated GBID in {gbids!r}")
        if self.faults.enabled and self.network is not None:  # the memory network's links: no proxies
            await self.faults.mqtt_links(runtime_id, kind, gbids, self.brokers.endpoint)
        if not self.faults.enabled or self.network is not None:
            return self.brokers
        proxies = await self.faults.mqtt_links(runtime_id, kind, gbids, self.brokers.endpoint)
        return ProxiedBrokers(self.brokers, proxies)

    async def cluster_controller(
        self,
        cc_id: str,
        gbids: list[str] | None = None,
        *,
        runtime_id: str | None = None,
        provisioned: list[tuple[str, Address, bool]] = (),
        start: bool = True,
        **kwargs: Any,
    ) -> ClusterController | RemoteClusterController:
        gbids = list(gbids or self.gbids)
        brokers = await self._mqtt_links(runtime_id or cc_id, "cluster-controller", gbids)
        try:
            if self.processes:
                # The link store is the CC id's file in the run directory: each process opens it.
                group = self._groups[len(self._group_of) % len(self._groups)] if self._groups else None
                cc: ClusterController | RemoteClusterController = RemoteClusterController(
                    cc_id, gbids, brokers, runtime_id=runtime_id, provisioned=provisioned,
                    options=kwargs, hosts=self._hosts, group=group, **self._common(),
                )
                if group is not None:
                    self._group_of[cc.runtime_id] = group
                elif isinstance(self._hosts, JoinedHosts):
                    self._hosts.place(cc.runtime_id)  # the next joined host in turn
            else:
                cc = ClusterController(
                    cc_id, gbids, brokers, runtime_id=runtime_id, provisioned=provisioned,
                    link_registry=self.link_registry(cc_id, kwargs.pop("detached_timeout_ms", None)),
                    **self._common(own_clock=True), **kwargs,
                )
        except BaseException:
            await self.faults.forget(runtime_id or cc_id)
            raise
        self._adopt(cc)
        if start:
            await cc.start()
        return cc

    async def libjoynr(
        self, runtime_id: str, cc: ClusterController | RemoteClusterController, *, start: bool = True,
        **kwargs: Any,
    ) -> LibjoynrRuntime | RemoteLibjoynr:
        if not cc.running:
            raise ValueError(f"cc: cluster controller {cc.runtime_id!r} must run before its libjoynr runtimes")
        self._check_new(runtime_id)
        cc_address = cc.ws_address
        if self.faults.enabled and self.network is not None:
            await self.faults.websocket_link(runtime_id, lambda: (cc_address.host, cc.ws_port))
        elif self.faults.enabled:
            # Asked at every connection: a cluster controller listens again where it did.
            proxy = await self.faults.websocket_link(runtime_id, lambda: (cc_address.host, cc.ws_port))
            cc_address = WebSocketAddress("WS", proxy.address[0], proxy.address[1], "/")
        try:
            if isinstance(self._hosts, JoinedHosts):
                self._hosts.place(runtime_id, like=cc.runtime_id)  # on its cluster controller's machine
            # A controller in a host is told over its control channel, without blocking this loop.
            token = await cc.admit(runtime_id)
            if self.processes:
                runtime: LibjoynrRuntime | RemoteLibjoynr = RemoteLibjoynr(
                    runtime_id, cc.cc_id, cc_address, token=token, options=kwargs, hosts=self._hosts,
                    group=self._group_of.get(cc.runtime_id), **self._common(),
                )
            else:
                runtime = LibjoynrRuntime(runtime_id, cc.cc_id, cc_address, token=token, **self._common(own_clock=True),
                                          **kwargs)
        except BaseException:
            await self.faults.forget(runtime_id)
            raise
        self._adopt(runtime)
        if start:
            await runtime.start()
        return runtime

    async def close(self) -> None:
        """Stop every runtime, then the brokers, then close the link registries: all of
        them, even when one fails; the first error is raised afterwards (the others are
        added to it as notes). A write the disk refused is not raised: it is recorded as the
        run's ``write_failure``, for the runner to report."""
        # Not an AsyncExitStack: that raises the last error, and the first is what went wrong.
        errors: list[BaseException] = []

        async def attempt(action: Callable[[], Any]) -> None:
            try:
                result = action()
                if inspect.isawaitable(result):
                    await result
            except OSError as exc:
                if exc.errno in WRITE_ERRNOS:
                    self.write_failures.add(WriteFailure.of(exc.filename or self.run_dir, exc))
                else:
                    errors.append(exc)
            except BaseException as exc:  # also on cancellation: nothing may be left running
                errors.append(exc)

        # A run ends on a healed network: its graceful stops are not the scenario's faults.
        await attempt(self.faults.heal_all)
        # libjoynr runtimes first, so they can still unregister through their cluster
        # controller, and the GCD instances last, so cluster controllers can unregister there.
        # Runtimes in host processes of one kind stop side by side: each is its own process.
        async def stop(runtime: Runtime | RemoteRuntime) -> None:
            await attempt(runtime.stop)
            await attempt(runtime.close)

        for kind in ("libjoynr", "cluster-controller", "gcd"):
            group = [r for r in self.runtimes.values() if r.kind == kind]
            remote = [r for r in group if isinstance(r, RemoteRuntime)]
            await asyncio.gather(*(stop(r) for r in remote))
            for runtime in group:
                if not isinstance(runtime, RemoteRuntime):
                    await stop(runtime)
        if self._hosts is not None:
            await attempt(self._hosts.close)
        await attempt(self.faults.close)
        await attempt(self.brokers.stop)
        for registry in self._link_registries.values():
            if registry.store is not None:
                await attempt(registry.store.close)
        if self._watching:
            self._watching = False
            unwatch(self.run_dir)
        if errors:
            # A cancellation (Ctrl-C) is raised before any error that came first: raised as a
            # note of another, the run would end as failed, not as interrupted.
            first = next((e for e in errors if not isinstance(e, Exception)), errors[0])
            for other in (e for e in errors if e is not first):
                first.add_note(f"also while closing the simulation: {type(other).__name__}: {other}")
            raise first
