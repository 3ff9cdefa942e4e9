"""The GCD across backends: every example of the multi-backend GCD seed.

The logic runs on the in-memory store; tests/test_gcd_store.py shows that the SQLite and
PostgreSQL stores behave the same.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from joynr_sim.core.address import ChannelAddress, MqttAddress, WebSocketClientAddress
from joynr_sim.core.discovery import (
    DiscoveryError,
    DiscoveryErrorException,
    GlobalDiscoveryEntry,
    InvalidDiscoveryArgument,
    InvalidDiscoveryEntry,
    ProviderQos,
    ProviderRuntimeException,
    Version,
)
from joynr_sim.core.gcd import DEFAULT_EXPIRY_MS, AddResult, GlobalCapabilitiesDirectory
from joynr_sim.core.gcd_store import InMemoryGcdStore

KNOWN = ("GBID1", "GBID2", "GBID3")
NOW = 1_000_000


class FakeClock:
    def __init__(self, now: int = NOW) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


@pytest.fixture
def clock():
    return FakeClock()


@pytest.fixture
def store():
    return InMemoryGcdStore()


@pytest.fixture
def gcd(store, clock):
    return GlobalCapabilitiesDirectory(store, own_gbid="GBID1", known_gbids=KNOWN, clock=clock)


@pytest.fixture
def gcd2(gcd, clock):
    # The GCD instance of the second backend, sharing the first one's store.
    return GlobalCapabilitiesDirectory(gcd.store, own_gbid="GBID2", known_gbids=KNOWN, clock=clock)


def entry(participant_id="p1", domain="domain1", interface="interface1", topic="cc1",
          broker="tcp://somebroker:1883", priority=0, last_seen=NOW,
          expiry=NOW + DEFAULT_EXPIRY_MS, address=None) -> GlobalDiscoveryEntry:
    return GlobalDiscoveryEntry(
        participant_id=participant_id,
        domain=domain,
        interface_name=interface,
        provider_version=Version(1, 0),
        qos=ProviderQos(priority=priority),
        last_seen_date_ms=last_seen,
        expiry_date_ms=expiry,
        public_key_id="",
        address=address if address is not None else MqttAddress(broker, topic),
    )


def rows(gcd):
    """The store's content as {(participantId, GBID): entry}."""
    return {r.key: r.entry for r in gcd.store.all_rows()}


def keys(gcd):
    return sorted(rows(gcd))


def error_of(call, *args):
    with pytest.raises(DiscoveryErrorException) as info:
        call(*args)
    return info.value.error


# -- old add --------------------------------------------------------------------------------


def test_old_add_example_i_stores_in_own_gbid_with_gbid_as_broker_uri(gcd):
    result = gcd.add_old(entry(broker="tcp://oldbroker:1883", topic="sometopic"))
    assert result == [AddResult("p1", ("GBID1",), ())]
    assert rows(gcd) == {("p1", "GBID1"): entry(address=MqttAddress("GBID1", "sometopic"))}


def test_old_add_example_ii_stores_every_entry_in_own_gbid(gcd, gcd2):
    gcd.add_old([entry("p1"), entry("p2", topic="cc2")])
    assert keys(gcd) == [("p1", "GBID1"), ("p2", "GBID1")]
    assert rows(gcd)[("p2", "GBID1")].address == MqttAddress("GBID1", "cc2")
    # The instance of the second backend stores in its own GBID.
    gcd2.add_old([entry("p3")])
    assert rows(gcd)[("p3", "GBID2")].address == MqttAddress("GBID2", "cc1")


def test_old_add_replaces_only_the_own_gbid(gcd):
    gcd.add(entry(priority=1), ["GBID1", "GBID2"])
    assert gcd.add_old([entry(priority=2)]) == [AddResult("p1", (), ("GBID1",))]
    assert rows(gcd)[("p1", "GBID1")].qos.priority == 2
    assert rows(gcd)[("p1", "GBID2")].qos.priority == 1


def test_old_add_with_one_malformed_entry_stores_nothing(gcd):
    gcd.add(entry("p0"), ["GBID2"])
    before = rows(gcd)
    bad = entry("p2", address=WebSocketClientAddress("client-1"))
    with pytest.raises(InvalidDiscoveryEntry) as info:
        gcd.add_old([entry("p1"), bad])
    assert info.value.field == "address"
    assert rows(gcd) == before


