"""The broker set on real brokers (amqtt and Mosquitto), driven by paho-mqtt 2.x clients."""

from __future__ import annotations

import asyncio
import itertools
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import paho.mqtt.client as mqtt
import pytest

from broker_helpers import BrokerFactory
from brokers import (
    BrokerError,
    BrokerSet,
    BrokerSpecError,
    ExternalBroker,
    MosquittoNotFound,
    mosquitto,
    parse_broker,
)
from brokers.broker_set import SECRET_ENV
from joynr_sim.trace import TraceWriter, read_events
from joynr_sim.transport.mqtt import MqttConnectError, MqttConnection

pytestmark = pytest.mark.e2e  # broker processes

WAIT_S = 15.0  # upper bound for any single broker round trip on a loaded machine
KINDS = ["amqtt", "mosquitto"]
_ids = itertools.count()


def unique(prefix: str) -> str:
    return f"{prefix}-{os.getpid()}-{next(_ids)}"


class Client:
    """A paho client whose every step waits on an event with a timeout."""

    def __init__(
        self,
        brokers: BrokerSet,
        gbid: str,
        client_id: str,
        *,
        clean_session: bool = True,
        will_topic: str | None = None,
        credentials: tuple[str, str] | None = None,
    ) -> None:
        self.brokers, self.gbid, self.client_id = brokers, gbid, client_id
        self.paho = mqtt.Client(
            mqtt.CallbackAPIVersion.VERSION2,
            client_id=client_id,
            clean_session=clean_session,
            protocol=mqtt.MQTTv311,
        )
        username, password = credentials or brokers.credentials(client_id)
        self.paho.username_pw_set(username, password)
        if will_topic is not None:
            self.paho.will_set(will_topic, b"gone", qos=1)
        self.connack = threading.Event()
        self.reason_code: mqtt.ReasonCode | None = None
        self.session_present: bool | None = None
        self.subacks: dict[int, threading.Event] = {}
        self.granted: dict[int, list[mqtt.ReasonCode]] = {}
        self.messages: queue.Queue[mqtt.MQTTMessage] = queue.Queue()
        self.paho.on_connect = self._on_connect
        self.paho.on_subscribe = self._on_subscribe
        self.paho.on_message = lambda _c, _u, msg: self.messages.put(msg)

    def _on_connect(self, _c, _u, flags, reason_code, _p) -> None:  # noqa: ANN001
        self.reason_code = reason_code
        self.session_present = bool(flags.session_present)
        self.connack.set()

    def _on_subscribe(self, _c, _u, mid, codes, _p) -> None:  # noqa: ANN001
        self.granted[mid] = list(codes)
        self.subacks.setdefault(mid, threading.Event()).set()

    def connect(self, *, expect_success: bool = True) -> Client:
        host, port = self.brokers.endpoint(self.gbid)
        self.paho.reconnect_delay_set(1, 1)
        self.paho.connect(host, port, keepalive=60)
        self.paho.loop_start()
        assert self.connack.wait(WAIT_S), f"{self.client_id}: no CONNACK from {host}:{port}"
        if expect_success:
            assert self.reason_code is not None and not self.reason_code.is_failure, (
                f"{self.client_id}: CONNACK {self.reason_code}"
            )
        return self

    def subscribe(self, topic: str) -> bool:
        """Whether the broker granted the subscription (SUBACK without failure)."""
        result, mid = self.paho.subscribe(topic, qos=1)
        assert result == mqtt.MQTT_ERR_SUCCESS
        assert self.subacks.setdefault(mid, threading.Event()).wait(WAIT_S), f"no SUBACK for {topic}"
        return not self.granted[mid][0].is_failure

    def publish(self, topic: str, payload: bytes) -> None:
        info = self.paho.publish(topic, payload, qos=1)
        info.wait_for_publish(WAIT_S)
        assert info.is_published(), f"{self.client_id}: no PUBACK for {topic}"

    def receive(self) -> mqtt.MQTTMessage:
        try:
            return self.messages.get(timeout=WAIT_S)
        except queue.Empty:
            raise AssertionError(f"{self.client_id}: no message within {WAIT_S} s") from None

    def disconnect(self) -> None:
        self.paho.disconnect()
        self.paho.loop_stop()

    def crash(self) -> None:
        """Gone without DISCONNECT: stop the network thread, then close the socket under it."""
        self.paho.loop_stop()
        sock = self.paho.socket()
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            sock.close()


