"""One node per runtime kind: everything a runtime knows and decides about routing, without
I/O.

A node owns what a runtime decides with and a crash loses: the message router
(``router``: its routing table, the messages waiting for a route, the multicast receivers
and the senders' shares), the subscription and publication managers, and in a cluster
controller with discovery the local capabilities directory (``lcd``). Every change goes
through the node and every call answers with the actions to carry out
(``joynr_sim.core.actions``), so a runtime only does what its node decided, and the same
node runs on real sockets or on a simulated network alike:

- ``receive_frame`` decodes a frame from the network and routes it, in one call;
- ``add_next_hop`` adds a route and answers with the sends of what waited for it, as
  joynr's ``CcMessageRouter.addNextHop`` does; ``remove_next_hop`` takes one away;
- ``tick`` expires what waited too long and purges expired routes;
- ``connection_lost`` / ``connection_restored`` tell it a connection went or came back.

The kinds differ in how they are built (the table's kind, the router's rules) and in what
a lost or restored connection means: a cluster controller may forget the routes of a
libjoynr runtime whose WebSocket went; a libjoynr runtime sends what it held for its
cluster controller when that comes back.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from .actions import Action, Drop
from .address import Address, MqttAddress, WebSocketAddress
from .gcd import GCD_PARTICIPANT_ID, GCD_TOPIC
from .lcd import LocalCapabilitiesDirectory
from .libjoynr_router import LibJoynrMessageRouter
from .message import JoynrMessage
from .router import (  # noqa: F401  (the node's bounds, re-exported: a runtime sees no router)
    DEFAULT_MAX_HOPS,
    DEFAULT_MAX_QUEUED,
    DEFAULT_MAX_QUEUED_BYTES,
    CcMessageRouter,
    MessageRouter,
)
from .routing import PutResult, RoutingEntry, RoutingTable
from .subscriptions import PublicationManager, SubscriptionManager


class Node:
    """What every kind shares: the router's entry points, each answering with actions."""

    kind: str

    def __init__(self, router: MessageRouter) -> None:
        self.router = router
        # The consumer side's subscriptions and, per provider, its publications.
        self.subscription_manager = SubscriptionManager()
        self.publication_managers: dict[str, PublicationManager] = {}

    @property
    def table(self) -> RoutingTable:
        return self.router.table

    # -- from the network ------------------------------------------------------------
    def decode(self, data: Any, via: str, gbid: str | None = None) -> JoynrMessage | Drop:
        """The message in a frame, or the Drop that says why it is none."""
        return self.router.decode_frame(data, via, gbid)

    def receive_frame(self, data: Any, via: str, gbid: str | None = None,
                      source: str | None = None) -> list[Action]:
        """A frame arrived (``source``: the WebSocket client it came from): decode and route."""
        decoded = self.router.decode_frame(data, via, gbid)
        if isinstance(decoded, Drop):
            return [decoded]
        return self.router.receive(decoded, via, gbid, source)

    def connection_lost(self, peer: str) -> list[Action]:
        """The connection of ``peer`` went (a libjoynr runtime's, at a cluster controller)."""
        return []

    def connection_restored(self) -> list[Action]:
        """The connection to the parent router is back."""
        return []

    # -- from the runtime's own participants -------------------------------------------
    def route(self, msg: JoynrMessage, gbid: str | None = None) -> list[Action]:
        return self.router.route(msg, gbid)

    # -- routes ------------------------------------------------------------------------
    def add_next_hop(self, participant_id: str, entry: RoutingEntry, origin: str) -> tuple[PutResult, list[Action]]:
        return self.router.add_next_hop(participant_id, entry, origin)

    def remove_next_hop(self, participant_id: str) -> str:
        return self.router.remove_next_hop(participant_id)

    def resolved(self, participant_id: str) -> None:
        """A lookup of ``participant_id`` ended (found or not): another may be asked."""
        self.router.resolved(participant_id)

    # -- time and failures -----------------------------------------------------------
    def tick(self, now_ms: int) -> list[Action]:
        return self.router.advance(now_ms)

    def send_failed(self, msg: JoynrMessage, address: Address, reason: str = "no-connection",
                    detail: str | None = None) -> list[Action]:
        return self.router.send_failed(msg, address, reason, detail)

    def closing(self) -> list[Action]:
        """A graceful stop: what was counted and not traced is said now."""
        return self.router.shares.flush()

    def queued(self, participant_id: str | None = None) -> int:
        return self.router.queued(participant_id)


class ClusterControllerNode(Node):
    """A cluster controller: a table of kind cluster controller over its own MQTT addresses,
    reply-to routes learned from what arrives, the GCD reached on every backend."""

    kind = "cluster-controller"

    def __init__(
        self, topic: str, gbids: Sequence[str], clock: Callable[[], int], *, policy: Any = "precedence",
        resolves: bool = True, gcd_participant_id: str | None = GCD_PARTICIPANT_ID,
        on_client_disconnect: str = "keep", republish_received_multicasts: bool = False, **options: Any,
    ) -> None:
        """``resolves``: the cluster controller runs discovery: it asks for a route it lacks,
        and its local capabilities directory (``lcd``) is part of the node."""
        gbids = tuple(gbids)
        table = RoutingTable(
            "cluster-controller", policy=policy, own_addresses=[MqttAddress(g, topic) for g in gbids],
            known_gbids=gbids, gcd_participant_id=gcd_participant_id, clock=clock,
        )
        self.router: CcMessageRouter
        super().__init__(CcMessageRouter(
            table, clock, own_topic=topic, gbids=gbids, resolves=resolves,
            on_client_disconnect=on_client_disconnect, republish_received_multicasts=republish_received_multicasts,
            **options,
        ))
        self.lcd = LocalCapabilitiesDirectory(topic, gbids, clock) if resolves else None

    def connection_lost(self, peer: str) -> list[Action]:
        return self.router.client_gone(peer)


class GcdNode(ClusterControllerNode):
    """A GCD instance: a cluster controller's router on one backend under the GCD's topic,
    which learns the way back to whoever asked and looks nothing up itself."""

    kind = "gcd"

    def __init__(self, gbid: str, clock: Callable[[], int], *, policy: Any = "precedence", **options: Any) -> None:
        super().__init__(GCD_TOPIC, [gbid], clock, policy=policy, resolves=False, gcd_participant_id=None,
                         **options)


class LibJoynrNode(Node):
    """A libjoynr runtime: a table of kind libjoynr; everything outside is reached through
    the cluster controller (``parent``), and held while that connection is away."""

    kind = "libjoynr"

    def __init__(
        self, parent: WebSocketAddress, clock: Callable[[], int], *, policy: Any = "precedence",
        route_back_to_parent: bool = False, **options: Any,
    ) -> None:
        self.router: LibJoynrMessageRouter
        super().__init__(LibJoynrMessageRouter(
            RoutingTable("libjoynr", policy=policy, clock=clock), clock, parent=parent,
            route_back_to_parent=route_back_to_parent, **options,
        ))

    def connection_restored(self) -> list[Action]:
        return self.router.connection_restored()
