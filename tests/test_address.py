"""Address values, their joynr JSON form (``_typeName``) and the errors for bad input."""

from __future__ import annotations

import json

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
    describe,
    from_dict,
    from_json,
    is_remote,
    to_dict,
    to_json,
    type_name,
)

P = "joynr.system.RoutingTypes."

# -- literal JSON forms ------------------------------------------------------------------

JSON_FORMS = [
    (
        WebSocketAddress("WS", "cc.local", 4242, "/ws"),
        {"_typeName": P + "WebSocketAddress", "protocol": "WS", "host": "cc.local",
         "port": 4242, "path": "/ws"},
    ),
    (
        WebSocketAddress("WSS", "h", 1),
        {"_typeName": P + "WebSocketAddress", "protocol": "WSS", "host": "h", "port": 1,
         "path": ""},
    ),
    (
        WebSocketClientAddress("libjoynr-7"),
        {"_typeName": P + "WebSocketClientAddress", "id": "libjoynr-7"},
    ),
    (
        MqttAddress("gbid1", "cc1/topic"),
        {"_typeName": P + "MqttAddress", "brokerUri": "gbid1", "topic": "cc1/topic"},
    ),
    (
        ChannelAddress("http://bounceproxy/", "ch-1"),
        {"_typeName": P + "ChannelAddress", "messagingEndpointUrl": "http://bounceproxy/",
         "channelId": "ch-1"},
    ),
]


@pytest.mark.parametrize("address, expected", JSON_FORMS, ids=lambda v: type(v).__name__)
def test_to_json_is_joynrs_typename_form(address, expected):
    assert to_dict(address) == expected
    assert json.loads(to_json(address)) == expected
    assert from_json(to_json(address)) == address
    assert from_dict(expected) == address


def test_from_json_accepts_bytes_and_a_missing_websocket_path():
    text = json.dumps({"_typeName": P + "WebSocketAddress", "protocol": "WS", "host": "h",
                       "port": 80}).encode()
    assert from_json(text) == WebSocketAddress("WS", "h", 80, "")


def test_in_process_address_is_equal_only_to_the_same_skeleton():
    skeleton = object()
    assert InProcessAddress(skeleton) == InProcessAddress(skeleton)
    assert hash(InProcessAddress(skeleton)) == hash(InProcessAddress(skeleton))
    # Equal but distinct skeletons are distinct participants.
    assert InProcessAddress([1]) != InProcessAddress([1])
    assert InProcessAddress(skeleton) != skeleton
    assert InProcessAddress(skeleton) != WebSocketClientAddress("x")


def test_value_addresses_compare_by_value():
    assert MqttAddress("g", "t") == MqttAddress("g", "t")
    assert MqttAddress("g", "t") != MqttAddress("g2", "t")
    assert WebSocketClientAddress("a") != MqttAddress("a", "a")
    assert ChannelAddress("u", "c") == ChannelAddress("u", "c")


def test_in_process_address_is_never_serialised():
    with pytest.raises(AddressError) as info:
        to_json(InProcessAddress(object()))
    assert info.value.field == "_typeName"


@pytest.mark.parametrize("thing", ["gbid1/topic", 42, None, {"_typeName": P + "MqttAddress"}])
def test_serialising_a_non_address_raises_address_error(thing):
    with pytest.raises(AddressError):
        to_json(thing)
    with pytest.raises(AddressError):
        type_name(thing)
    with pytest.raises(AddressError):
        describe(thing)


SKELETON = object()
TYPES_AND_TARGETS = [
    (InProcessAddress(SKELETON), "InProcess", False, f"inprocess:{id(SKELETON):x}"),
    (WebSocketAddress("WS", "cc", 4242, "/p"), "WebSocket", False, "ws://cc:4242/p"),
    (WebSocketClientAddress("client-1"), "WebSocketClient", False, "client-1"),
    (MqttAddress("gbid1", "cc1/low"), "Mqtt", True, "gbid1/cc1/low"),
    (ChannelAddress("http://bp/", "ch"), "Channel", True, "http://bp/#ch"),
]


@pytest.mark.parametrize("address, name, remote, target", TYPES_AND_TARGETS,
                         ids=[t[1] for t in TYPES_AND_TARGETS])
def test_type_name_remoteness_and_trace_target(address, name, remote, target):
    assert type_name(address) == name
    assert is_remote(address) is remote
    assert describe(address) == target


def test_trace_target_of_in_process_addresses_tells_skeletons_apart():
    a, b = object(), object()
    assert describe(InProcessAddress(a)) == describe(InProcessAddress(a))
    assert describe(InProcessAddress(a)) != describe(InProcessAddress(b))


