"""A runtime's MQTT connection on the memory network: ``transport.mqtt.MqttConnection``'s
interface and paho's behaviour as that class uses it, over a ``links.Channel`` to a
``mqtt_broker.MemoryBroker``.

What paho does and this keeps: a persistent session (clean session false); the
subscription to ``<topic>/#`` and the multicast topics at every CONNACK; QoS 1 publishes
kept until their PUBACK, at most ``INFLIGHT`` unacknowledged at a time, sent again with DUP
after a reconnect; a keep-alive PINGREQ after ``KEEPALIVE_S`` without a packet, and the
connection given up when its answer does not come within the next period; reconnects
with paho's backoff until stopped or crashed. Connected means subscribed, as for the real
connection.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from ..transport.mqtt import (
    KEEPALIVE_S,
    QOS,
    RECONNECT_MAX_DELAY_S,
    RECONNECT_MIN_DELAY_S,
    until_connected,
)
from ..transport.paho_client import Delivery
from .links import Channel, MemoryLink
from .mqtt_broker import SUBACK_FAILURE, MemoryBroker

INFLIGHT = 100  # paho's max_inflight_messages as MqttConnection sets it
# MQTT 3.1.1 section 3.2.2.3, as paho words them in MqttConnection's errors.
CONNACK_REASONS = {1: "Unsupported protocol version", 2: "Client identifier not valid", 3: "Server unavailable",
                   4: "Bad user name or password", 5: "Not authorized"}


class MemoryMqttConnection:
    def __init__(
        self,
        *,
        broker: MemoryBroker,
        link: MemoryLink,
        gbid: str,
        client_id: str,
        topic: str,
        credentials: tuple[str, str] | None,
        on_message: Callable[[Any, bytes, Delivery], None],
        on_connected: Callable[[Any, bool], None] = lambda conn, session_present: None,
        on_disconnected: Callable[[Any], None] = lambda conn: None,
        on_published: Callable[[Any, int], None] = lambda conn, mid: None,
        connection_id: str | None = None,
    ) -> None:
        self.broker, self.link = broker, link
        self.gbid = gbid
        self.host, self.port = "memory", 0
        self.client_id = client_id
        self.topic = topic
        self.connection_id = connection_id or f"{client_id}|{gbid}"
        self._credentials = credentials
        self._on_message = on_message
        self._on_connected = on_connected
        self._on_disconnected = on_disconnected
        self._on_published = on_published
        self.connected = asyncio.Event()
        self._failure: str | None = None
        self._failed = asyncio.Event()
        self.multicast_filters: set[str] = set()
        self._channel: Channel | None = None
        self._running = False
        self._keeper: asyncio.Task | None = None
        self._closed = asyncio.Event()
        self._next_mid = 1
        self._outgoing: dict[int, tuple[str, bytes]] = {}  # kept until its PUBACK, in order
        self._sent: set[int] = set()  # sent on this connection, not acknowledged yet
        self._subscription_id = 0
        self._session_present = False
        self._quiet_since = 0.0  # when the last packet went out
        self._heard_at = 0.0  # when the last packet came in
        self._ping_sent_at: float | None = None  # a PINGREQ without its PINGRESP yet
        self._keepalive: asyncio.TimerHandle | None = None

    # -- the channel's end -------------------------------------------------------------
    def received(self, packet: tuple) -> None:
        self._heard_at = asyncio.get_running_loop().time()
        kind = packet[0]
        if kind == "connack":
            _, code, present = packet
            if code != 0:
                self._connect_failed(f"the broker refused the CONNECT: {CONNACK_REASONS.get(code, code)}")
                return
            self._session_present = present
            self._subscription_id = self._mid()
            topics = [(f"{self.topic}/#", QOS), *((t, QOS) for t in sorted(self.multicast_filters))]
            self._send(("subscribe", self._subscription_id, topics))
            self._sent.clear()
            self._pump(dup=True)
        elif kind == "suback":
            if packet[1] != self._subscription_id:
                return  # a multicast topic subscribed while connected: nothing waits for it
            if any(code == SUBACK_FAILURE for code in packet[2]):
                self._connect_failed(f"the broker refused the subscription to {self.topic}/#")
                return
            self._failure = None
            self._failed.clear()
            self.connected.set()
            self._on_connected(self, self._session_present)
        elif kind == "publish":
            _, pid, _topic, payload, qos, _dup, _retain = packet
            self._on_message(self, payload, Delivery(pid if qos else 0, qos))
        elif kind == "puback":
            mid = packet[1]
            if self._outgoing.pop(mid, None) is not None:
                self._sent.discard(mid)
                self._on_published(self, mid)
                self._pump()
        elif kind == "pingresp":
            self._ping_sent_at = None

    def closed(self, reset: bool) -> None:
        self._lost()

    def opened(self, channel: Channel) -> None:
        self._channel = channel
        self._closed.clear()
        self._heard_at = asyncio.get_running_loop().time()
        user, password = self._credentials or (None, None)
        self._send(("connect", self.client_id, user, password, False, KEEPALIVE_S))
        self._arm_keepalive()

    def refused(self, reason: str) -> None:
        self._connect_failed(reason)
        self._closed.set()

    # -- paho's behaviour ----------------------------------------------------------------
    def _mid(self) -> int:
        mid = self._next_mid
        self._next_mid = self._next_mid % 65535 + 1
        return mid

    def _send(self, packet: tuple) -> None:
        if self._channel is not None:
            self._quiet_since = asyncio.get_running_loop().time()
            self._channel.to_server(packet)

    def _pump(self, dup: bool = False) -> None:
        """Send what waits, within paho's in-flight limit; after a reconnect, with DUP."""
        if self._channel is None or self._subscription_id == 0:  # before the CONNACK
            return
        for mid, (topic, payload) in self._outgoing.items():
            if len(self._sent) >= INFLIGHT:
                return
            if mid not in self._sent:
                self._sent.add(mid)
                self._send(("publish", mid, topic, payload, QOS, dup, False))

    def _arm_keepalive(self) -> None:
        """paho's keep-alive: a PINGREQ once a period passed without a packet out or in, and
        the connection given up when its PINGRESP has not come a period later."""
        if self._keepalive is not None:
            self._keepalive.cancel()
        if self._ping_sent_at is not None:
            due = self._ping_sent_at + KEEPALIVE_S
        else:
            due = min(self._quiet_since, self._heard_at) + KEEPALIVE_S
        self._keepalive = asyncio.get_running_loop().call_at(due, self._keepalive_due)

    def _keepalive_due(self) -> None:
        self._keepalive = None
        if self._channel is None:
            return
        now = asyncio.get_running_loop().time()
        # The same sums as the timer's due time: a difference rounded below the period would
        # set the timer again for this very instant, for ever.
        if self._ping_sent_at is not None:
            if now >= self._ping_sent_at + KEEPALIVE_S:  # no answer: paho gives the connection up
                channel, self._channel = self._channel, None
                channel.reset(by=self)
                self._lost()
                return
        elif now >= min(self._quiet_since, self._heard_at) + KEEPALIVE_S:
            self._send(("pingreq",))
            self._ping_sent_at = now
        self._arm_keepalive()

    def _lost(self) -> None:
        self._channel = None
        self._ping_sent_at = None
        if self._keepalive is not None:
            self._keepalive.cancel()
            self._keepalive = None
        self._sent.clear()
        self._subscription_id = 0
        self._session_present = False
        self._closed.set()
        if self.connected.is_set():
            self.connected.clear()
            self._on_disconnected(self)

    def _connect_failed(self, reason: str) -> None:
        self._failure = reason
        self._failed.set()

    async def _keep_connected(self) -> None:
        delay = RECONNECT_MIN_DELAY_S
        while self._running:
            self._closed.clear()
            try:
                # A reset of a connect that hung is a lost socket, not a refusal (as for paho
                # through a fault proxy): the next attempt says what the link does now.
                self.link.connect(self._open, self._closed.set)
            except ConnectionRefusedError:
                self._connect_failed("Connection refused")
                self._closed.set()
            await self._closed.wait()
            if self.connected.is_set() or self._failure is None:
                delay = RECONNECT_MIN_DELAY_S
            if not self._running:
                return
            await asyncio.sleep(delay)
            delay = min(delay * 2, RECONNECT_MAX_DELAY_S)

    def _open(self) -> None:
        if not self._running or self._channel is not None:
            return
        server = self.broker.accept()
        if server is None:
            self.refused("Connection refused")
            return
        channel = Channel(self.link, self, server)
        server.channel = channel
        self.opened(channel)

    # -- MqttConnection's interface --------------------------------------------------------
    def start(self) -> None:
        self._running = True
        self._keeper = asyncio.get_running_loop().create_task(self._keep_connected())

    def _halt(self) -> None:
        self._running = False
        if self._keeper is not None:
            self._keeper.cancel()

    async def wait_connected(self, timeout_s: float) -> None:
        await until_connected(self, timeout_s)

    def publish(self, topic: str, payload: bytes, qos: int = QOS) -> int:
        mid = self._mid()
        if qos == 0:  # paho sends it on the open socket or refuses it: nothing is kept
            if self._channel is None:
                raise ConnectionError(f"gbid {self.gbid!r}: publish refused: The client is not currently connected.")
            self._send(("publish", 0, topic, payload, 0, False, False))
            return mid
        self._outgoing[mid] = (topic, payload)
        self._pump()
        return mid

    def subscribe_multicast(self, topic_filter: str) -> None:
        self.multicast_filters.add(topic_filter)
        if self._channel is not None:
            self._send(("subscribe", self._mid(), [(topic_filter, QOS)]))

    def unsubscribe_multicast(self, topic_filter: str) -> None:
        self.multicast_filters.discard(topic_filter)
        if self._channel is not None:
            self._send(("unsubscribe", self._mid(), [topic_filter]))

    def ack(self, delivery: Delivery) -> None:
        if delivery.acknowledged:
            self._send(("puback", delivery.mid))

    async def stop(self) -> None:
        """Graceful: DISCONNECT, then the connection closes."""
        self._halt()
        self.connected.clear()
        channel, self._channel = self._channel, None
        if channel is not None:
            channel.to_server(("disconnect",))
            channel.close_from_client()
        self._lost()

    def drop(self) -> None:
        """Lose the connection; reconnect on its own."""
        channel, self._channel = self._channel, None
        if channel is not None:
            channel.reset(by=self)
            self._lost()

    async def crash(self) -> None:
        """The connection dies without DISCONNECT; nothing reconnects."""
        self._halt()
        channel, self._channel = self._channel, None
        if channel is not None:
            channel.reset(by=self)
        self.connected.clear()
        self._lost()
