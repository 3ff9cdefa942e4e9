"""Group commit: the writes of one event-loop turn go to SQLite in one transaction.

A store that writes through a ``GroupCommit`` keeps its writes in memory (coalesced by key:
a row put and deleted in the same turn never reaches the file) and commits them together
in a callback that the first write of a turn schedules on the running loop. Without a
running loop (a store used from plain code, a tool) every write commits at once.

What depends on a write being durable, a publish to the broker or a PUBACK that lets the
broker forget a message, is scheduled with ``after_commit``: asyncio runs ready callbacks
in the order they were scheduled, and the commit was scheduled no later than the write
the effect depends on, so the effect runs after the commit. A SIGKILL therefore loses at
most the writes of the turn it interrupts, and none of their effects has left the process.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any


class GroupCommit:
    def __init__(self, commit: Callable[[], None]) -> None:
        """commit: writes what is pending in one transaction; called on the loop, or at once
        when no loop runs."""
        self._commit = commit
        self._handle: asyncio.Handle | None = None
        self.commits = 0  # how many transactions: a measure for benchmarks and tests

    def pending(self) -> None:
        """A write is pending: commit it at the end of this turn (at once without a loop)."""
        if self._handle is not None:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self.flush()
            return
        self._handle = loop.call_soon(self.flush)

    def flush(self) -> None:
        """Commit now (before a read, a close, or at the end of the turn)."""
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        self.commits += 1
        self._commit()

    def discard(self) -> None:
        """A simulated crash: the scheduled commit does not happen (the caller drops what
        was pending), as a killed process never wrote it."""
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None


def after_commit(callback: Callable[..., Any], *args: Any) -> None:
    """Run callback after the commit of every write made so far in this turn (see the
    module docstring); at once when no loop runs, since writes then commit at once."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        callback(*args)
        return
    loop.call_soon(callback, *args)
