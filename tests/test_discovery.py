"""Discovery entries: validation on construction, joynr's wire form, GBID list checks."""

from __future__ import annotations

import json

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from joynr_sim.core.address import ChannelAddress, MqttAddress, WebSocketAddress
from joynr_sim.core.discovery import (
    CustomParameter,
    DiscoveryEntry,
    DiscoveryEntryWithMetaInfo,
    DiscoveryError,
    DiscoveryErrorException,
    GlobalDiscoveryEntry,
    InvalidDiscoveryEntry,
    ProviderQos,
    ProviderRuntimeException,
    Version,
    validate_gbids,
)


def gde(**overrides) -> GlobalDiscoveryEntry:
    values = dict(participant_id="p1", domain="domain1", interface_name="vehicle/Radio",
                  provider_version=Version(2, 1),
                  qos=ProviderQos(priority=5, scope="GLOBAL", supports_on_change_subscriptions=True,
                                  custom_parameters=(("k", "v"),)),
                  last_seen_date_ms=1000, expiry_date_ms=2000, public_key_id="pk",
                  address=MqttAddress("GBID1", "cc1"))
    values.update(overrides)
    return GlobalDiscoveryEntry(**values)


def test_wire_form_uses_joynr_field_names_and_the_address_as_json_string():
    wire = gde().to_wire()
    assert wire == {
        "participantId": "p1",
        "domain": "domain1",
        "interfaceName": "vehicle/Radio",
        "providerVersion": {"majorVersion": 2, "minorVersion": 1},
        "qos": {"customParameters": [{"name": "k", "value": "v"}], "priority": 5,
                "scope": "GLOBAL", "supportsOnChangeSubscriptions": True},
        "lastSeenDateMs": 1000,
        "expiryDateMs": 2000,
        "publicKeyId": "pk",
        "address": '{"_typeName":"joynr.system.RoutingTypes.MqttAddress",'
                   '"brokerUri":"GBID1","topic":"cc1"}',
    }
    assert json.loads(wire["address"])["_typeName"] == "joynr.system.RoutingTypes.MqttAddress"


def test_wire_form_survives_msgpack():
    entry = gde(address=WebSocketAddress("WS", "localhost", 4242, "/path"))
    packed = msgpack.packb(entry.to_wire())
    assert GlobalDiscoveryEntry.from_wire(msgpack.unpackb(packed)) == entry


def test_custom_parameters_are_normalised_to_values():
    assert gde().qos.custom_parameters == (CustomParameter("k", "v"),)
    assert ProviderQos(custom_parameters=[["a", "b"]]).custom_parameters == (CustomParameter("a", "b"),)
    hash(gde())  # frozen values are hashable


def test_conversions_between_entry_kinds():
    entry = gde()
    local = entry.to_local()
    assert isinstance(local, DiscoveryEntry) and local.participant_id == "p1"
    assert local.to_global(entry.address) == entry
    meta = entry.with_meta_info(True)
    assert meta.is_local and meta.to_local() == local
    assert DiscoveryEntryWithMetaInfo.from_wire(meta.to_wire()) == meta
    assert DiscoveryEntry.from_wire(local.to_wire()) == local
    assert entry.with_address(MqttAddress("GBID2", "cc1")).address.broker_uri == "GBID2"


WIRE_FIELDS = ["participantId", "domain", "interfaceName", "providerVersion", "qos",
               "lastSeenDateMs", "expiryDateMs", "publicKeyId", "address"]


@pytest.mark.parametrize("field", WIRE_FIELDS)
def test_from_wire_names_a_missing_field(field):
    wire = gde().to_wire()
    del wire[field]
    with pytest.raises(InvalidDiscoveryEntry) as info:
        GlobalDiscoveryEntry.from_wire(wire)
    assert info.value.field == field
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize(
    "path, value",
    [
        (("participantId",), 7),
        (("domain",), None),
        (("lastSeenDateMs",), "1000"),
        (("expiryDateMs",), True),
        (("providerVersion", "majorVersion"), 1.5),
        (("providerVersion",), [2, 1]),
        (("qos", "priority"), "high"),
        (("qos", "scope"), 3),
        (("qos", "supportsOnChangeSubscriptions"), 1),
        (("qos", "customParameters"), {"k": "v"}),
        (("address",), {"_typeName": "joynr.system.RoutingTypes.MqttAddress"}),
    ],
)
def test_from_wire_names_a_field_of_the_wrong_type(path, value):
    wire = gde().to_wire()
    target = wire
    for key in path[:-1]:
        target = target[key]
    target[path[-1]] = value
    with pytest.raises(InvalidDiscoveryEntry) as info:
        GlobalDiscoveryEntry.from_wire(wire)
    assert info.value.field == ".".join(path)
    assert repr(value) in str(info.value)


