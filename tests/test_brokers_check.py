"""``joynr-sim brokers check``: the MQTT properties joynr relies on, measured on amqtt and
Mosquitto as a run starts them and compared with what ``brokers.promises`` declares; the
command's exit codes; each property's check seen failing against a broker configured (or
fronted by a rewriting proxy) to break it; the declared properties in ``run.json`` and in
the run report."""

from __future__ import annotations

import asyncio
import json
import os
import pwd
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from analytics_helpers import RunBuilder
from broker_helpers import BrokerFactory
from brokers import MosquittoNotFound, mosquitto
from brokers.probe import connect_packet, probe_blocking
from brokers.promises import BY_ID, DECLARED, PROPERTIES, declared
from brokers.semantics import CHECKS, Target, broker_set_target, run_property, run_suite
from joynr_sim.cli import main
from joynr_sim.report import write_report
from joynr_sim.report.inputs import read_manifest

pytestmark = pytest.mark.e2e  # broker processes

PASSWORD = "pw-s3cret"


@pytest.fixture
def factories(amqtt_brokers: BrokerFactory, mosquitto_brokers: BrokerFactory) -> dict[str, BrokerFactory]:
    return {"amqtt": amqtt_brokers, "mosquitto": mosquitto_brokers}


def one_line(err: str) -> str:
    assert "Traceback" not in err, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


# -- the declaration is what the brokers do ------------------------------------------------


def test_every_property_is_declared_once_with_a_check_and_an_outcome_per_kind() -> None:
    assert list(BY_ID) == list(CHECKS) and len(PROPERTIES) == len(BY_ID)
    for kind, outcomes in DECLARED.items():
        assert set(outcomes) == set(BY_ID), kind
    assert all(o.kept is None for o in DECLARED["external"].values())
    relied = {p.id for p in PROPERTIES if p.relied_on}
    assert relied == set(BY_ID) - {"retained", "persistence"}


@pytest.mark.parametrize("kind", ["amqtt", "mosquitto"])
async def test_the_declaration_is_what_the_suite_measures(kind: str, factories: dict[str, BrokerFactory]) -> None:
    brokers = await factories[kind](["check"])
    target = broker_set_target(brokers, "check", asyncio.get_running_loop())
    started = time.monotonic()
    measured = await asyncio.to_thread(run_suite, target)
    assert measured == DECLARED[kind]
    assert time.monotonic() - started < 60


