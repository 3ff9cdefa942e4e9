"""joynr messages and their msgpack wire codec."""

from __future__ import annotations

import msgpack
import pytest
from hypothesis import given
from hypothesis import strategies as st

from joynr_sim.core.address import (
    AddressError,
    ChannelAddress,
    InProcessAddress,
    MqttAddress,
    WebSocketAddress,
    WebSocketClientAddress,
    to_json,
)
from joynr_sim.core.limits import WireLimits, check_text, plain_text
from joynr_sim.core.message import (
    MESSAGE_TYPES,
    InvalidMessage,
    JoynrMessage,
    MessageDecodeError,
    decode,
    encode,
)

ALL_TYPES = ["rq", "rp", "o", "arq", "brq", "mrq", "srp", "sst", "p", "m"]
REPLY_TO = [
    None,
    MqttAddress("gbid1", "cc1"),  # one topic level: a reply goes to "cc1/low"
    WebSocketAddress("WSS", "cc", 443, "/ws"),
    WebSocketClientAddress("client-1"),
    ChannelAddress("http://bp/", "ch"),
]


def test_the_message_types_are_joynrs():
    assert MESSAGE_TYPES == frozenset(ALL_TYPES)


@pytest.mark.parametrize("mtype", ALL_TYPES)
@pytest.mark.parametrize("reply_to", REPLY_TO, ids=lambda a: type(a).__name__)
def test_round_trip_of_every_field(mtype, reply_to):
    msg = JoynrMessage(
        type=mtype,
        sender="proxy-1",
        recipient="provider-2",
        expiry_date_ms=1_700_000_000_123,
        payload=b"\x00\xffpayload",
        id="msg-1",
        reply_to=reply_to,
        effort="BEST_EFFORT",
        custom_headers=(("z-first", "1"), ("a-second", ""), ("z-first", "dup")),
        hops=3,
    )
    back = decode(encode(msg))
    assert back == msg
    assert back.custom_headers == msg.custom_headers  # order and duplicates kept
    assert isinstance(back.payload, bytes)


def test_defaults_and_helpers():
    a = JoynrMessage("rq", "f", "t", 10)
    b = JoynrMessage("rq", "f", "t", 10)
    assert a.id != b.id and a.payload == b"" and a.reply_to is None
    assert a.effort == "NORMAL" and a.custom_headers == () and a.hops == 0
    hopped = a.with_hop().with_hop()
    assert hopped.hops == 2 and a.hops == 0 and hopped.id == a.id
    assert hopped == JoynrMessage("rq", "f", "t", 10, id=a.id, hops=2)  # every other field kept
    answered = hopped.with_reply_to(MqttAddress("gbid1", "cc1"))
    assert answered == JoynrMessage("rq", "f", "t", 10, id=a.id, hops=2, reply_to=MqttAddress("gbid1", "cc1"))
    assert hopped.reply_to is None
    m = JoynrMessage("o", "f", "t", 10, custom_headers=(("k", "v"),))
    assert m.header("k") == "v" and m.header("missing") is None
    twice = JoynrMessage("o", "f", "t", 10, custom_headers=(("k", "1"), ("j", "2"), ("k", "3")))
    assert twice.header("k") == "3"  # the last of equal names, as a dict of them says
    assert decode(encode(a)) == a


def test_an_in_process_reply_to_is_never_encoded():
    msg = JoynrMessage("rq", "f", "t", 10, reply_to=InProcessAddress(object()))
    with pytest.raises(AddressError):
        encode(msg)


# -- bad frames name the field -----------------------------------------------------------

GOOD = [1, "rq", "id", "f", "to", None, 10, "NORMAL", [["k", "v"]], 0, b"pl"]
SLOT = {name: i for i, name in enumerate(["v", "t", "id", "f", "to", "rt", "ex", "ef", "ch", "h", "pl"])}


def frame(**changes):
    values = list(GOOD)
    for name, value in changes.items():
        values[SLOT[name]] = value
    return msgpack.packb(values, use_bin_type=True)


