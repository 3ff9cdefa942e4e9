"""A cluster controller's MQTT connection runs paho on the asyncio loop: no network thread,
and a socket numbered above 1024 (which select() cannot watch) works like any other."""

from __future__ import annotations

import asyncio
import errno
import os
import socket
import struct
import threading

import pytest

from broker_helpers import BrokerFactory
from joynr_sim.host.process.event_loop import CHOICES, event_loop_factory
from joynr_sim.transport.mqtt import MqttConnection, _connect_failure, unicast_topic
from joynr_sim.transport.paho_client import RECV_BYTES


async def test_a_connection_above_descriptor_1024_runs_on_the_loop(mosquitto_brokers: BrokerFactory) -> None:
    brokers = await mosquitto_brokers(["gbid1"])
    host, port = brokers.endpoint("gbid1")
    filler: list[int] = []  # every lower descriptor taken: the connection's socket gets one above 1024
    try:
        while not filler or filler[-1] < 1030:
            filler.append(os.open(os.devnull, os.O_RDONLY))
        received: asyncio.Queue[tuple[bytes, int]] = asyncio.Queue()
        published: asyncio.Queue[int] = asyncio.Queue()
        threads = threading.active_count()
        conn = MqttConnection(
            gbid="gbid1", host=host, port=port, client_id="cc-fd", topic="cc-fd",
            credentials=brokers.credentials("cc-fd"), loop=asyncio.get_running_loop(),
            on_message=lambda _conn, payload, mid: received.put_nowait((payload, mid)),
            on_published=lambda _conn, mid: published.put_nowait(mid),
        )
        conn.start()
        try:
            await conn.wait_connected(10)
            assert conn._client.socket().fileno() > 1024
            assert threading.active_count() == threads  # paho runs on this loop
            mid = conn.publish(unicast_topic("cc-fd"), b"to myself")
            assert await asyncio.wait_for(published.get(), 10) == mid  # the broker's PUBACK
            payload, their_mid = await asyncio.wait_for(received.get(), 10)
            assert payload == b"to myself"
            conn.ack(their_mid)
        finally:
            await conn.stop()
        assert not conn.connected.is_set()
    finally:
        for fd in filler:
            os.close(fd)


async def until(condition, timeout: float = 10.0) -> None:  # noqa: ANN001
    """Poll a condition on the loop, bounded."""
    deadline = asyncio.get_running_loop().time() + timeout
    while not condition():
        assert asyncio.get_running_loop().time() < deadline, "condition not met in time"
        await asyncio.sleep(0.01)


async def test_a_dropped_connection_reconnects_and_a_crashed_one_does_not(mosquitto_brokers: BrokerFactory) -> None:
    brokers = await mosquitto_brokers(["gbid1"])
    host, port = brokers.endpoint("gbid1")
    connects: list[bool] = []
    losses: list[str] = []
    conn = MqttConnection(
        gbid="gbid1", host=host, port=port, client_id="cc-drop", topic="cc-drop",
        credentials=brokers.credentials("cc-drop"), loop=asyncio.get_running_loop(),
        on_message=lambda *_: None, on_connected=lambda _conn, present: connects.append(present),
        on_disconnected=lambda c: losses.append(c.connection_id),
    )
    conn.start()
    try:
        await conn.wait_connected(10)
        conn.drop()  # as when the broker hands the session to another client
        await until(lambda: len(connects) == 2)
        assert losses == [conn.connection_id] and connects == [False, True]  # the session was kept
        await conn.crash()
        # Nothing is left to reconnect it: the task that would has ended, the socket is gone.
        await until(lambda: conn._keeper is not None and conn._keeper.done())
        assert conn._client.socket() is None and not conn.connected.is_set() and len(connects) == 2
    finally:
        await conn.crash()


def test_a_failed_connect_is_named_as_the_socket_layer_names_it() -> None:
    refused = OSError(errno.ECONNREFUSED, "Connect call failed ('127.0.0.1', 1)")  # asyncio's wording
    assert _connect_failure(refused) == "Connection refused"
    assert _connect_failure(socket.gaierror(socket.EAI_NONAME, "Name or service not known")) == (
        "Name or service not known")
    assert _connect_failure(TimeoutError()) == "connection timed out"


