"""The libjoynr runtime: one WebSocket connection to its cluster controller, held as a
provisioned sticky WebSocketAddress entry, and a routing table of kind libjoynr.

Providers and proxies are InProcess here; the runtime announces them to the cluster
controller's routing provider, which gives them a WebSocketClient entry there. A message
for a participant this runtime does not know waits while it asks the cluster controller
(resolveNextHop); if the cluster controller knows it, the route is the cluster controller.
The routing rules are ``joynr_sim.core.node.LibJoynrNode``'s. The runtime is composed of
that node, its WebSocket client as a port (``CcConnection``) and the cluster controller's
routing and discovery providers as its directory (``ParentDirectory``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from ..core.address import InProcessAddress, WebSocketAddress, WebSocketClientAddress, to_json
from ..core.discovery import DiscoveryEntry, DiscoveryEntryWithMetaInfo
from ..core.limits import check_int
from ..core.message import JoynrMessage
from ..core.multicast import MulticastId
from ..core.node import LibJoynrNode
from ..core.routing import RoutingEntry
from ..transport.network import REAL
from ..transport.websocket import WebSocketClient
from ..wire.codecs import WireEncodeError
from .base import FOREVER_MS, offer_route
from .discovery import discovery_provider_participant_id, to_discovery_error
from .joynr_runtime import JoynrRuntime
from .participants import ApplicationException, JoynrRuntimeException, ProxySkeleton
from .ports import Carrier, Port
from .routing_provider import RoutingProvider, routing_provider_participant_id

ROUTING_CALL_TTL_MS = 10_000
REANNOUNCE_TRIES = 3  # routing calls after a reconnect (each bounded by ROUTING_CALL_TTL_MS)
DISCOVERY_CALL_TTL_MS = 30_000  # covers the cluster controller's own call to the GCD
# How long a runtime waits between attempts to reach its cluster controller again, fixed
# as joynr's WebSocket client waits (its websocket/reconnect-sleep-time-ms setting).
DEFAULT_RECONNECT_INTERVAL_MS = 100
MAX_RECONNECT_INTERVAL_MS = 60_000
# Opening handshakes a start tries: a cluster controller that accepted the connection but
# did not answer within websockets' open timeout is starved, not missing (a missing one
# refuses at once, and that fails the start at once). joynr's libjoynr keeps trying to
# reach its cluster controller; a start still ends, with the last timeout, after these.
START_HANDSHAKE_TRIES = 3


class LibjoynrRuntime(JoynrRuntime):
    kind = "libjoynr"

    def __init__(
        self, runtime_id: str, cc_id: str, cc_address: WebSocketAddress, *, token: str | None = None,
        route_back_to_parent: bool = False, reconnect_interval_ms: int = DEFAULT_RECONNECT_INTERVAL_MS,
        **kwargs: Any,
    ) -> None:
        reconnect_interval_ms = check_int(reconnect_interval_ms, "reconnect_interval_ms", 1, MAX_RECONNECT_INTERVAL_MS)
        self.cc_id = cc_id
        self.token = token  # proves this runtime's id to its cluster controller
        self.cc_address = cc_address
        self.routing_provider_id = routing_provider_participant_id(cc_id)
        self.discovery_provider_id = discovery_provider_participant_id(cc_id)
        super().__init__(
            runtime_id, directory=ParentDirectory(self),
            # route_back_to_parent: joynr < 1.17.3, see LibJoynrMessageRouter.
            node=lambda options: LibJoynrNode(cc_address, self.clock.now_ms, route_back_to_parent=route_back_to_parent,
                                              **options),
            **kwargs,
        )
        self.connection = CcConnection(self, reconnect_interval_ms / 1000)
        self.ports = [self.connection]
        self.life_fields = {"cc_id": cc_id}

    @property
    def client_address(self) -> WebSocketClientAddress:
        return WebSocketClientAddress(self.runtime_id)

    @property
    def ws(self) -> WebSocketClient | None:
        return self.connection.ws

    async def routing_call(self, method: str, params: list[Any]) -> Any:
        """A call to the cluster controller's routing provider."""
        return await self.request(self.runtime_id, self.routing_provider_id, method, params, ROUTING_CALL_TTL_MS)


