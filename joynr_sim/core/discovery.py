"""Discovery entries (joynr.types) and the errors of discovery, with their wire form.

A ``GlobalDiscoveryEntry`` is what the global capabilities directory (GCD) stores and
returns; a ``DiscoveryEntry`` is a provider registration in a cluster controller;
a ``DiscoveryEntryWithMetaInfo`` is what a lookup hands to a proxy (``is_local`` says the
provider lives behind this cluster controller).

Values validate themselves on construction: a malformed entry cannot exist, and every
rejection is an ``InvalidDiscoveryEntry`` naming the field and the value. The wire form
(``to_wire``/``from_wire``) uses joynr's camelCase field names and only dict, list, str,
int and bool values, so msgpack and JSON can carry it; the address travels as joynr's
JSON string (``{"_typeName": "joynr.system.RoutingTypes.MqttAddress", ...}``).
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from .address import (
    Address,
    AddressError,
    ChannelAddress,
    InProcessAddress,
    MqttAddress,
    WebSocketAddress,
    WebSocketClientAddress,
)
from .address import from_json as address_from_json
from .address import to_json as address_to_json
from .errors import ProviderRuntimeException  # noqa: F401  (raised by the old GCD methods)

_ADDRESS_CLASSES = (
    InProcessAddress,
    WebSocketAddress,
    WebSocketClientAddress,
    MqttAddress,
    ChannelAddress,
)
PROVIDER_SCOPES = ("GLOBAL", "LOCAL")
# joynr's default expiry of a discovery entry: six weeks after its registration.
DEFAULT_EXPIRY_MS = 6 * 7 * 24 * 60 * 60 * 1000


class DiscoveryScope(enum.Enum):
    LOCAL_ONLY = "LOCAL_ONLY"
    LOCAL_THEN_GLOBAL = "LOCAL_THEN_GLOBAL"
    LOCAL_AND_GLOBAL = "LOCAL_AND_GLOBAL"
    GLOBAL_ONLY = "GLOBAL_ONLY"


class DiscoveryError(enum.Enum):
    """joynr.types.DiscoveryError: the modeled errors of the GCD's new methods."""

    UNKNOWN_GBID = "UNKNOWN_GBID"
    INVALID_GBID = "INVALID_GBID"
    NO_ENTRY_FOR_PARTICIPANT = "NO_ENTRY_FOR_PARTICIPANT"
    NO_ENTRY_FOR_SELECTED_BACKENDS = "NO_ENTRY_FOR_SELECTED_BACKENDS"
    INTERNAL_ERROR = "INTERNAL_ERROR"


class DiscoveryErrorException(Exception):
    """A modeled error (joynr ApplicationException carrying a DiscoveryError)."""

    def __init__(self, error: DiscoveryError, detail: str = "") -> None:
        super().__init__(f"{error.value}: {detail}" if detail else error.value)
        self.error = error
        self.detail = detail


class InvalidDiscoveryEntry(ValueError):
    """A malformed discovery entry; ``field`` names the offending field."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"discovery entry field {field!r}: {message}")
        self.field = field


class InvalidDiscoveryArgument(ValueError):
    """A malformed argument of a discovery call; ``field`` names the parameter."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"argument {field!r}: {message}")
        self.field = field


def _check(cond: bool, field: str, message: str) -> None:
    if not cond:
        raise InvalidDiscoveryEntry(field, message)


def _is_int(value: Any) -> bool:
    # bool is an int in Python, but never a date or a version.
    return isinstance(value, int) and not isinstance(value, bool)


@dataclass(frozen=True)
class Version:
    major_version: int
    minor_version: int

    def __post_init__(self) -> None:
        for name in ("major_version", "minor_version"):
            value = getattr(self, name)
            _check(_is_int(value), f"provider_version.{name}", f"expected int, got {value!r}")


@dataclass(frozen=True)
class CustomParameter:
    name: str
    value: str

    def __post_init__(self) -> None:
        for name in ("name", "value"):
            value = getattr(self, name)
            _check(isinstance(value, str), f"qos.custom_parameters.{name}",
                   f"expected str, got {value!r}")


