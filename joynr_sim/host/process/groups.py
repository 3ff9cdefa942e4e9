"""Host groups: several runtimes in one host process, for fleets that should use every
core rather than one process per runtime.

``Simulation(hosts=N)`` makes N groups; each cluster controller goes to the next group in
turn and its libjoynr runtimes go to its group, so a cluster controller and its
applications share one process and one event loop, as they would share one machine. A
group's process is taken from the host pool when its first runtime starts and exits when
its last runtime stops.

A crash is still a real process death: SIGKILL of the group's process, which ends every
runtime in it, as a crash of the machine a cluster controller and its applications run on
would. Each of them is traced ``life.crash`` with the pid and stays down until it is
started or restarted, in a new process of the same group.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from ..rpc import ops
from ..rpc.host_handle import HostHandle

if TYPE_CHECKING:  # pragma: no cover
    from ..rpc.handles import RemoteRuntime
    from .pool import HostPool


class HostGroup:
    def __init__(self, name: str, pool: HostPool) -> None:
        self.name = name
        self.pool = pool
        self.process: HostHandle | None = None
        self.members: list[RemoteRuntime] = []  # the runtimes the process holds now
        self._lock = asyncio.Lock()  # one process per group, however many start at once
        self._offset_ms: int | None = None  # where the process's clock was moved last

    async def process_for(self, runtime: RemoteRuntime) -> HostHandle:
        """The group's process, taken from the pool when there is none (or it died)."""
        async with self._lock:
            if self.process is None or not self.process.alive:
                self.process = await self.pool.take(self.name)
                self.members = []
                self._offset_ms = None
            if runtime not in self.members:
                self.members.append(runtime)
            return self.process

    def advance(self, process: HostHandle, offset_ms: int) -> None:
        """Move the clock of the group's process, once per offset: every runtime in it
        follows that one clock, and each move purges all of them."""
        if process is self.process and offset_ms == self._offset_ms:
            return
        process.advance(offset_ms)
        if process is self.process:
            self._offset_ms = offset_ms

    def shared(self, runtime: RemoteRuntime) -> bool:
        """Whether another runtime lives in the process with ``runtime``."""
        return any(m is not runtime for m in self.members)

    @ops.asks(ops.Close)
    async def release(self, runtime: RemoteRuntime, process: HostHandle) -> None:
        """After ``runtime`` stopped: the host forgets it; the last one out ends the process.
        Who is last is decided under the lock, one at a time; the round trip to the host is
        not: held under the lock, every start in the group (``process_for``) waited for the
        closes before it, one host round trip each, which a loaded host made seconds long
        (in a restart wave, a group's restarts queued behind each other)."""
        async with self._lock:
            if runtime in self.members:
                self.members.remove(runtime)
            ends = process is not self.process or not self.members
            if ends and process is self.process:
                self.process = None
        if ends:
            await process.close()
        else:
            await process.request(ops.Close(runtime=runtime.runtime_id))

    def killed(self, process: HostHandle) -> list[RemoteRuntime]:
        """The process was SIGKILLed: the runtimes that died with it, now none."""
        if process is not self.process:
            return []
        dead, self.members, self.process = self.members, [], None
        return dead
