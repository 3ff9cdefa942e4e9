"""joynr's address types (joynr.system.RoutingTypes) and their JSON form.

Addresses are frozen values. ``InProcessAddress`` is the exception that proves the
rule: it wraps a live object (the skeleton of a provider or proxy) and two of them are
equal only when they wrap the same object; it is never serialised.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

_PREFIX = "joynr.system.RoutingTypes."


class AddressError(ValueError):
    """A malformed address; ``field`` names the offending field."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"address field {field!r}: {message}")
        self.field = field


@dataclass(frozen=True, eq=False)
class InProcessAddress:
    skeleton: Any

    def __eq__(self, other: object) -> bool:
        return isinstance(other, InProcessAddress) and other.skeleton is self.skeleton

    def __hash__(self) -> int:
        return id(self.skeleton)


@dataclass(frozen=True)
class WebSocketAddress:
    protocol: str  # "WS" or "WSS"
    host: str
    port: int
    path: str = ""


@dataclass(frozen=True)
class WebSocketClientAddress:
    id: str


@dataclass(frozen=True)
class MqttAddress:
    broker_uri: str  # carries the GBID
    topic: str


@dataclass(frozen=True)
class ChannelAddress:
    messaging_endpoint_url: str
    channel_id: str


Address = InProcessAddress | WebSocketAddress | WebSocketClientAddress | MqttAddress | ChannelAddress


class AddressType(StrEnum):
    """The short type names the routing rules, the trace and the checker use. A member is a
    str: it equals, hashes and serialises as its plain name."""

    IN_PROCESS = "InProcess"
    WEB_SOCKET = "WebSocket"
    WEB_SOCKET_CLIENT = "WebSocketClient"
    MQTT = "Mqtt"
    CHANNEL = "Channel"


TYPE_NAMES: dict[type, AddressType] = {
    InProcessAddress: AddressType.IN_PROCESS,
    WebSocketAddress: AddressType.WEB_SOCKET,
    WebSocketClientAddress: AddressType.WEB_SOCKET_CLIENT,
    MqttAddress: AddressType.MQTT,
    ChannelAddress: AddressType.CHANNEL,
}
ADDRESS_TYPES: tuple[AddressType, ...] = tuple(TYPE_NAMES.values())
# Addresses behind a broker or a bounce proxy; the others are local to the runtime's host.
REMOTE_TYPES = frozenset({AddressType.MQTT, AddressType.CHANNEL})

# (python field, JSON field, python type) per serialisable address class.
_FIELDS: dict[type, tuple[tuple[str, str, type], ...]] = {
    WebSocketAddress: (
        ("protocol", "protocol", str),
        ("host", "host", str),
        ("port", "port", int),
        ("path", "path", str),
    ),
    WebSocketClientAddress: (("id", "id", str),),
    MqttAddress: (("broker_uri", "brokerUri", str), ("topic", "topic", str)),
    ChannelAddress: (
        ("messaging_endpoint_url", "messagingEndpointUrl", str),
        ("channel_id", "channelId", str),
    ),
}
_BY_TYPE_NAME = {_PREFIX + cls.__name__: cls for cls in _FIELDS}


def type_name(address: Address) -> AddressType:
    """The short type name: InProcess, WebSocket, WebSocketClient, Mqtt or Channel."""
    try:
        return TYPE_NAMES[type(address)]
    except KeyError:
        raise AddressError("_typeName", f"not an address: {address!r}") from None


def is_remote(address: Address) -> bool:
    return type_name(address) in REMOTE_TYPES


def to_dict(address: Address) -> dict[str, Any]:
    cls = type(address)
    if cls is InProcessAddress:
        raise AddressError("_typeName", "an InProcessAddress is never serialised")
    if cls not in _FIELDS:
        raise AddressError("_typeName", f"not an address: {address!r}")
    out: dict[str, Any] = {"_typeName": _PREFIX + cls.__name__}
    for attr, key, _ in _FIELDS[cls]:
        out[key] = getattr(address, attr)
    return out


def to_json(address: Address) -> str:
    return json.dumps(to_dict(address), separators=(",", ":"))


def from_dict(data: Any) -> Address:
    if not isinstance(data, dict):
        raise AddressError("_typeName", f"expected a JSON object, got {type(data).__name__}")
    name = data.get("_typeName")
    if not isinstance(name, str):
        raise AddressError("_typeName", f"missing or not a string: {name!r}")
    cls = _BY_TYPE_NAME.get(name)
    if cls is None:
        raise AddressError("_typeName", f"unknown address type {name!r}")
    values = {}
    for attr, key, kind in _FIELDS[cls]:
        if key not in data:
            if cls is WebSocketAddress and key == "path":
                values[attr] = ""
                continue
            raise AddressError(key, f"missing in {name}")
        value = data[key]
        # bool is an int in Python, but never a port.
        if not isinstance(value, kind) or isinstance(value, bool):
            raise AddressError(key, f"expected {kind.__name__}, got {value!r}")
        values[attr] = value
    if cls is WebSocketAddress and values["protocol"] not in ("WS", "WSS"):
        raise AddressError("protocol", f"expected 'WS' or 'WSS', got {values['protocol']!r}")
    if cls is WebSocketAddress and not 0 < values["port"] < 65536:
        raise AddressError("port", f"out of range: {values['port']}")
    return cls(**values)


def from_json(text: str | bytes) -> Address:
    try:
        data = json.loads(text)
    except (ValueError, TypeError) as exc:
        raise AddressError("_typeName", f"not JSON: {exc}") from None
    except RecursionError:
        raise AddressError("_typeName", "not JSON: nested too deeply") from None
    return from_dict(data)


def _in_process_key(skeleton: Any) -> str:
    """Two in-process addresses are the same only when they wrap the same object. A skeleton
    names itself (``address_key``, drawn from the run's seed, so a seeded run's trace is the
    same every time); anything else by its id()."""
    key = getattr(skeleton, "address_key", None)
    return key if isinstance(key, str) else f"{id(skeleton):x}"


# By exact type, as type_name looks them up: a trace line of every hop names its target.
_DESCRIBE: dict[type, Callable[[Any], str]] = {
    InProcessAddress: lambda a: f"inprocess:{_in_process_key(a.skeleton)}",
    MqttAddress: lambda a: f"{a.broker_uri}/{a.topic}",
    WebSocketClientAddress: lambda a: a.id,
    WebSocketAddress: lambda a: f"{a.protocol.lower()}://{a.host}:{a.port}{a.path}",
    ChannelAddress: lambda a: f"{a.messaging_endpoint_url}#{a.channel_id}",
}


def describe(address: Address) -> str:
    """A short human-readable target for traces: the thing a hop goes to."""
    text = _DESCRIBE.get(type(address))
    if text is None:
        raise AddressError("_typeName", f"not an address: {address!r}")
    return text(address)
