"""The Global Capabilities Directory service: one instance per GBID, each a joynr provider on
that backend's broker, all on one shared store.

An instance is a runtime (kind ``gcd``) composed of a GCD node (``core.node.GcdNode``: a
cluster controller's router, which learns reply-to routes from the requests it serves),
an MQTT endpoint (one connection, a broker session like a cluster controller's) and the
GCD provider in process over its store (``GcdStorePort``), under joynr's default
participant id and topic. Store calls run on one worker thread of the instance, so a slow store never
blocks the event loop and SQLite keeps its connection on one thread.

Wire methods are the logic's method names: ``add``, ``add_old``, ``lookup_domains``,
``lookup_domains_old``, ``lookup_participant``, ``lookup_participant_old``, ``remove``,
``remove_old``, ``remove_stale``, ``touch``; entries travel in their wire form. A modeled
error becomes an ApplicationException reply carrying the DiscoveryError's name; a malformed
entry or argument a ProviderRuntimeException naming the field.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from ..core.address import InProcessAddress
from ..core.discovery import (
    DiscoveryErrorException,
    GlobalDiscoveryEntry,
    InvalidDiscoveryArgument,
    InvalidDiscoveryEntry,
)
from ..core.errors import ApplicationException, ProviderRuntimeException
from ..core.gcd import (
    EXTERNAL_GCD,
    GCD_INTERFACE,
    GCD_PARTICIPANT_ID,
    GCD_PLACES,
    GCD_TOPIC,
    GlobalCapabilitiesDirectory,
)
from ..core.links import LinkRegistry
from ..core.node import GcdNode
from ..core.routing import RoutingEntry
from ..core.variants import variant_of
from ..store.gcd_store import open_gcd_store
from ..trace import TraceWriter
from .base import FOREVER_MS, Runtime, offer_route
from .mqtt_endpoint import BrokerDirectory, MqttEndpoint
from .participants import ProviderSkeleton
from .ports import NoDirectory, Port


def gcd_place(gcd: str, broker_kind: str) -> str:
    """A run's choice of GCD (``core.gcd.GCD_PLACES``), checked: an external one only on
    external brokers, where a discovery service can be serving; a ValueError otherwise."""
    if gcd not in GCD_PLACES:
        raise ValueError(f"gcd: expected one of {', '.join(GCD_PLACES)}, got {str(gcd)[:40]!r}")
    if gcd == EXTERNAL_GCD and broker_kind != "external":
        raise ValueError("gcd: 'external' needs external brokers (gbid=mqtt://...), where a discovery service runs")
    return gcd


def trace_outside_gcds(trace: TraceWriter, gbids: Iterable[str]) -> None:
    """An external GCD per backend, traced as the party outside the run serving the GCD's
    topic there (``life.outside``): the checks' receiver of what the run sends it."""
    for gbid in gbids:
        trace.emit("life.outside", target=gcd_runtime_id(gbid), target_kind="gcd", gbids=[gbid],
                   own_topics=[GCD_TOPIC])


def gcd_runtime_id(gbid: str) -> str:
    return f"gcd-{gbid}"


