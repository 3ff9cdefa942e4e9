"""A host process: ``python -m joynr_sim.host --query-fd N --parent-pid P``.

Its runtimes are driven by the process that started it over two channels speaking the
control protocol (``joynr_sim.host.protocol``): standard input and output carry requests
that may wait on the network (start, calls, discovery), each answered when done and in any
order; the socket ``--query-fd`` carries requests that answer at once (routing-table
queries, the clock), one after the other, so the runner can ask them without waiting on
its own event loop. Standard output carries frames only; whatever else is printed goes to
standard error, which the runner sends to a log file.

The process dies with its parent: end of file on standard input, or the kernel's
parent-death signal (SIGKILL), so no host outlives the runner even after a SIGKILL of it.
A frame that breaks the protocol is answered with id 0 and ends the process (exit 2): the
stream cannot be trusted past it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ctypes
import os
import signal
import socket
import sys
from typing import Any

from ..clock import SimClock
from .host import Host
from .protocol import (
    QUERY_OPS,
    VERSION,
    ProtocolError,
    encode_frame,
    failure,
    read_frame,
    success,
    validate_request,
)

PR_SET_PDEATHSIG = 1


def _die_with_parent(parent_pid: int) -> None:
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() != parent_pid:  # the parent went before the signal was armed
        os._exit(0)


class Server:
    def __init__(self, host: Host) -> None:
        self.host = host
        self.done = asyncio.Event()
        self.exit_code = 0
        self._tasks: set[asyncio.Task] = set()

    async def answer(self, writer: asyncio.StreamWriter, message: dict[str, Any], *, query: bool) -> None:
        msg_id = message["id"]
        try:
            msg_id, op, args = validate_request(message)
            if query and op not in QUERY_OPS:
                raise ProtocolError(f"op: {op!r} may wait on the network and is not asked on the query channel")
            if op == "hello":
                if args["version"] != VERSION:
                    raise ProtocolError(f"hello.version: {args['version']}, this host speaks {VERSION}")
                result: Any = {"pid": os.getpid(), "version": VERSION}
            elif op == "exit":
                await self.host.shutdown()
                self.done.set()
                result = None
            else:
                result = await self.host.handle(op, args)
            reply = success(msg_id, result)
        except Exception as exc:  # every failure is the caller's to see, by name
            reply = failure(msg_id, exc)
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


async def _open_stdio() -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    loop = asyncio.get_running_loop()
    out = os.fdopen(os.dup(1), "wb", buffering=0)
    os.dup2(2, 1)  # a stray print must not corrupt the frames
    reader = asyncio.StreamReader(limit=2**16)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    transport, protocol = await loop.connect_write_pipe(asyncio.streams.FlowControlMixin, out)
    return reader, asyncio.StreamWriter(transport, protocol, None, loop)


async def serve(query_fd: int) -> int:
    control_reader, control_writer = await _open_stdio()
    query_reader, query_writer = await asyncio.open_connection(sock=socket.socket(fileno=query_fd))
    server = Server(Host(SimClock()))
    loop = asyncio.get_running_loop()
    channels = [loop.create_task(server.serve(control_reader, control_writer, query=False)),
                loop.create_task(server.serve(query_reader, query_writer, query=True))]
    await server.done.wait()
    for channel in channels:
        channel.cancel()
    with contextlib.suppress(Exception):
        await control_writer.drain()
        await query_writer.drain()
    return server.exit_code


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m joynr_sim.host", description=__doc__.splitlines()[0])
    parser.add_argument("--query-fd", type=int, required=True, help="the query channel's socket")
    parser.add_argument("--parent-pid", type=int, required=True, help="die when this process is gone")
    args = parser.parse_args(argv)
    _die_with_parent(args.parent_pid)
    # Ctrl-C at the terminal reaches the whole process group: the runner stops its hosts itself.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    code = asyncio.run(serve(args.query_fd))
    sys.stderr.flush()
    # Not a normal exit: paho's threads of a runtime that was not stopped must not keep it alive.
    os._exit(code)


if __name__ == "__main__":
    main()
