"""Links and connections of the memory network: what ``joynr_sim.faults.proxy`` does to
bytes on loopback, done to packets in memory.

A ``MemoryLink`` is one runtime's link to the broker of a GBID, or a libjoynr runtime's to
its cluster controller, as the fault API names it (runtime id, GBID or None). It has the
fault proxy's methods and meanings, so ``joynr_sim.faults.links.Faults`` drives either:

- ``partition``: every connection is reset (both ends see it at once, as an RST) and new
  ones are refused until ``heal``;
- ``blackhole``: connections stay open and nothing passes either way; what was sent is
  held, not lost (TCP holds unacknowledged segments), and new connections hang;
- ``delay``: every packet waits ``ms`` plus a drawn ``0..jitter_ms``, never overtaking
  the packet before it;
- ``heal``: packets pass again; what a blackhole held goes on, in order.

Two faults only the memory network has, since TCP on loopback cannot show them:
``duplicate`` (each packet arrives twice with the given chance) and ``reorder`` (packets no
longer wait for the one before them, each is late by a drawn ``0..ms``).

A ``Channel`` is one connection over a link: packets each way, in order, each after the
network's own latency (a drawn 20-200 µs) plus the link's delay. Every draw comes from the
link's generator, seeded from the run's seed and the link's name, so a run's choices
repeat exactly.
"""

from __future__ import annotations

import asyncio
import itertools
import random
from collections import deque
from collections.abc import Callable
from typing import Any, Protocol

from ..faults.pipe import BLACKHOLE, DELAY, PARTITION

# The memory network's own latency per packet, drawn uniformly: the order of packets on
# different connections then depends on the seed, as on a real network on its load.
BASE_LATENCY_S = (20e-6, 200e-6)
DUPLICATE, REORDER = "duplicate", "reorder"


class End(Protocol):
    """One end of a channel: what arrives, and the end of the connection."""

    def received(self, packet: Any) -> None: ...

    def closed(self, reset: bool) -> None:
        """The connection is over: the peer closed it (False) or it was reset (True)."""


_CLOSE = object()  # a queued graceful close: the peer learns it after what was sent before
_RESET = object()  # a reset behind a blackhole: the peer learns it when the link heals


