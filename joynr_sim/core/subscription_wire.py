"""The payloads of joynr's subscription messages, and their checks where they enter.

    arq  SubscriptionRequest           {sid, name, qos}            an attribute
    brq  BroadcastSubscriptionRequest  {sid, name, qos, filter}    a selective broadcast
    mrq  MulticastSubscriptionRequest  {sid, name, qos, partitions} a non-selective broadcast
    srp  SubscriptionReply             {sid, error}                 error: null or why it was refused
    sst  SubscriptionStop              {sid}
    p    SubscriptionPublication       {sid, value}
    m    MulticastPublication          {value}                      the multicast id is the "to"

A payload from the wire is hostile: every field is checked and a bad one raises
``SubscriptionPayloadError`` naming it, which the runtime records as a drop.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import msgpack

from .limits import DEFAULT_LIMITS, InvalidField, WireLimits, check_id, preview
from .message import (
    BROADCAST_SUBSCRIPTION_REQUEST,
    MULTICAST_SUBSCRIPTION_REQUEST,
    SUBSCRIPTION_REQUEST,
)
from .multicast import MAX_PARTITIONS
from .subscriptions import SubscriptionError, SubscriptionQos

REQUEST_KINDS = (SUBSCRIPTION_REQUEST, BROADCAST_SUBSCRIPTION_REQUEST, MULTICAST_SUBSCRIPTION_REQUEST)
MAX_NAME_CHARS = 128
MAX_FILTER_KEYS = 16
_SCALARS = (bool, int, float, str, type(None))


class SubscriptionPayloadError(ValueError):
    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"payload field {field!r}: {message}")
        self.field = field


@dataclass(frozen=True)
class SubscriptionRequest:
    subscription_id: str
    name: str
    qos: SubscriptionQos
    filter: dict[str, Any] | None = None  # a selective broadcast's filter parameters
    partitions: tuple[str, ...] = ()  # a multicast subscription's partitions


def _pack(data: dict[str, Any]) -> bytes:
    return msgpack.packb(data, use_bin_type=True)


def _unpack(payload: bytes, keys: set[str]) -> dict[str, Any]:
    try:
        data = msgpack.unpackb(payload, raw=False, strict_map_key=True)
    except Exception as exc:  # msgpack raises many types for garbage
        raise SubscriptionPayloadError("pl", f"not msgpack: {type(exc).__name__}") from None
    if not isinstance(data, dict) or set(data) != keys:
        raise SubscriptionPayloadError("pl", f"expected a map of {sorted(keys)}, got {preview(data)}")
    return data


def _sid(value: Any, limits: WireLimits) -> str:
    try:
        return check_id(value, "sid", limits)
    except InvalidField as exc:
        raise SubscriptionPayloadError("sid", str(exc)) from None


def check_name(value: Any) -> str:
    if not isinstance(value, str) or not value.isidentifier() or len(value) > MAX_NAME_CHARS:
        raise SubscriptionPayloadError("name", f"an attribute or broadcast name, got {preview(value)}")
    return value


def _value(value: Any, field: str) -> Any:
    if not isinstance(value, _SCALARS):
        raise SubscriptionPayloadError(field, f"a scalar, got {type(value).__name__}")
    return value


def encode_request(req: SubscriptionRequest, kind: str) -> bytes:
    data: dict[str, Any] = {"sid": req.subscription_id, "name": req.name, "qos": asdict(req.qos)}
    if kind == BROADCAST_SUBSCRIPTION_REQUEST:
        data["filter"] = dict(req.filter or {})
    elif kind == MULTICAST_SUBSCRIPTION_REQUEST:
        data["partitions"] = list(req.partitions)
    return _pack(data)


def decode_request(payload: bytes, kind: str, limits: WireLimits = DEFAULT_LIMITS) -> SubscriptionRequest:
    extra = {BROADCAST_SUBSCRIPTION_REQUEST: {"filter"}, MULTICAST_SUBSCRIPTION_REQUEST: {"partitions"}}
    if kind not in REQUEST_KINDS:
        raise SubscriptionPayloadError("t", f"not a subscription request type: {preview(kind)}")
    data = _unpack(payload, {"sid", "name", "qos"} | extra.get(kind, set()))
    checked = qos_from_dict(data["qos"])
    flt = check_filter(data.get("filter"))
    parts = check_partitions(data.get("partitions", []))
    return SubscriptionRequest(_sid(data["sid"], limits), check_name(data["name"]), checked, flt, parts)


def qos_from_dict(qos: Any) -> SubscriptionQos:
    """A checked quality of service from its map (``kind`` and any of the other fields)."""
    if not isinstance(qos, dict) or not set(qos) <= set(SubscriptionQos.__dataclass_fields__) or "kind" not in qos:
        raise SubscriptionPayloadError("qos", f"a map with kind and {sorted(SubscriptionQos.__dataclass_fields__)}"
                                              f", got {preview(qos)}")
    try:
        return SubscriptionQos(**qos).check()
    except (SubscriptionError, TypeError) as exc:
        raise SubscriptionPayloadError("qos", str(exc)) from None


def check_filter(flt: Any) -> dict[str, Any] | None:
    if flt is not None and (not isinstance(flt, dict) or len(flt) > MAX_FILTER_KEYS
                            or not all(isinstance(k, str) and isinstance(v, _SCALARS) for k, v in flt.items())):
        raise SubscriptionPayloadError("filter", f"a map of scalar filter parameters, got {preview(flt)}")
    return flt


def check_partitions(parts: Any) -> tuple[str, ...]:
    if not isinstance(parts, list) or len(parts) > MAX_PARTITIONS or not all(isinstance(p, str) for p in parts):
        raise SubscriptionPayloadError("partitions",
                                       f"a list of at most {MAX_PARTITIONS} strings, got {preview(parts)}")
    return tuple(parts)


def encode_reply(subscription_id: str, error: str | None = None) -> bytes:
    return _pack({"sid": subscription_id, "error": error})


def decode_reply(payload: bytes, limits: WireLimits = DEFAULT_LIMITS) -> tuple[str, str | None]:
    data = _unpack(payload, {"sid", "error"})
    if not isinstance(data["error"], (str, type(None))):
        raise SubscriptionPayloadError("error", f"null or a string, got {preview(data['error'])}")
    return _sid(data["sid"], limits), data["error"]


def encode_stop(subscription_id: str) -> bytes:
    return _pack({"sid": subscription_id})


def decode_stop(payload: bytes, limits: WireLimits = DEFAULT_LIMITS) -> str:
    return _sid(_unpack(payload, {"sid"})["sid"], limits)


def encode_publication(subscription_id: str, value: Any) -> bytes:
    return _pack({"sid": subscription_id, "value": value})


def decode_publication(payload: bytes, limits: WireLimits = DEFAULT_LIMITS) -> tuple[str, Any]:
    data = _unpack(payload, {"sid", "value"})
    return _sid(data["sid"], limits), _value(data["value"], "value")


def encode_multicast(value: Any) -> bytes:
    return _pack({"value": value})


def decode_multicast(payload: bytes) -> Any:
    return _value(_unpack(payload, {"value"})["value"], "value")
