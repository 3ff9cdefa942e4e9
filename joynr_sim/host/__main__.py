"""A host process: ``python -m joynr_sim.host --control-fd N --query-fd M``, or forked by
the runner's fork server (``host_main``).

Its runtimes are driven by the process that started it over two sockets speaking the
control protocol (``joynr_sim.host.protocol``): the control channel carries requests that
may wait on the network (start, calls, discovery), each answered when done and in any
order; the query channel carries requests that answer at once (routing-table queries, the
clock), one after the other, so the runner can ask them without waiting on its own event
loop.

The process dies with its parent: end of file on the control channel, or the kernel's
parent-death signal (SIGKILL), so no host outlives the runner even after a SIGKILL of it.
A frame that breaks the protocol is answered with id 0 and ends the process (exit 2): the
stream cannot be trusted past it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ctypes
import gc
import os
import signal
import socket
import sys
from typing import Any, NoReturn

from ..clock import SimClock
from .event_loop import CHOICES, EVENT_LOOP_ENV, event_loop_choice, event_loop_factory
from .host import Host
from .protocol import (
    QUERY_OPS,
    VERSION,
    ProtocolError,
    encode_frame,
    failure,
    failure_to_wire,
    read_frame,
    success,
    validate_request,
)

PR_SET_PDEATHSIG = 1
# The cyclic garbage collector's thresholds in a host. At Python's (700, 10, 10) it took a
# quarter of a fleet host's CPU (perf, 100 / 1,000 fleet under load: gc_collect_main 17% of
# the samples, visit_decref and visit_reachable 6% more): with thousands of calls in flight,
# a young collection came every 700 objects allocated and not yet freed, found each call's
# objects still alive and moved them to an older generation, where they died and were found
# only by collections of the whole heap (200,000 objects per host). At 50,000 most of a
# call's objects are freed by their reference counts before a collection sees them (the
# collector then about 2% of the samples): CPU per call 0.41-0.42 ms
# against 0.56-0.58, calls/s 4,100-4,300 against 3,000 (``bench fleet``), the hosts' peak
# memory the same (270-300 MiB). Cycles that do become garbage are still collected.
GC_THRESHOLDS = (50_000, 50, 50)


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
                result: Any = {"pid": os.getpid(), "version": VERSION, "event_loop": loop_name(),
                               "gc_thresholds": list(gc.get_threshold())}
            elif op == "exit":
                await self.host.shutdown()
                self.done.set()
                result = None
            else:
                result = await self.host.handle(op, args)
            reply = success(msg_id, result)
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


def loop_name() -> str:
    """The running loop's library, as ``JOYNR_SIM_EVENT_LOOP`` names it."""
    return "uvloop" if type(asyncio.get_running_loop()).__module__.startswith("uvloop") else "asyncio"


def run(control_fd: int, query_fd: int, event_loop: str) -> NoReturn:
    """Serve until the runner says exit or goes; then end at once."""
    # Die with the parent (the runner, or the fork server that forked this host).
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    # Ctrl-C at the terminal reaches the whole process group: the runner stops its hosts itself.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    gc.set_threshold(*GC_THRESHOLDS)
    with asyncio.Runner(loop_factory=event_loop_factory(event_loop)) as runner:
        code = runner.run(serve(control_fd, query_fd))
    sys.stderr.flush()
    # Not a normal exit: what the runtimes hold (sockets, files) is the kernel's to close, and
    # no interpreter shutdown may run code of a runtime that was not stopped.
    os._exit(code)


def host_main(control: socket.socket, query: socket.socket, log_dir: str, event_loop: str) -> NoReturn:
    """The entry of a host forked by the runner's fork server: standard output and error
    go to ``<log_dir>/host-<pid>.log``. The loop is the runner's choice, passed along: the
    fork server's environment is the one it started with."""
    log = os.open(os.path.join(log_dir, f"host-{os.getpid()}.log"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(log)
    run(control.detach(), query.detach(), event_loop)


def main(argv: list[str] | None = None) -> NoReturn:
    parser = argparse.ArgumentParser(prog="python -m joynr_sim.host", description=__doc__.splitlines()[0])
    parser.add_argument("--control-fd", type=int, required=True, help="the control channel's socket")
    parser.add_argument("--query-fd", type=int, required=True, help="the query channel's socket")
    parser.add_argument("--event-loop", choices=CHOICES, default=None,
                        help=f"the event loop (default: {EVENT_LOOP_ENV}, else uvloop)")
    args = parser.parse_args(argv)
    try:
        event_loop = args.event_loop or event_loop_choice()
    except ValueError as exc:
        parser.error(str(exc))
    run(args.control_fd, args.query_fd, event_loop)


if __name__ == "__main__":
    main()
