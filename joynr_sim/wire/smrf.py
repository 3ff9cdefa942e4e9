"""SMRF ("simple message routing format"), the frame joynr sends every message in.

A frame is an 8-byte prefix, a FlatBuffers buffer and an optional signature:

    uint16 LE version (1) | uint16 LE signature size | uint32 LE FlatBuffers size
    smrf.Message { recipient: string; sender: string; ttlMs: long;
                   ttlAbsolute: bool = true; isSigned: bool = true; isEncrypted: bool = true;
                   isCompressed: bool = false; headers: [Header]; body: [ubyte];
                   isCustomSigned: bool = false }
    smrf.Header  { key: string (key, so required); value: string }

(bmwcarit/smrf: schema/smrf.fbs, cpp/libsmrf/MessagePrefix.h.) A compressed body is a
zlib stream of the body. The header vector is sorted by key, as joynr's Java and C++
serialisers write it (``createSortedVectorOfTables``), so a reader may search it by key.

Decoding checks what the FlatBuffers runtime does not: every offset, vtable and length
is in bounds and aligned before it is read (as flatbuffers' C++ Verifier, which joynr's
C++ runtime runs on every frame), strings are NUL-terminated UTF-8, a compressed body
inflates to at most ``SmrfLimits.max_body_bytes``. A bad frame raises ``SmrfDecodeError``
naming the field, never IndexError, struct.error or zlib.error.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache

from ..core.limits import preview
from ..core.message import MessageDecodeError

# joynr.messaging.maxmessagesize, "the maximum length of a message the WebSocket transport is
# able to send/receive" (bmwcarit/joynr java/messaging/messaging-common/src/main/resources/
# defaultMessaging.properties): the largest frame a joynr runtime accepts by default.
JOYNR_MAX_MESSAGE_SIZE = 4_000_000

SMRF_VERSION = 1
PREFIX = struct.Struct("<HHI")  # version, signature size, FlatBuffers size
MAX_SIGNATURE_BYTES = 0xFFFF  # the prefix keeps the signature size in 16 bits
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1

# The vtable slots of smrf.Message and smrf.Header, in schema order.
_RECIPIENT, _SENDER, _TTL_MS, _TTL_ABSOLUTE, _IS_SIGNED, _IS_ENCRYPTED = range(6)
_IS_COMPRESSED, _HEADERS, _BODY, _IS_CUSTOM_SIGNED = range(6, 10)
_MESSAGE_SLOTS = 10
_KEY, _VALUE = 0, 1

_U32 = struct.Struct("<I")
_I32 = struct.Struct("<i")
_I64 = struct.Struct("<q")


class SmrfDecodeError(MessageDecodeError):
    """Bytes that are not a SMRF frame this simulator accepts; ``field`` names the part
    (``version``, ``msgSize``, ``headers[2].key``, ``body``, ...)."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(field, message)
        self.detail = message  # kept, so that a header's error can be named by its index


@dataclass(frozen=True)
class SmrfLimits:
    max_frame_bytes: int = JOYNR_MAX_MESSAGE_SIZE
    # A compressed body, inflated. joynr inflates without a bound; here no more than the
    # largest frame joynr would carry uncompressed, so a small frame cannot claim memory.
    max_body_bytes: int = JOYNR_MAX_MESSAGE_SIZE
    # joynr sets none; this bounds the work one frame can ask for (the joynr layer bounds
    # the custom headers by WireLimits.max_headers).
    max_headers: int = 256


DEFAULT_SMRF_LIMITS = SmrfLimits()


@dataclass(frozen=True)
class SmrfFrame:
    recipient: str
    sender: str
    ttl_ms: int  # absolute (ms since the epoch) when ttl_absolute, else relative
    ttl_absolute: bool = True
    headers: tuple[tuple[str, str], ...] = ()  # decoded in wire order; keys unique
    body: bytes = b""  # as the application sees it: inflated when compressed
    compressed: bool = False
    # A custom signature (isCustomSigned) over the FlatBuffers bytes; joynr verifies none.
    signature: bytes | None = None


