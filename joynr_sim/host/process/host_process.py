"""A host process on this machine as the runner holds it: started, asked, killed.

The control channel and the query channel are each a socket pair: ``exchange`` sends on the
control channel and waits for the answer without holding up the event loop;
``query_exchange`` asks on the blocking query channel and returns at once, for the questions
a step asks without awaiting (a routing entry, whether a connection is up). Every answer is
validated; a host that sends what breaks the protocol, does not answer in time or dies fails
what waits on it with a clear error and is killed, never left hanging.

A write failure an answer carries (``rpc.framing``) is kept as ``write_failure`` and handed
to the run's ``Failures`` (``failures``, set by the pool that made the process; else the run
that watches the failure's path).
"""

from __future__ import annotations

import asyncio
import itertools
import os
import signal
import socket
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ... import write_failure as write_failures
from ...write_failure import Failures, WriteFailure
from ..rpc import ops
from ..rpc.errors import RUNTIME_WENT_DOWN, HostGone
from ..rpc.framing import (
    HEADER,
    ProtocolError,
    decode_body,
    encode_frame,
    frame_length,
    read_frame,
    request,
    validate_response,
    write_failure_of,
)
from ..rpc.host_handle import HostHandle
from .children import Child, ExecutedChild, ForkedChild
from .event_loop import event_loop_choice

EXIT_TIMEOUT_S = 10.0  # for a host to end once it answered exit
# The directory holding joynr_sim, brokers and trace_schema: a host imports what the runner does.
_SOURCE_ROOT = str(Path(__file__).resolve().parents[3])


