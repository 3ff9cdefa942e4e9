"""joynr's JSON payloads, from and to the simulator's payload content.

The simulator's payloads are msgpack (``joynr_sim.runtime.participants``: a request
``{"m", "p"}``, a reply ``{"r"}`` or ``{"e"}``); joynr's are JSON objects named by
``_typeName`` (bmwcarit/joynr ``javascript/libjoynr-js/src/main/js/joynr/dispatching/
types/Request.ts``, ``Reply.ts``, ``OneWayRequest.ts``, ``.../joynr/exceptions/*.ts``):

    joynr.Request        {methodName, paramDatatypes, params, requestReplyId}
    joynr.OneWayRequest  {methodName, paramDatatypes, params}
    joynr.Reply          {requestReplyId, response: [value]}  or  {requestReplyId, error}
    an error             {_typeName: "joynr.exceptions.<Name>", detailMessage[, error]}
                         (an ApplicationException's error: {_typeName, name} of its enum)

The simulator has no Franca types: a parameter's datatype is named from its JSON value
(``String``, ``Boolean``, ``Integer``/``Long`` by range, ``Double``, ``Object``, ``<T>[]``),
and an ApplicationException's enum is named ``ERROR_ENUM_TYPE_NAME``. Decoding checks the
datatypes' form and count, not their names.

The subscription messages (joynr.SubscriptionRequest, BroadcastSubscriptionRequest,
MulticastSubscriptionRequest, SubscriptionReply, SubscriptionStop, SubscriptionPublication,
MulticastPublication) are converted by ``joynr_sim.wire.subscription_payloads`` with the checks
below, and so is the payload of every message type by its ``to_joynr_payload`` and
``from_joynr_payload``, which a caller uses without knowing the types.

A payload from the wire is hostile: its size, nesting, numbers (no NaN, integers within
msgpack's int64), strings (UTF-8: no lone surrogates) and every field are checked, and a bad one raises
``PayloadDecodeError`` naming it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Collection
from typing import Any

import orjson

from ..core.errors import (
    ApplicationException,
    JoynrRuntimeException,
    MethodInvocationException,
    ProviderRuntimeException,
)
from ..core.limits import DEFAULT_LIMITS, InvalidField, WireLimits, check_id, preview
from ..core.subscription_wire import MAX_NAME_CHARS
from ..runtime.participants import decode_reply, decode_request, encode_reply, encode_request

REQUEST = "joynr.Request"
ONE_WAY_REQUEST = "joynr.OneWayRequest"
REPLY = "joynr.Reply"
EXCEPTION_PREFIX = "joynr.exceptions."
ERROR_ENUM_TYPE_NAME = "joynrsim.Error"
MAX_DEPTH = 32  # of a value's lists and objects: joynr's structs nest a few levels
MAX_DATATYPE_CHARS = 256
INT32 = 2**31
INT64 = 2**63

# The errors a reply may carry, by joynr's type name; anything else is refused.
_ERRORS: dict[str, type[JoynrRuntimeException]] = {
    EXCEPTION_PREFIX + cls.__name__: cls
    for cls in (ApplicationException, ProviderRuntimeException, MethodInvocationException, JoynrRuntimeException)
}


class PayloadDecodeError(ValueError):
    """A joynr payload that may not be used; ``field`` names what was wrong."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"payload field {field!r}: {message}")
        self.field = field


# -- to joynr -------------------------------------------------------------------------


def _datatype(value: Any) -> str:
    if isinstance(value, bool):
        return "Boolean"
    if isinstance(value, int):
        return "Integer" if -INT32 <= value < INT32 else "Long"
    if isinstance(value, float):
        return "Double"
    if isinstance(value, str):
        return "String"
    if isinstance(value, (list, tuple)):
        inner = {_datatype(v) for v in value}
        return f"{inner.pop() if len(inner) == 1 else 'Object'}[]"
    return "Object"


def dump_json(data: dict[str, Any]) -> bytes:
    # orjson first: it is ten times faster than json, and every payload is written here. It
    # writes NaN and the infinities as null, though, and refuses what json would take (a key
    # that is not a string, an integer beyond 64 bits): json writes a document with a null
    # in it, so that NaN is refused, and whatever orjson refuses.
    try:
        text = orjson.dumps(data)
    except TypeError:  # orjson.JSONEncodeError
        text = None
    if text is not None and b"null" not in text:
        return text
    # allow_nan=False: joynr's JSON has no NaN; bytes (msgpack bin) raise TypeError here.
    try:
        return _ENCODER.encode(data).encode("utf-8")
    except (TypeError, ValueError) as exc:
        raise ValueError(f"not expressible in joynr's JSON: {exc}") from None


def request_to_joynr(payload: bytes, request_reply_id: str) -> bytes:
    """A simulator request payload as joynr's Request."""
    method, params = decode_request(payload)
    return dump_json({"_typeName": REQUEST, "methodName": method, "paramDatatypes": [_datatype(p) for p in params],
                  "params": params, "requestReplyId": request_reply_id})


