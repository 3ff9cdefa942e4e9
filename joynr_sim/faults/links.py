"""The faults of a simulation's links: ``sim.faults``.

A link is named by ``(runtime_id, gbid)``: a cluster controller's (or a GCD instance's)
MQTT connection to the broker of that GBID, or, with ``gbid`` None, a libjoynr runtime's
WebSocket connection to its cluster controller. Each has its own ``FaultProxy``, made when
the runtime is made, so a restarted runtime reconnects through the same one.

Every fault and heal is traced by runtime ``faults`` (kind ``runner``) as ``fault.<name>``,
with the link (``target``, ``target_kind``, ``gbid``), the delay or chance where there is
one, and how many connections were open through the link when it took effect.

``duplicate`` and ``reorder`` are the memory network's alone: bytes through a TCP proxy on
loopback arrive once and in order whatever the proxy does, so a ``FaultProxy`` refuses them.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from ..trace import TraceWriter
from .pipe import BLACKHOLE, DELAY, PARTITION
from .proxy import FaultProxy

TRACE_RUNTIME_ID = "faults"
MAX_DELAY_MS = 600_000  # ten minutes: longer than any TTL a scenario sets
# The memory network's own faults (joynr_sim.network.links names them the same).
DUPLICATE, REORDER = "duplicate", "reorder"


# (name, runtime id, GBID or None, upstream) -> a started link with FaultProxy's fault methods
MakeLink = Callable[[str, str, "str | None", Callable[[], tuple[str, int]]], Awaitable[FaultProxy]]


class Credentials(Protocol):
    def credentials(self, client_id: str, gbid: str | None = None) -> tuple[str, str]: ...


class ProxiedBrokers:
    """The broker directory a runtime is given: each GBID's endpoint is its own link's
    proxy; credentials are the broker set's."""

    def __init__(self, brokers: Credentials, proxies: Mapping[str, FaultProxy]) -> None:
        self._brokers = brokers
        self._proxies = dict(proxies)

    def endpoint(self, gbid: str) -> tuple[str, int]:
        try:
            return self._proxies[gbid].address
        except (KeyError, TypeError):
            raise ValueError(f"gbid: {gbid!r} is not one of this runtime's GBIDs {list(self._proxies)}") from None

    def credentials(self, client_id: str, gbid: str | None = None) -> tuple[str, str]:
        return self._brokers.credentials(client_id, gbid)


@dataclass(frozen=True)
class _Runtime:
    kind: str
    gbids: tuple[str, ...]  # empty for a libjoynr runtime: its one link has no GBID


