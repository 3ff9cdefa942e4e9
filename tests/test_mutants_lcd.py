"""The rules of joynr_sim/core/lcd.py its other unit tests left unchecked (make mutate): the
bounds of the cache (a fresh entry's age and expiry), the GBID an entry is cached for, the
plan's fields, and the parameter each refused argument names."""

from __future__ import annotations

import pytest

from joynr_sim.core.address import MqttAddress, WebSocketAddress
from joynr_sim.core.discovery import DiscoveryScope, InvalidDiscoveryArgument
from joynr_sim.core.lcd import LocalCapabilitiesDirectory
from test_lcd import KNOWN, NOW, FakeClock, local, remote

S = DiscoveryScope


def make(clock: FakeClock | None = None) -> tuple[LocalCapabilitiesDirectory, FakeClock]:
    clock = clock or FakeClock()
    return LocalCapabilitiesDirectory("cc1", KNOWN, clock), clock


def cache(lcd: LocalCapabilitiesDirectory, *entries, gbids=None) -> None:
    plan = lcd.plan_lookup(["domain1"], "interface1", S.GLOBAL_ONLY, gbids, cache_max_age_ms=0)
    lcd.merge_global_result(plan, list(entries))


@pytest.mark.parametrize("call, field", [
    (lambda lcd: lcd.plan_lookup(["domain1"], "interface1", scope="NOT_A_SCOPE"), "scope"),
    (lambda lcd: lcd.plan_lookup(["domain1"], "interface1", cache_max_age_ms=-1), "cache_max_age_ms"),
    (lambda lcd: lcd.plan_lookup(["domain1"], "interface1", cache_max_age_ms=True), "cache_max_age_ms"),
    (lambda lcd: lcd.plan_lookup(["domain1"], "interface1", cache_max_age_ms="1"), "cache_max_age_ms"),
    (lambda lcd: lcd.plan_lookup([], "interface1"), "domains"),
    (lambda lcd: lcd.plan_lookup("domain1", "interface1"), "domains"),
    (lambda lcd: lcd.plan_lookup(["domain1"], ""), "interface_name"),
    (lambda lcd: lcd.plan_lookup_participant(""), "participant_id"),
    (lambda lcd: lcd.remove(""), "participant_id"),
    (lambda lcd: lcd.add("not an entry"), "entry"),
    (lambda lcd: lcd.merge_global_result(lcd.plan_lookup_participant("p"), ["not an entry"]), "entries"),
])
def test_a_refused_argument_names_its_parameter(call, field) -> None:
    lcd, _ = make()
    with pytest.raises(InvalidDiscoveryArgument) as refused:
        call(lcd)
    assert refused.value.field == field


@pytest.mark.parametrize("args, field", [
    (("", KNOWN), "cluster_controller_id"),
    (("cc1", "GBID1"), "known_gbids"),
    (("cc1", []), "known_gbids"),
])
def test_a_refused_constructor_argument_names_its_parameter(args, field) -> None:
    with pytest.raises(InvalidDiscoveryArgument) as refused:
        LocalCapabilitiesDirectory(*args, FakeClock())
    assert refused.value.field == field


def test_a_scope_may_be_given_by_its_name() -> None:
    lcd, _ = make()
    assert lcd.plan_lookup(["domain1"], "interface1", scope="LOCAL_ONLY").scope is S.LOCAL_ONLY


def test_the_cache_max_age_defaults_to_zero_an_entry_of_this_millisecond_is_fresh() -> None:
    lcd, clock = make()
    cache(lcd, remote("r1"))
    clock.now += 1
    assert lcd.plan_lookup(["domain1"], "interface1").needs_gcd_lookup
    assert lcd.plan_lookup_participant("r1").needs_gcd_lookup
    clock.now -= 1
    assert lcd.plan_lookup_participant("r1").cached_entries == (remote("r1"),)


def test_a_cache_entry_is_fresh_up_to_its_max_age_and_expiry_date() -> None:
    lcd, clock = make()
    cache(lcd, remote("r1", expiry=NOW + 100))
    clock.now = NOW + 100  # expires at this millisecond: still usable
    plan = lcd.plan_lookup_participant("r1", cache_max_age_ms=100)
    assert [e.participant_id for e in plan.cached_entries] == ["r1"]
    assert plan.cache_max_age_ms == 100
    assert lcd.purge_expired() == []
    clock.now = NOW + 101
    assert lcd.plan_lookup_participant("r1", cache_max_age_ms=1000).cached_entries == ()
    assert [c.entry.participant_id for c in lcd.purge_expired()] == ["r1"]