@dataclass(frozen=True)
class ProviderQos:
    priority: int = 0
    scope: str = "GLOBAL"  # joynr.types.ProviderScope: GLOBAL or LOCAL
    supports_on_change_subscriptions: bool = False
    # (name, value) pairs are accepted and kept as CustomParameter values.
    custom_parameters: tuple[CustomParameter, ...] = ()

    def __post_init__(self) -> None:
        _check(_is_int(self.priority), "qos.priority", f"expected int, got {self.priority!r}")
        _check(self.scope in PROVIDER_SCOPES, "qos.scope",
               f"expected 'GLOBAL' or 'LOCAL', got {self.scope!r}")
        _check(isinstance(self.supports_on_change_subscriptions, bool),
               "qos.supports_on_change_subscriptions",
               f"expected bool, got {self.supports_on_change_subscriptions!r}")
        params = self.custom_parameters
        _check(isinstance(params, (tuple, list)), "qos.custom_parameters",
               f"expected a sequence, got {params!r}")
        normalised = []
        for p in params:
            if isinstance(p, CustomParameter):
                normalised.append(p)
            elif isinstance(p, (tuple, list)) and len(p) == 2:
                normalised.append(CustomParameter(*p))
            else:
                raise InvalidDiscoveryEntry("qos.custom_parameters",
                                            f"expected (name, value), got {p!r}")
        object.__setattr__(self, "custom_parameters", tuple(normalised))

    @property
    def is_global(self) -> bool:
        return self.scope == "GLOBAL"


def _validate_common(entry: Any) -> None:
    for name in ("participant_id", "domain", "interface_name", "public_key_id"):
        value = getattr(entry, name)
        _check(isinstance(value, str), name, f"expected str, got {value!r}")
    _check(entry.participant_id != "", "participant_id", "must not be empty")
    _check(isinstance(entry.provider_version, Version), "provider_version",
           f"expected Version, got {entry.provider_version!r}")
    _check(isinstance(entry.qos, ProviderQos), "qos", f"expected ProviderQos, got {entry.qos!r}")
    for name in ("last_seen_date_ms", "expiry_date_ms"):
        value = getattr(entry, name)
        _check(_is_int(value), name, f"expected int, got {value!r}")


@dataclass(frozen=True)
class DiscoveryEntry:
    """joynr.types.DiscoveryEntry: a provider registration, without an address."""

    participant_id: str
    domain: str
    interface_name: str
    provider_version: Version
    qos: ProviderQos
    last_seen_date_ms: int
    expiry_date_ms: int
    public_key_id: str = ""

    def __post_init__(self) -> None:
        _validate_common(self)

    def to_global(self, address: Address) -> GlobalDiscoveryEntry:
        return GlobalDiscoveryEntry(**_common_values(self), address=address)

    def with_meta_info(self, is_local: bool) -> DiscoveryEntryWithMetaInfo:
        return DiscoveryEntryWithMetaInfo(**_common_values(self), is_local=is_local)

    def to_wire(self) -> dict[str, Any]:
        return _common_to_wire(self)

    @classmethod
    def from_wire(cls, obj: Any) -> DiscoveryEntry:
        return cls(**_common_from_wire(obj))


@dataclass(frozen=True)
class GlobalDiscoveryEntry:
    """joynr.types.GlobalDiscoveryEntry: a discovery entry with the provider's address."""

    participant_id: str
    domain: str
    interface_name: str
    provider_version: Version
    qos: ProviderQos
    last_seen_date_ms: int
    expiry_date_ms: int
    public_key_id: str
    address: Address

    def __post_init__(self) -> None:
        _validate_common(self)
        _check(isinstance(self.address, _ADDRESS_CLASSES), "address",
               f"expected an address, got {self.address!r}")

    def to_local(self) -> DiscoveryEntry:
        return DiscoveryEntry(**_common_values(self))

    def with_meta_info(self, is_local: bool) -> DiscoveryEntryWithMetaInfo:
        return DiscoveryEntryWithMetaInfo(**_common_values(self), is_local=is_local)

    def with_address(self, address: Address) -> GlobalDiscoveryEntry:
        return replace(self, address=address)

    def to_wire(self) -> dict[str, Any]:
        out = _common_to_wire(self)
        out["address"] = address_to_json(self.address)
        return out

    @classmethod
    def from_wire(cls, obj: Any) -> GlobalDiscoveryEntry:
        values = _common_from_wire(obj)
        raw = _field(obj, "address", str)
        try:
            address = address_from_json(raw)
        except AddressError as exc:
            raise InvalidDiscoveryEntry("address", f"unparseable {raw!r}: {exc}") from None
        return cls(**values, address=address)


@dataclass(frozen=True)
class DiscoveryEntryWithMetaInfo:
    """joynr.types.DiscoveryEntryWithMetaInfo: a lookup result for a proxy."""

    participant_id: str
    domain: str
    interface_name: str
    provider_version: Version
    qos: ProviderQos
    last_seen_date_ms: int
    expiry_date_ms: int
    public_key_id: str
    is_local: bool

    def __post_init__(self) -> None:
        _validate_common(self)
        _check(isinstance(self.is_local, bool), "is_local", f"expected bool, got {self.is_local!r}")

    def to_local(self) -> DiscoveryEntry:
        return DiscoveryEntry(**_common_values(self))

    def to_wire(self) -> dict[str, Any]:
        out = _common_to_wire(self)
        out["isLocal"] = self.is_local
        return out

    @classmethod
    def from_wire(cls, obj: Any) -> DiscoveryEntryWithMetaInfo:
        return cls(**_common_from_wire(obj), is_local=_field(obj, "isLocal", bool))


