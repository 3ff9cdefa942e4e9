"""The memory network's broker measured as Mosquitto is: the broker semantics suite of
``joynr-sim brokers check`` and its paho clients against ``MemoryBroker`` on a loopback
port (``network.mqtt_listener``), compared with ``DECLARED["memory"]``, which keeps what
Mosquitto keeps; and the listener's MQTT 3.1.1 codec (``network.mqtt_codec``), whose every
malformed or oversized packet closes its own connection and nothing else."""

from __future__ import annotations

import json
import socket
import struct
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from brokers.promises import DECLARED, PROPERTIES
from brokers.semantics import run_suite
from joynr_sim.brokers_console import memory_target
from joynr_sim.cli import main
from joynr_sim.network.memory import MemoryBrokers
from joynr_sim.network.mqtt_broker import MemoryBroker
from joynr_sim.network.mqtt_codec import (
    CONNACK,
    MAX_PACKET_BYTES,
    PINGRESP,
    PUBACK,
    PUBLISH,
    SUBACK,
    Malformed,
    Refused,
    decode,
    encode,
    split_packet,
)
from joynr_sim.network.mqtt_listener import MqttListener

GBID = "gbid-a"
WAIT_S = 5.0

# -- the declaration and the suite -------------------------------------------------------------


def test_the_memory_broker_is_declared_to_keep_what_mosquitto_keeps() -> None:
    for p in PROPERTIES:
        assert DECLARED["memory"][p.id].kept == DECLARED["mosquitto"][p.id].kept, p.id


@pytest.mark.e2e  # an MQTT broker on a TCP port, paho clients
def test_the_suite_measures_on_the_memory_broker_what_is_declared() -> None:
    with memory_target() as target:
        started = time.monotonic()
        measured = run_suite(target)
    assert measured == DECLARED["memory"]
    assert time.monotonic() - started < 60