async def in_thread(fn, *args):  # noqa: ANN001, ANN201
    """paho waits block; keep them off the event loop the broker set uses."""
    return await asyncio.to_thread(fn, *args)


@pytest.fixture
def trace(tmp_path: Path) -> Iterator[TraceWriter]:
    writer = TraceWriter(tmp_path, "test-run", "brokers", "broker", lambda: int(time.time() * 1000))
    yield writer
    writer.close()


def life_events(trace: TraceWriter) -> list[tuple[str, str, int]]:
    return [
        (e["ev"], e["gbid"], e["port"])
        for e in read_events(trace.path)
        if e["ev"].startswith("life.")
        and e["target"] == f"broker-{e['gbid']}"
        and e["target_kind"] == "broker"
    ]


@pytest.fixture
def factories(amqtt_brokers: BrokerFactory, mosquitto_brokers: BrokerFactory) -> dict[str, BrokerFactory]:  # noqa: F811
    return {"amqtt": amqtt_brokers, "mosquitto": mosquitto_brokers}


# -- both kinds ---------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
async def test_two_gbids_publish_subscribe_and_trace(kind: str, tmp_path: Path, trace: TraceWriter) -> None:
    gbids = ["gbid-a", "gbid-b"]
    async with BrokerSet(gbids, broker=kind, run_dir=tmp_path / "run", trace=trace) as brokers:
        assert brokers.kind == kind
        ports = {g: brokers.endpoint(g)[1] for g in gbids}
        assert len(set(ports.values())) == 2
        assert brokers.url("gbid-a") == f"mqtt://127.0.0.1:{ports['gbid-a']}"
        pids = [brokers.pid(g) for g in gbids]

        def exchange() -> None:
            sub_id = unique("sub")  # the same client on both brokers, one topic
            topic = f"{sub_id}/low"
            subs = {g: Client(brokers, g, sub_id).connect() for g in gbids}
            for sub in subs.values():
                assert sub.subscribe(f"{sub_id}/#")
            for g in gbids:
                pub = Client(brokers, g, unique("pub")).connect()
                pub.publish(topic, g.encode())
                pub.disconnect()
            for g, sub in subs.items():
                # each broker is its own backend: a subscriber sees only its GBID's message
                assert sub.receive().payload == g.encode()
                assert sub.messages.empty()
                sub.disconnect()

        await in_thread(exchange)
        assert all((tmp_path / "run" / "brokers" / f"{g}.log").stat().st_size > 0 for g in gbids)

    for g in gbids:
        assert not brokers.is_running(g)
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
    events = life_events(trace)
    assert sorted(events) == sorted(
        [(ev, g, ports[g]) for ev in ("life.start", "life.stop") for g in gbids]
    )


@pytest.mark.parametrize("kind", KINDS)
async def test_persistent_session_survives_client_crash(
    kind: str, factories: dict[str, BrokerFactory]
) -> None:
    brokers = await factories[kind](["gbid-a"])

    def scenario() -> None:
        client_id, watcher_id = unique("cc"), unique("watch")
        topic, will = f"{client_id}/low", f"{watcher_id}/low"
        watcher = Client(brokers, "gbid-a", watcher_id).connect()
        assert watcher.subscribe(f"{watcher_id}/#")
        sub = Client(brokers, "gbid-a", client_id, clean_session=False, will_topic=will).connect()
        assert sub.subscribe(f"{client_id}/#")
        sub.crash()
        # The will is the broker's own word that it has seen the connection die, so the
        # next publish is queued for the offline session, not written to a dead socket.
        assert watcher.receive().topic == will
        pub = Client(brokers, "gbid-a", unique("pub")).connect()
        pub.publish(topic, b"while-away")
        again = Client(brokers, "gbid-a", client_id, clean_session=False).connect()
        assert again.session_present is True
        assert again.receive().payload == b"while-away"
        for c in (watcher, pub, again):
            c.disconnect()

    await in_thread(scenario)


