"""The cluster controller: an MQTT endpoint (one connection per GBID, each a broker session
in the link registry), a WebSocket server for libjoynr runtimes, the message router of kind
cluster controller (``joynr_sim.core.router.CcMessageRouter``), joynr's routing provider and
the local capabilities directory."""

from __future__ import annotations

import asyncio
import hmac
import secrets
from collections.abc import Iterable, Sequence
from typing import Any

from ..core.address import Address, InProcessAddress, MqttAddress, WebSocketAddress, WebSocketClientAddress
from ..core.discovery import DiscoveryEntry
from ..core.gcd import GCD_PARTICIPANT_ID, GCD_TOPIC
from ..core.limits import check_int
from ..core.links import LinkRegistry
from ..core.message import MULTICAST, JoynrMessage, encode
from ..core.router import CcMessageRouter
from ..core.routing import RoutingEntry, RoutingTable
from ..store.route_store import RouteStore, RoutingTablePersistency
from ..transport.websocket import WebSocketServer
from .base import FOREVER_MS, Runtime
from .discovery import (
    DEFAULT_FRESHNESS_INTERVAL_MS,
    DISCOVERY_INTERFACE,
    DiscoveryProvider,
    LocalDiscovery,
)
from .mqtt_endpoint import BrokerDirectory, MqttEndpoint
from .participants import ProviderSkeleton
from .routing_provider import RoutingProvider, routing_provider_participant_id
from .sessions import open_link_registry

DEFAULT_DRAIN_TIMEOUT_MS = 5_000  # a graceful stop's drain, bounded as joynr's prepareForShutdown
DEFAULT_CONNECT_TIMEOUT_MS = 10_000  # a start's wait for each CONNACK (paho goes on trying)
MAX_TIMEOUT_MS = 600_000


class CcAddresses:
    """Where a cluster controller is reached: the same whether it runs in this process or
    in a host process (``joynr_sim.host.handles.RemoteClusterController``)."""

    gbids: list[str]
    topic: str
    ws_port: int
    ws_host = "127.0.0.1"  # where its WebSocket server listens: a joined host's own address

    @property
    def default_gbid(self) -> str:
        return self.gbids[0]

    def global_address(self, gbid: str | None = None) -> MqttAddress:
        return MqttAddress(gbid or self.default_gbid, self.topic)

    @property
    def ws_address(self) -> WebSocketAddress:
        return WebSocketAddress("WS", self.ws_host, self.ws_port, "/")


