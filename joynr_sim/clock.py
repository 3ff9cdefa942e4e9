"""Simulated time: a time source (the wall clock unless told otherwise) plus whatever a
scenario has advanced it by.

Every runtime of a run shares one clock, so expiry dates, trace timestamps and purges
agree; advancing the clock lets a scenario expire entries without sleeping. A runtime in a
host process has a clock of its own that the runner keeps at the same offset
(``advance_to``): the wall clock is the machine's, so both read the same time. A simulated
network passes the virtual-time loop's clock as the source, so a run's dates follow its
virtual time, not the machine's.

A runtime may read the run's clock wrong: ``RuntimeClock`` is the run's clock seen from one
runtime, off by a skew. joynr stamps absolute expiry dates on messages, so a runtime whose
clock runs ahead stamps them late and finds others' expired early, one behind the reverse.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

MAX_SKEW_MS = 86_400_000  # a day either way: a clock further off is no clock


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


class SimClock:
    def __init__(self, offset_ms: int = 0, source: Callable[[], int] | None = None) -> None:
        """``source``: epoch ms the clock starts from (default: the wall clock)."""
        self._offset_ms = offset_ms
        self._source = wall_clock_ms if source is None else source
        self._lock = threading.Lock()
        self._listeners: list[Callable[[int], None]] = []

    def now_ms(self) -> int:
        return self._source() + self._offset_ms

    __call__ = now_ms

    def advance(self, ms: int) -> int:
        """Jump ahead; listeners (runtimes purging expired state) run at once."""
        if ms < 0:
            raise ValueError(f"ms: the clock only moves forward, got {ms}")
        with self._lock:
            self._offset_ms += ms
        now = self.now_ms()
        for listener in list(self._listeners):
            listener(now)
        return now

    @property
    def offset_ms(self) -> int:
        return self._offset_ms

    def advance_to(self, offset_ms: int) -> int:
        """Jump to an offset another clock has reached (never back)."""
        return self.advance(max(0, offset_ms - self._offset_ms))

    def on_advance(self, listener: Callable[[int], None]) -> Callable[[], None]:
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener) if listener in self._listeners else None


class RuntimeClock:
    """One runtime's clock: the run's (``base``) plus this runtime's skew (0 until set).

    Advancing it advances the run's clock, for everyone; a listener hears the time as this
    runtime reads it. ``offset_ms`` is the run's offset, which a host process's clock is kept
    at: the skew is the runtime's own and stays out of it."""

    def __init__(self, base: SimClock, skew_ms: int = 0) -> None:
        self.base = base
        self._skew_ms = 0
        self.set_skew(skew_ms)

    @property
    def skew_ms(self) -> int:
        return self._skew_ms

    def set_skew(self, ms: int) -> None:
        """From now on this runtime reads the run's time ``ms`` off (negative: behind)."""
        if isinstance(ms, bool) or not isinstance(ms, int) or not -MAX_SKEW_MS <= ms <= MAX_SKEW_MS:
            raise ValueError(f"ms: a whole number from {-MAX_SKEW_MS} to {MAX_SKEW_MS}, got {ms!r}")
        self._skew_ms = ms

    def now_ms(self) -> int:
        return self.base.now_ms() + self._skew_ms

    __call__ = now_ms

    def advance(self, ms: int) -> int:
        """Advance the run's clock; this runtime's now afterwards."""
        return self.base.advance(ms) + self._skew_ms

    def advance_to(self, offset_ms: int) -> int:
        return self.base.advance_to(offset_ms) + self._skew_ms

    @property
    def offset_ms(self) -> int:
        return self.base.offset_ms

    def on_advance(self, listener: Callable[[int], None]) -> Callable[[], None]:
        # The skew as it is when the clock moves, not when the listener was added.
        return self.base.on_advance(lambda now: listener(now + self._skew_ms))
