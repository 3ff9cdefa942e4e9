"""The local capabilities directory: registrations, the global cache, DiscoveryScope."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from joynr_sim.core.address import MqttAddress
from joynr_sim.core.discovery import (
    DiscoveryEntry,
    DiscoveryError,
    DiscoveryErrorException,
    DiscoveryScope,
    GlobalDiscoveryEntry,
    InvalidDiscoveryArgument,
    ProviderQos,
    Version,
)
from joynr_sim.core.lcd import DEFAULT_EXPIRY_MS, LocalCapabilitiesDirectory

KNOWN = ("GBID1", "GBID2", "GBID3")
NOW = 1_000_000
S = DiscoveryScope


class FakeClock:
    def __init__(self, now: int = NOW) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


@pytest.fixture
def clock():
    return FakeClock()


@pytest.fixture
def lcd(clock):
    return LocalCapabilitiesDirectory("cc1", KNOWN, clock)


def local(pid, scope="GLOBAL", domain="domain1", interface="interface1") -> DiscoveryEntry:
    return DiscoveryEntry(pid, domain, interface, Version(1, 0), ProviderQos(scope=scope),
                          NOW, NOW + DEFAULT_EXPIRY_MS, "")


def remote(pid, gbid="GBID1", cc="cc9", domain="domain1", expiry=NOW + DEFAULT_EXPIRY_MS,
           priority=0) -> GlobalDiscoveryEntry:
    return GlobalDiscoveryEntry(pid, domain, "interface1", Version(1, 0),
                                ProviderQos(priority=priority), NOW, expiry, "",
                                MqttAddress(gbid, cc))


def ids(entries):
    return [(e.participant_id, e.is_local) for e in entries]


# -- registrations --------------------------------------------------------------------------


def test_register_without_gbids_uses_the_default_gbid(lcd):
    assert lcd.add(local("p1")).gbids == ("GBID1",)
    assert lcd.add(local("p2"), []).gbids == ("GBID1",)
    assert lcd.add(local("p3"), ["GBID3", "GBID2"]).gbids == ("GBID3", "GBID2")
    assert lcd.default_gbid == "GBID1"


def test_register_validates_gbids_like_the_gcd(lcd):
    for gbids, error in (([""], DiscoveryError.INVALID_GBID),
                         (["GBID1", "GBID1"], DiscoveryError.INVALID_GBID),
                         (["GBID1", "nope"], DiscoveryError.UNKNOWN_GBID)):
        with pytest.raises(DiscoveryErrorException) as info:
            lcd.add(local("p1"), gbids)
        assert info.value.error is error
    assert lcd.registrations() == []


def test_global_entry_carries_this_cluster_controller_address(lcd):
    lcd.add(local("p1"), ["GBID2", "GBID1"])
    entry = lcd.global_entry("p1")
    assert entry.address == MqttAddress("GBID2", "cc1")
    assert entry.to_local() == local("p1")


def test_remove_returns_the_registration(lcd):
    lcd.add(local("p1"), ["GBID2"])
    assert lcd.remove("p1").gbids == ("GBID2",)
    assert lcd.remove("p1") is None
    assert lcd.registrations() == []


def test_touch_refreshes_local_entries_and_names_the_global_ones(lcd, clock):
    lcd.add(local("p2"))
    lcd.add(local("p1", scope="LOCAL"))
    lcd.add(local("p3"), ["GBID2"])
    clock.now = NOW + 50
    assert lcd.touch() == ["p2", "p3"]
    assert [r.participant_id for r in lcd.global_registrations()] == ["p2", "p3"]
    for r in lcd.registrations():
        assert r.entry.last_seen_date_ms == NOW + 50
        assert r.entry.expiry_date_ms == NOW + 50 + DEFAULT_EXPIRY_MS


# -- scopes ---------------------------------------------------------------------------------


def test_local_only_answers_from_local_registrations_only(lcd):
    lcd.add(local("p1", scope="LOCAL"))
    lcd.add(local("p2"), ["GBID2"])
    lcd.merge_global_result(lcd.plan_lookup(["domain1"], "interface1", S.GLOBAL_ONLY),
                            [remote("p9")])
    plan = lcd.plan_lookup(["domain1"], "interface1", S.LOCAL_ONLY, ["GBID1"], 10**9)
    assert not plan.needs_gcd_lookup and plan.gcd_gbid is None
    assert ids(plan.result().entries) == [("p1", True), ("p2", True)]
    assert plan.result().global_entries == ()


def test_local_only_with_nothing_local_is_empty(lcd):
    plan = lcd.plan_lookup(["domain1"], "interface1", S.LOCAL_ONLY)
    assert not plan.needs_gcd_lookup and plan.result().entries == ()


def test_local_then_global_prefers_local_registrations(lcd):
    lcd.add(local("p1", scope="LOCAL"))
    plan = lcd.plan_lookup(["domain1"], "interface1", S.LOCAL_THEN_GLOBAL)
    assert not plan.needs_gcd_lookup
    assert ids(plan.result().entries) == [("p1", True)]


def test_local_then_global_asks_the_gcd_then_uses_the_cache(lcd, clock):
    plan = lcd.plan_lookup(["domain1"], "interface1", S.LOCAL_THEN_GLOBAL, ["GBID2", "GBID1"],
                           cache_max_age_ms=1000)
    assert plan.needs_gcd_lookup
    assert plan.gcd_gbids == ("GBID2", "GBID1") and plan.gcd_gbid == "GBID2"
    result = lcd.merge_global_result(plan, [remote("p9", "GBID2")])
    assert ids(result.entries) == [("p9", False)]
    assert result.global_entries == (remote("p9", "GBID2"),)
    clock.now = NOW + 1000
    cached = lcd.plan_lookup(["domain1"], "interface1", S.LOCAL_THEN_GLOBAL, ["GBID2"], 1000)
    assert not cached.needs_gcd_lookup
    assert cached.result().global_entries == (remote("p9", "GBID2"),)


def test_local_then_global_ignores_global_providers_of_unselected_gbids(lcd):
    lcd.add(local("p1"), ["GBID2"])
    plan = lcd.plan_lookup(["domain1"], "interface1", S.LOCAL_THEN_GLOBAL, ["GBID1"])
    assert plan.needs_gcd_lookup and plan.local_entries == ()


def test_local_and_global_combines_and_local_wins(lcd):
    lcd.add(local("p1", scope="LOCAL"))
    lcd.add(local("p2"))
    plan = lcd.plan_lookup(["domain1"], "interface1", S.LOCAL_AND_GLOBAL, ["GBID1"])
    # The globally registered local provider counts as global: no GCD needed.
    assert not plan.needs_gcd_lookup
    assert ids(plan.result().entries) == [("p1", True), ("p2", True)]


def test_local_and_global_asks_the_gcd_when_nothing_global_is_known(lcd, clock):
    lcd.add(local("p1", scope="LOCAL"))
    plan = lcd.plan_lookup(["domain1"], "interface1", S.LOCAL_AND_GLOBAL)
    assert plan.needs_gcd_lookup and plan.gcd_gbids == KNOWN
    # The GCD also knows p1 (same fixed participantId registered elsewhere): local wins.
    result = lcd.merge_global_result(plan, [remote("p1", "GBID2"), remote("p9", "GBID1")])
    assert ids(result.entries) == [("p1", True), ("p9", False)]
    assert result.global_entries == (remote("p9", "GBID1"),)
    # ... but what the GCD said of p1 is still offered to the routing table (its policy
    # keeps the local entry), so the rule that decides is reached and traced.
    assert result.offers == (remote("p1", "GBID2"), remote("p9", "GBID1"))
    again = lcd.plan_lookup(["domain1"], "interface1", S.LOCAL_AND_GLOBAL, cache_max_age_ms=5)
    assert not again.needs_gcd_lookup
    assert ids(again.result().entries) == [("p1", True), ("p9", False)]


def test_global_only_uses_cache_or_gcd_and_counts_global_local_providers(lcd):
    lcd.add(local("p1", scope="LOCAL"))
    plan = lcd.plan_lookup(["domain1"], "interface1", S.GLOBAL_ONLY)
    assert plan.needs_gcd_lookup and plan.local_entries == ()
    result = lcd.merge_global_result(plan, [])
    assert result.entries == ()
    lcd.add(local("p2"), ["GBID3"])
    plan = lcd.plan_lookup(["domain1"], "interface1", S.GLOBAL_ONLY, ["GBID3"])
    assert not plan.needs_gcd_lookup
    assert ids(plan.result().entries) == [("p2", True)]
    plan = lcd.plan_lookup(["domain1"], "interface1", S.GLOBAL_ONLY, ["GBID1"])
    assert plan.needs_gcd_lookup


def test_global_only_merge_prefers_the_local_registration(lcd):
    lcd.add(local("p1", scope="LOCAL"))
    plan = lcd.plan_lookup(["domain1"], "interface1", S.GLOBAL_ONLY)
    result = lcd.merge_global_result(plan, [remote("p1", "GBID1"), remote("p2", "GBID1")])
    assert ids(result.entries) == [("p1", True), ("p2", False)]


# -- cache max age and expiry ---------------------------------------------------------------


def test_cache_max_age_with_a_fake_clock(lcd, clock):
    plan = lcd.plan_lookup(["domain1"], "interface1", S.GLOBAL_ONLY)
    lcd.merge_global_result(plan, [remote("p9", "GBID1")])
    assert lcd.cached()[0].cached_at_ms == NOW
    clock.now = NOW + 100
    assert not lcd.plan_lookup(["domain1"], "interface1", S.GLOBAL_ONLY, None, 100).needs_gcd_lookup
    assert lcd.plan_lookup(["domain1"], "interface1", S.GLOBAL_ONLY, None, 99).needs_gcd_lookup
    assert lcd.plan_lookup(["domain1"], "interface1", S.GLOBAL_ONLY, None, 0).needs_gcd_lookup
    clock.now = NOW
    assert not lcd.plan_lookup(["domain1"], "interface1", S.GLOBAL_ONLY, None, 0).needs_gcd_lookup


def test_cache_is_per_gbid_and_picks_the_first_selected(lcd):
    plan = lcd.plan_lookup(["domain1"], "interface1", S.GLOBAL_ONLY)
    lcd.merge_global_result(plan, [remote("p9", "GBID1", priority=1)])
    lcd.merge_global_result(plan, [remote("p9", "GBID2", priority=2)])
    assert [(c.entry.participant_id, c.gbid) for c in lcd.cached()] == [("p9", "GBID1"), ("p9", "GBID2")]
    for gbids, priority in ((["GBID2", "GBID1"], 2), (["GBID1", "GBID2"], 1)):
        result = lcd.plan_lookup(["domain1"], "interface1", S.GLOBAL_ONLY, gbids, 10).result()
        assert [e.qos.priority for e in result.entries] == [priority]
    assert lcd.plan_lookup(["domain1"], "interface1", S.GLOBAL_ONLY, ["GBID3"], 10).needs_gcd_lookup


def test_expired_cache_entries_are_not_used_and_purged(lcd, clock):
    plan = lcd.plan_lookup(["domain1"], "interface1", S.GLOBAL_ONLY)
    lcd.merge_global_result(plan, [remote("p9", expiry=NOW + 10), remote("p8")])
    clock.now = NOW + 11
    result = lcd.plan_lookup(["domain1"], "interface1", S.GLOBAL_ONLY, None, 10**6).result()
    assert ids(result.entries) == [("p8", False)]
    assert [c.entry.participant_id for c in lcd.purge_expired()] == ["p9"]
    assert [c.entry.participant_id for c in lcd.remove_cached("p8")] == ["p8"]
    assert lcd.cached() == []


# -- participant lookups --------------------------------------------------------------------


def test_participant_lookup(lcd, clock):
    lcd.add(local("p1", scope="LOCAL"))
    assert ids(lcd.plan_lookup_participant("p1").result().entries) == [("p1", True)]
    plan = lcd.plan_lookup_participant("p1", S.GLOBAL_ONLY)
    assert plan.needs_gcd_lookup and plan.participant_id == "p1"
    plan = lcd.plan_lookup_participant("p9", S.LOCAL_THEN_GLOBAL, ["GBID2"], 100)
    assert plan.needs_gcd_lookup and plan.gcd_gbid == "GBID2"
    assert ids(lcd.merge_global_result(plan, [remote("p9", "GBID2")]).entries) == [("p9", False)]
    assert not lcd.plan_lookup_participant("p9", S.LOCAL_THEN_GLOBAL, ["GBID2"], 100).needs_gcd_lookup
    assert lcd.plan_lookup_participant("p9", S.LOCAL_ONLY).result().entries == ()


# -- bad input ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "gbids, error",
    [([""], DiscoveryError.INVALID_GBID), (["GBID1", None], DiscoveryError.INVALID_GBID),
     (["GBID2", "GBID2"], DiscoveryError.INVALID_GBID), ("GBID1", DiscoveryError.INVALID_GBID),
     (["x"], DiscoveryError.UNKNOWN_GBID), (["GBID1", "x"], DiscoveryError.UNKNOWN_GBID)],
    ids=repr,
)
def test_lookup_validates_gbids_like_the_gcd(lcd, gbids, error):
    for call in (lambda: lcd.plan_lookup(["domain1"], "interface1", S.LOCAL_ONLY, gbids),
                 lambda: lcd.plan_lookup_participant("p1", S.GLOBAL_ONLY, gbids)):
        with pytest.raises(DiscoveryErrorException) as info:
            call()
        assert info.value.error is error


def test_lookup_rejects_malformed_arguments(lcd):
    with pytest.raises(InvalidDiscoveryArgument, match="domains"):
        lcd.plan_lookup([], "interface1")
    with pytest.raises(InvalidDiscoveryArgument, match="interface_name"):
        lcd.plan_lookup(["d"], "")
    with pytest.raises(InvalidDiscoveryArgument, match="scope"):
        lcd.plan_lookup(["d"], "i", "SOMEWHERE")
    with pytest.raises(InvalidDiscoveryArgument, match="cache_max_age_ms"):
        lcd.plan_lookup(["d"], "i", S.GLOBAL_ONLY, None, -1)
    with pytest.raises(InvalidDiscoveryArgument, match="known_gbids"):
        LocalCapabilitiesDirectory("cc1", ["GBID1", ""], lambda: 0)
    assert lcd.plan_lookup(["d"], "i", "LOCAL_ONLY").scope is S.LOCAL_ONLY


def test_a_plan_that_needs_the_gcd_has_no_result_yet(lcd):
    with pytest.raises(ValueError, match="merge_global_result"):
        lcd.plan_lookup(["domain1"], "interface1", S.GLOBAL_ONLY).result()


# -- properties -----------------------------------------------------------------------------


@settings(max_examples=100, deadline=None)
@given(
    registered=st.lists(st.tuples(st.sampled_from(["p1", "p2", "p3"]),
                                  st.sampled_from(["LOCAL", "GLOBAL"]),
                                  st.lists(st.sampled_from(KNOWN), min_size=1, max_size=2,
                                           unique=True)), max_size=3),
    from_gcd=st.lists(st.tuples(st.sampled_from(["p1", "p2", "p4", "p5"]),
                                st.sampled_from(KNOWN)), max_size=5),
    scope=st.sampled_from(list(S)),
    selected=st.lists(st.sampled_from(KNOWN), min_size=1, max_size=3, unique=True),
)
def test_property_one_entry_per_participant_and_local_wins(registered, from_gcd, scope, selected):
    lcd = LocalCapabilitiesDirectory("cc1", KNOWN, FakeClock())
    for pid, provider_scope, gbids in registered:
        lcd.add(local(pid, scope=provider_scope), gbids)
    plan = lcd.plan_lookup(["domain1"], "interface1", scope, selected, 10**6)
    gcd_entries = [remote(p, g) for p, g in from_gcd if g in selected]
    result = lcd.merge_global_result(plan, gcd_entries) if plan.needs_gcd_lookup else plan.result()
    pids = [e.participant_id for e in result.entries]
    assert len(pids) == len(set(pids))
    local_ids = {r.participant_id for r in lcd.registrations()}
    for e in result.entries:
        assert e.is_local == (e.participant_id in local_ids)
    assert {e.participant_id for e in result.global_entries} == \
        {e.participant_id for e in result.entries if not e.is_local}
    for e in result.global_entries:
        assert e.address.broker_uri in selected
    if scope is S.LOCAL_ONLY:
        assert set(pids) == local_ids