BAD_FRAMES = [
    ("empty", b"", "frame"),
    ("truncated", frame()[:-1], "frame"),
    ("trailing bytes", frame() + b"\x00", "frame"),
    ("not a list", msgpack.packb({"v": 1}), "frame"),
    ("too short", msgpack.packb(GOOD[:-1], use_bin_type=True), "frame"),
    ("too long", msgpack.packb(GOOD + [1], use_bin_type=True), "frame"),
    ("int map key", msgpack.packb({1: 2}), "frame"),
    ("version", frame(v=2), "v"),
    ("version a string", frame(v="1"), "v"),
    ("type unknown", frame(t="xx"), "t"),
    ("type a list", frame(t=["rq"]), "t"),
    ("type a map", frame(t={"a": 1}), "t"),
    ("type bytes", frame(t=b"rq"), "t"),
    ("id an int", frame(id=5), "id"),
    ("from None", frame(f=None), "f"),
    ("to bytes", frame(to=b"to"), "to"),
    ("expiry a string", frame(ex="10"), "ex"),
    ("expiry a bool", frame(ex=True), "ex"),
    ("expiry a float", frame(ex=1.5), "ex"),
    ("effort unknown", frame(ef="HIGH"), "ef"),
    ("effort a list", frame(ef=["NORMAL"]), "ef"),
    ("effort a map", frame(ef={}), "ef"),
    ("headers a map", frame(ch={"k": "v"}), "ch"),
    ("header a triple", frame(ch=[["k", "v", "w"]]), "ch[0]"),
    ("header value an int", frame(ch=[["k", 1]]), "ch[0]"),
    ("header a string", frame(ch=["kv"]), "ch[0]"),
    ("hops a string", frame(h="0"), "h"),
    ("hops None", frame(h=None), "h"),
    ("payload a string", frame(pl="pl"), "pl"),
    ("reply-to bytes", frame(rt=b"{}"), "rt"),
    ("reply-to not JSON", frame(rt="{"), "rt._typeName"),
    ("reply-to deeply nested", frame(rt="[" * 100_000), "rt"),
    ("reply-to unknown type", frame(rt='{"_typeName": "joynr.system.RoutingTypes.X"}'), "rt._typeName"),
    ("reply-to missing topic",
     frame(rt='{"_typeName": "joynr.system.RoutingTypes.MqttAddress", "brokerUri": "g"}'), "rt.topic"),
]


@pytest.mark.parametrize("data, field", [b[1:] for b in BAD_FRAMES], ids=[b[0] for b in BAD_FRAMES])
def test_bad_frames_raise_message_decode_error_naming_the_field(data, field):
    with pytest.raises(MessageDecodeError) as info:
        decode(data)
    assert info.value.field == field
    assert isinstance(info.value, ValueError)
    assert repr(field) in str(info.value)


def test_the_reference_frame_is_good():
    assert decode(frame()) == JoynrMessage(
        "rq", "f", "to", 10, b"pl", "id", None, "NORMAL", (("k", "v"),), 0
    )


# -- properties ----------------------------------------------------------------------

# Values a well-behaved runtime sends: the codec round-trips them exactly.
ids = st.text(st.characters(blacklist_categories=("Cc", "Cs")), min_size=1, max_size=40)
# One topic level, not reserved: what a replyTo may name (core.limits.check_unicast_topic).
topics = ids.filter(lambda t: not any(c in t for c in "#+/") and not t.startswith("$"))
gbids = st.from_regex(r"\A[A-Za-z0-9][A-Za-z0-9._-]{0,20}\Z")
addresses = st.one_of(
    st.builds(WebSocketAddress, st.sampled_from(["WS", "WSS"]), ids,
              st.integers(1, 65535), ids | st.just("")),
    st.builds(WebSocketClientAddress, ids),
    st.builds(MqttAddress, gbids, topics),
    st.builds(ChannelAddress, ids, ids),
)
int64 = st.integers(-(2**63), 2**63 - 1)
messages = st.builds(
    JoynrMessage,
    type=st.sampled_from(ALL_TYPES),
    sender=ids,
    recipient=ids,
    expiry_date_ms=st.integers(0, 2**62),
    payload=st.binary(),
    id=ids,
    reply_to=st.none() | addresses,
    effort=st.sampled_from(["NORMAL", "BEST_EFFORT"]),
    custom_headers=st.lists(st.tuples(ids, ids | st.just("")), max_size=5).map(tuple),
    hops=st.integers(0, 1024),
)


@given(messages)
def test_codec_round_trip(msg):
    assert decode(encode(msg)) == msg


def _decode_only_errors(data):
    try:
        msg = decode(data)
    except MessageDecodeError:
        return
    assert decode(encode(msg)) == msg


@given(st.binary())
def test_garbage_bytes_raise_only_message_decode_error(data):
    _decode_only_errors(data)


msgpack_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | st.floats()
    | st.text(max_size=10) | st.binary(max_size=10),
    lambda children: st.lists(children, max_size=5)
    | st.dictionaries(st.text(max_size=5) | st.binary(max_size=5), children, max_size=4),
    max_leaves=15,
)


@given(msgpack_values)
def test_msgpack_of_the_wrong_shape_raises_only_message_decode_error(value):
    _decode_only_errors(msgpack.packb(value, use_bin_type=True))


# Frames of the right length whose slots are plausible or random values.
slot_values = {
    "v": st.just(1) | msgpack_values,
    "t": st.sampled_from(ALL_TYPES) | msgpack_values,
    "id": st.text() | msgpack_values,
    "f": st.text() | msgpack_values,
    "to": st.text() | msgpack_values,
    "rt": st.none() | addresses.map(to_json) | st.text() | msgpack_values,
    "ex": int64 | msgpack_values,
    "ef": st.sampled_from(["NORMAL", "BEST_EFFORT"]) | msgpack_values,
    "ch": st.lists(st.lists(st.text(max_size=3), min_size=2, max_size=2), max_size=3)
    | msgpack_values,
    "h": int64 | msgpack_values,
    "pl": st.binary() | msgpack_values,
}