@pytest.mark.parametrize("kind", KINDS)
async def test_crash_then_restart_on_same_port(
    kind: str, trace: TraceWriter, factories: dict[str, BrokerFactory]
) -> None:
    brokers = await factories[kind](["gbid-a", "gbid-b"], trace=trace)
    host, port = brokers.endpoint("gbid-a")
    client_id = unique("cc")
    topic = f"{client_id}/low"

    def before() -> None:
        c = Client(brokers, "gbid-a", client_id, clean_session=False).connect()
        assert c.subscribe(f"{client_id}/#")
        c.disconnect()

    await in_thread(before)
    await brokers.crash_broker("gbid-a")
    assert not brokers.is_running("gbid-a") and brokers.is_running("gbid-b")
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection((host, port), timeout=WAIT_S).close()
    with pytest.raises(BrokerError, match="not running"):
        await brokers.crash_broker("gbid-a")

    await brokers.restart_broker("gbid-a")
    assert brokers.endpoint("gbid-a") == (host, port)

    def after() -> bool | None:
        c = Client(brokers, "gbid-a", client_id, clean_session=False).connect()
        present = c.session_present
        assert c.subscribe(f"{client_id}/#")
        pub = Client(brokers, "gbid-a", unique("pub")).connect()
        pub.publish(topic, b"after-restart")
        assert c.receive().payload == b"after-restart"
        c.disconnect()
        pub.disconnect()
        return present

    session_present = await in_thread(after)
    if kind == "amqtt":
        assert session_present is False  # amqtt keeps sessions in memory only
    evs = [(ev, g) for ev, g, p in life_events(trace) if g == "gbid-a" and p == port]
    assert evs == [("life.start", "gbid-a"), ("life.crash", "gbid-a"), ("life.restart", "gbid-a")]


async def test_mosquitto_keeps_session_and_queue_across_clean_stop(mosquitto_brokers: BrokerFactory) -> None:  # noqa: F811
    brokers = await mosquitto_brokers(["gbid-a"])
    client_id = unique("cc")
    topic = f"{client_id}/low"

    def store() -> None:
        sub = Client(brokers, "gbid-a", client_id, clean_session=False).connect()
        assert sub.subscribe(f"{client_id}/#")
        sub.disconnect()
        pub = Client(brokers, "gbid-a", unique("pub")).connect()
        pub.publish(topic, b"queued-before-stop")  # PUBACK: queued for the offline session
        pub.disconnect()

    await in_thread(store)
    await brokers.stop_broker("gbid-a")
    await brokers.restart_broker("gbid-a")

    def resume() -> None:
        sub = Client(brokers, "gbid-a", client_id, clean_session=False).connect()
        assert sub.session_present is True
        assert sub.receive().payload == b"queued-before-stop"
        sub.disconnect()

    await in_thread(resume)


# -- amqtt specifics ------------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
async def test_refuses_clients_without_their_credentials(kind: str, factories: dict[str, BrokerFactory]) -> None:
    brokers = await factories[kind](["gbid-a"])

    def refused(client_id: str, credentials: tuple[str, str]) -> bool:
        c = Client(brokers, "gbid-a", client_id, credentials=credentials)
        c.connect(expect_success=False)
        c.paho.loop_stop()
        assert c.reason_code is not None
        return c.reason_code.is_failure

    someone = unique("someone")
    assert await in_thread(refused, someone, (someone, "wrong-password"))
    assert await in_thread(refused, someone, ("", brokers.credentials(someone)[1]))  # anonymous: no username
    other = unique("other")  # another client's password is not this one's
    assert await in_thread(refused, someone, (someone, brokers.credentials(other)[1]))
    assert not await in_thread(refused, someone, brokers.credentials(someone))


async def test_mosquitto_lets_in_a_client_first_seen_while_it_was_down(mosquitto_brokers: BrokerFactory) -> None:  # noqa: F811
    brokers = await mosquitto_brokers(["gbid-a"])
    await brokers.crash_broker("gbid-a")
    late = unique("late")
    credentials = brokers.credentials(late)  # written to its files; nothing to reload
    await brokers.restart_broker("gbid-a")

    def connect() -> None:
        Client(brokers, "gbid-a", late, credentials=credentials).connect().disconnect()

    await in_thread(connect)


def _count_hangups(monkeypatch: pytest.MonkeyPatch, pid: int) -> list[int]:
    """The SIGHUPs (Mosquitto's reloads) sent to ``pid`` from now on, each still sent."""
    hangups: list[int] = []
    kill = os.kill

    def counting(p: int, sig: int) -> None:
        if p == pid and sig == signal.SIGHUP:
            hangups.append(p)
        kill(p, sig)

    monkeypatch.setattr(os, "kill", counting)
    return hangups


