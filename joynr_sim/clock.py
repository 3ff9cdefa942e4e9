"""Simulated time: the wall clock plus whatever a scenario has advanced it by.

Every runtime of a run shares one clock, so expiry dates, trace timestamps and purges
agree; advancing the clock lets a scenario expire entries without sleeping. A runtime in a
host process has a clock of its own that the runner keeps at the same offset
(``advance_to``): the wall clock is the machine's, so both read the same time.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable


class SimClock:
    def __init__(self, offset_ms: int = 0) -> None:
        self._offset_ms = offset_ms
        self._lock = threading.Lock()
        self._listeners: list[Callable[[int], None]] = []

    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000 + self._offset_ms

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
