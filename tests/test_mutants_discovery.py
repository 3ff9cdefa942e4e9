"""The rules of joynr_sim/core/discovery.py its other unit tests left unchecked (make mutate):
the field each malformed value is refused with, in every entry kind and every nested value,
and what a modeled discovery error carries."""

from __future__ import annotations

import pytest

from joynr_sim.core.address import MqttAddress
from joynr_sim.core.discovery import (
    CustomParameter,
    DiscoveryEntry,
    DiscoveryEntryWithMetaInfo,
    DiscoveryError,
    DiscoveryErrorException,
    GlobalDiscoveryEntry,
    InvalidDiscoveryArgument,
    InvalidDiscoveryEntry,
    ProviderQos,
    Version,
    check_str,
    check_str_list,
    validate_gbids,
)
from test_discovery import gde

COMMON = dict(participant_id="p1", domain="domain1", interface_name="vehicle/Radio",
              provider_version=Version(2, 1), qos=ProviderQos(), last_seen_date_ms=1000,
              expiry_date_ms=2000, public_key_id="pk")


def refused_field(make) -> str:
    with pytest.raises(InvalidDiscoveryEntry) as info:
        make()
    return info.value.field


@pytest.mark.parametrize("make, field", [
    (lambda: Version(1.0, 0), "provider_version.major_version"),
    (lambda: Version(1, True), "provider_version.minor_version"),
    (lambda: CustomParameter(1, "v"), "qos.custom_parameters.name"),
    (lambda: CustomParameter("k", None), "qos.custom_parameters.value"),
    (lambda: ProviderQos(priority="high"), "qos.priority"),
    (lambda: ProviderQos(priority=True), "qos.priority"),
    (lambda: ProviderQos(scope="EVERYWHERE"), "qos.scope"),
    (lambda: ProviderQos(supports_on_change_subscriptions=1), "qos.supports_on_change_subscriptions"),
    (lambda: ProviderQos(custom_parameters="k=v"), "qos.custom_parameters"),
    (lambda: ProviderQos(custom_parameters=(("k", "v", "w"),)), "qos.custom_parameters"),
    (lambda: ProviderQos(custom_parameters=("kv",)), "qos.custom_parameters"),
    (lambda: DiscoveryEntry(**{**COMMON, "interface_name": 1}), "interface_name"),
    (lambda: DiscoveryEntry(**{**COMMON, "public_key_id": None}), "public_key_id"),
    (lambda: DiscoveryEntry(**{**COMMON, "last_seen_date_ms": 1.5}), "last_seen_date_ms"),
    (lambda: DiscoveryEntry(**{**COMMON, "participant_id": ""}), "participant_id"),
    (lambda: DiscoveryEntryWithMetaInfo(**COMMON, is_local=1), "is_local"),
    (lambda: DiscoveryEntryWithMetaInfo(**{**COMMON, "domain": None}, is_local=True), "domain"),
    (lambda: GlobalDiscoveryEntry(**COMMON, address="GBID1/cc1"), "address"),
    (lambda: GlobalDiscoveryEntry(**{**COMMON, "qos": None}, address=MqttAddress("G", "t")), "qos"),
])
def test_a_malformed_value_is_refused_naming_its_field(make, field) -> None:
    assert refused_field(make) == field


def test_custom_parameters_may_be_lists_and_are_kept_as_values() -> None:
    qos = ProviderQos(custom_parameters=[["k", "v"], CustomParameter("a", "b")])
    assert qos.custom_parameters == (CustomParameter("k", "v"), CustomParameter("a", "b"))


def test_a_qos_is_global_only_in_scope_global() -> None:
    assert ProviderQos(scope="GLOBAL").is_global and not ProviderQos(scope="LOCAL").is_global


@pytest.mark.parametrize("path, field", [
    (("qos", "customParameters", 0, "name"), "qos.customParameters.name"),
    (("qos", "customParameters", 0, "value"), "qos.customParameters.value"),
    (("providerVersion", "minorVersion"), "providerVersion.minorVersion"),
    (("qos", "supportsOnChangeSubscriptions"), "qos.supportsOnChangeSubscriptions"),
    (("interfaceName",), "interfaceName"),
    (("publicKeyId",), "publicKeyId"),
])
def test_from_wire_names_a_missing_nested_field(path, field) -> None:
    wire = gde().to_wire()
    target = wire
    for key in path[:-1]:
        target = target[key]
    del target[path[-1]]
    assert refused_field(lambda: GlobalDiscoveryEntry.from_wire(wire)) == field


def test_from_wire_names_a_nested_value_that_is_no_object() -> None:
    wire = gde().to_wire()
    wire["qos"]["customParameters"] = ["k=v"]
    assert refused_field(lambda: GlobalDiscoveryEntry.from_wire(wire)) == "qos.customParameters"
    assert refused_field(lambda: GlobalDiscoveryEntry.from_wire("p1")) == "entry"


def test_from_wire_without_custom_parameters_has_none() -> None:
    wire = gde().to_wire()
    del wire["qos"]["customParameters"]
    assert GlobalDiscoveryEntry.from_wire(wire).qos.custom_parameters == ()


def test_an_entry_with_meta_info_round_trips_and_names_a_missing_is_local() -> None:
    entry = gde().with_meta_info(True)
    wire = entry.to_wire()
    assert wire["isLocal"] is True
    assert DiscoveryEntryWithMetaInfo.from_wire(wire) == entry
    del wire["isLocal"]
    assert refused_field(lambda: DiscoveryEntryWithMetaInfo.from_wire(wire)) == "isLocal"


def test_a_local_entry_round_trips_without_an_address() -> None:
    entry = gde().to_local()
    wire = entry.to_wire()
    assert "address" not in wire
    assert DiscoveryEntry.from_wire(wire) == entry
    assert entry.with_meta_info(False).to_local() == entry
    assert gde().with_address(MqttAddress("GBID2", "cc2")).address == MqttAddress("GBID2", "cc2")


def test_a_discovery_error_carries_its_error_and_detail() -> None:
    bare = DiscoveryErrorException(DiscoveryError.UNKNOWN_GBID)
    assert (bare.error, bare.detail, str(bare)) == (DiscoveryError.UNKNOWN_GBID, "", "UNKNOWN_GBID")
    told = DiscoveryErrorException(DiscoveryError.INVALID_GBID, "gbids: []")
    assert (told.detail, str(told)) == ("gbids: []", "INVALID_GBID: gbids: []")


def test_an_invalid_argument_names_its_parameter() -> None:
    with pytest.raises(InvalidDiscoveryArgument) as info:
        check_str("", "domain")
    assert info.value.field == "domain" and isinstance(info.value, ValueError)
    assert check_str("", "public_key_id", allow_empty=True) == ""
    with pytest.raises(InvalidDiscoveryArgument) as info:
        check_str_list(["d", 3], "domains")
    assert info.value.field == "domains"
    assert check_str_list(["d", "e"], "domains") == ("d", "e")


def test_a_repeated_gbid_is_invalid_and_the_first_offender_decides() -> None:
    with pytest.raises(DiscoveryErrorException) as info:
        validate_gbids(["GBID1", "GBID1", "unknown"], ("GBID1",))
    assert info.value.error is DiscoveryError.INVALID_GBID
    assert validate_gbids(("GBID1",), ("GBID1",)) == ("GBID1",)
