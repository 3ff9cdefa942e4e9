"""What a broker set does differently for each kind of broker, one strategy a kind:

- ``AmqttBrokers``: the embedded broker, ``python -m brokers.amqtt_broker``, one process per
  GBID; it checks the derived passwords itself, so any client id logs in at once;
- ``MosquittoBrokers``: the mosquitto binary with the config ``brokers.mosquitto_config`` renders;
  its dynamic security plugin holds every login, so each must be sent to it;
- ``ExternalBrokers``: brokers at the URLs of the choice, which the set neither starts nor
  logs in to as itself.

``brokers.broker_set.BrokerSet`` chooses one (``choose``) when it is made and keeps what
every kind shares: ports, processes, readiness, logs and trace events. The records of its
brokers (``Broker``) and the secret every password derives from (``Secret``) are shared
with the strategy.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from . import access, mosquitto
from .probe import CONNACK_CODES, connect_packet, probe, reason
from .spec import EXTERNAL, BrokerSpec, ExternalBroker

PROBE_TIMEOUT_S = 2.0
SECRET_FILE = "secret"
SECRET_ENV = "JOYNR_SIM_BROKER_SECRET"  # how an amqtt broker process gets the secret

_PROJECT_ROOT = Path(__file__).resolve().parent.parent


class BrokerError(RuntimeError):
    """A broker could not be started, stopped or reached, or the operation does not apply."""


@dataclass
class Broker:
    """One broker of a set: where it listens, its process, and where its output goes."""

    gbid: str
    host: str
    log: Path
    port: int | None = None
    process: asyncio.subprocess.Process | None = None
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    ready: bool = False  # answered a CONNECT since it was started: it takes new logins

    @property
    def target(self) -> str:
        return f"broker-{self.gbid}"

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.returncode is None


def lookup(brokers: dict[str, Broker], gbid: str) -> Broker:
    """The record of ``gbid``; for any other, a ValueError naming the set's GBIDs."""
    try:
        return brokers[gbid]
    except (KeyError, TypeError):
        raise ValueError(f"gbid: unknown GBID {gbid!r}; this broker set has {list(brokers)}") from None


class Secret:
    """The secret every password derives from, kept in the run dir so a new set on it (a
    broker restarted by a new process) lets the same clients in. Made on first use, so
    external brokers never leave one behind."""

    def __init__(self, directory: Path) -> None:
        self._directory = directory
        self._value: str | None = None
        # Credentials are asked for from any thread.
        self._lock = threading.Lock()

    def value(self) -> str:
        with self._lock:
            if self._value is None:
                path = self._directory / SECRET_FILE
                self._directory.mkdir(parents=True, exist_ok=True)
                if path.exists():
                    self._value = path.read_text(encoding="utf-8").strip()
                if not self._value:
                    self._value = secrets.token_hex(16)
                    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
                    with os.fdopen(fd, "w", encoding="utf-8") as f:
                        f.write(self._value + "\n")
            return self._value

    def password(self, username: str) -> str:
        return access.password(self.value(), username)


class BrokerKind:
    """What a broker set asks of the kind of its brokers. ``brokers`` is the set's own
    record of each, by GBID."""

    name: ClassVar[str]
    autosave: int = mosquitto.AUTOSAVE_CHANGES  # Mosquitto's save interval; others report its default
    stdin: ClassVar[int] = asyncio.subprocess.DEVNULL  # a broker process's standard input

    def __init__(self, brokers: dict[str, Broker]) -> None:
        self._brokers = brokers

    def _chosen(self, gbid: str | None) -> list[Broker]:
        """The broker of ``gbid``; without it, every broker of the set."""
        return [lookup(self._brokers, gbid)] if gbid is not None else list(self._brokers.values())

    def endpoint(self, b: Broker) -> tuple[str, int]:
        raise NotImplementedError

    def credentials(self, client_id: str, gbid: str | None) -> tuple[str, str]:
        raise NotImplementedError

    def admin_credentials(self, gbid: str | None) -> tuple[str, str]:
        raise NotImplementedError

    def admit(self, client_ids: list[str]) -> None:
        """Let these checked client ids in ahead of their first login; only Mosquitto
        needs to be told."""

    def running(self, gbid: str) -> bool:
        return lookup(self._brokers, gbid).running

    def refuse(self, op: str, b: Broker) -> None:
        """BrokerError when the set does not start, stop or crash this kind's brokers."""

    async def probe(self) -> None:
        """What a start does besides starting the brokers that are not running."""

    # Asked only about a broker the set starts, which ``refuse`` lets on: never an external one.

    def command(self, b: Broker) -> tuple[list[str], dict[str, str]]:
        """The argv and environment of ``b``'s process, on the port it has."""
        raise NotImplementedError

    async def started(self, b: Broker) -> None:
        """What follows once ``b``'s new process answered a CONNECT."""


