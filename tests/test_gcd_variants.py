"""The GCD's variants (``core.gcd_variants``): for each, the rule of seed 001 it breaks, shown
once under the seed's rules and once under the variant, on the same calls.

Also the lookups that skip outdated entries once a last-seen timeout is set (seed 001:
such entries "are not returned as result of a lookup request").
"""

from __future__ import annotations

import pytest

from joynr_sim.core import gcd_variants as v
from joynr_sim.core.address import MqttAddress
from joynr_sim.core.discovery import (
    DEFAULT_EXPIRY_MS,
    DiscoveryError,
    DiscoveryErrorException,
    GlobalDiscoveryEntry,
    InvalidDiscoveryArgument,
    ProviderQos,
    ProviderRuntimeException,
    Version,
)
from joynr_sim.core.gcd import GlobalCapabilitiesDirectory
from joynr_sim.core.gcd_store import InMemoryGcdStore
from joynr_sim.core.variants import VARIANTS, parse_rule_set, variant_of

KNOWN = ("GBID1", "GBID2", "GBID3")
NOW = 1_000_000
HOUR = 3_600_000


class Clock:
    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> int:
        return self.now


def entry(pid="p1", domain="dom", topic="cc1", last_seen=NOW) -> GlobalDiscoveryEntry:
    return GlobalDiscoveryEntry(pid, domain, "iface", Version(1, 0), ProviderQos(), last_seen,
                                last_seen + DEFAULT_EXPIRY_MS, "", MqttAddress("tcp://broker", topic))


def pair(variant=None, last_seen_timeout_ms=None):
    """The instances of GBID1 and GBID2 on one store, one clock."""
    store, clock = InMemoryGcdStore(), Clock()
    return tuple(GlobalCapabilitiesDirectory(store, own, KNOWN, clock, last_seen_timeout_ms=last_seen_timeout_ms,
                                             variant=variant) for own in ("GBID1", "GBID2"))


def keys(gcd):
    return sorted(r.key for r in gcd.store.all_rows())


def error(call, *args):
    with pytest.raises(DiscoveryErrorException) as info:
        call(*args)
    return info.value.error


def where(found):
    return [(e.participant_id, e.address.broker_uri) for e in found]


# -- the registry ---------------------------------------------------------------------------

def test_every_gcd_variant_is_registered_quotes_seed_001_and_is_read_by_the_gcd():
    assert v.GCD_VARIANT_NAMES == tuple(n for n in VARIANTS if n.startswith("gcd:"))
    for name, seed, summary in v.GCD_VARIANTS:
        assert seed.startswith("001_2030eddcb973837f.txt: ") and summary
        assert variant_of(f"precedence+{name}", "gcd") == name
        assert parse_rule_set(f"local-remote+{name}")[1].part == "gcd"
        GlobalCapabilitiesDirectory(InMemoryGcdStore(), "GBID1", KNOWN, Clock(), variant=name)
    assert variant_of("precedence", "gcd") is None
    with pytest.raises(InvalidDiscoveryArgument):
        GlobalCapabilitiesDirectory(InMemoryGcdStore(), "GBID1", KNOWN, Clock(), variant="gcd:nonsense")


# -- one test per variant ---------------------------------------------------------------------