class CcConnection(Port):
    """The WebSocket connection to the cluster controller, as the runtime's port: it carries
    what is sent to the cluster controller's WebSocketAddress and reconnects when the
    cluster controller goes away."""

    def __init__(self, runtime: LibjoynrRuntime, reconnect_interval_s: float) -> None:
        self.rt = runtime
        self.reconnect_interval_s = reconnect_interval_s
        self.ws: WebSocketClient | None = None
        self.carriers: dict[type, Carrier] = {WebSocketAddress: self._send_soon}  # everything outside

    @property
    def connected(self) -> bool:
        return self.ws is not None and self.ws.connected

    async def start(self) -> None:
        rt = self.rt
        for provisioned in (rt.routing_provider_id, rt.discovery_provider_id):
            offer_route(rt, provisioned, RoutingEntry(rt.cc_address, False, FOREVER_MS, True), "provisioned")
        # The runtime's own participant, the sender of its calls to the routing provider.
        internal = ProxySkeleton(rt.runtime_id, RoutingProvider.interface_name, rt.routing_provider_id)
        offer_route(rt, rt.runtime_id, RoutingEntry(InProcessAddress(internal), False, FOREVER_MS, True),
                    "provisioned")
        a = rt.cc_address
        self.ws = (rt.network or REAL).websocket_client(
            f"{a.protocol.lower()}://{a.host}:{a.port}{a.path}", rt.runtime_id,
            on_frame=lambda frame: rt.receive_frame(frame, "ws"), on_closed=self._on_cc_gone, token=rt.token,
        )
        for attempt in range(1, START_HANDSHAKE_TRIES + 1):
            try:
                await self.ws.start()
                return
            except TimeoutError:  # the opening handshake's answer did not come in time
                if attempt == START_HANDSHAKE_TRIES:
                    raise
                await asyncio.sleep(self.reconnect_interval_s)

    async def stop(self) -> None:
        if self.ws is not None:
            await self.ws.stop()

    async def abort(self) -> None:
        if self.ws is not None:
            self.ws.abort()

    def _on_cc_gone(self) -> None:
        if self.rt.running:
            self.rt.spawn(self._reconnect())

    async def _reconnect(self) -> None:
        """The cluster controller went away: reconnect, send what was held, then announce
        every local participant again (a restarted cluster controller has forgotten them)."""
        rt = self.rt
        assert self.ws is not None
        while rt.running:
            try:
                await self.ws.start()
                break
            except OSError:  # refused, or the peer went mid-handshake (see WebSocketClient.start)
                await asyncio.sleep(self.reconnect_interval_s)
                rt.tick()  # what waits for the connection may expire meanwhile
        rt.carry_out(rt.node.connection_restored())
        # Each routing call on its own: one that fails (a cluster controller busy with its
        # own restart does not answer in time) is tried again, and never leaves the others
        # unmade, as an exception ending this task did.
        for pid in [*rt.providers, *rt.proxies]:
            visible = getattr(rt.table.lookup(pid), "is_globally_visible", False)
            await self._again(f"addNextHop {pid}", rt.directory.announce, pid, visible)
        for mid, receiver in rt.subscriptions.multicast_receivers():
            await self._again(f"addMulticastReceiver {mid} {receiver}", rt.directory.multicast_receiver,
                              mid, receiver, True)
        # A restarted cluster controller knows no route to a subscriber, a provider's no
        # subscriber: the requests sent again teach both.
        rt.subscriptions.renew("reconnected")

    async def _again(self, what: str, call: Callable[..., Awaitable[Any]], *args: Any) -> None:
        """A routing call made after a reconnect, up to ``REANNOUNCE_TRIES`` times while the
        runtime runs; a last failure goes to the runtime's log (the participant stays
        unknown to the cluster controller until the next reconnect)."""
        for attempt in range(1, REANNOUNCE_TRIES + 1):
            try:
                await call(*args)
                return
            except JoynrRuntimeException as exc:
                if attempt == REANNOUNCE_TRIES or not self.rt.running:
                    self.rt.log_failure(f"after reconnecting, {what} failed {attempt} times", exc)
                    return

    def _send_soon(self, msg: JoynrMessage, address: WebSocketAddress) -> None:
        self.rt.soon(self._send, msg, address)

    def _send(self, msg: JoynrMessage, address: WebSocketAddress) -> None:
        rt = self.rt

        def failed() -> None:
            rt.carry_out(rt.node.send_failed(msg, address))
        if self.ws is None:
            failed()
            return
        try:
            frame = rt.codec.encode(msg)
        except WireEncodeError as exc:  # a message joynr's JSON cannot carry: as unsendable
            rt.log_failure(f"message {msg.id} not sent", exc)
            failed()
            return
        self.ws.send_soon(frame, failed)


