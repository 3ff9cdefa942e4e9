"""The SMRF frames joynr_sim.wire.smrf writes by hand against Google's flatbuffers package, the
reference: they read back with flatbuffers' own Table reader (as flatc's generated Python reads
smrf.Message), and frames built by flatbuffers.Builder decode here with equal fields."""

from __future__ import annotations

import struct
import zlib

import pytest
from flatbuffers import encode, packer, table
from flatbuffers import number_types as N
from hypothesis import given, settings

from joynr_sim.fuzz.frames_joynr import smrf_message
from joynr_sim.wire.smrf import PREFIX, SMRF_VERSION, SmrfDecodeError, SmrfFrame, decode_smrf, encode_smrf
from smrf_frames import frames, sorted_headers


def build_with_flatbuffers(frame: SmrfFrame) -> bytes:
    """The frame as flatbuffers.Builder lays it out (back to front, the bools left out where
    they are the schema's defaults, the header vtable shared)."""
    headers = sorted((k.encode(), v.encode()) for k, v in frame.headers)
    body = zlib.compress(frame.body) if frame.compressed else frame.body
    message = smrf_message(
        recipient=frame.recipient.encode(), sender=frame.sender.encode(), ttl_ms=frame.ttl_ms,
        bools={3: None if frame.ttl_absolute else 0, 4: 0, 5: 0, 6: 1 if frame.compressed else None,
               9: 1 if frame.signature is not None else None},
        headers=headers, body=body)
    sig = frame.signature or b""
    return PREFIX.pack(SMRF_VERSION, len(sig), len(message)) + message + sig


def read_with_flatbuffers(data: bytes) -> SmrfFrame:
    """The frame as flatbuffers' Table reads it, slot by slot, schema defaults for slots left out."""
    version, sig_size, size = PREFIX.unpack_from(data)
    assert version == SMRF_VERSION and len(data) == PREFIX.size + size + sig_size
    buf = bytearray(data[PREFIX.size:PREFIX.size + size])
    message = table.Table(buf, encode.Get(packer.uoffset, buf, 0))

    def offset(tab: table.Table, slot: int) -> int:
        return tab.Offset(4 + 2 * slot)

    def string(tab: table.Table, slot: int) -> str:
        assert offset(tab, slot), f"slot {slot} missing"
        return tab.String(offset(tab, slot) + tab.Pos).decode()

    def boolean(slot: int, default: bool) -> bool:
        o = offset(message, slot)
        return default if not o else message.Get(N.BoolFlags, o + message.Pos)

    assert not boolean(4, True) and not boolean(5, True)  # isSigned, isEncrypted
    ttl = message.Get(N.Int64Flags, offset(message, 2) + message.Pos) if offset(message, 2) else 0
    headers = []
    o = offset(message, 7)
    for n in range(message.VectorLen(o) if o else 0):
        header = table.Table(buf, message.Indirect(message.Vector(o) + 4 * n))
        headers.append((string(header, 0), string(header, 1)))
    o = offset(message, 8)
    body = bytes(buf[message.Vector(o):message.Vector(o) + message.VectorLen(o)]) if o else b""
    compressed, signed = boolean(6, False), boolean(9, False)
    return SmrfFrame(string(message, 0), string(message, 1), ttl, boolean(3, True), tuple(headers),
                     zlib.decompress(body) if compressed else body, compressed,
                     data[PREFIX.size + size:] if signed else None)


@given(frames)
@settings(max_examples=300)
def test_flatbuffers_reads_the_frames_written_here_with_equal_fields(frame: SmrfFrame) -> None:
    assert read_with_flatbuffers(encode_smrf(frame)) == sorted_headers(frame)


@given(frames)
@settings(max_examples=300)
def test_frames_built_by_flatbuffers_decode_here_with_equal_fields(frame: SmrfFrame) -> None:
    data = build_with_flatbuffers(frame)
    assert read_with_flatbuffers(data) == sorted_headers(frame)  # the reference agrees with itself
    assert decode_smrf(data) == sorted_headers(frame)


def test_the_fields_are_aligned_in_the_buffer_as_flatbuffers_verifier_requires() -> None:
    data = encode_smrf(SmrfFrame("r" * 5, "s" * 7, -1, False, (("k1", "v"), ("k22", "")), b"xyz", signature=b"S"))
    buf = data[PREFIX.size:]
    root = struct.unpack_from("<I", buf)[0]
    tab = table.Table(bytearray(buf), root)
    assert root % 8 == 0 and (root + tab.Offset(8)) % 8 == 0  # the table, its int64 ttlMs
    for slot in (0, 1, 7, 8):  # every uoffset field and what it points to, 4-aligned
        at = root + tab.Offset(4 + 2 * slot)
        assert at % 4 == 0 and tab.Indirect(at) % 4 == 0
    vtable = root - struct.unpack_from("<i", buf, root)[0]
    assert vtable % 2 == 0


def _two_headers_second_past_the_end() -> bytes:
    """Two header tables sharing one vtable, the second moved to the buffer's last 4 bytes:
    its soffset is there, the 12 bytes of its table are not."""
    data = bytearray(encode_smrf(SmrfFrame("r", "s", 0, headers=(("a", "1"), ("b", "2")), body=b"")))
    buf = data[PREFIX.size:]
    root = struct.unpack_from("<I", buf)[0]
    tab = table.Table(buf, root)
    entries = tab.Vector(tab.Offset(4 + 2 * 7))
    first = tab.Indirect(entries)
    vtable = first - struct.unpack_from("<i", buf, first)[0]
    buf += bytes(-len(buf) % 4)
    last = len(buf)
    buf += struct.pack("<i", last - vtable)
    struct.pack_into("<I", buf, entries + 4, last - (entries + 4))
    return PREFIX.pack(SMRF_VERSION, 0, len(buf)) + bytes(buf)


def test_a_table_sharing_a_checked_vtable_is_still_bounded_itself() -> None:
    with pytest.raises(SmrfDecodeError) as err:
        decode_smrf(_two_headers_second_past_the_end())
    assert err.value.field == "headers[1]", str(err.value)
