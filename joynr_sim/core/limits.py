"""What a value from the wire may be, as data: every id, topic, address, expiry and hop
counter a frame carries is checked against these limits when it is decoded, before any
part of a runtime uses it.

The limits are joynr's and MQTT's where they have one (an MQTT topic never holds a
wildcard or U+0000) and otherwise chosen so that every derived value stays legal: a message
id with its hop count is a delivery tag of the link registry (at most 256 bytes), a topic
with ``/low`` appended is still a topic.

The topic of an MqttAddress is where a cluster controller will publish (``<topic>/low``),
so it must have the layout the brokers' grants allow (``brokers.access``: a client publishes
unicast only to ``+/low``): one topic level. A topic with a ``/`` would make the controller
publish outside its grants, and Mosquitto disconnects a client for that (every such frame
one reconnect); it is refused here, at the edge, as any other value the runtime may not use.
``tests/test_qos0_and_topics.py`` keeps this grammar and the brokers' grants in agreement.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from .address import (
    Address,
    ChannelAddress,
    InProcessAddress,
    MqttAddress,
    WebSocketAddress,
    WebSocketClientAddress,
)

DEFAULT_MAX_FRAME_BYTES = 1024 * 1024
PREVIEW_CHARS = 64

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_GBID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*\Z")


@dataclass(frozen=True)
class WireLimits:
    max_id_bytes: int = 200  # message ids, participant ids, client ids
    max_topic_bytes: int = 1024
    max_text_bytes: int = 1024  # hosts, paths, URLs, channel ids
    max_expiry_ms: int = 2**62  # "forever" in this simulator
    max_hop_counter: int = 1024  # far above any hop limit; a bigger counter is forged
    max_headers: int = 32
    max_header_bytes: int = 4096
    max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES


DEFAULT_LIMITS = WireLimits()


class InvalidField(ValueError):
    """A value that decoded but may not be used; ``field`` names where it was."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field


def preview(value: Any, chars: int = PREVIEW_CHARS) -> str:
    """A value for an error message or a trace: its repr cut to ``chars``, with its length,
    so hostile input never writes megabytes into a trace line."""
    text = repr(value)
    if len(text) <= chars:
        return text
    size = len(value) if isinstance(value, (str, bytes, bytearray, list, dict, tuple)) else len(text)
    return f"{text[:chars]}... ({size} long)"


def shorten(text: str, chars: int = PREVIEW_CHARS) -> str:
    """A message for a trace, cut to ``chars`` with its length, as it is (no quotes)."""
    return text if len(text) <= chars else f"{text[:chars]}... ({len(text)} long)"


def check_text(value: Any, field: str, max_bytes: int, *, empty: bool = False) -> str:
    if not isinstance(value, str):
        raise InvalidField(field, f"expected a string, got {type(value).__name__}")
    if not value and not empty:
        raise InvalidField(field, "empty")
    size = len(value.encode("utf-8", "surrogatepass"))
    if size > max_bytes:
        raise InvalidField(field, f"{size} bytes, at most {max_bytes}")
    if _CONTROL.search(value):
        raise InvalidField(field, f"control character in {preview(value)}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise InvalidField(field, f"not valid UTF-8: {preview(value)}") from None
    return value


def plain_text(text: str, max_bytes: int) -> bool:
    """The common case of a text check_text accepts, decided without its work: 1 to
    max_bytes ASCII characters, none a control character (for ASCII, ``isprintable`` is
    false exactly for those). Anything else gets the full check and its error."""
    return 0 < len(text) <= max_bytes and text.isascii() and text.isprintable()


def check_id(value: Any, field: str, limits: WireLimits = DEFAULT_LIMITS) -> str:
    """A participant id, message id or client id: 1 to ``max_id_bytes`` bytes, no control
    characters."""
    return check_text(value, field, limits.max_id_bytes)


def check_topic(value: Any, field: str, limits: WireLimits = DEFAULT_LIMITS) -> str:
    """An MQTT topic a message may be published to: no wildcard, no U+0000 (MQTT 3.1.1
    section 4.7), bounded."""
    topic = check_text(value, field, limits.max_topic_bytes)
    if "#" in topic or "+" in topic:
        raise InvalidField(field, f"wildcard in topic {preview(topic)}")
    return topic


def check_unicast_topic(value: Any, field: str, limits: WireLimits = DEFAULT_LIMITS) -> str:
    """The topic of an MqttAddress (a cluster controller's or the GCD's), to which ``/low``
    is appended for a unicast publish: an MQTT topic of exactly one level, so no ``/``, not
    reserved (a leading ``$``: the brokers' ``+`` matches none of those), bounded."""
    topic = check_topic(value, field, limits)
    if "/" in topic:
        raise InvalidField(field, f"topic level separator '/' in {preview(topic)}: a unicast topic is one level")
    if topic.startswith("$"):
        raise InvalidField(field, f"topic {preview(topic)} starts with '$', which MQTT reserves for the broker")
    return topic


def check_gbid(value: Any, field: str, limits: WireLimits = DEFAULT_LIMITS) -> str:
    gbid = check_text(value, field, limits.max_id_bytes)
    if not _GBID.match(gbid):
        raise InvalidField(field, f"not a GBID: {preview(gbid)}")
    return gbid


def check_address(address: Address, field: str, limits: WireLimits = DEFAULT_LIMITS) -> Address:
    """Every field of an address that came from outside."""
    if isinstance(address, MqttAddress):
        check_gbid(address.broker_uri, f"{field}.brokerUri", limits)
        check_unicast_topic(address.topic, f"{field}.topic", limits)
    elif isinstance(address, WebSocketClientAddress):
        check_id(address.id, f"{field}.id", limits)
    elif isinstance(address, WebSocketAddress):
        check_text(address.host, f"{field}.host", limits.max_text_bytes)
        check_text(address.path, f"{field}.path", limits.max_text_bytes, empty=True)
    elif isinstance(address, ChannelAddress):
        check_text(address.messaging_endpoint_url, f"{field}.messagingEndpointUrl", limits.max_text_bytes)
        check_id(address.channel_id, f"{field}.channelId", limits)
    elif isinstance(address, InProcessAddress):
        raise InvalidField(field, "an InProcessAddress never comes from outside")
    return address


def check_int(value: Any, field: str, low: int, high: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool):
        raise InvalidField(field, f"expected an integer, got {type(value).__name__}")
    if not low <= value <= high:
        raise InvalidField(field, f"{preview(value)} is outside {low}..{high}")
    return value