class GcdProvider:
    """The provider's methods: run the logic on the worker thread, trace, map errors."""

    interface_name = GCD_INTERFACE

    def __init__(self, service: GcdService) -> None:
        self._service = service

    async def add(self, entry: dict, gbids: list) -> None:
        cc = _cc_of(entry)
        await self._call("gcd.add", "add", dict(participant=_pid_of(entry), gbids=gbids, cc=cc),
                         lambda g: g.add(entry, gbids))

    async def add_old(self, entries: list) -> None:
        own = [self._service.gbid]
        for entry in entries if isinstance(entries, list) else [entries]:
            await self._call("gcd.add", "add_old",
                             dict(participant=_pid_of(entry), gbids=own, cc=_cc_of(entry)),
                             lambda g, e=entry: g.add_old([e]))

    async def lookup_domains(self, domains: list, interfaceName: str, gbids: list) -> list:
        return await self._lookup("lookup_domains", gbids, dict(domains=domains, interface=interfaceName),
                                  lambda g: g.lookup_domains(domains, interfaceName, gbids))

    async def lookup_domains_old(self, domains: list, interfaceName: str) -> list:
        return await self._lookup("lookup_domains_old", [self._service.gbid],
                                  dict(domains=domains, interface=interfaceName),
                                  lambda g: g.lookup_domains_old(domains, interfaceName))

    async def lookup_participant(self, participantId: str, gbids: list) -> dict:
        found = await self._lookup("lookup_participant", gbids, dict(participant=participantId),
                                   lambda g: [g.lookup_participant(participantId, gbids)])
        return found[0]

    async def lookup_participant_old(self, participantId: str) -> dict:
        found = await self._lookup("lookup_participant_old", [self._service.gbid],
                                   dict(participant=participantId),
                                   lambda g: [g.lookup_participant_old(participantId)])
        return found[0]

    async def remove(self, participantId: str, gbids: list) -> None:
        await self._call("gcd.remove", "remove", dict(participant=participantId, gbids=gbids),
                         lambda g: g.remove(participantId, gbids), removed=True)

    async def remove_old(self, participantIds: list) -> None:
        await self._call("gcd.remove", "remove_old",
                         dict(participant=participantIds, gbids=[self._service.gbid]),
                         lambda g: g.remove_old(participantIds), removed=True)

    async def remove_stale(self, clusterControllerId: str, maxLastSeenDateMs: int) -> None:
        await self._call("gcd.remove_stale", "remove_stale",
                         dict(cc=clusterControllerId, max_last_seen=maxLastSeenDateMs),
                         lambda g: g.remove_stale(clusterControllerId, maxLastSeenDateMs),
                         removed=True)

    async def touch(self, clusterControllerId: str, participantIds: list | None = None) -> None:
        await self._call("gcd.touch", "touch", dict(cc=clusterControllerId, participants=participantIds),
                         lambda g: g.touch(clusterControllerId, participantIds))

    # -- plumbing --------------------------------------------------------------------
    async def _lookup(self, op: str, gbids: list, fields: dict, fn: Callable) -> list:
        entries: list[GlobalDiscoveryEntry] = await self._call(
            "gcd.lookup", op, dict(gbids=gbids, **fields), fn, lookup=True
        )
        return [e.to_wire() for e in entries]

    async def _call(self, ev: str, op: str, fields: dict, fn: Callable, *, removed: bool = False,
                    lookup: bool = False) -> Any:
        service = self._service
        try:
            result = await service.run(fn)
        except DiscoveryErrorException as exc:
            service.trace.emit(ev, op=op, **fields, error=exc.error.value)
            raise ApplicationException(exc.error.value, str(exc)) from None
        except (InvalidDiscoveryEntry, InvalidDiscoveryArgument, ProviderRuntimeException) as exc:
            service.trace.emit(ev, op=op, **fields, error=type(exc).__name__, detail=str(exc))
            raise ProviderRuntimeException(str(exc)) from None
        extra: dict[str, Any] = {}
        if removed:
            extra["removed"] = [list(key) for key in result]
        if lookup:
            extra["result"] = [
                {"participant": e.participant_id, "gbid": getattr(e.address, "broker_uri", None)}
                for e in result
            ]
        service.trace.emit(ev, op=op, **fields, **extra, error=None)
        return result


def _pid_of(entry: Any) -> Any:
    return entry.get("participantId") if isinstance(entry, dict) else None


def _cc_of(entry: Any) -> str | None:
    """The cluster-controller id is the topic of the entry's MqttAddress, if it parses."""
    try:
        return getattr(GlobalDiscoveryEntry.from_wire(entry).address, "topic", None)
    except (InvalidDiscoveryEntry, ValueError):
        return None


class GcdService(Runtime):
    kind = "gcd"

    def __init__(
        self,
        gbid: str,
        known_gbids: list[str],
        brokers: BrokerDirectory,
        *,
        store_url: str,
        link_registry: LinkRegistry,
        last_seen_timeout_ms: int | None = None,
        sweep_interval_ms: int = 60_000,
        **kwargs: Any,
    ) -> None:
        self.gbid = gbid
        self.topic = GCD_TOPIC
        super().__init__(gcd_runtime_id(gbid), directory=NoDirectory(f"GCD {gbid}"),
                         node=lambda options: GcdNode(gbid, self.clock.now_ms, **options), **kwargs)
        # Entries not touched for this long are removed (None: only expired ones go).
        self.store = GcdStorePort(self, list(known_gbids), store_url, last_seen_timeout_ms, sweep_interval_ms)
        self.endpoint = MqttEndpoint(
            self, client_id=GCD_TOPIC, topic=GCD_TOPIC, gbids=[gbid], brokers=brokers,
            link_registry=link_registry,
            outbox_path=self.run_dir / "state" / f"{self.runtime_id}.outbox.sqlite",
        )
        self.ports = [self.store, self.endpoint]
        self.life_fields = {"cc_id": GCD_TOPIC, "gbids": [gbid], "own_topics": [GCD_TOPIC], "ws_port": 0}

    async def run(self, fn: Callable[[GlobalCapabilitiesDirectory], Any]) -> Any:
        """Run a GCD call on the worker thread that owns the store connection."""
        return await self.store.run(fn)