@given(st.fixed_dictionaries(slot_values))
def test_frames_with_random_slots_raise_only_message_decode_error(slots):
    _decode_only_errors(msgpack.packb([slots[k] for k in SLOT], use_bin_type=True))


@given(messages, st.integers(0, 200), st.integers(0, 255))
def test_corrupted_frames_raise_only_message_decode_error(msg, position, byte):
    data = bytearray(encode(msg))
    data[position % len(data)] = byte
    _decode_only_errors(bytes(data))
    _decode_only_errors(bytes(data[: position % len(data)]))


# -- hostile values in well-formed frames ------------------------------------------------------
MQTT = "joynr.system.RoutingTypes.MqttAddress"
HOSTILE = [
    ("empty sender", frame(f=""), "f"),
    ("empty recipient", frame(to=""), "to"),
    ("NUL in the id", frame(id="a\x00b"), "id"),
    ("id longer than a delivery tag allows", frame(id="i" * 251), "id"),
    ("negative expiry", frame(ex=-1), "ex"),
    ("expiry past forever", frame(ex=2**63 - 1), "ex"),
    ("negative hop counter", frame(h=-1), "h"),
    ("forged hop counter", frame(h=10**6), "h"),
    ("too many headers", frame(ch=[["k", "v"]] * 33), "ch"),
    ("empty header name", frame(ch=[["", "v"]]), "ch[0].name"),
    ("DEL in the sender", frame(f="a\x7fb"), "f"),
    ("escape in the recipient", frame(to="a\x1bb"), "to"),
    ("id of 201 bytes, non-ASCII", frame(id="\u00e9" * 100 + "i"), "id"),
    ("control character in a header value", frame(ch=[["k", "a\x07b"]]), "ch[0].value"),
    ("header value over its limit", frame(ch=[["k", "v" * 4097]]), "ch[0].value"),
    ("reply-to topic with #", frame(rt=f'{{"_typeName": "{MQTT}", "brokerUri": "g", "topic": "#"}}'), "rt.topic"),
    ("reply-to topic with +", frame(rt=f'{{"_typeName": "{MQTT}", "brokerUri": "g", "topic": "a/+/b"}}'),
     "rt.topic"),
    ("reply-to topic with U+0000",
     frame(rt=f'{{"_typeName": "{MQTT}", "brokerUri": "g", "topic": "a\\u0000b"}}'), "rt.topic"),
    ("reply-to topic of 64 KB", frame(rt=f'{{"_typeName": "{MQTT}", "brokerUri": "g", "topic": "{"t" * 65536}"}}'),
     "rt"),
    ("reply-to GBID with a slash", frame(rt=f'{{"_typeName": "{MQTT}", "brokerUri": "g/h", "topic": "t"}}'),
     "rt.brokerUri"),
    ("reply-to client id empty",
     frame(rt='{"_typeName": "joynr.system.RoutingTypes.WebSocketClientAddress", "id": ""}'), "rt.id"),
]


@pytest.mark.parametrize("data, field", [h[1:] for h in HOSTILE], ids=[h[0] for h in HOSTILE])
def test_hostile_values_are_invalid_messages_naming_the_field(data, field):
    with pytest.raises(InvalidMessage) as info:
        decode(data)
    assert info.value.field == field and info.value.reason == "invalid-message"
    assert len(str(info.value)) < 300  # a hostile value never floods a trace line


@given(st.text(max_size=220))
def test_the_quick_text_check_accepts_only_what_the_full_check_accepts(text):
    """Both wires' decoders skip check_text for plain ASCII ids and header values: that
    shortcut may never let through what the full check refuses."""
    if plain_text(text, 200):
        assert check_text(text, "x", 200) == text


def test_non_ascii_ids_and_header_values_are_still_accepted():
    msg = JoynrMessage("rq", "caf\u00e9", "\u00fcber", 10, custom_headers=(("k\u00e9", "v\u00e9"),))
    assert decode(encode(msg)) == msg


def test_a_refused_reply_to_is_refused_every_time():
    """Reply addresses are cached once parsed and checked; a refusal never is."""
    bad = frame(rt=f'{{"_typeName": "{MQTT}", "brokerUri": "g", "topic": "#"}}')
    for _ in range(2):
        with pytest.raises(InvalidMessage):
            decode(bad)


def test_a_frame_over_the_size_limit_is_refused_before_it_is_parsed():
    big = frame(pl=b"x" * 2000)
    with pytest.raises(InvalidMessage) as info:
        decode(big, WireLimits(max_frame_bytes=1000))
    assert info.value.field == "frame"
    assert decode(big) is not None


def test_garbage_is_a_decode_error_not_an_invalid_message():
    with pytest.raises(MessageDecodeError) as info:
        decode(b"\xc1")
    assert info.value.reason == "decode-error"