@pytest.mark.parametrize(
    "address",
    ["not json", '{"brokerUri": "GBID1"}', '{"_typeName": "joynr.system.RoutingTypes.Nope"}',
     '{"_typeName":"joynr.system.RoutingTypes.MqttAddress","brokerUri":"GBID1"}'],
)
def test_from_wire_rejects_an_unparseable_address(address):
    wire = gde().to_wire()
    wire["address"] = address
    with pytest.raises(InvalidDiscoveryEntry) as info:
        GlobalDiscoveryEntry.from_wire(wire)
    assert info.value.field == "address"
    assert address in str(info.value)


def test_from_wire_rejects_an_unknown_scope_and_a_non_object():
    wire = gde().to_wire()
    wire["qos"]["scope"] = "EVERYWHERE"
    with pytest.raises(InvalidDiscoveryEntry, match="EVERYWHERE") as info:
        GlobalDiscoveryEntry.from_wire(wire)
    assert info.value.field == "qos.scope"
    with pytest.raises(InvalidDiscoveryEntry):
        GlobalDiscoveryEntry.from_wire(["p1"])


@pytest.mark.parametrize(
    "overrides, field",
    [
        ({"participant_id": ""}, "participant_id"),
        ({"participant_id": None}, "participant_id"),
        ({"domain": 3}, "domain"),
        ({"expiry_date_ms": "soon"}, "expiry_date_ms"),
        ({"provider_version": (1, 0)}, "provider_version"),
        ({"qos": {}}, "qos"),
        ({"address": "GBID1/cc1"}, "address"),
    ],
)
def test_construction_rejects_malformed_values(overrides, field):
    with pytest.raises(InvalidDiscoveryEntry) as info:
        gde(**overrides)
    assert info.value.field == field


def test_a_channel_address_is_a_valid_entry_value():
    # The GCD refuses it, but it is a legal joynr value on the wire.
    entry = gde(address=ChannelAddress("http://bounceproxy", "ch"))
    assert GlobalDiscoveryEntry.from_wire(entry.to_wire()) == entry


@pytest.mark.parametrize(
    "gbids, error",
    [
        ([], DiscoveryError.INVALID_GBID),
        ([""], DiscoveryError.INVALID_GBID),
        (["", "GBID1"], DiscoveryError.INVALID_GBID),
        ([None], DiscoveryError.INVALID_GBID),
        (["GBID1", "GBID1"], DiscoveryError.INVALID_GBID),
        ("GBID1", DiscoveryError.INVALID_GBID),
        (None, DiscoveryError.INVALID_GBID),
        (["unknownGBID"], DiscoveryError.UNKNOWN_GBID),
        (["GBID1", "unknownGBID"], DiscoveryError.UNKNOWN_GBID),
        (["unknownGBID", ""], DiscoveryError.UNKNOWN_GBID),
        (["", "unknownGBID"], DiscoveryError.INVALID_GBID),
    ],
    ids=repr,
)
def test_validate_gbids(gbids, error):
    with pytest.raises(DiscoveryErrorException) as info:
        validate_gbids(gbids, ("GBID1", "GBID2"))
    assert info.value.error is error
    assert error.value in str(info.value)


def test_validate_gbids_accepts_known_unique_gbids():
    assert validate_gbids(["GBID2", "GBID1"], ("GBID1", "GBID2")) == ("GBID2", "GBID1")


def test_provider_runtime_exception_names_the_condition():
    assert "no entry" in str(ProviderRuntimeException("no entry for participant 'p1'"))


text = st.text(max_size=8)
ints = st.integers(-(2**63), 2**63 - 1)
addresses = st.one_of(
    st.builds(MqttAddress, text, text),
    st.builds(ChannelAddress, text, text),
    st.builds(WebSocketAddress, st.sampled_from(["WS", "WSS"]), text,
              st.integers(1, 65535), text),
)
entries = st.builds(
    GlobalDiscoveryEntry,
    participant_id=text.filter(bool), domain=text, interface_name=text,
    provider_version=st.builds(Version, ints, ints),
    qos=st.builds(ProviderQos, ints, st.sampled_from(["GLOBAL", "LOCAL"]), st.booleans(),
                  st.lists(st.tuples(text, text), max_size=2).map(tuple)),
    last_seen_date_ms=ints, expiry_date_ms=ints, public_key_id=text, address=addresses,
)


@settings(max_examples=100, deadline=None)
@given(entries)
def test_property_wire_round_trip_through_msgpack(entry):
    assert GlobalDiscoveryEntry.from_wire(msgpack.unpackb(msgpack.packb(entry.to_wire()))) == entry
