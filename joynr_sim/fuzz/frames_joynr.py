"""Hypothesis strategies for frames of joynr's wire (``joynr_sim.wire.codecs``, ``joynr``): a
valid request as ``codec("joynr").encode`` writes it, with one to three parts made hostile,
at every layer a receiver reads:

- the SMRF prefix: a version other than 1, a signature or message size that lies, bytes
  after the frame, a frame shorter than its prefix;
- the FlatBuffers table: a root or other offset pointing anywhere, a vtable whose sizes or
  entries lie, a frame cut short, bits flipped;
- the header map: the hostile texts of ``frames`` in joynr's headers, the sender and the
  recipient, a header missing or twice, a key that is neither joynr's nor custom, a message
  type or effort joynr has not got, a relative or out-of-range ttl, a hop header that is no
  hop count, hostile replyTo addresses (those of ``frames``), custom headers past the bound;
- the body: JSON that is not joynr's, joynr's Request with hostile fields, a compressed body
  that is no zlib stream of it, a zlib bomb (bounded here; it would inflate past any frame).

Every frame carries a fresh message id (``fz-<n>``, from ``frames.valid_slots``) in its ``id``
header unless that header is the hostile part, so the harness tells a frame that was handled
from one dropped before it was a message, as on the default wire.
"""

from __future__ import annotations

import json
import struct
import zlib
from functools import lru_cache
from typing import Any

import flatbuffers
from hypothesis import strategies as st

from ..core.message import MESSAGE_TYPES, MessageDecodeError
from ..wire.codecs import JOYNR, codec
from ..wire.joynr import (
    CUSTOM_HEADER_PREFIX,
    CUSTOM_HEADER_REQUEST_REPLY_ID,
    HEADER_CREATOR,
    HEADER_EFFORT,
    HEADER_ID,
    HEADER_REPLY_TO,
    HEADER_TYPE,
    HOPS_HEADER,
)
from ..wire.smrf import INT64_MAX, INT64_MIN, PREFIX, SMRF_VERSION, SmrfFrame, decode_smrf
from .frames import hostile_texts, hostile_values, multilevel_reply_tos, reply_tos, valid_message

HOPS_KEY = CUSTOM_HEADER_PREFIX + HOPS_HEADER
REQUEST_REPLY_ID_KEY = CUSTOM_HEADER_PREFIX + CUSTOM_HEADER_REQUEST_REPLY_ID
# The hostile parts, by layer. The header and body parts change the frame's fields, which
# are then written again; the table and prefix parts change the bytes.
HEADER_PARTS = ("header-text", "routing-text", "missing", "repeated", "unknown-key", "custom-key", "type",
                "ttl", "hops", "reply-to")
BODY_PARTS = ("json", "fields", "compressed", "bomb")
TABLE_PARTS = ("flip", "offset", "vtable", "truncate")
PREFIX_PARTS = ("version", "sizes")
PARTS = HEADER_PARTS + BODY_PARTS + TABLE_PARTS + PREFIX_PARTS

_MESSAGE_SLOTS = 10  # smrf.Message's fields, in schema order: see joynr_sim.wire.smrf
_U16, _U32 = struct.Struct("<H"), struct.Struct("<I")


def smrf_message(*, recipient: bytes | None, sender: bytes | None, ttl_ms: int | None,
                 bools: dict[int, int | None], headers: list[tuple[bytes | None, bytes | None]] | None,
                 body: bytes | None) -> bytes:
    """A smrf.Message buffer with exactly these fields, built with Google's flatbuffers
    Builder: a field given as None is left out (a header's key or value too), a key may come
    twice, ``bools`` are written by slot as the bytes given (a default too).
    Slots as in joynr_sim.wire.smrf: recipient 0, sender 1, ttlMs 2, ttlAbsolute 3, isSigned 4,
    isEncrypted 5, isCompressed 6, headers 7, body 8, isCustomSigned 9; smrf.Header key 0, value 1."""
    builder = flatbuffers.Builder(len(body or b"") + 64 * len(headers or ()) + 256)
    offsets = []
    for key, value in headers or []:
        key_at = builder.CreateString(key) if key is not None else None
        value_at = builder.CreateString(value) if value is not None else None
        builder.StartObject(2)
        for slot, at in ((0, key_at), (1, value_at)):
            if at is not None:
                builder.PrependUOffsetTRelativeSlot(slot, at, 0)
        offsets.append(builder.EndObject())
    builder.StartVector(4, len(offsets), 4)
    for offset in reversed(offsets):
        builder.PrependUOffsetTRelative(offset)
    headers_at = builder.EndVector()
    body_at = builder.CreateByteVector(body) if body is not None else None
    strings = [builder.CreateString(x) if x is not None else None for x in (recipient, sender)]
    builder.ForceDefaults(True)  # a field given is written, whatever its value: it is left out only by None
    builder.StartObject(_MESSAGE_SLOTS)
    for slot, at in enumerate(strings):
        if at is not None:
            builder.PrependUOffsetTRelativeSlot(slot, at, 0)
    if ttl_ms is not None:
        builder.PrependInt64Slot(2, ttl_ms, 0)
    for slot, value in bools.items():
        if value is not None:
            builder.PrependUint8Slot(slot, value, 0)
    if headers is not None:
        builder.PrependUOffsetTRelativeSlot(7, headers_at, 0)
    if body_at is not None:
        builder.PrependUOffsetTRelativeSlot(8, body_at, 0)
    builder.Finish(builder.EndObject())
    return bytes(builder.Output())