# -- encoding -------------------------------------------------------------------------
#
# One schema, so one layout, written front to back in one pass (flatbuffers.Builder, generic,
# cost ten times as much: hundreds of Prep/Place calls per frame). Every uoffset points
# forward, as FlatBuffers' are unsigned; every field is written, the defaults too:
#
#   0   root uoffset -> 32
#   4   smrf.Message vtable: 24 bytes, 36-byte table; then 4 bytes so that ttlMs is 8-aligned
#   32  smrf.Message: soffset, recipient, ttlMs, sender, headers, body, the five bools
#   68  the header vector: count, a uoffset per header table; the smrf.Header vtable (8 bytes)
#       shared by the header tables; the tables: soffset, key, value (12 bytes each)
#       the strings: recipient, sender, then each header's key and value
#       the body vector last, so a frame's size is its body's plus a constant

_MESSAGE_VTABLE = (24, 36, 4, 16, 8, 28, 29, 30, 31, 20, 24, 32)  # sizes, then offsets by slot
_HEAD = struct.Struct("<HHI" "I12H4x" "iIqIIIBBBBB3x")  # prefix, root, vtable, smrf.Message
_TABLE, _RECIPIENT_AT, _SENDER_AT, _HEADERS_AT, _BODY_AT = 32, 36, 48, 52, 56
_HEADER_VECTOR = 68
_HEADER_VTABLE = (8, 12, 4, 8)
_ZEROS = (b"", b"\0", b"\0\0", b"\0\0\0", b"\0\0\0\0")


@lru_cache(maxsize=64)
def _header_section(count: int) -> struct.Struct:
    """The header vector, the header vtable and the header tables, for ``count`` headers."""
    return struct.Struct(f"<I{count}I4H" + "iII" * count)


def encode_smrf(frame: SmrfFrame) -> bytes:
    """The frame's bytes. Raises ValueError for a frame SMRF cannot carry (a duplicate
    header key, a ttl outside int64, a signature over 65535 bytes, a string that is not
    UTF-8)."""
    return encode_fields(frame.recipient, frame.sender, frame.ttl_ms, frame.ttl_absolute, frame.headers, frame.body,
                         frame.compressed, frame.signature)


def encode_fields(recipient: str, sender: str, ttl_ms: int, ttl_absolute: bool, headers: Iterable[tuple[str, str]],
                  body: bytes, compressed: bool = False, signature: bytes | None = None) -> bytes:
    """``encode_smrf`` of the SmrfFrame of these fields, without making one (joynr.py sends
    every message through here)."""
    if not INT64_MIN <= ttl_ms <= INT64_MAX:
        raise ValueError(f"ttl_ms {ttl_ms} does not fit SMRF's int64 ttlMs")
    if signature is not None and len(signature) > MAX_SIGNATURE_BYTES:
        raise ValueError(f"signature of {len(signature)} bytes, SMRF's prefix holds at most {MAX_SIGNATURE_BYTES}")
    # Sorted by key, as joynr's serialisers write them (createSortedVectorOfTables).
    headers = sorted([(key.encode("utf-8"), value.encode("utf-8")) for key, value in headers])
    body = zlib.compress(body) if compressed else bytes(body)

    # The strings are placed after the header tables, each a uint32 length, the bytes, a NUL
    # and zeros up to the next multiple of 4 (pad: 1 to 4 bytes).
    count = len(headers)
    table = _HEADER_VECTOR + 4 + 4 * count + 8  # the first header table, after the header vtable
    at = table + 12 * count
    parts = [b"", b""]  # the head and the header section, once every string is placed
    places = []
    for text in (recipient.encode("utf-8"), sender.encode("utf-8")):
        places.append(at)
        size = len(text)
        pad = 4 - (size & 3)
        parts += (_U32.pack(size), text, _ZEROS[pad])
        at += 4 + size + pad
    # Vector entry n (at 72 + 4n) points to table n (at the first table + 12n); table n's
    # soffset to the shared vtable is 8 + 12n.
    fields = [count, *range(table - _HEADER_VECTOR - 4, table - _HEADER_VECTOR - 4 + 8 * count, 8), *_HEADER_VTABLE]
    soffset = 8
    previous = None
    for key, value in headers:
        if key == previous:
            raise ValueError(f"header key {key.decode()!r} twice: SMRF's headers are a map")
        previous = key
        size = len(key)
        pad = 4 - (size & 3)
        value_at = at + 4 + size + pad
        parts += (_U32.pack(size), key, _ZEROS[pad])
        fields += (soffset, at - table - 4, value_at - table - 8)
        size = len(value)
        pad = 4 - (size & 3)
        parts += (_U32.pack(size), value, _ZEROS[pad])
        at = value_at + 4 + size + pad
        table += 12
        soffset += 12
    sig = signature or b""
    parts[0] = _HEAD.pack(
        SMRF_VERSION, len(sig), at + 4 + len(body), _TABLE, *_MESSAGE_VTABLE,
        _TABLE - 4, places[0] - _RECIPIENT_AT, ttl_ms, places[1] - _SENDER_AT, _HEADER_VECTOR - _HEADERS_AT,
        at - _BODY_AT, ttl_absolute, False, False, compressed, signature is not None)
    parts[1] = _header_section(count).pack(*fields)
    parts += (_U32.pack(len(body)), body, sig)
    return b"".join(parts)