def test_ignores_gbids_registers_everywhere_and_finds_outside_the_selected_backends():
    """Seed: "Provider gets registered for the selected BEs", "Providers are looked up only in the
    selected BEs", the old lookup only in the instance's own BE, a remove only from the selected ones."""
    for variant in (None, v.IGNORES_GBIDS):
        gcd1, gcd2 = pair(variant)
        gcd2.add(entry("lu"), ["GBID2"])
        gcd1.add(entry("lc", topic="cc-lc1"), ["GBID1"])
        gcd2.add(entry("lc", topic="cc-lc2"), ["GBID2"])
        if variant is None:
            assert keys(gcd1) == [("lc", "GBID1"), ("lc", "GBID2"), ("lu", "GBID2")]
            assert error(gcd1.lookup_participant, "lu", ["GBID1"]) is DiscoveryError.NO_ENTRY_FOR_SELECTED_BACKENDS
            assert gcd1.lookup_domains_old(["dom"], "iface") == [gcd1.lookup_participant("lc", ["GBID1"])]
            with pytest.raises(ProviderRuntimeException):
                gcd1.lookup_participant_old("lu")
            assert gcd1.lookup_participant("lc", ["GBID1"]).address == MqttAddress("GBID1", "cc-lc1")
            gcd1.remove("lc", ["GBID1"])
            assert keys(gcd1) == [("lc", "GBID2"), ("lu", "GBID2")]
        else:  # every backend, and the last add of a participantId wins in all of them
            assert len(keys(gcd1)) == 6
            assert gcd1.lookup_participant("lu", ["GBID1"]).participant_id == "lu"
            assert gcd1.lookup_participant_old("lu").participant_id == "lu"
            assert gcd1.lookup_participant("lc", ["GBID1"]).address == MqttAddress("GBID1", "cc-lc2")
            gcd1.remove("lc", ["GBID1"])
            assert [k for k in keys(gcd1) if k[0] == "lc"] == []


@pytest.mark.parametrize("gbids, seed_error", [
    ([""], DiscoveryError.INVALID_GBID), (["", "GBID1"], DiscoveryError.INVALID_GBID),
    (["GBID1", "GBID1"], DiscoveryError.INVALID_GBID), ([], DiscoveryError.INVALID_GBID),
    (["unknownGBID"], DiscoveryError.UNKNOWN_GBID), (["GBID1", "unknownGBID"], DiscoveryError.UNKNOWN_GBID),
], ids=repr)
def test_no_gbid_errors_takes_invalid_and_unknown_gbids_as_they_come(gbids, seed_error):
    """Seed: add/lookup/remove with an empty list, an empty or repeated GBID: INVALID_GBID; with
    an unknown GBID: UNKNOWN_GBID, and (a rejected call) nothing changes."""
    gcd1, _ = pair()
    gcd1.add(entry(), ["GBID1"])
    for call, args in ((gcd1.add, (entry("p2"), gbids)), (gcd1.lookup_participant, ("p1", gbids)),
                       (gcd1.lookup_domains, (["dom"], "iface", gbids)), (gcd1.remove, ("p1", gbids))):
        assert error(call, *args) is seed_error
    assert keys(gcd1) == [("p1", "GBID1")]

    gcd1, _ = pair(v.NO_GBID_ERRORS)
    gcd1.add(entry(), ["GBID1"])
    outcomes = []
    for call, args in ((gcd1.add, (entry("p2"), gbids)), (gcd1.lookup_participant, ("p1", gbids)),
                       (gcd1.remove, ("p1", gbids))):
        try:
            call(*args)
            outcomes.append(None)
        except DiscoveryErrorException as exc:
            outcomes.append(exc.error)
    assert seed_error not in outcomes
    assert ("p2", "GBID1") in keys(gcd1) or ("p2", "unknownGBID") in keys(gcd1)


def test_remove_all_gbids_removes_a_subset_everywhere_and_answers_no_error():
    """Seed: remove(participantId1, [GBID1]) removes it from GBID1 only; nothing there:
    NO_ENTRY_FOR_SELECTED_BACKENDS, not registered: NO_ENTRY_FOR_PARTICIPANT; the old remove only
    from the receiving instance's backend."""
    gcd1, gcd2 = pair()
    gcd1.add(entry(), ["GBID1", "GBID2"])
    assert gcd1.remove("p1", ["GBID1"]) == [("p1", "GBID1")]
    assert keys(gcd1) == [("p1", "GBID2")]
    assert error(gcd1.remove, "p1", ["GBID1"]) is DiscoveryError.NO_ENTRY_FOR_SELECTED_BACKENDS
    assert error(gcd1.remove, "p1", ["GBID1", "GBID2"]) is DiscoveryError.NO_ENTRY_FOR_SELECTED_BACKENDS
    assert error(gcd1.remove, "nobody", ["GBID1"]) is DiscoveryError.NO_ENTRY_FOR_PARTICIPANT
    gcd1.add(entry(), ["GBID1"])
    assert gcd1.remove_old(["p1"]) == [("p1", "GBID1")] and keys(gcd1) == [("p1", "GBID2")]

    gcd1, gcd2 = pair(v.REMOVE_ALL_GBIDS)
    gcd1.add(entry(), ["GBID1", "GBID2"])
    assert gcd1.remove("p1", ["GBID1"]) == [("p1", "GBID1"), ("p1", "GBID2")]
    assert keys(gcd1) == []
    assert gcd1.remove("p1", ["GBID1"]) == [] and gcd1.remove("nobody", ["GBID1"]) == []
    gcd1.add(entry(), ["GBID1", "GBID2"])
    assert gcd1.remove_old(["p1"]) == [("p1", "GBID1"), ("p1", "GBID2")]


