"""A joynr message (joynr's header set plus a hop counter) and its msgpack wire codec."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

import msgpack

from .address import Address, AddressError, from_json, to_json
from .ids import new_uuid
from .limits import (
    DEFAULT_LIMITS,
    InvalidField,
    WireLimits,
    check_address,
    check_id,
    check_int,
    check_text,
    plain_text,
    preview,
)

# joynr's message type codes.
REQUEST = "rq"
REPLY = "rp"
ONE_WAY = "o"
SUBSCRIPTION_REQUEST = "arq"
BROADCAST_SUBSCRIPTION_REQUEST = "brq"
MULTICAST_SUBSCRIPTION_REQUEST = "mrq"
SUBSCRIPTION_REPLY = "srp"
SUBSCRIPTION_STOP = "sst"
PUBLICATION = "p"
MULTICAST = "m"
MESSAGE_TYPES = frozenset(
    {
        REQUEST, REPLY, ONE_WAY, SUBSCRIPTION_REQUEST, BROADCAST_SUBSCRIPTION_REQUEST,
        MULTICAST_SUBSCRIPTION_REQUEST, SUBSCRIPTION_REPLY, SUBSCRIPTION_STOP, PUBLICATION,
        MULTICAST,
    }
)
NORMAL, BEST_EFFORT = "NORMAL", "BEST_EFFORT"  # joynr's MessagingQosEffort
EFFORTS = frozenset({NORMAL, BEST_EFFORT})
# The custom header that pairs a reply with its request (joynr's requestReplyId; on joynr's
# own wire it travels as the custom header "z4", see joynr_sim.wire.joynr).
REQUEST_REPLY_ID = "requestReplyId"
WIRE_VERSION = 1


class MessageDecodeError(ValueError):
    """Bytes that are not a joynr message; ``field`` names what was wrong."""

    reason = "decode-error"

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"message field {field!r}: {message}")
        self.field = field


class InvalidMessage(MessageDecodeError):
    """A frame that decodes, but one of its values may not be used (an empty sender, a
    replyTo topic a reply could not be published to, an id too long to be a delivery tag, ...)."""

    reason = "invalid-message"


@dataclass(frozen=True)
class JoynrMessage:
    type: str
    sender: str  # joynr header "from"
    recipient: str  # joynr header "to"
    expiry_date_ms: int
    payload: bytes = b""
    id: str = field(default_factory=new_uuid)  # the run's seeded generator, when it has one
    reply_to: Address | None = None
    effort: str = "NORMAL"
    custom_headers: tuple[tuple[str, str], ...] = ()
    hops: int = 0
    # The form the payload bytes are in: "" the participants' own (what they wrote and read);
    # a wire's name, that wire's body as it arrived, not read yet. A cluster controller
    # forwards a joynr frame's body as joynr's does, unread: only the runtime that delivers
    # the message reads it (joynr_sim.wire.codecs).
    payload_form: str = ""

    def with_hop(self) -> JoynrMessage:
        # A copy of the fields, not dataclasses.replace: every hop of every message makes
        # one, and replace re-runs __init__ through the frozen __setattr__ of each field.
        copy = object.__new__(JoynrMessage)
        copy.__dict__.update(self.__dict__)
        copy.__dict__["hops"] = self.hops + 1
        return copy

    def with_reply_to(self, address: Address) -> JoynrMessage:
        # As with_hop: a cluster controller sets it on every request it publishes.
        copy = object.__new__(JoynrMessage)
        copy.__dict__.update(self.__dict__)
        copy.__dict__["reply_to"] = address
        return copy

    def header(self, name: str) -> str | None:
        # The last of equal names wins, as in a dict of the headers; no dict is built, as
        # every traced hop asks for the request-reply id.
        for key, value in reversed(self.custom_headers):
            if key == name:
                return value
        return None


# Short keys keep the wire small; msgpack keeps payload bytes as bytes.
_KEYS = ("v", "t", "id", "f", "to", "rt", "ex", "ef", "ch", "h", "pl")


# A runtime sends to few reply addresses, each in every request it forwards: their JSON and,
# for those that came in, their parsed and checked form are kept (bounded: a hostile peer
# sending ever new ones only evicts).
reply_to_json = lru_cache(maxsize=1024)(to_json)


@lru_cache(maxsize=1024)
def reply_to_address(text: str, limits: WireLimits) -> Address:
    """A replyTo from the wire, parsed and checked; raises InvalidField (never cached)."""
    if len(text) > limits.max_text_bytes * 4:
        raise InvalidField("rt", f"{len(text)} characters of replyTo")
    try:
        address = from_json(text)
    except AddressError as exc:
        raise InvalidField(f"rt.{exc.field}", str(exc)) from None
    check_address(address, "rt", limits)
    return address


def encode(msg: JoynrMessage) -> bytes:
    if msg.payload_form:  # a runtime speaks one wire: another wire's body here is a bug
        raise ValueError(f"message {msg.id}: a payload in the {msg.payload_form} wire's form")
    return msgpack.packb(
        [
            WIRE_VERSION,
            msg.type,
            msg.id,
            msg.sender,
            msg.recipient,
            reply_to_json(msg.reply_to) if msg.reply_to is not None else None,
            msg.expiry_date_ms,
            msg.effort,
            [list(kv) for kv in msg.custom_headers],
            msg.hops,
            msg.payload,
        ],
        use_bin_type=True,
    )


def decode(data: bytes, limits: WireLimits = DEFAULT_LIMITS) -> JoynrMessage:
    """Decode wire bytes and check every value against ``limits``. Bytes that are no joynr
    message raise ``MessageDecodeError``; a message with a value that may not be used
    raises ``InvalidMessage`` (its subclass); nothing else is raised."""
    if len(data) > limits.max_frame_bytes:
        raise InvalidMessage("frame", f"{len(data)} bytes, at most {limits.max_frame_bytes}")
    try:
        fields = msgpack.unpackb(data, raw=False, strict_map_key=True, use_list=True)
    except Exception as exc:  # msgpack raises a zoo of types for garbage
        raise MessageDecodeError("frame", f"not msgpack: {type(exc).__name__}") from None
    if not isinstance(fields, list) or len(fields) != len(_KEYS):
        raise MessageDecodeError("frame", "not a joynr message frame")
    version, mtype, mid, sender, recipient, reply_to, expiry, effort, headers, hops, payload = fields
    if version != WIRE_VERSION:
        raise MessageDecodeError("v", f"unsupported wire version {preview(version)}")
    if not isinstance(mtype, str) or mtype not in MESSAGE_TYPES:
        raise MessageDecodeError("t", f"unknown message type {preview(mtype)}")
    # msgpack makes exact types (a bool is no int): one type test each, no call per field
    # (the checks were two thirds of a decode, six decodes a call).
    for value, kind, name in ((mid, str, "id"), (sender, str, "f"), (recipient, str, "to"), (expiry, int, "ex"),
                              (hops, int, "h"), (payload, bytes, "pl")):
        if type(value) is not kind:
            raise MessageDecodeError(name, f"unexpected value {preview(value)}")
    if not isinstance(effort, str) or effort not in EFFORTS:
        raise MessageDecodeError("ef", f"unknown effort {preview(effort)}")
    for value, kind, name in ((headers, list, "ch"), (reply_to, (str, type(None)), "rt")):
        if not isinstance(value, kind):
            raise MessageDecodeError(name, f"unexpected value {preview(value)}")
    try:
        max_id = limits.max_id_bytes
        for value, name in ((mid, "id"), (sender, "f"), (recipient, "to")):
            if not plain_text(value, max_id):
                check_id(value, name, limits)
        # Both are exact ints (tested above): only their range is left to check here.
        if not 0 <= expiry <= limits.max_expiry_ms:
            check_int(expiry, "ex", 0, limits.max_expiry_ms)  # raises with the range
        if not 0 <= hops <= limits.max_hop_counter:
            check_int(hops, "h", 0, limits.max_hop_counter)
        if len(headers) > limits.max_headers:
            raise InvalidField("ch", f"{len(headers)} custom headers, at most {limits.max_headers}")
        custom: list[tuple[str, str]] = []
        for n, kv in enumerate(headers):
            if not (type(kv) is list and len(kv) == 2 and type(kv[0]) is str and type(kv[1]) is str):
                raise InvalidField(f"ch[{n}]", f"custom header must be [name, value], got {preview(kv)}")
            if not plain_text(kv[0], max_id):
                check_id(kv[0], f"ch[{n}].name", limits)
            if kv[1] and not plain_text(kv[1], limits.max_header_bytes):
                check_text(kv[1], f"ch[{n}].value", limits.max_header_bytes, empty=True)
            custom.append((kv[0], kv[1]))
        address = None if reply_to is None else reply_to_address(reply_to, limits)
    except InvalidField as exc:
        raise InvalidMessage(exc.field, str(exc)) from None
    # The fields set directly, as in with_hop: a frozen dataclass's __init__ sets each one
    # through object.__setattr__ (2 of a decode's 10 us).
    msg = object.__new__(JoynrMessage)
    msg.__dict__.update(
        type=mtype, sender=sender, recipient=recipient, expiry_date_ms=expiry, payload=payload, id=mid,
        reply_to=address, effort=effort, custom_headers=tuple(custom), hops=hops,
    )
    return msg
