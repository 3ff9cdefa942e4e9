"""A cluster controller's MQTT connection runs paho on the asyncio loop: no network thread,
and a socket numbered above 1024 (which select() cannot watch) works like any other."""

from __future__ import annotations

import asyncio
import errno
import os
import socket
import threading

from broker_helpers import BrokerFactory
from joynr_sim.transport.mqtt import MqttConnection, _connect_failure, unicast_topic


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