def test_one_cached_entry_per_participant_the_first_selected_gbid_wins() -> None:
    lcd, _ = make()
    cache(lcd, remote("r1", gbid="GBID2", cc="ccB"), remote("r1", gbid="GBID1", cc="ccA"),
          remote("r2", gbid="GBID2"))
    plan = lcd.plan_lookup(["domain1"], "interface1", S.GLOBAL_ONLY, ["GBID1", "GBID2"], cache_max_age_ms=10)
    assert [(e.participant_id, e.address) for e in plan.cached_entries] == [
        ("r1", MqttAddress("GBID1", "ccA")), ("r2", MqttAddress("GBID2", "cc9"))
    ]
    plan = lcd.plan_lookup(["domain1"], "interface1", S.GLOBAL_ONLY, ["GBID2", "GBID1"], cache_max_age_ms=10)
    assert [e.address for e in plan.cached_entries][0] == MqttAddress("GBID2", "ccB")


def test_an_entry_without_an_mqtt_address_is_cached_for_the_gbid_the_gcd_was_asked_in() -> None:
    lcd, _ = make()
    entry = remote("r1")
    entry = type(entry)(**{**entry.__dict__, "address": WebSocketAddress("WS", "h", 1, "/")})
    plan = lcd.plan_lookup_participant("r1", S.GLOBAL_ONLY, ["GBID2"])
    lcd.merge_global_result(plan, [entry])
    assert [c.gbid for c in lcd.cached("r1")] == ["GBID2"]


def test_a_plan_carries_its_selected_gbids() -> None:
    lcd, _ = make()
    plan = lcd.plan_lookup(["domain1"], "interface1", S.LOCAL_THEN_GLOBAL, ["GBID2"])
    assert plan.gbids == ("GBID2",) and plan.gcd_gbids == ("GBID2",)
    assert lcd.plan_lookup(["domain1"], "interface1").gbids == KNOWN
    assert lcd.plan_lookup(["domain1"], "interface1", gbids=[]).gbids == KNOWN


def test_a_local_answer_asks_no_gcd() -> None:
    lcd, _ = make()
    lcd.add(local("p1"))
    for scope in (S.LOCAL_ONLY, S.LOCAL_THEN_GLOBAL):
        plan = lcd.plan_lookup(["domain1"], "interface1", scope)
        assert plan.gcd_gbids == () and plan.needs_gcd_lookup is False
        assert plan.result().entries[0].participant_id == "p1"


def test_local_only_answers_the_local_entries_whatever_the_gcd_said() -> None:
    lcd, _ = make()
    lcd.add(local("p1"))
    plan = lcd.plan_lookup(["domain1"], "interface1", S.LOCAL_ONLY)
    result = lcd.merge_global_result(plan, [remote("r1")])
    assert [(e.participant_id, e.is_local) for e in result.entries] == [("p1", True)]
    assert result.global_entries == () and result.offers == ()


def test_each_participant_the_gcd_returned_is_answered_and_offered_once() -> None:
    lcd, _ = make()
    plan = lcd.plan_lookup(["domain1"], "interface1", S.GLOBAL_ONLY)
    result = lcd.merge_global_result(plan, [remote("r1", gbid="GBID1"), remote("r1", gbid="GBID2"), remote("r2")])
    assert [e.participant_id for e in result.entries] == ["r1", "r2"]
    first_each = [("r1", "GBID1"), ("r2", "GBID1")]
    assert [(e.participant_id, e.address.broker_uri) for e in result.global_entries] == first_each
    assert [(e.participant_id, e.address.broker_uri) for e in result.offers] == first_each


def test_registration_and_registrations() -> None:
    lcd, _ = make()
    lcd.add(local("p2"))
    lcd.add(local("p1", scope="LOCAL"))
    assert lcd.registration("p1").participant_id == "p1"
    assert lcd.registration("nobody") is None
    assert [r.participant_id for r in lcd.registrations()] == ["p1", "p2"]
    assert [r.participant_id for r in lcd.global_registrations()] == ["p2"]


def test_a_lookup_matches_domain_and_interface_both() -> None:
    lcd, _ = make()
    lcd.add(local("p1", interface="interface2"))
    lcd.add(local("p2", domain="domain2"))
    plan = lcd.plan_lookup(["domain1"], "interface1", S.LOCAL_ONLY)
    assert plan.local_entries == () and plan.all_local_entries == ()
    assert (plan.domains, plan.interface_name, plan.participant_id) == (("domain1",), "interface1", None)


def test_remove_cached_takes_only_that_participants_entries() -> None:
    lcd, _ = make()
    cache(lcd, remote("r1", gbid="GBID1"), remote("r1", gbid="GBID2"), remote("r2"))
    assert sorted(c.gbid for c in lcd.remove_cached("r1")) == ["GBID1", "GBID2"]
    assert [c.entry.participant_id for c in lcd.cached()] == ["r2"]