@pytest.mark.e2e
def test_the_command_checks_the_memory_broker_and_finds_no_drift(tmp_path: Path, capsys) -> None:
    out = tmp_path / "check.json"
    assert main(["brokers", "check", "--broker", "memory", "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "every property joynr relies on is kept by memory" in printed
    assert "brokers/promises.py" not in printed  # no measured outcome differs from the declared one
    [broker] = json.loads(out.read_text())["brokers"]
    assert (broker["name"], broker["kind"]) == ("memory", "memory")
    for p in PROPERTIES:
        got = broker["properties"][p.id]
        assert {"kept": got["kept"], "how": got["how"]} == got["declared"], p.id


# -- the codec, without sockets -------------------------------------------------------------------


def _s(text: str | bytes) -> bytes:
    raw = text.encode() if isinstance(text, str) else text
    return struct.pack(">H", len(raw)) + raw


def _packet(first: int, body: bytes) -> bytes:
    return bytes([first]) + _length(len(body)) + body


def _length(n: int) -> bytes:
    out = bytearray()
    while True:
        n, byte = divmod(n, 128)
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _connect_body(client_id: str, username: str | None, password: str | None, *, clean: bool = False,
                  level: int = 4, flags: int | None = None) -> bytes:
    if flags is None:
        flags = (0x02 if clean else 0) | (0x80 if username is not None else 0) | (0x40 if password is not None else 0)
    body = _s("MQTT") + bytes([level, flags]) + struct.pack(">H", 60) + _s(client_id)
    return body + (_s(username) if username is not None else b"") + (_s(password) if password is not None else b"")


def test_split_packet_waits_for_a_whole_packet_and_takes_one_at_a_time() -> None:
    buf = bytearray(b"\xc0\x00\x40\x02\x00")
    assert split_packet(buf) == (12, 0, b"")
    assert split_packet(buf) is None and buf == bytearray(b"\x40\x02\x00")  # PUBACK not whole yet
    buf += b"\x07"
    assert split_packet(buf) == (4, 0, b"\x00\x07") and not buf
    big = bytearray(b"\x30" + _length(200_000))  # a 3-byte remaining length, body still to come
    assert split_packet(big) is None


@pytest.mark.parametrize("header", [b"\x30\xff\xff\xff\xff\x01", b"\x30" + _length(MAX_PACKET_BYTES + 1)],
                         ids=["five-byte-length", "oversized"])
def test_a_bad_or_oversized_remaining_length_is_malformed_before_any_body(header: bytes) -> None:
    with pytest.raises(Malformed):
        split_packet(bytearray(header))


def test_decode_gives_the_broker_its_tuples() -> None:
    assert decode(1, 0, _connect_body("cc-1", "cc-1", "pw", clean=True)) == ("connect", "cc-1", "cc-1", "pw", True,
                                                                             60.0)
    assert decode(1, 0, _connect_body("cc-1", None, None)) == ("connect", "cc-1", None, None, False, 60.0)
    assert decode(3, 0b1011, _s("a/low") + b"\x00\x05hi") == ("publish", 5, "a/low", b"hi", 1, True, True)
    assert decode(3, 0, _s("a/low") + b"hi") == ("publish", 0, "a/low", b"hi", 0, False, False)
    assert decode(4, 0, b"\x00\x05") == ("puback", 5)
    assert decode(8, 2, b"\x00\x01" + _s("a/#") + b"\x01" + _s("b") + b"\x02") == ("subscribe", 1,
                                                                                  [("a/#", 1), ("b", 2)])
    assert decode(10, 2, b"\x00\x02" + _s("a/#")) == ("unsubscribe", 2, ["a/#"])
    assert decode(12, 0, b"") == ("pingreq",) and decode(14, 0, b"") == ("disconnect",)



def test_decode_lets_go_what_mosquitto_lets_go() -> None:
    assert decode(3, 8, _s("a/low") + b"hi") == ("publish", 0, "a/low", b"hi", 0, True, False)  # DUP at QoS 0
    assert decode(4, 0b1111, b"\x00\x05\x00") == ("puback", 5)
    assert decode(12, 1, b"\x00") == ("pingreq",)


def test_encode_writes_what_the_broker_sends() -> None:
    assert encode(("connack", 0, True)) == b"\x20\x02\x01\x00"
    assert encode(("connack", 5, False)) == b"\x20\x02\x00\x05"
    assert encode(("suback", 7, [1, 0x80])) == b"\x90\x04\x00\x07\x01\x80"
    assert encode(("unsuback", 7)) == b"\xb0\x02\x00\x07" and encode(("puback", 258)) == b"\x40\x02\x01\x02"
    assert encode(("pingresp",)) == b"\xd0\x00"
    assert encode(("publish", 3, "a/low", b"x", 1, True, False)) == b"\x3a\x0a" + _s("a/low") + b"\x00\x03x"
    assert encode(("publish", 0, "a/low", b"x", 0, False, True)) == b"\x31\x08" + _s("a/low") + b"x"


@pytest.mark.parametrize("kind, flags, body", [
    (1, 0, _connect_body("c", "c", "p")[:-3]),  # truncated: the password's string is cut
    (1, 0, _connect_body("c", "c", "p") + b"\x00"),  # a byte after the last field
    (1, 1, _connect_body("c", "c", "p")),  # CONNECT's fixed header flags are 0
    (1, 0, _s("HTTP") + _connect_body("c", "c", "p")[6:]),
    (1, 0, _connect_body("c", "c", "p", flags=0xC3)),  # the reserved flag
    (1, 0, _connect_body("c", None, "p", flags=0x42)),  # a password without a username
    (1, 0, _connect_body("c", None, None, flags=0x12)),  # a will QoS without a will
    (1, 0, _s("MQTT") + b"\x04\x06\x00\x3c" + _s("c") + _s("w/low") + _s(b"gone")),  # a will
    (3, 6, _s("a/low") + b"\x00\x01"),  # QoS 3
    (3, 4, _s("a/low") + b"\x00\x01"),  # QoS 2: at most QoS 1 here
    (3, 2, _s("a/+") + b"\x00\x01"),  # a wildcard in a topic name
    (3, 2, _s("a/low") + b"\x00\x00"),  # packet id 0
    (3, 0, _s(b"a/\xff")),  # not UTF-8
    (3, 0, _s("a/\x00")),  # U+0000
    (4, 0, b"\x00"),  # PUBACK shorter than its packet id
    (4, 0, b"\x00\x00"),
    (14, 0, b"\x00"),  # DISCONNECT with a body
    (8, 0, b"\x00\x01" + _s("a/#") + b"\x01"),  # SUBSCRIBE's flags are 2
    (8, 2, b"\x00\x01"),  # no topic filter
    (8, 2, b"\x00\x01" + _s("a/#") + b"\x05"),  # reserved bits of the requested QoS
    (10, 2, b"\x00\x01"),
    (6, 2, b"\x00\x01"),  # PUBREL: no QoS 2 flows
    (2, 0, b"\x00\x00"),  # a packet only a server sends
])
def test_a_malformed_packet_is_refused(kind: int, flags: int, body: bytes) -> None:
    with pytest.raises(Malformed):
        decode(kind, flags, body)


def test_an_unsupported_protocol_level_or_a_persistent_session_without_id_is_refused_with_a_code() -> None:
    with pytest.raises(Refused) as refused:
        decode(1, 0, _connect_body("c", "c", "p", level=3))
    assert refused.value.code == 1
    with pytest.raises(Refused) as refused:
        decode(1, 0, _connect_body("", "c", "p"))
    assert refused.value.code == 2


# -- the codec on the listener: only the offending connection closes ---------------------------------


_OPEN: list[socket.socket] = []  # closed when the test's listener is


class Raw:
    """A client on a blocking socket: packets out as bytes, packets in as (type, flags, body)."""

    def __init__(self, address: tuple[str, int]) -> None:
        self.sock = socket.create_connection(address, timeout=WAIT_S)
        _OPEN.append(self.sock)
        self.buf = bytearray()
        self.ending: str | None = None  # how the broker ended the connection: "close" or "reset"

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def read(self) -> tuple[int, int, bytes] | None:
        """The next packet; None when the broker closed the connection (or reset it)."""
        deadline = time.monotonic() + WAIT_S
        while (packet := split_packet(self.buf)) is None:
            self.sock.settimeout(max(0.01, deadline - time.monotonic()))
            try:
                chunk = self.sock.recv(65536)
            except ConnectionResetError:
                self.ending = "reset"
                return None
            if not chunk:
                self.ending = "close"
                return None
            self.buf += chunk
        return packet

    def expect(self, kind: int) -> bytes:
        packet = self.read()
        assert packet is not None and packet[0] == kind, f"expected packet type {kind}, got {packet}"
        return packet[2]

    def ended(self) -> str | None:
        """How the broker ends the connection, before it sends any other packet."""
        assert self.read() is None, "a packet instead of the end"
        return self.ending


@pytest.fixture
def served() -> Iterator[tuple[MemoryBrokers, MqttListener]]:
    brokers = MemoryBrokers([GBID], "test")
    with MqttListener(brokers.broker(GBID)) as listener:
        listener.run(brokers.start())
        try:
            yield brokers, listener
        finally:
            while _OPEN:
                _OPEN.pop().close()


def login(brokers: MemoryBrokers, address: tuple[str, int], client_id: str, *, clean: bool = False) -> Raw:
    """Logged in as itself (accepted) and subscribed to its own prefix at QoS 1."""
    raw = Raw(address)
    raw.send(_packet(0x10, _connect_body(client_id, *brokers.credentials(client_id), clean=clean)))
    assert raw.expect(CONNACK)[1] == 0
    raw.send(_packet(0x82, b"\x00\x01" + _s(f"{client_id}/#") + b"\x01"))
    assert raw.expect(SUBACK) == b"\x00\x01\x01"
    return raw


def still_works(brokers: MemoryBrokers, address: tuple[str, int], raw: Raw, client_id: str) -> None:
    """``raw`` answers a PINGREQ and receives what it publishes to itself; a new client logs in."""
    raw.send(b"\xc0\x00")
    raw.expect(PINGRESP)
    raw.send(_packet(0x32, _s(f"{client_id}/low") + b"\x00\x09" + b"still"))
    got = [raw.read(), raw.read()]
    assert sorted(p[0] for p in got if p) == [PUBLISH, PUBACK]
    login(brokers, address, f"{client_id}-new", clean=True).send(b"\xe0\x00")


@pytest.mark.parametrize("logged_in, data", [
    pytest.param(False, b"\x10\x04\x00\x09MQ", id="truncated-connect"),  # a 9-byte string in a 4-byte body
    pytest.param(False, b"\x10\xff\xff\xff\xff\x7f", id="connect-bad-remaining-length"),
    pytest.param(False, b"\x10" + _length(MAX_PACKET_BYTES + 1), id="oversized-connect"),
    pytest.param(True, b"\x30\x04\x00\x09ab", id="truncated-publish"),
    pytest.param(True, b"\x30\xff\xff\xff\xff\x7f", id="bad-remaining-length"),
    pytest.param(True, b"\x30" + _length(MAX_PACKET_BYTES + 1), id="oversized"),
    pytest.param(True, b"\x00\x00", id="reserved-packet-type"),
    pytest.param(True, _packet(0x36, _s("bad/low") + b"\x00\x01"), id="qos-3"),
])
def test_a_malformed_packet_closes_only_its_connection(served, logged_in: bool, data: bytes) -> None:
    brokers, listener = served
    good = login(brokers, listener.address, "good")
    bad = login(brokers, listener.address, "bad") if logged_in else Raw(listener.address)
    bad.send(data)  # the body of an oversized packet never comes: the length alone closes it
    assert bad.ended() == "close"  # as Mosquitto closes a client that breaks the protocol
    still_works(brokers, listener.address, good, "good")


def test_a_packet_cut_off_by_the_end_of_the_connection_closes_only_that_one(served) -> None:
    brokers, listener = served
    good = login(brokers, listener.address, "good")
    bad = login(brokers, listener.address, "bad")
    bad.send(b"\x32\x20" + _s("bad/low"))  # 32 bytes announced, 9 sent
    bad.sock.shutdown(socket.SHUT_WR)
    assert bad.ended() == "close"
    still_works(brokers, listener.address, good, "good")


def test_a_persistent_session_outlives_a_connection_closed_for_a_malformed_packet(served) -> None:
    brokers, listener = served
    sub = login(brokers, listener.address, "sub")
    sub.send(_packet(0x36, _s("sub/low") + b"\x00\x01"))  # QoS 3
    assert sub.ended() == "close"
    again = Raw(listener.address)
    again.send(_packet(0x10, _connect_body("sub", *brokers.credentials("sub"))))
    assert again.expect(CONNACK) == b"\x01\x00"  # session present
    assert brokers.broker(GBID).sessions["sub"].subscriptions == {"sub/#": 1}


def test_a_refused_login_gets_its_connack_code_then_the_close(served) -> None:
    brokers, listener = served
    for body, code in [(_connect_body("cc", "cc", "wrong"), 5), (_connect_body("cc", "cc", "x", level=3), 1),
                       (_connect_body("", "cc", "x"), 2)]:
        raw = Raw(listener.address)
        raw.send(_packet(0x10, body))
        assert raw.expect(CONNACK) == bytes([0, code])
        assert raw.ended() == "close"


def test_a_crash_resets_every_connection_and_refuses_new_ones_until_the_start(served) -> None:
    brokers, listener = served
    sub = login(brokers, listener.address, "sub")
    listener.run(brokers.crash_broker(GBID))
    assert sub.ended() == "reset"
    try:  # the reset may come before the connect returns
        assert Raw(listener.address).ended() == "reset"
    except ConnectionResetError:
        pass
    listener.run(brokers.start_broker(GBID))
    back = Raw(listener.address)
    back.send(_packet(0x10, _connect_body("sub", *brokers.credentials("sub"))))
    assert back.expect(CONNACK) == b"\x01\x00"  # the session was kept through the crash


def test_a_first_packet_other_than_connect_resets_the_connection(served) -> None:
    _, listener = served
    for first in (b"\xc0\x00", _packet(0x30, _s("a/low") + b"x"), b"\x20\x02\x00\x00"):
        raw = Raw(listener.address)
        raw.send(first)
        assert raw.ended() == "reset", first


def test_an_invalid_filter_closes_the_connection_after_the_filters_before_it(served) -> None:
    brokers, listener = served
    sub = login(brokers, listener.address, "sub")
    sub.send(_packet(0x82, b"\x00\x02" + _s("sub/a") + b"\x01" + _s("a/#/b") + b"\x01"))
    assert sub.ended() == "close"  # no SUBACK 0x80, as Mosquitto
    session = brokers.broker(GBID).sessions["sub"]
    assert session.subscriptions == {"sub/#": 1, "sub/a": 1}
    again = login(brokers, listener.address, "sub")
    again.send(_packet(0xA2, b"\x00\x03" + _s("sub/a") + _s("sub/a+")))
    assert again.ended() == "close"  # no UNSUBACK
    assert session.subscriptions == {"sub/#": 1}


async def test_the_broker_resets_a_channel_whose_first_packet_is_not_connect() -> None:
    class Ends:
        def __init__(self) -> None:
            self.ended: list[str] = []

        def to_client(self, packet: tuple) -> None:
            self.ended.append(packet[0])

        def reset(self, by: object = None) -> None:
            self.ended.append("reset")

        def close_from_server(self) -> None:
            self.ended.append("close")

    broker = MemoryBroker(GBID, "test")
    broker.start()
    conn = broker.accept()
    assert conn is not None
    conn.channel = channel = Ends()
    conn.received(("pingreq",))
    assert channel.ended == ["reset"] and not broker.connections
