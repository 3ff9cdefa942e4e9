"""The host's end of the two channels: each frame read, answered by the host (``dispatch``)
and written back.

The control channel carries requests that may wait on the network (start, calls,
discovery), each answered when done and in any order; the query channel carries the ops
that answer at once (``ops.QUERY_OPS``: routing-table queries, the clock), one after the
other, so the runner can ask them without waiting on its own event loop. A frame that breaks
the protocol is answered with id 0 and ends the host (exit code 2): the stream cannot be
trusted past it.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from typing import Any

from ...clock import SimClock
from .dispatch import Host
from .errors import failure
from .framing import ProtocolError, encode_frame, failure_to_wire, read_frame, success
from .ops import validate_request


class Server:
    def __init__(self, host: Host) -> None:
        self.host = host
        self.done = host.exited  # set too when a channel ends: the runner has gone
        self.exit_code = 0
        self._tasks: set[asyncio.Task] = set()

    async def answer(self, writer: asyncio.StreamWriter, message: dict[str, Any], *, query: bool) -> None:
        msg_id = message["id"]
        try:
            msg_id, name, op = validate_request(message)
            if query and not op.query:
                raise ProtocolError(f"op: {name!r} may wait on the network and is not asked on the query channel")
            reply = success(msg_id, await self.host.handle(name, op))
        except Exception as exc:  # every failure is the caller's to see, by name
            reply = failure(msg_id, exc)
        await self.host.flush_traces()
        # After the flush: a trace write that failed in it is told in this very answer.
        written = failure_to_wire(self.host.write_failure)
        if written is not None:
            reply["write_failure"] = written
        try:
            frame = encode_frame(reply)
        except Exception as exc:  # a result the wire cannot carry
            frame = encode_frame(failure(msg_id, ProtocolError(f"result: {type(exc).__name__}: {exc}")))
        writer.write(frame)
        await writer.drain()

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, *, query: bool) -> None:
        try:
            while not self.done.is_set():
                message = await read_frame(reader)
                if message is None:
                    break
                if query:
                    await self.answer(writer, message, query=True)
                else:
                    task = asyncio.get_running_loop().create_task(self.answer(writer, message, query=False))
                    self._tasks.add(task)
                    task.add_done_callback(self._tasks.discard)
        except ProtocolError as exc:
            self.exit_code = 2
            with contextlib.suppress(Exception):
                writer.write(encode_frame(failure(0, exc)))
                await writer.drain()
        except (ConnectionError, OSError):
            pass
        self.done.set()  # end of file or a broken stream: the runner has gone


async def serve(control_fd: int, query_fd: int) -> int:
    """Serve both channels until the runner says exit or goes: the exit code."""
    loop = asyncio.get_running_loop()
    control_reader, control_writer = await asyncio.open_connection(sock=socket.socket(fileno=control_fd), limit=2**16)
    query_reader, query_writer = await asyncio.open_connection(sock=socket.socket(fileno=query_fd), limit=2**16)
    server = Server(Host(SimClock()))
    channels = [loop.create_task(server.serve(control_reader, control_writer, query=False)),
                loop.create_task(server.serve(query_reader, query_writer, query=True))]
    await server.done.wait()
    for channel in channels:
        channel.cancel()
    with contextlib.suppress(Exception):
        await control_writer.drain()
        await query_writer.drain()
    return server.exit_code
