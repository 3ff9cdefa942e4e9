"""The cluster controller: one MQTT connection per GBID (each a broker session in the link
registry), a WebSocket server for libjoynr runtimes, a routing table of kind
cluster-controller, joynr's routing provider and the local capabilities directory."""

from __future__ import annotations

import asyncio
import itertools
from collections import OrderedDict
from dataclasses import replace
from typing import Any, Iterable, Protocol, Sequence

from ..core.address import (
    Address,
    AddressError,
    InProcessAddress,
    MqttAddress,
    WebSocketAddress,
    WebSocketClientAddress,
    from_json,
)
from ..core.message import (
    BROADCAST_SUBSCRIPTION_REQUEST,
    MULTICAST_SUBSCRIPTION_REQUEST,
    REQUEST,
    SUBSCRIPTION_REQUEST,
    JoynrMessage,
    decode,
    encode,
)
from ..core.discovery import DiscoveryEntry
from ..core.links import LinkRegistry
from ..core.routing import RoutingEntry, RoutingTable
from ..store.outbox import Outbox
from ..transport.mqtt import MqttConnection, unicast_topic
from ..transport.websocket import WebSocketServer
from .base import FOREVER_MS, Runtime
from .discovery import (
    DEFAULT_FRESHNESS_INTERVAL_MS,
    DISCOVERY_INTERFACE,
    GCD_PARTICIPANT_ID,
    GCD_TOPIC,
    DiscoveryProvider,
    LocalDiscovery,
)
from .participants import ProviderSkeleton
from .sessions import BrokerSessions, open_link_registry

# Requests whose replies come back to the sender: their replyTo teaches the receiver a route.
_REQUEST_TYPES = frozenset(
    {REQUEST, SUBSCRIPTION_REQUEST, BROADCAST_SUBSCRIPTION_REQUEST, MULTICAST_SUBSCRIPTION_REQUEST}
)
CONNECT_TIMEOUT_S = 10
_SEEN_MEMORY = 100_000


def _tag(msg: JoynrMessage) -> str:
    """A delivery tag per hop: a looping message passes the same broker more than once."""
    return f"{msg.id}/{msg.hops}"


def routing_provider_participant_id(cc_id: str) -> str:
    return f"{cc_id}-routingprovider"


class BrokerDirectory(Protocol):
    def endpoint(self, gbid: str) -> tuple[str, int]: ...

    def credentials(self, client_id: str) -> tuple[str, str] | None: ...


class RoutingProvider:
    """joynr's routing provider: libjoynr runtimes add and remove their participants here."""

    interface_name = "joynr/system/Routing"

    def __init__(self, cc: "ClusterController") -> None:
        self._cc = cc

    def addNextHop(self, participantId: str, address: str, isGloballyVisible: bool) -> None:
        try:
            parsed = from_json(address)
        except AddressError as exc:
            raise ValueError(str(exc)) from None
        self._cc.table.put(
            participantId, RoutingEntry(parsed, bool(isGloballyVisible), FOREVER_MS), "routing-provider"
        )

    def removeNextHop(self, participantId: str) -> None:
        self._cc.table.remove(participantId)

    def resolveNextHop(self, participantId: str) -> bool:
        return participantId in self._cc.table


