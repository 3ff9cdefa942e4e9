"""What an op of the control protocol is (``ops`` holds them all): a msgspec struct of its
arguments, tagged with its name, that knows whether it is a query, its result's type and how
long the runner waits for it; how a request's arguments are decoded into it; and a refusal
put in the words the rest of joynr-sim uses (``op.field: expected str, got int``)."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any, ClassVar, TypeVar

import msgspec

from .framing import FieldError, ProtocolError

GREET_TIMEOUT_S = 30.0  # a new host's hello
REQUEST_TIMEOUT_S = 60.0  # an op that waits on the network (a start, a registration)
QUERY_TIMEOUT_S = 10.0  # an op that answers at once
EXIT_TIMEOUT_S = 10.0
CALL_SLACK_S = 10.0  # beyond a call's TTL: the host answers a timeout itself
KEEP_BYTES = (bytes, bytearray, memoryview)  # msgpack carries them as they are
F = TypeVar("F", bound=Callable[..., Any])


class Op(msgspec.Struct, forbid_unknown_fields=True, kw_only=True, tag_field="op"):
    query: ClassVar[bool] = False
    result: ClassVar[Any] = None  # the result's type; Any: whatever the runtime answered

    def timeout_s(self) -> float:
        """How long the runner waits for the answer on the control channel, where a busy
        host answers even a query late (the query channel has its own bound)."""
        return REQUEST_TIMEOUT_S

    def arguments(self) -> dict[str, Any]:
        """The request's ``args``: the fields, without the tag (the request's ``op``)."""
        args = msgspec.to_builtins(self, builtin_types=KEEP_BYTES)
        del args["op"]
        return args

    @classmethod
    def answer(cls, value: Any) -> Any:
        """The result as the host sent it, checked against ``result``."""
        if cls.result is Any:
            return value
        try:
            return msgspec.convert(value, cls.result, strict=True)
        except msgspec.ValidationError as exc:
            path, detail = describe(exc)
            raise ProtocolError(f"{name_of(cls)}: the answer{'.' + path if path else ''}: {detail}") from None


def name_of(op: Op | type[Op]) -> str:
    return (op if isinstance(op, type) else type(op)).__struct_config__.tag  # type: ignore[return-value]


def asks(*ops: type[Op]) -> Callable[[F], F]:
    """Marks the runner's method that asks ``ops`` of a host."""
    def mark(method: F) -> F:
        method.asks = ops  # type: ignore[attr-defined]
        return method
    return mark


def registry(*ops: type[Op]) -> dict[str, type[Op]]:
    return {name_of(op): op for op in ops}


def decode(name: Any, args: Any, ops: Mapping[str, type[Op]]) -> Op:
    op = ops.get(name) if isinstance(name, str) else None
    if op is None:
        raise ProtocolError(f"op: unknown operation {name!r}")
    if not isinstance(args, dict):
        raise ProtocolError(f"args: expected a map, got {type(args).__name__}")
    if "op" in args:  # the tag travels in the request, never among the arguments
        raise ProtocolError(f"{name}: unknown field 'op'")
    try:
        return msgspec.convert(args, op, strict=True)
    except msgspec.ValidationError as exc:
        path, detail = describe(exc)
        raise ProtocolError(f"{name}.{path}: {detail}" if path else f"{name}: {detail}") from None


_AT = re.compile(r"(?s)(?P<detail>.*) - at (?P<key>`key` in )?`\$(?P<path>[^`]*)`")
_MISSING = re.compile(r"Object missing required field `(?P<field>[^`]+)`")
_UNKNOWN = re.compile(r"Object contains unknown field `(?P<field>[^`]+)`")
_EXPECTED = re.compile(r"(?s)Expected (?P<rest>.*)")
_TYPE = re.compile(r"`([^`]+)`")
_NAMES = {"object": "dict", "array": "list", "null": "NoneType"}


def describe(exc: msgspec.ValidationError) -> tuple[str, str]:
    """(the field, dotted, and what is wrong with it) of a refusal by msgspec, in the words
    the rest of joynr-sim uses: ``gbids[0]``, ``expected str, got int``."""
    text, path, key = str(exc), "", False
    at = _AT.fullmatch(text)
    if at:
        text, path, key = at["detail"], at["path"].removeprefix("."), bool(at["key"])
    cause = exc.__cause__
    if isinstance(cause, FieldError):
        return _join(path, cause.field), cause.detail
    if m := _MISSING.fullmatch(text):
        return _join(path, m["field"]), "missing"
    if m := _UNKNOWN.fullmatch(text):
        return path, f"unknown field {m['field']!r}"
    if m := _EXPECTED.fullmatch(text):
        text = "expected " + _TYPE.sub(lambda t: "/".join(_NAMES.get(n, n) for n in t[1].split(" | ")), m["rest"])
    return path, (text[:1].lower() + text[1:]) + (" (a key)" if key else "")


def _join(path: str, field: str) -> str:
    return f"{path}.{field}" if path and field else path or field
