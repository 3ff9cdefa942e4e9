"""The runner's side of a run that spans machines: ``Simulation(join=RUN, join_hosts=N)``.

``JoinedHosts`` connects to the run's first broker as a session of its own, waits (bounded
by ``JOIN_TIMEOUT_S``) until N hosts have announced themselves on the run's control topics
(``mqtt_channel``; a host started by ``joynr-sim host --join RUN``), greets each, and then
stands where the local host pool does: ``take(name)`` starts a worker process on the host
``name`` is placed on and hands out a ``JoinedProcess``, which answers what a
``HostProcess`` does (requests, the blocking query channel, kill, close) over MQTT.

Placement: a cluster controller (or a host group) goes to the next joined host in turn and
a libjoynr runtime to its cluster controller's host, so each cluster controller and its
applications share a machine. Every answer is validated (topic, session, host, id, frame)
before it reaches a waiter; what fails is a recorded drop (``drops``, and one line in
``<run dir>/log/control.log``) and the run goes on. The session's will ("gone") makes the
hosts kill its workers should the runner die.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import threading
import time
import uuid
from pathlib import Path
from typing import Any, NoReturn

from ... import write_failure as write_failures
from ...write_failure import Failures
from ..rpc import ops
from ..rpc.errors import HostGone, raise_remote
from ..rpc.framing import VERSION, ProtocolError, check_message, request, validate_response, write_failure_of
from ..rpc.host_handle import HostHandle
from ..rpc.specs import check_ip
from .mqtt_channel import Channel, Topics, check_name, pack, unpack
from .ops import End, Greet, Spawn

JOIN_TIMEOUT_S = 60.0


class JoinedHost:
    def __init__(self, name: str, address: str, pid: int, cores: int) -> None:
        self.name, self.address, self.pid, self.cores = name, address, pid, cores


def _announcement(host: str, payload: bytes) -> JoinedHost:
    data = unpack(payload)
    if set(data) != {"v", "host", "address", "pid", "cores"} or data["v"] != VERSION or data["host"] != host \
            or type(data["pid"]) is not int or type(data["cores"]) is not int or not 1 <= data["cores"] <= 4096:
        raise ProtocolError(f"announcement: expected {{v: {VERSION}, host: {host!r}, address, pid, cores}}")
    return JoinedHost(host, check_ip("address", data["address"]), data["pid"], data["cores"])


class _Waiter:
    """One request's answer, awaited on the event loop or by a blocked thread."""

    def __init__(self, host: str, loop: asyncio.AbstractEventLoop | None) -> None:
        self.host = host
        self.future = loop.create_future() if loop is not None else None
        self._loop = loop
        self.event = threading.Event()
        self.answer: tuple[bool, Any] | None = None

    def deliver(self, answer: tuple[bool, Any]) -> None:
        self.answer = answer
        if self._loop is not None:
            self._loop.call_soon_threadsafe(lambda: self.future.done() or self.future.set_result(answer))
        self.event.set()


