"""The message router as pure rules: joynr's ``AbstractMessageRouter`` with its two kinds,
``CcMessageRouter`` (a cluster controller) and ``LibJoynrMessageRouter`` (a libjoynr runtime,
in ``libjoynr_router``).

It is shaped like h11: a runtime feeds it events — a frame or message arrived on a
transport, a local participant sends, a route appeared, time advanced, a connection went or
came back, a send failed — and gets back a list of actions to carry out, in order (``joynr_sim.core.actions``).

The router owns what joynr's message router owns: the routing table, the queue of messages
for participants without a route, the memory of delivered message ids (duplicates) and, in
a cluster controller, of (message id, hop count) pairs received over MQTT (re-sent copies).
It never touches a socket, a clock of its own or an event loop: ``clock`` is a callable.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .actions import (
    Action,
    Drop,
    LearnRoute,
    PayloadReader,
    Queue,
    Received,
    Reject,
    Resolve,
    Send,
    deliver,
    unreadable,
    via_of,
)
from .address import (
    Address,
    InProcessAddress,
    MqttAddress,
    WebSocketClientAddress,
)
from .fairness import DEFAULT_MAX_LOOKUPS_PER_SENDER, SenderShares
from .limits import DEFAULT_LIMITS, WireLimits
from .memory import BoundedMemory
from .message import (
    BROADCAST_SUBSCRIPTION_REQUEST,
    MULTICAST,
    MULTICAST_SUBSCRIPTION_REQUEST,
    ONE_WAY,
    REQUEST,
    SUBSCRIPTION_REQUEST,
    JoynrMessage,
    MessageDecodeError,
    decode,
)
from .multicast import MulticastRouting
from .routing import PutResult, RoutingEntry, RoutingTable
from .waiting import WaitingMessages

DEFAULT_MAX_HOPS = 32
# Bounds of what a router remembers and holds; past them the oldest goes first.
DEFAULT_MAX_QUEUED = 1_000
DEFAULT_MAX_QUEUED_BYTES = 16 * 1024 * 1024
MEMORY = 100_000  # delivered ids and (id, hops) pairs kept for duplicate detection

# Requests whose replies come back to the sender: their replyTo teaches the receiver a route.
REQUEST_TYPES = frozenset(
    {REQUEST, SUBSCRIPTION_REQUEST, BROADCAST_SUBSCRIPTION_REQUEST, MULTICAST_SUBSCRIPTION_REQUEST}
)
# A subscriber's publications come long after its request expired: the route its request
# taught lives as long as the subscription, which the router does not read, so it does not
# expire (joynr keeps it for the subscription's life; the policy may still replace it).
SUBSCRIBER_ROUTE_EXPIRY_MS = 2**62


def learned_expiry(msg: JoynrMessage) -> int:
    if msg.type in (SUBSCRIPTION_REQUEST, BROADCAST_SUBSCRIPTION_REQUEST):
        return SUBSCRIBER_ROUTE_EXPIRY_MS
    return msg.expiry_date_ms
CALL_TYPES = REQUEST_TYPES | {ONE_WAY}

# What a cluster controller does with a libjoynr runtime's routes when its connection goes.
CLIENT_DISCONNECT = ("keep", "remove")

# Transports a runtime's own participants speak over: in process, and the WebSocket of its
# libjoynr runtimes (each proved its identity with its token).
LOCAL_VIAS = frozenset({"inprocess", "ws"})


class MessageRouter:
    """What both kinds share: hop limit, expiry, queue until a route appears, delivery
    with duplicate detection, and the next-hop choice from the routing table."""

    def __init__(
        self,
        table: RoutingTable,
        clock: Callable[[], int],
        *,
        max_hops: int = DEFAULT_MAX_HOPS,
        max_queued: int = DEFAULT_MAX_QUEUED,
        max_queued_bytes: int = DEFAULT_MAX_QUEUED_BYTES,
        max_queued_per_sender: int | None = None,
        max_lookups_per_sender: int = DEFAULT_MAX_LOOKUPS_PER_SENDER,
        memory: int = MEMORY,
        limits: WireLimits = DEFAULT_LIMITS,
        decode: Callable[[bytes, WireLimits], JoynrMessage] = decode,
        read_payload: PayloadReader = unreadable,
    ) -> None:
        self.table = table
        self.limits = limits
        # The wire's decoder (joynr_sim.wire.codecs): it raises MessageDecodeError for a bad
        # frame. It may leave a payload unread for the reader, which reads it at delivery.
        self._decode = decode
        self.read_payload = read_payload
        self.clock = clock
        self.max_hops = max_hops
        self.waiting = WaitingMessages(max_queued, max_queued_bytes, max_queued_per_sender)
        self.shares = SenderShares(max_lookups=max_lookups_per_sender)
        self._delivered = BoundedMemory(memory)
        # The participants being looked up, each with the sender whose message asked.
        self._resolving: dict[str, str] = {}
        # Participants that serve only the runtime's own: joynr's internal providers.
        self.local_only: set[str] = set()
        self.multicast: MulticastRouting  # each kind builds its own

    # -- events ----------------------------------------------------------------------
    def decode_frame(self, data: Any, via: str, gbid: str | None = None) -> JoynrMessage | Drop:
        """The message in a frame, or the Drop that says why it is none."""
        try:
            if not isinstance(data, (bytes, bytearray)):
                raise MessageDecodeError("frame", "expected a binary frame")
            return self._decode(bytes(data), self.limits)
        except MessageDecodeError as exc:
            return Drop(None, exc.reason, via=via, gbid=gbid, detail=str(exc), field=exc.field)

    def receive(
        self, msg: JoynrMessage, via: str, gbid: str | None = None, source: str | None = None
    ) -> list[Action]:
        """A message arrived on a transport (``source``: the WebSocket client it came from).
        One of a sender past its share of the trace is refused and counted; the drops of
        the rest count towards their sender's share (``fairness``)."""
        now = self.clock()
        if self.shares.muted(msg.sender, now):
            self.shares.count(msg.sender)
            return []
        return self.shares.note(msg.sender, now, self._receive(msg, via, gbid, source))

    def _receive(self, msg: JoynrMessage, via: str, gbid: str | None, source: str | None) -> list[Action]:
        # One that would wait past its sender's share is refused before it is received.
        refused = self._past_share(msg, via, gbid)
        if refused is not None:
            return refused
        actions: list[Action] = [Received(msg, via, gbid)]
        msg = msg.with_hop()
        if msg.hops > self.max_hops:
            actions.append(Drop(msg, "hop-limit"))
            return actions
        actions.extend(self._learn(msg, via, gbid, source))
        actions.extend(self.route(msg, via=via, source=source))
        return actions

    def route(
        self, msg: JoynrMessage, gbid: str | None = None, via: str = "inprocess", source: str | None = None
    ) -> list[Action]:
        """Route a message of a local participant, or one that arrived over ``via``:
        ``gbid`` picks the backend for a participant reachable in every backend (the GCD)."""
        if msg.type == MULTICAST:
            return self.multicast.route(msg, via, source)
        now = self.clock()
        if msg.expiry_date_ms < now:
            return [Drop(msg, "expired", now=now)]
        entry = self.table.lookup(msg.recipient, gbid)
        if entry is None:
            return self._enqueue(msg, via)
        address = entry.address
        if msg.recipient in self.local_only and via not in LOCAL_VIAS and msg.type in CALL_TYPES:
            # Calls only: the replies to the internal providers' own calls (the GCD answering
            # the discovery provider) come over the backend and must reach them.
            detail = f"{msg.recipient} serves only its own runtime's participants, not {via}"
            refused: list[Action] = [Drop(msg, "not-permitted", via=via, detail=detail)]
            if msg.type in REQUEST_TYPES:
                refused.append(Reject(msg, detail))
            return refused
        if isinstance(address, InProcessAddress):
            send = Send(msg, address)
            if not self._delivered.add(msg.id):
                return [send, Drop(msg, "duplicate")]
            return [send, deliver(msg, address.skeleton, self.read_payload, self.limits)]
        return self._next_hop(msg, address)

    # -- routing-table changes: joynr's addNextHop and removeNextHop ------------------------
    def add_next_hop(self, participant_id: str, entry: RoutingEntry, origin: str) -> tuple[PutResult, list[Action]]:
        """Offer a route to the table, whose policy decides; when it takes it, what waited
        for the participant goes in the same call, as joynr's ``addNextHop`` sends its queue."""
        result = self.table.put(participant_id, entry, origin)
        if result.outcome == "refused":
            return result, []
        return result, self.route_appeared(participant_id)

    def remove_next_hop(self, participant_id: str) -> str:
        """Take a participant's route out, as far as the policy lets it (the outcome)."""
        return self.table.remove(participant_id)

    def route_appeared(self, participant_id: str) -> list[Action]:
        """The table accepted an entry for a participant: what waited for it goes now."""
        waiting = self.waiting.pop(participant_id)
        actions: list[Action] = []
        for msg, via in waiting:
            actions.extend(self.route(msg, via=via))
        return actions

    def resolved(self, participant_id: str) -> None:
        """A Resolve was carried out (found or not): a later message may ask again."""
        sender = self._resolving.pop(participant_id, None)
        if sender is not None:
            self.shares.lookup_ended(sender)

    def advance(self, now_ms: int) -> list[Action]:
        """Time passed: waiting messages past their expiry are dropped, expired routing
        entries purged (the table's listeners see each purge)."""
        actions: list[Action] = []
        actions.extend(Drop(msg, "expired", now=now_ms) for msg in self.waiting.expire(now_ms))
        actions.extend(self._expire_held(now_ms))
        actions.extend(self.shares.advance(now_ms))
        self.table.purge_expired(now_ms)
        return actions

    def send_failed(
        self, msg: JoynrMessage, address: Address, reason: str = "no-connection", detail: str | None = None
    ) -> list[Action]:
        """The transport could not take a message it was handed."""
        return [Drop(msg, reason, via=via_of(address), detail=detail)]

    # -- inspection ------------------------------------------------------------------
    def queued(self, participant_id: str | None = None) -> int:
        return self.waiting.count(participant_id)

    @property
    def queued_bytes(self) -> int:
        return self.waiting.bytes

    # -- rules of each kind ------------------------------------------------------------
    def _learn(self, msg: JoynrMessage, via: str, gbid: str | None, source: str | None) -> list[Action]:
        return []

    def _next_hop(self, msg: JoynrMessage, address: Address) -> list[Action]:
        raise NotImplementedError

    def _expire_held(self, now_ms: int) -> list[Action]:
        return []

    def _wants_resolve(self) -> bool:
        return True

    # -- helpers ---------------------------------------------------------------------
    def _past_share(self, msg: JoynrMessage, via: str, gbid: str | None = None, ask: bool = True
                    ) -> list[Action] | None:
        """The sender-limit drop of a message that would wait for a route while its sender
        holds its share of the queue, or would start a lookup while its sender has its share
        of lookups under way; None when it may go on (``fairness``)."""
        if msg.type == MULTICAST or self.table.lookup(msg.recipient) is not None:
            return None
        sender = msg.sender
        if self.waiting.sender_full(sender):
            why = f"sender holds {self.waiting.held_by(sender)} waiting messages, its share of the queue"
        elif (ask and self._wants_resolve() and msg.recipient not in self._resolving
              and self.shares.lookups_full(sender)):
            why = f"sender has {self.shares.lookups(sender)} discovery lookups under way, its share"
        else:
            return None
        return [Drop(msg, "sender-limit", via=via, gbid=gbid, detail=why)]

    def _enqueue(self, msg: JoynrMessage, via: str, ask: bool = True) -> list[Action]:
        if not self.waiting.fits(msg):
            return [Drop(msg, "queue-full", detail=f"{len(msg.payload)} bytes do not fit the queue")]
        refused = self._past_share(msg, via, ask=ask)
        if refused is not None:
            return refused
        actions: list[Action] = [Drop(old, "queue-full") for old in self.waiting.add(msg, via)]
        actions.append(Queue(msg))
        if ask and self._wants_resolve() and msg.recipient not in self._resolving:
            self._resolving[msg.recipient] = msg.sender
            self.shares.lookup_started(msg.sender)
            actions.append(Resolve(msg.recipient))
        return actions

    def _learn_route(self, participant_id: str, entry: RoutingEntry) -> list[Action]:
        result, waiting = self.add_next_hop(participant_id, entry, "reply-to")
        return [LearnRoute(participant_id, entry, result.outcome), *waiting]


