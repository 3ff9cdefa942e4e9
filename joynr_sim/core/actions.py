"""What a message router decides, as values: the actions a runtime carries out, in order.

    Received   record the receipt (``msg.in``)
    Send       hand the message to the transport of ``address`` (``msg.out``); for an
               InProcess address the Deliver or Drop that follows says what happened
    Deliver    hand the message to the in-process provider or proxy (``msg.deliver``)
    Queue      the message waits for a route (``msg.queue``)
    Resolve    ask the parent (libjoynr) or discovery (cluster controller) for a route
    Drop       the message goes no further, with a reason (``msg.drop``)
    Reject     answer a refused request with an error reply, so its caller knows at once
    LearnRoute a reply-to route was offered to the routing table (the table's decision is
               traced by its own listener)
    Subscribe  subscribe to an MQTT topic (filter) on a backend: a multicast's receivers
    Unsubscribe  the last receiver of that multicast went
    Withhold   a multicast is not published to the backends, and why (``mc.withhold``)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .address import Address, MqttAddress, type_name
from .limits import WireLimits
from .message import InvalidMessage, JoynrMessage, MessageDecodeError
from .routing import RoutingEntry

# Reads a payload its wire left unread into the participants' form (joynr_sim.wire.codecs);
# raises MessageDecodeError for one that may not be used.
PayloadReader = Callable[[JoynrMessage, WireLimits], JoynrMessage]


@dataclass(frozen=True)
class Received:
    msg: JoynrMessage  # as it arrived, before the hop was counted
    via: str
    gbid: str | None = None


@dataclass(frozen=True)
class Send:
    msg: JoynrMessage
    address: Address
    resent: bool = False  # sent again after a lost connection: not a new routing decision

    @property
    def via(self) -> str:
        return via_of(self.address)

    @property
    def gbid(self) -> str | None:
        return self.address.broker_uri if isinstance(self.address, MqttAddress) else None


@dataclass(frozen=True)
class Deliver:
    msg: JoynrMessage
    recipient: Any  # the provider or proxy skeleton of the InProcess address


@dataclass(frozen=True)
class Queue:
    msg: JoynrMessage
    reason: str = "no-route"


@dataclass(frozen=True)
class Resolve:
    participant_id: str


@dataclass(frozen=True)
class Drop:
    msg: JoynrMessage | None  # None: the frame was no message
    reason: str
    via: str | None = None
    gbid: str | None = None
    detail: str | None = None
    field: str | None = None  # for invalid-message: which value was refused
    # For a line that stands for messages not traced one by one (sender-limit): whose, and
    # how many.
    sender: str | None = None
    count: int | None = None
    # For expired: the time the router judged the expiry date by, as its runtime's clock
    # read it; a runtime whose clock is off drops early or late, and this shows which.
    now: int | None = None


@dataclass(frozen=True)
class Reject:
    msg: JoynrMessage  # a request the router refused to deliver
    detail: str


@dataclass(frozen=True)
class LearnRoute:
    participant_id: str
    entry: RoutingEntry
    outcome: str


@dataclass(frozen=True)
class Subscribe:
    gbid: str
    topic: str


@dataclass(frozen=True)
class Unsubscribe:
    gbid: str
    topic: str


@dataclass(frozen=True)
class Withhold:
    msg: JoynrMessage
    reason: str  # received-from-backend | provider-not-visible | provider-unknown


Action = (Received | Send | Deliver | Queue | Resolve | Drop | Reject | LearnRoute | Subscribe | Unsubscribe
          | Withhold)
ACTIONS: tuple[type, ...] = Action.__args__  # every action type, for tables keyed by it


def unreadable(msg: JoynrMessage, limits: WireLimits) -> JoynrMessage:
    """The reader of a router given none: its wire reads every payload as it decodes."""
    raise InvalidMessage("payload", f"in the {msg.payload_form} wire's form, which this router cannot read")


def deliver(msg: JoynrMessage, recipient: Any, read_payload: PayloadReader, limits: WireLimits) -> Deliver | Drop:
    """The Deliver of a message to an in-process provider or proxy, its payload in the
    participants' form: a payload the wire left unread (a relay forwards it so) is read here,
    where the message ends, and one that may not be used is dropped, naming its field."""
    if msg.payload_form:
        try:
            msg = read_payload(msg, limits)
        except MessageDecodeError as exc:
            return Drop(msg, exc.reason, detail=str(exc), field=exc.field)
    return Deliver(msg, recipient)


def via_of(address: Address) -> str:
    """The transport an address is reached over, as the trace names it."""
    name = type_name(address)
    if name == "InProcess":
        return "inprocess"
    if name == "Mqtt":
        return "mqtt"
    return "ws" if name.startswith("WebSocket") else name.lower()
