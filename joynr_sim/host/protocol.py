"""The control protocol between the runner and a host process, version 1.

A frame is a 4-byte big-endian length, then that many bytes of msgpack holding one map:

    request   {"v": 1, "id": n, "op": name, "args": {...}}
    response  {"v": 1, "id": n, "ok": true, "result": ...}
              {"v": 1, "id": n, "ok": false, "error": {"type": ..., "message": ..., "error": ...}}

A response of a host in which a write failed (``joynr_sim.write_failure``: a trace, an
outbox, a link store or a routing-table store the disk refused) also carries
``"write_failure": {"path": ..., "reason": ...}``, the host's first, on every answer from
then on, so the runner learns of it from whatever it asks next, even the ``exit`` of a
host that ends; the op ``write_failure`` asks for it (answered at once, on either channel),
for a host the runner has nothing else to ask.

Both ends treat what arrives as hostile: a frame longer than ``MAX_FRAME_BYTES``, bytes that
are no msgpack map, a wrong version, an unknown op, a missing, unknown or mistyped argument
are each a ``ProtocolError`` naming what is wrong. Every op names its arguments and their
types in ``OPS``; a runtime-scoped op carries the id of the runtime it is for, so one host
can hold any number of runtimes. ``QUERY_OPS`` are the ops that answer at once (no waiting
on the network): only they may be asked on the blocking query channel.

Errors travel by name; ``raise_remote`` turns the known ones back into joynr's exception
types so a caller cannot tell a runtime in a child from one in its own process.
"""

from __future__ import annotations

import asyncio
import struct
from typing import Any, NoReturn

import msgpack

from ..core.address import AddressError, InProcessAddress, from_dict, to_dict, type_name
from ..core.discovery import DiscoveryError, DiscoveryErrorException
from ..core.errors import (
    ApplicationException,
    JoynrRuntimeException,
    JoynrTimeoutException,
    MethodInvocationException,
    ProviderRuntimeException,
)
from ..core.routing import PutResult, RoutingEntry
from ..runtime.base import DiscoveryException
from ..runtime.subscriptions import SubscriptionException
from ..write_failure import MAX_TEXT, WriteFailure

VERSION = 1
MAX_FRAME_BYTES = 8 * 1024 * 1024  # above the largest joynr frame a runtime accepts
HEADER = struct.Struct(">I")
MAX_ID = 2**53

_OPT_STR = (str, type(None))
_OPT_LIST = (list, type(None))
_OPT_INT = (int, type(None))

# op -> {argument: accepted types}. Every argument is required; None must be sent explicitly.
OPS: dict[str, dict[str, tuple[type, ...]]] = {
    "hello": {"version": (int,)},
    "create": {"runtime": (str,), "kind": (str,), "spec": (dict,)},
    "start": {"runtime": (str,), "restart": (bool,)},
    "stop": {"runtime": (str,)},
    "close": {"runtime": (str,)},
    "exit": {},
    "advance": {"offset_ms": (int,)},
    "register_provider": {
        "runtime": (str,), "domain": (str,), "interface": (str,), "participant_id": _OPT_STR,
        "scope": (str,), "gbids": _OPT_LIST, "priority": (int,),
    },
    "unregister_provider": {"runtime": (str,), "participant_id": (str,)},
    "create_proxy": {"runtime": (str,), "interface": (str,), "provider": (str,), "visible": (bool,)},
    "discover_proxy": {
        "runtime": (str,), "interface": (str,), "domain": _OPT_STR, "participant_id": _OPT_STR,
        "scope": (str,), "gbids": _OPT_LIST, "cache_max_age_ms": (int,),
    },
    "call": {
        "runtime": (str,), "sender": (str,), "recipient": (str,), "method": (str,), "params": (list,),
        "ttl_ms": (int,), "gbid": _OPT_STR,
    },
    "one_way": {
        "runtime": (str,), "sender": (str,), "recipient": (str,), "method": (str,), "params": (list,),
        "ttl_ms": (int,),
    },
    "subscribe": {
        "runtime": (str,), "proxy": (str,), "name": (str,), "kind": (str,), "qos": (dict,),
        "filter": (dict, type(None)), "partitions": (list,),
    },
    "unsubscribe": {"runtime": (str,), "subscription_id": (str,)},
    "invoke_provider": {"runtime": (str,), "participant_id": (str,), "method": (str,), "params": (list,)},
    "await_publications": {"runtime": (str,), "subscription_id": (str,), "count": (int,), "timeout_ms": (int,)},
    "publications": {"runtime": (str,), "subscription_id": (str,)},
    "load": {
        "runtime": (str,), "sender": (str,), "recipient": (str,), "method": (str,), "params": (list,),
        "ttl_ms": (int,), "calls": (int,), "concurrency": (int,),
    },
    "table_lookup": {"runtime": (str,), "participant_id": (str,), "gbid": _OPT_STR},
    "table_put": {"runtime": (str,), "participant_id": (str,), "entry": (dict,), "origin": (str,)},
    "table_remove": {"runtime": (str,), "participant_id": (str,)},
    "table_items": {"runtime": (str,)},
    "queued": {"runtime": (str,), "participant_id": _OPT_STR},
    "connected": {"runtime": (str,), "gbid": (str,)},
    "admit": {"runtime": (str,), "client": (str,), "token": (str,)},
    "cut": {"runtime": (str,), "gbid": (str,)},
    "heal": {"runtime": (str,), "gbid": (str,)},
    "profile": {"enable": (bool,)},
    "write_failure": {},
}
QUERY_OPS = frozenset({
    "hello", "advance", "one_way", "table_lookup", "table_put", "table_remove", "table_items", "queued",
    "connected", "admit", "publications", "write_failure",
})


