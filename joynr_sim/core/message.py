"""A joynr message (joynr's header set plus a hop counter) and its msgpack wire codec."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field, replace
from typing import Any

import msgpack

from .address import Address, AddressError, from_json, to_json

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
EFFORTS = frozenset({"NORMAL", "BEST_EFFORT"})
WIRE_VERSION = 1


class MessageDecodeError(ValueError):
    """Bytes that are not a joynr message; ``field`` names what was wrong."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"message field {field!r}: {message}")
        self.field = field


@dataclass(frozen=True)
class JoynrMessage:
    type: str
    sender: str  # joynr header "from"
    recipient: str  # joynr header "to"
    expiry_date_ms: int
    payload: bytes = b""
    id: str = field(default_factory=lambda: str(uuid.uuid4()))
    reply_to: Address | None = None
    effort: str = "NORMAL"
    custom_headers: tuple[tuple[str, str], ...] = ()
    hops: int = 0

    def with_hop(self) -> "JoynrMessage":
        return replace(self, hops=self.hops + 1)

    def header(self, name: str) -> str | None:
        return dict(self.custom_headers).get(name)


# Short keys keep the wire small; msgpack keeps payload bytes as bytes.
_KEYS = ("v", "t", "id", "f", "to", "rt", "ex", "ef", "ch", "h", "pl")


def encode(msg: JoynrMessage) -> bytes:
    return msgpack.packb(
        [
            WIRE_VERSION,
            msg.type,
            msg.id,
            msg.sender,
            msg.recipient,
            to_json(msg.reply_to) if msg.reply_to is not None else None,
            msg.expiry_date_ms,
            msg.effort,
            [list(kv) for kv in msg.custom_headers],
            msg.hops,
            msg.payload,
        ],
        use_bin_type=True,
    )


def _expect(value: Any, kind: type | tuple[type, ...], name: str) -> Any:
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is int):
        raise MessageDecodeError(name, f"unexpected value {value!r}")
    return value


def decode(data: bytes) -> JoynrMessage:
    """Decode wire bytes; anything malformed raises ``MessageDecodeError`` and nothing else."""
    try:
        fields = msgpack.unpackb(data, raw=False, strict_map_key=True, use_list=True)
    except Exception as exc:  # msgpack raises a zoo of types for garbage
        raise MessageDecodeError("frame", f"not msgpack: {type(exc).__name__}") from None
    if not isinstance(fields, list) or len(fields) != len(_KEYS):
        raise MessageDecodeError("frame", "not a joynr message frame")
    version, mtype, mid, sender, recipient, reply_to, expiry, effort, headers, hops, payload = fields
    if version != WIRE_VERSION:
        raise MessageDecodeError("v", f"unsupported wire version {version!r}")
    if not isinstance(mtype, str) or mtype not in MESSAGE_TYPES:
        raise MessageDecodeError("t", f"unknown message type {mtype!r}")
    _expect(mid, str, "id")
    _expect(sender, str, "f")
    _expect(recipient, str, "to")
    _expect(expiry, int, "ex")
    _expect(hops, int, "h")
    _expect(payload, bytes, "pl")
    if not isinstance(effort, str) or effort not in EFFORTS:
        raise MessageDecodeError("ef", f"unknown effort {effort!r}")
    _expect(headers, list, "ch")
    custom: list[tuple[str, str]] = []
    for kv in headers:
        if not (isinstance(kv, list) and len(kv) == 2 and all(isinstance(x, str) for x in kv)):
            raise MessageDecodeError("ch", f"custom header must be [name, value], got {kv!r}")
        custom.append((kv[0], kv[1]))
    address = None
    if reply_to is not None:
        _expect(reply_to, str, "rt")
        try:
            address = from_json(reply_to)
        except AddressError as exc:
            raise MessageDecodeError("rt", str(exc)) from None
    return JoynrMessage(
        type=mtype,
        sender=sender,
        recipient=recipient,
        expiry_date_ms=expiry,
        payload=payload,
        id=mid,
        reply_to=address,
        effort=effort,
        custom_headers=tuple(custom),
        hops=hops,
    )
