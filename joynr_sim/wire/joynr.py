"""A ``JoynrMessage`` in a SMRF frame, with the header keys and values joynr writes.

joynr keeps its routing fields in SMRF's own fields and its header map (bmwcarit/joynr
``java/messaging/messaging-common/src/main/java/joynr/Message.java``,
``cpp/libjoynr/include/joynr/Message.h``, ``.../joynr/MutableMessage.java``):

    SMRF sender        the message's "from" participant
    SMRF recipient     its "to" participant (a multicast id for a multicast)
    SMRF ttlMs         the absolute expiry date in ms (joynr's factories set ttlAbsolute)
    t                  the message type: rq, rp, o, arq, brq, mrq, srp, sst, p, m
    id                 the message id
    re                 replyTo: the address as joynr's JSON (``_typeName`` ...)
    ef                 the effort; joynr writes it only when not NORMAL, and so here
    c-<name>           a custom header <name>
    c-z4               the request-reply id (joynr's custom header "z4"), which the
                       simulator keeps as its custom header ``requestReplyId``
    cr                 the creator user id (C++ only): accepted, not kept

The simulator's hop counter, which joynr has not got, travels as the custom header
``joynr-sim-hops`` (``c-joynr-sim-hops``, a decimal), written only when it is not 0:
joynr forwards custom headers it does not know, and a frame from joynr counts 0 hops.

SMRF's headers are a map: the order of custom headers is not kept (joynr's serialisers
sort them), and a message with a custom header name twice cannot be encoded.

Decoding checks every value with ``WireLimits`` and the checks of
``joynr_sim.core.message.decode``, and raises the same errors: ``MessageDecodeError``
for bytes that are no joynr message, ``InvalidMessage`` for a value that may not be used.
"""

from __future__ import annotations

import re
from functools import lru_cache

from ..core.address import Address
from ..core.limits import (
    DEFAULT_LIMITS,
    InvalidField,
    WireLimits,
    check_id,
    check_int,
    check_text,
    plain_text,
    preview,
)
from ..core.message import (
    EFFORTS,
    MESSAGE_TYPES,
    REQUEST_REPLY_ID,
    InvalidMessage,
    JoynrMessage,
    MessageDecodeError,
    reply_to_address,
    reply_to_json,
)
from .smrf import SmrfLimits, decode_fields, encode_fields

HEADER_TYPE = "t"
HEADER_ID = "id"
HEADER_REPLY_TO = "re"
HEADER_EFFORT = "ef"
HEADER_CREATOR = "cr"
CUSTOM_HEADER_PREFIX = "c-"
CUSTOM_HEADER_REQUEST_REPLY_ID = "z4"
HOPS_HEADER = "joynr-sim-hops"
NORMAL = "NORMAL"

# Headers other than custom ones a frame may carry.
_JOYNR_HEADERS = frozenset({HEADER_TYPE, HEADER_ID, HEADER_REPLY_TO, HEADER_EFFORT, HEADER_CREATOR})
_KNOWN_NAMES = frozenset({HOPS_HEADER, CUSTOM_HEADER_REQUEST_REPLY_ID})
_HOPS = re.compile(r"(?:0|[1-9][0-9]{0,9})\Z")


def _wire_name(name: str) -> str:
    """The custom header key joynr uses for a custom header of the simulator's."""
    if name == HOPS_HEADER:
        raise ValueError(f"custom header {name!r} is the hop counter's")
    if name == CUSTOM_HEADER_REQUEST_REPLY_ID:  # it would come back as requestReplyId
        raise ValueError(f"custom header {name!r} is joynr's request-reply id: {REQUEST_REPLY_ID!r} here")
    if name == REQUEST_REPLY_ID:
        name = CUSTOM_HEADER_REQUEST_REPLY_ID
    return CUSTOM_HEADER_PREFIX + name


def _sim_name(name: str) -> str:
    return REQUEST_REPLY_ID if name == CUSTOM_HEADER_REQUEST_REPLY_ID else name


def encode_joynr(msg: JoynrMessage, *, compressed: bool = False, body: bytes | None = None) -> bytes:
    """The message as joynr sends it; ``compressed`` deflates the payload (joynr's
    MessagingQos compress); ``body``: the frame's body instead of the message's payload (its
    joynr JSON, made by the caller: no copy of the message for it). Raises ValueError for a
    message SMRF cannot carry: an InProcessAddress replyTo, a custom header name twice or
    named as the hop counter."""
    headers = [(HEADER_TYPE, msg.type), (HEADER_ID, msg.id)]
    if msg.reply_to is not None:
        headers.append((HEADER_REPLY_TO, reply_to_json(msg.reply_to)))
    if msg.effort != NORMAL:
        headers.append((HEADER_EFFORT, msg.effort))
    headers.extend((_wire_name(name), value) for name, value in msg.custom_headers)
    if msg.hops:
        headers.append((CUSTOM_HEADER_PREFIX + HOPS_HEADER, str(msg.hops)))
    return encode_fields(msg.recipient, msg.sender, msg.expiry_date_ms, True, headers,
                         msg.payload if body is None else body, compressed)


@lru_cache(maxsize=16)
def _smrf_limits(limits: WireLimits) -> SmrfLimits:
    # The frame and the inflated payload within the simulator's frame bound; the custom
    # headers' own bound is checked below, with joynr's headers and the hop counter beside.
    return SmrfLimits(max_frame_bytes=limits.max_frame_bytes, max_body_bytes=limits.max_frame_bytes,
                      max_headers=limits.max_headers + len(_JOYNR_HEADERS) + 1)


