"""What the embedded amqtt broker promises a persistent session (MQTT 3.1.1), on the real
broker process: in-flight QoS 1 messages sent again with DUP 1 on the resume (4.4,
3.3.1.1), the offline queue in order with RETAIN 0 (3.1.2.4, 3.3.1.3), the takeover of a
connected client id (3.1.4), a clean session discarding everything (3.1.2.4), per-topic
order across all of it (4.6), and a subscriber slower than 5 s losing nothing.

Subscribers are mostly ``Wire`` clients on a raw socket: they see each PUBLISH as sent
(DUP, RETAIN, packet id), acknowledge only when told and never reconnect by themselves.
Publishers and the cluster controller's own kind of subscriber are paho clients. A crash
is a socket closed without DISCONNECT; where a test needs the broker to have seen it, it
waits for the crashed client's will. Every wait is bounded.
"""

from __future__ import annotations

import socket
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest

from broker_helpers import BrokerFactory
from brokers import BrokerSet
from test_brokers import WAIT_S, Client, in_thread, unique

pytestmark = pytest.mark.e2e  # broker processes

GBID = "gbid-a"
SLOW_ACK_S = 6.0  # longer than the 5 s amqtt 0.12.1 waited for a PUBACK before dropping the message
CONNACK, PUBLISH, SUBACK, PINGRESP = 2, 3, 9, 13
N_GONE = 2_000  # publisher-gone: messages acknowledged just before the publisher disconnects
BACKLOG, PADDING = 120, b"." * 128 * 1024  # 15 MiB queued: more than socket buffers hold


@dataclass(frozen=True)
class Publish:
    topic: str
    payload: bytes
    packet_id: int | None
    qos: int
    dup: bool
    retain: bool


def _string(value: str | bytes) -> bytes:
    data = value.encode() if isinstance(value, str) else value
    return len(data).to_bytes(2, "big") + data


def _remaining_length(n: int) -> bytes:
    out = bytearray()
    while True:
        n, byte = divmod(n, 128)
        out.append(byte | (0x80 if n else 0))
        if not n:
            return bytes(out)


