"""CONNECTs under a running cluster controller's client id, on both brokers.

A refused one (no username, a wrong password) changes nothing for the controller: no
detach, calls keep working, on Mosquitto also after the brokers let a new login in. One
with the controller's own credentials takes its session over: the controller notices (its
link detaches and attaches again on a new session) and calls through it keep working.
"""

from __future__ import annotations

import socket
import struct
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from brokers import access, mosquitto
from brokers.probe import connect_packet
from e2e_helpers import events, until
from joynr_sim.core.address import MqttAddress
from joynr_sim.runtime.participants import EchoProvider
from joynr_sim.simulation import Simulation

pytestmark = pytest.mark.e2e

KINDS = ["amqtt", "mosquitto"]
TO_CC2, TO_CC1 = "echo-at-cc2", "echo-at-cc1"
WAIT_S = 10.0


async def topology(sim: Simulation):
    """cc1 and cc2 call each other: an Echo provider behind each, a proxy to it behind the other."""
    cc1 = await sim.cluster_controller("cc1", ["gbid1"], provisioned=[(TO_CC2, MqttAddress("gbid1", "cc2"), True)])
    cc2 = await sim.cluster_controller("cc2", ["gbid1"], provisioned=[(TO_CC1, MqttAddress("gbid1", "cc1"), True)])
    app1, app2 = await sim.libjoynr("app1", cc1), await sim.libjoynr("app2", cc2)
    await app1.register_provider("dom", "joynrsim/Echo", EchoProvider(), participant_id=TO_CC1)
    await app2.register_provider("dom", "joynrsim/Echo", EchoProvider(), participant_id=TO_CC2)
    to_cc2 = await app1.create_proxy("joynrsim/Echo", TO_CC2)
    to_cc1 = await app2.create_proxy("joynrsim/Echo", TO_CC1)
    return cc1, cc2, to_cc2, to_cc1, (app1, app2)


async def calls_work(to_cc2, to_cc1, word: str) -> None:
    """One call each way, each answered within its ttl (a JoynrTimeoutException otherwise)."""
    assert await to_cc2.call("echo", f"{word}-1", ttl_ms=10_000) == f"{word}-1"
    assert await to_cc1.call("echo", f"{word}-2", ttl_ms=10_000) == f"{word}-2"


def anonymous_connect_packet(client_id: str) -> bytes:
    """A CONNECT with a clean session and no username or password (``mosquitto_pub -i <id>``)."""
    raw = client_id.encode()
    body = struct.pack("!H", 4) + b"MQTT" + bytes([4, 0x02]) + struct.pack("!H", 10) + struct.pack("!H", len(raw)) + raw
    return bytes([0x10, len(body)]) + body


def connack(host: str, port: int, packet: bytes) -> int:
    """Send one CONNECT; the CONNACK's return code. The connection is then closed."""
    with socket.create_connection((host, port), timeout=WAIT_S) as sock:
        sock.sendall(packet)
        answer = b""
        while len(answer) < 4:
            chunk = sock.recv(4 - len(answer))
            assert chunk, f"connection closed after {len(answer)} bytes of CONNACK"
            answer += chunk
        assert answer[0] == 0x20, answer
        if answer[3] == 0:
            sock.sendall(b"\xe0\x00")  # DISCONNECT
        return answer[3]


@contextmanager
def holding(host: str, port: int, packet: bytes) -> Iterator[threading.Event]:
    """A connection made with ``packet`` (accepted) and held; the event is set once the
    broker closed it, which it does when the session's owner connects again."""
    sock = socket.create_connection((host, port), timeout=WAIT_S)
    sock.sendall(packet)
    assert sock.recv(4) == b"\x20\x02\x00\x00", "the takeover CONNECT was not accepted"
    closed = threading.Event()

    def watch() -> None:
        deadline = time.monotonic() + 3 * WAIT_S
        sock.settimeout(0.2)
        while time.monotonic() < deadline:
            try:
                if not sock.recv(4096):
                    break
            except TimeoutError:
                continue
            except OSError:
                break
        closed.set()

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        yield closed
    finally:
        sock.close()
        watcher.join(WAIT_S)


def test_mosquittos_acl_file_gives_every_client_the_models_grants():
    # One file for every client id, never rewritten: its patterns stand for the username.
    lines = mosquitto.acl_text().splitlines()
    patterns = [line.split(" ", 2)[1:] for line in lines if line.startswith("pattern ")]
    for username in ("cc1", "discoverydirectory_channelid", "outsider-7"):
        grants = [(access_, topic.replace("%u", username)) for access_, topic in patterns]
        assert grants == [(g.access, g.topic_filter) for g in access.grants(username)]
    assert mosquitto.acl_section(access.ADMIN_USERNAME) in mosquitto.acl_text()