# -- decoding -------------------------------------------------------------------------
#
# Positions are into the whole frame; the FlatBuffers buffer is data[_BASE:end]. _BASE (8)
# is a multiple of every alignment checked, so a position is aligned in the frame exactly
# when it is in the buffer, as the C++ Verifier checks it. Every read is preceded by the
# check that it is in bounds; each table and vtable is checked once, and a table's fields
# are then read within it.

_BASE = PREFIX.size
_SIZES = struct.Struct("<HH")  # a vtable's own size and its table's
_SLOTS = tuple(struct.Struct(f"<{n}H") for n in range(_MESSAGE_SLOTS + 1))
# smrf.Message's bools by slot, with the schema's default, each checked before any is used.
_BOOLS = ((_IS_ENCRYPTED, True, "isEncrypted"), (_IS_SIGNED, True, "isSigned"),
          (_IS_CUSTOM_SIGNED, False, "isCustomSigned"), (_IS_COMPRESSED, False, "isCompressed"),
          (_TTL_ABSOLUTE, True, "ttlAbsolute"))


@lru_cache(maxsize=64)
def _uoffsets(count: int) -> struct.Struct:
    return struct.Struct(f"<{count}I")


def _outside(field: str, pos: int, width: int, end: int) -> SmrfDecodeError:
    return SmrfDecodeError(field, f"offset {pos - _BASE} (+{width}) outside the {end - _BASE}-byte buffer")


def _unaligned(field: str, pos: int, align: int) -> SmrfDecodeError:
    return SmrfDecodeError(field, f"offset {pos - _BASE} not aligned to {align}")


def _table(data: bytes, pos: int, end: int, field: str) -> tuple[int, int, int]:
    """(vtable, vtable size, table size) of the table at ``pos``, both in bounds."""
    if pos < _BASE or pos + 4 > end:
        raise _outside(field, pos, 4, end)
    if pos & 3:
        raise _unaligned(field, pos, 4)
    vtable = pos - _I32.unpack_from(data, pos)[0]
    if vtable < _BASE or vtable + 4 > end:
        raise _outside(f"{field} vtable", vtable, 4, end)
    if vtable & 1:
        raise _unaligned(f"{field} vtable", vtable, 2)
    vt_size, obj_size = _SIZES.unpack_from(data, vtable)
    if vt_size < 4 or vt_size & 1:
        raise SmrfDecodeError(field, f"vtable size {vt_size}")
    if vtable + vt_size > end:
        raise _outside(f"{field} vtable", vtable, vt_size, end)
    if obj_size < 4:
        raise SmrfDecodeError(field, f"table size {obj_size}")
    if pos + obj_size > end:
        raise _outside(field, pos, obj_size, end)
    return vtable, vt_size, obj_size


def _field(offset: int, width: int, align: int, pos: int, obj_size: int, field: str) -> int:
    """The position of a field at ``offset`` (not 0: present) in the table at ``pos``."""
    if offset < 4 or offset + width > obj_size:
        raise SmrfDecodeError(field, f"field at {offset} (+{width}) outside its {obj_size}-byte table")
    pos += offset
    if pos & (align - 1):
        raise _unaligned(field, pos, align)
    return pos