class ClusterController(CcAddresses, Runtime):
    kind = "cluster-controller"
    transports = {MqttAddress: "_publish", WebSocketClientAddress: "_send_ws_soon"}

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
        on_client_disconnect: str = "keep",
        republish_received_multicasts: bool = False,
        drain_timeout_ms: int = DEFAULT_DRAIN_TIMEOUT_MS,
        connect_timeout_ms: int = DEFAULT_CONNECT_TIMEOUT_MS,
        persist_routing_table: bool = False,
        **kwargs: Any,
    ) -> None:
        self.cc_id = cc_id
        self.drain_timeout_ms = check_int(drain_timeout_ms, "drain_timeout_ms", 0, MAX_TIMEOUT_MS)
        connect_timeout_ms = check_int(connect_timeout_ms, "connect_timeout_ms", 1, MAX_TIMEOUT_MS)
        self.on_client_disconnect = on_client_disconnect
        if type(persist_routing_table) is not bool:
            raise ValueError(f"persist_routing_table: expected true or false, got {persist_routing_table!r}")
        # The broken rule set: a multicast received from a backend is published again
        # (joynr_sim.core.multicast), the echo joynr guards against.
        self.republish_received_multicasts = republish_received_multicasts
        self.gbids = tuple(gbids)
        if not self.gbids:
            raise ValueError(f"gbids: a cluster controller needs at least one GBID ({cc_id!r})")
        if len(set(self.gbids)) != len(self.gbids):
            raise ValueError(f"gbids: repeated GBID in {list(self.gbids)!r}")
        self.topic = cc_id
        self.client_id = cc_id  # joynr derives the MQTT client id from the persisted CC id
        self.provisioned = tuple(provisioned)
        self.routing_provider_id = routing_provider_participant_id(cc_id)
        self.websocket = websocket
        self.old_joynr = old_joynr
        self.ws_server: WebSocketServer | None = None
        self.ws_port = 0
        # The token each libjoynr runtime proves its id with; provisioned, so a restart
        # of either side keeps them.
        self._ws_tokens: dict[str, str] = {}
        self.discovery: LocalDiscovery | None = None
        if discovery:
            self.discovery = LocalDiscovery(
                cc_id, self.gbids, self.clock_ms, gcd=self._call_gcd, routes=self._put_route,
                emit=self.emit, spawn=self.spawn, old_joynr=old_joynr,
                freshness_interval_ms=freshness_interval_ms, remove_stale_delay_ms=remove_stale_delay_ms,
            )
        super().__init__(runtime_id or cc_id, **kwargs)
        # What joynr persists for a cluster controller: its broker sessions, in a link store
        # shared by every runtime started with the same CC id (as a copied persistence file
        # would be), and per runtime the bytes of its unsettled deliveries. The registry
        # given is opened over that store; every start opens the runtime's own over it.
        state_dir = self.run_dir / "state"
        if link_registry is None:  # (an empty registry is falsy: it has a length)
            link_registry = open_link_registry(state_dir, cc_id, self.clock.now_ms, detached_timeout_ms)
        self.endpoint = MqttEndpoint(
            self, client_id=self.client_id, topic=self.topic, gbids=self.gbids, brokers=brokers,
            link_registry=link_registry, outbox_path=state_dir / f"{self.runtime_id}.outbox.sqlite",
            connect_timeout_s=connect_timeout_ms / 1000,
        )
        # joynr's routing-table persistency, off by default as in joynr: with it, a restart
        # still knows the routes it had learned (a reply's way back to its consumer).
        self.persistency = RoutingTablePersistency(RouteStore(
            state_dir / f"{cc_id}.routes.sqlite", on_error=lambda exc: self.log_failure("routes.sqlite", exc),
        )) if persist_routing_table else None

    # The MQTT side, as tests and the scenario runner look at it.
    @property
    def mqtt(self) -> dict:
        return self.endpoint.connections

    @property
    def outbox(self):
        return self.endpoint.outbox

    @property
    def sessions(self):
        return self.endpoint.sessions

    @property
    def link_registry(self) -> LinkRegistry:
        return self.endpoint.link_registry

    def admit(self, runtime_id: str) -> str:
        """Provision a libjoynr runtime: the token its WebSocket handshake must carry."""
        return self._ws_tokens.setdefault(runtime_id, secrets.token_hex(16))

    def _authentic(self, client_id: str, token: object) -> bool:
        expected = self._ws_tokens.get(client_id)
        return expected is not None and isinstance(token, str) and hmac.compare_digest(expected, token)

    def clock_ms(self) -> int:
        return self.clock.now_ms()

    def _make_router(self) -> CcMessageRouter:
        table = RoutingTable(
            "cluster-controller",
            policy=self.policy,
            own_addresses=[self.global_address(g) for g in self.gbids],
            known_gbids=self.gbids,
            gcd_participant_id=GCD_PARTICIPANT_ID,
            clock=self.clock.now_ms,
        )
        return CcMessageRouter(
            table, self.clock.now_ms, own_topic=self.topic, gbids=self.gbids,
            resolves=self.discovery is not None, on_client_disconnect=self.on_client_disconnect,
            republish_received_multicasts=self.republish_received_multicasts,
            **self.router_options,
        )

    def _life_fields(self) -> dict[str, Any]:
        return {
            "cc_id": self.cc_id,
            "gbids": list(self.gbids),
            "own_topics": [self.topic],
            "ws_port": self.ws_port,
        }

    # -- lifecycle -------------------------------------------------------------------
    def _on_reset(self) -> None:
        if self.discovery is not None:
            self.discovery.reset()

    def close(self) -> None:
        super().close()
        self.endpoint.close()
        if self.persistency is not None:
            self.persistency.store.close()

    async def _start_transports(self) -> None:
        self._provision()
        if self.persistency is not None:  # before a connection can offer or need a route
            self.persistency.attach(self.table)
            self.persistency.restore(self.add_next_hop, self.clock.now_ms())
        if self.websocket:
            self.ws_server = WebSocketServer(
                on_frame=lambda client, frame: self.receive_frame(frame, "ws", source=client),
                on_client=lambda client: None,
                on_client_gone=lambda client: self.carry_out(self.router.client_gone(client)),
                on_bad_handshake=lambda reason, detail: self.trace_msg(
                    "msg.drop", None, reason=reason, via="ws", gbid=None, detail=detail
                ),
                authenticate=self._authentic,
            )
            # A restarted cluster controller listens where its libjoynr runtimes expect it.
            await self.ws_server.start(host=self.ws_host, port=self.ws_port)
            self.ws_port = self.ws_server.port
        await self.endpoint.start()

    async def _drain(self) -> None:
        """Finish what was taken on, at most drain_timeout_ms (README "Runtimes"): brokers
        keep what they deliver from now on for the next start; each libjoynr runtime gets
        its queued frames, then the closing handshake, and what it sent until then is routed."""
        self.endpoint.pause_input()
        await asyncio.sleep(0)  # what this turn scheduled for a WebSocket is queued first
        if self.ws_server is not None:
            await self.ws_server.drain(self.drain_timeout_ms / 1000)

    async def _stop_transports(self) -> None:
        if self.ws_server is not None:
            await self.ws_server.stop()
        await self.endpoint.stop()

    async def _abort_transports(self) -> None:
        if self.ws_server is not None:
            self.ws_server.abort()
        await self.endpoint.abort()
        if self.persistency is not None:
            self.persistency.store.abandon()  # this turn's routes die with the process

    def _on_started(self) -> None:
        if self.discovery is not None:
            self.discovery.on_start()

    def _on_purge(self, now_ms: int) -> None:
        self.endpoint.purge(now_ms)
        if self.discovery is not None:
            self.discovery.tick(now_ms)

    async def cut(self, gbid: str) -> None:
        """Cut this cluster controller off the broker of ``gbid`` (the link dies without
        DISCONNECT); messages for that backend are dropped until ``heal``."""
        await self.endpoint.cut(gbid)

    async def heal(self, gbid: str) -> None:
        await self.endpoint.heal(gbid)

    def _provision(self) -> None:
        routing = ProviderSkeleton(
            self.routing_provider_id, "io.joynr", RoutingProvider.interface_name, RoutingProvider(self)
        )
        self.add_next_hop(
            self.routing_provider_id, RoutingEntry(InProcessAddress(routing), False, FOREVER_MS, True),
            "provisioned",
        )
        # joynr's routing provider is internal: only this CC's own libjoynr runtimes may
        # add or remove next hops (from the backend, removeNextHop would cut a provider off).
        self.router.local_only.add(self.routing_provider_id)
        if self.discovery is not None:
            # Every backend has a GCD; lookup(GCD, gbid) gives this topic on that broker.
            self.add_next_hop(
                GCD_PARTICIPANT_ID,
                RoutingEntry(MqttAddress(self.default_gbid, GCD_TOPIC), False, FOREVER_MS, True),
                "provisioned",
            )
            provider = ProviderSkeleton(
                self.discovery.participant_id, "io.joynr", DISCOVERY_INTERFACE,
                DiscoveryProvider(self.discovery),
            )
            self.add_next_hop(
                self.discovery.participant_id,
                RoutingEntry(InProcessAddress(provider), False, FOREVER_MS, True), "provisioned",
            )
            self.router.local_only.add(self.discovery.participant_id)  # internal as well
        for participant_id, address, visible in self.provisioned:
            self.add_next_hop(participant_id, RoutingEntry(address, visible, FOREVER_MS, True), "provisioned")

    # -- carrying out ----------------------------------------------------------------
    def _publish(self, msg: JoynrMessage, address: MqttAddress) -> None:
        refused = self.endpoint.publish(msg, address.broker_uri, address.topic, multicast=msg.type == MULTICAST)
        if refused is not None:
            self.carry_out(self.router.send_failed(msg, address, *refused))

    def _send_ws_soon(self, msg: JoynrMessage, address: WebSocketClientAddress) -> None:
        self._soon(self._send_ws, msg, address)

    def _multicast_topic(self, gbid: str, topic: str, subscribe: bool) -> None:
        """A multicast's first receiver here wants its topic from a backend, or its last went."""
        if subscribe:
            full = self.endpoint.subscribe_multicast(gbid, topic)
        else:
            full = self.endpoint.unsubscribe_multicast(gbid, topic)
        self.emit("mc.subscribe" if subscribe else "mc.unsubscribe", gbid=gbid, topic=full)

    def _send_ws(self, msg: JoynrMessage, address: WebSocketClientAddress) -> None:
        assert self.ws_server is not None
        self.ws_server.send_soon(address.id, encode(msg), lambda: self.carry_out(self.router.send_failed(msg, address)))

    async def _resolve(self, participant_id: str) -> None:
        """A message waits for a participant this CC has no route for (e.g. after a
        restart): ask discovery, whose answer becomes a route through the policy."""
        assert self.discovery is not None
        try:
            await self.discovery.lookup_participant(participant_id)
        except Exception:  # not found anywhere: the message waits until it expires
            pass

    # -- discovery -------------------------------------------------------------------
    async def _call_gcd(self, method: str, params: list[Any], gbid: str, ttl_ms: int) -> Any:
        assert self.discovery is not None
        return await self.request(self.discovery.participant_id, GCD_PARTICIPANT_ID, method, params, ttl_ms,
                                  gbid=gbid)

    def _put_route(self, participant_id: str, entry: RoutingEntry, origin: str) -> None:
        self.add_next_hop(participant_id, entry, origin)

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
