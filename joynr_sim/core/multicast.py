"""Multicast ids, the multicast receiver directory and the rules of routing a multicast.

A non-selective broadcast is sent as one joynr message to a multicast id
``<provider participant id>/<broadcast name>[/<partition>...]``, not to each subscriber
(joynr's "stateless broadcasts"). Partitions are alphanumeric; a subscriber may use ``+``
for one partition and end with ``*`` for any number of them; a provider never fires a
wildcard. The multicast id is also the MQTT topic it travels on (``*`` becomes ``#``).

Who receives a multicast:
- every receiver registered in the runtime's directory for a matching multicast id;
- a libjoynr runtime also sends what its own providers fire to its cluster controller, and
  never sends back what came from it;
- a cluster controller publishes what a local provider fired to the backends it is
  connected to, only when the provider's routing entry is globally visible, and never
  re-publishes what it received from a backend: a multicast carries no "received from
  global" bit on the wire, so without that rule two cluster controllers subscribed to one
  topic would echo a publication between them until the hop limit ends it. joynr added
  the rule (a transient flag set by the MQTT skeleton) for exactly that echo;
  ``republish_received=True`` replays the missing rule.

Registering a receiver for a provider whose routing entry is an MQTT address (a provider
behind another cluster controller) subscribes the cluster controller to the multicast's
topic on that provider's GBID, once per topic however many receivers want it; removing the
last receiver unsubscribes.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from .actions import Action, Deliver, Drop, PayloadReader, Send, Subscribe, Unsubscribe, Withhold, deliver, unreadable
from .address import InProcessAddress, MqttAddress, WebSocketAddress, WebSocketClientAddress
from .limits import DEFAULT_LIMITS, InvalidField, WireLimits, check_id, preview
from .memory import BoundedMemory
from .message import JoynrMessage
from .routing import RoutingTable

SINGLE_LEVEL = "+"
MULTI_LEVEL = "*"
_PARTITION = re.compile(r"[A-Za-z0-9]+")
_BROADCAST = re.compile(r"[A-Za-z][A-Za-z0-9_]*")
MAX_PARTITIONS = 16


class MulticastError(ValueError):
    """A multicast id, or a receiver registration, that may not be used."""


@dataclass(frozen=True)
class MulticastId:
    provider: str  # the provider's participant id
    broadcast: str
    partitions: tuple[str, ...] = ()

    def __str__(self) -> str:
        return "/".join((self.provider, self.broadcast, *self.partitions))

    @property
    def has_wildcard(self) -> bool:
        return any(p in (SINGLE_LEVEL, MULTI_LEVEL) for p in self.partitions)

    def topic(self) -> str:
        """The MQTT topic (or, with wildcards, the topic filter) of this multicast."""
        return "/".join((self.provider, self.broadcast, *("#" if p == MULTI_LEVEL else p for p in self.partitions)))

    def matches(self, fired: MulticastId) -> bool:
        """Whether a subscriber's id (perhaps with wildcards) covers a fired one."""
        if (self.provider, self.broadcast) != (fired.provider, fired.broadcast):
            return False
        mine, theirs = self.partitions, fired.partitions
        for n, part in enumerate(mine):
            if part == MULTI_LEVEL:
                return True  # any number of partitions below, none included: MQTT's '#'
            if n >= len(theirs) or (part != SINGLE_LEVEL and part != theirs[n]):
                return False
        return len(mine) == len(theirs)