def _utf8(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")


def write_smrf(frame: SmrfFrame, headers: list[tuple[str, str]], body: bytes, *, compressed: bool) -> bytes:
    """``frame``'s fields with ``headers`` in this order (a key may come twice) and ``body``
    as it goes on the wire (not deflated here, whatever ``compressed`` says): what
    ``encode_smrf`` refuses to write is what a hostile sender writes."""
    table = smrf_message(recipient=_utf8(frame.recipient), sender=_utf8(frame.sender), ttl_ms=frame.ttl_ms,
                         bools={3: int(frame.ttl_absolute), 4: 0, 5: 0, 6: int(compressed)},
                         headers=[(_utf8(k), _utf8(v)) for k, v in headers], body=body)
    return PREFIX.pack(SMRF_VERSION, 0, len(table)) + table


@lru_cache(maxsize=4)
def zlib_bomb(inflated_mib: int) -> bytes:
    """A zlib stream of ``inflated_mib`` MiB of zeros: about a thousandth of that on the wire."""
    return zlib.compress(bytes(inflated_mib * 1024 * 1024), 9)


# -- the header map ------------------------------------------------------------------------

_joynr_keys = st.sampled_from([HEADER_TYPE, HEADER_ID, HEADER_ID, HEADER_REPLY_TO, HEADER_EFFORT, HEADER_CREATOR,
                               REQUEST_REPLY_ID_KEY, HOPS_KEY])
_present_keys = st.sampled_from([HEADER_TYPE, HEADER_ID, HEADER_REPLY_TO, REQUEST_REPLY_ID_KEY])
_unknown_keys = st.sampled_from(["from", "to", "ttl", "x", "", "c", "C-z4", "ID", " id", "id\x00", "re\n"]) | \
    hostile_texts.filter(lambda key: not key.startswith(CUSTOM_HEADER_PREFIX))
_types = st.sampled_from(sorted(MESSAGE_TYPES)) | st.sampled_from(["RQ", "request", "rq ", "q"]) | hostile_texts
_efforts = st.sampled_from(["BEST_EFFORT", "normal", "", "FIRE_AND_FORGET"]) | hostile_texts
_ttls = st.sampled_from([0, -1, INT64_MIN, INT64_MAX, 2**62 + 1, 2**62])
_hops = st.sampled_from(["-1", "01", "00", "1024", "1025", "4294967296", " 1", "1 ", "1e3", "+1", "\u0661", "0x1"]) \
    | hostile_texts
_reply_tos = reply_tos() | multilevel_reply_tos | hostile_texts


def _set(headers: list[tuple[str, str]], key: str, value: str) -> None:
    headers[:] = [(k, v) for k, v in headers if k != key] + [(key, value)]


def _header_part(draw: st.DrawFn, part: str, frame: dict[str, Any], headers: list[tuple[str, str]]) -> None:
    if part == "header-text":
        _set(headers, draw(_joynr_keys), draw(hostile_texts))
    elif part == "routing-text":
        frame[draw(st.sampled_from(["sender", "recipient"]))] = draw(hostile_texts)
    elif part == "missing":
        key = draw(_present_keys)
        headers[:] = [(k, v) for k, v in headers if k != key]
    elif part == "repeated":
        key = draw(_present_keys)
        value = dict(headers).get(key, "")
        headers.append((key, draw(st.just(value) | hostile_texts)))
    elif part == "unknown-key":
        headers.append((draw(_unknown_keys), draw(st.just("1") | hostile_texts)))
    elif part == "custom-key":
        count = draw(st.sampled_from([1, 1, 1, 40]))  # 40: past WireLimits.max_headers
        names = [draw(hostile_texts) for _ in range(count)] if count == 1 else [f"k{n}" for n in range(count)]
        headers.extend((CUSTOM_HEADER_PREFIX + name, "v") for name in names)
    elif part == "type":
        key = draw(st.sampled_from([HEADER_TYPE, HEADER_EFFORT]))
        _set(headers, key, draw(_types if key == HEADER_TYPE else _efforts))
    elif part == "ttl":
        if draw(st.booleans()):
            frame["ttl_absolute"] = False
        else:
            frame["ttl_ms"] = draw(_ttls)
    elif part == "hops":
        _set(headers, HOPS_KEY, draw(_hops))
    elif part == "reply-to":
        _set(headers, HEADER_REPLY_TO, draw(_reply_tos))


# -- the body ------------------------------------------------------------------------------

_not_joynr_json = st.sampled_from([
    b"", b"null", b"[]", b"{}", b"0", b'"joynr.Request"', b"NaN", b'{"a":1,"a":2}', b"[" * 10_000, b"{" * 5_000,
    b'{"_typeName":"joynr.Reply"}', b'{"_typeName":null}', b'{"_typeName":["joynr.Request"]}', b"1e999",
    b'{"_typeName":"joynr.Request","methodName":"echo","params":["\\ud800"],"paramDatatypes":["String"]}',
    b"\xff\xfe{}", b'{"_typeName":"joynr.Request"}\x00', b"\x82\xa1m\xa4echo\xa1p\x91\xa2fz",  # the default wire's
]) | st.binary(max_size=64)
_request_fields = ("_typeName", "methodName", "paramDatatypes", "params", "requestReplyId")
_field_values = hostile_values | st.sampled_from(["joynr.Reply", "joynr.OneWayRequest", "joynr.SubscriptionStop"]) \
    | st.lists(hostile_values, max_size=3)
_changes = st.sampled_from(["set", "set", "delete", "add"])


def _hostile_fields(draw: st.DrawFn, body: bytes) -> bytes:
    request = json.loads(body)
    for _ in range(draw(st.integers(1, 2))):
        change = draw(_changes)
        if change == "delete":
            request.pop(draw(st.sampled_from(_request_fields)), None)
        elif change == "add":
            request[draw(hostile_texts)] = draw(_field_values)
        else:
            request[draw(st.sampled_from(_request_fields))] = draw(_field_values)
    # repr for what JSON has no form for (bytes); NaN is written as the NaN joynr refuses.
    return json.dumps(request, default=repr).encode("utf-8", "surrogatepass")


def _compressed_garbage(draw: st.DrawFn, body: bytes) -> bytes:
    stream = zlib.compress(body)
    kind = draw(st.integers(0, 4))
    if kind == 0:
        return draw(st.binary(max_size=64))
    if kind == 1:
        return stream[:draw(st.integers(0, len(stream) - 1))]  # ends early
    if kind == 2:
        return stream + draw(st.binary(min_size=1, max_size=8))  # bytes after the stream
    if kind == 3:
        at = draw(st.integers(0, len(stream) - 1))
        return stream[:at] + bytes([stream[at] ^ (1 << draw(st.integers(0, 7)))]) + stream[at + 1:]
    return zlib.compress(draw(_not_joynr_json))


# -- the bytes -----------------------------------------------------------------------------

_u32s = st.sampled_from([0, 1, 3, 4, 0x7FFFFFFF, 0x80000000, 0xFFFFFFFF, 0xFFFFFFFC])
_u16s = st.sampled_from([0, 1, 2, 3, 4, 5, 0x8000, 0xFFFF])


def _table_part(draw: st.DrawFn, part: str, data: bytearray) -> bytearray:
    table = len(data) - PREFIX.size
    if part == "flip":
        for _ in range(draw(st.integers(1, 8))):
            at = PREFIX.size + draw(st.integers(0, table - 1))
            data[at] ^= 1 << draw(st.integers(0, 7))
    elif part == "truncate":
        data = data[:PREFIX.size + draw(st.integers(0, table - 1))]
        if draw(st.booleans()):  # a prefix that tells the truth about the shorter table
            data[4:8] = _U32.pack(len(data) - PREFIX.size)
    elif part == "offset":
        at = PREFIX.size + 4 * draw(st.integers(0, table // 4 - 1))  # the root offset is the first
        data[at:at + 4] = _U32.pack(draw(_u32s | st.integers(0, table + 8)))
    elif part == "vtable":
        # Where the root table and its vtable are, unless a part before moved them out of the frame.
        root = PREFIX.size + _U32.unpack_from(data, PREFIX.size)[0]
        if root + 4 > len(data):
            return data
        vtable = root - struct.unpack_from("<i", data, root)[0]
        entry = draw(st.integers(-2, 1 + _MESSAGE_SLOTS))  # -2: the table's offset to its vtable
        if entry == -2:
            data[root:root + 4] = struct.pack("<i", draw(st.sampled_from([0, -4, 4, 2**31 - 1, -(2**31), 7])))
        elif PREFIX.size <= vtable + 2 * entry and vtable + 2 * entry + 2 <= len(data):
            data[vtable + 2 * entry:vtable + 2 * entry + 2] = _U16.pack(draw(_u16s))
    return data


def _prefix_part(draw: st.DrawFn, part: str, data: bytearray) -> bytearray:
    if part == "version":
        data[0:2] = _U16.pack(draw(st.sampled_from([0, 2, 256, 0xFFFF])))
        return data
    kind = draw(st.integers(0, 3))
    if kind == 0:
        data[2:4] = _U16.pack(draw(st.sampled_from([1, 8, 0xFFFF])))  # a signature nobody signed
    elif kind == 1:
        size = len(data) - PREFIX.size
        data[4:8] = _U32.pack(draw(st.sampled_from([0, 1, size - 1, size + 1, 0xFFFFFFFF])))
    elif kind == 2:
        data += draw(st.binary(min_size=1, max_size=16))
    else:
        data = data[:draw(st.integers(0, PREFIX.size - 1))]
    return data


# -- the frames ----------------------------------------------------------------------------

_only_reply_to = st.integers(0, 19).map(lambda n: n == 0)  # one frame in 20, as in frames
_compressed_valid = st.integers(0, 19).map(lambda n: n == 0)  # one in 20: a valid compressed body
# The header map is what a decoder judges value by value: it comes up most often.
_parts = st.sets(st.sampled_from(PARTS + HEADER_PARTS + ("fields",)), min_size=1, max_size=3)
_bombs = st.sampled_from([2, 16])  # MiB inflated: past the simulator's frame bound and far past it


@st.composite
def hostile_joynr_frames(draw: st.DrawFn, recipients: list[str],
                         parts: st.SearchStrategy[set[str]] | None = None) -> bytes:
    """A joynr-wire frame addressed to one of ``recipients`` (or a hostile recipient), with
    one to three parts hostile; ``parts`` draws which (of ``PARTS``) instead of the mix of
    a run, for a look at one layer."""
    msg = valid_message(recipients[draw(st.integers(0, len(recipients) - 1))])
    valid = codec(JOYNR).encode(msg)
    if parts is None and draw(_compressed_valid):
        # A request joynr compressed: valid, so some frames on this wire are messages.
        parsed = decode_smrf(valid)
        return write_smrf(parsed, list(parsed.headers), zlib.compress(parsed.body), compressed=True)
    if parts is not None:
        chosen = draw(parts)
    elif draw(_only_reply_to):
        chosen = {"reply-to-only"}
    else:
        chosen = draw(_parts)
    data = bytearray(valid)
    if chosen & {*HEADER_PARTS, *BODY_PARTS, "reply-to-only"}:
        parsed = decode_smrf(valid)
        frame = {"recipient": parsed.recipient, "sender": parsed.sender, "ttl_ms": parsed.ttl_ms,
                 "ttl_absolute": parsed.ttl_absolute}
        headers, body, compressed = list(parsed.headers), parsed.body, False
        if "reply-to-only" in chosen:
            _set(headers, HEADER_REPLY_TO, draw(multilevel_reply_tos))
        for part in sorted(chosen & set(HEADER_PARTS)):
            _header_part(draw, part, frame, headers)
        if "fields" in chosen:
            body = _hostile_fields(draw, body)
        if "json" in chosen:
            body = draw(_not_joynr_json)
        if "compressed" in chosen:
            body, compressed = _compressed_garbage(draw, body), True
        if "bomb" in chosen:
            body, compressed = zlib_bomb(draw(_bombs)), True
        data = bytearray(write_smrf(SmrfFrame(**frame), headers, body, compressed=compressed))
    for part in TABLE_PARTS:  # in this order: a cut comes last, after the parts that look for offsets
        if part in chosen:
            data = _table_part(draw, part, data)
    for part in sorted(chosen & set(PREFIX_PARTS)):
        data = _prefix_part(draw, part, data)
    return bytes(data)


def _headers(frame: bytes) -> dict[str, str] | None:
    try:
        return dict(decode_smrf(frame).headers)
    except MessageDecodeError:
        return None


def frame_key(frame: bytes) -> tuple[str, int] | None:
    """The id and hop count of a frame whose SMRF decodes, as a runtime would trace them."""
    headers = _headers(frame)
    if headers is None or HEADER_ID not in headers:
        return None
    hops = headers.get(HOPS_KEY, "0")
    return headers[HEADER_ID], int(hops) if hops.isascii() and hops.isdigit() else 0


def reply_topic(frame: bytes) -> str | None:
    """The topic of a frame's replyTo when it is an MqttAddress with a string topic."""
    try:
        address = json.loads((_headers(frame) or {})[HEADER_REPLY_TO])
        topic = address["topic"]
    except Exception:
        return None
    return topic if isinstance(topic, str) and str(address.get("_typeName", "")).endswith(".MqttAddress") else None
