"""Hypothesis strategies for joynr frames: the wire layout of ``joynr_sim.core.message``
with one to three slots replaced by a hostile value — empty, huge, control characters, MQTT
wildcards, a value of the wrong type inside valid msgpack, integers at and past every
bound — and replyTo addresses whose fields are hostile in the same ways, or whose topic has
more than one level (the reply would go outside the brokers' grants).

Every frame carries a fresh message id (``fz-<n>``) unless the id slot itself is the hostile
one, so a harness can tell a frame that was handled (its id appears in a ``msg.in``) from
one that was dropped before it was a message (a ``msg.drop`` without an id).
"""

from __future__ import annotations

import itertools
import json
from typing import Any

import msgpack
from hypothesis import strategies as st

from ..core.address import from_json
from ..core.message import EFFORTS, MESSAGE_TYPES, WIRE_VERSION, JoynrMessage

SLOTS = ("v", "t", "id", "f", "to", "rt", "ex", "ef", "ch", "h", "pl")
ID_PREFIX = "fz-"
_ids = itertools.count()
# The valid frames come from this many senders (``fuzzer-<n mod SENDERS>``): a runtime mutes a
# sender once 1,000 of its messages were dropped within 10 s (``core.fairness``), and the
# hostile frames are a test of the decoding edge, not of that share; a sender muted anyway
# is accounted for by the line that counts its messages.
SENDERS = 64
SENDER_PREFIX = "fuzzer-"

# Texts an attacker would try in any string field.
hostile_texts = st.one_of(
    st.just(""),
    st.sampled_from(["#", "+", "a/#", "a/+/b", "/", "//", "$SYS/x", " ", "\n", "id\n", "\x00", "a\x00b",
                     "\x7f", "\u202e", "\ud800".encode("utf-8", "surrogatepass").decode("utf-8", "replace")]),
    st.text(min_size=1, max_size=8),
    st.integers(min_value=250, max_value=70_000).map(lambda n: "x" * n),
    st.text(alphabet=st.characters(min_codepoint=0, max_codepoint=31), min_size=1, max_size=5),
)
# Values of the wrong type, inside valid msgpack.
wrong_types = st.one_of(
    st.none(), st.booleans(), st.floats(allow_nan=True),
    st.sampled_from([0, -1, 1, 2**31, 2**62 + 1, 2**63 - 1, -(2**63), 2**64 - 1]),
    st.binary(max_size=16), st.lists(st.integers(-(2**63), 2**64 - 1), max_size=3),
    st.dictionaries(st.text(max_size=3), st.integers(-(2**63), 2**64 - 1), max_size=2),
)
hostile_values = st.one_of(hostile_texts, wrong_types)

ADDRESS_TYPES = ["MqttAddress", "WebSocketClientAddress", "WebSocketAddress", "ChannelAddress",
                 "InProcessAddress", "BrowserAddress", "Nope"]
# Strategies are built once: building them inside a draw costs Hypothesis more than the draw.
_address_types = st.sampled_from(ADDRESS_TYPES)
_address_fields = st.sets(st.sampled_from(["brokerUri", "topic", "id", "host", "port", "path", "protocol"]),
                          max_size=4)
_field_values = hostile_values | st.just("gbid1")
_json_variants = st.integers(0, 3)


@st.composite
def reply_tos(draw: st.DrawFn) -> Any:
    """A replyTo slot: joynr JSON with hostile fields, or not JSON at all."""
    fields: dict[str, Any] = {"_typeName": f"joynr.system.RoutingTypes.{draw(_address_types)}"}
    for name in sorted(draw(_address_fields)):
        fields[name] = draw(_field_values)
    text = json.dumps(fields, default=repr)
    return (text, text[:-1], "[" * 50, text * 2)[draw(_json_variants)]


# replyTo topics that are MQTT topics but no unicast target: the reply's "<topic>/low" is outside
# every client's grants (a multicast topic, a deeper level of one's own prefix, an empty level).
MULTILEVEL_TOPICS = ["fuzzer/x", "cc1/low/x", "a/b", "joynr-sim-multicast/p/b", "/", "x/", "cc2//"]
multilevel_reply_tos = st.sampled_from(MULTILEVEL_TOPICS).map(
    lambda topic: json.dumps({"_typeName": "joynr.system.RoutingTypes.MqttAddress", "brokerUri": "gbid1",
                              "topic": topic}))


