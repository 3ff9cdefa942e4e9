"""A host that joins a run from another machine: ``joynr-sim host --join RUN --broker ...``.

It is a supervisor: it announces itself on the run's control topics (``mqtt_channel``) and
starts a worker process for each host process the runner asks for (the same host process a
local run forks, ``process.host_process.HostProcess``), then relays the runner's requests to it and the
answers back. A crash the runner asks for is a SIGKILL of that worker: a real process death
on this machine, which the supervisor outlives to start the next one.

What it rewrites in a request is what belongs to this machine: every runtime of a run writes
under ``<--trace-dir>/<the run directory's name>`` (its trace, state and logs; the shared
directory the checks read, the runner's ``--out`` seen from here), and a cluster controller
listens for WebSockets on ``--address``. The workers of a runner session
whose will arrives ("gone") are killed; so are all of them when the supervisor stops
(SIGTERM or SIGINT), after which its announcement is cleared.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from pathlib import Path
from typing import Any

import msgspec

from ..process.host_process import HostProcess
from ..rpc import ops
from ..rpc.errors import HostGone, failure
from ..rpc.framing import MAX_ID, VERSION, ProtocolError, check_message, failure_to_wire, success
from .mqtt_channel import Channel, Topics, check_name, pack, unpack
from .ops import SUPERVISOR_OPS, End, Ended, Greet, Greeting, Spawn, Spawned

# A worker's answer is awaited at most this long; the runner bounds its own wait far below.
RELAY_TIMEOUT_S = 3600.0
MAX_WORKERS = 1024  # processes one host starts at most: a stranger's spawns are no fork bomb
MAX_WAITING = 10_000  # control messages waiting for the event loop; past that they are dropped


class Supervisor:
    def __init__(self, run: str, name: str, address: str, trace_dir: Path, broker: tuple[str, int],
                 credentials: tuple[str, str] | None, cores: int) -> None:
        self.topics = Topics(run)
        self.name = check_name("--name", name)
        self.address = address
        self.trace_dir = trace_dir
        self.cores = cores
        self.workers: dict[tuple[str, int], HostProcess] = {}  # (session, pid) -> worker
        self.drops = 0
        self._broker, self._credentials = broker, credentials
        self._loop: asyncio.AbstractEventLoop | None = None
        self._inbox: asyncio.Queue[tuple[str, bytes]] = asyncio.Queue(MAX_WAITING)
        self._tasks: set[asyncio.Task] = set()
        self._stop = asyncio.Event()

    # -- paho thread -> event loop ----------------------------------------------------------
    def _arrived(self, topic: str, payload: bytes) -> None:
        assert self._loop is not None
        self._loop.call_soon_threadsafe(self._enqueue, topic, payload)

    def _enqueue(self, topic: str, payload: bytes) -> None:
        try:
            self._inbox.put_nowait((topic, payload))
        except asyncio.QueueFull:
            self._drop("overload", topic, f"{MAX_WAITING} control messages wait already")

    def _drop(self, reason: str, topic: str, detail: str) -> None:
        """Recorded in this host's log: a stray or malformed control message, never answered."""
        self.drops += 1
        print(f"control.drop reason={reason} topic={topic[:200]!r} detail={detail[:200]!r}", file=sys.stderr,
              flush=True)

    async def serve(self) -> int:
        self._loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            self._loop.add_signal_handler(sig, self._stop.set)
        announcement = self.topics.host(self.name)
        channel = Channel(
            f"joynr-sim-host-{self.topics.run}-{self.name}"[:128], *self._broker, self._credentials,
            [f"{self.topics.root}/{self.name}/+/request", self.topics.session("+")], self._arrived,
            will=(announcement, b"", True),
        )
        await asyncio.to_thread(channel.connect)
        self.channel = channel
        channel.publish(announcement, pack({"v": VERSION, "host": self.name, "address": self.address,
                                            "pid": os.getpid(), "cores": self.cores}), retain=True)
        print(f"host {self.name}: joined run {self.topics.run!r} on {channel.where}, WebSockets on "
              f"{self.address}, traces in {self.trace_dir}", file=sys.stderr, flush=True)
        stop = self._loop.create_task(self._stop.wait())
        try:
            while not self._stop.is_set():
                get = self._loop.create_task(self._inbox.get())
                await asyncio.wait({get, stop}, return_when=asyncio.FIRST_COMPLETED)
                if not get.done():
                    get.cancel()
                    break
                self._dispatch(*get.result())
        finally:
            stop.cancel()
            for task in list(self._tasks):
                task.cancel()
            for key in list(self.workers):
                with contextlib.suppress(Exception):
                    await self.workers.pop(key).kill()
            channel.publish(announcement, b"", retain=True, wait_s=5.0)  # this host has left
            channel.close()
        return 0

    def _dispatch(self, topic: str, payload: bytes) -> None:
        parts = self.topics.parts(topic) or []
        if len(parts) == 2 and parts[0] == "sessions":
            if payload == b"gone":
                self._spawn_task(self._end_session(parts[1]))
            else:
                self._drop("malformed", topic, f"a session's will says gone, not {payload[:64]!r}")
            return
        if len(parts) != 3 or parts[0] != self.name or parts[2] != "request":
            self._drop("unknown-topic", topic, "")
            return
        session = parts[1]
        try:
            check_name("session", session)
            envelope = unpack(payload)
            if set(envelope) != {"v", "worker", "query", "message"} or envelope["v"] != VERSION \
                    or type(envelope["worker"]) is not int or not 0 <= envelope["worker"] < MAX_ID \
                    or type(envelope["query"]) is not bool:
                raise ProtocolError(f"envelope: expected {{v: {VERSION}, worker, query, message}}")
            message = check_message(envelope["message"])
        except (ValueError, ProtocolError) as exc:
            self._drop("malformed", topic, str(exc))
            return
        self._spawn_task(self._answer(session, envelope["worker"], envelope["query"], message))

    def _spawn_task(self, coro: Any) -> None:
        assert self._loop is not None
        task = self._loop.create_task(coro)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _answer(self, session: str, worker: int, query: bool, message: dict[str, Any]) -> None:
        msg_id = message["id"]
        relayed: HostProcess | None = None  # the worker whose write failure this answer passes on
        try:
            msg_id, name, op = ops.validate_request(message, SUPERVISOR_OPS if worker == 0 else ops.OPS)
            relayed = self.workers.get((session, op.worker if isinstance(op, End) else worker))
            if worker == 0:
                result = msgspec.to_builtins(await getattr(self, f"on_{name}")(session, op))
            else:
                result = await self._relay(session, worker, query, name, op)
            reply = success(msg_id, result)
        except Exception as exc:  # the runner's to see, by name
            reply = failure(msg_id, exc)
        if relayed is not None and relayed.write_failure is not None:
            reply["write_failure"] = failure_to_wire(relayed.write_failure)
        try:
            body = pack(reply)
        except Exception as exc:  # a result the wire cannot carry
            body = pack(failure(msg_id, ProtocolError(f"result: {type(exc).__name__}: {exc}")))
        self.channel.publish(self.topics.responses(self.name, session), body)

    # -- the host's own ops (worker 0) -------------------------------------------------------
    async def on_hello(self, session: str, op: Greet) -> Greeting:
        return {"pid": os.getpid(), "host": self.name, "address": self.address, "cores": self.cores}

    async def on_spawn(self, session: str, op: Spawn) -> Spawned:
        if len(self.workers) >= MAX_WORKERS:
            raise ProtocolError(f"spawn: this host runs {MAX_WORKERS} workers already")
        process = HostProcess(f"{self.name}/{session}", self.run_dir(op.run_dir) / "log")
        pid = await process.spawn()
        self.workers[(session, pid)] = process
        print(f"host {self.name}: worker {pid} for session {session}, log {process.log_path}", file=sys.stderr,
              flush=True)
        return {"worker": pid}

    async def on_end(self, session: str, op: End) -> Ended:
        process = self._worker(session, op.worker)
        if op.kill:
            await process.kill()  # a crash: SIGKILL, reaped before the answer
        else:
            await process.close()
        self.workers.pop((session, op.worker), None)  # unless its session ended meanwhile
        print(f"host {self.name}: worker {op.worker} ended, exit status {process.exitcode}", file=sys.stderr,
              flush=True)
        return {"exitcode": process.exitcode}

    def run_dir(self, runner_dir: object) -> Path:
        """Where a run's files go here: ``<trace dir>/<the runner's run directory's name>``,
        which is the runner's own when the trace dir is the runner's output folder."""
        name = Path(runner_dir).name if isinstance(runner_dir, str) else ""
        if name in ("", ".", "..") or len(name) > 255:
            raise ProtocolError(f"run_dir: expected a run directory, got {str(runner_dir)[:64]!r}")
        return self.trace_dir / name

    def _worker(self, session: str, worker: int) -> HostProcess:
        process = self.workers.get((session, worker))
        if process is None:
            raise ProtocolError(f"worker: no worker {worker} of this session on host {self.name!r}")
        return process

    async def _relay(self, session: str, worker: int, query: bool, name: str, op: ops.Op) -> Any:
        process = self._worker(session, worker)
        if not process.alive:
            raise HostGone(f"{self.name}: worker {worker} has ended")
        if isinstance(op, ops.Create):  # this machine's directory and address, whatever the runner sent
            spec = {**op.spec, "run_dir": str(self.run_dir(op.spec.get("run_dir")))}
            if op.kind == "cluster-controller":
                spec["ws_host"] = self.address
            op = ops.Create(runtime=op.runtime, kind=op.kind, spec=spec)
        if query:
            if not op.query:
                raise ProtocolError(f"op: {name!r} may wait on the network and is not asked on the query channel")
            ok, value = await asyncio.to_thread(process.query_exchange, name, op.arguments())
        else:
            ok, value = await process.exchange(name, op.arguments(), RELAY_TIMEOUT_S)
        if not ok:
            raise _Relayed(value)
        return value

    async def _end_session(self, session: str) -> None:
        for key in [k for k in self.workers if k[0] == session]:
            with contextlib.suppress(Exception):
                await self.workers.pop(key).kill()


class _Relayed(Exception):
    """A worker's error, passed on as it came."""

    def __init__(self, error: dict[str, Any]) -> None:
        super().__init__(error["message"])
        self.type_name = error["type"]
        self.error = error["error"]