def test_the_command_finds_every_relied_on_property_kept_on_mosquitto(tmp_path: Path, capsys) -> None:
    out = tmp_path / "check.json"
    assert main(["brokers", "check", "--broker", "mosquitto", "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "every property joynr relies on is kept by mosquitto" in printed
    for p in PROPERTIES:  # one progress line per property, then the table
        assert f"mosquitto {p.id}: " in printed
    report = json.loads(out.read_text())
    assert report["schema"] == "joynr-sim-brokers-check/1" and report["exit"] == 0
    [broker] = report["brokers"]
    assert broker["kind"] == "mosquitto"
    assert all(v["kept"] is True for v in broker["properties"].values() if v["relied_on"])
    assert broker["properties"]["inflight-window"]["how"] == "window 20"


# -- exit codes ------------------------------------------------------------------------------


def test_without_mosquitto_the_default_checks_amqtt_and_says_so(monkeypatch, capsys) -> None:
    def missing() -> str:
        raise MosquittoNotFound("broker='mosquitto': no Mosquitto executable found")

    monkeypatch.setattr(mosquitto, "find_binary", missing)
    code = main(["brokers", "check"])
    printed = capsys.readouterr().out
    assert "mosquitto: not checked: broker='mosquitto': no Mosquitto executable found" in printed
    assert "amqtt qos1-redelivery: " in printed and "mosquitto qos1-redelivery" not in printed
    assert code == (0 if all(o.kept or not BY_ID[p].relied_on for p, o in DECLARED["amqtt"].items()) else 1)


@pytest.fixture
def refused_port() -> Iterator[int]:
    """A port on which a connection is refused at once: bound, never listening."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        yield s.getsockname()[1]


def test_a_bad_broker_choice_or_json_path_is_a_usage_error(tmp_path: Path, capsys) -> None:
    assert main(["brokers", "check", "--broker", f"gbid1=http://u:{PASSWORD}@h:1"]) == 2
    err = one_line(capsys.readouterr().err)
    assert "must start with mqtt://" in err and PASSWORD not in err and "u:***@" in err
    assert main(["brokers", "check", "--broker", "amqtt", "--json", str(tmp_path / "no" / "x.json")]) == 2
    assert "no such folder" in one_line(capsys.readouterr().err)
    with pytest.raises(SystemExit) as exited:
        main(["brokers", "check", "--bogus"])
    assert exited.value.code == 2


def test_an_unreachable_external_broker_exits_3_in_one_line_without_its_password(refused_port: int, capsys) -> None:
    url = f"gbid1=mqtt://someone:{PASSWORD}@127.0.0.1:{refused_port}"
    assert main(["brokers", "check", "--broker", url]) == 3
    captured = capsys.readouterr()
    err = one_line(captured.err)
    assert f"mqtt://someone:***@127.0.0.1:{refused_port} cannot be reached: Connection refused" in err
    assert PASSWORD not in captured.out + captured.err


# -- a Mosquitto of the test's own, and a proxy that rewrites what passes ---------------------


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class OwnMosquitto:
    """Mosquitto with a config of the test's own: anonymous access, no ACL, ``extra`` lines."""

    def __init__(self, folder: Path, extra: list[str]) -> None:
        self.folder, self.port = folder, _free_port()
        folder.mkdir(parents=True, exist_ok=True)
        lines = [f"listener {self.port} 127.0.0.1", "allow_anonymous true", "persistence true",
                 f"persistence_location {folder}/", "autosave_on_changes true", "autosave_interval 1",
                 f"user {pwd.getpwuid(os.getuid()).pw_name}", "log_dest stderr", *extra]
        self.config = folder / "mosquitto.conf"
        self.config.write_text("\n".join(lines) + "\n")
        self.process: subprocess.Popen | None = None
        self.start()

    def start(self) -> None:
        with open(self.folder / "mosquitto.log", "ab") as log:
            self.process = subprocess.Popen(mosquitto.command(mosquitto.find_binary(), self.config),
                                            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
        deadline = time.monotonic() + 10
        while True:
            try:
                if probe_blocking("127.0.0.1", self.port, connect_packet("probe", "probe", "x"), 1.0) == 0:
                    return
            except OSError:
                pass
            assert self.process.poll() is None, (self.folder / "mosquitto.log").read_text()
            assert time.monotonic() < deadline, "mosquitto did not come up"
            time.sleep(0.05)

    def restart(self) -> None:
        """SIGKILL, then start on the same port."""
        self.stop()
        self.start()

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait(10)

    def target(self, port: int | None = None, *, restart: bool = True) -> Target:
        return Target("127.0.0.1", port or self.port, login=lambda client_id: (client_id, "any"),
                      restart=self.restart if restart else None)


def _read_packet(sock: socket.socket) -> bytes | None:
    """One whole MQTT packet (fixed header, remaining length, body), None at end of stream."""
    def exactly(n: int) -> bytes | None:
        data = b""
        while len(data) < n:
            chunk = sock.recv(n - len(data))
            if not chunk:
                return None
            data += chunk
        return data

    header = exactly(1)
    if header is None:
        return None
    length, shift, raw = 0, 0, b""
    while True:
        byte = exactly(1)
        if byte is None:
            return None
        raw += byte
        length += (byte[0] & 0x7F) << shift
        shift += 7
        if not byte[0] & 0x80:
            break
    body = exactly(length) if length else b""
    return None if body is None else header + raw + body


class RewritingProxy:
    """Between clients and a broker: ``clean`` True (False) sets (clears) the clean-session
    flag of every CONNECT, so the broker forgets (keeps) every session; ``swap`` hands a
    client the first two PUBLISHes the broker sends it in the opposite order."""

    def __init__(self, upstream: int, *, clean: bool | None = None, swap: bool = False) -> None:
        self.upstream, self.clean, self.swap = upstream, clean, swap
        self.server = socket.create_server(("127.0.0.1", 0))
        self.port = self.server.getsockname()[1]
        self.sockets: list[socket.socket] = [self.server]
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.server.accept()
            except OSError:
                return
            broker = socket.create_connection(("127.0.0.1", self.upstream))
            self.sockets += [client, broker]
            threading.Thread(target=self._pump, args=(client, broker, self._connect), daemon=True).start()
            threading.Thread(target=self._pump, args=(broker, client, self._publishes()), daemon=True).start()

    def _connect(self, packet: bytes) -> list[bytes]:
        if packet[0] >> 4 != 1 or self.clean is None:  # not a CONNECT
            return [packet]
        body = 1
        while packet[body] & 0x80:  # the remaining length's bytes
            body += 1
        body += 1
        flags_at = body + 2 + int.from_bytes(packet[body:body + 2], "big") + 1  # protocol name, level, flags
        flags = packet[flags_at] | 0x02 if self.clean else packet[flags_at] & ~0x02
        return [packet[:flags_at] + bytes([flags]) + packet[flags_at + 1:]]

    def _publishes(self) -> Callable[[bytes], list[bytes]]:
        held: list[bytes] = []
        swapped = [not self.swap]

        def rewrite(packet: bytes) -> list[bytes]:
            if swapped[0] or packet[0] >> 4 != 3:
                return [packet]
            if not held:
                held.append(packet)
                return []
            swapped[0] = True
            return [packet, held.pop()]

        return rewrite

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket, rewrite: Callable[[bytes], list[bytes]]) -> None:
        try:
            while (packet := _read_packet(src)) is not None:
                for out in rewrite(packet):
                    dst.sendall(out)
        except OSError:
            pass
        for s in (src, dst):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def close(self) -> None:
        for s in self.sockets:
            s.close()


@pytest.fixture
def own_mosquitto(tmp_path: Path) -> Iterator[Callable[[list[str]], OwnMosquitto]]:
    made: list[OwnMosquitto] = []

    def make(extra: list[str]) -> OwnMosquitto:
        made.append(OwnMosquitto(tmp_path / f"mosquitto-{len(made)}", extra))
        return made[-1]

    yield make
    for m in made:
        m.stop()


@pytest.fixture
def proxy() -> Iterator[Callable[..., RewritingProxy]]:
    made: list[RewritingProxy] = []

    def make(upstream: int, **kwargs: object) -> RewritingProxy:
        made.append(RewritingProxy(upstream, **kwargs))
        return made[-1]

    yield make
    for p in made:
        p.close()


def test_the_suite_keeps_everything_on_an_open_mosquitto_through_a_plain_proxy(own_mosquitto, proxy) -> None:
    """The controls: the configured brokers below differ from this one only in what breaks."""
    broker = own_mosquitto(["max_queued_messages 0"])
    plain = proxy(broker.port)
    measured = run_suite(broker.target(plain.port, restart=False), only=[
        "qos1-redelivery", "offline-queue", "clean-session-discards", "takeover", "inflight-window", "ordering",
        "retained"])
    assert all(o.kept for o in measured.values()), measured
    assert run_property("persistence", broker.target()).kept is True


BROKEN = [
    # property, Mosquitto's extra config, proxy (None: none), what the outcome says
    ("qos1-redelivery", [], {"clean": True}, "no message within 5 s of the reconnect (session present 0)"),
    ("offline-queue", ["max_queued_messages 1"], None, "1 of 3 delivered within 5 s, session present 1"),
    ("clean-session-discards", [], {"clean": False}, "session present 1 on a clean-session connect"),
    ("takeover", [], {"clean": True}, "the new connection received nothing within 5 s (session present 0)"),
    ("acl-publish-denied", [], None, "delivered (acknowledged and dropped)"),
    ("acl-subscribe-denied", [], None, "delivered outside the grants (SUBACK 0x1)"),
    ("inflight-window", ["max_inflight_messages 1", "max_queued_messages 1"], None, "window 1, 48 of 50 dropped"),
    ("ordering", [], {"swap": True}, "0 arrived after 1"),
    ("qos0-delivery", ["upgrade_outgoing_qos true"], None, "delivered at QoS 1"),
    ("retained", ["retain_available false"], None, "no PUBACK for a message to bc-retained-"),
    ("persistence", ["persistence false"], None, "session present 0 after the restart"),
]


@pytest.mark.parametrize(("prop", "extra", "rewrite", "how"), BROKEN, ids=[b[0] for b in BROKEN])
def test_each_property_fails_on_a_broker_configured_to_break_it(
    prop: str, extra: list[str], rewrite: dict | None, how: str, own_mosquitto, proxy
) -> None:
    broker = own_mosquitto(extra)
    port = proxy(broker.port, **rewrite).port if rewrite else broker.port
    outcome = run_property(prop, broker.target(port))
    assert outcome.kept is False, outcome
    assert how in outcome.how, outcome


def test_an_external_broker_is_checked_without_a_restart_or_grants_and_without_its_password(
    own_mosquitto, tmp_path: Path, capsys
) -> None:
    broker = own_mosquitto(["max_queued_messages 0"])
    out = tmp_path / "external.json"
    url = f"gbid1=mqtt://someone:{PASSWORD}@127.0.0.1:{broker.port}"
    assert main(["brokers", "check", "--broker", url, "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "not tested: external (not restarted)" in printed and "someone:***@" in printed
    text = out.read_text()
    assert PASSWORD not in printed + text
    [checked] = json.loads(text)["brokers"]
    assert checked["name"] == "gbid1" and checked["url"] == f"mqtt://someone:***@127.0.0.1:{broker.port}"
    props = checked["properties"]
    assert props["persistence"]["kept"] is None and props["acl-publish-denied"]["kept"] is None
    assert props["qos1-redelivery"]["kept"] is True and props["offline-queue"]["kept"] is True


# -- run.json and the report -------------------------------------------------------------------


def test_a_run_records_the_declared_properties_of_its_broker_and_the_report_shows_them(tmp_path: Path) -> None:
    from joynr_sim.scenario.provenance import broker_properties

    assert broker_properties("mosquitto") == declared("mosquitto")
    assert broker_properties("gbid1=mqtt://u:p@h:1")["persistence"] == {
        "kept": None, "how": "unknown: the broker's own configuration", "relied_on": False}
    b = RunBuilder()
    b.msg("cc-1", "msg.out", 100, "m1", hops=1, via="mqtt", gbid="g1", target="g1/cc-2")
    run_dir = b.write(tmp_path / "runs")
    old = json.loads((run_dir / "run.json").read_text())
    (run_dir / "run.json").write_text(json.dumps({**old, "broker": "amqtt", "broker_properties": declared("amqtt")}))
    manifest = read_manifest(run_dir / "run.json")
    assert [p.id for p in manifest.broker_properties] == list(BY_ID)
    html = write_report([run_dir], out=tmp_path / "report").pages[0].read_text()
    assert 'id="broker-properties"' in html and "session present 0 after the restart" in html
    (run_dir / "run.json").write_text(json.dumps(old))  # written before the field existed
    assert read_manifest(run_dir / "run.json").broker_properties == ()
    assert 'id="broker-properties"' not in write_report([run_dir], out=tmp_path / "report").pages[0].read_text()