def test_empty_lookup_error_answers_an_error_where_the_seed_answers_an_empty_list():
    """Seed Example III: a domain lookup for a provider registered nowhere returns []; one
    registered only outside the selected GBIDs: NO_ENTRY_FOR_SELECTED_BACKENDS."""
    for variant in (None, v.EMPTY_LOOKUP_ERROR):
        gcd1, _ = pair(variant)
        gcd1.add(entry(domain="elsewhere"), ["GBID2"])
        assert error(gcd1.lookup_domains, ["elsewhere"], "iface", ["GBID1"]) is \
            DiscoveryError.NO_ENTRY_FOR_SELECTED_BACKENDS
        assert gcd1.lookup_domains_old(["nowhere"], "iface") == []
        if variant is None:
            assert gcd1.lookup_domains(["nowhere"], "iface", ["GBID1"]) == []
        else:
            assert error(gcd1.lookup_domains, ["nowhere"], "iface", ["GBID1"]) is \
                DiscoveryError.NO_ENTRY_FOR_SELECTED_BACKENDS


def test_entry_per_gbid_returns_a_participant_once_per_backend_and_not_the_own_one_first():
    """Seed: GDEs returned from the lookup methods are unique per participantId; the GCD picks
    the instance's own backend's entry when it is selected (the consumer's backend)."""
    gcd1, gcd2 = pair()
    gcd1.add(entry(topic="cc-lc1"), ["GBID1"])
    gcd2.add(entry(topic="cc-lc2"), ["GBID2"])
    assert where(gcd2.lookup_domains(["dom"], "iface", ["GBID1", "GBID2"])) == [("p1", "GBID2")]
    assert gcd2.lookup_participant("p1", ["GBID1", "GBID2"]).address == MqttAddress("GBID2", "cc-lc2")
    assert where(gcd1.lookup_domains(["dom"], "iface", ["GBID2", "GBID3"])) == [("p1", "GBID2")]

    gcd1, gcd2 = pair(v.ENTRY_PER_GBID)
    gcd1.add(entry(topic="cc-lc1"), ["GBID1"])
    gcd2.add(entry(topic="cc-lc2"), ["GBID2"])
    assert where(gcd2.lookup_domains(["dom"], "iface", ["GBID1", "GBID2"])) == [("p1", "GBID1"), ("p1", "GBID2")]
    assert gcd2.lookup_participant("p1", ["GBID1", "GBID2"]).address == MqttAddress("GBID1", "cc-lc1")


def test_returns_outdated_finds_entries_the_seed_no_longer_returns():
    """Seed: DEs with an outdated last seen date are not returned as result of a lookup request
    (they are removed periodically; until the sweep runs, lookups skip them already)."""
    for variant in (None, v.RETURNS_OUTDATED):
        gcd1, _ = pair(variant, last_seen_timeout_ms=2 * HOUR)
        gcd1.add(entry("stale", topic="cc-gone"), ["GBID1"])
        gcd1.add(entry("fresh", topic="cc-alive"), ["GBID1"])
        gcd1.clock.now += HOUR
        gcd1.touch("cc-alive", ["fresh"])
        gcd1.clock.now += HOUR + 1  # stale: last seen two hours and a millisecond ago
        assert keys(gcd1) == [("fresh", "GBID1"), ("stale", "GBID1")]  # the sweep has not run
        assert gcd1.lookup_participant("fresh", ["GBID1"]).participant_id == "fresh"
        if variant is None:
            assert [e.participant_id for e in gcd1.lookup_domains(["dom"], "iface", ["GBID1"])] == ["fresh"]
            assert error(gcd1.lookup_participant, "stale", ["GBID1"]) is DiscoveryError.NO_ENTRY_FOR_PARTICIPANT
            with pytest.raises(ProviderRuntimeException):
                gcd1.lookup_participant_old("stale")
        else:
            assert [e.participant_id for e in gcd1.lookup_domains(["dom"], "iface", ["GBID1"])] == ["fresh", "stale"]
            assert gcd1.lookup_participant("stale", ["GBID1"]).participant_id == "stale"
        # the sweep deletes exactly what lookups skip
        assert gcd1.purge_not_seen_since(gcd1.clock.now - 2 * HOUR) == [("stale", "GBID1")]


