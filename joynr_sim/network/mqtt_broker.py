"""The memory network's MQTT broker: one per GBID, with the semantics ``joynr-sim brokers
check`` measures on Mosquitto as the broker set runs it (``brokers.promises``, column
``mosquitto``), kept packet by packet:

- every client logs in as itself (``brokers.access``: its client id as username, its own
  password); it may read ``<client id>/#`` and the multicast topics and publish to
  ``<topic>/low``; a subscription outside the grants is granted and delivers nothing, a
  publish outside them is acknowledged and its connection closed (Mosquitto 2.0 with
  ``max_queued_messages 0``);
- sessions are persistent unless the CONNECT says clean session; a persistent one keeps
  its subscriptions, its unacknowledged messages and its queue while its client is away
  (no queue limit), and a reconnect sends the unacknowledged ones again with DUP set,
  before the queue;
- at most ``INFLIGHT_WINDOW`` (Mosquitto's 20) unacknowledged QoS 1 messages per client;
  the rest wait, none dropped; messages of one publisher keep their order;
- a second CONNECT with a connected client id takes the session over and closes the old
  connection;
- a SUBSCRIBE or UNSUBSCRIBE with a filter MQTT does not allow (``a/#/b``, ``a+``, empty)
  closes its connection, as Mosquitto 2.0 does (no SUBACK 0x80); the filters before it in
  the packet are subscribed, as Mosquitto adds them one by one;
- a first packet other than CONNECT resets the connection: Mosquitto decides on its first
  byte and closes the socket with the rest unread, which the peer sees as a reset;
- a client whose subscriptions overlap gets one copy of a message, at the highest QoS
  among them (MQTT 3.1.1 [MQTT-3.3.5-1]); Mosquitto 2.0 sends one copy at the QoS of the
  subscription it matches first, the same whenever they are all QoS 1, as joynr's are;
- a crash resets every connection and refuses new ones until the broker starts again; it
  keeps every session and queued message (persistence saved after every change), as
  Mosquitto with ``autosave 1``; a graceful stop closes the connections first;
- a client that sends nothing for 1.5 keep-alive periods is disconnected.

Packets are tuples, the first item their type; nothing is encoded: the memory network
carries objects, and the wire format is the real brokers' business.
"""

from __future__ import annotations

import asyncio
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from brokers import access

INFLIGHT_WINDOW = 20  # Mosquitto's max_inflight_messages default
KEEPALIVE_GRACE = 1.5  # MQTT 3.1.1 section 3.1.2.10
CONNACK_ACCEPTED, CONNACK_NOT_AUTHORIZED = 0, 5
SUBACK_FAILURE = 0x80


@dataclass
class Message:
    topic: str
    payload: bytes
    qos: int
    retain: bool = False


@dataclass
class Session:
    client_id: str
    username: str
    clean: bool
    subscriptions: dict[str, int] = field(default_factory=dict)  # filter -> QoS, in subscription order
    queue: deque[Message] = field(default_factory=deque)
    inflight: dict[int, Message] = field(default_factory=dict)  # packet id -> message, in sending order
    connection: BrokerConnection | None = None
    next_id: int = 1

    def packet_id(self) -> int:
        while self.next_id in self.inflight:
            self.next_id = self.next_id % 65535 + 1
        pid, self.next_id = self.next_id, self.next_id % 65535 + 1
        return pid


