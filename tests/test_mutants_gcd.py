"""The rules of joynr_sim/core/gcd.py its other unit tests left unchecked (make mutate): the
own GBID's precedence, the last-seen timeout in lookups, which calls take the store's write
lock, touch over several rows, the parameter a refused argument names, and each variant
changing its one rule (seed 001)."""

from __future__ import annotations

from contextlib import contextmanager

import pytest

from joynr_sim.core import gcd_variants as v
from joynr_sim.core.discovery import DiscoveryError, DiscoveryErrorException, InvalidDiscoveryArgument
from joynr_sim.core.gcd import DEFAULT_EXPIRY_MS, GlobalCapabilitiesDirectory
from joynr_sim.core.gcd_store import InMemoryGcdStore
from test_gcd import KNOWN, NOW, FakeClock, entry, keys


class RecordingStore(InMemoryGcdStore):
    """A store that records whether each transaction announced a write."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[bool] = []

    @contextmanager
    def transaction(self, write: bool = False):
        self.writes.append(write)
        with super().transaction(write=write) as tx:
            yield tx


def make(variant: str | None = None, *, own: str = "GBID1", timeout: int | None = None, store=None):
    clock = FakeClock()
    gcd = GlobalCapabilitiesDirectory(store or InMemoryGcdStore(), own_gbid=own, known_gbids=KNOWN, clock=clock,
                                      last_seen_timeout_ms=timeout, variant=variant)
    return gcd, clock


def field_of(call) -> str:
    with pytest.raises(InvalidDiscoveryArgument) as info:
        call()
    return info.value.field


# -- the own GBID first -----------------------------------------------------------------------


def test_a_lookup_prefers_the_own_gbid_whatever_the_callers_order() -> None:
    gcd, _ = make(own="GBID2")
    gcd.add(entry(topic="cc1"), ["GBID1", "GBID2"])
    assert gcd.lookup_participant("p1", ["GBID1", "GBID2"]).address.broker_uri == "GBID2"
    [found] = gcd.lookup_domains(["domain1"], "interface1", ["GBID1", "GBID2"])
    assert found.address.broker_uri == "GBID2"
    assert gcd.lookup_participant("p1", ["GBID1"]).address.broker_uri == "GBID1"


# -- last seen ----------------------------------------------------------------------------------


def test_a_lookup_skips_an_entry_last_seen_before_the_timeout_and_takes_one_seen_at_it() -> None:
    gcd, clock = make(timeout=100)
    gcd.add(entry("old", last_seen=NOW - 101), ["GBID1"])
    gcd.add(entry("edge", last_seen=NOW - 100), ["GBID1"])
    assert [e.participant_id for e in gcd.lookup_domains(["domain1"], "interface1", ["GBID1"])] == ["edge"]
    with pytest.raises(DiscoveryErrorException):
        gcd.lookup_participant("old", ["GBID1"])
    assert gcd.lookup_participant_old("edge").participant_id == "edge"


def test_an_expired_entry_is_absent_even_when_seen_recently() -> None:
    gcd, clock = make(timeout=1_000_000)
    gcd.add(entry("p1", expiry=NOW - 1), ["GBID1"])
    assert gcd.lookup_domains_old(["domain1"], "interface1") == []


def test_returns_outdated_keeps_outdated_entries_in_lookups() -> None:
    gcd, _ = make(v.RETURNS_OUTDATED, timeout=100)
    gcd.add(entry("old", last_seen=NOW - 101), ["GBID1"])
    assert [e.participant_id for e in gcd.lookup_domains(["domain1"], "interface1", ["GBID1"])] == ["old"]


# -- the store's write lock ---------------------------------------------------------------------


@pytest.mark.parametrize("call", [
    lambda gcd: gcd.purge_expired(),
    lambda gcd: gcd.purge_not_seen_since(NOW),
    lambda gcd: gcd.remove_stale("cc1", NOW),
    lambda gcd: gcd.touch("cc1"),
    lambda gcd: gcd.touch("cc1", ["p1"]),
    lambda gcd: gcd.add(entry("p2"), ["GBID1"]),
    lambda gcd: gcd.add_old(entry("p2")),
    lambda gcd: gcd.remove("p1", ["GBID1"]),
    lambda gcd: gcd.remove_old("p1"),
])
def test_every_call_that_writes_announces_it(call) -> None:
    store = RecordingStore()
    gcd, _ = make(store=store)
    gcd.add(entry("p1"), ["GBID1"])
    store.writes.clear()
    call(gcd)
    assert store.writes and all(store.writes)


def test_lookups_only_read() -> None:
    store = RecordingStore()
    gcd, _ = make(store=store)
    gcd.add(entry("p1"), ["GBID1"])
    store.writes.clear()
    gcd.lookup_participant("p1", ["GBID1"])
    gcd.lookup_domains(["domain1"], "interface1", ["GBID1"])
    assert store.writes and not any(store.writes)


# -- touch over several rows --------------------------------------------------------------------


def test_touch_refreshes_every_live_row_of_the_cluster_controller() -> None:
    gcd, clock = make()
    gcd.add(entry("a", expiry=NOW + 10), ["GBID1", "GBID2"])
    gcd.add(entry("b"), ["GBID1", "GBID2"])
    gcd.add(entry("c"), ["GBID1"])
    clock.now = NOW + 11  # a's rows expired
    assert sorted(gcd.touch("cc1")) == [("b", "GBID1"), ("b", "GBID2"), ("c", "GBID1")]
    assert sorted(gcd.touch("cc1", ["c", "b"])) == [("b", "GBID1"), ("b", "GBID2"), ("c", "GBID1")]
    assert sorted(gcd.touch("cc1", ["b"])) == [("b", "GBID1"), ("b", "GBID2")]
    assert gcd.lookup_participant("c", ["GBID1"]).expiry_date_ms == NOW + 11 + DEFAULT_EXPIRY_MS


def test_old_touch_ignored_drops_only_the_old_touch() -> None:
    gcd, clock = make(v.OLD_TOUCH_IGNORED)
    gcd.add(entry("p1"), ["GBID1"])
    clock.now = NOW + 5
    assert gcd.touch("cc1") == []
    assert gcd.touch("cc1", ["p1"]) == [("p1", "GBID1")]


# -- variants -----------------------------------------------------------------------------------


def test_ignores_gbids_finds_a_provider_in_any_backend_own_first() -> None:
    gcd, _ = make(v.IGNORES_GBIDS, own="GBID2")
    gcd.add(entry("p1"), ["GBID3"])
    assert sorted(keys(gcd)) == [("p1", "GBID1"), ("p1", "GBID2"), ("p1", "GBID3")]
    assert gcd.lookup_participant("p1", ["GBID3"]).address.broker_uri == "GBID2"
    plain, _ = make()
    plain.add(entry("p1"), ["GBID3"])
    assert plain.lookup_participant("p1", ["GBID3"]).address.broker_uri == "GBID3"


def test_entry_per_gbid_returns_every_selected_backends_entry() -> None:
    gcd, _ = make(v.ENTRY_PER_GBID)
    gcd.add(entry("p1"), ["GBID1", "GBID2"])
    found = gcd.lookup_domains(["domain1"], "interface1", ["GBID2", "GBID1"])
    assert [e.address.broker_uri for e in found] == ["GBID2", "GBID1"]


def test_no_gbid_errors_takes_an_empty_gbid_list_as_the_own_gbid() -> None:
    gcd, _ = make(v.NO_GBID_ERRORS, own="GBID2")
    gcd.add(entry("p1"), [])
    assert keys(gcd) == [("p1", "GBID2")]
    plain, _ = make()
    with pytest.raises(DiscoveryErrorException) as info:
        plain.add(entry("p1"), [])
    assert info.value.error is DiscoveryError.INVALID_GBID


# -- refused arguments --------------------------------------------------------------------------


@pytest.mark.parametrize("call, field", [
    (lambda gcd: gcd.lookup_participant("", ["GBID1"]), "participant_id"),
    (lambda gcd: gcd.lookup_participant_old(""), "participant_id"),
    (lambda gcd: gcd.remove("", ["GBID1"]), "participant_id"),
    (lambda gcd: gcd.remove_old([""]), "participant_ids"),
    (lambda gcd: gcd.remove_stale("", NOW), "cluster_controller_id"),
    (lambda gcd: gcd.remove_stale("cc1", "soon"), "max_last_seen_date_ms"),
    (lambda gcd: gcd.touch(""), "cluster_controller_id"),
    (lambda gcd: gcd.touch("cc1", [""]), "participant_ids"),
    (lambda gcd: gcd.purge_not_seen_since(None), "bound_ms"),
    (lambda gcd: gcd.lookup_domains("domain1", "interface1", ["GBID1"]), "domains"),
    (lambda gcd: gcd.lookup_domains(["domain1"], "", ["GBID1"]), "interface_name"),
    (lambda gcd: gcd.add_old("not entries"), "entries"),
])
def test_a_refused_argument_names_its_parameter(call, field) -> None:
    gcd, _ = make()
    assert field_of(lambda: call(gcd)) == field


@pytest.mark.parametrize("kwargs, field", [
    (dict(own_gbid=""), "own_gbid"),
    (dict(own_gbid="GBID9"), "own_gbid"),
    (dict(known_gbids=["GBID1", "GBID1"]), "known_gbids"),
    (dict(default_expiry_ms=0), "default_expiry_ms"),
    (dict(last_seen_timeout_ms=0), "last_seen_timeout_ms"),
    (dict(variant="gcd:nonsense"), "variant"),
])
def test_a_refused_constructor_argument_names_its_parameter(kwargs, field) -> None:
    args = dict(own_gbid="GBID1", known_gbids=KNOWN, clock=FakeClock()) | kwargs
    assert field_of(lambda: GlobalCapabilitiesDirectory(InMemoryGcdStore(), **args)) == field


def test_a_clock_and_a_store_are_required() -> None:
    with pytest.raises(TypeError):
        GlobalCapabilitiesDirectory(InMemoryGcdStore(), clock=5)
    with pytest.raises(TypeError):
        GlobalCapabilitiesDirectory(object(), clock=FakeClock())


def test_without_known_gbids_the_own_gbid_is_the_only_one() -> None:
    assert GlobalCapabilitiesDirectory(InMemoryGcdStore(), own_gbid="G", clock=FakeClock()).known_gbids == ("G",)


@pytest.mark.parametrize("kwargs", [dict(default_expiry_ms="soon"), dict(last_seen_timeout_ms="soon")])
def test_a_duration_that_is_no_int_is_refused(kwargs) -> None:
    args = dict(own_gbid="GBID1", known_gbids=KNOWN, clock=FakeClock()) | kwargs
    assert field_of(lambda: GlobalCapabilitiesDirectory(InMemoryGcdStore(), **args)) == next(iter(kwargs))


def test_durations_of_one_millisecond_are_taken() -> None:
    gcd = GlobalCapabilitiesDirectory(InMemoryGcdStore(), own_gbid="GBID1", known_gbids=KNOWN, clock=FakeClock(),
                                      default_expiry_ms=1, last_seen_timeout_ms=1)
    assert (gcd.default_expiry_ms, gcd.last_seen_timeout_ms) == (1, 1)


@pytest.mark.parametrize("variant", v.GCD_VARIANT_NAMES)
def test_every_named_variant_is_taken(variant) -> None:
    gcd, _ = make(variant)
    assert gcd.variant == variant


def test_the_seed_removes_a_provider_from_the_selected_backends_only() -> None:
    gcd, _ = make()
    gcd.add(entry("p1"), ["GBID1", "GBID3"])
    assert gcd.remove("p1", ["GBID1"]) == [("p1", "GBID1")] and keys(gcd) == [("p1", "GBID3")]


def test_remove_all_gbids_removes_a_provider_from_every_backend_it_is_in() -> None:
    gcd, _ = make(v.REMOVE_ALL_GBIDS)
    gcd.add(entry("p1"), ["GBID1", "GBID3"])
    assert sorted(gcd.remove("p1", ["GBID1"])) == [("p1", "GBID1"), ("p1", "GBID3")]
    assert keys(gcd) == [] and gcd.remove("p1", ["GBID1"]) == []


def test_ignores_gbids_removes_a_provider_from_every_backend() -> None:
    gcd, _ = make(v.IGNORES_GBIDS)
    gcd.add(entry("p1"), ["GBID1"])
    assert sorted(gcd.remove("p1", ["GBID2"])) == [("p1", g) for g in KNOWN]
    assert keys(gcd) == []


def test_ignores_gbids_registers_an_old_add_in_every_backend() -> None:
    gcd, _ = make(v.IGNORES_GBIDS)
    gcd.add_old(entry("p1"))
    assert keys(gcd) == [("p1", g) for g in KNOWN]


def test_a_new_touch_passes_over_the_participants_it_does_not_name() -> None:
    gcd, clock = make()
    gcd.add(entry("a"), ["GBID1"])
    gcd.add(entry("b"), ["GBID1"])
    clock.now = NOW + 5
    assert gcd.touch("cc1", ["b"]) == [("b", "GBID1")]


@pytest.mark.parametrize("variant", [v.REMOVE_ALL_GBIDS, v.IGNORES_GBIDS])
def test_an_old_remove_before_multiple_backends_removes_everywhere(variant) -> None:
    gcd, _ = make(variant)
    gcd.add(entry("p1"), ["GBID2", "GBID3"])
    registered = keys(gcd)  # ignores-gbids registered it in every backend
    assert sorted(gcd.remove_old("p1")) == registered and keys(gcd) == []
    plain, _ = make()
    plain.add(entry("p1"), ["GBID1", "GBID2"])
    assert plain.remove_old("p1") == [("p1", "GBID1")]