class ProtocolError(ValueError):
    """A frame or message that breaks the control protocol."""


class RemoteError(RuntimeError):
    """An error in a host process that has no counterpart here; its type name is kept."""

    def __init__(self, type_name_: str, message: str) -> None:
        super().__init__(f"{type_name_}: {message}")
        self.type_name = type_name_


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


def _check_type(where: str, value: Any, types: tuple[type, ...]) -> None:
    # bool is an int in Python, but never a count or a time.
    if isinstance(value, bool) and bool not in types:
        raise ProtocolError(f"{where}: expected {'/'.join(t.__name__ for t in types)}, got {value!r}")
    if not isinstance(value, types):
        raise ProtocolError(f"{where}: expected {'/'.join(t.__name__ for t in types)}, got {type(value).__name__}")


def validate_request(
    message: dict[str, Any], ops: dict[str, dict[str, tuple[type, ...]]] = OPS,
) -> tuple[int, str, dict[str, Any]]:
    """The id, op and arguments of a request, every one checked against ``ops``."""
    extra = set(message) - {"v", "id", "op", "args"}
    if extra:
        raise ProtocolError(f"request: unknown fields {sorted(extra)}")
    op = message.get("op")
    if not isinstance(op, str) or op not in ops:
        raise ProtocolError(f"op: unknown operation {op!r}")
    args = message.get("args")
    if not isinstance(args, dict):
        raise ProtocolError(f"args: expected a map, got {type(args).__name__}")
    schema = ops[op]
    unknown = set(args) - set(schema)
    if unknown:
        raise ProtocolError(f"{op}: unknown arguments {sorted(unknown)}")
    for name, types in schema.items():
        if name not in args:
            raise ProtocolError(f"{op}.{name}: missing")
        _check_type(f"{op}.{name}", args[name], types)
    for name in ("gbids",):
        if isinstance(args.get(name), list) and not all(isinstance(g, str) for g in args[name]):
            raise ProtocolError(f"{op}.{name}: expected a list of strings")
    return message["id"], op, args


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
            or not isinstance(error.get("message"), str) or not isinstance(error.get("error"), _OPT_STR):
        raise ProtocolError(f"error: expected {{type, message, error}}, got {error!r}")
    return message["id"], False, error


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


def request(msg_id: int, op: str, args: dict[str, Any]) -> dict[str, Any]:
    return {"v": VERSION, "id": msg_id, "op": op, "args": args}


def success(msg_id: int, result: Any) -> dict[str, Any]:
    return {"v": VERSION, "id": msg_id, "ok": True, "result": result}