class BrokerConnection:
    """The broker's end of one client connection (an ``End`` of ``links.Channel``)."""

    def __init__(self, broker: MemoryBroker) -> None:
        self.broker = broker
        self.channel: Any = None
        self.session: Session | None = None
        self.keepalive_s = 0.0
        self.last_heard = 0.0
        self._watch: asyncio.TimerHandle | None = None

    def received(self, packet: tuple) -> None:
        loop = asyncio.get_running_loop()
        self.last_heard = loop.time()
        self.broker.handle(self, packet)

    def closed(self, reset: bool) -> None:
        self.broker.gone(self)

    def send(self, packet: tuple) -> None:
        if self.channel is not None:
            self.channel.to_client(packet)

    def watch(self, keepalive_s: float) -> None:
        self.keepalive_s = keepalive_s
        if keepalive_s > 0:
            self._arm()

    def _arm(self) -> None:
        loop = asyncio.get_running_loop()
        self._watch = loop.call_at(self.last_heard + self.keepalive_s * KEEPALIVE_GRACE, self._check)

    def _check(self) -> None:
        self._watch = None
        if self.channel is None:
            return
        if asyncio.get_running_loop().time() >= self.last_heard + self.keepalive_s * KEEPALIVE_GRACE:
            self.broker.drop(self, reset=True)  # silent too long: the client is gone
        else:
            self._arm()

    def forget(self) -> None:
        if self._watch is not None:
            self._watch.cancel()
            self._watch = None
        self.channel = None