class ParentDirectory:
    """A libjoynr runtime's directory: its cluster controller's routing provider (routes and
    multicast receivers) and discovery provider."""

    def __init__(self, runtime: LibjoynrRuntime) -> None:
        self.rt = runtime

    async def resolve(self, participant_id: str) -> None:
        try:
            known = await self.rt.routing_call("resolveNextHop", [participant_id])
        except JoynrRuntimeException:
            known = False
        if known:
            offer_route(self.rt, participant_id, RoutingEntry(self.rt.cc_address, False, FOREVER_MS),
                        "routing-provider")

    async def announce(self, participant_id: str, is_globally_visible: bool) -> None:
        await self.rt.routing_call("addNextHop", [participant_id, to_json(self.rt.client_address),
                                                  is_globally_visible])

    async def withdraw(self, participant_id: str) -> None:
        if not self.rt.connection.connected:
            return  # a cluster controller that is gone has forgotten the participant anyway
        await self.rt.routing_call("removeNextHop", [participant_id])

    async def multicast_receiver(self, mid: MulticastId, receiver: str, added: bool) -> None:
        """The cluster controller subscribes the multicast's topic when the provider is
        behind another cluster controller."""
        if not added and not self.rt.connection.connected:
            return
        method = "addMulticastReceiver" if added else "removeMulticastReceiver"
        await self.rt.routing_call(method, [str(mid), receiver, mid.provider])

    def route_to_discovered(self, entry: DiscoveryEntryWithMetaInfo) -> None:
        # Seed 000: a discovered provider is reached through the cluster controller's
        # WebSocketAddress; an InProcess entry of a provider in this runtime stays.
        offer_route(self.rt, entry.participant_id,
                    RoutingEntry(self.rt.cc_address, not entry.is_local, entry.expiry_date_ms),
                    "discovery" if entry.is_local else "gcd")

    async def _discovery_call(self, method: str, params: list[Any]) -> Any:
        try:
            return await self.rt.request(self.rt.runtime_id, self.rt.discovery_provider_id, method, params,
                                         DISCOVERY_CALL_TTL_MS)
        except ApplicationException as exc:
            raise to_discovery_error(exc) from None

    async def discovery_add(self, entry: DiscoveryEntry, gbids: Sequence[str] | None) -> None:
        await self._discovery_call("add", [entry.to_wire(), list(gbids) if gbids else None])

    async def discovery_remove(self, participant_id: str) -> None:
        if not self.rt.connection.connected:
            return
        await self._discovery_call("remove", [participant_id])

    async def discovery_lookup(self, domains: Sequence[str], interface_name: str, scope: Any,
                               gbids: Sequence[str] | None, cache_max_age_ms: int,
                               ) -> list[DiscoveryEntryWithMetaInfo]:
        found = await self._discovery_call(
            "lookup", [list(domains), interface_name, _scope_name(scope), list(gbids) if gbids else None,
                       cache_max_age_ms],
        )
        return [DiscoveryEntryWithMetaInfo.from_wire(e) for e in found]

    async def discovery_lookup_participant(self, participant_id: str, scope: Any, gbids: Sequence[str] | None,
                                           cache_max_age_ms: int) -> DiscoveryEntryWithMetaInfo:
        found = await self._discovery_call(
            "lookupParticipant", [participant_id, _scope_name(scope), list(gbids) if gbids else None,
                                  cache_max_age_ms],
        )
        return DiscoveryEntryWithMetaInfo.from_wire(found)


def _scope_name(scope: Any) -> str:
    return getattr(scope, "value", scope)
