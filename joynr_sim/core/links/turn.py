"""A link's turn: the FIFO ticket lock every operation that changes the link runs in.

Waiting attaches of one link are its thief queue (the link-registry seed, "Design v3"),
served strictly in arrival order, one at a time. The turn's condition is also the lock the
link publishes its state under, so a reader outside the turn sees that state whole.

``LastComerTurn`` is the same lock without the thief queue, for the ``links:no-thief-queue``
variant.

Kept apart from the link because it is the one piece of the link that only knows about
threads, not about termini, owners or the store; why a turn holder cannot deadlock is in
the package doc.
"""

from __future__ import annotations

import threading


class Turn:
    """One link's turn, entered and left as a context manager; one object per link, entered
    by every operation (a generator-based context manager was made per operation)."""

    __slots__ = ("cond", "_next_ticket", "_serving", "_waiters")

    def __init__(self) -> None:
        self.cond = threading.Condition(threading.Lock())
        self._next_ticket = 0
        self._serving = 0
        # Threads in cond.wait: with none (a link used from one event loop, every MQTT
        # publish and PUBACK) a turn notifies nobody, which was most of its cost.
        self._waiters = 0

    def pending(self) -> int:
        """Operations holding or waiting for this turn (the thief queue)."""
        with self.cond:
            return self._next_ticket - self._serving

    def wait_pending(self, count: int, timeout: float) -> bool:
        """Wait until at least count operations hold or wait for the turn."""
        with self.cond:
            self._waiters += 1
            try:
                return self.cond.wait_for(lambda: self._next_ticket - self._serving >= count, timeout)
            finally:
                self._waiters -= 1

    def __enter__(self) -> None:
        cond = self.cond
        with cond:
            ticket = self._next_ticket
            self._next_ticket += 1
            if self._waiters:
                cond.notify_all()  # wake wait_pending
            if self._serving != ticket:
                self._waiters += 1
                try:
                    while self._serving != ticket:
                        cond.wait()
                finally:
                    self._waiters -= 1

    def __exit__(self, *exc_info: object) -> None:
        with self.cond:
            self._serving += 1
            if self._waiters:
                self.cond.notify_all()


class LastComerTurn:
    """A link's turn without the thief queue (the ``links:no-thief-queue`` variant): the
    operations waiting for the link are not served in arrival order; whoever waits last
    takes it first, as a thread that barges into a bare lock does. Same interface as Turn."""

    __slots__ = ("cond", "_held", "_waiting", "_granted", "_next_ticket")

    def __init__(self) -> None:
        self.cond = threading.Condition(threading.Lock())
        self._held = False
        self._waiting: list[int] = []  # a stack: the last comer is on top
        self._granted: int | None = None
        self._next_ticket = 0

    def pending(self) -> int:
        with self.cond:
            return int(self._held) + len(self._waiting)

    def wait_pending(self, count: int, timeout: float) -> bool:
        with self.cond:
            return self.cond.wait_for(lambda: int(self._held) + len(self._waiting) >= count, timeout)

    def __enter__(self) -> None:
        cond = self.cond
        with cond:
            if not self._held:
                self._held = True
                cond.notify_all()  # wake wait_pending
                return
            ticket = self._next_ticket
            self._next_ticket += 1
            self._waiting.append(ticket)
            cond.notify_all()
            while self._granted != ticket:
                cond.wait()
            self._granted = None

    def __exit__(self, *exc_info: object) -> None:
        with self.cond:
            if self._waiting:
                self._granted = self._waiting.pop()  # handed over: the turn stays held
            else:
                self._held = False
            self.cond.notify_all()
