"""A libjoynr runtime's router: the rules ``MessageRouter`` leaves to each kind, for a
runtime whose only way out is its cluster controller's WebSocket."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .actions import Action, Drop, Send, via_of
from .address import Address, InProcessAddress, WebSocketAddress
from .message import MULTICAST, JoynrMessage
from .multicast import MulticastRouting
from .router import REQUEST_TYPES, MessageRouter, learned_expiry
from .routing import RoutingEntry, RoutingTable


class LibJoynrMessageRouter(MessageRouter):
    """A libjoynr runtime's router: everything outside the runtime is reached through the
    cluster controller's WebSocketAddress; while that connection is away, messages are
    held and sent again when it is back (as joynr's WebSocket client does).

    A message that came from the cluster controller is for a participant of this runtime:
    it is never sent back. One for a participant not (yet) here — a provider about to
    register again after a restart, a proxy of the previous run — waits until its InProcess
    entry appears or it expires. joynr before 1.17.3 / 1.18.1 sent it back, and the cluster
    controller, whose WebSocketClient entry points here, sent it here again: a loop that
    ends only at the hop limit. ``route_back_to_parent=True`` replays that behaviour."""

    def __init__(
        self, table: RoutingTable, clock: Callable[[], int], *, parent: WebSocketAddress,
        route_back_to_parent: bool = False, **kwargs: Any,
    ) -> None:
        super().__init__(table, clock, **kwargs)
        self.multicast = MulticastRouting(table, clock, kind="libjoynr", parent=parent, limits=self.limits,
                                         read_payload=self.read_payload)
        self.parent = parent
        self.route_back_to_parent = route_back_to_parent
        self._held: list[JoynrMessage] = []

    def route(
        self, msg: JoynrMessage, gbid: str | None = None, via: str = "inprocess", source: str | None = None
    ) -> list[Action]:
        from_parent = via == "ws" and msg.type != MULTICAST  # a multicast has rules of its own
        if from_parent and not self.route_back_to_parent and msg.expiry_date_ms >= self.clock():
            entry = self.table.lookup(msg.recipient)
            if entry is None or not isinstance(entry.address, InProcessAddress):
                return self._enqueue(msg, via, ask=False)
        return super().route(msg, gbid, via, source)

    def send_failed(
        self, msg: JoynrMessage, address: Address, reason: str = "no-connection", detail: str | None = None
    ) -> list[Action]:
        if isinstance(address, WebSocketAddress) and reason == "no-connection":
            self._held.append(msg)
            return []
        return super().send_failed(msg, address, reason, detail)

    def connection_restored(self) -> list[Action]:
        """The cluster controller is reachable again: send what was held, in order."""
        held, self._held = self._held, []
        now = self.clock()
        actions: list[Action] = []
        for msg in held:
            if msg.expiry_date_ms < now:
                actions.append(Drop(msg, "expired", now=now))
            else:
                actions.append(Send(msg, self.parent, resent=True))
        return actions

    @property
    def held(self) -> int:
        return len(self._held)

    def _expire_held(self, now_ms: int) -> list[Action]:
        expired = [m for m in self._held if m.expiry_date_ms < now_ms]
        self._held = [m for m in self._held if m.expiry_date_ms >= now_ms]
        return [Drop(m, "expired", now=now_ms) for m in expired]

    def _learn(self, msg: JoynrMessage, via: str, gbid: str | None, source: str | None) -> list[Action]:
        if msg.type in REQUEST_TYPES and msg.sender not in self.table:
            # Everything outside this runtime is reached through the cluster controller.
            return self._learn_route(msg.sender, RoutingEntry(self.parent, False, learned_expiry(msg)))
        return []

    def _next_hop(self, msg: JoynrMessage, address: Address) -> list[Action]:
        if isinstance(address, WebSocketAddress):
            return [Send(msg, address)]
        # No global connection and no clients in a libjoynr runtime.
        return [Drop(msg, "no-connection", via=via_of(address))]