def multicast_id(provider: str, broadcast: str, partitions: list[str] | tuple[str, ...] = (), *,
                 wildcards: bool = False, limits: WireLimits = DEFAULT_LIMITS) -> MulticastId:
    """A checked multicast id: ``wildcards`` for a subscriber's, never for a fired one."""
    try:
        check_id(provider, "provider", limits)
    except InvalidField as exc:
        raise MulticastError(str(exc)) from None
    if "/" in provider or "+" in provider or "#" in provider or "*" in provider:
        raise MulticastError(f"provider participant id {preview(provider)} cannot name a multicast topic")
    if not isinstance(broadcast, str) or not _BROADCAST.fullmatch(broadcast):
        raise MulticastError(f"broadcast name {preview(broadcast)}: a letter, then letters, digits or _")
    if not isinstance(partitions, (list, tuple)) or len(partitions) > MAX_PARTITIONS:
        raise MulticastError(f"partitions: a list of at most {MAX_PARTITIONS}, got {preview(partitions)}")
    for n, part in enumerate(partitions):
        if wildcards and part == SINGLE_LEVEL:
            continue
        if wildcards and part == MULTI_LEVEL:
            if n != len(partitions) - 1:
                raise MulticastError(f"partition {n}: '*' may only end the partitions")
            continue
        if not isinstance(part, str) or not _PARTITION.fullmatch(part):
            what = "alphanumeric or a wildcard" if wildcards else "alphanumeric (a provider fires no wildcard)"
            raise MulticastError(f"partition {n} {preview(part)}: {what}")
    return MulticastId(provider, broadcast, tuple(partitions))


def parse(text: str, *, wildcards: bool = False, limits: WireLimits = DEFAULT_LIMITS) -> MulticastId:
    """A multicast id from its string form (the ``to`` of a multicast message)."""
    if not isinstance(text, str) or len(text.encode()) > limits.max_topic_bytes:
        raise MulticastError(f"multicast id {preview(text)}: not a string of at most {limits.max_topic_bytes} bytes")
    parts = text.split("/")
    if len(parts) < 2:
        raise MulticastError(f"multicast id {preview(text)}: expected <provider>/<broadcast>[/<partition>...]")
    return multicast_id(parts[0], parts[1], parts[2:], wildcards=wildcards, limits=limits)


class MulticastReceiverDirectory:
    """joynr's ``MulticastReceiverDirectory``: which participants receive which multicast
    ids (subscribers' ids, wildcards allowed)."""

    def __init__(self) -> None:
        self._receivers: dict[MulticastId, set[str]] = {}

    def register(self, mid: MulticastId, receiver: str) -> bool:
        """False when the receiver was registered already."""
        receivers = self._receivers.setdefault(mid, set())
        if receiver in receivers:
            return False
        receivers.add(receiver)
        return True

    def unregister(self, mid: MulticastId, receiver: str) -> bool:
        """False when the receiver was not registered."""
        receivers = self._receivers.get(mid)
        if not receivers or receiver not in receivers:
            return False
        receivers.discard(receiver)
        if not receivers:
            del self._receivers[mid]
        return True

    def receivers(self, fired: MulticastId) -> set[str]:
        return {r for mid, rs in self._receivers.items() if mid.matches(fired) for r in rs}

    def registered(self, mid: MulticastId) -> set[str]:
        return set(self._receivers.get(mid, ()))

    def ids(self) -> list[MulticastId]:
        return list(self._receivers)

    def clear(self) -> None:
        self._receivers.clear()


