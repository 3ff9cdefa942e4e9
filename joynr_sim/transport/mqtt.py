"""One MQTT connection of a cluster controller to the broker of one GBID (paho-mqtt).

QoS 1 on a persistent session (clean_session false); the client subscribes to its own
topic on every CONNACK (a broker that lost the session must learn it again) and unicast
goes to ``<topic>/low``. paho runs its network loop in its own thread; every callback is
handed over to the asyncio loop, so the runtime only ever runs on the loop.
"""

from __future__ import annotations

import asyncio
import itertools
import socket
import sys
from collections.abc import Callable

import paho.mqtt.client as paho
from paho.mqtt.enums import CallbackAPIVersion, MQTTErrorCode

QOS = 1
_conn_ids = itertools.count(1)


# joynr's multicast topic prefix (joynr.messaging.mqtt.topicprefix.multicast), the one the
# brokers' grants allow (brokers.access.MULTICAST_PREFIX).
MULTICAST_TOPIC_PREFIX = "joynr-sim-multicast/"


def unicast_topic(topic: str) -> str:
    return f"{topic}/low"


def multicast_topic(multicast_topic_: str) -> str:
    """The MQTT topic (or filter) of a multicast: the prefix, then the multicast id's topic."""
    return MULTICAST_TOPIC_PREFIX + multicast_topic_


class MqttConnectError(ConnectionError):
    """The broker of a GBID could not be connected to: refused, unreachable, or it refused
    the CONNECT; the message names the GBID and host:port."""

    def __init__(self, gbid: str, host: str, port: int, reason: str) -> None:
        super().__init__(f"gbid {gbid!r}: cannot connect to MQTT broker {host}:{port}: {reason}")
        self.gbid, self.host, self.port, self.reason = gbid, host, port, reason


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
        on_message: Callable[[MqttConnection, bytes, int], None],
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
        client = paho.Client(
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
        client.reconnect_delay_set(min_delay=0.05, max_delay=1)  # type: ignore[arg-type]
        client.on_connect = self._paho_connect
        client.on_connect_fail = self._paho_connect_fail
        client.on_disconnect = self._paho_disconnect
        client.on_message = self._paho_message
        client.on_publish = self._paho_published
        client.on_subscribe = self._paho_subscribe
        self._session_present = False
        # Multicast topics this connection receives, subscribed again on every CONNACK.
        self.multicast_filters: set[str] = set()
        self._connect_subscription: int | None = None
        client.on_socket_open = self._paho_socket_open
        self._client = client

    # -- paho thread -> asyncio loop -------------------------------------------------
    @staticmethod
    def _paho_socket_open(client, userdata, sock) -> None:
        # Small request/reply frames otherwise wait for the peer's delayed ACK (~40 ms).
        if isinstance(sock, socket.socket):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def _paho_connect(self, client, userdata, flags, reason_code, properties) -> None:
        if reason_code.is_failure:
            self._loop.call_soon_threadsafe(self._connect_failed, f"the broker refused the CONNECT: {reason_code}")
            return
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
            self._loop.call_soon_threadsafe(
                self._connect_failed, f"the broker refused the subscription to {self.topic}/#: {refused[0]}"
            )
            return
        # Connected means subscribed: nothing published to us from now on is lost.
        self._loop.call_soon_threadsafe(self._connected, self._session_present)

    def _paho_connect_fail(self, client, userdata) -> None:
        # paho calls this from the handler of the OSError its connect raised.
        exc = sys.exc_info()[1]
        reason = (exc.strerror or str(exc)) if isinstance(exc, OSError) else "connection failed"
        self._loop.call_soon_threadsafe(self._connect_failed, reason)

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
            self._loop.call_soon_threadsafe(self._disconnected)
        except RuntimeError:  # the owner's loop is closed (an interrupted run): nobody to tell
            pass

    def _disconnected(self) -> None:
        if self.connected.is_set():
            self.connected.clear()
            self._on_disconnected(self)

    def _paho_message(self, client, userdata, message) -> None:
        self._loop.call_soon_threadsafe(self._on_message, self, bytes(message.payload), message.mid)

    def _paho_published(self, client, userdata, mid, reason_code, properties) -> None:
        self._loop.call_soon_threadsafe(self._on_published, self, mid)

    # -- lifecycle -------------------------------------------------------------------
    def start(self) -> None:
        self._client.connect_async(self.host, self.port, keepalive=10)
        self._client.loop_start()

    async def wait_connected(self, timeout_s: float) -> None:
        """Until connected and subscribed; raises MqttConnectError as soon as an attempt
        fails (refused, unreachable, CONNACK with an error) or after ``timeout_s``.
        paho keeps retrying in the background either way."""
        waits = [asyncio.ensure_future(self.connected.wait()), asyncio.ensure_future(self._failed.wait())]
        try:
            await asyncio.wait(waits, timeout=timeout_s, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for wait in waits:
                wait.cancel()
        if self.connected.is_set():
            return
        reason = self._failure or f"no CONNACK for client id {self.client_id!r} within {timeout_s:g} s"
        raise MqttConnectError(self.gbid, self.host, self.port, reason)

    def publish(self, topic: str, payload: bytes) -> int:
        """Queue a QoS 1 publish; paho sends it now or after the next reconnect. Returns
        the packet id that ``on_published`` reports once the broker acknowledged it."""
        info = self._client.publish(topic, payload, qos=QOS)
        if info.rc not in (MQTTErrorCode.MQTT_ERR_SUCCESS, MQTTErrorCode.MQTT_ERR_NO_CONN):
            raise ConnectionError(f"gbid {self.gbid!r}: publish refused: {paho.error_string(info.rc)}")
        return info.mid

    def subscribe_multicast(self, topic_filter: str) -> None:
        """Receive a multicast topic from now on (and after every reconnect)."""
        self.multicast_filters.add(topic_filter)
        self._client.subscribe(topic_filter, qos=QOS)

    def unsubscribe_multicast(self, topic_filter: str) -> None:
        self.multicast_filters.discard(topic_filter)
        self._client.unsubscribe(topic_filter)

    def ack(self, mid: int) -> None:
        """Acknowledge a received message: the broker may forget it."""
        self._client.ack(mid, QOS)

    async def stop(self) -> None:
        """Graceful: DISCONNECT, then let the network thread end."""
        self._client.disconnect()
        await asyncio.to_thread(self._client.loop_stop)
        self.connected.clear()

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
        """Abrupt: the socket goes away with no DISCONNECT; the broker keeps the session."""
        # Tell the network thread to end before it sees the dead socket, so it does not
        # reconnect in between (paho has no public abort).
        self._client._thread_terminate = True
        sock = self._client.socket()
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        await asyncio.to_thread(self._client.loop_stop)
        self.connected.clear()