def test_old_add_registers_a_channel_address_in_own_gbid_as_sent(gcd, gcd2):
    """Seed 001: the old add registers in the own GBID; "In case of Mqtt, replace the
    brokerUri": an old cluster controller on joynr's HTTP transport sends a ChannelAddress,
    which names no backend and is kept. Its channel id is the cluster controller id."""
    channel = ChannelAddress("http://bounceproxy/", "old-cc")
    assert gcd2.add_old([entry("p1", address=channel)]) == [AddResult("p1", ("GBID2",), ())]
    assert rows(gcd) == {("p1", "GBID2"): entry(address=channel)}
    assert gcd2.lookup_participant_old("p1").address == channel
    assert gcd.lookup_domains(["domain1"], "interface1", ["GBID1", "GBID2"]) == [entry(address=channel)]
    assert gcd.touch("old-cc") == [("p1", "GBID2")]
    assert gcd.remove_stale("old-cc", NOW + 1) == [("p1", "GBID2")]


@pytest.mark.parametrize("topic", ["cc1/deeper", "$SYS", "cc+", "cc#"])
def test_an_entry_whose_topic_no_controller_may_publish_to_is_refused(gcd, topic):
    """A consumer's cluster controller publishes to ``<topic>/low``: a topic of more than one
    level (or a reserved or wildcard one) would take it outside its grants."""
    before = rows(gcd)
    with pytest.raises(InvalidDiscoveryEntry) as info:
        gcd.add(entry("p1", topic=topic), ["GBID1"])
    assert info.value.field == "address.topic"
    assert rows(gcd) == before


# -- new add --------------------------------------------------------------------------------


def test_add_example_i_stores_the_entry_in_both_gbids(gcd):
    result = gcd.add(entry(broker="GBID3"), ["GBID1", "GBID2"])
    assert result == AddResult("p1", ("GBID1", "GBID2"), ())
    stored = rows(gcd)
    assert sorted(stored) == [("p1", "GBID1"), ("p1", "GBID2")]
    assert stored[("p1", "GBID1")] == entry(address=MqttAddress("GBID1", "cc1"))
    assert stored[("p1", "GBID2")] == entry(address=MqttAddress("GBID2", "cc1"))


def test_add_example_ii_stores_in_gbid1_whatever_the_address_says(gcd):
    gcd.add(entry(broker="GBID2"), ["GBID1"])
    assert rows(gcd) == {("p1", "GBID1"): entry(address=MqttAddress("GBID1", "cc1"))}


def test_add_merges_listed_gbids_and_keeps_unlisted_ones(gcd):
    gcd.add(entry(priority=1), ["GBID1", "GBID2"])
    result = gcd.add(entry(priority=2, topic="cc9"), ["GBID2", "GBID3"])
    assert result == AddResult("p1", ("GBID3",), ("GBID2",))
    stored = rows(gcd)
    assert stored[("p1", "GBID1")].qos.priority == 1
    assert stored[("p1", "GBID1")].address == MqttAddress("GBID1", "cc1")
    assert stored[("p1", "GBID2")].qos.priority == 2
    assert stored[("p1", "GBID2")].address == MqttAddress("GBID2", "cc9")
    assert stored[("p1", "GBID3")].address == MqttAddress("GBID3", "cc9")


def test_add_accepts_the_wire_form(gcd):
    gcd.add(entry().to_wire(), ["GBID2"])
    assert rows(gcd) == {("p1", "GBID2"): entry(address=MqttAddress("GBID2", "cc1"))}


INVALID_GBIDS = [
    [],
    [""],
    ["", "GBID1"],
    ["GBID1", ""],
    [None],
    ["GBID1", None],
    ["GBID1", "GBID1"],
    ["GBID1", "GBID2", "GBID1"],
    [1],
    "GBID1",
    None,
    ["", "unknownGBID"],  # left to right: the empty string comes first
]
UNKNOWN_GBIDS = [
    ["unknownGBID"],
    ["GBID1", "unknownGBID"],
    ["unknownGBID", ""],  # left to right: the unknown GBID comes first
    ["unknownGBID", "GBID1", "GBID1"],
    ["gbid1"],
]