# -- bad input names the field -----------------------------------------------------------

BAD_INPUT = [
    ("not json", "[", "_typeName"),
    ("deeply nested", "[" * 100_000, "_typeName"),
    ("not an object", "[1, 2]", "_typeName"),
    ("no type name", "{}", "_typeName"),
    ("type name not a string", '{"_typeName": 7}', "_typeName"),
    ("unknown type", json.dumps({"_typeName": P + "BrowserAddress", "id": "x"}), "_typeName"),
    ("in-process never parsed", json.dumps({"_typeName": P + "InProcessAddress"}), "_typeName"),
    ("missing topic", json.dumps({"_typeName": P + "MqttAddress", "brokerUri": "g"}), "topic"),
    ("topic not a string",
     json.dumps({"_typeName": P + "MqttAddress", "brokerUri": "g", "topic": 3}), "topic"),
    ("missing id", json.dumps({"_typeName": P + "WebSocketClientAddress"}), "id"),
    ("missing channel",
     json.dumps({"_typeName": P + "ChannelAddress", "messagingEndpointUrl": "u"}), "channelId"),
    ("port a string", json.dumps({"_typeName": P + "WebSocketAddress", "protocol": "WS",
                                  "host": "h", "port": "80"}), "port"),
    ("port a bool", json.dumps({"_typeName": P + "WebSocketAddress", "protocol": "WS",
                                "host": "h", "port": True}), "port"),
    ("port a float", json.dumps({"_typeName": P + "WebSocketAddress", "protocol": "WS",
                                 "host": "h", "port": 80.0}), "port"),
    ("port zero", json.dumps({"_typeName": P + "WebSocketAddress", "protocol": "WS",
                              "host": "h", "port": 0}), "port"),
    ("port too big", json.dumps({"_typeName": P + "WebSocketAddress", "protocol": "WS",
                                 "host": "h", "port": 65536}), "port"),
    ("bad protocol", json.dumps({"_typeName": P + "WebSocketAddress", "protocol": "HTTP",
                                 "host": "h", "port": 80}), "protocol"),
    ("path not a string", json.dumps({"_typeName": P + "WebSocketAddress", "protocol": "WS",
                                      "host": "h", "port": 80, "path": None}), "path"),
]


@pytest.mark.parametrize("text, field", [b[1:] for b in BAD_INPUT], ids=[b[0] for b in BAD_INPUT])
def test_bad_json_raises_address_error_naming_the_field(text, field):
    with pytest.raises(AddressError) as info:
        from_json(text)
    assert info.value.field == field
    assert isinstance(info.value, ValueError)
    assert repr(field) in str(info.value)


@pytest.mark.parametrize("data", [None, [], "x", 1, 1.5, True])
def test_from_dict_of_a_non_object(data):
    with pytest.raises(AddressError) as info:
        from_dict(data)
    assert info.value.field == "_typeName"


# -- properties ----------------------------------------------------------------------

addresses = st.one_of(
    st.builds(WebSocketAddress, st.sampled_from(["WS", "WSS"]), st.text(),
              st.integers(1, 65535), st.text()),
    st.builds(WebSocketClientAddress, st.text()),
    st.builds(MqttAddress, st.text(), st.text()),
    st.builds(ChannelAddress, st.text(), st.text()),
)


@given(addresses)
def test_json_round_trip(address):
    assert from_json(to_json(address)) == address
    assert from_json(to_json(address).encode()) == address
    assert from_dict(to_dict(address)) == address


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=12,
)
TYPE_NAMES = [P + n for n in ("WebSocketAddress", "WebSocketClientAddress", "MqttAddress",
                               "ChannelAddress", "InProcessAddress", "Nope")]
FIELD_NAMES = ["protocol", "host", "port", "path", "id", "brokerUri", "topic",
               "messagingEndpointUrl", "channelId"]
# Objects that look like addresses: a real type name and fields of any value.
address_like = st.builds(
    lambda name, fields: {"_typeName": name, **fields},
    st.sampled_from(TYPE_NAMES) | json_values,
    st.dictionaries(st.sampled_from(FIELD_NAMES),
                    json_values | st.sampled_from(["WS", "WSS"]) | st.integers(-5, 70000),
                    max_size=5),
)


@given(json_values | address_like)
def test_garbage_dicts_raise_only_address_error(data):
    try:
        address = from_dict(data)
    except AddressError:
        return
    assert from_dict(to_dict(address)) == address


@given(st.text() | st.binary() | (json_values | address_like).map(json.dumps))
def test_garbage_json_raises_only_address_error(text):
    try:
        address = from_json(text)
    except AddressError:
        return
    assert from_json(to_json(address)) == address