class _OwnBrokers(BrokerKind):
    """Brokers the set starts: every client logs in as itself with a password derived from
    the set's secret (``brokers.access``)."""

    def __init__(self, brokers: dict[str, Broker], secret: Secret) -> None:
        super().__init__(brokers)
        self._secret = secret

    def endpoint(self, b: Broker) -> tuple[str, int]:
        if b.port is None:
            raise BrokerError(f"gbid {b.gbid!r}: broker not started yet, it has no port")
        return b.host, b.port

    def credentials(self, client_id: str, gbid: str | None) -> tuple[str, str]:
        access.check_client_id(client_id)
        return self._login(client_id, self._chosen(gbid))

    def admin_credentials(self, gbid: str | None) -> tuple[str, str]:
        return self._login(access.ADMIN_USERNAME, self._chosen(gbid))

    def _login(self, username: str, brokers: list[Broker]) -> tuple[str, str]:
        """(username, its password), once ``brokers`` let it in."""
        return username, self._secret.password(username)


class AmqttBrokers(_OwnBrokers):
    name = "amqtt"
    # The broker exits when its stdin ends, that is when this process has gone, even by SIGKILL.
    stdin = asyncio.subprocess.PIPE

    def command(self, b: Broker) -> tuple[list[str], dict[str, str]]:
        assert b.port is not None
        env = dict(os.environ)
        # The broker module must import from this checkout even if it is not installed.
        env["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(_PROJECT_ROOT), env.get("PYTHONPATH", "")) if p
        )
        env[SECRET_ENV] = self._secret.value()
        argv = [
            sys.executable, "-m", "brokers.amqtt_broker",
            "--gbid", b.gbid, "--host", b.host, "--port", str(b.port), "--exit-on-stdin-eof",
        ]
        return argv, env


@dataclass
class _Loaded:
    """The logins one Mosquitto broker has."""

    generation: int = -1
    # Held while its plugin config is written and while logins are sent to it.
    lock: threading.Lock = field(default_factory=threading.Lock)


class MosquittoBrokers(_OwnBrokers):
    """Mosquitto's dynamic security plugin holds every login, so a client id it has not seen
    is sent to the running brokers (over the plugin's control topic, no reload) before its
    credentials return, and written into the plugin's config for a broker that starts;
    logins asked for from several threads meanwhile share one request (``brokers.mosquitto_logins``
    says why not a password file)."""

    name = "mosquitto"

    def __init__(self, brokers: dict[str, Broker], secret: Secret, directory: Path, autosave: int | None) -> None:
        super().__init__(brokers, secret)
        self.autosave = mosquitto.check_autosave(mosquitto.AUTOSAVE_CHANGES if autosave is None else autosave)
        self._binary = mosquitto.find_binary()
        self._plugin = mosquitto.find_plugin(self._binary)
        self._directory = directory
        self._loaded = {gbid: _Loaded() for gbid in brokers}
        self._accounts: mosquitto.Accounts | None = None
        # Guards the accounts: logins are asked for from any thread. A broker's
        # ``_Loaded.lock`` is taken before it.
        self._accounts_lock = threading.Lock()

    def admit(self, client_ids: list[str]) -> None:
        """One request per broker for them all (the brokers in parallel) instead of one
        per login; before the brokers start, they read them when they start, which is
        cheapest (see ``brokers.mosquitto_control``)."""
        self._provide_all(list(self._brokers.values()), *self._add(client_ids))

    def _login(self, username: str, brokers: list[Broker]) -> tuple[str, str]:
        self._provide_all(brokers, *self._add([username]))
        return super()._login(username, brokers)

    def _add(self, usernames: list[str]) -> tuple[mosquitto.Accounts, int]:
        """The accounts with ``usernames`` in, and the generation from which all are."""
        secret = self._secret.value()
        with self._accounts_lock:
            accounts = self._accounts_of(secret)
            return accounts, max((accounts.add(u) for u in usernames), default=-1)

    def _accounts_of(self, secret: str) -> mosquitto.Accounts:
        """(Under ``_accounts_lock``.)"""
        if self._accounts is None:
            self._accounts = mosquitto.Accounts(self._directory, secret)
        return self._accounts

    def _provide_all(self, brokers: list[Broker], accounts: mosquitto.Accounts, wanted: int) -> None:
        """``_provide`` on each broker, in parallel when there are several."""
        todo = [b for b in brokers if b.ready and self._loaded[b.gbid].generation < wanted]
        if len(todo) <= 1:
            for b in todo:
                self._provide(b, accounts, wanted)
            return
        with ThreadPoolExecutor(len(todo), thread_name_prefix="mosquitto-logins") as pool:
            for done in [pool.submit(self._provide, b, accounts, wanted) for b in todo]:
                done.result()

    def _provide(self, b: Broker, accounts: mosquitto.Accounts, wanted: int) -> None:
        """Have a running Mosquitto let in the logins up to generation ``wanted``.

        Sends every login added since the generation it has, so logins that wait here while
        one request runs share the next. A broker not ready (stopped, crashed, starting)
        reads them all from its plugin config when it starts; one that goes away meanwhile
        is left to its owner."""
        loaded = self._loaded[b.gbid]
        with loaded.lock:
            if not b.ready or b.process is None or loaded.generation >= wanted:
                return
            with self._accounts_lock:
                generation = accounts.generation
                commands = accounts.commands(accounts.since(max(loaded.generation, 0)))
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
                    f"({reason(exc)}); {b.log}"
                ) from None
            loaded.generation = generation

    def command(self, b: Broker) -> tuple[list[str], dict[str, str]]:
        assert b.port is not None
        secret = self._secret.value()
        self._directory.mkdir(parents=True, exist_ok=True)
        loaded = self._loaded[b.gbid]
        with loaded.lock, self._accounts_lock:
            accounts = self._accounts_of(secret)
            loaded.generation = accounts.write(b.gbid)  # it reads every login from its plugin config when it starts
        config = self._directory / f"{b.gbid}.conf"
        mosquitto.write_config(config, b.port, self._plugin, accounts.config_path(b.gbid),
                               accounts.acl_path, self._directory / f"{b.gbid}.mosquitto", self.autosave)
        return mosquitto.command(self._binary, config), dict(os.environ)

    async def started(self, b: Broker) -> None:
        # Logins added while it started may have come after it read its plugin config.
        await asyncio.to_thread(self._catch_up, b)

    def _catch_up(self, b: Broker) -> None:
        with self._accounts_lock:
            assert self._accounts is not None
            accounts, wanted = self._accounts, self._accounts.generation
        self._provide(b, accounts, wanted)