async def test_a_refused_anonymous_connect_as_a_controller_cuts_nothing_on_mosquitto(tmp_path):
    # What ``mosquitto_pub -i cc2 -t x -m y`` without a user did to a running simulation:
    # from the next new login on, calls between cc1 and cc2 went unanswered.
    async with Simulation(tmp_path, gbids=["gbid1"], broker="mosquitto", processes=False) as sim:
        cc1, cc2, to_cc2, to_cc1, apps = await topology(sim)
        await calls_work(to_cc2, to_cc1, "before")
        host, port = sim.brokers.endpoint("gbid1")
        assert connack(host, port, anonymous_connect_packet("cc2")) == 5
        await calls_work(to_cc2, to_cc1, "refused")
        await sim.cluster_controller("cc3", ["gbid1"])  # a new login on the running broker
        await calls_work(to_cc2, to_cc1, "new-login")
        for cc in (cc1, cc2):  # restarting the controllers did not help either
            await cc.crash()
            await cc.start()
        await until(lambda: all(app.ws is not None and app.ws.connected for app in apps), timeout_s=WAIT_S)
        await calls_work(to_cc2, to_cc1, "restarted")
        assert sim.brokers.is_running("gbid1")
    assert not events(tmp_path, "life.crash", target="broker-gbid1")


@pytest.mark.parametrize("kind", KINDS)
async def test_a_refused_connect_under_a_controllers_id_changes_nothing(tmp_path, kind):
    async with Simulation(tmp_path, gbids=["gbid1"], broker=kind, processes=False) as sim:
        cc1, cc2, to_cc2, to_cc1, apps = await topology(sim)
        await calls_work(to_cc2, to_cc1, "before")
        host, port = sim.brokers.endpoint("gbid1")
        password = sim.brokers.credentials("cc1")[1]
        outsider, outsider_password = sim.brokers.credentials("outsider")
        refused = [
            anonymous_connect_packet("cc1"),
            connect_packet("cc1", "cc1", "not-" + password),  # its username, a wrong password
            connect_packet("cc1", outsider, outsider_password),  # another login's own credentials
            connect_packet("cc1", "cc2", sim.brokers.credentials("cc2")[1]),  # another controller's
        ]
        for packet in refused:
            assert connack(host, port, packet) != 0
        await calls_work(to_cc2, to_cc1, "refused")
        sim.brokers.credentials("newcomer")  # a new login: on Mosquitto, added while it runs
        await calls_work(to_cc2, to_cc1, "new-login")
        assert cc1.mqtt["gbid1"].connected.is_set()
    assert not events(tmp_path, "link.detach", rt="cc1", closed=False)  # closed: the run's end
    assert len(events(tmp_path, "link.attach", rt="cc1")) == 1


@pytest.mark.parametrize("kind", KINDS)
async def test_a_takeover_with_the_controllers_own_login_is_noticed(tmp_path, kind):
    async with Simulation(tmp_path, gbids=["gbid1"], broker=kind, processes=False) as sim:
        cc1, cc2, to_cc2, to_cc1, apps = await topology(sim)
        await calls_work(to_cc2, to_cc1, "before")
        host, port = sim.brokers.endpoint("gbid1")
        username, password = sim.brokers.credentials("cc1")
        # A second CONNECT with cc1's client id and credentials and a clean session: the
        # broker ends cc1's connection and its session; cc1 connects again (which in turn
        # ends the intruder's connection) on a session of its own.
        with holding(host, port, connect_packet("cc1", username, password)) as intruder_closed:
            await until(lambda: events(tmp_path, "link.detach", rt="cc1", closed=False), timeout_s=WAIT_S)
            await until(lambda: len(events(tmp_path, "link.attach", rt="cc1")) == 2, timeout_s=WAIT_S)
            await until(intruder_closed.is_set, timeout_s=WAIT_S)
        await calls_work(to_cc2, to_cc1, "after")
        assert cc1.mqtt["gbid1"].connected.is_set()
    (detach,) = events(tmp_path, "link.detach", rt="cc1", closed=False)
    first, again = events(tmp_path, "link.attach", rt="cc1")
    assert detach["conn"] == first["conn"]
    assert again["seq"] > detach["seq"] and again["session_present"] is False