class ClusterController(Runtime):
    kind = "cluster-controller"

    def __init__(
        self,
        cc_id: str,
        gbids: Iterable[str],
        brokers: BrokerDirectory,
        *,
        runtime_id: str | None = None,
        provisioned: Iterable[tuple[str, Address, bool]] = (),
        websocket: bool = True,
        discovery: bool = True,
        old_joynr: bool = False,
        freshness_interval_ms: int = DEFAULT_FRESHNESS_INTERVAL_MS,
        remove_stale_delay_ms: int = 0,
        link_registry: LinkRegistry | None = None,
        detached_timeout_ms: int | None = None,
        **kwargs: Any,
    ) -> None:
        self.cc_id = cc_id
        self.gbids = tuple(gbids)
        if not self.gbids:
            raise ValueError(f"gbids: a cluster controller needs at least one GBID ({cc_id!r})")
        if len(set(self.gbids)) != len(self.gbids):
            raise ValueError(f"gbids: repeated GBID in {list(self.gbids)!r}")
        self.brokers = brokers
        self.topic = cc_id
        self.client_id = cc_id  # joynr derives the MQTT client id from the persisted CC id
        self.provisioned = tuple(provisioned)
        self.routing_provider_id = routing_provider_participant_id(cc_id)
        self.websocket = websocket
        self.old_joynr = old_joynr
        self.mqtt: dict[str, MqttConnection] = {}
        self._cut: set[str] = set()
        self.ws_server: WebSocketServer | None = None
        self.ws_port = 0
        self.discovery: LocalDiscovery | None = None
        if discovery:
            self.discovery = LocalDiscovery(
                self, old_joynr=old_joynr, freshness_interval_ms=freshness_interval_ms,
                remove_stale_delay_ms=remove_stale_delay_ms,
            )
        super().__init__(runtime_id or cc_id, **kwargs)
        # What joynr persists for a cluster controller: its broker sessions (shared by every
        # runtime started with the same CC id, as a copied persistence file would be) and,
        # per runtime, the bytes of its unsettled deliveries.
        state_dir = self.run_dir / "state"
        if link_registry is None:  # (an empty registry is falsy: it has a length)
            link_registry = open_link_registry(state_dir, cc_id, self.clock.now_ms, detached_timeout_ms)
        self.link_registry = link_registry
        self.outbox = Outbox(state_dir / f"{self.runtime_id}.outbox.sqlite")
        self.sessions = BrokerSessions(self, self.link_registry, self.outbox)
        self._conn_seq = itertools.count(1)

    @property
    def default_gbid(self) -> str:
        return self.gbids[0]

    def global_address(self, gbid: str | None = None) -> MqttAddress:
        return MqttAddress(gbid or self.default_gbid, self.topic)

    @property
    def ws_address(self) -> WebSocketAddress:
        return WebSocketAddress("WS", "127.0.0.1", self.ws_port, "/")

    def _make_table(self) -> RoutingTable:
        return RoutingTable(
            "cluster-controller",
            policy=self.policy,
            own_addresses=[self.global_address(g) for g in self.gbids],
            known_gbids=self.gbids,
            gcd_participant_id=GCD_PARTICIPANT_ID,
            clock=self.clock.now_ms,
        )

    def _life_fields(self) -> dict[str, Any]:
        return {
            "cc_id": self.cc_id,
            "gbids": list(self.gbids),
            "own_topics": [self.topic],
            "ws_port": self.ws_port,
        }

    # -- transports ------------------------------------------------------------------
    def _on_reset(self) -> None:
        self._seen: OrderedDict[tuple[str, int], None] = OrderedDict()
        self._resolving: set[str] = set()
        if self.discovery is not None:
            self.discovery.reset()

    def close(self) -> None:
        super().close()
        self.sessions.close()
        self.outbox.close()

    async def _start_transports(self) -> None:
        self._provision()
        if self.websocket:
            self.ws_server = WebSocketServer(
                on_frame=lambda client, frame: self.receive_frame(frame, "ws", source=client),
                on_client=lambda client: None,
                on_client_gone=self._on_client_gone,
                on_bad_handshake=lambda detail: self.trace_msg(
                    "msg.drop", None, reason="decode-error", via="ws", gbid=None, detail=detail
                ),
            )
            # A restarted cluster controller listens where its libjoynr runtimes expect it.
            await self.ws_server.start(port=self.ws_port)
            self.ws_port = self.ws_server.port
        self._cut: set[str] = set()
        for gbid in self.gbids:
            self._connect(gbid)
        await asyncio.gather(*(c.wait_connected(CONNECT_TIMEOUT_S) for c in self.mqtt.values()))

    def _connect(self, gbid: str) -> MqttConnection:
        host, port = self.brokers.endpoint(gbid)
        conn = MqttConnection(
            gbid=gbid,
            host=host,
            port=port,
            client_id=self.client_id,
            topic=self.topic,
            credentials=self.brokers.credentials(self.client_id),
            loop=asyncio.get_running_loop(),
            on_message=self._on_mqtt_message,
            on_connected=lambda c, session_present: self.sessions.attached(c),
            on_disconnected=self.sessions.lost,
            on_published=self.sessions.acknowledged,
            connection_id=self.sessions.connection_id(gbid, next(self._conn_seq)),
        )
        self.mqtt[gbid] = conn
        conn.start()
        return conn

    # -- MQTT deliveries -------------------------------------------------------------
    def _on_mqtt_message(self, conn: MqttConnection, payload: bytes, mid: int) -> None:
        """Hold the message, acknowledge it, handle it, then let it go."""
        if not self.running:
            return  # a crashed runtime acknowledges nothing: the broker keeps it
        msg = self.decode_frame(payload, "mqtt", conn.gbid)
        if msg is None:
            conn.ack(mid)
            return
        tag = _tag(msg)
        self.sessions.received(conn, tag, payload)
        conn.ack(mid)
        self._handle(conn, tag, msg)

    def handle_again(self, conn: MqttConnection, tag: str, payload: bytes) -> None:
        """A message received before a crash and never handled."""
        msg = self.decode_frame(payload, "mqtt", conn.gbid)
        if msg is None:
            self.sessions.handled(conn, tag)
            return
        self._handle(conn, tag, msg)

    def _handle(self, conn: MqttConnection, tag: str, msg: JoynrMessage) -> None:
        # A re-sent copy arrives with the hop count of the first; a looping message comes
        # back with a higher one and must go on looping until the hop limit stops it.
        key = (msg.id, msg.hops)
        if key in self._seen:
            self.trace_msg("msg.drop", msg, reason="duplicate", via="mqtt", gbid=conn.gbid)
        else:
            self._seen[key] = None
            if len(self._seen) > _SEEN_MEMORY:
                self._seen.popitem(last=False)
            self.receive_message(msg, "mqtt", conn.gbid)
        self.sessions.handled(conn, tag)

    def _publish(self, conn: MqttConnection, msg: JoynrMessage, topic: str, payload: bytes) -> None:
        tag = _tag(msg)
        self.sessions.publishing(conn, tag, topic, payload)
        self.sessions.published(conn, conn.publish(topic, payload), tag)

    def resend(self, conn: MqttConnection, tag: str, topic: str, payload: bytes) -> None:
        """Publish again what the broker never acknowledged before a crash."""
        msg = decode(payload)
        self.trace_msg(
            "msg.out", msg, via="mqtt", addr_type="Mqtt", target=f"{conn.gbid}/{topic}",
            gbid=conn.gbid, resent=True,
        )
        self.sessions.published(conn, conn.publish(topic, payload), tag)

    def _on_started(self) -> None:
        if self.discovery is not None:
            self.discovery.on_start()

    def _provision(self) -> None:
        routing = ProviderSkeleton(
            self.routing_provider_id, "io.joynr", RoutingProvider.interface_name, RoutingProvider(self)
        )
        self.table.put(
            self.routing_provider_id, RoutingEntry(InProcessAddress(routing), False, FOREVER_MS, True),
            "provisioned",
        )
        if self.discovery is not None:
            # Every backend has a GCD; lookup(GCD, gbid) gives this topic on that broker.
            self.table.put(
                GCD_PARTICIPANT_ID,
                RoutingEntry(MqttAddress(self.default_gbid, GCD_TOPIC), False, FOREVER_MS, True),
                "provisioned",
            )
            provider = ProviderSkeleton(
                self.discovery.participant_id, "io.joynr", DISCOVERY_INTERFACE,
                DiscoveryProvider(self.discovery),
            )
            self.table.put(
                self.discovery.participant_id,
                RoutingEntry(InProcessAddress(provider), False, FOREVER_MS, True), "provisioned",
            )
        for participant_id, address, visible in self.provisioned:
            self.table.put(participant_id, RoutingEntry(address, visible, FOREVER_MS, True), "provisioned")

    def purge(self, now_ms: int | None = None) -> None:
        super().purge(now_ms)
        if self.running:
            now = self.clock.now_ms() if now_ms is None else now_ms
            self.sessions.purge(now)
            if self.discovery is not None:
                self.discovery.tick(now)

    # -- discovery -------------------------------------------------------------------
    def _require_discovery(self) -> LocalDiscovery:
        if self.discovery is None:
            raise RuntimeError(f"{self.runtime_id}: runs without discovery")
        return self.discovery

    async def _discovery_add(self, entry: DiscoveryEntry, gbids: Sequence[str] | None) -> None:
        await self._require_discovery().add(entry, gbids)

    async def _discovery_remove(self, participant_id: str) -> None:
        await self._require_discovery().remove(participant_id)

    async def _discovery_lookup(self, domains, interface_name, scope, gbids, cache_max_age_ms):
        return await self._require_discovery().lookup(domains, interface_name, scope, gbids, cache_max_age_ms)

    async def _discovery_lookup_participant(self, participant_id, scope, gbids, cache_max_age_ms):
        return await self._require_discovery().lookup_participant(participant_id, scope, gbids, cache_max_age_ms)

    async def _stop_transports(self) -> None:
        """A clean shutdown closes the sessions: links closed, nothing left to resume."""
        if self.ws_server is not None:
            await self.ws_server.stop()
        await asyncio.gather(*(c.stop() for c in self.mqtt.values()))
        for conn in self.mqtt.values():
            self.sessions.detached(conn, closed=True)
        self.mqtt.clear()

    async def _abort_transports(self) -> None:
        """A crash leaves the sessions suspended at the broker, to be resumed."""
        if self.ws_server is not None:
            self.ws_server.abort()
        await asyncio.gather(*(c.crash() for c in self.mqtt.values()))
        for conn in self.mqtt.values():
            self.sessions.detached(conn, closed=False, error="connection-lost")
        self.mqtt.clear()

    async def cut(self, gbid: str) -> None:
        """Cut this cluster controller off the broker of ``gbid`` (the link dies without
        DISCONNECT); messages for that backend are dropped until ``heal``."""
        conn = self.mqtt.pop(self._known_gbid(gbid), None)
        if conn is None:
            raise ValueError(f"gbid: {self.runtime_id} is not connected to {gbid!r}")
        self._cut.add(gbid)
        await conn.crash()
        self.sessions.detached(conn, closed=False, error="connection-lost")

    async def heal(self, gbid: str) -> None:
        if gbid not in self._cut:
            raise ValueError(f"gbid: {self.runtime_id} is not cut off {gbid!r}")
        self._cut.discard(gbid)
        conn = self._connect(gbid)
        await conn.wait_connected(CONNECT_TIMEOUT_S)

    def _known_gbid(self, gbid: str) -> str:
        if gbid not in self.gbids:
            raise ValueError(f"gbid: {gbid!r} is not one of {self.runtime_id}'s {list(self.gbids)}")
        return gbid

    def _on_unknown_participant(self, participant_id: str) -> None:
        """A message waits for a participant this CC has no route for (e.g. after a
        restart): ask discovery, whose answer becomes a route through the policy."""
        if self.discovery is None or participant_id in self._resolving:
            return
        self._resolving.add(participant_id)
        self._spawn(self._resolve(participant_id))

    async def _resolve(self, participant_id: str) -> None:
        assert self.discovery is not None
        try:
            await self.discovery.lookup_participant(participant_id)
        except Exception:  # not found anywhere: the message waits until it expires
            pass
        finally:
            self._resolving.discard(participant_id)

    def _on_client_gone(self, client_id: str) -> None:
        """A libjoynr runtime went away: its non-sticky routes go with it."""
        gone = WebSocketClientAddress(client_id)
        for pid, entry in self.table.items():
            if entry.address == gone and not entry.is_sticky:
                self.table.remove(pid)

    # -- routing ---------------------------------------------------------------------
    def _on_incoming(
        self, msg: JoynrMessage, via: str, gbid: str | None, source: str | None
    ) -> None:
        if msg.type not in _REQUEST_TYPES:
            return
        if via == "ws" and source is not None and msg.sender not in self.table:
            # A local sender not announced through the routing provider (yet): its
            # reply goes back on the connection the request came from.
            address = WebSocketClientAddress(source)
            self.table.put(msg.sender, RoutingEntry(address, False, msg.expiry_date_ms), "reply-to")
        elif via == "mqtt" and isinstance(msg.reply_to, MqttAddress):
            # The sender is reachable on the backend the request came from, whatever
            # broker the replyTo names; the route lives as long as the request.
            address = MqttAddress(gbid, msg.reply_to.topic)
            self.table.put(msg.sender, RoutingEntry(address, True, msg.expiry_date_ms), "reply-to")

    def _send(self, msg: JoynrMessage, address: Address) -> None:
        if isinstance(address, MqttAddress):
            conn = self.mqtt.get(address.broker_uri)
            if conn is None:
                reason = "no-connection" if address.broker_uri in self._cut else "unknown-gbid"
                self.trace_msg("msg.drop", msg, reason=reason, gbid=address.broker_uri)
                return
            if msg.type in _REQUEST_TYPES and msg.reply_to is None:
                msg = replace(msg, reply_to=self.global_address(address.broker_uri))
            self._publish(conn, msg, unicast_topic(address.topic), encode(msg))
        elif isinstance(address, WebSocketClientAddress):
            self._spawn(self._send_ws(msg, address.id))
        else:  # a cluster controller cannot connect to a WebSocket server or a channel
            self.trace_msg("msg.drop", msg, reason="no-connection")

    async def _send_ws(self, msg: JoynrMessage, client_id: str) -> None:
        assert self.ws_server is not None
        if not await self.ws_server.send(client_id, encode(msg)):
            self.trace_msg("msg.drop", msg, reason="no-connection")
