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
from dataclasses import dataclass

import flatbuffers

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

_U16 = struct.Struct("<H")
_U32 = struct.Struct("<I")
_I32 = struct.Struct("<i")
_I64 = struct.Struct("<q")


class SmrfDecodeError(MessageDecodeError):
    """Bytes that are not a SMRF frame this simulator accepts; ``field`` names the part
    (``version``, ``msgSize``, ``headers[2].key``, ``body``, ...)."""


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


def encode_smrf(frame: SmrfFrame) -> bytes:
    """The frame's bytes. Raises ValueError for a frame SMRF cannot carry (a duplicate
    header key, a ttl outside int64, a signature over 65535 bytes, a string that is not
    UTF-8)."""
    if not INT64_MIN <= frame.ttl_ms <= INT64_MAX:
        raise ValueError(f"ttl_ms {frame.ttl_ms} does not fit SMRF's int64 ttlMs")
    signature = frame.signature
    if signature is not None and len(signature) > MAX_SIGNATURE_BYTES:
        raise ValueError(f"signature of {len(signature)} bytes, SMRF's prefix holds at most {MAX_SIGNATURE_BYTES}")
    headers = sorted(((key.encode("utf-8"), value.encode("utf-8")) for key, value in frame.headers),
                     key=lambda kv: kv[0])
    for (key, _), (next_key, _) in zip(headers, headers[1:]):
        if key == next_key:
            raise ValueError(f"header key {key.decode()!r} twice: SMRF's headers are a map")
    body = zlib.compress(frame.body) if frame.compressed else frame.body

    builder = flatbuffers.Builder(len(body) + 64 * len(headers) + 256)
    header_offsets = []
    for key, value in headers:
        key_offset, value_offset = builder.CreateString(key), builder.CreateString(value)
        builder.StartObject(2)
        builder.PrependUOffsetTRelativeSlot(_KEY, key_offset, 0)
        builder.PrependUOffsetTRelativeSlot(_VALUE, value_offset, 0)
        header_offsets.append(builder.EndObject())
    builder.StartVector(4, len(header_offsets), 4)
    for offset in reversed(header_offsets):
        builder.PrependUOffsetTRelative(offset)
    headers_offset = builder.EndVector()
    # Always a body vector, even an empty one: smrf's JavaScript reader fails on a frame
    # without one (Buffer.from(null)).
    body_offset = builder.CreateByteVector(bytes(body))
    recipient = builder.CreateString(frame.recipient.encode("utf-8"))
    sender = builder.CreateString(frame.sender.encode("utf-8"))

    builder.StartObject(_MESSAGE_SLOTS)
    builder.PrependUOffsetTRelativeSlot(_RECIPIENT, recipient, 0)
    builder.PrependUOffsetTRelativeSlot(_SENDER, sender, 0)
    builder.PrependInt64Slot(_TTL_MS, frame.ttl_ms, 0)
    builder.PrependBoolSlot(_TTL_ABSOLUTE, frame.ttl_absolute, True)
    # isSigned and isEncrypted default to true in the schema: false is written, as every
    # SMRF serialiser does.
    builder.PrependBoolSlot(_IS_SIGNED, False, True)
    builder.PrependBoolSlot(_IS_ENCRYPTED, False, True)
    builder.PrependBoolSlot(_IS_COMPRESSED, frame.compressed, False)
    builder.PrependUOffsetTRelativeSlot(_HEADERS, headers_offset, 0)
    builder.PrependUOffsetTRelativeSlot(_BODY, body_offset, 0)
    builder.PrependBoolSlot(_IS_CUSTOM_SIGNED, signature is not None, False)
    builder.Finish(builder.EndObject())
    message = builder.Output()
    sig = signature or b""
    return PREFIX.pack(SMRF_VERSION, len(sig), len(message)) + message + sig


# -- decoding -------------------------------------------------------------------------


class _Buffer:
    """A FlatBuffers buffer read with every position checked first; positions are from
    the buffer's start, as the C++ Verifier's alignment checks are."""

    __slots__ = ("data", "size")

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.size = len(data)

    def _at(self, pos: int, width: int, align: int, field: str) -> None:
        if pos < 0 or pos + width > self.size:
            raise SmrfDecodeError(field, f"offset {pos} (+{width}) outside the {self.size}-byte buffer")
        if pos % align:
            raise SmrfDecodeError(field, f"offset {pos} not aligned to {align}")

    def u8(self, pos: int, field: str) -> int:
        self._at(pos, 1, 1, field)
        return self.data[pos]

    def u16(self, pos: int, field: str) -> int:
        self._at(pos, 2, 2, field)
        return _U16.unpack_from(self.data, pos)[0]

    def u32(self, pos: int, field: str) -> int:
        self._at(pos, 4, 4, field)
        return _U32.unpack_from(self.data, pos)[0]

    def i64(self, pos: int, field: str) -> int:
        self._at(pos, 8, 8, field)
        return _I64.unpack_from(self.data, pos)[0]

    def table(self, pos: int, field: str) -> _Table:
        self._at(pos, 4, 4, field)
        vtable = pos - _I32.unpack_from(self.data, pos)[0]
        vt_size = self.u16(vtable, f"{field} vtable")
        obj_size = self.u16(vtable + 2, f"{field} vtable")
        if vt_size < 4 or vt_size % 2:
            raise SmrfDecodeError(field, f"vtable size {vt_size}")
        self._at(vtable, vt_size, 2, f"{field} vtable")
        if obj_size < 4:
            raise SmrfDecodeError(field, f"table size {obj_size}")
        self._at(pos, obj_size, 4, field)
        return _Table(self, pos, vtable, vt_size, obj_size, field)

    def target(self, pos: int, field: str) -> int:
        """Where the uoffset at ``pos`` points."""
        return pos + self.u32(pos, field)

    def vector(self, pos: int, elem_size: int, field: str) -> tuple[int, int]:
        """(start of the elements, count) of the vector the uoffset at ``pos`` points to."""
        start = self.target(pos, field)
        count = self.u32(start, field)
        self._at(start + 4, count * elem_size, 1, field)
        return start + 4, count

    def string(self, pos: int, field: str) -> str:
        start, length = self.vector(pos, 1, field)
        if start + length >= self.size or self.data[start + length] != 0:
            raise SmrfDecodeError(field, "string without its terminating NUL")
        try:
            return self.data[start:start + length].decode("utf-8")
        except UnicodeDecodeError:
            raise SmrfDecodeError(field, f"not UTF-8: {preview(self.data[start:start + length])}") from None


