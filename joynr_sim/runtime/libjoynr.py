"""The libjoynr runtime: one WebSocket connection to its cluster controller, held as a
provisioned sticky WebSocketAddress entry, and a routing table of kind libjoynr.

Providers and proxies are InProcess here; the runtime announces them to the cluster
controller's routing provider, which gives them a WebSocketClient entry there. A message
for a participant this runtime does not know waits while it asks the cluster controller
(resolveNextHop); if the cluster controller knows it, the route is the cluster controller.
The routing rules are ``joynr_sim.core.router.LibJoynrMessageRouter``'s.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from ..core.address import (
    Address,
    InProcessAddress,
    WebSocketAddress,
    WebSocketClientAddress,
    to_json,
)
from ..core.discovery import DiscoveryEntry, DiscoveryEntryWithMetaInfo
from ..core.libjoynr_router import LibJoynrMessageRouter
from ..core.limits import check_int
from ..core.message import JoynrMessage, encode
from ..core.multicast import MulticastId
from ..core.routing import RoutingEntry, RoutingTable
from ..transport.websocket import WebSocketClient
from .base import FOREVER_MS, Runtime
from .cluster_controller import RoutingProvider, routing_provider_participant_id
from .discovery import discovery_provider_participant_id, to_discovery_error
from .participants import ApplicationException, JoynrRuntimeException, ProxySkeleton

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


class LibjoynrRuntime(Runtime):
    kind = "libjoynr"
    transports = {WebSocketAddress: "_send_ws_soon"}  # everything outside goes through the CC

    def __init__(
        self, runtime_id: str, cc_id: str, cc_address: WebSocketAddress, *, token: str | None = None,
        route_back_to_parent: bool = False, reconnect_interval_ms: int = DEFAULT_RECONNECT_INTERVAL_MS,
        **kwargs: Any,
    ) -> None:
        self.reconnect_interval_ms = check_int(reconnect_interval_ms, "reconnect_interval_ms", 1,
                                               MAX_RECONNECT_INTERVAL_MS)
        self.cc_id = cc_id
        self.route_back_to_parent = route_back_to_parent  # joynr < 1.17.3: see LibJoynrMessageRouter
        self.token = token  # proves this runtime's id to its cluster controller
        self.cc_address = cc_address
        self.routing_provider_id = routing_provider_participant_id(cc_id)
        self.discovery_provider_id = discovery_provider_participant_id(cc_id)
        self.ws: WebSocketClient | None = None
        super().__init__(runtime_id, **kwargs)

    @property
    def client_address(self) -> WebSocketClientAddress:
        return WebSocketClientAddress(self.runtime_id)

    def _make_router(self) -> LibJoynrMessageRouter:
        table = RoutingTable("libjoynr", policy=self.policy, clock=self.clock.now_ms)
        return LibJoynrMessageRouter(
            table, self.clock.now_ms, parent=self.cc_address, route_back_to_parent=self.route_back_to_parent,
            **self.router_options,
        )

    def _life_fields(self) -> dict[str, Any]:
        return {"cc_id": self.cc_id}

    # -- transports ------------------------------------------------------------------
    async def _start_transports(self) -> None:
        for provisioned in (self.routing_provider_id, self.discovery_provider_id):
            self.add_next_hop(provisioned, RoutingEntry(self.cc_address, False, FOREVER_MS, True), "provisioned")
        # The runtime's own participant, the sender of its calls to the routing provider.
        internal = ProxySkeleton(self.runtime_id, RoutingProvider.interface_name, self.routing_provider_id)
        self.add_next_hop(
            self.runtime_id, RoutingEntry(InProcessAddress(internal), False, FOREVER_MS, True), "provisioned"
        )
        a = self.cc_address
        self.ws = WebSocketClient(
            f"{a.protocol.lower()}://{a.host}:{a.port}{a.path}",
            self.runtime_id,
            on_frame=lambda frame: self.receive_frame(frame, "ws"),
            on_closed=self._on_cc_gone,
            token=self.token,
        )
        for attempt in range(1, START_HANDSHAKE_TRIES + 1):
            try:
                await self.ws.start()
                return
            except TimeoutError:  # the opening handshake's answer did not come in time
                if attempt == START_HANDSHAKE_TRIES:
                    raise
                await asyncio.sleep(self.reconnect_interval_ms / 1000)

    def _on_cc_gone(self) -> None:
        if self.running:
            self._spawn(self._reconnect())

    async def _reconnect(self) -> None:
        """The cluster controller went away: reconnect, send what was held, then announce
        every local participant again (a restarted cluster controller has forgotten them)."""
        assert self.ws is not None
        while self.running:
            try:
                await self.ws.start()
                break
            except OSError:  # refused, or the peer went mid-handshake (see WebSocketClient.start)
                await asyncio.sleep(self.reconnect_interval_ms / 1000)
                self.purge()  # what waits for the connection may expire meanwhile
        self.carry_out(self.router.connection_restored())
        # Each routing call on its own: one that fails (a cluster controller busy with its
        # own restart does not answer in time) is tried again, and never leaves the others
        # unmade, as an exception ending this task did.
        for pid in [*self.providers, *self.proxies]:
            visible = getattr(self.table.lookup(pid), "is_globally_visible", False)
            await self._again(f"addNextHop {pid}", self._announce_participant, pid, visible)
        for mid, receiver in self.subscriptions.multicast_receivers():
            await self._again(f"addMulticastReceiver {mid} {receiver}", self._multicast_call,
                              "addMulticastReceiver", mid, receiver)
        # A restarted cluster controller knows no route to a subscriber, a provider's no
        # subscriber: the requests sent again teach both.
        self.subscriptions.renew("reconnected")

    async def _again(self, what: str, call: Callable[..., Awaitable[Any]], *args: Any) -> None:
        """A routing call made after a reconnect, up to ``REANNOUNCE_TRIES`` times while this
        runtime runs; a last failure goes to the runtime's log (the participant stays
        unknown to the cluster controller until the next reconnect)."""
        for attempt in range(1, REANNOUNCE_TRIES + 1):
            try:
                await call(*args)
                return
            except JoynrRuntimeException as exc:
                if attempt == REANNOUNCE_TRIES or not self.running:
                    self.log_failure(f"after reconnecting, {what} failed {attempt} times", exc)
                    return

    async def _stop_transports(self) -> None:
        if self.ws is not None:
            await self.ws.stop()

    async def _abort_transports(self) -> None:
        if self.ws is not None:
            self.ws.abort()

    # -- carrying out ----------------------------------------------------------------
    async def _resolve(self, participant_id: str) -> None:
        try:
            known = await self._routing_call("resolveNextHop", [participant_id])
        except JoynrRuntimeException:
            known = False
        if known:
            self.add_next_hop(participant_id, RoutingEntry(self.cc_address, False, FOREVER_MS), "routing-provider")

    def _send_ws_soon(self, msg: JoynrMessage, address: WebSocketAddress) -> None:
        self._soon(self._send_ws, msg, address)

    def _send_ws(self, msg: JoynrMessage, address: Address) -> None:
        def failed() -> None:
            self.carry_out(self.router.send_failed(msg, address))
        if self.ws is None:
            failed()
        else:
            self.ws.send_soon(encode(msg), failed)

    # -- the cluster controller's routing provider ---------------------------------------
    async def _routing_call(self, method: str, params: list[Any]) -> Any:
        return await self.request(
            self.runtime_id, self.routing_provider_id, method, params, ROUTING_CALL_TTL_MS
        )

    async def _announce_participant(self, participant_id: str, is_globally_visible: bool) -> None:
        await self._routing_call(
            "addNextHop", [participant_id, to_json(self.client_address), is_globally_visible]
        )

    async def add_multicast_receiver(self, mid: MulticastId, receiver: str) -> None:
        """Here, and in the cluster controller, which subscribes the multicast's topic when
        the provider is behind another cluster controller."""
        await super().add_multicast_receiver(mid, receiver)
        try:
            await self._multicast_call("addMulticastReceiver", mid, receiver)
        except BaseException:
            self.carry_out(self.router.multicast.remove_receiver(mid, receiver))
            raise

    async def remove_multicast_receiver(self, mid: MulticastId, receiver: str) -> None:
        await super().remove_multicast_receiver(mid, receiver)
        if self.ws is not None and self.ws.connected:
            await self._multicast_call("removeMulticastReceiver", mid, receiver)

    async def _multicast_call(self, method: str, mid: MulticastId, receiver: str) -> None:
        await self._routing_call(method, [str(mid), receiver, mid.provider])

    async def _withdraw_participant(self, participant_id: str) -> None:
        if self.ws is None or not self.ws.connected:
            return  # a cluster controller that is gone has forgotten the participant anyway
        await self._routing_call("removeNextHop", [participant_id])

    # -- the cluster controller's discovery provider -------------------------------------
    async def _discovery_call(self, method: str, params: list[Any]) -> Any:
        try:
            return await self.request(
                self.runtime_id, self.discovery_provider_id, method, params, DISCOVERY_CALL_TTL_MS
            )
        except ApplicationException as exc:
            raise to_discovery_error(exc) from None

    async def _discovery_add(self, entry: DiscoveryEntry, gbids: Sequence[str] | None) -> None:
        await self._discovery_call("add", [entry.to_wire(), list(gbids) if gbids else None])

    async def _discovery_remove(self, participant_id: str) -> None:
        if self.ws is None or not self.ws.connected:
            return
        await self._discovery_call("remove", [participant_id])

    async def _discovery_lookup(self, domains, interface_name, scope, gbids, cache_max_age_ms):
        found = await self._discovery_call(
            "lookup", [list(domains), interface_name, _scope_name(scope), list(gbids) if gbids else None,
                       cache_max_age_ms],
        )
        return [DiscoveryEntryWithMetaInfo.from_wire(e) for e in found]

    async def _discovery_lookup_participant(self, participant_id, scope, gbids, cache_max_age_ms):
        found = await self._discovery_call(
            "lookupParticipant", [participant_id, _scope_name(scope), list(gbids) if gbids else None,
                                  cache_max_age_ms],
        )
        return DiscoveryEntryWithMetaInfo.from_wire(found)

    def _route_to_discovered(self, entry: DiscoveryEntryWithMetaInfo) -> None:
        # Seed 000: a discovered provider is reached through the cluster controller's
        # WebSocketAddress; an InProcess entry of a provider in this runtime stays.
        origin = "discovery" if entry.is_local else "gcd"
        self.add_next_hop(
            entry.participant_id,
            RoutingEntry(self.cc_address, not entry.is_local, entry.expiry_date_ms),
            origin,
        )


def _scope_name(scope: Any) -> str:
    return getattr(scope, "value", scope)
