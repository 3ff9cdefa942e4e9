"""Who may log in to a managed broker, and which topics each login may use: the one model
both brokers enforce (amqtt through its plugins in ``brokers.amqtt_access``, Mosquitto
through the files ``brokers.mosquitto_config`` renders from it). Pure: no files, sockets or clocks.

Every client logs in with its MQTT client id as its username and a password derived from
the broker set's secret and that username, so holding one client's password says nothing
about another's, and the broker can check a password without a list of clients:

- a client (a cluster controller, a GCD instance, a test's outsider) may subscribe only
  within its own prefix ``<client id>/#`` (joynr subscribes to ``<topic>/#`` with topic =
  client id) and publish only to unicast topics ``<any topic>/low``, another cluster
  controller's or the GCD's (``discoverydirectory_channelid/low``); and subscribe and publish
  to multicast topics ``MULTICAST_PREFIX<provider>/<broadcast>[/<partition>...]`` (joynr's
  multicast topic: a configured prefix, then the multicast id; the prefix is one no client
  id can own, and a multicast topic has at least three levels, so it is never a unicast
  topic and never within a client's own prefix);
- the administrative user ``ADMIN_USERNAME`` is the simulator's own: any client id, any topic.

Client ids starting with ``RESERVED_PREFIX`` are the broker set's own (its probes).
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass

RESERVED_PREFIX = "joynr-sim-"
ADMIN_USERNAME = RESERVED_PREFIX + "admin"
PROBE_USERNAME = RESERVED_PREFIX + "probe"
# joynr's unicast topic is "<topic>/low" (joynr_sim.transport.mqtt.unicast_topic).
UNICAST_LEVEL = "low"
# joynr's multicast topic prefix (joynr.messaging.mqtt.topicprefix.multicast); reserved, so
# no client's own prefix holds the multicasts (joynr_sim.transport.mqtt.multicast_topic).
MULTICAST_PREFIX = RESERVED_PREFIX + "multicast/"
MAX_CLIENT_ID_BYTES = 65535  # an MQTT string (MQTT 3.1.1 section 1.5.3)
_FORBIDDEN = {
    "/": "a topic level separator: the client's own prefix must be one topic level",
    "+": "an MQTT wildcard",
    "#": "an MQTT wildcard",
    ":": "the separator of Mosquitto's password file",
}


@dataclass(frozen=True)
class Grant:
    """``access`` (read: subscribe and receive; write: publish) on a topic filter."""

    access: str  # read | write | readwrite
    topic_filter: str

    @property
    def reads(self) -> bool:
        return self.access in ("read", "readwrite")

    @property
    def writes(self) -> bool:
        return self.access in ("write", "readwrite")


def check_client_id(client_id: object, *, internal: bool = False) -> str:
    """A client id that can be a username of the model; else ValueError naming it.

    Its own prefix must be a single topic level that Mosquitto's files can hold, so
    separators, wildcards, a leading ``$`` (reserved topics), white space and control
    characters are refused; so are the broker set's own names unless ``internal``."""
    if not isinstance(client_id, str) or not client_id:
        raise ValueError(f"client_id: expected a non-empty string, got {client_id!r}")
    shown = client_id if len(client_id) <= 80 else client_id[:77] + "..."
    if len(client_id.encode("utf-8", "surrogatepass")) > MAX_CLIENT_ID_BYTES:
        raise ValueError(f"client_id: {shown!r} is longer than {MAX_CLIENT_ID_BYTES} bytes")
    for char, why in _FORBIDDEN.items():
        if char in client_id:
            raise ValueError(f"client_id: {shown!r} contains {char!r}, {why}")
    if client_id.startswith("$"):
        raise ValueError(f"client_id: {shown!r} starts with '$', which MQTT reserves for broker topics")
    if any(c.isspace() or not c.isprintable() for c in client_id):
        raise ValueError(f"client_id: {shown!r} contains white space or a control character")
    if not internal and client_id.startswith(RESERVED_PREFIX):
        raise ValueError(
            f"client_id: {shown!r} starts with {RESERVED_PREFIX!r}, reserved for the broker set's own clients"
        )
    return client_id


def password(secret: str, username: str) -> str:
    """The password of ``username``: HMAC-SHA256 of the set's secret, 128 bits in hex."""
    return hmac.new(secret.encode(), username.encode(), hashlib.sha256).hexdigest()[:32]


def admitted(secret: str, username: str | None, given: str | None, client_id: str | None) -> str | None:
    """None when the CONNECT may go on; else why not (without the password).

    A client logs in as itself: its username is its client id, so nobody can take over
    another client's session without that client's password."""
    if not username:
        return "no username"
    if username != ADMIN_USERNAME:
        if client_id != username:
            return "the client id is not the username (a client logs in only as itself)"
        try:
            check_client_id(username, internal=True)
        except ValueError:
            return "the username cannot be a client id"
    if not hmac.compare_digest((given or "").encode(), password(secret, username).encode()):
        return "wrong password"
    return None


def grants(username: str) -> tuple[Grant, ...]:
    if username == ADMIN_USERNAME:
        return (Grant("readwrite", "#"),)
    return (Grant("read", f"{username}/#"), Grant("write", f"+/{UNICAST_LEVEL}"),
            Grant("readwrite", f"{MULTICAST_PREFIX}+/+/#"))


def may_subscribe(username: str, topic_filter: str) -> bool:
    """Only to filters whose every topic the user may read: ``#`` is not within ``cc1/#``."""
    return any(g.reads and covers(g.topic_filter, topic_filter) for g in grants(username))


def may_receive(username: str, topic: str) -> bool:
    return any(g.reads and covers(g.topic_filter, topic) for g in grants(username))


def may_publish(username: str, topic: str) -> bool:
    return any(g.writes and covers(g.topic_filter, topic) for g in grants(username))


def covers(allowed: str, requested: str) -> bool:
    """Whether every topic that filter ``requested`` matches is matched by filter
    ``allowed`` (a topic is a filter without wildcards, so this is also "topic matches
    filter"). MQTT 3.1.1 section 4.7: ``#`` matches the parent level too (``a/#``
    matches ``a``), ``+`` exactly one level, and a filter starting with a wildcard
    matches no topic starting with ``$``."""
    want, have = requested.split("/"), allowed.split("/")
    if requested.startswith("$") and have[0] in ("#", "+"):
        return False
    for i, level in enumerate(have):
        if level == "#":
            return True
        if i >= len(want):
            return False
        if want[i] == "#":
            return False  # requested reaches deeper than a non-# level allows
        if level == "+":
            continue
        if want[i] != level:  # a literal level: "+" requested is wider, another literal differs
            return False
    return len(want) == len(have)