def reply_topic(frame: bytes) -> str | None:
    """The topic of a frame's replyTo when it is an MqttAddress with a string topic."""
    try:
        address = json.loads(msgpack.unpackb(frame, raw=False)[5])
        topic = address["topic"]
    except Exception:
        return None
    return topic if isinstance(topic, str) and str(address.get("_typeName", "")).endswith(".MqttAddress") else None


def restart_ids(first: int) -> None:
    """Number the next frames from ``first`` (each batch its own range, in any process)."""
    global _ids
    _ids = itertools.count(first)


def valid_slots(to: str, sender: str | None = None, reply_topic: str = "fuzzer") -> dict[str, Any]:
    """The slots of a valid request; without ``sender``, one of ``SENDERS`` picked by the
    frame's number."""
    n = next(_ids)
    return {
        "v": WIRE_VERSION, "t": "rq", "id": f"{ID_PREFIX}{n}", "to": to,
        "f": sender if sender is not None else f"{SENDER_PREFIX}{n % SENDERS}",
        "rt": json.dumps({"_typeName": "joynr.system.RoutingTypes.MqttAddress", "brokerUri": "gbid1",
                          "topic": reply_topic}),
        "ex": 2**41, "ef": "NORMAL", "ch": [["requestReplyId", "fz"]], "h": 0,
        "pl": msgpack.packb({"m": "echo", "p": ["fz"]}),
    }


def valid_message(to: str, sender: str | None = None, reply_topic: str = "fuzzer") -> JoynrMessage:
    """The request of ``valid_slots`` as a message, for a wire other than the default one to
    encode: the same fresh id, sender and replyTo."""
    slots = valid_slots(to, sender, reply_topic)
    return JoynrMessage(slots["t"], slots["f"], slots["to"], slots["ex"], slots["pl"], id=slots["id"],
                        reply_to=from_json(slots["rt"]), effort=slots["ef"],
                        custom_headers=tuple((k, v) for k, v in slots["ch"]), hops=slots["h"])


_types = st.sampled_from(sorted(MESSAGE_TYPES))
_only_reply_to = st.integers(0, 19).map(lambda n: n == 0)  # one frame in 20
_efforts = st.sampled_from(sorted(EFFORTS))
# The slots whose values a decoder must judge come up twice as often as the others.
_hostile_slots = st.sets(st.sampled_from(SLOTS + ("id", "f", "to", "rt", "ex", "ch", "h")), min_size=1, max_size=3)
# Text slots mostly get hostile text, so most frames decode and their values are judged.
_mostly_text = st.one_of(hostile_texts, hostile_texts, hostile_texts, wrong_types)
_slot_values = {
    "id": _mostly_text, "f": _mostly_text, "to": _mostly_text,
    "rt": reply_tos() | multilevel_reply_tos | hostile_values,
    "ch": st.lists(st.lists(hostile_values, max_size=3), max_size=3) | st.just([["k", "v"]] * 33) | hostile_values,
    "pl": st.binary(max_size=64) | hostile_values,
}


@st.composite
def hostile_frames(draw: st.DrawFn, recipients: list[str]) -> bytes:
    """A frame addressed to one of ``recipients`` (or a hostile recipient), with one to three
    slots hostile."""
    slots = valid_slots(recipients[draw(st.integers(0, len(recipients) - 1))])
    if draw(_only_reply_to):
        # A request that is valid but for its replyTo topic: only such a frame reaches the
        # provider, whose reply would go to that topic.
        slots["rt"] = draw(multilevel_reply_tos)
        return msgpack.packb([slots[s] for s in SLOTS], use_bin_type=True)
    slots["t"] = draw(_types)
    slots["ef"] = draw(_efforts)
    for name in sorted(draw(_hostile_slots)):
        slots[name] = draw(_slot_values.get(name, hostile_values))
    return msgpack.packb([slots[s] for s in SLOTS], use_bin_type=True)


def frame_key(frame: bytes) -> tuple[str, int] | None:
    """The id and hop count of a frame, where both slots have a message's types."""
    try:
        fields = msgpack.unpackb(frame, raw=False)
        mid, hops = fields[2], fields[9]
    except Exception:
        return None
    if isinstance(mid, str) and isinstance(hops, int) and not isinstance(hops, bool):
        return mid, hops
    return None


def frame_id(frame: bytes) -> str | None:
    """The id a frame carries if it is one of the harness's own, else None."""
    try:
        fields = msgpack.unpackb(frame, raw=False)
        mid = fields[2]
    except Exception:
        return None
    return mid if isinstance(mid, str) and mid.startswith(ID_PREFIX) else None
