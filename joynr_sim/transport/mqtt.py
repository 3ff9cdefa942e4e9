"""One MQTT connection of a cluster controller to the broker of one GBID (paho-mqtt).

QoS 1 on a persistent session (clean_session false); the client subscribes to its own
topic on every CONNACK (a broker that lost the session must learn it again) and unicast
goes to ``<topic>/low`` (``mqtt_topics``). A message is acknowledged as it was received:
one that arrives at QoS 0 (another client may publish so) is handed over like any other and
never acknowledged (``paho_client.Delivery``).

paho runs on the asyncio loop, through its external-loop interface (``loop_read`` when
the socket is readable, ``loop_write`` when it has something to send, ``loop_misc`` for
the keepalive), not in a network thread of its own: the profile of a request/reply showed
a quarter of its CPU in paho's threads and in handing each packet between thread and
loop, and a thread per connection waits in ``select()``, which cannot watch a socket
numbered above 1024. The loop connects the socket (paho's own connect blocks; see
``paho_client``) and reconnects after a lost connection, with paho's backoff. What one turn
of the loop queues (publishes, PUBACKs) goes out in one write at the turn's end, after the
group commit that turn scheduled first. Every callback is handed on to the loop with
``call_soon``, so the runtime never runs inside paho.

A PUBACK goes at the end of the turn that committed what handling its message wrote, not
later. Holding it back for the connection's next publish or 5 ms (to spare the broker a
persistence save ahead of a reply) was tried: in the library scenario
inprocess-provider-stale-global-entry the controller is crashed right after its provider's
registration, 6 ms after the GCD's reply arrived: its PUBACK was still waiting, and the
broker delivered the reply again to the restarted controller, a duplicate delivery. A
PUBACK that waits widens the window in which a crash costs a message twice.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import socket
from collections.abc import Callable
from typing import Any

import paho.mqtt.client as paho
from paho.mqtt.enums import CallbackAPIVersion, MQTTErrorCode

from .mqtt_topics import MULTICAST_TOPIC_PREFIX as MULTICAST_TOPIC_PREFIX
from .mqtt_topics import multicast_topic as multicast_topic
from .mqtt_topics import unicast_topic as unicast_topic
from .paho_client import Delivery, LoopClient

QOS = 1
# joynr's MqttMessagingStub publishes a message of effort BEST_EFFORT at QoS 0, every other
# at QoS 1 (its DEFAULT_QOS_LEVEL); subscriptions are made at QoS 1.
BEST_EFFORT_QOS = 0
_conn_ids = itertools.count(1)
CONNECT_TIMEOUT_S = 5  # paho's own connect timeout
RECONNECT_MIN_DELAY_S, RECONNECT_MAX_DELAY_S = 0.05, 1.0
READ_ROUNDS = 16  # reads of up to paho_client.RECV_BYTES each per readable event
MISC_INTERVAL_S = 1.0  # how often paho checks the keepalive
# joynr's default MQTT keep-alive (joynr.messaging.mqtt.keepalivetimerssec: 60). At 10 s,
# Mosquitto dropped 1,301 connections of a CPU-starved 1,000-controller fleet whose loops
# missed a PINGREQ; a dead broker or a reset connection is seen at once either way.
KEEPALIVE_S = 60


class MqttConnectError(ConnectionError):
    """The broker of a GBID could not be connected to: refused, unreachable, or it refused
    the CONNECT; the message names the GBID and host:port."""

    def __init__(self, gbid: str, host: str, port: int, reason: str) -> None:
        super().__init__(f"gbid {gbid!r}: cannot connect to MQTT broker {host}:{port}: {reason}")
        self.gbid, self.host, self.port, self.reason = gbid, host, port, reason


def _connect_failure(exc: OSError) -> str:
    """Why a connect failed, as socket.create_connection would say it ("Connection refused"):
    asyncio's own message names the address, which MqttConnectError already does."""
    if isinstance(exc, socket.gaierror) or not exc.errno:
        return exc.strerror or str(exc) or "connection timed out"
    return os.strerror(exc.errno)