def _vector(data: bytes, at: int, elem_size: int, end: int, field: str) -> tuple[int, int]:
    """(start of the elements, count) of the vector the uoffset at ``at`` (checked) points to."""
    start = at + _U32.unpack_from(data, at)[0]
    if start + 4 > end:
        raise _outside(field, start, 4, end)
    if start & 3:
        raise _unaligned(field, start, 4)
    count = _U32.unpack_from(data, start)[0]
    start += 4
    if start + count * elem_size > end:
        raise _outside(field, start, count * elem_size, end)
    return start, count


def _string(data: bytes, at: int, end: int, field: str) -> str:
    """The string the uoffset at ``at`` (in bounds and aligned) points to."""
    start = at + _U32.unpack_from(data, at)[0] + 4  # its bytes, after their uint32 length
    if start > end or start & 3:
        raise (_outside(field, start - 4, 4, end) if start > end else _unaligned(field, start - 4, 4))
    stop = start + _U32.unpack_from(data, start - 4)[0]
    if stop >= end or data[stop]:
        raise (_outside(field, start, stop - start, end) if stop > end
               else SmrfDecodeError(field, "string without its terminating NUL"))
    try:
        return data[start:stop].decode("utf-8")
    except UnicodeDecodeError:
        raise SmrfDecodeError(field, f"not UTF-8: {preview(data[start:stop])}") from None


def _inflate(data: bytes, limits: SmrfLimits) -> bytes:
    inflater = zlib.decompressobj()
    try:
        body = inflater.decompress(data, limits.max_body_bytes + 1)
    except zlib.error as exc:
        raise SmrfDecodeError("body", f"not a zlib stream: {exc}") from None
    if len(body) > limits.max_body_bytes:
        raise SmrfDecodeError("body", f"inflates to more than {limits.max_body_bytes} bytes")
    if not inflater.eof:
        raise SmrfDecodeError("body", "the zlib stream ends early")
    if inflater.unused_data:
        raise SmrfDecodeError("body", f"{len(inflater.unused_data)} bytes after the zlib stream")
    return body


def decode_smrf(data: bytes, limits: SmrfLimits = DEFAULT_SMRF_LIMITS) -> SmrfFrame:
    """The frame in ``data``, every part checked; anything else raises SmrfDecodeError."""
    return SmrfFrame(*decode_fields(data, limits))