def _count_requests(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The requests that send logins to a running Mosquitto from now on (the number of
    logins of each), each still sent."""
    requests: list[int] = []
    send = mosquitto.send_logins

    def counting(host: str, port: int, login: tuple[str, str], commands: list, *args, **kwargs) -> None:
        requests.append(len(commands))
        send(host, port, login, commands, *args, **kwargs)

    monkeypatch.setattr(mosquitto, "send_logins", counting)
    return requests


async def test_mosquitto_logins_asked_during_a_request_share_the_next_one(
    mosquitto_brokers: BrokerFactory, monkeypatch: pytest.MonkeyPatch,  # noqa: F811
) -> None:
    # Logins reach a running Mosquitto without a reload (a reload re-checks every connected
    # client), and n logins asked for at once must not cost n requests each growing with
    # the logins the broker has: logins waiting while one runs are all sent by the next.
    brokers = await mosquitto_brokers(["gbid-a"])
    hangups = _count_hangups(monkeypatch, brokers.pid("gbid-a"))
    requests = _count_requests(monkeypatch)
    accounts = brokers._kind._accounts
    names = [unique("batch") for _ in range(6)]
    results: queue.Queue = queue.Queue()
    with brokers._kind._loaded["gbid-a"].lock:  # a request under way
        first = accounts.generation
        threads = [threading.Thread(target=lambda n=n: results.put((n, brokers.credentials(n)))) for n in names]
        for t in threads:
            t.start()
        deadline = time.monotonic() + 10
        while accounts.generation < first + len(names):  # every login has been asked for
            assert time.monotonic() < deadline, "the logins were not added within 10 s"
            time.sleep(0.01)
    for t in threads:
        t.join(15)
    logins = dict(results.get_nowait() for _ in names)

    def connect_all() -> None:  # each one let in by the time its credentials came back
        for name in names:
            Client(brokers, "gbid-a", name, credentials=logins[name]).connect().disconnect()

    await in_thread(connect_all)
    assert requests == [len(names)] and hangups == []


async def test_mosquitto_admits_many_client_ids_with_one_request(
    mosquitto_brokers: BrokerFactory, monkeypatch: pytest.MonkeyPatch,  # noqa: F811
) -> None:
    brokers = await mosquitto_brokers(["gbid-a"])
    hangups = _count_hangups(monkeypatch, brokers.pid("gbid-a"))
    requests = _count_requests(monkeypatch)
    names = [unique("fleet") for _ in range(5)]
    generation = brokers._kind._accounts.generation
    with pytest.raises(ValueError, match="cc/1"):  # one bad id: none is added
        await in_thread(brokers.admit, [*names, "cc/1"])
    assert brokers._kind._accounts.generation == generation
    await in_thread(brokers.admit, names)
    assert requests == [len(names)]
    logins = {name: brokers.credentials(name) for name in names}  # known and let in: no request
    assert requests == [len(names)] and hangups == []

    def connect_all() -> None:
        for name in names:
            Client(brokers, "gbid-a", name, credentials=logins[name]).connect().disconnect()

    await in_thread(connect_all)


async def test_restart_on_a_taken_port_fails_with_the_broker_log(amqtt_brokers: BrokerFactory) -> None:  # noqa: F811
    brokers = await amqtt_brokers(["gbid-a"])
    host, port = brokers.endpoint("gbid-a")
    await brokers.crash_broker("gbid-a")
    squatter = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        squatter.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        squatter.bind((host, port))
        squatter.listen()
        with pytest.raises(BrokerError) as err:
            await brokers.restart_broker("gbid-a")
    finally:
        squatter.close()
    message = str(err.value)
    assert "gbid-a" in message and str(port) in message and "cannot listen" in message
    assert not brokers.is_running("gbid-a")
    await brokers.restart_broker("gbid-a")  # the port is free again
    assert brokers.endpoint("gbid-a") == (host, port)


def test_amqtt_broker_process_exits_when_its_owner_goes(tmp_path: Path) -> None:
    """The owner's end of stdin closing (the owner died) shuts the broker down cleanly."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = dict(os.environ, **{SECRET_ENV: "secret"})
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(Path(__file__).parents[1]), env.get("PYTHONPATH")]))
    proc = subprocess.Popen(
        [sys.executable, "-m", "brokers.amqtt_broker", "--gbid", "g", "--port", str(port), "--exit-on-stdin-eof"],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    try:
        assert proc.stdin is not None
        proc.stdin.close()
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


# -- external brokers and bad input ---------------------------------------------------


def test_parse_broker_good() -> None:
    assert parse_broker(" amqtt ").kind == "amqtt"
    assert parse_broker("mosquitto").redacted() == "mosquitto"
    spec = parse_broker(
        "gbid1=mqtt://broker.example:1884, gbid2=tcp://10.0.0.2,gbid3=mqtt://u%40x:p%3Aw@h:1885",
        ["gbid1", "gbid2", "gbid3"],
    )
    assert spec.kind == "external"
    assert spec.external == {
        "gbid1": ExternalBroker("broker.example", 1884),
        "gbid2": ExternalBroker("10.0.0.2", 1883),
        "gbid3": ExternalBroker("h", 1885, "u@x", "p:w"),
    }
    assert spec.redacted() == "gbid1=mqtt://broker.example:1884,gbid2=mqtt://10.0.0.2:1883,gbid3=mqtt://u@x:***@h:1885"
    assert "p:w" not in repr(spec)


@pytest.mark.parametrize(
    ("spec", "named"),
    [
        ("rabbitmq", "'rabbitmq'"),
        ("gbid1", "'gbid1'"),
        ("=mqtt://h:1", "'=mqtt://h:1'"),
        ("gbid1=", "'gbid1='"),
        ("gbid1=http://h:1", "'http://h:1'"),
        ("gbid1=mqtt://h:port", "'mqtt://h:port'"),
        ("gbid1=mqtt://h:70000", "'mqtt://h:70000'"),
        ("gbid1=mqtt://:1883", "'mqtt://:1883'"),
        ("gbid1=mqtt://h:1/topic", "'mqtt://h:1/topic'"),
        ("gbid1=mqtt://h:1,,gbid2=mqtt://h:2", "empty entry"),
        ("gbid1=mqtt://h:1,gbid1=mqtt://h:2", "'gbid1' given twice"),
        ("bad gbid=mqtt://h:1", "'bad gbid'"),
        ("gbid1=mqtt://u:s3cret@h:port", "'mqtt://u:***@h:port'"),
        ("gbid1=http://u:s3cret@h:1\nx", "'http://u:***@h:1"),
    ],
)
def test_parse_broker_bad_names_the_value_in_one_line(spec: str, named: str) -> None:
    with pytest.raises(BrokerSpecError, match="^broker: ") as err:
        parse_broker(spec)
    message = str(err.value)
    assert named in message and "\n" not in message and "s3cret" not in message


async def test_external_brokers_are_not_managed(tmp_path: Path, trace: TraceWriter) -> None:
    spec = "gbid1=mqtt://h1:1884,gbid2=mqtt://user:secret@h2:1885"
    brokers = BrokerSet(["gbid1", "gbid2"], broker=spec, run_dir=tmp_path, trace=trace)
    assert brokers.kind == "external"
    assert brokers.spec.redacted() == "gbid1=mqtt://h1:1884,gbid2=mqtt://user:***@h2:1885"
    assert brokers.endpoint("gbid1") == ("h1", 1884)
    assert brokers.url("gbid2") == "mqtt://h2:1885"
    assert brokers.credentials("cc-1", "gbid1") == ("cc-1", "")
    assert brokers.credentials("cc-1", "gbid2") == ("user", "secret")
    for op in (brokers.start_broker, brokers.stop_broker, brokers.crash_broker, brokers.restart_broker):
        with pytest.raises(BrokerError, match="external") as err:
            await op("gbid1")
        assert "secret" not in str(err.value)
    await brokers.stop()
    assert life_events(trace) == []
    assert not (tmp_path / "brokers").exists()


async def test_external_broker_that_cannot_be_reached_is_named_at_start(tmp_path: Path) -> None:
    # A bound socket that does not listen: a connection to its port is refused at once.
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
        brokers = BrokerSet(["gbid1"], broker=f"gbid1=mqtt://user:s3cret@127.0.0.1:{port}", run_dir=tmp_path)
        with pytest.raises(BrokerError) as err:
            await brokers.start()
    message = str(err.value)
    assert f"127.0.0.1:{port}" in message and "gbid1" in message and "cannot be reached" in message
    assert "s3cret" not in message and "\n" not in message


async def test_external_broker_is_probed_with_the_credentials_of_its_url(
    tmp_path: Path, amqtt_brokers: BrokerFactory  # noqa: F811
) -> None:
    real = await amqtt_brokers(["gbid1"])
    host, port = real.endpoint("gbid1")
    user, password = real.admin_credentials()  # the one login that may use any client id
    good = BrokerSet(["gbid1"], broker=f"gbid1=mqtt://{user}:{password}@{host}:{port}", run_dir=tmp_path)
    await good.start()
    bad = BrokerSet(["gbid1"], broker=f"gbid1=mqtt://{user}:wrong-{password}@{host}:{port}", run_dir=tmp_path)
    with pytest.raises(BrokerError, match="refused the connection") as err:
        await bad.start()
    assert f"{host}:{port}" in str(err.value) and password not in str(err.value)


@pytest.mark.parametrize(
    ("gbids", "broker", "named"),
    [
        (["a"], "rabbitmq", "'rabbitmq'"),
        ([], "amqtt", "gbids"),
        (["a", "a"], "amqtt", "duplicate"),
        (["a/b"], "amqtt", "'a/b'"),
        (["a", "b"], "a=mqtt://h:1", "no URL for backend(s) b"),
        (["a"], "a=mqtt://h:1,c=mqtt://h:2", "GBID(s) c that are not backends"),
        (["a"], "a=mqtt://u:s3cret@h:x", "'mqtt://u:***@h:x'"),
    ],
)
def test_bad_broker_set_arguments(tmp_path: Path, gbids: list[str], broker: str, named: str) -> None:
    with pytest.raises(ValueError) as err:
        BrokerSet(gbids, broker=broker, run_dir=tmp_path)
    assert named in str(err.value) and "s3cret" not in str(err.value)


def test_accessors_name_the_bad_gbid(tmp_path: Path) -> None:
    brokers = BrokerSet(["a"], broker="amqtt", run_dir=tmp_path)
    with pytest.raises(ValueError, match="'nope'"):
        brokers.endpoint("nope")
    with pytest.raises(BrokerError, match="not started"):
        brokers.endpoint("a")
    with pytest.raises(ValueError, match="client_id"):
        brokers.credentials("")
    username, password = brokers.credentials("cc-1")
    assert username == "cc-1" and password
    assert BrokerSet(["a"], broker="amqtt", run_dir=tmp_path).credentials("cc-1") == (username, password)


def test_mosquitto_missing_is_a_clear_error(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(mosquitto, "SYSTEM_BINARY", tmp_path / "no-such-mosquitto")
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(MosquittoNotFound, match="no Mosquitto executable found"):
        BrokerSet(["a"], broker="mosquitto", run_dir=tmp_path)


async def test_mosquitto_keeps_autosaved_session_across_crash(mosquitto_brokers: BrokerFactory) -> None:  # noqa: F811
    brokers = await mosquitto_brokers(["gbid-a"])
    client_id = unique("cc")
    topic = f"{client_id}/low"

    def store() -> None:
        sub = Client(brokers, "gbid-a", client_id, clean_session=False).connect()
        assert sub.subscribe(f"{client_id}/#")
        sub.disconnect()
        pub = Client(brokers, "gbid-a", unique("pub")).connect()
        pub.publish(topic, b"queued-before-crash")
        # Mosquitto saves at the end of the loop pass that counted a change (autosave
        # on changes, interval 1); the answer to one more request comes from a later
        # pass, so the queued message is on disk before the SIGKILL.
        pub.publish(f"{unique('barrier')}/low", b"")
        pub.disconnect()

    await in_thread(store)
    await brokers.crash_broker("gbid-a")
    await brokers.restart_broker("gbid-a")

    def resume() -> None:
        sub = Client(brokers, "gbid-a", client_id, clean_session=False).connect()
        assert sub.session_present is True
        assert sub.receive().payload == b"queued-before-crash"
        sub.disconnect()

    await in_thread(resume)


@pytest.mark.parametrize(("autosave", "kept"), [(1, True), (1000, False)])
async def test_mosquitto_autosave_interval_bounds_what_a_crash_loses(autosave: int, kept: bool, tmp_path: Path) -> None:
    """At 1 a persistent session and its queued message are saved before the SIGKILL; at
    1000 the handful of changes this makes (a session, a subscription, a PUBACK) never
    reach a save, so the restarted broker has neither: what docs/design/brokers.md says."""
    async with BrokerSet(["gbid-a"], broker="mosquitto", run_dir=tmp_path / "run", autosave=autosave) as brokers:
        assert f"autosave_interval {autosave}\n" in (brokers.broker_dir / "gbid-a.conf").read_text()
        client_id = unique("cc")

        def store() -> None:
            sub = Client(brokers, "gbid-a", client_id, clean_session=False).connect()
            assert sub.subscribe(f"{client_id}/#")
            sub.disconnect()
            pub = Client(brokers, "gbid-a", unique("pub")).connect()
            pub.publish(f"{client_id}/low", b"queued-before-crash")
            pub.publish(f"{unique('barrier')}/low", b"")  # a later loop pass: the save is done
            pub.disconnect()

        await in_thread(store)
        await brokers.crash_broker("gbid-a")
        await brokers.restart_broker("gbid-a")

        def resume() -> None:
            sub = Client(brokers, "gbid-a", client_id, clean_session=False).connect()
            assert sub.session_present is kept
            if kept:
                assert sub.receive().payload == b"queued-before-crash"
            sub.disconnect()

        await in_thread(resume)


@pytest.mark.parametrize("bad", [0, -1, 1_000_001, True, 2.0, "10"])
def test_mosquitto_autosave_must_be_a_count_of_changes(bad: object, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="autosave: expected the number of changes"):
        BrokerSet(["a"], broker="mosquitto", run_dir=tmp_path, autosave=bad)  # type: ignore[arg-type]


def test_autosave_is_refused_for_brokers_without_mosquittos_persistence(tmp_path: Path) -> None:
    for broker in ("amqtt", "a=mqtt://127.0.0.1:1"):
        with pytest.raises(ValueError, match="for broker='mosquitto' only"):
            BrokerSet(["a"], broker=broker, run_dir=tmp_path, autosave=1)


# -- a runtime's connection: a failed connect is reported at once ----------------------


def connection(host: str, port: int, credentials: tuple[str, str] | None) -> MqttConnection:
    return MqttConnection(
        gbid="gbid1", host=host, port=port, client_id=unique("cc"), topic=unique("t"),
        credentials=credentials, loop=asyncio.get_running_loop(), on_message=lambda *_: None,
    )


async def test_runtime_connection_refused_fails_without_waiting_for_the_timeout() -> None:
    with socket.socket() as closed:  # bound, not listening: connecting is refused
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
        conn = connection("127.0.0.1", port, None)
        conn.start()
        try:
            # The timeout is far beyond the test's patience; a refusal must end it first.
            with pytest.raises(MqttConnectError) as err:
                await conn.wait_connected(60)
        finally:
            await conn.crash()
    assert str(err.value) == f"gbid 'gbid1': cannot connect to MQTT broker 127.0.0.1:{port}: Connection refused"


async def test_runtime_connection_with_refused_credentials_fails_at_once(amqtt_brokers: BrokerFactory) -> None:  # noqa: F811
    brokers = await amqtt_brokers(["gbid1"])
    host, port = brokers.endpoint("gbid1")
    conn = connection(host, port, ("cc", "not-the-password"))
    conn.start()
    try:
        with pytest.raises(MqttConnectError, match=f"{host}:{port}: the broker refused the CONNECT"):
            await conn.wait_connected(60)
    finally:
        await conn.crash()


async def test_runtime_connection_whose_subscription_is_refused_fails_at_once(amqtt_brokers: BrokerFactory) -> None:  # noqa: F811
    """A runtime that could connect but not subscribe would be deaf while it looks fine."""
    brokers = await amqtt_brokers(["gbid1"])
    host, port = brokers.endpoint("gbid1")
    conn = MqttConnection(
        gbid="gbid1", host=host, port=port, client_id="cc-a", topic="cc-b",  # not its own topic
        credentials=brokers.credentials("cc-a"), loop=asyncio.get_running_loop(), on_message=lambda *_: None,
    )
    conn.start()
    try:
        with pytest.raises(MqttConnectError, match="refused the subscription to cc-b/#"):
            await conn.wait_connected(60)
    finally:
        await conn.crash()