class Faults:
    def __init__(self, open_trace: Callable[[], TraceWriter], *, enabled: bool = True, seed: int | None = None,
                 make_link: MakeLink | None = None) -> None:
        """make_link: what stands for a fault proxy (the memory network's links); None:
        a started ``FaultProxy`` on loopback."""
        self.enabled = enabled
        self._make_link = make_link
        self._open_trace = open_trace
        self._trace_writer: TraceWriter | None = None  # opened by the first fault: no empty file
        self._seed = seed
        self._runtimes: dict[str, _Runtime] = {}
        self._proxies: dict[tuple[str, str | None], FaultProxy] = {}

    # -- making links (the simulation calls these as it makes runtimes) ---------------------
    async def mqtt_links(
        self, runtime_id: str, kind: str, gbids: Iterable[str], upstream: Callable[[str], tuple[str, int]]
    ) -> dict[str, FaultProxy]:
        """One started proxy per GBID, in front of ``upstream(gbid)``."""
        gbids = tuple(gbids)
        made = {}
        try:
            for gbid in gbids:
                made[gbid] = await self._start(runtime_id, gbid, lambda gbid=gbid: upstream(gbid))
        except BaseException:
            for proxy in made.values():
                await proxy.close()
            raise
        self._runtimes[runtime_id] = _Runtime(kind, gbids)
        self._proxies.update({(runtime_id, gbid): proxy for gbid, proxy in made.items()})
        return made

    async def websocket_link(self, runtime_id: str, upstream: Callable[[], tuple[str, int]]) -> FaultProxy:
        proxy = await self._start(runtime_id, None, upstream)
        self._runtimes[runtime_id] = _Runtime("libjoynr", ())
        self._proxies[(runtime_id, None)] = proxy
        return proxy

    async def forget(self, runtime_id: str) -> None:
        """Close the links of a runtime that could not be made."""
        self._runtimes.pop(runtime_id, None)
        for key in [key for key in self._proxies if key[0] == runtime_id]:
            await self._proxies.pop(key).close()

    async def _start(self, runtime_id: str, gbid: str | None, upstream: Callable[[], tuple[str, int]]) -> FaultProxy:
        if runtime_id in self._runtimes:
            raise ValueError(f"runtime_id: {runtime_id!r} has its links already")
        if self._make_link is not None:
            return await self._make_link(f"{runtime_id}/{gbid or 'ws'}", runtime_id, gbid, upstream)
        # One seed per link, derived from the run's, so each link's jitter repeats.
        seed = None if self._seed is None else f"{self._seed}/{runtime_id}/{gbid}"
        proxy = FaultProxy(f"{runtime_id}/{gbid or 'ws'}", upstream, seed=seed)
        await proxy.start()
        return proxy

    # -- the faults ----------------------------------------------------------------------
    async def partition(self, runtime_id: str, gbid: str | None = None) -> None:
        """Reset every connection of the link; refuse new ones until ``heal``."""
        proxy = self._link(runtime_id, gbid)
        found = await proxy.partition()
        self._trace(runtime_id, PARTITION, gbid, connections=found)

    async def blackhole(self, runtime_id: str, gbid: str | None = None) -> None:
        """Keep the link's connections open and pass nothing, either way, until ``heal``."""
        proxy = self._link(runtime_id, gbid)
        found = await proxy.blackhole()
        self._trace(runtime_id, BLACKHOLE, gbid, connections=found)

    async def delay(self, runtime_id: str, gbid: str | None = None, ms: int | None = None, jitter_ms: int = 0) -> None:
        """Hold every chunk ``ms`` plus up to ``jitter_ms`` before passing it on, in order."""
        proxy = self._link(runtime_id, gbid)
        ms = _milliseconds(ms, "ms")
        jitter_ms = _milliseconds(jitter_ms, "jitter_ms")
        found = await proxy.delay(ms, jitter_ms)
        self._trace(runtime_id, DELAY, gbid, ms=ms, jitter_ms=jitter_ms, connections=found)

    async def duplicate(self, runtime_id: str, gbid: str | None = None, percent: int | None = None) -> None:
        """Deliver each packet twice with a chance of ``percent`` in 100, until ``heal``."""
        proxy = self._memory_link(runtime_id, gbid, DUPLICATE, "duplicates packets")
        percent = _percent(percent)
        found = await proxy.duplicate(percent)
        self._trace(runtime_id, DUPLICATE, gbid, percent=percent, connections=found)

    async def reorder(self, runtime_id: str, gbid: str | None = None, ms: int | None = None) -> None:
        """Make each packet late by a drawn ``0..ms`` on its own, so a later one may overtake."""
        proxy = self._memory_link(runtime_id, gbid, REORDER, "reorders packets")
        ms = _milliseconds(ms, "ms")
        found = await proxy.reorder(ms)
        self._trace(runtime_id, REORDER, gbid, ms=ms, connections=found)

    async def heal(self, runtime_id: str, gbid: str | None = None) -> None:
        """Back to passing. A link with no fault is a mistake in the caller's script."""
        proxy = self._link(runtime_id, gbid)
        if proxy.fault is None:
            raise ValueError(f"runtime_id: link {_name(runtime_id, gbid)} has no fault to heal")
        ended = proxy.fault
        found = await proxy.heal()
        self._trace(runtime_id, "heal", gbid, fault=ended, connections=found)

    def active(self, runtime_id: str, gbid: str | None = None) -> str | None:
        """``partition``, ``blackhole``, ``delay``, ``duplicate``, ``reorder`` or None."""
        return self._link(runtime_id, gbid).fault

    # -- the end of a run ------------------------------------------------------------------
    async def heal_all(self) -> None:
        """Heal what is still faulted (traced as any heal): the graceful stops that end a
        run then reach the brokers and cluster controllers instead of waiting out TTLs."""
        for (runtime_id, gbid), proxy in self._proxies.items():
            if proxy.fault is not None:
                await self.heal(runtime_id, gbid)

    async def close(self) -> None:
        for proxy in self._proxies.values():
            await proxy.close()
        if self._trace_writer is not None:
            self._trace_writer.close()

    # -- helpers ---------------------------------------------------------------------------
    def _link(self, runtime_id: object, gbid: object) -> FaultProxy:
        if not self.enabled:
            raise ValueError("runtime_id: this simulation runs without fault proxies (faults=False)")
        if not isinstance(runtime_id, str) or runtime_id not in self._runtimes:
            raise ValueError(f"runtime_id: no runtime {runtime_id!r} with links in this simulation; "
                             f"known: {sorted(self._runtimes)}")
        runtime = self._runtimes[runtime_id]
        if not runtime.gbids:
            if gbid is not None:
                raise ValueError(f"gbid: {gbid!r} given, but libjoynr runtime {runtime_id!r} has one link, "
                                 "to its cluster controller (gbid None)")
        elif gbid is None:
            raise ValueError(f"gbid: None given, but {runtime.kind} {runtime_id!r} has one MQTT link per GBID "
                             f"{list(runtime.gbids)}: name one")
        elif gbid not in runtime.gbids:
            raise ValueError(f"gbid: {gbid!r} is not one of {runtime_id!r}'s GBIDs {list(runtime.gbids)}")
        return self._proxies[(runtime_id, gbid)]

    def _memory_link(self, runtime_id: object, gbid: object, fault: str, does: str) -> Any:
        """The link, if it can show ``fault``: on real sockets TCP hides both."""
        proxy = self._link(runtime_id, gbid)
        if not callable(getattr(proxy, fault, None)):
            raise ValueError(f"{fault}: only the memory network {does} (TCP cannot); run with --network memory")
        return proxy

    def _trace(self, runtime_id: str, what: str, gbid: str | None, **fields: object) -> None:
        self.trace(runtime_id, what, gbid, target_kind=self._runtimes[runtime_id].kind, **fields)

    def trace(self, runtime_id: str, what: str, gbid: str | None, *, target_kind: str, **fields: object) -> None:
        """``fault.<what>`` of ``runtime_id``: also a fault that is no link's (a clock skew)."""
        if self._trace_writer is None:
            self._trace_writer = self._open_trace()
        self._trace_writer.emit(f"fault.{what}", target=runtime_id, target_kind=target_kind, gbid=gbid, **fields)


def _name(runtime_id: str, gbid: str | None) -> str:
    return f"{runtime_id!r}/{gbid!r}" if gbid is not None else f"{runtime_id!r} (WebSocket)"


def _milliseconds(value: object, field: str) -> int:
    if value is None:
        raise ValueError(f"{field}: required, a whole number of milliseconds from 0 to {MAX_DELAY_MS}")
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_DELAY_MS:
        raise ValueError(f"{field}: expected a whole number of milliseconds from 0 to {MAX_DELAY_MS}, got {value!r}")
    return value


def _percent(value: object) -> int:
    if value is None:
        raise ValueError("percent: required, a whole number from 1 to 100")
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 100:
        raise ValueError(f"percent: expected a whole number from 1 to 100, got {value!r}")
    return value
