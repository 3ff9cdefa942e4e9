"""The pool of host processes a simulation takes its hosts from (``HostPool``)."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Callable
from pathlib import Path

from ...write_failure import Failures
from .event_loop import event_loop_choice
from .host_process import HostProcess


class HostPool:
    """Host processes started ahead, so a runtime's start does not wait for one: each
    ``take`` hands out a greeted host and starts the next one in the background (the first
    also starts the fork server while the brokers start). A host taken knows nothing yet;
    one never taken is closed with the pool."""

    def __init__(self, log_dir: Path, spares: int = 1, failures: Failures | None = None) -> None:
        """failures: the run's, which every host taken from here tells of its write failures."""
        event_loop_choice()  # a wrong JOYNR_SIM_EVENT_LOOP is the caller's error, not a host that dies
        self.log_dir = log_dir
        self.spares = spares
        self.failures = failures
        # Told of a host taken from here that ended without the runner ending it (killed by the
        # kernel, say): its runtimes are then traced crashed (``rpc.handles.host_lost``).
        self.on_lost: Callable[[HostProcess], None] | None = None
        self._ready: list[asyncio.Task[HostProcess]] = []
        self._seq = itertools.count(1)

    def _spawn_one(self) -> asyncio.Task[HostProcess]:
        async def spawn() -> HostProcess:
            host = HostProcess(f"host-{next(self._seq)}", self.log_dir)
            host.failures = self.failures
            await host.spawn()
            return host

        return asyncio.get_running_loop().create_task(spawn())

    def fill(self) -> None:
        while len(self._ready) < self.spares:
            self._ready.append(self._spawn_one())

    async def take(self, name: str) -> HostProcess:
        task = self._ready.pop(0) if self._ready else self._spawn_one()
        self.fill()
        host = await task
        host.name = name
        host.on_lost = self.on_lost
        return host

    async def close(self) -> None:
        ready, self._ready = self._ready, []
        for task in ready:
            try:
                host = await task
            except Exception:
                continue  # it never started: nothing is left of it
            await host.close()
