"""What the runner holds of a host process, wherever it runs (``process.HostProcess`` on this
machine, ``join.JoinedProcess`` on another): ops asked and their answers checked, and the
host's own ops.

A subclass carries a request's name and arguments to the host and brings the answer back as
it came (``exchange`` on the control channel, ``query_exchange`` on the blocking query
channel); ``request`` and ``query`` ask an op (``ops``) and check its result.
"""

from __future__ import annotations

from typing import Any, NoReturn

from . import ops
from .errors import raise_remote
from .framing import VERSION, ProtocolError


class HostHandle:
    name: str
    pid: int | None
    address: str  # where its cluster controllers listen for WebSockets

    @property
    def alive(self) -> bool:
        raise NotImplementedError

    async def kill(self) -> int | None:
        """SIGKILL, and wait until the process is gone: its pid."""
        raise NotImplementedError

    async def close(self) -> None:
        """Ask the host to end (it stops its runtimes); kill it if it does not in time."""
        raise NotImplementedError

    async def exchange(self, op: str, args: dict[str, Any], timeout: float) -> tuple[bool, Any]:
        """The answer as it came: (True, result) or (False, the error's fields)."""
        raise NotImplementedError

    def query_exchange(self, op: str, args: dict[str, Any]) -> tuple[bool, Any]:
        """The same on the query channel, blocking until the answer is there."""
        raise NotImplementedError

    def refused(self, error: dict[str, Any]) -> NoReturn:
        """What the host raised, raised here."""
        raise_remote(error)

    async def request(self, op: ops.Op, timeout: float | None = None) -> Any:
        """Ask on the control channel, without holding up the event loop."""
        ok, value = await self.exchange(ops.name_of(op), op.arguments(), op.timeout_s() if timeout is None else timeout)
        return op.answer(value) if ok else self.refused(value)

    def query(self, op: ops.Op) -> Any:
        """Ask on the query channel and wait for the answer, blocking: for what a step
        asks without awaiting (a routing entry, the clock)."""
        if not op.query:
            raise ProtocolError(f"op: {ops.name_of(op)!r} may wait on the network and is not asked on the query "
                                "channel")
        ok, value = self.query_exchange(ops.name_of(op), op.arguments())
        return op.answer(value) if ok else self.refused(value)

    # -- the host's own ops ----------------------------------------------------------------
    @ops.asks(ops.Hello)
    async def hello(self) -> ops.HelloAnswer:
        return await self.request(ops.Hello(version=VERSION))

    @ops.asks(ops.Exit)
    async def exit(self) -> None:
        await self.request(ops.Exit())

    @ops.asks(ops.Advance)
    def advance(self, offset_ms: int) -> int:
        """Move the host's clock before this returns: its runtimes purge as the runner's would."""
        return self.query(ops.Advance(offset_ms=offset_ms))

    @ops.asks(ops.Profile)
    async def profile(self, enable: bool) -> dict[str, Any] | None:
        return await self.request(ops.Profile(enable=enable))

    @ops.asks(ops.WriteFailure)
    async def ask_write_failure(self) -> dict[str, str] | None:
        """The host's first write failure (every answer hands it to the run's ``Failures``)."""
        return await self.request(ops.WriteFailure())