async def until_connected(conn: Any, timeout_s: float) -> None:
    """``wait_connected`` of a connection, real or on the memory network: until ``connected``
    is set; the failure of the last attempt (``_failure``, signalled by ``_failed``) as soon
    as one fails, or no CONNACK within ``timeout_s``, as MqttConnectError."""
    waits = [asyncio.ensure_future(conn.connected.wait()), asyncio.ensure_future(conn._failed.wait())]
    try:
        await asyncio.wait(waits, timeout=timeout_s, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for wait in waits:
            wait.cancel()
    if conn.connected.is_set():
        return
    reason = conn._failure or f"no CONNACK for client id {conn.client_id!r} within {timeout_s:g} s"
    raise MqttConnectError(conn.gbid, conn.host, conn.port, reason)


class MqttConnection:
    def __init__(
        self,
        *,
        gbid: str,
        host: str,
        port: int,
        client_id: str,
        topic: str,
        credentials: tuple[str, str] | None,
        loop: asyncio.AbstractEventLoop,
        on_message: Callable[[MqttConnection, bytes, Delivery], None],
        on_connected: Callable[[MqttConnection, bool], None] = lambda conn, session_present: None,
        on_disconnected: Callable[[MqttConnection], None] = lambda conn: None,
        on_published: Callable[[MqttConnection, int], None] = lambda conn, mid: None,
        connection_id: str | None = None,
    ) -> None:
        self.gbid = gbid
        self.host, self.port = host, port
        self.client_id = client_id
        self.topic = topic
        self.connection_id = connection_id or f"{client_id}|{gbid}|{next(_conn_ids)}"
        self._loop = loop
        self._on_message = on_message
        self._on_connected = on_connected
        self._on_disconnected = on_disconnected
        self._on_published = on_published
        self.connected = asyncio.Event()
        # Why the last attempt to connect failed, until one succeeds.
        self._failure: str | None = None
        self._failed = asyncio.Event()
        client = LoopClient(
            CallbackAPIVersion.VERSION2,
            client_id=client_id,
            clean_session=False,
            protocol=paho.MQTTv311,  # amqtt speaks 3.1.1 only
            # A message is acknowledged once the runtime holds it, not when paho has it.
            manual_ack=True,
        )
        if credentials is not None:
            client.username_pw_set(*credentials)
        client.max_queued_messages_set(0)  # never drop what the runtime hands over
        client.max_inflight_messages_set(100)
        client.on_connect = self._paho_connect
        client.on_disconnect = self._paho_disconnect
        client.on_message = self._paho_message
        client.on_publish = self._paho_published
        client.on_subscribe = self._paho_subscribe
        self._session_present = False
        # Multicast topics this connection receives, subscribed again on every CONNACK.
        self.multicast_filters: set[str] = set()
        self._connect_subscription: int | None = None
        client.on_socket_open = self._paho_socket_open
        client.on_socket_close = self._paho_socket_close
        client.on_socket_register_write = self._paho_want_write
        client.on_socket_unregister_write = self._paho_wrote
        self._client = client
        self._running = False  # connect, and reconnect after a loss, until stop or crash
        self._keeper: asyncio.Task | None = None
        self._sock: socket.socket | None = None
        self._closed = asyncio.Event()  # the current socket is gone
        self._write_scheduled = False
        self._writer = False  # waiting for the socket to take more
        self._misc: asyncio.TimerHandle | None = None
        self._had_connack = False

    # -- paho on the asyncio loop ----------------------------------------------------
    def _paho_socket_open(self, client, userdata, sock) -> None:
        self._sock = sock
        self._closed.clear()
        self._loop.add_reader(sock, self._readable)

    def _paho_socket_close(self, client, userdata, sock) -> None:
        self._loop.remove_reader(sock)
        if self._writer:
            self._writer = False
            self._loop.remove_writer(sock)
        if self._sock is sock:
            self._sock = None
        self._closed.set()

    def _paho_want_write(self, client, userdata, sock) -> None:
        # Once per turn: what the turn queues after this goes out in the same write.
        if not self._write_scheduled:
            self._write_scheduled = True
            self._loop.call_soon(self._write)

    def _paho_wrote(self, client, userdata, sock) -> None:
        if self._writer:
            self._writer = False
            self._loop.remove_writer(sock)

    def _write(self) -> None:
        self._write_scheduled = False
        sock = self._sock
        if sock is None:
            return
        self._client.loop_write()
        if self._sock is sock and self._client.want_write() and not self._writer:
            self._writer = True  # the socket's buffer is full: go on when it drains
            self._loop.add_writer(sock, self._write)

    def _readable(self) -> None:
        """Read until the socket holds nothing more. uvloop (a host's loop) stops watching
        a socket whose poll reports an error, such as the peer's reset, after calling this
        once more: bytes and the reset left in the socket then wait for a write that may
        never come, and the runtime is deaf to its broker. After ``READ_ROUNDS`` reads that
        left more, the rest is read in the next turn, so a flood does not hold the loop."""
        client = self._client
        for _ in range(READ_ROUNDS):
            sock = self._sock
            if sock is None:
                return
            client.loop_read()
            # paho reads at most as many packets per call as messages are in flight; what its
            # buffered reads hold beyond that would otherwise wait for the socket's next bytes.
            # Each call takes at least one byte of them or closes the socket, which drops them.
            while client.buffered and self._sock is not None:
                client.loop_read()
            if self._sock is not sock or not client.socket_unread():
                return
        self._loop.call_soon(self._readable)

    def _tick(self) -> None:
        self._client.loop_misc()
        self._misc = self._loop.call_later(MISC_INTERVAL_S, self._tick) if self._running else None

    async def _keep_connected(self) -> None:
        """Connect; after a lost connection, connect again after paho's backoff (reset by a
        CONNACK), until stopped."""
        delay = RECONNECT_MIN_DELAY_S
        while self._running:
            try:
                sock = await self._open_socket()
                self._had_connack = False
                self._client.connected_socket = sock
                self._client.reconnect()  # takes the socket, queues the CONNECT
            except OSError as exc:
                unused, self._client.connected_socket = self._client.connected_socket, None
                if unused is not None:
                    unused.close()
                self._close_socket()
                self._connect_failed(_connect_failure(exc))
            else:
                await self._closed.wait()
                if self._had_connack:
                    delay = RECONNECT_MIN_DELAY_S
            if not self._running:
                return
            await asyncio.sleep(delay)
            delay = min(delay * 2, RECONNECT_MAX_DELAY_S)

    async def _open_socket(self) -> socket.socket:
        try:  # an IP address needs no resolver (whose lookups run in a thread)
            infos = socket.getaddrinfo(self.host, self.port, type=socket.SOCK_STREAM, flags=socket.AI_NUMERICHOST)
        except socket.gaierror:
            infos = await self._loop.getaddrinfo(self.host, self.port, type=socket.SOCK_STREAM)
        family, type_, proto, _, address = infos[0]
        sock = socket.socket(family, type_, proto)
        try:
            sock.setblocking(False)
            # Small request/reply frames otherwise wait for the peer's delayed ACK (~40 ms).
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            async with asyncio.timeout(CONNECT_TIMEOUT_S):
                await self._loop.sock_connect(sock, address)
        except BaseException:
            sock.close()
            raise
        return sock

    def _paho_connect(self, client, userdata, flags, reason_code, properties) -> None:
        if reason_code.is_failure:
            self._loop.call_soon(self._connect_failed, f"the broker refused the CONNECT: {reason_code}")
            return
        self._had_connack = True
        self._session_present = bool(flags.session_present)
        topics = [(f"{self.topic}/#", QOS), *((t, QOS) for t in sorted(self.multicast_filters))]
        _rc, self._connect_subscription = client.subscribe(topics)

    def _paho_subscribe(self, client, userdata, mid, reason_codes, properties) -> None:
        if mid != self._connect_subscription:
            return  # a multicast topic subscribed while connected: nothing waits for it
        # A refused subscription (an external broker's ACL) would leave the runtime connected
        # but deaf: fail the connection instead, naming why.
        refused = [code for code in reason_codes if code.is_failure]
        if refused:
            self._loop.call_soon(
                self._connect_failed, f"the broker refused the subscription to {self.topic}/#: {refused[0]}"
            )
            return
        # Connected means subscribed: nothing published to us from now on is lost.
        self._loop.call_soon(self._connected, self._session_present)

    def _connect_failed(self, reason: str) -> None:
        self._failure = reason
        self._failed.set()

    def _connected(self, session_present: bool) -> None:
        self._failure = None
        self._failed.clear()
        self.connected.set()
        self._on_connected(self, session_present)

    def _paho_disconnect(self, client, userdata, flags, reason_code, properties) -> None:
        try:
            self._loop.call_soon(self._disconnected)
        except RuntimeError:  # the owner's loop is closed (an interrupted run): nobody to tell
            pass

    def _disconnected(self) -> None:
        if self.connected.is_set():
            self.connected.clear()
            self._on_disconnected(self)

    def _paho_message(self, client, userdata, message) -> None:
        # The QoS as received: it decides whether and how the delivery is acknowledged.
        self._loop.call_soon(self._on_message, self, bytes(message.payload), Delivery(message.mid, message.qos))

    def _paho_published(self, client, userdata, mid, reason_code, properties) -> None:
        self._loop.call_soon(self._on_published, self, mid)

    # -- lifecycle -------------------------------------------------------------------
    def start(self) -> None:
        self._client.connect_async(self.host, self.port, keepalive=KEEPALIVE_S)  # connects nothing yet
        self._running = True
        self._keeper = self._loop.create_task(self._keep_connected())
        self._misc = self._loop.call_later(MISC_INTERVAL_S, self._tick)

    def _halt(self) -> None:
        self._running = False
        if self._keeper is not None:
            self._keeper.cancel()
        if self._misc is not None:
            self._misc.cancel()
            self._misc = None

    async def wait_connected(self, timeout_s: float) -> None:
        """Until connected and subscribed; raises MqttConnectError as soon as an attempt
        fails (refused, unreachable, CONNACK with an error) or after ``timeout_s``.
        paho keeps retrying in the background either way."""
        await until_connected(self, timeout_s)

    def publish(self, topic: str, payload: bytes, qos: int = QOS) -> int:
        """Queue a QoS 1 publish; paho sends it now or after the next reconnect. Returns
        the packet id that ``on_published`` reports once the broker acknowledged it.
        ``qos`` 0: sent now or never (paho keeps no QoS 0 message for a reconnect), so
        without a connection it raises ConnectionError."""
        info = self._client.publish(topic, payload, qos=qos)
        if info.rc != MQTTErrorCode.MQTT_ERR_SUCCESS and (qos == 0 or info.rc != MQTTErrorCode.MQTT_ERR_NO_CONN):
            raise ConnectionError(f"gbid {self.gbid!r}: publish refused: {paho.error_string(info.rc)}")
        return info.mid

    def subscribe_multicast(self, topic_filter: str) -> None:
        """Receive a multicast topic from now on (and after every reconnect)."""
        self.multicast_filters.add(topic_filter)
        self._client.subscribe(topic_filter, qos=QOS)

    def unsubscribe_multicast(self, topic_filter: str) -> None:
        self.multicast_filters.discard(topic_filter)
        self._client.unsubscribe(topic_filter)

    def ack(self, delivery: Delivery) -> None:
        """Acknowledge a received message as its QoS asks (the broker may forget it): QoS 1
        with a PUBACK, QoS 2 with a PUBCOMP (paho sent the PUBREC), QoS 0 not at all."""
        if delivery.acknowledged:
            self._client.ack(delivery.mid, delivery.qos)

    async def stop(self) -> None:
        """Graceful: DISCONNECT (paho closes the socket once it is written). Not connected
        from here on: the disconnect is no loss to report."""
        self._halt()
        self.connected.clear()
        self._client.disconnect()
        if self._sock is not None:
            try:
                async with asyncio.timeout(CONNECT_TIMEOUT_S):
                    await self._closed.wait()
            except TimeoutError:
                self._close_socket()
        self.connected.clear()

    def _close_socket(self) -> None:
        sock = self._sock
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            self._client._sock_close()  # paho has no public abort; calls _paho_socket_close

    def drop(self) -> None:
        """Lose the connection (as when a broker hands the session to another client);
        paho reconnects on its own."""
        sock = self._client.socket()
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    async def crash(self) -> None:
        """Abrupt: the socket goes away with no DISCONNECT; the broker keeps the session,
        and nothing reconnects."""
        self._halt()
        self._close_socket()
        self.connected.clear()