class MemoryBroker:
    def __init__(self, gbid: str, secret: str) -> None:
        self.gbid = gbid
        self._secret = secret
        self.running = False
        self.sessions: dict[str, Session] = {}
        self.retained: dict[str, Message] = {}
        self.connections: list[BrokerConnection] = []

    # -- lifecycle ---------------------------------------------------------------------
    def start(self) -> None:
        self.running = True

    def crash(self) -> None:
        """Every connection reset; what was persisted stays (every change is saved)."""
        self.running = False
        for conn in list(self.connections):
            self.drop(conn, reset=True)

    def stop(self) -> None:
        self.running = False
        for conn in list(self.connections):
            self.drop(conn, reset=False)

    def accept(self) -> BrokerConnection | None:
        """A new connection, or None while the broker is down (the connect is refused)."""
        if not self.running:
            return None
        conn = BrokerConnection(self)
        conn.last_heard = asyncio.get_running_loop().time()
        self.connections.append(conn)
        return conn

    def drop(self, conn: BrokerConnection, *, reset: bool) -> None:
        channel = conn.channel
        self.gone(conn)
        if channel is not None:
            if reset:
                channel.reset(by=conn)
            else:
                channel.close_from_server()

    def gone(self, conn: BrokerConnection) -> None:
        conn.forget()
        if conn in self.connections:
            self.connections.remove(conn)
        session = conn.session
        if session is not None and session.connection is conn:
            session.connection = None
            if session.clean:  # a clean session ends with its connection
                del self.sessions[session.client_id]

    # -- packets -------------------------------------------------------------------------
    def handle(self, conn: BrokerConnection, packet: tuple) -> None:
        kind = packet[0]
        if conn.session is None:
            if kind == "connect":
                self._connect(conn, *packet[1:])
            else:  # MQTT 3.1.1 section 3.1: the first packet must be CONNECT
                self.drop(conn, reset=True)
            return
        if kind == "publish":
            _, pid, topic, payload, qos, _dup, retain = packet
            self._publish(conn, pid, Message(topic, payload, qos, retain))
        elif kind == "puback":
            self._acknowledged(conn.session, packet[1])
        elif kind == "subscribe":
            self._subscribe(conn, packet[1], packet[2])
        elif kind == "unsubscribe":
            for topic_filter in packet[2]:
                if not _valid_filter(topic_filter):
                    self.drop(conn, reset=False)
                    return
                conn.session.subscriptions.pop(topic_filter, None)
            conn.send(("unsuback", packet[1]))
        elif kind == "pingreq":
            conn.send(("pingresp",))
        elif kind == "disconnect":
            self.drop(conn, reset=False)
        else:  # a second CONNECT or an unknown packet: a protocol violation
            self.drop(conn, reset=False)

    def _connect(self, conn: BrokerConnection, client_id: str, username: str | None, password: str | None,
                 clean: bool, keepalive_s: float) -> None:
        refused = access.admitted(self._secret, username, password, client_id)
        if refused is not None:
            conn.send(("connack", CONNACK_NOT_AUTHORIZED, False))
            self.drop(conn, reset=False)
            return
        old = self.sessions.get(client_id)
        if old is not None and old.connection is not None:
            self.drop(old.connection, reset=False)  # takeover: the old connection goes
            old = self.sessions.get(client_id)  # a clean one ended with it
        if clean or old is None:
            session = Session(client_id, username or client_id, clean)
            self.sessions[client_id] = session
            present = False
        else:
            session, present = old, True
        session.connection = conn
        conn.session = session
        conn.watch(keepalive_s)
        conn.send(("connack", CONNACK_ACCEPTED, present))
        for pid, msg in session.inflight.items():  # what was never acknowledged, again, first
            conn.send(("publish", pid, msg.topic, msg.payload, msg.qos, True, False))
        self._fill(session)

    def _subscribe(self, conn: BrokerConnection, pid: int, filters: list[tuple[str, int]]) -> None:
        session = conn.session
        assert session is not None
        codes = []
        for topic_filter, qos in filters:
            if not _valid_filter(topic_filter):
                self.drop(conn, reset=False)  # Mosquitto 2.0: a malformed packet, not a SUBACK 0x80
                return
            # Outside the grants: granted, and the read check on delivery keeps it empty.
            session.subscriptions[topic_filter] = min(qos, 1)
            codes.append(min(qos, 1))
        conn.send(("suback", pid, codes))
        for topic_filter, qos in filters:
            for topic, msg in self.retained.items():
                if access.covers(topic_filter, topic) and access.may_receive(session.username, topic):
                    self._deliver(session, Message(topic, msg.payload, min(qos, msg.qos, 1), True))

    def _publish(self, conn: BrokerConnection, pid: int, msg: Message) -> None:
        session = conn.session
        assert session is not None
        if not access.may_publish(session.username, msg.topic):
            if msg.qos:
                conn.send(("puback", pid))
            self.drop(conn, reset=False)  # Mosquitto 2.0: acknowledged, then disconnected
            return
        if msg.retain:
            if msg.payload:
                self.retained[msg.topic] = msg
            else:
                self.retained.pop(msg.topic, None)
        for receiver in self.sessions.values():
            granted = max((q for f, q in receiver.subscriptions.items() if access.covers(f, msg.topic)), default=None)
            if granted is not None and access.may_receive(receiver.username, msg.topic):
                self._deliver(receiver, Message(msg.topic, msg.payload, min(granted, msg.qos)))
        if msg.qos:
            conn.send(("puback", pid))

    def _deliver(self, session: Session, msg: Message) -> None:
        if msg.qos == 0:
            if session.connection is not None:  # not queued for an absent client
                session.connection.send(("publish", 0, msg.topic, msg.payload, 0, False, msg.retain))
            return
        session.queue.append(msg)
        self._fill(session)

    def _fill(self, session: Session) -> None:
        conn = session.connection
        while conn is not None and session.queue and len(session.inflight) < INFLIGHT_WINDOW:
            msg = session.queue.popleft()
            pid = session.packet_id()
            session.inflight[pid] = msg
            conn.send(("publish", pid, msg.topic, msg.payload, msg.qos, False, msg.retain))

    def _acknowledged(self, session: Session, pid: int) -> None:
        if session.inflight.pop(pid, None) is not None:
            self._fill(session)


def _valid_filter(topic_filter: object) -> bool:
    """MQTT 3.1.1 section 4.7.1: ``#`` only last and alone in its level, ``+`` alone."""
    if not isinstance(topic_filter, str) or not topic_filter:
        return False
    levels = topic_filter.split("/")
    for i, level in enumerate(levels):
        if "#" in level and (level != "#" or i != len(levels) - 1):
            return False
        if "+" in level and level != "+":
            return False
    return True