def decode_fields(data: bytes, limits: SmrfLimits = DEFAULT_SMRF_LIMITS) -> tuple[
        str, str, int, bool, tuple[tuple[str, str], ...], bytes, bool, bytes | None]:
    """``decode_smrf``'s frame as the tuple of its fields, in SmrfFrame's order, without
    making the frame (joynr.py reads every message through here)."""
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise SmrfDecodeError("frame", f"expected bytes, got {type(data).__name__}")
    data = bytes(data)
    if len(data) > limits.max_frame_bytes:
        raise SmrfDecodeError("frame", f"{len(data)} bytes, at most {limits.max_frame_bytes}")
    if len(data) < PREFIX.size:
        raise SmrfDecodeError("prefix", f"{len(data)} bytes, the prefix alone is {PREFIX.size}")
    version, sig_size, msg_size = PREFIX.unpack_from(data)
    if version != SMRF_VERSION:
        raise SmrfDecodeError("version", f"unsupported SMRF version {version}")
    if PREFIX.size + msg_size > len(data):
        raise SmrfDecodeError("msgSize", f"{msg_size} bytes of message, {len(data) - PREFIX.size} after the prefix")
    if PREFIX.size + msg_size + sig_size != len(data):
        raise SmrfDecodeError("sigSize", f"{sig_size} bytes of signature, {len(data) - PREFIX.size - msg_size} "
                                         "after the message")
    end = _BASE + msg_size
    if end < _BASE + 4:
        raise _outside("root", _BASE, 4, end)
    pos = _BASE + _U32.unpack_from(data, _BASE)[0]
    vtable, vt_size, obj_size = _table(data, pos, end, "root")
    slots = min(_MESSAGE_SLOTS, (vt_size - 4) >> 1)
    offsets = _SLOTS[slots].unpack_from(data, vtable + 4) + (0,) * (_MESSAGE_SLOTS - slots)

    flags = []
    for slot, default, field in _BOOLS:
        offset = offsets[slot]
        if not offset:
            flags.append(default)
            continue
        value = data[_field(offset, 1, 1, pos, obj_size, field)]
        if value > 1:
            raise SmrfDecodeError(field, f"a bool is 0 or 1, got {value}")
        flags.append(value == 1)
    encrypted, signed, custom_signed, compressed, ttl_absolute = flags
    if encrypted:
        raise SmrfDecodeError("isEncrypted", "an encrypted body is not supported (nor by any SMRF library)")
    if signed:
        raise SmrfDecodeError("isSigned", "a CMS signature is not supported (nor by any SMRF library)")
    if sig_size and not custom_signed:
        raise SmrfDecodeError("sigSize", f"{sig_size} bytes of signature on a frame that is not signed")
    offset = offsets[_TTL_MS]
    ttl_ms = _I64.unpack_from(data, _field(offset, 8, 8, pos, obj_size, "ttlMs"))[0] if offset else 0
    strings = []
    for slot, field in ((_RECIPIENT, "recipient"), (_SENDER, "sender")):
        if not offsets[slot]:
            raise SmrfDecodeError(field, "missing")
        strings.append(_string(data, _field(offsets[slot], 4, 4, pos, obj_size, field), end, field))
    offset = offsets[_HEADERS]
    headers = _headers(data, _field(offset, 4, 4, pos, obj_size, "headers"), end, limits) if offset else ()

    offset = offsets[_BODY]
    if not offset:  # joynr's C++ writes no body vector for an empty body
        body = b""
    else:
        start, length = _vector(data, _field(offset, 4, 4, pos, obj_size, "body"), 1, end, "body")
        body = data[start:start + length]
        if compressed:
            body = _inflate(body, limits)
    return (strings[0], strings[1], ttl_ms, ttl_absolute, headers, body, compressed,
            data[end:] if custom_signed else None)


def _headers(data: bytes, at: int, end: int, limits: SmrfLimits) -> tuple[tuple[str, str], ...]:
    start, count = _vector(data, at, 4, end, "headers")
    if count > limits.max_headers:
        raise SmrfDecodeError("headers", f"{count} headers, at most {limits.max_headers}")
    headers: list[tuple[str, str]] = []
    checked = -1  # the vtable last checked: header tables share one, as every serialiser writes them
    for n, target in enumerate(_uoffsets(count).unpack_from(data, start)):
        pos = start + 4 * n + target
        # Errors are named ".key" ... here, their header's index added below, only for them.
        try:
            if pos + 4 > end or pos & 3:
                raise _outside("", pos, 4, end) if pos + 4 > end else _unaligned("", pos, 4)
            if pos - _I32.unpack_from(data, pos)[0] != checked:
                checked, vt_size, obj_size = _table(data, pos, end, "")
                key_offset, value_offset = (_SLOTS[min(2, (vt_size - 4) >> 1)].unpack_from(data, checked + 4)
                                            + (0, 0))[:2]
                # A missing value is null to joynr's Java and a dropped header to its C++: refused,
                # as is a key twice (the Java and JavaScript readers keep the last, C++ the first).
                for offset, field in ((key_offset, ".key"), (value_offset, ".value")):
                    if not offset:
                        raise SmrfDecodeError(field, "missing")
                    _field(offset, 4, 4, pos, obj_size, field)  # here once for every table of this vtable
            elif pos + obj_size > end:  # the vtable is known good; this table's own extent is not
                raise _outside("", pos, obj_size, end)
            headers.append((_string(data, pos + key_offset, end, ".key"),
                            _string(data, pos + value_offset, end, ".value")))
        except SmrfDecodeError as exc:
            raise SmrfDecodeError(f"headers[{n}]{exc.field}", exc.detail) from None
    if len({key for key, _ in headers}) != count:  # a key twice: named where it comes again
        seen: set[str] = set()
        for n, (key, _) in enumerate(headers):
            if key in seen:
                raise SmrfDecodeError(f"headers[{n}].key", f"header {preview(key)} twice")
            seen.add(key)
    return tuple(headers)