@pytest.fixture
def populated(gcd):
    gcd.add(entry("p1"), ["GBID1", "GBID2"])
    gcd.add(entry("p2", topic="cc2"), ["GBID2"])
    return rows(gcd)


@pytest.mark.parametrize("gbids", INVALID_GBIDS, ids=repr)
def test_add_example_e_i_invalid_gbid_changes_nothing(gcd, populated, gbids):
    assert error_of(gcd.add, entry("p9"), gbids) is DiscoveryError.INVALID_GBID
    assert error_of(gcd.add, entry("p1", priority=5), gbids) is DiscoveryError.INVALID_GBID
    assert rows(gcd) == populated


@pytest.mark.parametrize("gbids", UNKNOWN_GBIDS, ids=repr)
def test_add_example_e_ii_unknown_gbid_changes_nothing(gcd, populated, gbids):
    assert error_of(gcd.add, entry("p9"), gbids) is DiscoveryError.UNKNOWN_GBID
    assert error_of(gcd.add, entry("p1", priority=5), gbids) is DiscoveryError.UNKNOWN_GBID
    assert rows(gcd) == populated


def test_gbids_are_checked_before_the_entry(gcd):
    bad = entry(address=WebSocketClientAddress("client-1"))
    assert error_of(gcd.add, bad, []) is DiscoveryError.INVALID_GBID
    assert error_of(gcd.add, {"participantId": "p1"}, ["nope"]) is DiscoveryError.UNKNOWN_GBID


@pytest.mark.parametrize(
    "address",
    [ChannelAddress("http://bounceproxy", ""), WebSocketClientAddress("client-1"),
     MqttAddress("GBID1", "")],
    ids=["channel-without-id", "websocket-client", "empty-topic"],
)
def test_add_rejects_a_non_global_address_and_changes_nothing(gcd, populated, address):
    with pytest.raises(InvalidDiscoveryEntry) as info:
        gcd.add(entry("p9", address=address), ["GBID1"])
    assert info.value.field.startswith("address")
    assert rows(gcd) == populated


@pytest.mark.parametrize("field", ["participantId", "domain", "qos", "address", "expiryDateMs"])
def test_add_rejects_a_wire_entry_missing_a_field_and_changes_nothing(gcd, populated, field):
    wire = entry("p9").to_wire()
    del wire[field]
    with pytest.raises(InvalidDiscoveryEntry) as info:
        gcd.add(wire, ["GBID1"])
    assert info.value.field == field
    assert field in str(info.value)
    assert rows(gcd) == populated


def test_add_rejects_an_unparseable_address_and_changes_nothing(gcd, populated):
    wire = entry("p9").to_wire()
    wire["address"] = '{"_typeName": "joynr.system.RoutingTypes.MqttAddress", "topic": 3'
    with pytest.raises(InvalidDiscoveryEntry) as info:
        gcd.add(wire, ["GBID1"])
    assert info.value.field == "address"
    assert rows(gcd) == populated


# -- old lookup -----------------------------------------------------------------------------


def test_old_lookup_example_i_returns_only_the_own_gbid(gcd, gcd2):
    gcd.add(entry("p1", domain="domain1"), ["GBID1", "GBID2"])
    gcd.add(entry("p2", domain="domain2"), ["GBID1"])
    gcd.add(entry("p3", domain="domain2"), ["GBID2"])
    gcd.add(entry("p4", domain="domain3"), ["GBID1"])
    gcd.add(entry("p5", domain="domain1", interface="interface2"), ["GBID1"])
    found = gcd.lookup_domains_old(["domain1", "domain2"], "interface1")
    assert [e.participant_id for e in found] == ["p1", "p2"]
    assert {e.address for e in found} == {MqttAddress("GBID1", "cc1")}
    found2 = gcd2.lookup_domains_old(["domain1", "domain2"], "interface1")
    assert [(e.participant_id, e.address.broker_uri) for e in found2] == [
        ("p1", "GBID2"), ("p3", "GBID2")]


