"""The control protocol's frames and envelopes, version 1.

A frame is a 4-byte big-endian length, then that many bytes of msgpack holding one map:

    request   {"v": 1, "id": n, "op": name, "args": {...}}
    response  {"v": 1, "id": n, "ok": true, "result": ...}
              {"v": 1, "id": n, "ok": false, "error": {"type": ..., "message": ..., "error": ...}}

What an op's ``args`` and ``result`` hold is the op's (``ops``). A response of a host in which
a write failed (``joynr_sim.write_failure``: a trace, an outbox, a link store or a
routing-table store the disk refused) also carries ``"write_failure": {"path": ..., "reason":
...}``, the host's first, on every answer from then on, so the runner learns of it from
whatever it asks next, even the ``exit`` of a host that ends.

Both ends treat what arrives as hostile: a frame longer than ``MAX_FRAME_BYTES``, bytes that
are no msgpack map, a wrong version or id are each a ``ProtocolError`` naming what is wrong.
"""

from __future__ import annotations

import asyncio
import struct
from typing import Any

import msgpack

from ...write_failure import MAX_TEXT, WriteFailure

VERSION = 1
MAX_FRAME_BYTES = 8 * 1024 * 1024  # above the largest joynr frame a runtime accepts
HEADER = struct.Struct(">I")
MAX_ID = 2**53


class ProtocolError(ValueError):
    """A frame or message that breaks the control protocol."""


class FieldError(ProtocolError):
    """A field that breaks its op's rules: ``field`` names it (dotted below the op), ``detail``
    says what is wrong. It travels as a ``ProtocolError``."""

    type_name = "ProtocolError"

    def __init__(self, field: str, detail: str) -> None:
        super().__init__(f"{field}: {detail}" if field else detail)
        self.field, self.detail = field, detail


# -- frames ----------------------------------------------------------------------------

def encode_frame(message: dict[str, Any]) -> bytes:
    body = msgpack.packb(message, use_bin_type=True)
    if len(body) > MAX_FRAME_BYTES:
        raise ProtocolError(f"frame: {len(body)} bytes, more than {MAX_FRAME_BYTES}")
    return HEADER.pack(len(body)) + body


def frame_length(header: bytes) -> int:
    (length,) = HEADER.unpack(header)
    if not 0 < length <= MAX_FRAME_BYTES:
        raise ProtocolError(f"frame: length {length} outside 1..{MAX_FRAME_BYTES}")
    return length


def decode_body(body: bytes) -> dict[str, Any]:
    try:
        # Strict map keys everywhere, arguments included: a key is a string or the frame is garbage.
        message = msgpack.unpackb(body, raw=False, strict_map_key=True)
    except Exception as exc:  # msgpack raises many types for garbage
        raise ProtocolError(f"frame: not msgpack ({type(exc).__name__}: {exc})") from None
    return check_message(message)


def check_message(message: Any) -> dict[str, Any]:
    """A decoded message's map, version and id."""
    if not isinstance(message, dict):
        raise ProtocolError(f"frame: expected a map, got {type(message).__name__}")
    if message.get("v") != VERSION or type(message.get("v")) is not int:
        raise ProtocolError(f"v: protocol version {message.get('v')!r}, this end speaks {VERSION}")
    msg_id = message.get("id")
    if type(msg_id) is not int or not 0 <= msg_id < MAX_ID:
        raise ProtocolError(f"id: expected an integer in 0..2^53, got {msg_id!r}")
    return message


async def read_frame(reader: asyncio.StreamReader) -> dict[str, Any] | None:
    """The next message, or None at end of file."""
    try:
        header = await reader.readexactly(4)
    except asyncio.IncompleteReadError as exc:
        if exc.partial:
            raise ProtocolError("frame: the stream ended inside a header") from None
        return None
    length = frame_length(header)
    try:
        body = await reader.readexactly(length)
    except asyncio.IncompleteReadError:
        raise ProtocolError(f"frame: the stream ended inside a {length}-byte frame") from None
    return decode_body(body)


# -- envelopes -------------------------------------------------------------------------

def request(msg_id: int, op: str, args: dict[str, Any]) -> dict[str, Any]:
    return {"v": VERSION, "id": msg_id, "op": op, "args": args}


def success(msg_id: int, result: Any) -> dict[str, Any]:
    return {"v": VERSION, "id": msg_id, "ok": True, "result": result}


def validate_response(message: dict[str, Any]) -> tuple[int, bool, Any]:
    extra = set(message) - {"v", "id", "ok", "result", "error", "write_failure"}
    if extra:
        raise ProtocolError(f"response: unknown fields {sorted(extra)}")
    write_failure_of(message)
    ok = message.get("ok")
    if type(ok) is not bool:
        raise ProtocolError(f"ok: expected true or false, got {ok!r}")
    if ok:
        return message["id"], True, message.get("result")
    error = message.get("error")
    if not isinstance(error, dict) or not isinstance(error.get("type"), str) \
            or not isinstance(error.get("message"), str) or not isinstance(error.get("error"), (str, type(None))):
        raise ProtocolError(f"error: expected {{type, message, error}}, got {error!r}")
    return message["id"], False, error


# -- a host's write failure --------------------------------------------------------------

def failure_to_wire(failure: WriteFailure | None) -> dict[str, str] | None:
    return None if failure is None else {"path": failure.path, "reason": failure.reason}


def failure_from_wire(where: str, data: Any) -> WriteFailure | None:
    """A write failure as a host sent it: None, or {path, reason}, each a string of 1 to
    ``MAX_TEXT`` characters."""
    if data is None:
        return None
    if not isinstance(data, dict) or set(data) != {"path", "reason"} or not all(
            isinstance(data[k], str) and 0 < len(data[k]) <= MAX_TEXT for k in ("path", "reason")):
        raise ProtocolError(f"{where}: expected {{path, reason}}, each a string of 1 to {MAX_TEXT} "
                            f"characters, got {str(data)[:200]!r}")
    return WriteFailure(data["path"], data["reason"])


def write_failure_of(message: dict[str, Any]) -> WriteFailure | None:
    """The write failure a response carries, if any (checked)."""
    if "write_failure" not in message:
        return None
    failure = failure_from_wire("write_failure", message["write_failure"])
    if failure is None:
        raise ProtocolError("write_failure: sent only when there is one")
    return failure