_COMMON = (
    "participant_id",
    "domain",
    "interface_name",
    "provider_version",
    "qos",
    "last_seen_date_ms",
    "expiry_date_ms",
    "public_key_id",
)


def _common_values(entry: Any) -> dict[str, Any]:
    return {name: getattr(entry, name) for name in _COMMON}


def _common_to_wire(entry: Any) -> dict[str, Any]:
    qos = entry.qos
    return {
        "participantId": entry.participant_id,
        "domain": entry.domain,
        "interfaceName": entry.interface_name,
        "providerVersion": {
            "majorVersion": entry.provider_version.major_version,
            "minorVersion": entry.provider_version.minor_version,
        },
        "qos": {
            "customParameters": [{"name": p.name, "value": p.value}
                                 for p in qos.custom_parameters],
            "priority": qos.priority,
            "scope": qos.scope,
            "supportsOnChangeSubscriptions": qos.supports_on_change_subscriptions,
        },
        "lastSeenDateMs": entry.last_seen_date_ms,
        "expiryDateMs": entry.expiry_date_ms,
        "publicKeyId": entry.public_key_id,
    }


def _field(obj: Any, key: str, kind: type, prefix: str = "") -> Any:
    name = prefix + key
    if not isinstance(obj, Mapping):
        raise InvalidDiscoveryEntry(prefix.rstrip(".") or "entry",
                                    f"expected an object, got {obj!r}")
    if key not in obj:
        raise InvalidDiscoveryEntry(name, "missing")
    value = obj[key]
    ok = _is_int(value) if kind is int else isinstance(value, kind)
    if not ok:
        raise InvalidDiscoveryEntry(name, f"expected {kind.__name__}, got {value!r}")
    return value


def _common_from_wire(obj: Any) -> dict[str, Any]:
    version = _field(obj, "providerVersion", Mapping)
    qos = _field(obj, "qos", Mapping)
    params = _field(qos, "customParameters", list, "qos.") if "customParameters" in qos else []
    return {
        "participant_id": _field(obj, "participantId", str),
        "domain": _field(obj, "domain", str),
        "interface_name": _field(obj, "interfaceName", str),
        "provider_version": Version(
            _field(version, "majorVersion", int, "providerVersion."),
            _field(version, "minorVersion", int, "providerVersion."),
        ),
        "qos": ProviderQos(
            priority=_field(qos, "priority", int, "qos."),
            scope=_field(qos, "scope", str, "qos."),
            supports_on_change_subscriptions=_field(
                qos, "supportsOnChangeSubscriptions", bool, "qos."),
            custom_parameters=tuple(
                CustomParameter(_field(p, "name", str, "qos.customParameters."),
                                _field(p, "value", str, "qos.customParameters."))
                for p in params
            ),
        ),
        "last_seen_date_ms": _field(obj, "lastSeenDateMs", int),
        "expiry_date_ms": _field(obj, "expiryDateMs", int),
        "public_key_id": _field(obj, "publicKeyId", str),
    }


def validate_gbids(gbids: Any, known_gbids: Sequence[str]) -> tuple[str, ...]:
    """Check a GBID list as the GCD does, left to right; return it as a tuple.

    An empty list, a null, an empty string or a repeated GBID is INVALID_GBID; a GBID
    not in ``known_gbids`` is UNKNOWN_GBID. The first offending GBID decides.
    """
    if not isinstance(gbids, (list, tuple)) or len(gbids) == 0:
        raise DiscoveryErrorException(
            DiscoveryError.INVALID_GBID, f"gbids: expected a non-empty list, got {gbids!r}"
        )
    seen: set[str] = set()
    for gbid in gbids:
        if not isinstance(gbid, str) or gbid == "" or gbid in seen:
            what = "repeated" if isinstance(gbid, str) and gbid in seen else "invalid"
            raise DiscoveryErrorException(
                DiscoveryError.INVALID_GBID, f"gbids: {what} GBID {gbid!r} in {list(gbids)!r}"
            )
        seen.add(gbid)
        if gbid not in known_gbids:
            raise DiscoveryErrorException(
                DiscoveryError.UNKNOWN_GBID, f"gbids: unknown GBID {gbid!r} in {list(gbids)!r}"
            )
    return tuple(gbids)


def check_str(value: Any, field: str, *, allow_empty: bool = False) -> str:
    if not isinstance(value, str) or (value == "" and not allow_empty):
        raise InvalidDiscoveryArgument(field, f"expected a non-empty string, got {value!r}")
    return value


def check_str_list(value: Any, field: str) -> tuple[str, ...]:
    if not isinstance(value, (list, tuple)):
        raise InvalidDiscoveryArgument(field, f"expected a list of strings, got {value!r}")
    for item in value:
        check_str(item, field)
    return tuple(value)