def failure(msg_id: int, exc: BaseException) -> dict[str, Any]:
    error = getattr(exc, "error", None)
    if isinstance(error, DiscoveryError):
        error = error.value
    detail = getattr(exc, "detail", None) if isinstance(exc, DiscoveryErrorException) else None
    if detail is not None:
        message = detail
    elif isinstance(exc, KeyError) and exc.args:
        message = exc.args[0]  # str() of a KeyError quotes it
    else:
        message = str(exc)
    return {"v": VERSION, "id": msg_id, "ok": False, "error": {
        "type": getattr(exc, "type_name", type(exc).__name__), "message": str(message),
        "error": error if isinstance(error, str) else None,
    }}


_ERRORS: dict[str, type[BaseException]] = {cls.__name__: cls for cls in (
    JoynrRuntimeException, JoynrTimeoutException, MethodInvocationException, ProviderRuntimeException,
    ValueError, KeyError, RuntimeError, TypeError, ProtocolError, TimeoutError, SubscriptionException,
)}


def raise_remote(error: dict[str, Any]) -> NoReturn:
    """Raise what the host process raised, as the same type where joynr-sim knows it."""
    name, message, code = error["type"], error["message"], error["error"]
    if name == "DiscoveryErrorException" and code is not None:
        try:
            raise DiscoveryErrorException(DiscoveryError(code), message)
        except ValueError:
            pass
    if name == "ApplicationException" and code is not None:
        raise ApplicationException(code, message)
    if name == "DiscoveryException":
        raise DiscoveryException(message)
    cls = _ERRORS.get(name)
    if cls is None:
        raise RemoteError(name, message)
    raise cls(message)


# -- routing entries on the wire ---------------------------------------------------------

class RemoteInProcess:
    """What an InProcess address in a host process looks like from the runner: a name."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"RemoteInProcess({self.name})"


def entry_to_wire(entry: RoutingEntry | None) -> dict[str, Any] | None:
    if entry is None:
        return None
    if isinstance(entry.address, InProcessAddress):
        skeleton = entry.address.skeleton
        address = {"_typeName": "InProcess", "id": str(getattr(skeleton, "participant_id", id(skeleton)))}
    else:
        address = to_dict(entry.address)
    return {"address": address, "visible": entry.is_globally_visible, "expiry": entry.expiry_date_ms,
            "sticky": entry.is_sticky}


def entry_from_wire(data: Any, *, in_process: bool = True) -> RoutingEntry | None:
    """A routing entry from the wire; an InProcess address only where ``in_process``."""
    if data is None:
        return None
    if not isinstance(data, dict) or set(data) != {"address", "visible", "expiry", "sticky"}:
        raise ProtocolError(f"entry: expected {{address, visible, expiry, sticky}}, got {data!r}")
    _check_type("entry.visible", data["visible"], (bool,))
    _check_type("entry.sticky", data["sticky"], (bool,))
    _check_type("entry.expiry", data["expiry"], (int,))
    address = data["address"]
    if isinstance(address, dict) and address.get("_typeName") == "InProcess":
        if not in_process or not isinstance(address.get("id"), str):
            raise ProtocolError("entry.address: an InProcess address cannot be sent to a host")
        parsed: Any = InProcessAddress(RemoteInProcess(address["id"]))
    else:
        try:
            parsed = from_dict(address)
        except AddressError as exc:
            raise ProtocolError(f"entry.address: {exc}") from None
    type_name(parsed)
    return RoutingEntry(parsed, data["visible"], data["expiry"], data["sticky"])


def put_result_to_wire(result: PutResult) -> dict[str, Any]:
    return {"outcome": result.outcome, "reason": result.reason, "entry": entry_to_wire(result.entry)}


def put_result_from_wire(data: Any) -> PutResult:
    if not isinstance(data, dict) or not isinstance(data.get("outcome"), str) \
            or not isinstance(data.get("reason"), str):
        raise ProtocolError(f"put result: expected {{outcome, reason, entry}}, got {data!r}")
    return PutResult(data["outcome"], data["reason"], entry_from_wire(data.get("entry")))