class Wire:
    """An MQTT 3.1.1 client on a blocking socket, QoS 1, logged in as itself."""

    def __init__(self, brokers: BrokerSet, client_id: str, *, clean_session: bool = False,
                 will_topic: str | None = None, receive_buffer: int | None = None) -> None:
        self.client_id = client_id
        self.sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        if receive_buffer is not None:  # fixed (no autotuning): the broker's writes block sooner
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
        self.sock.settimeout(WAIT_S)
        self.sock.connect(brokers.endpoint(GBID))
        self._buf = bytearray()
        self._ids = 0
        self.stash: deque[Publish] = deque()  # PUBLISHes read while waiting for another packet
        username, password = brokers.credentials(client_id)
        flags = 0xC0 | (0x02 if clean_session else 0)
        payload = _string(client_id)
        if will_topic is not None:
            flags |= 0x04 | 0x08  # a will, QoS 1
            payload += _string(will_topic) + _string(b"gone")
        self._send(0x10, _string("MQTT") + bytes([4, flags]) + (60).to_bytes(2, "big")
                   + payload + _string(username) + _string(password))
        _, body = self._expect(CONNACK)
        assert body[1] == 0, f"{client_id}: CONNACK return code {body[1]}"
        self.session_present = bool(body[0] & 1)

    def _send(self, first_byte: int, body: bytes) -> None:
        self.sock.sendall(bytes([first_byte]) + _remaining_length(len(body)) + body)

    def _packet_id(self) -> bytes:
        self._ids = self._ids % 65535 + 1
        return self._ids.to_bytes(2, "big")

    def _parse(self) -> tuple[int, int, bytes] | None:
        buf, length, shift, i = self._buf, 0, 0, 1
        while True:
            if i >= len(buf):
                return None
            length |= (buf[i] & 0x7F) << shift
            shift, i = shift + 7, i + 1
            if not buf[i - 1] & 0x80:
                break
        if len(buf) < i + length:
            return None
        packet = (buf[0] >> 4, buf[0] & 0x0F, bytes(buf[i:i + length]))
        del buf[:i + length]
        return packet

    def _read(self, deadline: float) -> tuple[int, int, bytes] | None:
        """The next packet (type, flags, body); None when the broker closed the connection."""
        while (packet := self._parse()) is None:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError
            self.sock.settimeout(remaining)
            try:
                chunk = self.sock.recv(65536)
            except ConnectionResetError:
                return None
            if not chunk:
                return None
            self._buf += chunk
        return packet

    def _next(self, kind: int | None, timeout: float) -> tuple[int, bytes] | None:
        """The next packet of ``kind`` (flags, body), PUBLISHes before it stashed; None when
        the connection closed first (``kind`` None: wait only for that)."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                packet = self._read(deadline)
            except TimeoutError:
                raise AssertionError(f"{self.client_id}: no packet {kind} within {timeout:g} s") from None
            if packet is None:
                return None
            got, flags, body = packet
            if got == kind:
                return flags, body
            if got == PUBLISH:
                self.stash.append(self._decode(flags, body))

    def _expect(self, kind: int) -> tuple[int, bytes]:
        packet = self._next(kind, WAIT_S)
        assert packet is not None, f"{self.client_id}: connection closed while waiting for packet {kind}"
        return packet

    @staticmethod
    def _decode(flags: int, body: bytes) -> Publish:
        qos, n = (flags >> 1) & 3, int.from_bytes(body[:2], "big")
        topic, rest = body[2:2 + n].decode(), body[2 + n:]
        packet_id = int.from_bytes(rest[:2], "big") if qos else None
        return Publish(topic, rest[2:] if qos else rest, packet_id, qos, bool(flags & 8), bool(flags & 1))

    def subscribe(self, topic_filter: str) -> None:
        self._send(0x82, self._packet_id() + _string(topic_filter) + b"\x01")
        _, body = self._expect(SUBACK)
        assert body[2] == 1, f"{self.client_id}: SUBACK {body[2]:#x} for {topic_filter}"

    def receive(self) -> Publish:
        if self.stash:
            return self.stash.popleft()
        return self._decode(*self._expect(PUBLISH))

    def ack(self, message: Publish) -> None:
        assert message.packet_id is not None
        self._send(0x40, message.packet_id.to_bytes(2, "big"))

    def sync(self) -> None:
        """A PINGREQ answered: the broker has handled every packet sent before it."""
        self._send(0xC0, b"")
        self._expect(PINGRESP)

    def closed_by_broker(self) -> bool:
        """Whether the broker closes the connection within WAIT_S (PUBLISHes meanwhile stashed)."""
        try:
            return self._next(None, WAIT_S) is None
        except AssertionError:
            return False

    def crash(self) -> None:
        """Gone without DISCONNECT, as a killed process."""
        try:
            self.sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.sock.close()

    def disconnect(self) -> None:
        self._send(0xE0, b"")
        self.sock.close()


@pytest.fixture
def wires() -> Iterator[list[Wire]]:
    made: list[Wire] = []
    yield made
    for w in made:
        w.sock.close()


def numbered(messages: list[Publish]) -> list[int]:
    return [int(m.payload[:8]) for m in messages]


class Scene:
    """One test's clients on one broker: ``cid`` is the subscriber's client id, ``topic`` its
    unicast topic, ``pub`` a paho publisher, ``watcher`` a Wire that receives ``cid``'s will."""

    def __init__(self, brokers: BrokerSet, wires: list[Wire]) -> None:
        self.brokers, self.wires = brokers, wires
        self.cid, watcher_id = unique("cc"), unique("watch")
        self.topic, self.will = f"{self.cid}/low", f"{watcher_id}/low"
        self.watcher = self.wire(watcher_id, clean_session=True)
        self.watcher.subscribe(f"{watcher_id}/#")
        self.pub = Client(brokers, GBID, unique("pub")).connect()

    def wire(self, client_id: str | None = None, *, clean_session: bool = False, will: bool = False,
             receive_buffer: int | None = None) -> Wire:
        w = Wire(self.brokers, client_id or self.cid, clean_session=clean_session,
                 will_topic=self.will if will else None, receive_buffer=receive_buffer)
        self.wires.append(w)
        return w

    def subscriber(self) -> Wire:
        """The persistent subscriber, its will set, subscribed to its own prefix."""
        w = self.wire(will=True)
        w.subscribe(f"{self.cid}/#")
        return w

    def publish(self, *payloads: bytes | int) -> None:
        for p in payloads:
            self.pub.publish(self.topic, f"{p:08d}".encode() if isinstance(p, int) else p)

    def publish_at_once(self, numbers: range, padding: bytes) -> None:
        """Numbered messages, each padded, all sent before any PUBACK is awaited."""
        infos = [self.pub.paho.publish(self.topic, f"{n:08d}".encode() + padding, qos=1) for n in numbers]
        for info in infos:
            info.wait_for_publish(WAIT_S)
            assert info.is_published(), "no PUBACK for a message of the backlog"

    def crash_seen(self, w: Wire) -> None:
        """Crash ``w`` and wait until the broker has seen it: its will arrives."""
        w.crash()
        assert self.watcher.receive().topic == self.will

    def close(self) -> None:
        self.pub.disconnect()