def one_way_to_joynr(payload: bytes) -> bytes:
    """A simulator request payload (of a fire-and-forget method) as joynr's OneWayRequest."""
    method, params = decode_request(payload)
    return dump_json({"_typeName": ONE_WAY_REQUEST, "methodName": method,
                  "paramDatatypes": [_datatype(p) for p in params], "params": params})


def reply_to_joynr(payload: bytes, request_reply_id: str, *, enum_type_name: str = ERROR_ENUM_TYPE_NAME,
                   response: Callable[[Any], list[Any]] | None = None) -> bytes:
    """A simulator reply payload (a result or a typed error) as joynr's Reply. A provider with
    Franca types names its errors' enum (``enum_type_name``) and writes its result as joynr's
    list of out-parameters (``response``); by default the result is the list's one value."""
    try:
        result = decode_reply(payload)
    except ApplicationException as exc:
        error = {"_typeName": EXCEPTION_PREFIX + "ApplicationException", "detailMessage": str(exc),
                 "error": {"_typeName": enum_type_name, "name": exc.error}}
        return dump_json({"_typeName": REPLY, "requestReplyId": request_reply_id, "error": error})
    except JoynrRuntimeException as exc:
        error = {"_typeName": EXCEPTION_PREFIX + type(exc).__name__, "detailMessage": str(exc)}
        return dump_json({"_typeName": REPLY, "requestReplyId": request_reply_id, "error": error})
    out = [result] if response is None else response(result)
    return dump_json({"_typeName": REPLY, "requestReplyId": request_reply_id, "response": out})


# -- from joynr -----------------------------------------------------------------------


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a joynr value")


def _unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    data = dict(pairs)
    if len(data) != len(pairs):
        raise ValueError("a key twice in one object")
    return data


# json, not orjson, reads joynr's JSON: orjson keeps the last of a key twice and reads an
# integer beyond 64 bits as a float, so neither could be refused. Made once: json.loads
# makes a decoder on every call.
_DECODER = json.JSONDecoder(parse_constant=_refuse_constant, object_pairs_hook=_unique)
_ENCODER = json.JSONEncoder(separators=(",", ":"), allow_nan=False, ensure_ascii=False)


def load_object(data: bytes, type_name: str, keys: set[str], required: set[str], limits: WireLimits) -> dict[str, Any]:
    if not isinstance(data, (bytes, bytearray)):
        raise PayloadDecodeError("payload", f"expected bytes, got {type(data).__name__}")
    if len(data) > limits.max_frame_bytes:
        raise PayloadDecodeError("payload", f"{len(data)} bytes, at most {limits.max_frame_bytes}")
    try:
        obj = _DECODER.decode(bytes(data).decode("utf-8"))
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        raise PayloadDecodeError("payload", f"not JSON: {preview(str(exc))}") from None
    if not isinstance(obj, dict) or obj.get("_typeName") != type_name:
        raise PayloadDecodeError("_typeName", f"expected a {type_name}, got {preview(obj)}")
    if not set(obj) <= keys | {"_typeName"} or not required <= set(obj):
        raise PayloadDecodeError(type_name, f"fields {sorted(required)} and any of {sorted(keys - required)}, "
                                            f"got {preview(sorted(obj))}")
    return obj


def checked_value(value: Any, field: str, depth: int = 0) -> Any:
    """A JSON value the simulator's msgpack can carry: integers within int64, depth bounded."""
    if depth > MAX_DEPTH:
        raise PayloadDecodeError(field, f"nested deeper than {MAX_DEPTH}")
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, str):
        return _utf8(value, field)
    if isinstance(value, float):
        if not math.isfinite(value):  # 1e999 parses as inf
            raise PayloadDecodeError(field, f"{value} is not a joynr number")
        return value
    if isinstance(value, int):
        if not -INT64 <= value < INT64:
            raise PayloadDecodeError(field, f"integer {preview(value)} outside int64")
        return value
    if isinstance(value, list):
        return [checked_value(v, f"{field}[{n}]", depth + 1) for n, v in enumerate(value)]
    return {_utf8(k, f"{field} key"): checked_value(v, f"{field}.{k}", depth + 1) for k, v in value.items()}


def _utf8(text: str, field: str) -> str:
    # JSON's \ud800 escapes parse to lone surrogates, which msgpack cannot pack as UTF-8.
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise PayloadDecodeError(field, f"not valid UTF-8: {preview(text)}") from None
    return text


def detail_message(message: Any, field: str, limits: WireLimits) -> str:
    """An exception's detailMessage: any text (it may hold line breaks), bounded as a header value is."""
    if not isinstance(message, str) or len(message.encode("utf-8", "surrogatepass")) > limits.max_header_bytes:
        raise PayloadDecodeError(field, f"a text of at most {limits.max_header_bytes} bytes, got {preview(message)}")
    return _utf8(message, field)