class ExternalBrokers(BrokerKind):
    """Brokers at the URLs of the choice: nothing is started, a start probes each once."""

    name = EXTERNAL

    def __init__(self, brokers: dict[str, Broker], external: dict[str, ExternalBroker]) -> None:
        super().__init__(brokers)
        self._external = external

    def endpoint(self, b: Broker) -> tuple[str, int]:
        external = self._external[b.gbid]
        return external.host, external.port

    def credentials(self, client_id: str, gbid: str | None) -> tuple[str, str]:
        if not isinstance(client_id, str) or not client_id:
            raise ValueError(f"client_id: expected a non-empty string, got {client_id!r}")
        urls = [self._external[lookup(self._brokers, gbid).gbid]] if gbid is not None else self._external.values()
        for external in urls:
            if external.username is not None:
                return external.username, external.password or ""
        return client_id, ""

    def admin_credentials(self, gbid: str | None) -> tuple[str, str]:
        raise BrokerError("admin_credentials: the brokers are external; joynr-sim has no login of its own there")

    def running(self, gbid: str) -> bool:
        return True  # as far as we know; we do not manage it

    def refuse(self, op: str, b: Broker) -> None:
        host, port = self.endpoint(b)
        raise BrokerError(
            f"{op}({b.gbid!r}): the broker for this GBID is external (mqtt://{host}:{port}); "
            "joynr-sim does not start, stop or crash external brokers"
        )

    async def probe(self) -> None:
        """An MQTT CONNECT with the credentials of each URL, so one that cannot be reached
        is named at once."""
        await asyncio.gather(*(self._probe(gbid) for gbid in self._brokers))

    async def _probe(self, gbid: str) -> None:
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


def choose(spec: BrokerSpec, brokers: dict[str, Broker], directory: Path, secret: Secret,
           autosave: int | None) -> BrokerKind:
    """The strategy for the kind ``spec`` names; ``autosave`` is Mosquitto's alone."""
    if spec.kind == MosquittoBrokers.name:
        return MosquittoBrokers(brokers, secret, directory, autosave)
    if autosave is not None:
        raise ValueError(f"autosave: Mosquitto's save interval, for broker='mosquitto' only, not {spec.kind}")
    if spec.kind == ExternalBrokers.name:
        return ExternalBrokers(brokers, spec.external)
    return AmqttBrokers(brokers, secret)
