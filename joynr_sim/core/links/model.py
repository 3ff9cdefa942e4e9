"""The link model: names and their validation, termini, keys, what attach and detach return.

A link is identified by the ordered tuple (source container id, target container id, link
name); for a sending link the source container is the local one, for a receiving link the
remote one (``LinkKey``). In joynr-sim the remote container is a GBID (one broker per GBID)
and the link name is the MQTT client id (``validate_mqtt_client_id``).

Every value that enters the registry is checked here; bad input raises ``LinkError``
naming the field and the value, and changes nothing.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import IntEnum
from typing import Literal

Role = Literal["sending", "receiving"]
ROLES: tuple[Role, ...] = ("sending", "receiving")

AttachMode = Literal["establish", "reattach", "resume", "recover", "steal", "reject"]
ESTABLISH: AttachMode = "establish"
REATTACH: AttachMode = "reattach"
RESUME: AttachMode = "resume"
RECOVER: AttachMode = "recover"
STEAL: AttachMode = "steal"
REJECT: AttachMode = "reject"

# AMQP 1.0 error conditions (section 2.8.15 and 2.8.17).
ERR_STOLEN = "amqp:link:stolen"
ERR_NOT_FOUND = "amqp:not-found"
ERR_INTERNAL = "amqp:internal-error"
ERR_RESOURCE_LOCKED = "amqp:resource-locked"  # only the links:steal-refused variant refuses so

# Container ids and link names: AMQP puts no bound on them, a registry that stores them
# must. 256 bytes of UTF-8 covers GBIDs, container ids and joynr's client ids.
MAX_NAME_BYTES = 256
# MQTT 3.1.1 section 3.1.3.1: a server MUST accept 1-23 bytes of [0-9a-zA-Z]; it MAY accept
# more, up to the 65535 bytes a UTF-8 string field can hold (Mosquitto and amqtt do).
MQTT_STRICT_CLIENT_ID_MAX_BYTES = 23
MQTT_CLIENT_ID_MAX_BYTES = 65535
_MQTT_STRICT_CLIENT_ID = re.compile(r"[0-9a-zA-Z]{1,23}", re.ASCII)
# AMQP bounds delivery tags at 32 bytes; joynr message ids (the natural tag of a QoS 1
# publish) are longer, so the bound is the name bound.
MAX_DELIVERY_TAG_BYTES = MAX_NAME_BYTES
MAX_ADDRESS_BYTES = 65535

# AMQP 1.0 section 3.4 delivery states; None is "sent, no state yet".
DELIVERY_STATES: tuple[str | None, ...] = (
    None, "received", "accepted", "rejected", "released", "modified",
)
TERMINAL_STATES = frozenset({"accepted", "rejected", "released", "modified"})


class TerminusDurability(IntEnum):
    NONE = 0  # nothing survives a restart
    CONFIGURATION = 1  # the terminus survives
    UNSETTLED_STATE = 2  # the terminus and its unsettled deliveries survive


# -- errors ---------------------------------------------------------------------------


class LinkError(ValueError):
    """Bad input to the registry. Names the field and the value; nothing was changed."""

    def __init__(self, field: str, value: object, problem: str) -> None:
        self.field = field
        self.value = value
        super().__init__(f"{field}: {problem}, got {_short_repr(value)}")


class LinkStateError(LinkError):
    """An operation that the link's current state does not allow; nothing was changed."""


def _short_repr(value: object, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} chars)"


# -- validation -----------------------------------------------------------------------


def _utf8_text(value: object, field: str, max_bytes: int) -> str:
    """A non-empty str of valid UTF-8 (no lone surrogates); bytes must decode strictly."""
    if isinstance(value, (bytes, bytearray)):
        try:
            value = bytes(value).decode("utf-8")
        except UnicodeDecodeError as e:
            raise LinkError(field, value, f"is not valid UTF-8 ({e.reason} at byte {e.start})") from None
    if not isinstance(value, str):
        raise LinkError(field, value, f"expected a string, not {type(value).__name__}")
    if not value:
        raise LinkError(field, value, "must not be empty")
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError as e:
        raise LinkError(field, value, f"is not valid UTF-8 (lone surrogate at index {e.start})") from None
    if size > max_bytes:
        raise LinkError(field, value, f"is {size} bytes of UTF-8, longer than {max_bytes}")
    return value


def validate_connection_id(value: object, field: str = "connection_id") -> str:
    """1 to MAX_NAME_BYTES bytes of valid UTF-8; returns the id as str."""
    return _utf8_text(value, field, MAX_NAME_BYTES)


def validate_container_id(value: object, field: str = "container_id") -> str:
    """1 to MAX_NAME_BYTES bytes of valid UTF-8; returns the id as str."""
    return _utf8_text(value, field, MAX_NAME_BYTES)


def validate_link_name(value: object, field: str = "link_name") -> str:
    """1 to MAX_NAME_BYTES bytes of valid UTF-8; returns the name as str."""
    return _utf8_text(value, field, MAX_NAME_BYTES)