async def test_packets_read_together_are_all_handled_without_more_bytes(mosquitto_brokers: BrokerFactory) -> None:
    """One recv can hold many packets; paho handles at most as many per read as it has
    messages in flight (here none): the rest must not wait for the socket's next bytes."""
    brokers = await mosquitto_brokers(["gbid1"])
    host, port = brokers.endpoint("gbid1")
    received: list[bytes] = []
    conns = [
        MqttConnection(
            gbid="gbid1", host=host, port=port, client_id=name, topic=name,
            credentials=brokers.credentials(name), loop=asyncio.get_running_loop(),
            on_message=lambda conn, payload, mid: (received.append(payload), conn.ack(mid)),
        )
        for name in ("cc-send", "cc-take")
    ]
    sender, taker = conns
    for conn in conns:
        conn.start()
    try:
        for conn in conns:
            await conn.wait_connected(10)
        taker._client.socket().setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
        asyncio.get_running_loop().remove_reader(taker._sock)  # let the broker's packets pile up
        for n in range(50):
            sender.publish(unicast_topic("cc-take"), b"%d" % n)
        await asyncio.sleep(0.5)
        assert not received
        asyncio.get_running_loop().add_reader(taker._sock, taker._readable)
        await until(lambda: len(received) == 50, timeout=5)
        assert received == [b"%d" % n for n in range(50)]
    finally:
        for conn in conns:
            await conn.crash()


def _publish_packet(topic: str, payload: bytes) -> bytes:
    """An MQTT 3.1.1 PUBLISH at QoS 0."""
    body = len(topic).to_bytes(2, "big") + topic.encode() + payload
    length, size = b"", len(body)
    while True:
        size, digit = divmod(size, 128)
        length += bytes([digit | (0x80 if size else 0)])
        if not size:
            return b"\x30" + length + body


async def _reset_behind_unread_bytes() -> list[bytes]:
    """A broker stand-in accepts the connection, then sends more PUBLISH bytes than one read
    takes and resets the connection in the same turn, before the client's loop polls. The
    numbers of the messages the connection handled before it saw the loss."""
    loop = asyncio.get_running_loop()
    listener = socket.create_server(("127.0.0.1", 0))
    listener.setblocking(False)
    received: list[bytes] = []
    lost = asyncio.Event()
    conn = MqttConnection(
        gbid="gbid1", host="127.0.0.1", port=listener.getsockname()[1], client_id="cc-rst", topic="cc-rst",
        credentials=None, loop=loop, on_message=lambda _conn, payload, _mid: received.append(payload),
        on_disconnected=lambda _conn: lost.set(),
    )
    conn.start()
    try:
        peer, _ = await asyncio.wait_for(loop.sock_accept(listener), 5)
        assert (await asyncio.wait_for(loop.sock_recv(peer, 4096), 5))[0] == 0x10  # CONNECT
        await loop.sock_sendall(peer, b"\x20\x02\x00\x00")  # CONNACK: accepted, no session
        subscribe = await asyncio.wait_for(loop.sock_recv(peer, 4096), 5)
        assert subscribe[0] == 0x82
        await loop.sock_sendall(peer, b"\x90\x03" + subscribe[2:4] + b"\x01")  # SUBACK, QoS 1
        await conn.wait_connected(5)
        flood = b"".join(_publish_packet("cc-rst/low", b"%04d" % n + b"x" * 996) for n in range(100))
        assert len(flood) > RECV_BYTES
        peer.setblocking(True)
        peer.settimeout(5)
        peer.sendall(flood)  # no await from here on: the reset lands behind the bytes
        peer.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        peer.close()
        await asyncio.wait_for(lost.wait(), 5)
        return [payload[:4] for payload in received]
    finally:
        await conn.crash()
        listener.close()


@pytest.mark.parametrize("loop_name", CHOICES)
def test_a_reset_behind_unread_bytes_ends_the_connection(loop_name: str) -> None:
    """uvloop stops watching a socket whose poll reports the peer's reset, after one more
    read callback: every byte before the reset is handled and the loss is seen then, not at
    the connection's next write (a partitioned cluster controller stayed deaf for 10 s)."""
    with asyncio.Runner(loop_factory=event_loop_factory(loop_name)) as runner:
        assert runner.run(_reset_behind_unread_bytes()) == [b"%04d" % n for n in range(100)]