async def _run(amqtt_brokers: BrokerFactory, wires: list[Wire], scenario: Callable[[Scene], None]) -> None:
    brokers = await amqtt_brokers([GBID])

    def body() -> None:
        scene = Scene(brokers, wires)
        try:
            scenario(scene)
        finally:
            scene.close()

    await in_thread(body)


async def test_unacknowledged_message_is_sent_again_with_dup_on_resume(
    amqtt_brokers: BrokerFactory, wires: list[Wire]
) -> None:
    # As a cluster controller does it: paho, persistent session, manual acknowledgement.
    def scenario(s: Scene) -> None:
        cc = Client(s.brokers, GBID, s.cid, clean_session=False, will_topic=s.will)
        cc.paho.manual_ack_set(True)
        cc.connect()
        assert cc.subscribe(f"{s.cid}/#")
        s.publish(b"owed")
        first = cc.receive()
        assert (first.payload, first.dup) == (b"owed", False)
        cc.crash()  # never acknowledged
        assert s.watcher.receive().topic == s.will
        again = Client(s.brokers, GBID, s.cid, clean_session=False)
        again.paho.manual_ack_set(True)
        again.connect()
        assert again.session_present is True
        msg = again.receive()
        assert (msg.payload, msg.dup, msg.retain) == (b"owed", True, False)
        again.paho.ack(msg.mid, msg.qos)
        assert again.subscribe(f"{s.cid}/#")  # its SUBACK: the broker has handled the PUBACK
        again.disconnect()
        # Acknowledged now: the next resume sends it no more.
        last = s.wire()
        assert last.session_present
        s.publish(b"marker")
        assert last.receive().payload == b"marker"

    await _run(amqtt_brokers, wires, scenario)


async def test_messages_queued_while_away_come_in_order_with_retain_0(
    amqtt_brokers: BrokerFactory, wires: list[Wire]
) -> None:
    def scenario(s: Scene) -> None:
        s.crash_seen(s.subscriber())
        s.publish(*range(1, 6))
        back = s.wire()
        assert back.session_present
        got = [back.receive() for _ in range(5)]  # none acknowledged yet: nothing waits for that
        assert numbered(got) == [1, 2, 3, 4, 5]
        assert [(m.retain, m.dup, m.qos) for m in got] == [(False, False, 1)] * 5
        s.publish(6)
        after = back.receive()
        assert (numbered([after]), after.retain) == ([6], False)

    await _run(amqtt_brokers, wires, scenario)


async def test_takeover_closes_the_old_connection_and_the_new_one_receives(
    amqtt_brokers: BrokerFactory, wires: list[Wire]
) -> None:
    def scenario(s: Scene) -> None:
        old = s.subscriber()
        s.publish(b"in-flight")
        assert old.receive().payload == b"in-flight"  # not acknowledged
        new = s.wire(will=True)  # the same client id while the old connection is open
        assert new.session_present
        again = new.receive()
        assert (again.payload, again.dup) == (b"in-flight", True)
        assert old.closed_by_broker()
        assert not old.stash, "the old connection got messages after the takeover"
        s.publish(b"after")
        msg = new.receive()
        assert (msg.payload, msg.dup) == (b"after", False)
        # The old connection's end sent no will (the new connection's, which the session now
        # holds) and left the session connected: the next takeover closes the new connection.
        s.pub.publish(s.will, b"marker")
        assert s.watcher.receive().payload == b"marker"
        third = s.wire()
        assert third.session_present
        assert [(m.payload, m.dup) for m in (third.receive(), third.receive())] == [
            (b"in-flight", True), (b"after", True)]
        assert new.closed_by_broker()

    await _run(amqtt_brokers, wires, scenario)


async def test_clean_session_discards_what_the_persistent_one_held(
    amqtt_brokers: BrokerFactory, wires: list[Wire]
) -> None:
    def scenario(s: Scene) -> None:
        sub = s.subscriber()
        s.publish(b"in-flight")
        assert sub.receive().payload == b"in-flight"
        s.crash_seen(sub)
        s.publish(b"queued")
        clean = s.wire(clean_session=True)
        assert not clean.session_present
        clean.subscribe(f"{s.cid}/#")
        s.publish(b"marker")
        assert clean.receive().payload == b"marker"  # neither the in-flight nor the queued one
        clean.disconnect()
        # A clean session lasts as long as its connection: a persistent CONNECT starts anew.
        after = s.wire()
        assert not after.session_present
        s.publish(b"unsubscribed")
        after.subscribe(f"{s.cid}/#")
        s.publish(b"second-marker")
        assert after.receive().payload == b"second-marker"

    await _run(amqtt_brokers, wires, scenario)


