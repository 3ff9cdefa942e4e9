"""How the runner starts a host process: forked from its fork server (``ForkedChild``), or
as a program of its own (``ExecutedChild``), both seen through ``Child``."""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing
import multiprocessing.spawn
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Protocol

from .entry import host_main

_STARTING = threading.Lock()  # hosts start from worker threads, one at a time
_PREPARATION_DATA = multiprocessing.spawn.get_preparation_data


class Child(Protocol):
    pid: int | None
    exitcode: int | None  # once waited for; a negative number is the signal that ended it

    def alive(self) -> bool: ...

    async def wait(self) -> None: ...


@contextlib.contextmanager
def _without_main() -> Iterator[None]:
    """A forked host runs ``host_main`` and needs nothing of the runner's main module; but
    multiprocessing would import it again in the child (as ``__mp_main__``), running a
    script without an ``if __name__ == "__main__"`` guard a second time. So the data the
    child prepares itself from leaves the main module out while the host starts (under a
    lock: hosts start from worker threads)."""
    original = _PREPARATION_DATA

    def prepared(name: str) -> dict[str, Any]:
        data = original(name)
        data.pop("init_main_from_name", None)
        data.pop("init_main_from_path", None)
        return data

    with _STARTING:
        multiprocessing.spawn.get_preparation_data = prepared
        try:
            yield
        finally:
            multiprocessing.spawn.get_preparation_data = original


class ForkedChild:
    """A host forked from the runner's fork server, which has imported joynr-sim once: a
    start costs a fork, not a Python start (``multiprocessing``'s forkserver; it exits when
    the runner does, and its children have the parent-death signal armed)."""

    def __init__(self, control: socket.socket, query: socket.socket, log_dir: Path, event_loop: str) -> None:
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(["joynr_sim.host.process.entry"])
        # Daemonic: when the runner's interpreter exits without closing a host (Ctrl-C while a
        # spare host was still starting), multiprocessing terminates it instead of waiting
        # for it forever. A host starts no processes of its own, which daemons may not.
        self._process = context.Process(target=host_main, args=(control, query, str(log_dir), event_loop),
                                        daemon=True)
        with _without_main():
            self._process.start()
        self.pid = self._process.pid
        self.exitcode: int | None = None
        self._reaped = False

    def alive(self) -> bool:
        return not self._reaped and self._process.exitcode is None

    async def wait(self) -> None:
        if self._reaped:
            return
        loop = asyncio.get_running_loop()
        ended = loop.create_future()
        sentinel = self._process.sentinel
        loop.add_reader(sentinel, lambda: ended.done() or ended.set_result(None))
        try:
            if self.alive():
                await ended
        finally:
            loop.remove_reader(sentinel)
        self._process.join()
        self.exitcode = self._process.exitcode
        self._process.close()
        self._reaped = True


class ExecutedChild:
    """A host started as a program of its own (``HostProcess.command``)."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self._process = process
        self.pid = process.pid
        self.exitcode: int | None = None

    def alive(self) -> bool:
        return self._process.returncode is None

    async def wait(self) -> None:
        self.exitcode = await self._process.wait()