def validate_mqtt_client_id(
    value: object, field: str = "client_id", *, strict: bool = False
) -> str:
    """An MQTT 3.1.1 client id used as a link name.

    strict: only what every server must accept, 1-23 bytes of [0-9a-zA-Z].
    Otherwise (the default) what brokers accept: 1-65535 bytes of UTF-8 without U+0000
    (section 1.5.3). Empty ids are refused in both modes: a server-assigned id has no
    session to resume, so it is never a link.
    """
    if strict:
        text = _utf8_text(value, field, MQTT_STRICT_CLIENT_ID_MAX_BYTES)
        if not _MQTT_STRICT_CLIENT_ID.fullmatch(text):
            raise LinkError(field, value, "must be 1-23 characters of [0-9a-zA-Z] (MQTT 3.1.1)")
        return text
    text = _utf8_text(value, field, MQTT_CLIENT_ID_MAX_BYTES)
    if "\x00" in text:
        raise LinkError(field, value, "must not contain U+0000 (MQTT 3.1.1 section 1.5.3)")
    return text


def validate_delivery_tag(value: object, field: str = "tag") -> str:
    return _utf8_text(value, field, MAX_DELIVERY_TAG_BYTES)


def validate_delivery_state(value: object, field: str = "state") -> str | None:
    if value not in DELIVERY_STATES or isinstance(value, bool):
        raise LinkError(field, value, f"expected one of {DELIVERY_STATES}")
    return value  # type: ignore[return-value]


def validate_unsettled(value: object, field: str = "unsettled") -> dict[str, str | None]:
    if not isinstance(value, Mapping):
        raise LinkError(field, value, "expected a mapping of delivery tag to delivery state")
    return {
        validate_delivery_tag(tag, f"{field} tag"): validate_delivery_state(
            state, f"{field}[{tag!r}]"
        )
        for tag, state in value.items()
    }


# -- values ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Terminus:
    """A source or target: the part of a link that is stored."""

    address: str | None = None
    durability: int = TerminusDurability.NONE
    # Further attributes (for MQTT: subscriptions and their QoS), sorted (name, value) pairs.
    properties: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        if self.address is not None:
            _utf8_text(self.address, "terminus.address", MAX_ADDRESS_BYTES)
        if isinstance(self.durability, bool) or self.durability not in (0, 1, 2):
            raise LinkError("terminus.durability", self.durability, "expected 0, 1 or 2")
        object.__setattr__(self, "durability", int(self.durability))
        props = self.properties
        items = props.items() if isinstance(props, Mapping) else props
        try:
            pairs = tuple(sorted((k, v) for k, v in items))
        except (TypeError, ValueError):
            raise LinkError("terminus.properties", props, "expected (name, value) string pairs") from None
        for k, v in pairs:
            if not isinstance(k, str) or not isinstance(v, str):
                raise LinkError("terminus.properties", props, "expected (name, value) string pairs") from None
        object.__setattr__(self, "properties", pairs)

    def with_durability(self, durability: int) -> Terminus:
        return Terminus(self.address, durability, self.properties)


@dataclass(frozen=True)
class LinkKey:
    role: Role
    local_container_id: str
    remote_container_id: str
    link_name: str

    @property
    def source_container_id(self) -> str:
        return self.local_container_id if self.role == "sending" else self.remote_container_id

    @property
    def target_container_id(self) -> str:
        return self.remote_container_id if self.role == "sending" else self.local_container_id

    def as_tuple(self) -> tuple[str, str, str]:
        """The seed's unique key: (source container id, target container id, link name)."""
        return (self.source_container_id, self.target_container_id, self.link_name)


@dataclass(frozen=True)
class Delivery:
    tag: str
    state: str | None
    resumed: bool = True  # sent again with the resume flag: the peer may have seen it


@dataclass(frozen=True)
class LinkErrorCondition:
    condition: str
    description: str


@dataclass(frozen=True)
class AttachOutcome:
    mode: AttachMode
    key: LinkKey
    connection_id: str
    terminus: Terminus | None  # the local terminus held afterwards (None: nothing held)
    resend: tuple[Delivery, ...] = ()  # to transfer again, by us (sending) or the peer
    settled: tuple[str, ...] = ()  # settled while resuming, without a resend
    peer_only: tuple[str, ...] = ()  # in the peer's unsettled map, unknown here
    stolen_from: str | None = None
    recovered: bool = False  # the local terminus came from the registry (null in attach)
    resumed: bool = False  # an existing terminus with unsettled state was reconciled
    error: LinkErrorCondition | None = None

    @property
    def ok(self) -> bool:
        return self.mode != REJECT


@dataclass(frozen=True)
class DetachOutcome:
    key: LinkKey
    connection_id: str
    detached: bool  # False: that connection did not own the link, nothing changed
    closed: bool
    error: LinkErrorCondition | None = None