def test_old_lookup_example_i_not_found_is_an_empty_list(gcd):
    gcd.add(entry("p1"), ["GBID2"])  # only elsewhere: still no error for old callers
    assert gcd.lookup_domains_old(["domain1"], "interface1") == []
    assert gcd.lookup_domains_old(["nowhere"], "interface1") == []


def test_old_lookup_example_ii_participant(gcd, gcd2):
    gcd.add(entry("p1"), ["GBID1"])
    assert gcd.lookup_participant_old("p1") == entry(address=MqttAddress("GBID1", "cc1"))
    # joynr names the DiscoveryError in the old method's message.
    with pytest.raises(ProviderRuntimeException, match="^NO_ENTRY_FOR_SELECTED_BACKENDS: .*p1.*GBID2"):
        gcd2.lookup_participant_old("p1")
    with pytest.raises(ProviderRuntimeException, match="^NO_ENTRY_FOR_PARTICIPANT: .*nobody"):
        gcd.lookup_participant_old("nobody")


# -- new lookup -----------------------------------------------------------------------------


@pytest.fixture
def in_gbid1_and_gbid2(gcd):
    gcd.add(entry("p1", broker="elsewhere"), ["GBID1", "GBID2"])


def test_lookup_example_i_single_gbid(gcd, in_gbid1_and_gbid2):
    found = gcd.lookup_domains(["domain1"], "interface1", ["GBID1"])
    assert found == [entry(address=MqttAddress("GBID1", "cc1"))]
    assert gcd.lookup_participant("p1", ["GBID1"]) == found[0]
    assert gcd.lookup_participant("p1", ["GBID2"]).address == MqttAddress("GBID2", "cc1")


def test_lookup_example_i_both_gbids_returns_one_entry_the_own_gbid_first(
        gcd, gcd2, in_gbid1_and_gbid2):
    for instance, own in ((gcd, "GBID1"), (gcd2, "GBID2")):
        for gbids in (["GBID1", "GBID2"], ["GBID2", "GBID1"]):
            found = instance.lookup_domains(["domain1"], "interface1", gbids)
            assert [e.address for e in found] == [MqttAddress(own, "cc1")]
            assert instance.lookup_participant("p1", gbids).address == MqttAddress(own, "cc1")


def test_lookup_without_the_own_gbid_takes_the_first_selected(gcd, in_gbid1_and_gbid2, clock):
    gcd3 = GlobalCapabilitiesDirectory(gcd.store, own_gbid="GBID3", known_gbids=KNOWN, clock=clock)
    for gbids, chosen in ((["GBID2", "GBID1"], "GBID2"), (["GBID1", "GBID2"], "GBID1"),
                          (["GBID3", "GBID2"], "GBID2")):
        assert gcd3.lookup_participant("p1", gbids).address.broker_uri == chosen
        assert [e.address.broker_uri for e in
                gcd3.lookup_domains(["domain1"], "interface1", gbids)] == [chosen]


def test_lookup_example_ii_only_other_backends(gcd):
    gcd.add(entry("p1"), ["GBID2"])
    assert error_of(gcd.lookup_domains, ["domain1"], "interface1", ["GBID1"]) \
        is DiscoveryError.NO_ENTRY_FOR_SELECTED_BACKENDS
    assert error_of(gcd.lookup_participant, "p1", ["GBID1"]) \
        is DiscoveryError.NO_ENTRY_FOR_SELECTED_BACKENDS
    assert error_of(gcd.lookup_participant, "p1", ["GBID1", "GBID3"]) \
        is DiscoveryError.NO_ENTRY_FOR_SELECTED_BACKENDS


def test_lookup_example_iii_not_registered(gcd):
    assert gcd.lookup_domains(["domain1"], "interface1", ["GBID1"]) == []
    assert error_of(gcd.lookup_participant, "p1", ["GBID1"]) \
        is DiscoveryError.NO_ENTRY_FOR_PARTICIPANT


def test_lookup_returns_what_is_in_the_selected_gbids_and_ignores_the_rest(gcd):
    gcd.add(entry("p1"), ["GBID1"])
    gcd.add(entry("p2"), ["GBID2"])
    found = gcd.lookup_domains(["domain1"], "interface1", ["GBID1"])
    assert [e.participant_id for e in found] == ["p1"]