class CcMessageRouter(MessageRouter):
    """A cluster controller's router: reply-to routes from incoming requests (over MQTT on
    the GBID they arrived on, over WebSocket on the connection they came from), a replyTo
    on requests it publishes, and duplicates of re-sent MQTT copies dropped."""

    def __init__(
        self,
        table: RoutingTable,
        clock: Callable[[], int],
        *,
        own_topic: str,
        gbids: tuple[str, ...] | list[str],
        resolves: bool = True,
        on_client_disconnect: str = "keep",
        republish_received_multicasts: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__(table, clock, **kwargs)
        self.multicast = MulticastRouting(
            table, clock, kind="cc", gbids=tuple(gbids), republish_received=republish_received_multicasts,
            limits=self.limits, read_payload=self.read_payload,
        )
        if on_client_disconnect not in CLIENT_DISCONNECT:
            raise ValueError(
                f"on_client_disconnect: expected one of {', '.join(CLIENT_DISCONNECT)}, got {on_client_disconnect!r}"
            )
        self.on_client_disconnect = on_client_disconnect
        self.own_topic = own_topic
        self.gbids = tuple(gbids)
        self.resolves = resolves
        self._seen = BoundedMemory(kwargs.get("memory", MEMORY))  # (id, hops) received over MQTT

    def _receive(self, msg: JoynrMessage, via: str, gbid: str | None, source: str | None) -> list[Action]:
        # A re-sent copy arrives with the hop count of the first; a looping message comes
        # back with a higher one and must go on looping until the hop limit stops it.
        if via == "mqtt" and not self._seen.add((msg.id, msg.hops)):
            return [Drop(msg, "duplicate", via=via, gbid=gbid)]
        return super()._receive(msg, via, gbid, source)

    def client_gone(self, client_id: str) -> list[Action]:
        """A libjoynr runtime's connection went. Seed 000 keeps its WebSocketClient routes
        ("a WebSocketClient RoutingEntry could already exist in the cluster controller in
        case the provider had just crashed"): they go when the runtime unregisters or they
        expire. joynr's C++ cluster controller removes them at once: ``remove``."""
        if self.on_client_disconnect == "keep":
            return []
        gone = WebSocketClientAddress(client_id)
        for pid, entry in self.table.items():
            if entry.address == gone and not entry.is_sticky:
                self.table.remove(pid)
        return []

    def _wants_resolve(self) -> bool:
        return self.resolves

    def _learn(self, msg: JoynrMessage, via: str, gbid: str | None, source: str | None) -> list[Action]:
        if msg.type not in REQUEST_TYPES:
            return []
        if via == "ws" and source is not None:
            # A local sender not announced through the routing provider (yet): its reply
            # goes back on the connection the request came from, for as long as the request
            # lives. A route learned so from an earlier, shorter-lived request is renewed
            # (a put of the same address keeps the longer expiry), or the purge would take
            # the route this request's reply needs (in a restart wave, a runtime's
            # registration 10 s after its first request to the restarted controller lost
            # its reply so).
            entry = RoutingEntry(WebSocketClientAddress(source), False, learned_expiry(msg))
            if self._outlives(msg.sender, entry):
                return self._learn_route(msg.sender, entry)
            return []
        if via == "mqtt" and gbid is not None and isinstance(msg.reply_to, MqttAddress):
            # The sender is reachable on the backend the request came from, whatever broker
            # the replyTo names; the route lives as long as the request.
            entry = RoutingEntry(MqttAddress(gbid, msg.reply_to.topic), True, learned_expiry(msg))
            return self._learn_route(msg.sender, entry)
        return []

    def _outlives(self, participant_id: str, learned: RoutingEntry) -> bool:
        """Whether a route learned from a request adds to what the table holds: nothing
        there, an entry the next purge takes, or the same address held for less long."""
        held = self.table.lookup(participant_id)
        return (
            held is None
            or self.table.policy.may_purge(held, self.clock())
            or (held.address == learned.address and held.expiry_date_ms < learned.expiry_date_ms)
        )

    def _next_hop(self, msg: JoynrMessage, address: Address) -> list[Action]:
        if isinstance(address, MqttAddress):
            if address.broker_uri not in self.gbids:
                return [Drop(msg, "unknown-gbid", via="mqtt", gbid=address.broker_uri)]
            if msg.type in REQUEST_TYPES and msg.reply_to is None:
                msg = msg.with_reply_to(MqttAddress(address.broker_uri, self.own_topic))
            return [Send(msg, address)]
        if isinstance(address, WebSocketClientAddress):
            return [Send(msg, address)]
        # A cluster controller cannot connect to a WebSocket server or a channel.
        return [Drop(msg, "no-connection", via=via_of(address))]