def test_without_a_last_seen_timeout_an_old_entry_is_still_returned():
    gcd1, _ = pair()
    gcd1.add(entry(), ["GBID1"])
    gcd1.clock.now += DEFAULT_EXPIRY_MS - 1
    assert gcd1.lookup_participant("p1", ["GBID1"]).participant_id == "p1"


def test_no_remove_stale_keeps_the_previous_lifecycle():
    """Seed: removeStale unregisters the cluster controller's providers last seen before the
    bound, from all backends."""
    for variant, left in ((None, [("new", "GBID1")]), (v.NO_REMOVE_STALE, [("new", "GBID1"), ("old", "GBID1"),
                                                                           ("old", "GBID2")])):
        gcd1, _ = pair(variant)
        gcd1.add(entry("old"), ["GBID1", "GBID2"])
        gcd1.clock.now += 1000
        gcd1.add(entry("new", last_seen=NOW + 1000), ["GBID1"])
        gcd1.remove_stale("cc1", NOW + 1000)
        assert keys(gcd1) == left


def test_old_touch_ignored_leaves_the_last_seen_date():
    """Seed: the last seen date of all GDEs of a CC is updated when touch is called with the
    cluster controller ID of that CC (the old touch, without participant ids)."""
    for variant in (None, v.OLD_TOUCH_IGNORED):
        gcd1, _ = pair(variant)
        gcd1.add_old([entry("p1"), entry("p2")])
        gcd1.clock.now += HOUR
        touched = gcd1.touch("cc1")
        seen = {r.participant_id: r.entry.last_seen_date_ms for r in gcd1.store.all_rows()}
        if variant is None:
            assert touched == [("p1", "GBID1"), ("p2", "GBID1")] and seen == {"p1": NOW + HOUR, "p2": NOW + HOUR}
        else:
            assert touched == [] and seen == {"p1": NOW, "p2": NOW}
        assert gcd1.touch("cc1", ["p1"]) == [("p1", "GBID1")]  # the new touch works either way


def test_touch_keeps_expiry_lets_a_touched_entry_expire():
    """Seed: the new touch sets the last seen date to now and the expiry date to now + N."""
    for variant in (None, v.TOUCH_KEEPS_EXPIRY):
        gcd1, _ = pair(variant)
        gcd1.add(entry(), ["GBID1", "GBID2"])
        gcd1.clock.now += HOUR
        assert gcd1.touch("cc1", ["p1"]) == [("p1", "GBID1"), ("p1", "GBID2")]
        expiry = {r.entry.expiry_date_ms for r in gcd1.store.all_rows()}
        assert {r.entry.last_seen_date_ms for r in gcd1.store.all_rows()} == {NOW + HOUR}
        gcd1.clock.now = NOW + DEFAULT_EXPIRY_MS + 1
        if variant is None:
            assert expiry == {NOW + HOUR + DEFAULT_EXPIRY_MS}
            assert gcd1.lookup_participant("p1", ["GBID1"]).participant_id == "p1"
        else:
            assert expiry == {NOW + DEFAULT_EXPIRY_MS}
            assert error(gcd1.lookup_participant, "p1", ["GBID1"]) is DiscoveryError.NO_ENTRY_FOR_PARTICIPANT