@pytest.mark.parametrize("gbids", INVALID_GBIDS, ids=repr)
def test_lookup_invalid_gbid(gcd, populated, gbids):
    assert error_of(gcd.lookup_domains, ["domain1"], "interface1", gbids) \
        is DiscoveryError.INVALID_GBID
    assert error_of(gcd.lookup_participant, "p1", gbids) is DiscoveryError.INVALID_GBID


@pytest.mark.parametrize("gbids", UNKNOWN_GBIDS, ids=repr)
def test_lookup_unknown_gbid(gcd, populated, gbids):
    assert error_of(gcd.lookup_domains, ["domain1"], "interface1", gbids) \
        is DiscoveryError.UNKNOWN_GBID
    assert error_of(gcd.lookup_participant, "p1", gbids) is DiscoveryError.UNKNOWN_GBID


def test_lookup_rejects_malformed_arguments(gcd):
    with pytest.raises(InvalidDiscoveryArgument, match="domains"):
        gcd.lookup_domains("domain1", "interface1", ["GBID1"])
    with pytest.raises(InvalidDiscoveryArgument, match="interface_name"):
        gcd.lookup_domains(["domain1"], None, ["GBID1"])
    with pytest.raises(InvalidDiscoveryArgument, match="participant_id"):
        gcd.lookup_participant(7, ["GBID1"])


# -- old remove -----------------------------------------------------------------------------


def test_old_remove_example_i_removes_the_own_gbid_only(gcd, gcd2):
    gcd.add(entry("p1"), ["GBID1", "GBID2"])
    gcd.add(entry("p2"), ["GBID1"])
    gcd.add(entry("p3"), ["GBID1"])
    assert gcd.remove_old(["p1", "p2"]) == [("p1", "GBID1"), ("p2", "GBID1")]
    assert keys(gcd) == [("p1", "GBID2"), ("p3", "GBID1")]
    assert gcd2.remove_old(["p1", "p3"]) == [("p1", "GBID2")]
    assert keys(gcd) == [("p3", "GBID1")]


def test_old_remove_example_ii_single_participant(gcd):
    gcd.add(entry("p1"), ["GBID1", "GBID3"])
    assert gcd.remove_old("p1") == [("p1", "GBID1")]
    assert keys(gcd) == [("p1", "GBID3")]


def test_old_remove_of_an_unregistered_participant_is_no_error(gcd, populated):
    assert gcd.remove_old(["nobody"]) == []
    assert gcd.remove_old("p2") == []  # registered only in GBID2
    assert rows(gcd) == populated


# -- new remove -----------------------------------------------------------------------------


def test_remove_example_i_registered_in_gbid1(gcd):
    gcd.add(entry("p1"), ["GBID1"])
    before = rows(gcd)
    for gbids in (["GBID2"], ["GBID1", "GBID2"], ["GBID2", "GBID1"]):
        assert error_of(gcd.remove, "p1", gbids) is DiscoveryError.NO_ENTRY_FOR_SELECTED_BACKENDS
        assert rows(gcd) == before
    assert gcd.remove("p1", ["GBID1"]) == [("p1", "GBID1")]
    assert rows(gcd) == {}


def test_remove_example_ii_registered_in_gbid1_and_gbid2(gcd):
    gcd.add(entry("p1"), ["GBID1", "GBID2"])
    assert gcd.remove("p1", ["GBID1"]) == [("p1", "GBID1")]
    assert keys(gcd) == [("p1", "GBID2")]
    gcd.add(entry("p1"), ["GBID1"])
    assert gcd.remove("p1", ["GBID1", "GBID2"]) == [("p1", "GBID1"), ("p1", "GBID2")]
    assert rows(gcd) == {}


def test_remove_example_iii_not_registered(gcd, populated):
    assert error_of(gcd.remove, "nobody", ["GBID1"]) is DiscoveryError.NO_ENTRY_FOR_PARTICIPANT
    assert rows(gcd) == populated


@pytest.mark.parametrize("gbids", INVALID_GBIDS, ids=repr)
def test_remove_invalid_gbid_changes_nothing(gcd, populated, gbids):
    assert error_of(gcd.remove, "p1", gbids) is DiscoveryError.INVALID_GBID
    assert rows(gcd) == populated