def checked_method(obj: dict[str, Any]) -> tuple[str, list[Any]]:
    """A Request's or OneWayRequest's methodName and params, checked, with a datatype per param."""
    method = obj["methodName"]
    if not isinstance(method, str) or not method.isidentifier() or len(method) > MAX_NAME_CHARS:
        raise PayloadDecodeError("methodName", f"a method name, got {preview(method)}")
    params = obj.get("params", [])
    types = obj.get("paramDatatypes", [])
    if not isinstance(params, list):
        raise PayloadDecodeError("params", f"a list, got {preview(params)}")
    if not isinstance(types, list) or len(types) != len(params) or not all(
            isinstance(t, str) and 0 < len(t) <= MAX_DATATYPE_CHARS for t in types):
        raise PayloadDecodeError("paramDatatypes", f"a type name per parameter, got {preview(types)}")
    return method, checked_value(params, "params")


def checked_id(value: Any, field: str, limits: WireLimits) -> str:
    """An id from a payload (a requestReplyId, a subscriptionId) with the checks of the message's ids."""
    try:
        return check_id(value, field, limits)
    except InvalidField as exc:
        raise PayloadDecodeError(exc.field, str(exc)) from None


def request_from_joynr(data: bytes, limits: WireLimits = DEFAULT_LIMITS) -> tuple[bytes, str]:
    """joynr's Request as (the simulator's request payload, its requestReplyId)."""
    obj = load_object(data, REQUEST, {"methodName", "paramDatatypes", "params", "requestReplyId"},
                {"methodName", "requestReplyId"}, limits)
    method, params = checked_method(obj)
    return encode_request(method, params), checked_id(obj["requestReplyId"], "requestReplyId", limits)


def one_way_from_joynr(data: bytes, limits: WireLimits = DEFAULT_LIMITS) -> bytes:
    """joynr's OneWayRequest as the simulator's request payload."""
    obj = load_object(data, ONE_WAY_REQUEST, {"methodName", "paramDatatypes", "params"}, {"methodName"}, limits)
    return encode_request(*checked_method(obj))


def reply_from_joynr(data: bytes, limits: WireLimits = DEFAULT_LIMITS, *,
                     error_enum: tuple[str, Collection[str]] | None = None,
                     response: Callable[[list[Any]], Any] | None = None) -> tuple[bytes, str]:
    """joynr's Reply as (the simulator's reply payload, its requestReplyId). A provider with
    Franca types has one enum of errors (``error_enum``: its type name and its names; any
    when None) and reads joynr's checked list of out-parameters into its result (``response``)."""
    obj = load_object(data, REPLY, {"requestReplyId", "response", "error"}, {"requestReplyId"}, limits)
    rrid = checked_id(obj["requestReplyId"], "requestReplyId", limits)
    if ("response" in obj) == ("error" in obj):  # joynr's Reply.create: exactly one of the two
        raise PayloadDecodeError(REPLY, "exactly one of response and error")
    if "error" in obj:
        return encode_reply(error=_error(obj["error"], limits, error_enum)), rrid
    values = obj["response"]
    # The simulator's methods have one result: joynr's list of out-parameters holds 0 or 1.
    if not isinstance(values, list) or len(values) > 1:
        raise PayloadDecodeError("response", f"a list of at most one value, got {preview(values)}")
    values = [checked_value(v, f"response[{n}]") for n, v in enumerate(values)]
    if response is not None:
        return encode_reply(response(values)), rrid
    return encode_reply(values[0] if values else None), rrid


def _error(error: Any, limits: WireLimits,
           error_enum: tuple[str, Collection[str]] | None = None) -> JoynrRuntimeException:
    if not isinstance(error, dict) or not isinstance(error.get("_typeName"), str) \
            or error["_typeName"] not in _ERRORS:
        raise PayloadDecodeError("error._typeName", f"one of {sorted(_ERRORS)}, got {preview(error)}")
    cls = _ERRORS[error["_typeName"]]
    allowed = {"_typeName", "detailMessage"} | ({"error"} if cls is ApplicationException else set())
    if not set(error) <= allowed:
        raise PayloadDecodeError("error", f"fields {sorted(allowed)}, got {preview(sorted(error))}")
    message = detail_message(error.get("detailMessage", ""), "error.detailMessage", limits)
    if cls is not ApplicationException:
        return cls(message)
    enum = error.get("error")
    if not (isinstance(enum, dict) and set(enum) == {"_typeName", "name"} and isinstance(enum["_typeName"], str)
            and isinstance(enum["name"], str) and enum["name"].isidentifier()
            and len(enum["name"]) <= MAX_NAME_CHARS):
        raise PayloadDecodeError("error.error", f"an error enum {{_typeName, name}}, got {preview(enum)}")
    if error_enum is not None:
        type_name, names = error_enum
        if enum["_typeName"] != type_name:
            raise PayloadDecodeError("error.error._typeName", f"{type_name}, got {preview(enum['_typeName'])}")
        if enum["name"] not in names:
            raise PayloadDecodeError("error.error.name", f"one of {sorted(names)}, got {preview(enum['name'])}")
    return ApplicationException(enum["name"], message)
