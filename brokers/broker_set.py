"""One MQTT broker per GBID, each its own OS process on a free loopback port.

    async with BrokerSet(["gbid-a", "gbid-b"], broker="amqtt", run_dir=run) as brokers:
        host, port = brokers.endpoint("gbid-a")
        username, password = brokers.credentials("cc-1")   # ("cc-1", its own password)
        await brokers.crash_broker("gbid-a")      # SIGKILL
        await brokers.restart_broker("gbid-a")    # same port

``broker`` is ``"amqtt"`` (embedded, the default), ``"mosquitto"``, or external brokers as
``"gbid1=mqtt://host:port,gbid2=mqtt://user:password@host:port"`` (nothing is started:
``start`` probes each once, the lifecycle methods refuse), parsed by
``brokers.spec.parse_broker``. Every start, stop, crash and restart is a ``life.*`` trace
event when a TraceWriter is given. A broker's output is appended to
``<run dir>/brokers/<gbid>.log``.

Logins (``brokers.access``): every client logs in as itself, its client id as username,
with a password derived from the set's secret (``<run dir>/brokers/secret``, owner-only);
it may subscribe within ``<client id>/#`` and publish to ``<any topic>/low``.
``admin_credentials`` are the simulator's own, for any client id and topic. amqtt checks
the derived passwords itself; Mosquitto's plugin is told each login before ``credentials``
returns (``brokers.kinds.MosquittoBrokers``).

Sessions: amqtt keeps them in memory, so a broker stop or crash loses every persistent
session and queued message; Mosquitto persists them in the run directory, saved after
every ``autosave`` counted changes (default 1: every change; see ``brokers.mosquitto_config`` for
what a SIGKILL loses under each). Either way a persistent session survives a *client's* crash.

The set keeps what every kind shares: the lifecycle of its broker processes (ports, locks,
start, stop, crash, restart and their trace events), their readiness and their logs; it asks
the strategy of its kind (``kinds``) for what differs: endpoints, logins, each kind's process.
Parsing the choice (``spec``), probing a broker (``probe``), the login and topic model
(``access``) and Mosquitto's files (``mosquitto``) live apart.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import socket
import time
import weakref
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING

from . import access
from .kinds import PROBE_TIMEOUT_S, Broker, BrokerError, Secret, choose, lookup
from .kinds import SECRET_ENV as SECRET_ENV  # the amqtt broker process imports it from here
from .listeners import listens_on
from .probe import connect_packet, probe
from .spec import GBID_RE, BrokerSpec, parse_broker

if TYPE_CHECKING:
    from joynr_sim.trace import TraceWriter

HOST = "127.0.0.1"
START_TIMEOUT_S = 30.0  # amqtt's imports alone take a few seconds on a busy 2-core machine
STOP_TIMEOUT_S = 10.0
PROBE_INTERVAL_S = 0.05
PORT_ATTEMPTS = 3  # a freshly chosen free port can be taken by someone else before we bind
LOG_TAIL_LINES = 20


# Ports handed to brokers of this process that are not stopped yet: runs side by side (the
# policy matrix's --jobs) must not pick one another's port between its choice and its bind,
# or a broker's readiness probe meets the other run's broker and is refused.
_PICKED: set[int] = set()


def _free_ports(count: int, exclude: set[int]) -> list[int]:
    """Ports the kernel hands out for loopback now; sockets stay open until all are chosen."""
    socks: list[socket.socket] = []
    ports: list[int] = []
    try:
        while len(ports) < count:
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            socks.append(s)
            s.bind((HOST, 0))
            port = s.getsockname()[1]
            if port not in exclude and port not in _PICKED:
                ports.append(port)
    finally:
        for s in socks:
            s.close()
    _PICKED.update(ports)
    return ports


def _kill_leftovers(pids: dict[str, int]) -> None:
    """Safety net (finalizer and interpreter exit): no broker outlives its BrokerSet."""
    for pid in list(pids.values()):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    pids.clear()


class BrokerSet:
    def __init__(
        self,
        gbids: list[str],
        broker: str = "amqtt",
        run_dir: Path | str | None = None,
        trace: TraceWriter | None = None,
        autosave: int | None = None,
    ) -> None:
        if isinstance(gbids, str) or not gbids:
            raise ValueError(f"gbids: expected a non-empty list of GBIDs, got {gbids!r}")
        for gbid in gbids:
            if not isinstance(gbid, str) or not GBID_RE.match(gbid):
                raise ValueError(f"gbids: bad GBID {gbid!r} (letters, digits, '.', '_', '-'; not empty)")
        if len(set(gbids)) != len(gbids):
            raise ValueError(f"gbids: duplicate GBID in {gbids!r}")
        if run_dir is None:
            raise ValueError("run_dir: required (broker logs, configs and persistence live there)")

        self.gbids: list[str] = list(gbids)
        self.run_dir = Path(run_dir).resolve()
        self.trace = trace
        self._spec = parse_broker(broker, gbids)
        self._brokers = {g: Broker(g, HOST, self.broker_dir / f"{g}.log") for g in gbids}
        self._secret = Secret(self.broker_dir)
        self._kind = choose(self._spec, self._brokers, self.broker_dir, self._secret, autosave)
        self.autosave = self._kind.autosave
        self._pids: dict[str, int] = {}
        self._finalizer = weakref.finalize(self, _kill_leftovers, self._pids)

    # -- accessors -------------------------------------------------------------------

    @property
    def kind(self) -> str:
        """``amqtt``, ``mosquitto`` or ``external``."""
        return self._kind.name

    @property
    def spec(self) -> BrokerSpec:
        """The parsed choice; ``spec.redacted()`` is what may be shown or recorded."""
        return self._spec

    @property
    def broker_dir(self) -> Path:
        return self.run_dir / "brokers"

    def log_path(self, gbid: str) -> Path:
        return self._get(gbid).log

    def endpoint(self, gbid: str) -> tuple[str, int]:
        return self._kind.endpoint(self._get(gbid))

    def url(self, gbid: str) -> str:
        host, port = self.endpoint(gbid)
        return f"mqtt://{host}:{port}"

    def credentials(self, client_id: str, gbid: str | None = None) -> tuple[str, str]:
        """(username, password) a client with ``client_id`` passes in its CONNECT to the
        broker of ``gbid`` (without ``gbid``: to any broker of the set).

        amqtt and Mosquitto: the client id itself and its own password; the login may
        use only that client id, subscribe within ``<client id>/#`` and publish to
        ``<any topic>/low`` (``brokers.access``). Any acceptable client id gets one, so a
        test's outsider can log in, confined to its own prefix. External: the user and
        password in the URL of ``gbid`` (without ``gbid``: of the first URL that has one),
        else the client id and an empty password (for a broker that allows anonymous access).
        """
        return self._kind.credentials(client_id, gbid)

    def admit(self, client_ids: list[str]) -> None:
        """Let these client ids in on every broker of the set, ahead of their first
        ``credentials``: on Mosquitto one request per broker for them all (the brokers in
        parallel) instead of one per login; before ``start``, the brokers read them when
        they start, which is cheapest (see ``brokers.mosquitto_control``). Every id is checked
        before any is added."""
        self._kind.admit([access.check_client_id(c) for c in client_ids])

    def admin_credentials(self, gbid: str | None = None) -> tuple[str, str]:
        """The simulator's administrative login: any client id, every topic (``#``)."""
        return self._kind.admin_credentials(gbid)

    def is_running(self, gbid: str) -> bool:
        """Whether the broker of ``gbid`` runs; an external one does, as far as we know."""
        return self._kind.running(gbid)

    def pid(self, gbid: str) -> int | None:
        b = self._get(gbid)
        return b.process.pid if b.running and b.process else None

    # -- lifecycle -------------------------------------------------------------------

    async def __aenter__(self) -> BrokerSet:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()

    async def start(self) -> None:
        """Start every broker that is not running; on any failure stop those it started.

        External brokers are not started but probed once (an MQTT CONNECT with the
        credentials of their URL), so one that cannot be reached is named at once."""
        await self._kind.probe()
        todo = [b for b in self._brokers.values() if not self.is_running(b.gbid)]  # external ones count as running
        fresh = self._assign_ports(todo)
        results = await asyncio.gather(
            *(self._start(b, "life.start", b in fresh) for b in todo), return_exceptions=True
        )
        errors = [r for r in results if isinstance(r, BaseException)]
        if errors:
            await asyncio.gather(*(self._stop(b) for b in todo))
            raise errors[0]

    async def stop(self) -> None:
        """Stop every running broker cleanly (SIGTERM, SIGKILL after a timeout)."""
        await asyncio.gather(*(self._stop(b) for b in self._brokers.values()))
        _PICKED.difference_update(b.port for b in self._brokers.values() if b.port is not None)

    async def start_broker(self, gbid: str) -> None:
        """Start one broker that is not running; it keeps its port if it had one."""
        b = self._managed(gbid, "start_broker")
        if b.running:
            raise BrokerError(f"gbid {gbid!r}: broker already running on port {b.port}")
        fresh = self._assign_ports([b])
        await self._start(b, "life.start", b in fresh)

    async def stop_broker(self, gbid: str) -> None:
        b = self._managed(gbid, "stop_broker")
        if not b.running:
            raise BrokerError(f"gbid {gbid!r}: broker not running")
        await self._stop(b)

    async def crash_broker(self, gbid: str) -> None:
        """SIGKILL: no goodbye to clients, no final save (Mosquitto keeps its last autosave)."""
        b = self._managed(gbid, "crash_broker")
        async with b.lock:
            if not b.running or b.process is None:
                raise BrokerError(f"gbid {gbid!r}: broker not running, nothing to crash")
            b.ready = False
            with contextlib.suppress(ProcessLookupError):
                b.process.kill()
            await b.process.wait()
            self._reap(b)
            self._emit("life.crash", b)

    async def restart_broker(self, gbid: str) -> None:
        """Start again on the same port, after a crash or a stop (a running one is stopped first)."""
        b = self._managed(gbid, "restart_broker")
        if b.port is None:
            raise BrokerError(f"gbid {gbid!r}: broker never started, nothing to restart")
        if b.running:
            await self._stop(b)
        await self._start(b, "life.restart", False)

    # -- internals -------------------------------------------------------------------

    def _get(self, gbid: str) -> Broker:
        return lookup(self._brokers, gbid)

    def _managed(self, gbid: str, op: str) -> Broker:
        b = self._get(gbid)
        self._kind.refuse(op, b)
        return b

    def _assign_ports(self, brokers: list[Broker]) -> list[Broker]:
        """Give a port to each broker that has none yet; returns those."""
        fresh = [b for b in brokers if b.port is None]
        taken = {b.port for b in self._brokers.values() if b.port is not None}
        for b, port in zip(fresh, _free_ports(len(fresh), taken)):
            b.port = port
        return fresh

    async def _start(self, b: Broker, ev: str, may_move_port: bool) -> None:
        async with b.lock:
            if b.running:
                return
            for attempt in range(1, PORT_ATTEMPTS + 1):
                try:
                    await self._spawn_and_wait(b)
                    break
                except _ExitedEarly as exc:
                    # Only a port we just picked may change; a restart must keep its port.
                    if not may_move_port or attempt == PORT_ATTEMPTS:
                        raise BrokerError(str(exc)) from None
                    taken = {x.port for x in self._brokers.values() if x.port is not None}
                    b.port = _free_ports(1, taken)[0]
            self._emit(ev, b)

    async def _spawn_and_wait(self, b: Broker) -> None:
        assert b.port is not None
        argv, env = self._kind.command(b)
        self.broker_dir.mkdir(parents=True, exist_ok=True)
        with open(b.log, "ab") as log:
            log.write(f"--- joynr-sim: starting {self._kind.name} broker for GBID {b.gbid} on port {b.port}\n".encode())
            log.flush()
            b.process = await asyncio.create_subprocess_exec(
                *argv,
                stdin=self._kind.stdin,
                stdout=log,
                stderr=asyncio.subprocess.STDOUT,
                env=env,
            )
        self._pids[b.gbid] = b.process.pid
        try:
            await self._wait_ready(b)
        except BaseException:
            await self._kill(b)
            raise
        b.ready = True
        await self._kind.started(b)

    async def _wait_ready(self, b: Broker) -> None:
        """Until the broker answers a CONNECT with CONNACK 0, within START_TIMEOUT_S."""
        assert b.process is not None and b.port is not None
        username = access.PROBE_USERNAME  # its own client id: one probe per broker at a time
        packet = connect_packet(username, username, self._secret.password(username))
        started = time.monotonic()
        deadline = started + START_TIMEOUT_S
        last_error = "no answer yet"
        while True:
            if b.process.returncode is not None:
                raise _ExitedEarly(
                    f"gbid {b.gbid!r}: {self._kind.name} broker exited with code {b.process.returncode} "
                    f"before accepting connections on port {b.port}; {b.log}:\n{_tail(b.log)}"
                )
            try:
                code = await asyncio.wait_for(probe(b.host, b.port, packet), PROBE_TIMEOUT_S)
            except (TimeoutError, OSError, asyncio.IncompleteReadError) as exc:
                last_error = f"{type(exc).__name__}: {exc}"
            else:
                if code == 0:
                    return
                if listens_on(b.process.pid, b.port) is not False:
                    raise BrokerError(
                        f"gbid {b.gbid!r}: {self._kind.name} broker on port {b.port} refused the probe's "
                        f"credentials (CONNACK return code {code}); {b.log}:\n{_tail(b.log)}"
                    )
                # Another process took the port between our choice and our bind, and its
                # broker refused us: ours fails its bind and exits (then a start on a fresh
                # port follows), or binds once the other lets go.
                last_error = f"port {b.port} is another process's, which refused the probe (CONNACK {code})"
            if time.monotonic() > deadline:
                raise BrokerError(
                    f"gbid {b.gbid!r}: {self._kind.name} broker did not accept an MQTT CONNECT on "
                    f"{b.host}:{b.port} within {START_TIMEOUT_S:.0f} s (last: {last_error}); "
                    f"{b.log}:\n{_tail(b.log)}"
                )
            await asyncio.sleep(PROBE_INTERVAL_S)

    async def _stop(self, b: Broker) -> None:
        async with b.lock:
            if not b.running or b.process is None:
                return
            b.ready = False
            with contextlib.suppress(ProcessLookupError):
                b.process.terminate()
            try:
                await asyncio.wait_for(b.process.wait(), STOP_TIMEOUT_S)
            except TimeoutError:
                await self._kill(b)
            self._reap(b)
            self._emit("life.stop", b)

    async def _kill(self, b: Broker) -> None:
        b.ready = False
        if b.process is not None and b.process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                b.process.kill()
            await b.process.wait()
        self._reap(b)

    def _reap(self, b: Broker) -> None:
        b.ready = False
        self._pids.pop(b.gbid, None)
        if b.process is not None and b.process.stdin is not None:
            b.process.stdin.close()

    def _emit(self, ev: str, b: Broker) -> None:
        if self.trace is not None:
            self.trace.emit(ev, target=b.target, target_kind="broker", gbid=b.gbid, port=b.port)


class _ExitedEarly(BrokerError):
    pass


def _tail(path: Path, lines: int = LOG_TAIL_LINES) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        return f"(cannot read log: {exc})"
    return "\n".join(text.splitlines()[-lines:]) or "(log is empty)"
