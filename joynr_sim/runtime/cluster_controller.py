"""The cluster controller, composed: a node of kind cluster controller
(``joynr_sim.core.node.ClusterControllerNode``) and its ports — the provisioned routes
(joynr's routing and discovery providers, the GCD, and with persistency what was learned
before), a WebSocket server for its libjoynr runtimes, an MQTT endpoint (one connection per
GBID, each a broker session in the link registry) — and its local capabilities directory
(``local_directory``)."""

from __future__ import annotations

import hmac
from collections.abc import Iterable, Mapping
from typing import Any

from ..core.address import Address, InProcessAddress, MqttAddress, WebSocketAddress
from ..core.gcd import GCD_PARTICIPANT_ID, GCD_TOPIC
from ..core.ids import new_hex
from ..core.limits import check_int
from ..core.links import LinkRegistry
from ..core.node import ClusterControllerNode
from ..core.routing import RoutingEntry
from ..core.variants import variant_of
from ..store.route_store import RouteStore, RoutingTablePersistency
from ..transport.websocket import WebSocketServer
from .base import FOREVER_MS, offer_route
from .discovery import DEFAULT_FRESHNESS_INTERVAL_MS, DISCOVERY_INTERFACE, DiscoveryProvider, LocalDiscovery
from .joynr_runtime import JoynrRuntime
from .local_directory import LocalDirectory
from .mqtt_endpoint import BrokerDirectory, MqttEndpoint
from .participants import ProviderSkeleton
from .ports import Port
from .routing_provider import RoutingProvider, routing_provider_participant_id
from .sessions import open_link_registry
from .ws_server_port import WebSocketServerPort

DEFAULT_DRAIN_TIMEOUT_MS = 5_000  # a graceful stop's drain, bounded as joynr's prepareForShutdown
DEFAULT_CONNECT_TIMEOUT_MS = 10_000  # a start's wait for each CONNACK (paho goes on trying)
MAX_TIMEOUT_MS = 600_000


class CcAddresses:
    """Where a cluster controller is reached: the same whether it runs in this process or
    in a host process (``joynr_sim.host.rpc.kinds.RemoteClusterController``)."""

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


class ClusterController(CcAddresses, JoynrRuntime):
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
        on_client_disconnect: str = "keep",
        republish_received_multicasts: bool = False,
        drain_timeout_ms: int = DEFAULT_DRAIN_TIMEOUT_MS,
        connect_timeout_ms: int = DEFAULT_CONNECT_TIMEOUT_MS,
        persist_routing_table: bool = False,
        ws_host: str = CcAddresses.ws_host,
        ws_port: int = 0,
        ws_tokens: Mapping[str, str] | None = None,
        **kwargs: Any,
    ) -> None:
        self.cc_id = cc_id
        drain_timeout_ms = check_int(drain_timeout_ms, "drain_timeout_ms", 0, MAX_TIMEOUT_MS)
        connect_timeout_ms = check_int(connect_timeout_ms, "connect_timeout_ms", 1, MAX_TIMEOUT_MS)
        if type(persist_routing_table) is not bool:
            raise ValueError(f"persist_routing_table: expected true or false, got {persist_routing_table!r}")
        self.gbids = tuple(gbids)
        if not self.gbids:
            raise ValueError(f"gbids: a cluster controller needs at least one GBID ({cc_id!r})")
        if len(set(self.gbids)) != len(self.gbids):
            raise ValueError(f"gbids: repeated GBID in {list(self.gbids)!r}")
        self.topic = cc_id
        self.client_id = cc_id  # joynr derives the MQTT client id from the persisted CC id
        self.routing_provider_id = routing_provider_participant_id(cc_id)
        self.ws_host, self.ws_port = ws_host, ws_port
        # The token each libjoynr runtime proves its id with; provisioned, so a restart
        # of either side keeps them.
        self._ws_tokens: dict[str, str] = dict(ws_tokens or {})
        self.discovery = LocalDiscovery(
            cc_id, self.gbids, self.clock_ms, lcd=lambda: self.node.lcd, gcd=self._call_gcd,
            routes=lambda *route: offer_route(self, *route),
            emit=self.emit, spawn=self.spawn, old_joynr=old_joynr,
            freshness_interval_ms=freshness_interval_ms, remove_stale_delay_ms=remove_stale_delay_ms,
        ) if discovery else None
        directory = LocalDirectory(cc_id, self.discovery)
        # The broken rule set republish_received_multicasts: a multicast received from a
        # backend is published again (joynr_sim.core.multicast), the echo joynr guards against.
        super().__init__(
            runtime_id or cc_id, directory=directory,
            node=lambda options: ClusterControllerNode(
                self.topic, self.gbids, self.clock.now_ms, resolves=discovery,
                on_client_disconnect=on_client_disconnect, republish_received_multicasts=republish_received_multicasts,
                **options),
            **kwargs,
        )
        # What joynr persists for a cluster controller: its broker sessions, in a link store
        # shared by every runtime started with the same CC id (as a copied persistence file
        # would be), and per runtime the bytes of its unsettled deliveries. The registry
        # given is opened over that store; every start opens the runtime's own over it.
        state_dir = self.run_dir / "state"
        if link_registry is None:  # (an empty registry is falsy: it has a length)
            link_registry = open_link_registry(state_dir, cc_id, self.clock.now_ms, detached_timeout_ms,
                                               variant_of(self.policy, "links"))
        self.endpoint = MqttEndpoint(
            self, client_id=self.client_id, topic=self.topic, gbids=self.gbids, brokers=brokers,
            link_registry=link_registry, outbox_path=state_dir / f"{self.runtime_id}.outbox.sqlite",
            connect_timeout_s=connect_timeout_ms / 1000,
        )
        self.multicast_topic = self.endpoint.multicast_topic
        # joynr's routing-table persistency, off by default as in joynr: with it, a restart
        # still knows the routes it had learned (a reply's way back to its consumer).
        persistency = RoutingTablePersistency(RouteStore(
            state_dir / f"{cc_id}.routes.sqlite", on_error=lambda exc: self.log_failure("routes.sqlite", exc),
        )) if persist_routing_table else None
        self.websocket_port = WebSocketServerPort(self, self._authentic, drain_timeout_ms / 1000) if websocket else None
        # Started in this order: the routes first, the WebSocket server where its libjoynr
        # runtimes expect it, the brokers, then the directory's work that needs them.
        self._provisioning = Provisioning(self, tuple(provisioned), persistency)
        self.ports = [self._provisioning, *([self.websocket_port] if self.websocket_port else []),
                      self.endpoint, directory]
        directory.reset()  # the local store, new as the node is
        self.life_fields = {"cc_id": cc_id, "gbids": list(self.gbids), "own_topics": [self.topic],
                            "ws_port": self.ws_port}

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

    @property
    def ws_server(self) -> WebSocketServer | None:
        return self.websocket_port.server if self.websocket_port is not None else None

    @property
    def persistency(self) -> RoutingTablePersistency | None:
        return self._provisioning.persistency

    def clock_ms(self) -> int:
        return self.clock.now_ms()

    async def admit(self, runtime_id: str, token: str | None = None) -> str:
        """Provision a libjoynr runtime: the token its WebSocket handshake must carry (a new
        one unless ``token`` is given)."""
        if token is not None:
            self._ws_tokens[runtime_id] = token
        elif runtime_id not in self._ws_tokens:  # every draw moves a seeded run's generator on
            self._ws_tokens[runtime_id] = new_hex(16)
        return self._ws_tokens[runtime_id]

    def _authentic(self, client_id: str, token: object) -> bool:
        expected = self._ws_tokens.get(client_id)
        return expected is not None and isinstance(token, str) and hmac.compare_digest(expected, token)

    async def connected(self, gbid: str) -> bool:
        conn = self.endpoint.connections.get(gbid)
        return conn is not None and conn.connected.is_set()

    async def cut(self, gbid: str) -> None:
        """Cut this cluster controller off the broker of ``gbid`` (the link dies without
        DISCONNECT); messages for that backend are dropped until ``heal``."""
        await self.endpoint.cut(gbid)

    async def heal(self, gbid: str) -> None:
        await self.endpoint.heal(gbid)

    async def _call_gcd(self, method: str, params: list[Any], gbid: str, ttl_ms: int) -> Any:
        assert self.discovery is not None
        return await self.request(self.discovery.participant_id, GCD_PARTICIPANT_ID, method, params, ttl_ms,
                                  gbid=gbid)