class HostProcess(HostHandle):
    def __init__(self, name: str, log_dir: Path) -> None:
        """Its standard error goes to ``<log_dir>/host-<pid>.log`` (removed if it stays empty)."""
        self.name, self.log_dir = name, log_dir
        self.address = "127.0.0.1"  # where its cluster controllers listen for WebSockets
        self.event_loop = event_loop_choice()  # the runner's environment, read once per host
        self.log_path: Path | None = None
        self.pid: int | None = None
        self._child: Child | None = None
        self._writer: asyncio.StreamWriter | None = None
        self._query: socket.socket | None = None
        self._query_lock = threading.Lock()  # a clock advance may come from another thread
        self._ids = itertools.count(1)  # id 0 is the channel's own: a protocol break
        self._pending: dict[int, asyncio.Future] = {}
        self._reader: asyncio.Task | None = None
        self._broken: BaseException | None = None
        self.failures: Failures | None = None  # the run's, told of a write failure the host reports
        self.write_failure: WriteFailure | None = None  # the first the host reported
        # Told when the host's control channel ends without the runner ending it (a host that
        # died on its own, or with the node it ran on); None: nobody is.
        self.on_lost: Callable[[HostProcess], None] | None = None
        self._ending = False  # the runner asked it to exit, or killed it

    def _heard(self, message: dict[str, Any]) -> None:
        """Keep and pass on the write failure an answer carries."""
        failure = write_failure_of(message)
        if failure is None:
            return
        if self.write_failure is None:
            self.write_failure = failure
        if self.failures is not None:
            self.failures.add(failure)
        else:
            write_failures.report(failure)

    @property
    def alive(self) -> bool:
        return self._child is not None and self._child.alive()

    @property
    def exitcode(self) -> int | None:
        return self._child.exitcode if self._child is not None else None

    def command(self) -> list[str] | None:
        """The program to run as the host, given ``--control-fd`` and ``--query-fd``; None
        (the default) forks it from the fork server instead."""
        return None

    async def spawn(self) -> int:
        """Start the process and greet it; its pid."""
        control, query = await self._start_child()
        query.settimeout(ops.QUERY_TIMEOUT_S)
        self._query = query
        reader, self._writer = await asyncio.open_connection(sock=control, limit=2**16)
        self._reader = asyncio.get_running_loop().create_task(self._read_answers(reader))
        try:
            hello = await self.hello()
            if hello["pid"] != self.pid:
                raise ProtocolError(f"hello: expected this process's pid {self.pid}, got {hello!r}")
            if hello["event_loop"] != self.event_loop:
                raise ProtocolError(f"hello: expected a host on {self.event_loop}, got {hello!r}")
        except BaseException:
            await self.kill()
            raise
        return self.pid

    async def _start_child(self) -> tuple[socket.socket, socket.socket]:
        """Start the host on this machine (``_child``, ``pid``, ``log_path``): the runner's
        ends of its control and query channels."""
        control, control_child = socket.socketpair()
        query, query_child = socket.socketpair()
        self.log_dir.mkdir(parents=True, exist_ok=True)
        starting = self.log_dir / f".host-starting-{os.getpid()}-{id(self):x}.log"
        try:
            command = self.command()
            if command is None:
                # Off the event loop: the first fork waits for the fork server to start.
                self._child = await asyncio.to_thread(ForkedChild, control_child, query_child, self.log_dir,
                                                      self.event_loop)
            else:
                fds = (control_child.fileno(), query_child.fileno())
                env = dict(os.environ)
                env["PYTHONPATH"] = os.pathsep.join(p for p in (_SOURCE_ROOT, env.get("PYTHONPATH")) if p)
                with open(starting, "ab") as log:
                    self._child = ExecutedChild(await asyncio.create_subprocess_exec(
                        *command, "--control-fd", str(fds[0]), "--query-fd", str(fds[1]),
                        "--event-loop", self.event_loop,
                        stdin=asyncio.subprocess.DEVNULL, stdout=log, stderr=log, pass_fds=fds, env=env,
                    ))
        except BaseException:
            control.close()
            query.close()
            starting.unlink(missing_ok=True)
            raise
        finally:
            control_child.close()
            query_child.close()
        self.pid = self._child.pid
        self.log_path = self.log_dir / f"host-{self.pid}.log"
        if starting.exists():
            os.replace(starting, self.log_path)
        return control, query

    # -- the control channel ----------------------------------------------------------
    async def exchange(self, op: str, args: dict[str, Any],
                       timeout: float = ops.REQUEST_TIMEOUT_S) -> tuple[bool, Any]:
        if self._broken is not None:
            raise self._broken
        if not self.alive:
            raise HostGone(f"{self.name}: host process {self.pid} has ended")
        assert self._writer is not None
        msg_id = next(self._ids)
        future = asyncio.get_running_loop().create_future()
        self._pending[msg_id] = future
        try:
            self._writer.write(encode_frame(request(msg_id, op, args)))
            await self._writer.drain()
            answer = await asyncio.wait_for(future, timeout)
        except (ConnectionError, BrokenPipeError):
            raise HostGone(f"{self.name}: host process {self.pid} has ended") from None
        except TimeoutError:
            raise TimeoutError(f"{self.name}: host process {self.pid} did not answer {op} within {timeout:g} s") \
                from None
        finally:
            self._pending.pop(msg_id, None)
        return answer

    async def _read_answers(self, reader: asyncio.StreamReader) -> None:
        problem: BaseException
        try:
            while True:
                message = await read_frame(reader)
                if message is None:
                    problem = HostGone(RUNTIME_WENT_DOWN)
                    break
                msg_id, ok, value = validate_response(message)
                self._heard(message)
                if msg_id == 0:
                    problem = ProtocolError(f"{self.name}: the host refused the channel: {value.get('message')}")
                    self._broken = problem
                    break
                future = self._pending.get(msg_id)
                if future is not None and not future.done():
                    future.set_result((ok, value))
        except ProtocolError as exc:
            problem = ProtocolError(f"{self.name}: host process {self.pid} broke the protocol: {exc}")
            self._broken = problem
            self._signal(signal.SIGKILL)
        except (ConnectionError, OSError):
            problem = HostGone(RUNTIME_WENT_DOWN)
        for future in self._pending.values():
            if not future.done():
                future.set_exception(problem)
        if not self._ending and self.on_lost is not None:
            self.on_lost(self)

    # -- the query channel ------------------------------------------------------------
    def query_exchange(self, op: str, args: dict[str, Any]) -> tuple[bool, Any]:
        if self._broken is not None:
            raise self._broken
        if self._query is None or not self.alive:
            raise HostGone(f"{self.name}: host process {self.pid} has ended")
        with self._query_lock:
            msg_id = next(self._ids)
            try:
                self._query.sendall(encode_frame(request(msg_id, op, args)))
                length = frame_length(self._receive(HEADER.size))
                message = decode_body(self._receive(length))
                got, ok, value = validate_response(message)
                self._heard(message)
            except TimeoutError:
                raise TimeoutError(f"{self.name}: host process {self.pid} did not answer {op} within "
                                   f"{ops.QUERY_TIMEOUT_S:g} s") from None
            except ProtocolError as exc:
                self._broken = ProtocolError(f"{self.name}: host process {self.pid} broke the protocol: {exc}")
                self._signal(signal.SIGKILL)
                raise self._broken from None
            except OSError as exc:
                raise HostGone(f"{self.name}: host process {self.pid}: {exc}") from None
        if got != msg_id:
            self._broken = ProtocolError(f"{self.name}: answer {got} to query {msg_id}")
            self._signal(signal.SIGKILL)
            raise self._broken
        return ok, value

    def _receive(self, n: int) -> bytes:
        assert self._query is not None
        chunks, remaining = [], n
        while remaining:
            chunk = self._query.recv(remaining)
            if not chunk:
                raise HostGone(f"{self.name}: host process {self.pid} has ended")
            chunks.append(chunk)
            remaining -= len(chunk)
        return b"".join(chunks)

    # -- the end ----------------------------------------------------------------------
    def _signal(self, sig: int) -> None:
        self._ending = True
        if self.alive and self.pid is not None:
            try:
                os.kill(self.pid, sig)
            except ProcessLookupError:
                pass

    async def kill(self) -> int | None:
        """SIGKILL, and wait until the process is gone: its pid."""
        self._signal(signal.SIGKILL)
        await self._reap()
        return self.pid

    async def close(self) -> None:
        """Ask the host to exit (it stops its runtimes); kill it if it does not in time."""
        self._ending = True
        if self.alive:
            try:
                await self.exit()
                assert self._child is not None
                await asyncio.wait_for(self._child.wait(), EXIT_TIMEOUT_S)
            except Exception:
                self._signal(signal.SIGKILL)
        await self._reap()

    async def _reap(self) -> None:
        if self._child is not None:
            await self._child.wait()
        if self._writer is not None:
            self._writer.close()
        if self._reader is not None:
            try:
                await asyncio.wait_for(self._reader, EXIT_TIMEOUT_S)
            except (TimeoutError, asyncio.CancelledError):
                self._reader.cancel()
        if self._query is not None:
            self._query.close()
            self._query = None
        if self.log_path is not None and self.log_path.exists() and self.log_path.stat().st_size == 0:
            self.log_path.unlink()  # nothing was said: no file to look at