class JoinedHosts:
    def __init__(self, run: str, expected: int, brokers: Any, gbid: str, run_dir: Path,
                 timeout: float = JOIN_TIMEOUT_S, failures: Failures | None = None) -> None:
        """failures: the run's, told of a write failure a worker reports (its files are on
        its own machine, under paths the runner does not watch)."""
        if type(expected) is not int or expected < 1:
            raise ValueError(f"join_hosts: expected a whole number from 1, got {expected!r}")
        self.topics = Topics(run)
        self.expected = expected
        self.timeout = timeout
        self.session = uuid.uuid4().hex[:12]
        self.hosts: dict[str, JoinedHost] = {}  # announced, by name
        self.drops: list[dict[str, str]] = []
        self._brokers, self._gbid, self.run_dir = brokers, gbid, run_dir
        self.failures = failures
        self._log_dir = run_dir / "log"
        self._channel: Channel | None = None
        self._ids = itertools.count(1)
        self._pending: dict[int, _Waiter] = {}
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self.chosen: list[str] = []  # the hosts this session places runtimes on
        self._placed: dict[str, str] = {}  # runtime or group name -> host name
        self._turn = itertools.count()
        self._taken: list[JoinedProcess] = []

    # -- paho thread ----------------------------------------------------------------------
    def _arrived(self, topic: str, payload: bytes) -> None:
        parts = self.topics.parts(topic) or []
        try:
            if len(parts) == 2 and parts[0] == "hosts":
                host = check_name("host", parts[1])
                with self._changed:
                    if payload:
                        self.hosts[host] = _announcement(host, payload)
                    else:
                        self.hosts.pop(host, None)  # it left, or its will says it died
                    self._changed.notify_all()
                return
            if len(parts) != 3 or parts[1] != self.session or parts[2] != "response":
                self._drop("unknown-topic", topic, "")
                return
            message = check_message(unpack(payload))
            msg_id, ok, value = validate_response(message)
            failure = write_failure_of(message)
            if failure is not None:
                (self.failures.add if self.failures is not None else write_failures.report)(failure)
            with self._lock:
                waiter = self._pending.get(msg_id)
            if waiter is None or waiter.host != parts[0]:
                raise ProtocolError(f"id: {msg_id} is no request of this session to host {parts[0][:64]!r}")
            waiter.deliver((ok, value))
        except (ValueError, ProtocolError) as exc:
            self._drop("malformed", topic, str(exc))

    def _drop(self, reason: str, topic: str, detail: str) -> None:
        record = {"reason": reason, "topic": topic[:200], "detail": detail[:200]}
        self.drops.append(record)
        self._log_dir.mkdir(parents=True, exist_ok=True)
        with open(self._log_dir / "control.log", "a") as log:
            log.write(json.dumps({"ev": "control.drop", **record}) + "\n")

    # -- joining ----------------------------------------------------------------------------
    async def connect(self) -> None:
        """Connected, and N hosts have joined and answered; a clear error otherwise."""
        host, port = self._brokers.endpoint(self._gbid)
        client_id = f"joynr-sim-runner-{self.session}"
        channel = Channel(
            client_id, host, port, self._brokers.credentials(client_id, self._gbid),
            [self.topics.host("+"), self.topics.responses("+", self.session)], self._arrived,
            will=(self.topics.session(self.session), b"gone", False),
        )
        await asyncio.to_thread(channel.connect)
        self._channel = channel
        if not await asyncio.to_thread(self._wait_for_hosts):
            joined = sorted(self.hosts)
            raise TimeoutError(
                f"join: {len(joined)} of {self.expected} hosts joined run {self.topics.run!r} within "
                f"{self.timeout:g} s ({', '.join(joined) or 'none'}); start each with `joynr-sim host --join "
                f"{self.topics.run} --broker {self._gbid}=mqtt://{host}:{port} --address ADDRESS`")
        with self._lock:
            self.chosen = sorted(self.hosts)[:self.expected]  # more joined: the first by name
        for name in self.chosen:
            hello = await self.greet(name)
            if hello["host"] != name:
                raise ProtocolError(f"join: host {name!r} answered hello with {hello!r}")

    def _wait_for_hosts(self) -> bool:
        deadline = time.monotonic() + self.timeout
        with self._changed:
            while len(self.hosts) < self.expected:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._changed.wait(left)
        return True

    # -- asking ----------------------------------------------------------------------------
    def _send(self, host: str, worker: int, op: str, args: dict[str, Any], query: bool,
              loop: asyncio.AbstractEventLoop | None) -> tuple[int, _Waiter]:
        if self._channel is None:
            raise HostGone("join: the control channel is closed")
        msg_id = next(self._ids)
        waiter = _Waiter(host, loop)
        with self._lock:
            self._pending[msg_id] = waiter
        envelope = {"v": VERSION, "worker": worker, "query": query, "message": request(msg_id, op, args)}
        self._channel.publish(self.topics.requests(host, self.session), pack(envelope))
        return msg_id, waiter

    async def exchange(self, host: str, worker: int, op: str, args: dict[str, Any], timeout: float) -> tuple[bool, Any]:
        msg_id, waiter = self._send(host, worker, op, args, False, asyncio.get_running_loop())
        try:
            assert waiter.future is not None
            return await asyncio.wait_for(waiter.future, timeout)
        except TimeoutError:
            raise TimeoutError(f"join: host {host!r} did not answer {op} within {timeout:g} s") from None
        finally:
            with self._lock:
                self._pending.pop(msg_id, None)

    def query_exchange(self, host: str, worker: int, op: str, args: dict[str, Any]) -> tuple[bool, Any]:
        """Blocking, bounded by ``QUERY_TIMEOUT_S``: the answer arrives on paho's thread."""
        msg_id, waiter = self._send(host, worker, op, args, True, None)
        try:
            if not waiter.event.wait(ops.QUERY_TIMEOUT_S):
                raise TimeoutError(f"join: host {host!r} did not answer {op} within {ops.QUERY_TIMEOUT_S:g} s")
            assert waiter.answer is not None
            return waiter.answer
        finally:
            with self._lock:
                self._pending.pop(msg_id, None)

    async def ask(self, host: str, op: ops.Op) -> Any:
        """An op of the joined host itself (``join.ops``), its answer checked."""
        ok, value = await self.exchange(host, 0, ops.name_of(op), op.arguments(), op.timeout_s())
        return op.answer(value) if ok else raise_remote(value)

    @ops.asks(Greet)
    async def greet(self, host: str) -> Any:
        return await self.ask(host, Greet(version=VERSION))

    # -- the pool ----------------------------------------------------------------------------
    def place(self, name: str, like: str | None = None) -> str:
        """The host ``name`` runs on: ``like``'s, else the next in turn."""
        if name not in self._placed:
            names = self.chosen
            if not names:
                raise HostGone("join: no host has joined this run")
            self._placed[name] = self._placed[like] if like in self._placed else names[next(self._turn) % len(names)]
        return self._placed[name]

    def fill(self) -> None:
        """Workers start on demand: nothing to start ahead."""

    async def take(self, name: str) -> JoinedProcess:
        host = self.place(name)
        with self._lock:
            joined = self.hosts.get(host)
        if joined is None:
            raise HostGone(f"join: host {host!r} has left run {self.topics.run!r}")
        process = JoinedProcess(self, host, joined.address, name)
        await process.spawn()
        self._taken.append(process)
        return process

    async def close(self) -> None:
        """Kill what this session still has on its hosts, then say it is gone."""
        for process in self._taken:
            if process.alive:
                try:
                    await process.kill()
                except Exception:  # whatever it was, the "gone" below ends it on its host
                    pass
        channel, self._channel = self._channel, None
        if channel is not None:
            channel.publish(self.topics.session(self.session), b"gone", wait_s=ops.EXIT_TIMEOUT_S)
            await asyncio.to_thread(channel.close)