class Provisioning(Port):
    """The routes a cluster controller has before anything connects: joynr's routing
    provider and, with discovery, its discovery provider and the GCD on every backend (all
    sticky), what the scenario provisioned, and with persistency what it had learned."""

    def __init__(self, cc: ClusterController, provisioned: tuple[tuple[str, Address, bool], ...],
                 persistency: RoutingTablePersistency | None) -> None:
        self.cc, self.provisioned, self.persistency = cc, provisioned, persistency

    def _offer(self, participant_id: str, entry: RoutingEntry, origin: str = "provisioned") -> None:
        offer_route(self.cc, participant_id, entry, origin)

    async def start(self) -> None:
        cc = self.cc
        routing = ProviderSkeleton(cc.routing_provider_id, "io.joynr", RoutingProvider.interface_name,
                                   RoutingProvider(cc))
        self._offer(cc.routing_provider_id, RoutingEntry(InProcessAddress(routing), False, FOREVER_MS, True))
        # joynr's routing provider is internal: only this CC's own libjoynr runtimes may
        # add or remove next hops (from the backend, removeNextHop would cut a provider off).
        cc.node.router.local_only.add(cc.routing_provider_id)
        if cc.discovery is not None:
            # Every backend has a GCD; lookup(GCD, gbid) gives this topic on that broker.
            self._offer(GCD_PARTICIPANT_ID, RoutingEntry(MqttAddress(cc.default_gbid, GCD_TOPIC), False, FOREVER_MS,
                                                         True))
            provider = ProviderSkeleton(cc.discovery.participant_id, "io.joynr", DISCOVERY_INTERFACE,
                                        DiscoveryProvider(cc.discovery))
            self._offer(cc.discovery.participant_id, RoutingEntry(InProcessAddress(provider), False, FOREVER_MS, True))
            cc.node.router.local_only.add(cc.discovery.participant_id)  # internal as well
        for participant_id, address, visible in self.provisioned:
            self._offer(participant_id, RoutingEntry(address, visible, FOREVER_MS, True))
        if self.persistency is not None:  # before a connection can offer or need a route
            self.persistency.attach(cc.table)
            self.persistency.restore(self._offer, cc.clock.now_ms())

    async def abort(self) -> None:
        if self.persistency is not None:
            self.persistency.store.abandon()  # this turn's routes die with the process

    def close(self) -> None:
        if self.persistency is not None:
            self.persistency.store.close()