@pytest.mark.parametrize("gbids", UNKNOWN_GBIDS, ids=repr)
def test_remove_unknown_gbid_changes_nothing(gcd, populated, gbids):
    assert error_of(gcd.remove, "p1", gbids) is DiscoveryError.UNKNOWN_GBID
    assert rows(gcd) == populated


# -- removeStale ----------------------------------------------------------------------------


def test_remove_stale_removes_older_rows_of_that_cluster_controller_in_every_gbid(gcd, gcd2):
    gcd.add(entry("p1", topic="cc1", last_seen=1000), ["GBID1", "GBID2"])
    gcd.add(entry("p2", topic="cc1", last_seen=2000), ["GBID3"])  # at the bound: kept
    gcd.add(entry("p3", topic="cc1", last_seen=3000), ["GBID1"])
    gcd.add(entry("p4", topic="cc2", last_seen=1000), ["GBID1"])  # another CC
    assert gcd2.remove_stale("cc1", 2000) == [("p1", "GBID1"), ("p1", "GBID2")]
    assert keys(gcd) == [("p2", "GBID3"), ("p3", "GBID1"), ("p4", "GBID1")]
    assert gcd.remove_stale("cc1", 2000) == []
    assert gcd.remove_stale("unknown-cc", 10**12) == []


def test_remove_stale_rejects_malformed_arguments(gcd, populated):
    with pytest.raises(InvalidDiscoveryArgument, match="max_last_seen_date_ms"):
        gcd.remove_stale("cc1", "2000")
    with pytest.raises(InvalidDiscoveryArgument, match="cluster_controller_id"):
        gcd.remove_stale("", 2000)
    assert rows(gcd) == populated


# -- touch ----------------------------------------------------------------------------------


def test_touch_with_participant_ids_refreshes_those_rows_in_every_gbid(gcd, clock):
    gcd.add(entry("p1", topic="cc1", last_seen=10, expiry=NOW + 5), ["GBID1", "GBID2"])
    gcd.add(entry("p2", topic="cc1", last_seen=10, expiry=NOW + 5), ["GBID1"])
    gcd.add(entry("p3", topic="cc2", last_seen=10, expiry=NOW + 5), ["GBID1"])
    clock.now = NOW + 1
    assert gcd.touch("cc1", ["p1", "p3", "unknown"]) == [("p1", "GBID1"), ("p1", "GBID2")]
    stored = rows(gcd)
    for key in (("p1", "GBID1"), ("p1", "GBID2")):
        assert stored[key].last_seen_date_ms == NOW + 1
        assert stored[key].expiry_date_ms == NOW + 1 + DEFAULT_EXPIRY_MS
    for key in (("p2", "GBID1"), ("p3", "GBID1")):
        assert (stored[key].last_seen_date_ms, stored[key].expiry_date_ms) == (10, NOW + 5)


def test_old_touch_updates_last_seen_of_all_rows_of_the_cluster_controller(gcd, clock):
    gcd.add(entry("p1", topic="cc1", last_seen=10, expiry=NOW + 5), ["GBID1", "GBID2"])
    gcd.add(entry("p2", topic="cc1", last_seen=10, expiry=NOW + 5), ["GBID3"])
    gcd.add(entry("p3", topic="cc2", last_seen=10, expiry=NOW + 5), ["GBID1"])
    clock.now = NOW + 1
    assert gcd.touch("cc1") == [("p1", "GBID1"), ("p1", "GBID2"), ("p2", "GBID3")]
    stored = rows(gcd)
    for key in (("p1", "GBID1"), ("p1", "GBID2"), ("p2", "GBID3")):
        assert (stored[key].last_seen_date_ms, stored[key].expiry_date_ms) == (NOW + 1, NOW + 5)
    assert stored[("p3", "GBID1")].last_seen_date_ms == 10


def test_touch_then_remove_stale_keeps_the_touched_rows(gcd, clock):
    gcd.add(entry("p1", topic="cc1", last_seen=10), ["GBID1"])
    gcd.add(entry("p2", topic="cc1", last_seen=10), ["GBID2"])
    clock.now = 500
    gcd.touch("cc1", ["p1"])
    assert gcd.remove_stale("cc1", 400) == [("p2", "GBID2")]
    assert keys(gcd) == [("p1", "GBID1")]