class GcdStorePort(Port):
    """The GCD's store, on one worker thread of the instance, and the provider over it; its
    periodic purge of expired entries and, with a last-seen timeout, the sweep of entries
    whose cluster controller stopped touching them (lookups skip those at once, the sweep
    deletes them at its next round). The run's GCD variant, if any, is the logic's."""

    def __init__(self, service: GcdService, known_gbids: list[str], store_url: str,
                 last_seen_timeout_ms: int | None, sweep_interval_ms: int) -> None:
        self.service = service
        self.known_gbids = known_gbids
        self.store_url = store_url
        self.last_seen_timeout_ms = last_seen_timeout_ms
        self.sweep_interval_ms = sweep_interval_ms
        self._last_sweep_ms = 0
        self._executor: ThreadPoolExecutor | None = None
        self._gcd: GlobalCapabilitiesDirectory | None = None
        self._store: Any = None  # the SQL store the logic runs on; closed on its worker thread

    async def run(self, fn: Callable[[GlobalCapabilitiesDirectory], Any]) -> Any:
        if self._executor is None:
            raise ProviderRuntimeException(f"GCD {self.service.gbid} is not running")
        return await asyncio.get_running_loop().run_in_executor(self._executor, lambda: fn(self._gcd))

    def _open(self) -> None:
        # One table per run: a shared PostgreSQL database holds many runs side by side.
        prefix = "gcd_" + hashlib.sha1(self.service.run_id.encode()).hexdigest()[:16]
        self._store = open_gcd_store(self.store_url, table_prefix=prefix)
        self._gcd = GlobalCapabilitiesDirectory(
            store=self._store, own_gbid=self.service.gbid, known_gbids=self.known_gbids,
            clock=self.service.clock.now_ms, last_seen_timeout_ms=self.last_seen_timeout_ms,
            variant=variant_of(self.service.policy, "gcd"),
        )

    async def start(self) -> None:
        service = self.service
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix=service.runtime_id)
        await asyncio.get_running_loop().run_in_executor(self._executor, self._open)
        skeleton = ProviderSkeleton(GCD_PARTICIPANT_ID, "io.joynr", GCD_INTERFACE, GcdProvider(service))
        offer_route(service, GCD_PARTICIPANT_ID, RoutingEntry(InProcessAddress(skeleton), True, FOREVER_MS, True),
                    "provisioned")

    def _close_store(self) -> None:
        executor, self._executor = self._executor, None
        if executor is not None:
            store = self._store
            executor.submit(lambda: store.close() if store is not None else None)
            executor.shutdown(wait=True)

    async def stop(self) -> None:
        await asyncio.to_thread(self._close_store)

    async def abort(self) -> None:
        await asyncio.to_thread(self._close_store)

    def tick(self, now_ms: int) -> None:
        if self._executor is not None:
            self.service.spawn(self.run(lambda g: g.purge_expired()))
            if self.last_seen_timeout_ms is not None and now_ms - self._last_sweep_ms >= self.sweep_interval_ms:
                self._last_sweep_ms = now_ms
                self.service.spawn(self._sweep_not_seen())

    async def _sweep_not_seen(self) -> None:
        """Entries whose cluster controller stopped touching them go (seed 001); the sweep is
        traced like a removeStale without a cluster controller, so checks see the removal."""
        assert self.last_seen_timeout_ms is not None
        bound = self.service.clock.now_ms() - self.last_seen_timeout_ms
        removed = await self.run(lambda g: g.purge_not_seen_since(bound))
        if removed:
            self.service.emit("gcd.remove_stale", op="sweep", cc=None, max_last_seen=bound,
                              removed=[list(key) for key in removed], error=None)
