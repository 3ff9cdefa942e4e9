"""The wires a run may speak, by name: how every runtime turns a message into a frame and back.

- ``joynr-sim`` (the default): the simulator's own msgpack frame (``joynr_sim.core.message``),
  its payloads the participants' msgpack.
- ``joynr``: the message as joynr writes it: a SMRF frame with joynr's header keys
  (``joynr_sim.wire.joynr``) around joynr's JSON payload of its type
  (``joynr_sim.wire.payloads``, ``joynr_sim.wire.subscription_payloads``).

A runtime keeps its messages in the simulator's form whatever the wire, so the router, the
trace and the checks see the same routing decisions on both; only the bytes on the brokers and
WebSockets differ. One part may wait: a runtime decodes a frame with ``decode_for_routing``,
which on the joynr wire leaves the JSON body of a request or reply unread (its
``payload_form`` says so), as joynr's cluster controller routes a message by its header and
forwards the body it never read. The body is read (``read_payload``) only where the message is
delivered, and written back unchanged when it is sent on; a relay pays for the header alone.

A frame that decodes to no message, or to a payload that may not be used, is a
``MessageDecodeError`` the router drops with its reason, as on the default wire (a body read at
delivery is dropped there). A message the simulator made but joynr's JSON cannot carry raises
``WireEncodeError`` where it is sent.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from ..core.actions import unreadable
from ..core.limits import WireLimits
from ..core.message import REPLY, REQUEST, REQUEST_REPLY_ID, InvalidMessage, JoynrMessage
from ..core.message import decode as decode_joynr_sim
from ..core.message import encode as encode_joynr_sim
from .joynr import decode_joynr, encode_joynr
from .payloads import PayloadDecodeError
from .subscription_payloads import from_joynr_payload, to_joynr_payload

JOYNR_SIM = "joynr-sim"
JOYNR = "joynr"
DEFAULT_WIRE = JOYNR_SIM


class WireEncodeError(ValueError):
    """A message this wire cannot carry (a payload joynr's JSON has no form for)."""


@dataclass(frozen=True)
class Codec:
    name: str
    encode: Callable[[JoynrMessage], bytes]  # takes a payload of either form
    decode: Callable[[bytes, WireLimits], JoynrMessage]  # the payload read
    # The payload possibly left unread, for read_payload where the message is delivered.
    decode_for_routing: Callable[[bytes, WireLimits], JoynrMessage]
    read_payload: Callable[[JoynrMessage, WireLimits], JoynrMessage]


# The messages of a call, whose body a relay forwards unread. Only when the frame names their
# request-reply id in its header: the trace and the dispatcher need it at every hop, and a
# frame without it (joynr's own) has it read from the body at once. The other types are
# read at once as well: few, and some are read by the cluster controller itself.
_UNREAD_TYPES = frozenset({REQUEST, REPLY})


def _encode_joynr(msg: JoynrMessage) -> bytes:
    try:
        if msg.payload_form == JOYNR:  # as it arrived, unread
            return encode_joynr(msg)
        if msg.payload_form:
            raise ValueError(f"a payload in the {msg.payload_form} wire's form")
        body = to_joynr_payload(msg.type, msg.payload, msg.header(REQUEST_REPLY_ID), recipient=msg.recipient,
                                sender=msg.sender)
        return encode_joynr(msg, body=body)
    except ValueError as exc:
        raise WireEncodeError(f"message {msg.id} ({msg.type}) on the joynr wire: {exc}") from None


def _decode_joynr(data: bytes, limits: WireLimits) -> JoynrMessage:
    return _read_joynr_payload(decode_joynr(data, limits), limits)


def _decode_joynr_for_routing(data: bytes, limits: WireLimits) -> JoynrMessage:
    msg = decode_joynr(data, limits)
    if msg.type not in _UNREAD_TYPES or msg.header(REQUEST_REPLY_ID) is None:
        return _read_joynr_payload(msg, limits)
    msg.__dict__["payload_form"] = JOYNR  # just made by decode_joynr, seen by no one yet
    return msg


def _read_joynr_payload(msg: JoynrMessage, limits: WireLimits) -> JoynrMessage:
    """``msg`` with its joynr JSON body read into the simulator's payload; raises InvalidMessage."""
    try:
        payload, request_reply_id = from_joynr_payload(msg.type, msg.payload, limits, recipient=msg.recipient,
                                                       sender=msg.sender)
    except PayloadDecodeError as exc:
        raise InvalidMessage(f"pl.{exc.field}", str(exc)) from None
    headers = msg.custom_headers
    if request_reply_id is not None:
        header = msg.header(REQUEST_REPLY_ID)
        if header is None:  # joynr's payload names it; the simulator's runtimes read the header
            headers = (*headers, (REQUEST_REPLY_ID, request_reply_id))
        elif header != request_reply_id:
            raise InvalidMessage("pl.requestReplyId", f"{request_reply_id!r}, the header says {header!r}")
    # The fields set directly, as JoynrMessage.with_hop does: replace() would run every
    # field through __init__ again, a sixth of a joynr frame's decoding.
    copy = object.__new__(JoynrMessage)
    copy.__dict__.update(msg.__dict__, payload=payload, custom_headers=headers, payload_form="")
    return copy


def _read_nothing(msg: JoynrMessage, limits: WireLimits) -> JoynrMessage:
    """The default wire reads every payload as it decodes: one read already is left as it is."""
    return unreadable(msg, limits) if msg.payload_form else msg


def _read_joynr_payload_unread(msg: JoynrMessage, limits: WireLimits) -> JoynrMessage:
    return _read_joynr_payload(msg, limits) if msg.payload_form == JOYNR else _read_nothing(msg, limits)


WIRES: dict[str, Codec] = {
    JOYNR_SIM: Codec(JOYNR_SIM, encode_joynr_sim, decode_joynr_sim, decode_joynr_sim, _read_nothing),
    JOYNR: Codec(JOYNR, _encode_joynr, _decode_joynr, _decode_joynr_for_routing, _read_joynr_payload_unread),
}


def codec(name: str) -> Codec:
    """The wire named ``name``; a ValueError naming the choices for any other."""
    found = WIRES.get(name) if isinstance(name, str) else None
    if found is None:
        raise ValueError(f"wire: expected one of {', '.join(WIRES)}, got {str(name)[:40]!r}")
    return found