# -- expiry ---------------------------------------------------------------------------------


def test_expired_entries_are_never_returned_and_purged(gcd, clock):
    gcd.add(entry("p1", expiry=NOW + 10), ["GBID1", "GBID2"])
    gcd.add(entry("p2", expiry=NOW + 20), ["GBID1"])
    clock.now = NOW + 10  # p1 expires at the end of this millisecond
    assert [e.participant_id for e in gcd.lookup_domains(["domain1"], "interface1", ["GBID1"])] \
        == ["p1", "p2"]
    clock.now = NOW + 11
    assert [e.participant_id for e in gcd.lookup_domains(["domain1"], "interface1", ["GBID1"])] \
        == ["p2"]
    assert error_of(gcd.lookup_participant, "p1", ["GBID1"]) \
        is DiscoveryError.NO_ENTRY_FOR_PARTICIPANT
    with pytest.raises(ProviderRuntimeException):
        gcd.lookup_participant_old("p1")
    assert gcd.lookup_domains_old(["domain1"], "interface1")[0].participant_id == "p2"
    assert gcd.touch("cc1", ["p1"]) == []  # an expired row is not revived
    assert gcd.purge_expired() == [("p1", "GBID1"), ("p1", "GBID2")]
    assert keys(gcd) == [("p2", "GBID1")]
    assert gcd.purge_expired() == []


def test_entries_not_seen_for_the_timeout_are_purged(gcd, clock):
    """Seed 001: the GCD removes entries whose cluster controller stopped refreshing them."""
    gcd.add(entry("p1", topic="cc1", last_seen=NOW), ["GBID1"])
    gcd.add(entry("p2", topic="cc2", last_seen=NOW), ["GBID1"])
    clock.now = NOW + 500
    gcd.touch("cc2", ["p2"])
    clock.now = NOW + 1000
    assert gcd.purge_not_seen_since(NOW + 200) == [("p1", "GBID1")]
    assert keys(gcd) == [("p2", "GBID1")]
    with pytest.raises(InvalidDiscoveryArgument):
        gcd.purge_not_seen_since("yesterday")


def test_add_over_an_expired_row_counts_as_created(gcd, clock):
    gcd.add(entry("p1", expiry=NOW), ["GBID1"])
    clock.now = NOW + 1
    assert gcd.add(entry("p1", expiry=NOW + 100), ["GBID1"]) == AddResult("p1", ("GBID1",), ())


# -- two instances, one store ---------------------------------------------------------------


def test_two_instances_with_different_own_gbids_share_state(gcd, gcd2):
    gcd.add(entry("p1"), ["GBID2"])           # arrives at the GBID1 instance
    assert gcd2.lookup_participant_old("p1").address == MqttAddress("GBID2", "cc1")
    gcd2.add_old([entry("p2")])              # arrives at the GBID2 instance
    assert gcd.lookup_participant("p2", ["GBID2"]).address == MqttAddress("GBID2", "cc1")
    assert gcd.remove("p2", ["GBID2"]) == [("p2", "GBID2")]
    assert error_of(gcd2.lookup_participant, "p2", ["GBID2"]) \
        is DiscoveryError.NO_ENTRY_FOR_PARTICIPANT


def test_instances_share_only_the_store_they_are_given(clock):
    a = GlobalCapabilitiesDirectory(InMemoryGcdStore(), own_gbid="GBID1", known_gbids=KNOWN,
                                    clock=clock)
    b = GlobalCapabilitiesDirectory(InMemoryGcdStore(), own_gbid="GBID1", known_gbids=KNOWN,
                                    clock=clock)
    a.add(entry(), ["GBID1"])
    assert b.store.all_rows() == []
    c = GlobalCapabilitiesDirectory(a.store, own_gbid="GBID3", known_gbids=KNOWN, clock=clock)
    assert c.lookup_participant("p1", ["GBID1"]).address == MqttAddress("GBID1", "cc1")