async def test_clean_session_connect_closes_the_connected_client(
    amqtt_brokers: BrokerFactory, wires: list[Wire]
) -> None:
    def scenario(s: Scene) -> None:
        old = s.subscriber()
        s.publish(b"in-flight")
        assert old.receive().payload == b"in-flight"
        clean = s.wire(clean_session=True)
        assert not clean.session_present
        assert old.closed_by_broker()
        clean.subscribe(f"{s.cid}/#")
        s.publish(b"marker")
        assert clean.receive().payload == b"marker"

    await _run(amqtt_brokers, wires, scenario)


async def test_messages_published_during_the_resume_come_after_the_backlog(
    amqtt_brokers: BrokerFactory, wires: list[Wire]
) -> None:
    def scenario(s: Scene) -> None:
        sub = s.subscriber()
        s.publish(*range(1, 11))
        first = [sub.receive() for _ in range(10)]
        for m in first[:4]:
            sub.ack(m)
        sub.sync()  # 1..4 settled, 5..10 in flight
        s.crash_seen(sub)
        s.publish_at_once(range(11, 11 + BACKLOG), PADDING)  # queued while away
        back = s.wire(receive_buffer=32 * 1024)
        assert back.session_present
        # Not read yet: the broker is blocked writing the backlog, far more than the buffers
        # hold, while these come in.
        s.publish(*range(11 + BACKLOG, 21 + BACKLOG))
        got = [back.receive() for _ in range(16 + BACKLOG)]
        assert numbered(got) == list(range(5, 21 + BACKLOG))
        assert [m.dup for m in got[:7]] == [True] * 6 + [False]

    await _run(amqtt_brokers, wires, scenario)


async def test_order_holds_across_the_resume_while_messages_keep_coming(
    amqtt_brokers: BrokerFactory, wires: list[Wire]
) -> None:
    def scenario(s: Scene) -> None:
        sub = s.subscriber()
        s.publish(*range(1, 11))
        first = [sub.receive() for _ in range(10)]
        assert numbered(first) == list(range(1, 11))
        for m in first[:4]:
            sub.ack(m)
        sub.sync()  # 1..4 settled
        failures: list[BaseException] = []

        def keep_publishing() -> None:
            try:
                s.publish(*range(11, 41))
            except BaseException as exc:  # reported by the test's own thread
                failures.append(exc)

        publisher = threading.Thread(target=keep_publishing)
        publisher.start()
        sub.crash()  # not waited for: the reconnect may take the session over or resume it
        back = s.wire()
        assert back.session_present
        got: list[Publish] = []
        while len({m.payload for m in got}) < 36 and len(got) < 100:
            got.append(back.receive())
            back.ack(got[-1])
        publisher.join(WAIT_S)
        assert not publisher.is_alive() and not failures, failures
        assert numbered(got) == list(range(5, 41))  # in order, none lost, none twice, 1..4 not again
        assert all(m.dup for m in got[:6]), "5..10 were in flight: sent again with DUP 1"

    await _run(amqtt_brokers, wires, scenario)


async def test_subscriber_slower_than_5_s_loses_nothing(
    amqtt_brokers: BrokerFactory, wires: list[Wire]
) -> None:
    def scenario(s: Scene) -> None:
        sub = s.subscriber()
        s.publish(b"late-ack", b"no-ack")
        held = [sub.receive(), sub.receive()]
        assert [m.payload for m in held] == [b"late-ack", b"no-ack"]
        time.sleep(SLOW_ACK_S)  # the subscriber is busy: the time is the point, not a wait for an event
        sub.ack(held[0])
        sub.sync()
        s.crash_seen(sub)
        back = s.wire()
        assert back.session_present
        again = back.receive()
        assert (again.payload, again.dup) == (b"no-ack", True)  # the late PUBACK settled the first
        s.publish(b"next")
        assert back.receive().payload == b"next"

    await _run(amqtt_brokers, wires, scenario)


async def test_what_a_publisher_had_acknowledged_is_delivered_after_it_disconnects(
    amqtt_brokers: BrokerFactory, wires: list[Wire]
) -> None:
    # amqtt 0.12.1 routed a publisher's messages after acknowledging them, one at a time; a
    # publisher that disconnected right after its last PUBACK lost what was not routed yet.
    def scenario(s: Scene) -> None:
        sub = s.subscriber()
        s.publish_at_once(range(N_GONE), b"")
        s.pub.disconnect()
        got = []
        while len(got) < N_GONE:
            m = sub.receive()
            sub.ack(m)
            got.append(m)
        assert numbered(got) == list(range(N_GONE))
        s.pub = Client(s.brokers, GBID, unique("pub")).connect()  # for the scene's close

    await _run(amqtt_brokers, wires, scenario)
