"""A runtime's MQTT side: one connection per GBID (client id and topic from the runtime's
persisted id), each a broker session in the link registry, with the outbox that keeps the
bytes of unsettled deliveries across a crash.

The link registry is process memory: every start of the runtime (the first, and each
restart after a stop or a crash) opens a new registry over the link store, knowing only
what the store kept, as a restarted process would. A crash writes nothing: the store is
left as a killed process leaves it.

Cluster controllers and GCD instances are both built from one of these and a message
router; the endpoint knows nothing of routing. What it needs from its runtime is the small
``MqttHost`` protocol: whether it runs, how to trace, how to decode a frame and what to do
with a message.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Iterable
from pathlib import Path
from typing import Any, Protocol

from ..core.actions import Action, Drop, Send
from ..core.address import MqttAddress
from ..core.limits import InvalidField, check_unicast_topic, shorten
from ..core.links import LinkRegistry
from ..core.message import BEST_EFFORT, MULTICAST, JoynrMessage
from ..core.node import Node
from ..store.group_commit import after_commit
from ..store.outbox import Outbox
from ..trace import TraceWriter
from ..transport.mqtt import BEST_EFFORT_QOS, MqttConnection
from ..transport.mqtt_topics import check_publish_topic, multicast_topic, unicast_topic
from ..transport.network import REAL
from ..transport.paho_client import Delivery
from ..wire.codecs import WireEncodeError
from .action_trace import trace_action
from .ports import Carrier, Network, Port
from .sessions import BrokerSessions

CONNECT_TIMEOUT_S = 10  # a start's wait for every CONNACK, unless the runtime chose its own


class BrokerDirectory(Protocol):
    def endpoint(self, gbid: str) -> tuple[str, int]: ...

    def credentials(self, client_id: str, gbid: str | None = None) -> tuple[str, str] | None: ...


class MqttHost(Protocol):
    runtime_id: str
    running: bool
    network: Network | None
    node: Node
    trace: TraceWriter

    def emit(self, ev: str, **fields: Any) -> Any: ...

    def carry_out(self, actions: Iterable[Action]) -> None: ...

    def receive_frame(self, data: bytes, via: str, gbid: str | None = None) -> None:
        """Decode and route a received frame; never raises (a failure is a traced drop)."""


def _tag(msg: JoynrMessage) -> str:
    """A delivery tag per hop: a looping message passes the same broker more than once."""
    return f"{msg.id}/{msg.hops}"


class MqttEndpoint(Port):
    def __init__(
        self,
        host: MqttHost,
        *,
        client_id: str,
        topic: str,
        gbids: Iterable[str],
        brokers: BrokerDirectory,
        link_registry: LinkRegistry,
        outbox_path: Path,
        connect_timeout_s: float = CONNECT_TIMEOUT_S,
    ) -> None:
        """link_registry: the registry opened over this client id's link store; each start
        opens this runtime's own over the same store (LinkRegistry.reopen), holder the
        runtime id."""
        self.host = host
        self.connect_timeout_s = connect_timeout_s
        self.client_id = client_id  # joynr derives the MQTT client id from the persisted id
        self.topic = topic
        self.gbids = tuple(gbids)
        self.brokers = brokers
        self.link_registry = link_registry  # this process's own from the first start on
        # A process that finds the runtime's persistence is a restart of it (in a host
        # process a restart builds the runtime anew): its sessions recover their termini.
        self._found_persistence = outbox_path.exists()
        self.outbox = Outbox(outbox_path, group_commit=True)
        self.sessions: BrokerSessions | None = None  # opened by start
        self.connections: dict[str, MqttConnection] = {}
        self._cut: set[str] = set()
        # The multicast topic filters subscribed per GBID: process memory, as the router's
        # receivers are (the broker's persistent session may hold them longer).
        self.multicast_filters: dict[str, set[str]] = {}
        self._conn_seq = itertools.count(1)
        self._input_paused = False  # a graceful stop under way: the broker keeps what comes

    @property
    def runtime_id(self) -> str:
        return self.host.runtime_id

    @property
    def carriers(self) -> dict[type, Carrier]:
        return {MqttAddress: self._carry}

    def _carry(self, msg: JoynrMessage, address: MqttAddress) -> None:
        refused = self.publish(msg, address.broker_uri, address.topic, multicast=msg.type == MULTICAST)
        if refused is not None:
            self.host.carry_out(self.host.node.send_failed(msg, address, *refused))

    async def drain(self) -> None:
        self.pause_input()

    def tick(self, now_ms: int) -> None:
        self.purge(now_ms)

    def multicast_topic(self, gbid: str, topic: str, subscribe: bool) -> None:
        """A multicast's first receiver here wants its topic from a backend, or its last went."""
        full = self.subscribe_multicast(gbid, topic) if subscribe else self.unsubscribe_multicast(gbid, topic)
        self.emit("mc.subscribe" if subscribe else "mc.unsubscribe", gbid=gbid, topic=full)

    def emit(self, ev: str, **fields: Any) -> Any:
        return self.host.emit(ev, **fields)

    # -- lifecycle -------------------------------------------------------------------
    async def start(self) -> None:
        self._cut = set()
        self._input_paused = False
        self.multicast_filters = {}
        self._open_sessions()
        for gbid in self.gbids:
            self._connect(gbid)
        await asyncio.gather(*(c.wait_connected(self.connect_timeout_s) for c in self.connections.values()))

    def pause_input(self) -> None:
        """Take no more messages from the brokers: each stays unacknowledged in the
        persistent session, which the next start of this client id resumes."""
        self._input_paused = True

    async def stop(self) -> None:
        """A clean shutdown closes the sessions: links closed, nothing left to resume."""
        await asyncio.gather(*(c.stop() for c in self.connections.values()))
        if self.sessions is not None:
            for conn in self.connections.values():
                self.sessions.detached(conn, closed=True)
            self.sessions.close()
        self.connections.clear()

    async def abort(self) -> None:
        """A crash: the connections die without DISCONNECT and the process's memory with
        them. Nothing is written: the sessions stay at the broker, and the link store names
        the dead connections until the restarted runtime's registry finds them gone."""
        self.outbox.abandon()  # this turn's writes die with the process
        if self.sessions is not None:
            self.sessions.close()
        conns = list(self.connections.values())
        self.connections.clear()
        await asyncio.gather(*(c.crash() for c in conns))

    def close(self) -> None:
        if self.sessions is not None:
            self.sessions.close()
        self.outbox.close()

    def _open_sessions(self) -> None:
        """A new registry over the link store and new sessions on it: the memory of the
        process this start begins."""
        restarted = self.sessions is not None or self._found_persistence
        if self.sessions is not None:
            self.sessions.close()
        self.link_registry = self.link_registry.reopen(holder=self.runtime_id)
        self.sessions = BrokerSessions(self, self.link_registry, self.outbox, restarted=restarted)

    def _live_sessions(self) -> BrokerSessions:
        if self.sessions is None:
            raise RuntimeError(f"{self.runtime_id}: the MQTT endpoint has not started")
        return self.sessions

    async def cut(self, gbid: str) -> None:
        """Cut off the broker of ``gbid`` (the link dies without DISCONNECT) until ``heal``."""
        conn = self.connections.pop(self._known(gbid), None)
        if conn is None:
            raise ValueError(f"gbid: {self.runtime_id} is not connected to {gbid!r}")
        self._cut.add(gbid)
        await conn.crash()
        self._live_sessions().detached(conn, closed=False, error="connection-lost")

    async def heal(self, gbid: str) -> None:
        if gbid not in self._cut:
            raise ValueError(f"gbid: {self.runtime_id} is not cut off {gbid!r}")
        self._cut.discard(gbid)
        await self._connect(gbid).wait_connected(self.connect_timeout_s)

    def purge(self, now_ms: int) -> None:
        if self.sessions is None:  # not started yet: a clock advance while it starts
            return
        self.sessions.purge(now_ms)

    def _known(self, gbid: str) -> str:
        if gbid not in self.gbids:
            raise ValueError(f"gbid: {gbid!r} is not one of {self.runtime_id}'s {list(self.gbids)}")
        return gbid

    def _connect(self, gbid: str) -> MqttConnection:
        # The callbacks go to the sessions of the process that made the connection: a dead
        # process's late callbacks reach closed sessions, which ignore them.
        sessions = self._live_sessions()
        host, port = self.brokers.endpoint(gbid)
        conn = (self.host.network or REAL).mqtt_connection(
            runtime_id=self.runtime_id,
            gbid=gbid,
            host=host,
            port=port,
            client_id=self.client_id,
            topic=self.topic,
            credentials=self.brokers.credentials(self.client_id, gbid),
            loop=asyncio.get_running_loop(),
            on_message=self._on_message,
            on_connected=sessions.attached,
            on_disconnected=sessions.lost,
            on_published=sessions.acknowledged,
            connection_id=sessions.connection_id(gbid, next(self._conn_seq)),
        )
        conn.multicast_filters = set(self.multicast_filters.get(gbid, ()))
        self.connections[gbid] = conn
        conn.start()
        return conn

    def subscribe_multicast(self, gbid: str, topic: str) -> str:
        """Receive the multicast ``topic`` (a multicast id's topic, perhaps a filter) from
        the broker of ``gbid``; the MQTT topic filter is returned."""
        full = multicast_topic(topic)
        self.multicast_filters.setdefault(self._known(gbid), set()).add(full)
        conn = self.connections.get(gbid)
        if conn is not None:
            conn.subscribe_multicast(full)
        return full

    def unsubscribe_multicast(self, gbid: str, topic: str) -> str:
        full = multicast_topic(topic)
        self.multicast_filters.get(self._known(gbid), set()).discard(full)
        conn = self.connections.get(gbid)
        if conn is not None:
            conn.unsubscribe_multicast(full)
        return full

    # -- sending ---------------------------------------------------------------------
    def publish(self, msg: JoynrMessage, gbid: str, topic: str, *, multicast: bool = False
                ) -> tuple[str, str | None] | None:
        """Publish to ``topic``'s unicast topic (or, for a multicast, its multicast topic)
        on the broker of ``gbid``. None when the broker has it or paho holds it for the
        next reconnect; else (reason, detail): ``invalid-message`` for a topic the brokers'
        grants refuse (a route's topic of more than one level), which is never published.

        The outbox row is written first and the client gets the message once it is
        committed (end of this turn), so a crash never loses a message paho had taken.

        A message of effort BEST_EFFORT goes out at QoS 0, as joynr's MqttMessagingStub
        sends it: no outbox row and no unsettled delivery (a crash or a lost connection
        loses it, as it does joynr's), and without a connection it is refused now, as
        paho keeps no QoS 0 message for a reconnect."""
        conn = self.connections.get(gbid)
        best_effort = msg.effort == BEST_EFFORT
        if conn is None or (best_effort and not conn.connected.is_set()):
            return ("no-connection", None)
        try:
            if multicast:
                full_topic = check_publish_topic(multicast_topic(topic), "to.topic")
            else:  # checked as the target it is: a route's topic must not reach a multicast topic
                full_topic = unicast_topic(check_unicast_topic(topic, "to.topic"))
            payload = self.host.codec.encode(msg)
        except (InvalidField, WireEncodeError) as exc:
            return ("invalid-message", str(exc))
        tag = _tag(msg)
        sessions = self._live_sessions()
        if best_effort:
            after_commit(self._send_best_effort, sessions, conn, msg, full_topic, payload)
            return None
        sessions.publishing(conn, tag, full_topic, payload)
        after_commit(self._send_committed, sessions, conn, msg, tag, full_topic, payload)
        return None

    def _gone(self, sessions: BrokerSessions, conn: MqttConnection) -> bool:
        """Whether the process a publish belonged to crashed or stopped since, or its
        connection was replaced: what it was to send is not this process's any more."""
        return sessions is not self.sessions or sessions.closed or self.connections.get(conn.gbid) is not conn

    def _send_best_effort(self, sessions: BrokerSessions, conn: MqttConnection, msg: JoynrMessage, topic: str,
                          payload: bytes) -> None:
        """At QoS 0, after the turn's writes as every publish: sent now, or dropped."""
        if self._gone(sessions, conn):
            return
        try:
            conn.publish(topic, payload, BEST_EFFORT_QOS)
        except (ValueError, ConnectionError) as exc:
            self.host.carry_out([Drop(msg, "no-connection", via="mqtt", gbid=conn.gbid,
                                      detail=shorten(f"{type(exc).__name__}: {exc}", 200))])

    def _send_committed(self, sessions: BrokerSessions, conn: MqttConnection, msg: JoynrMessage, tag: str,
                        topic: str, payload: bytes) -> None:
        """The outbox row is committed: hand the message to paho, unless the process this
        publish belonged to crashed or stopped meanwhile (its restart re-sends the row)."""
        if self._gone(sessions, conn):
            return
        try:
            mid = conn.publish(topic, payload)
        except (ValueError, ConnectionError) as exc:  # paho's own refusals
            self.host.carry_out([Drop(msg, "no-connection", via="mqtt", gbid=conn.gbid,
                                      detail=shorten(f"{type(exc).__name__}: {exc}", 200))])
            sessions.discard(conn, tag)
            return
        sessions.published(conn, mid, tag)

    def resend(self, conn: MqttConnection, tag: str, topic: str, payload: bytes) -> None:
        """Publish again what the broker never acknowledged before a crash. A row that
        cannot be sent is dropped with its reason; the rows after it still go."""
        msg = self.host.node.decode(payload, "mqtt", conn.gbid)
        if isinstance(msg, Drop):
            self.host.carry_out([msg])
            self._live_sessions().discard(conn, tag)
            return
        try:
            check_publish_topic(topic, "to.topic")
            mid = conn.publish(topic, payload)
        except (ValueError, ConnectionError) as exc:
            self.host.carry_out([Drop(msg, "invalid-message", via="mqtt", gbid=conn.gbid,
                                      detail=shorten(str(exc), 200))])
            self._live_sessions().discard(conn, tag)
            return
        # Sent again, not routed again: traced as the Send it is, never carried out twice.
        trace_action(self.host.trace, Send(msg, MqttAddress(conn.gbid, topic), resent=True))
        self._live_sessions().published(conn, mid, tag)

    # -- receiving -------------------------------------------------------------------
    def _on_message(self, conn: MqttConnection, payload: bytes, delivery: Delivery) -> None:
        """Handle the message, then acknowledge it once what handling wrote is committed. A
        frame that is dropped is acknowledged too (it was handled), so the broker's inflight
        window never fills with frames nobody will take. A message received at QoS 0 is
        handled the same and never acknowledged (``MqttConnection.ack``): the broker expects
        nothing, and Mosquitto closes the connection of a client that acknowledges it.

        Handling ends within this call, so the message is not held in the outbox and the
        receiving link first: that row was put and deleted in the same turn, which commits
        at its end or not at all, and cost two link operations and a statement per message."""
        if not self.host.running or self._input_paused:
            return  # a crashed or stopping runtime acknowledges nothing: the broker keeps it
        try:
            self.host.receive_frame(payload, "mqtt", conn.gbid)  # guarded: never raises
        finally:
            # After the commit of this turn: of what handling it wrote.
            if delivery.acknowledged:
                after_commit(self._ack_committed, self._live_sessions(), conn, delivery)

    def _ack_committed(self, sessions: BrokerSessions, conn: MqttConnection, delivery: Delivery) -> None:
        if sessions is self.sessions and not sessions.closed:
            conn.ack(delivery)

    def handle_again(self, conn: MqttConnection, tag: str, payload: bytes) -> None:
        """A message the outbox holds as received and never handled (see ``_on_message``:
        only a file written by a runtime that held messages before handling them has one)."""
        try:
            self.host.receive_frame(payload, "mqtt", conn.gbid)  # guarded: never raises
        finally:
            self._live_sessions().handled(conn, tag)

    # -- inspection ------------------------------------------------------------------
    def is_cut(self, gbid: str) -> bool:
        return gbid in self._cut