class JoinedProcess(HostHandle):
    """A worker process on a joined host, as the runner holds a local host process."""

    log_path = None  # its log is on its host, under the host's --trace-dir

    def __init__(self, hosts: JoinedHosts, host: str, address: str, name: str) -> None:
        self.hosts, self.host, self.address, self.name = hosts, host, address, name
        self.pid: int | None = None
        self.exitcode: int | None = None
        self._ended = False

    @property
    def alive(self) -> bool:
        return self.pid is not None and not self._ended

    @ops.asks(Spawn)
    async def spawn(self) -> int:
        self.pid = (await self.hosts.ask(self.host, Spawn(run_dir=str(self.hosts.run_dir))))["worker"]
        return self.pid

    def refused(self, error: dict[str, Any]) -> NoReturn:
        if error["type"] == "HostGone":
            self._ended = True
            raise HostGone(f"{self.name}: worker {self.pid} on host {self.host!r} has ended")
        raise_remote(error)

    def _check(self) -> int:
        if not self.alive or self.pid is None:
            raise HostGone(f"{self.name}: worker {self.pid} on host {self.host!r} has ended")
        return self.pid

    async def exchange(self, op: str, args: dict[str, Any],
                       timeout: float = ops.REQUEST_TIMEOUT_S) -> tuple[bool, Any]:
        return await self.hosts.exchange(self.host, self._check(), op, args, timeout)

    def query_exchange(self, op: str, args: dict[str, Any]) -> tuple[bool, Any]:
        return self.hosts.query_exchange(self.host, self._check(), op, args)

    @ops.asks(End)
    async def _end(self, kill: bool) -> int | None:
        if self.alive:
            self._ended = True
            assert self.pid is not None
            self.exitcode = (await self.hosts.ask(self.host, End(worker=self.pid, kill=kill)))["exitcode"]
        return self.pid

    async def kill(self) -> int | None:
        """SIGKILL of the worker on its host, reaped before this returns: its pid."""
        return await self._end(kill=True)

    async def close(self) -> None:
        await self._end(kill=False)