# Nearly every frame is decoded with the default limits: looking those up by identity spares
# hashing every field of a WireLimits per frame, here and in reply_to_address's cache.
_DEFAULT_SMRF_LIMITS = _smrf_limits(DEFAULT_LIMITS)


@lru_cache(maxsize=1024)
def _default_reply_to(text: str) -> Address:
    return reply_to_address(text, DEFAULT_LIMITS)  # raises InvalidField, which is not cached


def decode_joynr(data: bytes, limits: WireLimits = DEFAULT_LIMITS) -> JoynrMessage:
    """Decode a joynr SMRF frame and check every value against ``limits``; raises
    ``MessageDecodeError`` (a bad frame: ``SmrfDecodeError``, its subclass, naming the SMRF
    field) or ``InvalidMessage``, nothing else."""
    if isinstance(data, (bytes, bytearray, memoryview)) and len(data) > limits.max_frame_bytes:
        raise InvalidMessage("frame", f"{len(data)} bytes, at most {limits.max_frame_bytes}")
    recipient, sender, ttl_ms, ttl_absolute, headers, payload, _, _ = decode_fields(
        data, _DEFAULT_SMRF_LIMITS if limits is DEFAULT_LIMITS else _smrf_limits(limits))
    joynr: dict[str, str] = {}
    custom: list[tuple[str, str]] = []
    names: set[str] = set()
    hops = 0
    try:
        for n, (key, value) in enumerate(headers):
            if key.startswith(CUSTOM_HEADER_PREFIX):
                name = key[len(CUSTOM_HEADER_PREFIX):]
                # The hop counter's and the request-reply id's names are ids: only their length
                # can be refused (by limits of fewer bytes).
                if name not in _KNOWN_NAMES or len(name) > limits.max_id_bytes:
                    check_id(name, f"headers[{n}].key", limits)
                if name == HOPS_HEADER:
                    hops = _hops(value, limits)
                    continue
                name = _sim_name(name)
                if name in names:
                    raise InvalidField(f"headers[{n}].key", f"custom header {preview(name)} twice")
                names.add(name)
                if value and not plain_text(value, limits.max_header_bytes):
                    check_text(value, key, limits.max_header_bytes, empty=True)
                custom.append((name, value))
            elif key in _JOYNR_HEADERS:
                joynr[key] = value
            else:
                raise InvalidField(f"headers[{n}].key", f"not a joynr header: {preview(key)}")
        if len(custom) > limits.max_headers:
            raise InvalidField("headers", f"{len(custom)} custom headers, at most {limits.max_headers}")
    except InvalidField as exc:
        raise InvalidMessage(exc.field, str(exc)) from None

    mtype = joynr.get(HEADER_TYPE)
    if mtype not in MESSAGE_TYPES:
        raise MessageDecodeError(HEADER_TYPE, f"unknown message type {preview(mtype)}")
    effort = joynr.get(HEADER_EFFORT, NORMAL)
    if effort not in EFFORTS:
        raise MessageDecodeError(HEADER_EFFORT, f"unknown effort {preview(effort)}")
    if HEADER_ID not in joynr:
        raise MessageDecodeError(HEADER_ID, "missing")
    if not ttl_absolute:
        # joynr's factories write absolute expiry dates; a relative one would need a clock.
        raise InvalidMessage("ttlAbsolute", "a relative ttl: the simulator takes absolute expiry dates")
    try:
        # Most ids are plain ASCII: decided at once, as the default wire decides them; the
        # rest get the full check and its error.
        max_id = limits.max_id_bytes
        for value, field in ((joynr[HEADER_ID], HEADER_ID), (sender, "sender"), (recipient, "recipient")):
            if not plain_text(value, max_id):
                check_id(value, field, limits)
        check_int(ttl_ms, "ttlMs", 0, limits.max_expiry_ms)
        if HEADER_CREATOR in joynr:
            check_id(joynr[HEADER_CREATOR], HEADER_CREATOR, limits)
        reply_to = joynr.get(HEADER_REPLY_TO)
        try:
            address = None if reply_to is None else (
                _default_reply_to(reply_to) if limits is DEFAULT_LIMITS else reply_to_address(reply_to, limits))
        except InvalidField as exc:  # named by the simulator's own frame ("rt...")
            reason = str(exc).removeprefix(f"{exc.field}: ")
            raise InvalidField(HEADER_REPLY_TO + exc.field.removeprefix("rt"), reason) from None
    except InvalidField as exc:
        raise InvalidMessage(exc.field, str(exc)) from None
    # Every field checked above; made as JoynrMessage.with_hop makes its copies, as the frozen
    # dataclass's __init__ sets each field through object.__setattr__ (a field left out here
    # fails every equality test of a decoded message).
    msg = object.__new__(JoynrMessage)
    msg.__dict__.update(
        type=mtype, sender=sender, recipient=recipient, expiry_date_ms=ttl_ms, payload=payload, id=joynr[HEADER_ID],
        reply_to=address, effort=effort, custom_headers=tuple(custom), hops=hops)
    return msg


def _hops(value: str, limits: WireLimits) -> int:
    field = CUSTOM_HEADER_PREFIX + HOPS_HEADER
    if not _HOPS.match(value):
        raise InvalidField(field, f"a decimal hop count, got {preview(value)}")
    return check_int(int(value), field, 0, limits.max_hop_counter)
