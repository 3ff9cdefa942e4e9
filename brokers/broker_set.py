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
the derived passwords itself; Mosquitto's dynamic security plugin holds every login, so a
client id it has not seen is sent to the running brokers (over the plugin's control topic,
no reload) before ``credentials`` returns, and written into the plugin's config for a
broker that starts; logins asked for from several threads meanwhile share one request
(``brokers.mosquitto`` says why not a password file).

Sessions: amqtt keeps them in memory, so a broker stop or crash loses every persistent
session and queued message; Mosquitto persists them in the run directory, saved after
every ``autosave`` counted changes (default 1: every change; see ``brokers.mosquitto`` for
what a SIGKILL loses under each). Either way a persistent session survives a *client's* crash.

Longer than 400 lines because it is one class, the lifecycle of a set of broker
processes (ports, locks, start, stop, crash, restart and their trace events, and adding
Mosquitto's logins to running processes, which depends on that lifecycle),
which reads best in one place. Parsing the choice (``spec``), probing a broker (``probe``),
the login and topic model (``access``) and Mosquitto's files (``mosquitto``) live apart.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import signal
import socket
import sys
import threading
import time
import weakref
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING

from . import access, mosquitto
from .listeners import listens_on
from .probe import CONNACK_CODES, connect_packet, probe, reason
from .spec import EXTERNAL, GBID_RE, BrokerSpec, ExternalBroker, parse_broker

if TYPE_CHECKING:
    from joynr_sim.trace import TraceWriter

HOST = "127.0.0.1"
START_TIMEOUT_S = 30.0  # amqtt's imports alone take a few seconds on a busy 2-core machine
STOP_TIMEOUT_S = 10.0
PROBE_TIMEOUT_S = 2.0
PROBE_INTERVAL_S = 0.05
PORT_ATTEMPTS = 3  # a freshly chosen free port can be taken by someone else before we bind
LOG_TAIL_LINES = 20
SECRET_FILE = "secret"
SECRET_ENV = "JOYNR_SIM_BROKER_SECRET"  # how an amqtt broker process gets the secret

_PROJECT_ROOT = Path(__file__).resolve().parent.parent


class BrokerError(RuntimeError):
    """A broker could not be started, stopped or reached, or the operation does not apply."""


@dataclass
class _Broker:
    gbid: str
    host: str
    port: int | None = None
    process: asyncio.subprocess.Process | None = None
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    ready: bool = False  # answered a CONNECT since it was started: it takes new logins
    loaded: int = -1  # Mosquitto: the generation of the logins it has
    # Mosquitto: held while its plugin config is written and while logins are sent to it.
    logins_lock: threading.Lock = field(default_factory=threading.Lock)

    @property
    def target(self) -> str:
        return f"broker-{self.gbid}"

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.returncode is None


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
        self._kind = self._spec.kind
        self._external: dict[str, ExternalBroker] = self._spec.external
        if autosave is not None and self._kind != "mosquitto":
            raise ValueError(f"autosave: Mosquitto's save interval, for broker='mosquitto' only, not {self._kind}")
        self.autosave = mosquitto.check_autosave(mosquitto.AUTOSAVE_CHANGES if autosave is None else autosave)
        self._mosquitto_binary = mosquitto.find_binary() if self._kind == "mosquitto" else None
        self._mosquitto_plugin = (mosquitto.find_plugin(self._mosquitto_binary)
                                  if self._mosquitto_binary is not None else None)
        self._brokers = {g: _Broker(g, HOST) for g in gbids}
        self._secret: str | None = None
        self._accounts: mosquitto.Accounts | None = None
        # Guards the secret and Mosquitto's accounts: credentials are asked for from any thread.
        # A broker's logins_lock is taken before it.
        self._accounts_lock = threading.Lock()
        self._pids: dict[str, int] = {}
        self._finalizer = weakref.finalize(self, _kill_leftovers, self._pids)

    # -- accessors -------------------------------------------------------------------

    @property
    def kind(self) -> str:
        """``amqtt``, ``mosquitto`` or ``external``."""
        return self._kind

    @property
    def spec(self) -> BrokerSpec:
        """The parsed choice; ``spec.redacted()`` is what may be shown or recorded."""
        return self._spec

    @property
    def broker_dir(self) -> Path:
        return self.run_dir / "brokers"

    def log_path(self, gbid: str) -> Path:
        self._get(gbid)
        return self.broker_dir / f"{gbid}.log"

    def endpoint(self, gbid: str) -> tuple[str, int]:
        if self._kind == EXTERNAL:
            external = self._external[self._get(gbid).gbid]
            return external.host, external.port
        b = self._get(gbid)
        if b.port is None:
            raise BrokerError(f"gbid {gbid!r}: broker not started yet, it has no port")
        return b.host, b.port

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
        if self._kind == EXTERNAL:
            if not isinstance(client_id, str) or not client_id:
                raise ValueError(f"client_id: expected a non-empty string, got {client_id!r}")
            urls = [self._external[self._get(gbid).gbid]] if gbid is not None else self._external.values()
            for external in urls:
                if external.username is not None:
                    return external.username, external.password or ""
            return client_id, ""
        access.check_client_id(client_id)
        return self._login(client_id, gbid)

    def admit(self, client_ids: list[str]) -> None:
        """Let these client ids in on every broker of the set, ahead of their first
        ``credentials``: on Mosquitto one request per broker for them all (the brokers in
        parallel) instead of one per login; before ``start``, the brokers read them when
        they start, which is cheapest (see ``brokers.mosquitto``). Every id is checked
        before any is added."""
        checked = [access.check_client_id(c) for c in client_ids]
        if self._kind != "mosquitto":
            return
        secret = self._ensure_secret()
        with self._accounts_lock:
            accounts = self._mosquitto_accounts(secret)
            wanted = max((accounts.add(c) for c in checked), default=-1)
        self._provide_all(list(self._brokers.values()), accounts, wanted)

    def admin_credentials(self, gbid: str | None = None) -> tuple[str, str]:
        """The simulator's administrative login: any client id, every topic (``#``)."""
        if self._kind == EXTERNAL:
            raise BrokerError("admin_credentials: the brokers are external; joynr-sim has no login of its own there")
        return self._login(access.ADMIN_USERNAME, gbid)

    def is_running(self, gbid: str) -> bool:
        if self._kind == EXTERNAL:
            return True  # as far as we know; we do not manage it
        return self._get(gbid).running

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
        if self._kind == EXTERNAL:
            await asyncio.gather(*(self._probe_external(g) for g in self.gbids))
            return
        todo = [b for b in self._brokers.values() if not b.running]
        fresh = self._assign_ports(todo)
        results = await asyncio.gather(
            *(self._start(b, "life.start", b in fresh) for b in todo), return_exceptions=True
        )
        errors = [r for r in results if isinstance(r, BaseException)]
        if errors:
            await asyncio.gather(*(self._stop(b) for b in todo))
            raise errors[0]

    async def _probe_external(self, gbid: str) -> None:
        external = self._external[gbid]
        client_id = f"joynr-sim-probe-{gbid}-{secrets.token_hex(4)}"
        packet = connect_packet(client_id, *self.credentials(client_id, gbid))
        where = f"gbid {gbid!r}: external broker {external.url()}"
        try:
            code = await asyncio.wait_for(probe(external.host, external.port, packet), PROBE_TIMEOUT_S)
        except TimeoutError:
            raise BrokerError(f"{where}: no CONNACK within {PROBE_TIMEOUT_S:g} s") from None
        except (OSError, asyncio.IncompleteReadError) as exc:
            raise BrokerError(f"{where} cannot be reached: {reason(exc)}") from None
        if code != 0:
            raise BrokerError(f"{where} refused the connection (CONNACK return code {code}: "
                              f"{CONNACK_CODES.get(code, 'unknown')})")

    async def stop(self) -> None:
        """Stop every running broker cleanly (SIGTERM, SIGKILL after a timeout)."""
        if self._kind == EXTERNAL:
            return
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

    def _get(self, gbid: str) -> _Broker:
        try:
            return self._brokers[gbid]
        except (KeyError, TypeError):
            raise ValueError(f"gbid: unknown GBID {gbid!r}; this broker set has {self.gbids}") from None

    def _managed(self, gbid: str, op: str) -> _Broker:
        b = self._get(gbid)
        if self._kind == EXTERNAL:
            raise BrokerError(
                f"{op}({gbid!r}): the broker for this GBID is external ({self.url(gbid)}); "
                "joynr-sim does not start, stop or crash external brokers"
            )
        return b

    def _assign_ports(self, brokers: list[_Broker]) -> list[_Broker]:
        """Give a port to each broker that has none yet; returns those."""
        fresh = [b for b in brokers if b.port is None]
        taken = {b.port for b in self._brokers.values() if b.port is not None}
        for b, port in zip(fresh, _free_ports(len(fresh), taken)):
            b.port = port
        return fresh

    def _ensure_secret(self) -> str:
        """The secret every password derives from, kept in the run dir so a new set on
        it (a broker restarted by a new process) lets the same clients in."""
        with self._accounts_lock:
            if self._secret is None:
                path = self.broker_dir / SECRET_FILE
                self.broker_dir.mkdir(parents=True, exist_ok=True)
                if path.exists():
                    self._secret = path.read_text(encoding="utf-8").strip()
                if not self._secret:
                    self._secret = secrets.token_hex(16)
                    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
                    with os.fdopen(fd, "w", encoding="utf-8") as f:
                        f.write(self._secret + "\n")
            return self._secret

    def _login(self, username: str, gbid: str | None) -> tuple[str, str]:
        """(username, its password); on Mosquitto, once the brokers it may use let it in."""
        brokers = [self._get(gbid)] if gbid is not None else list(self._brokers.values())
        secret = self._ensure_secret()
        if self._kind == "mosquitto":
            with self._accounts_lock:
                accounts = self._mosquitto_accounts(secret)
                wanted = accounts.add(username)
            self._provide_all(brokers, accounts, wanted)
        return username, access.password(secret, username)

    def _mosquitto_accounts(self, secret: str) -> mosquitto.Accounts:
        """(Under ``_accounts_lock``.)"""
        if self._accounts is None:
            self._accounts = mosquitto.Accounts(self.broker_dir, secret)
        return self._accounts

    def _provide_all(self, brokers: list[_Broker], accounts: mosquitto.Accounts, wanted: int) -> None:
        """``_provide`` on each broker, in parallel when there are several."""
        todo = [b for b in brokers if b.ready and b.loaded < wanted]
        if len(todo) <= 1:
            for b in todo:
                self._provide(b, accounts, wanted)
            return
        with ThreadPoolExecutor(len(todo), thread_name_prefix="mosquitto-logins") as pool:
            for done in [pool.submit(self._provide, b, accounts, wanted) for b in todo]:
                done.result()

    def _provide(self, b: _Broker, accounts: mosquitto.Accounts, wanted: int) -> None:
        """Have a running Mosquitto let in the logins up to generation ``wanted``.

        Sends every login added since the generation it has, so logins that wait here while
        one request runs share the next. A broker not ready (stopped, crashed, starting)
        reads them all from its plugin config when it starts; one that goes away meanwhile
        is left to its owner."""
        with b.logins_lock:
            if not b.ready or b.process is None or b.loaded >= wanted:
                return
            with self._accounts_lock:
                generation = accounts.generation
                commands = accounts.commands(accounts.since(max(b.loaded, 0)))
                login = accounts.logins_login()
            assert b.port is not None
            try:
                mosquitto.send_logins(b.host, b.port, login, commands)
            except (OSError, mosquitto.ControlError) as exc:
                if not b.ready or not b.running:
                    return
                raise BrokerError(
                    f"gbid {b.gbid!r}: mosquitto on port {b.port} did not take {len(commands)} new "
                    f"login(s) within {mosquitto.CONTROL_TIMEOUT_S:g} s per {mosquitto.CHUNK_LOGINS} "
                    f"({reason(exc)}); {self.log_path(b.gbid)}"
                ) from None
            b.loaded = generation

    def _command(self, b: _Broker) -> tuple[list[str], dict[str, str]]:
        assert b.port is not None
        env = dict(os.environ)
        if self._kind == "amqtt":
            # The broker module must import from this checkout even if it is not installed.
            env["PYTHONPATH"] = os.pathsep.join(
                p for p in (str(_PROJECT_ROOT), env.get("PYTHONPATH", "")) if p
            )
            env[SECRET_ENV] = self._ensure_secret()
            argv = [
                sys.executable, "-m", "brokers.amqtt_broker",
                "--gbid", b.gbid, "--host", b.host, "--port", str(b.port), "--exit-on-stdin-eof",
            ]
            return argv, env
        assert self._mosquitto_binary is not None and self._mosquitto_plugin is not None
        secret = self._ensure_secret()
        self.broker_dir.mkdir(parents=True, exist_ok=True)
        with b.logins_lock, self._accounts_lock:
            accounts = self._mosquitto_accounts(secret)
            b.loaded = accounts.write(b.gbid)  # it reads every login from its plugin config when it starts
        config = self.broker_dir / f"{b.gbid}.conf"
        mosquitto.write_config(config, b.port, self._mosquitto_plugin, accounts.config_path(b.gbid),
                               accounts.acl_path, self.broker_dir / f"{b.gbid}.mosquitto", self.autosave)
        return mosquitto.command(self._mosquitto_binary, config), env

    async def _start(self, b: _Broker, ev: str, may_move_port: bool) -> None:
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

    async def _spawn_and_wait(self, b: _Broker) -> None:
        assert b.port is not None
        argv, env = self._command(b)
        self.broker_dir.mkdir(parents=True, exist_ok=True)
        log_path = self.broker_dir / f"{b.gbid}.log"
        with open(log_path, "ab") as log:
            log.write(f"--- joynr-sim: starting {self._kind} broker for GBID {b.gbid} on port {b.port}\n".encode())
            log.flush()
            b.process = await asyncio.create_subprocess_exec(
                *argv,
                stdin=asyncio.subprocess.PIPE if self._kind == "amqtt" else asyncio.subprocess.DEVNULL,
                stdout=log,
                stderr=asyncio.subprocess.STDOUT,
                env=env,
            )
        self._pids[b.gbid] = b.process.pid
        try:
            await self._wait_ready(b, log_path)
        except BaseException:
            await self._kill(b)
            raise
        b.ready = True
        if self._kind == "mosquitto":
            # Logins added while it started may have come after it read its plugin config.
            await asyncio.to_thread(self._catch_up, b)

    def _catch_up(self, b: _Broker) -> None:
        with self._accounts_lock:
            assert self._accounts is not None
            accounts, wanted = self._accounts, self._accounts.generation
        self._provide(b, accounts, wanted)

    async def _wait_ready(self, b: _Broker, log_path: Path) -> None:
        """Until the broker answers a CONNECT with CONNACK 0, within START_TIMEOUT_S."""
        assert b.process is not None and b.port is not None
        username = access.PROBE_USERNAME  # its own client id: one probe per broker at a time
        packet = connect_packet(username, username, access.password(self._ensure_secret(), username))
        started = time.monotonic()
        deadline = started + START_TIMEOUT_S
        last_error = "no answer yet"
        while True:
            if b.process.returncode is not None:
                raise _ExitedEarly(
                    f"gbid {b.gbid!r}: {self._kind} broker exited with code {b.process.returncode} "
                    f"before accepting connections on port {b.port}; {log_path}:\n{_tail(log_path)}"
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
                        f"gbid {b.gbid!r}: {self._kind} broker on port {b.port} refused the probe's "
                        f"credentials (CONNACK return code {code}); {log_path}:\n{_tail(log_path)}"
                    )
                # Another process took the port between our choice and our bind, and its
                # broker refused us: ours fails its bind and exits (then a start on a fresh
                # port follows), or binds once the other lets go.
                last_error = f"port {b.port} is another process's, which refused the probe (CONNACK {code})"
            if time.monotonic() > deadline:
                raise BrokerError(
                    f"gbid {b.gbid!r}: {self._kind} broker did not accept an MQTT CONNECT on "
                    f"{b.host}:{b.port} within {START_TIMEOUT_S:.0f} s (last: {last_error}); "
                    f"{log_path}:\n{_tail(log_path)}"
                )
            await asyncio.sleep(PROBE_INTERVAL_S)

    async def _stop(self, b: _Broker) -> None:
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

    async def _kill(self, b: _Broker) -> None:
        b.ready = False
        if b.process is not None and b.process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                b.process.kill()
            await b.process.wait()
        self._reap(b)

    def _reap(self, b: _Broker) -> None:
        b.ready = False
        self._pids.pop(b.gbid, None)
        if b.process is not None and b.process.stdin is not None:
            b.process.stdin.close()

    def _emit(self, ev: str, b: _Broker) -> None:
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