class _Direction:
    """One direction of a channel: packets in order, each due after its latency."""

    def __init__(self, channel: Channel, to: Callable[[], End | None]) -> None:
        self.channel = channel
        self._to = to
        self.queue: deque[tuple[float, Any]] = deque()
        self.last_due = 0.0
        self._timer: asyncio.TimerHandle | None = None

    def put(self, packet: Any) -> None:
        link, loop = self.channel.link, self.channel.loop
        due = loop.time() + link.latency_s()
        if link.fault != REORDER:
            due = max(due, self.last_due)
            self.last_due = due
            self.queue.append((due, packet))
        else:  # each packet on its own: a later one may go first
            self._insert(due, packet)
        if link.fault == DUPLICATE and packet not in (_CLOSE, _RESET) and link.rng.random() < link.duplicate_chance:
            self._insert(max(due, self.last_due) + link.latency_s(), packet)
        self.schedule()

    def _insert(self, due: float, packet: Any) -> None:
        position = sum(1 for when, _ in self.queue if when <= due)
        self.queue.insert(position, (due, packet))

    def schedule(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self.queue and self.channel.link.fault != BLACKHOLE and not self.channel.dead:
            self._timer = self.channel.loop.call_at(self.queue[0][0], self._deliver)

    def _deliver(self) -> None:
        self._timer = None
        now = self.channel.loop.time()
        while self.queue and self.queue[0][0] <= now and not self.channel.dead:
            _, packet = self.queue.popleft()
            end = self._to()
            if packet is _CLOSE or packet is _RESET:
                self.channel._gone(end, reset=packet is _RESET)
                return
            if end is not None:
                end.received(packet)
        self.schedule()

    def release(self) -> None:
        """After a blackhole or a delay: what waited is due now, in order."""
        now = self.channel.loop.time()
        self.queue = deque((min(when, now), packet) for when, packet in self.queue)
        self.last_due = min(self.last_due, now)
        self.schedule()

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self.queue.clear()


class Channel:
    """One connection: the client's end and the server's, ``send`` each way, ``close``
    (graceful, after what was sent) and ``reset`` (at once, both ends)."""

    def __init__(self, link: MemoryLink, client: End, server: End) -> None:
        self.link = link
        self.loop = asyncio.get_running_loop()
        self.client: End | None = client
        self.server: End | None = server
        self.dead = False
        self.number = next(link.numbers)
        self.up = _Direction(self, lambda: self.server)
        self.down = _Direction(self, lambda: self.client)
        link.channels.add(self)

    def to_server(self, packet: Any) -> None:
        if not self.dead:
            self.up.put(packet)

    def to_client(self, packet: Any) -> None:
        if not self.dead:
            self.down.put(packet)

    def close_from_client(self) -> None:
        """The client closes: the server learns it after the client's last packet; the
        client's end hears nothing more."""
        if not self.dead:
            self.client = None
            self.up.put(_CLOSE)

    def close_from_server(self) -> None:
        if not self.dead:
            self.server = None
            self.down.put(_CLOSE)

    def reset(self, by: End | None = None) -> None:
        """The connection dies, and what was in flight with it. ``by``: the end that aborted
        it, which hears nothing; its peer learns it at once, or, behind a blackhole, when the
        link heals (after what the blackhole held: the proxy passes a close on at the heal).
        None: the network reset it, and both ends learn it at once."""
        if self.dead:
            return
        if by is not None and self.link.fault == BLACKHOLE:
            if by is self.client:
                self.client = None
                self.up.put(_RESET)
            elif by is self.server:
                self.server = None
                self.down.put(_RESET)
            return
        ends = [end for end in (self.client, self.server) if end is not None and end is not by]
        self._end()
        for end in ends:
            end.closed(True)

    def _gone(self, end: End | None, reset: bool) -> None:
        self._end()
        if end is not None:
            end.closed(reset)

    def _end(self) -> None:
        self.dead = True
        self.up.stop()
        self.down.stop()
        self.client = self.server = None
        self.link.channels.discard(self)


class MemoryLink:
    """One runtime's link, with the fault proxy's fault methods (see the module docstring)."""

    def __init__(self, name: str, seed: int | str | None) -> None:
        self.name = name
        self.rng = random.Random(f"{seed}/{name}")
        self.fault: str | None = None
        self.delay_s = (0.0, 0.0)  # ms and jitter of a delay, in seconds
        self.duplicate_chance = 0.0
        self.channels: set[Channel] = set()
        self.numbers = itertools.count()
        # Connections that wait for a blackhole to heal before they reach the other side:
        # (open, what a reset of the waiting connection tells its client).
        self.waiting: list[tuple[Callable[[], None], Callable[[], None] | None]] = []

    def latency_s(self) -> float:
        low, high = BASE_LATENCY_S
        latency = self.rng.uniform(low, high)
        if self.fault in (DELAY, REORDER):
            fixed, jitter = self.delay_s
            latency += fixed + (self.rng.uniform(0, jitter) if jitter else 0.0)
        return latency

    def connect(self, open_: Callable[[], None], reset: Callable[[], None] | None = None) -> None:
        """Open a connection over this link: ``open_`` runs after one latency, or once a
        blackhole heals; a partitioned link refuses at once. ``reset``: what tells the
        client that a partition reset its connection while it hung in a blackhole."""
        if self.fault == PARTITION:
            raise ConnectionRefusedError(f"link {self.name}: partitioned")
        if self.fault == BLACKHOLE:
            self.waiting.append((open_, reset))
            return
        asyncio.get_running_loop().call_later(self.latency_s(), open_)

    # -- the fault proxy's methods -------------------------------------------------------
    async def partition(self) -> int:
        channels = self._ordered()
        waiting, self.waiting = self.waiting, []
        self._set(PARTITION)
        for channel in channels:
            channel.reset()
        for _, reset in waiting:  # a connection hanging in a blackhole is reset too
            if reset is not None:
                reset()
        return len(channels) + len(waiting)

    async def blackhole(self) -> int:
        self._set(BLACKHOLE)
        for channel in self._ordered():
            channel.up.schedule()
            channel.down.schedule()
        return len(self.channels)

    async def delay(self, ms: int, jitter_ms: int) -> int:
        self._set(DELAY)
        self.delay_s = (ms / 1000, jitter_ms / 1000)
        return len(self.channels)

    async def duplicate(self, percent: int) -> int:
        self._set(DUPLICATE)
        self.duplicate_chance = percent / 100
        return len(self.channels)

    async def reorder(self, ms: int) -> int:
        self._set(REORDER)
        self.delay_s = (0.0, ms / 1000)
        return len(self.channels)

    async def heal(self) -> int:
        self.fault = None
        self.delay_s, self.duplicate_chance = (0.0, 0.0), 0.0
        for channel in self._ordered():
            channel.up.release()
            channel.down.release()
        waiting, self.waiting = self.waiting, []
        loop = asyncio.get_running_loop()
        for open_, _ in waiting:
            loop.call_soon(open_)
        return len(self.channels)

    async def close(self) -> None:
        for channel in self._ordered():
            channel.reset()
        self.waiting.clear()

    def _set(self, fault: str) -> None:
        if self.fault == BLACKHOLE:  # what was held goes on under the new fault
            self.fault = fault
            for channel in self._ordered():
                channel.up.release()
                channel.down.release()
        self.fault = fault

    def _ordered(self) -> list[Channel]:
        """The link's channels in the order they were opened: never in the order of a set
        of objects, which differs from run to run."""
        return sorted(self.channels, key=lambda c: c.number)