class _Table:
    __slots__ = ("buf", "pos", "vtable", "vt_size", "obj_size", "name")

    def __init__(self, buf: _Buffer, pos: int, vtable: int, vt_size: int, obj_size: int, name: str) -> None:
        self.buf, self.pos, self.vtable, self.vt_size, self.obj_size, self.name = (
            buf, pos, vtable, vt_size, obj_size, name)

    def field(self, slot: int, width: int, field: str) -> int | None:
        """The position of the slot's value, or None when the table has not got it."""
        entry = 4 + 2 * slot
        if entry + 2 > self.vt_size:
            return None
        offset = self.buf.u16(self.vtable + entry, field)
        if offset == 0:
            return None
        if offset < 4 or offset + width > self.obj_size:
            raise SmrfDecodeError(field, f"field at {offset} (+{width}) outside its {self.obj_size}-byte table")
        return self.pos + offset

    def boolean(self, slot: int, default: bool, field: str) -> bool:
        pos = self.field(slot, 1, field)
        if pos is None:
            return default
        value = self.buf.u8(pos, field)
        if value > 1:
            raise SmrfDecodeError(field, f"a bool is 0 or 1, got {value}")
        return value == 1

    def string(self, slot: int, field: str) -> str:
        pos = self.field(slot, 4, field)
        if pos is None:
            raise SmrfDecodeError(field, "missing")
        return self.buf.string(pos, field)


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
    buf = _Buffer(data[PREFIX.size:PREFIX.size + msg_size])
    message = buf.table(buf.target(0, "root"), "root")

    if message.boolean(_IS_ENCRYPTED, True, "isEncrypted"):
        raise SmrfDecodeError("isEncrypted", "an encrypted body is not supported (nor by any SMRF library)")
    if message.boolean(_IS_SIGNED, True, "isSigned"):
        raise SmrfDecodeError("isSigned", "a CMS signature is not supported (nor by any SMRF library)")
    custom_signed = message.boolean(_IS_CUSTOM_SIGNED, False, "isCustomSigned")
    if sig_size and not custom_signed:
        raise SmrfDecodeError("sigSize", f"{sig_size} bytes of signature on a frame that is not signed")
    compressed = message.boolean(_IS_COMPRESSED, False, "isCompressed")
    ttl_absolute = message.boolean(_TTL_ABSOLUTE, True, "ttlAbsolute")
    ttl_pos = message.field(_TTL_MS, 8, "ttlMs")
    ttl_ms = 0 if ttl_pos is None else buf.i64(ttl_pos, "ttlMs")
    recipient = message.string(_RECIPIENT, "recipient")
    sender = message.string(_SENDER, "sender")
    headers = _headers(buf, message, limits)

    body_pos = message.field(_BODY, 4, "body")
    if body_pos is None:  # joynr's C++ writes no body vector for an empty body
        body = b""
    else:
        start, length = buf.vector(body_pos, 1, "body")
        body = buf.data[start:start + length]
        if compressed:
            body = _inflate(body, limits)
    return SmrfFrame(
        recipient=recipient, sender=sender, ttl_ms=ttl_ms, ttl_absolute=ttl_absolute, headers=headers, body=body,
        compressed=compressed, signature=data[PREFIX.size + msg_size:] if custom_signed else None,
    )


def _headers(buf: _Buffer, message: _Table, limits: SmrfLimits) -> tuple[tuple[str, str], ...]:
    pos = message.field(_HEADERS, 4, "headers")
    if pos is None:
        return ()
    start, count = buf.vector(pos, 4, "headers")
    if count > limits.max_headers:
        raise SmrfDecodeError("headers", f"{count} headers, at most {limits.max_headers}")
    headers: list[tuple[str, str]] = []
    seen: set[str] = set()
    for n in range(count):
        name = f"headers[{n}]"
        header = buf.table(buf.target(start + 4 * n, name), name)
        key = header.string(_KEY, f"{name}.key")
        # A missing value is null to joynr's Java and a dropped header to its C++: refused,
        # as is a key twice (the Java and JavaScript readers keep the last, C++ the first).
        value = header.string(_VALUE, f"{name}.value")
        if key in seen:
            raise SmrfDecodeError(f"{name}.key", f"header {preview(key)} twice")
        seen.add(key)
        headers.append((key, value))
    return tuple(headers)