def test_constructor_rejects_bad_configuration(store, clock):
    with pytest.raises(InvalidDiscoveryArgument, match="own_gbid"):
        GlobalCapabilitiesDirectory(store, own_gbid="GBID9", known_gbids=KNOWN, clock=clock)
    with pytest.raises(InvalidDiscoveryArgument, match="known_gbids"):
        GlobalCapabilitiesDirectory(store, own_gbid="GBID1", known_gbids=["GBID1", "GBID1"],
                                    clock=clock)
    with pytest.raises(TypeError, match="clock"):
        GlobalCapabilitiesDirectory(store, own_gbid="GBID1", known_gbids=KNOWN)


@pytest.mark.parametrize("store", [None, "gcd.sqlite", object()], ids=repr)
def test_a_store_is_required(store, clock):
    with pytest.raises(TypeError, match="store"):
        GlobalCapabilitiesDirectory(store, own_gbid="GBID1", known_gbids=KNOWN, clock=clock)


# -- properties (a fresh in-memory store per example) ---------------------------------------

PARTICIPANTS = ["p1", "p2", "p3"]
gbid_lists = st.lists(st.sampled_from(KNOWN), min_size=1, max_size=3, unique=True)
operations = st.lists(
    st.one_of(
        st.tuples(st.just("add"), st.sampled_from(PARTICIPANTS), gbid_lists,
                  st.integers(0, 3), st.sampled_from(["cc1", "cc2"])),
        st.tuples(st.just("remove"), st.sampled_from(PARTICIPANTS), gbid_lists),
        st.tuples(st.just("add_old"), st.sampled_from(KNOWN), st.sampled_from(PARTICIPANTS)),
        st.tuples(st.just("remove_old"), st.sampled_from(KNOWN), st.sampled_from(PARTICIPANTS)),
    ),
    max_size=12,
)


@settings(max_examples=60, deadline=None)
@given(ops=operations, own=st.sampled_from(KNOWN), selected=gbid_lists)
def test_property_store_matches_a_model_and_lookups_pick_one_selected_entry(ops, own, selected):
    clock = FakeClock()
    store = InMemoryGcdStore()
    gcds = {g: GlobalCapabilitiesDirectory(store, own_gbid=g, known_gbids=KNOWN, clock=clock)
            for g in KNOWN}
    model: dict[tuple[str, str], tuple[int, str]] = {}
    for op in ops:
        if op[0] == "add":
            _, pid, gbids, priority, cc = op
            gcds[own].add(entry(pid, priority=priority, topic=cc), gbids)
            model.update({(pid, g): (priority, cc) for g in gbids})
        elif op[0] == "add_old":
            _, at, pid = op
            gcds[at].add_old([entry(pid, priority=9)])
            model[(pid, at)] = (9, "cc1")
        elif op[0] == "remove_old":
            _, at, pid = op
            gcds[at].remove_old([pid])
            model.pop((pid, at), None)
        else:
            _, pid, gbids = op
            registered = {g for p, g in model if p == pid}
            try:
                gcds[own].remove(pid, gbids)
            except DiscoveryErrorException as exc:
                expected = (DiscoveryError.NO_ENTRY_FOR_PARTICIPANT if not registered
                            else DiscoveryError.NO_ENTRY_FOR_SELECTED_BACKENDS)
                assert exc.error is expected
                assert not set(gbids) <= registered
            else:
                assert set(gbids) <= registered
                for g in gbids:
                    del model[(pid, g)]
    stored = {r.key: (r.entry.qos.priority, r.cluster_controller_id) for r in store.all_rows()}
    assert stored == model

    gcd = gcds[own]
    try:
        found = gcd.lookup_domains(["domain1"], "interface1", selected)
    except DiscoveryErrorException as exc:
        assert exc.error is DiscoveryError.NO_ENTRY_FOR_SELECTED_BACKENDS
        assert model and not any(g in selected for _, g in model)
        found = []
    pids = [e.participant_id for e in found]
    assert len(pids) == len(set(pids))
    for e in found:
        gbid = e.address.broker_uri
        assert gbid in selected and (e.participant_id, gbid) in model
        registered_in_selected = [g for g in selected if (e.participant_id, g) in model]
        expected = own if own in registered_in_selected else registered_in_selected[0]
        assert gbid == expected
        assert e.qos.priority == model[(e.participant_id, gbid)][0]
    assert set(pids) == {p for p, g in model if g in selected}