class MulticastRouting:
    """The multicast half of a message router: a directory, the topics subscribed on each
    backend, and the decisions of where a multicast goes."""

    def __init__(self, table: RoutingTable, clock: Callable[[], int], *, kind: str,
                 parent: WebSocketAddress | None = None, gbids: tuple[str, ...] = (),
                 republish_received: bool = False, limits: WireLimits = DEFAULT_LIMITS,
                 memory: int = 100_000, read_payload: PayloadReader = unreadable) -> None:
        if kind not in ("cc", "libjoynr"):
            raise ValueError(f"kind: expected cc or libjoynr, got {kind!r}")
        self.table = table
        self.clock = clock
        self.kind = kind
        self.parent = parent
        self.gbids = tuple(gbids)
        self.republish_received = republish_received
        self.limits = limits
        self.read_payload = read_payload  # the router's: a payload its wire left unread
        self.directory = MulticastReceiverDirectory()
        self._topics: dict[tuple[str, str], set[tuple[MulticastId, str]]] = {}  # (gbid, filter) -> registrations
        self._delivered = BoundedMemory(memory)  # (message id, receiver)

    # -- receivers -------------------------------------------------------------------
    def add_receiver(self, mid: MulticastId, receiver: str) -> list[Action]:
        """``addMulticastReceiver(multicastId, subscriberParticipantId, providerParticipantId)``."""
        provider = self.table.lookup(mid.provider)
        if provider is None:
            raise MulticastError(f"no routing entry for provider {mid.provider!r} of multicast {mid}")
        self.directory.register(mid, receiver)
        if self.kind != "cc" or not isinstance(provider.address, MqttAddress):
            return []  # a local provider's multicasts reach this router without a subscription
        key = (provider.address.broker_uri, mid.topic())
        holders = self._topics.setdefault(key, set())
        first = not holders
        holders.add((mid, receiver))
        return [Subscribe(*key)] if first else []

    def remove_receiver(self, mid: MulticastId, receiver: str) -> list[Action]:
        """``removeMulticastReceiver``: the last receiver of a topic unsubscribes it."""
        if not self.directory.unregister(mid, receiver):
            return []
        actions: list[Action] = []
        for key, holders in list(self._topics.items()):
            if (mid, receiver) in holders:
                holders.discard((mid, receiver))
                if not holders:
                    del self._topics[key]
                    actions.append(Unsubscribe(*key))
        return actions

    def subscribed_topics(self) -> list[tuple[str, str]]:
        return sorted(self._topics)

    def reset(self) -> None:
        """A crash or restart: the directory and the subscriptions were in memory."""
        self.directory.clear()
        self._topics.clear()
        self._delivered.clear()

    # -- routing ---------------------------------------------------------------------
    def route(self, msg: JoynrMessage, via: str, source: str | None = None) -> list[Action]:
        """Where a multicast goes: ``via`` is the transport it came over (``inprocess`` for
        one a local provider fired), ``source`` the WebSocket client it came from."""
        try:
            fired = parse(msg.recipient, limits=self.limits)
        except MulticastError as exc:
            return [Drop(msg, "invalid-message", via=via, detail=str(exc), field="to")]
        now = self.clock()
        if msg.expiry_date_ms < now:
            return [Drop(msg, "expired", now=now)]
        actions: list[Action] = []
        for receiver in sorted(self.directory.receivers(fired)):
            entry = self.table.lookup(receiver)
            if entry is None:
                actions.append(Drop(msg, "no-route", detail=f"multicast receiver {receiver} has no routing entry"))
                continue
            address = entry.address
            if isinstance(address, InProcessAddress):
                actions.append(Send(msg, address))
                if self._delivered.add((msg.id, receiver)):
                    actions.append(deliver(msg, address.skeleton, self.read_payload, self.limits))
                else:
                    actions.append(Drop(msg, "duplicate"))
            elif isinstance(address, WebSocketClientAddress) and self.kind == "cc":
                if address.id != source:  # its own runtime delivered it there already
                    actions.append(Send(msg, address))
            # A receiver behind another cluster controller gets it from the backend.
        actions.extend(self._onward(msg, fired, via))
        if not any(isinstance(a, (Send, Deliver)) for a in actions):
            actions.append(Drop(msg, "no-receivers", detail=f"no receiver of multicast {fired}"))
        return actions

    def _onward(self, msg: JoynrMessage, fired: MulticastId, via: str) -> list[Action]:
        if self.kind == "libjoynr":
            # What its own providers fire goes to the cluster controller; what came from it
            # goes back never.
            return [Send(msg, self.parent)] if via != "ws" and self.parent is not None else []
        if via == "mqtt" and not self.republish_received:
            return [Withhold(msg, "received-from-backend")]
        provider = self.table.lookup(fired.provider)
        if provider is None:
            return [Withhold(msg, "provider-unknown")]
        if not provider.is_globally_visible:
            return [Withhold(msg, "provider-not-visible")]
        return [Send(msg, MqttAddress(gbid, fired.topic())) for gbid in self.gbids]
