"""The link registry: modes of attach, detach, unsettled state, validation, expiry,
events, and concurrent steals."""

from __future__ import annotations

import threading

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from joynr_sim.core.links import (
    ERR_INTERNAL,
    ERR_NOT_FOUND,
    ERR_STOLEN,
    MAX_NAME_BYTES,
    Delivery,
    LinkAttached,
    LinkDetached,
    LinkError,
    LinkEvent,
    LinkExpired,
    LinkRecovered,
    LinkRegistry,
    LinkResumed,
    LinkStateError,
    LinkStolen,
    LinkStored,
    LinkStoreError,
    StoredLink,
    Terminus,
    reconcile,
    validate_mqtt_client_id,
)
from joynr_sim.store.link_store import MemoryLinkStore, SqliteLinkStore

JOIN_S = 30.0  # bound on every thread join: a deadlock fails the test instead of hanging


class FakeClock:
    def __init__(self, now: int = 1_000) -> None:
        self.now = now
        self._lock = threading.Lock()

    def __call__(self) -> int:
        with self._lock:
            return self.now

    def advance(self, ms: int) -> None:
        with self._lock:
            self.now += ms


def registry(**kwargs) -> tuple[LinkRegistry, list[LinkEvent]]:
    events: list[LinkEvent] = []
    kwargs.setdefault("clock", FakeClock())
    reg = LinkRegistry(**kwargs)
    reg.add_listener(events.append)
    return reg, events


class DurableStore(SqliteLinkStore):
    """A store that keeps all three durabilities, without a file: SQLite in memory."""

    def __init__(self) -> None:
        super().__init__(":memory:")


def src(address: str = "cc1/topic", durability: int = 0) -> Terminus:
    return Terminus(address, durability)


def run_threads(targets: list) -> list[BaseException]:
    """Start every target in a thread, join each with a bound, return their exceptions."""
    errors: list[BaseException] = []

    def wrap(fn):
        def run():
            try:
                fn()
            except BaseException as e:  # noqa: BLE001 - reported to the test
                errors.append(e)
        return run

    threads = [threading.Thread(target=wrap(t), daemon=True) for t in targets]
    for t in threads:
        t.start()
    for t in threads:
        t.join(JOIN_S)
    stuck = [t for t in threads if t.is_alive()]
    assert not stuck, f"{len(stuck)} threads did not finish: deadlock"
    return errors


# -- identity -------------------------------------------------------------------------


def test_same_key_same_link_and_roles_are_distinct():
    reg, _ = registry()
    a = reg.get_sending_link("gbid1", "cc1")
    assert reg.get_sending_link("gbid1", "cc1") is a
    assert reg.get_receiving_link("gbid1", "cc1") is not a
    assert reg.get_sending_link("gbid2", "cc1") is not a
    assert a.key.as_tuple() == ("joynr-sim", "gbid1", "cc1")
    assert reg.get_receiving_link("gbid1", "cc1").key.as_tuple() == ("gbid1", "joynr-sim", "cc1")
    assert len(reg) == 3


def test_bytes_names_are_decoded_to_the_same_key():
    reg, _ = registry()
    assert reg.get_sending_link(b"gbid1", "cc\xe9".encode()) is reg.get_sending_link("gbid1", "cc\xe9")


def test_concurrent_gets_return_one_object():
    reg, _ = registry()
    barrier = threading.Barrier(8, timeout=JOIN_S)
    seen: list[object] = []

    def get():
        barrier.wait()
        for i in range(200):
            seen.append((i, reg.get_receiving_link("gbid1", f"cc{i}")))

    assert run_threads([get] * 8) == []
    by_name: dict[int, set[int]] = {}
    for i, link in seen:
        by_name.setdefault(i, set()).add(id(link))
    assert all(len(ids) == 1 for ids in by_name.values())
    assert len(reg) == 200


# -- modes ----------------------------------------------------------------------------


def test_a_suspended_link_resumes_even_with_nothing_unsettled():
    # Seed 004: "Resuming: Terminus exists, LinkEndpoint does not exist" - whether anything
    # is unsettled does not decide it ("reattach" here was the unsettled-state labelling).
    reg, events = registry()
    link = reg.get_sending_link("gbid1", "cc1")
    out = link.attach("conn1", src(), None)
    assert (out.mode, out.ok, out.terminus, link.owner) == ("establish", True, src(), "conn1")
    out = link.detach("conn1")
    assert out.detached and not out.closed  # suspended
    assert link.owner is None and link.terminus == src()
    out = link.attach("conn2", src(), None)
    assert out.mode == "resume" and out.resumed and out.resend == () and out.settled == ()
    assert [e.mode for e in events if isinstance(e, LinkAttached)] == ["establish", "resume"]
    assert [(e.resent, e.settled) for e in events if isinstance(e, LinkResumed)] == [(0, 0)]


def test_an_attached_link_reattaches_even_with_deliveries_unsettled():
    # Seed 004: "Reattaching: Terminus exists, LinkEndpoint exists": its connection comes
    # back before its loss was noticed; the endpoint keeps its deliveries.
    reg, events = registry()
    link = reg.get_sending_link("gbid1", "cc1")
    link.attach("conn1", src(), None)
    link.add_unsettled("m1")
    out = link.attach("conn1", src(), None)
    assert out.mode == "reattach" and not out.resumed
    assert link.unsettled == {"m1": None} and not [e for e in events if isinstance(e, LinkResumed)]


def test_same_connection_attaching_again_is_a_reattach():
    reg, _ = registry()
    link = reg.get_sending_link("gbid1", "cc1")
    link.attach("conn1", src(), None)
    assert link.attach("conn1", src("other"), None).mode == "reattach"
    assert link.terminus == src("other")


def test_resume_reconciles_per_delivery_tag():
    reg, events = registry()
    link = reg.get_sending_link("gbid1", "cc1")
    link.attach("conn1", src(), None)
    for tag in ("m1", "m2", "m3"):
        link.add_unsettled(tag)
    link.add_unsettled("m2", "received")
    link.detach("conn1")
    out = link.attach("conn2", src(), None, unsettled={"m1": "accepted", "m2": "received", "m9": None})
    assert out.mode == "resume" and out.resumed
    assert out.settled == ("m1",)  # settled at the peer: no resend
    assert out.resend == (Delivery("m2", "received", True), Delivery("m3", None, True))
    assert out.peer_only == ("m9",)
    assert link.unsettled == {"m2": "received", "m3": None}
    resumed = [e for e in events if isinstance(e, LinkResumed)]
    assert [(e.connection_id, e.resent, e.settled) for e in resumed] == [("conn2", 2, 1)]


def test_resume_without_peer_map_resends_what_is_unsettled():
    reg, _ = registry()
    link = reg.get_sending_link("gbid1", "cc1")
    link.attach("conn1", src(), None)
    link.add_unsettled("m1")
    link.detach("conn1")
    out = link.attach("conn2", src(), None)
    assert out.mode == "resume" and out.resend == (Delivery("m1", None),)


def test_resume_of_a_receiving_link_settles_what_the_sender_forgot():
    reg, _ = registry()
    link = reg.get_receiving_link("gbid1", "cc1")
    link.attach("conn1", None, Terminus("cc1/topic"))
    link.add_unsettled("m1", "received")
    link.add_unsettled("m2", "received")
    link.add_unsettled("m3", "accepted")
    link.detach("conn1")
    out = link.attach("conn2", None, Terminus("cc1/topic"), unsettled={"m2": None, "m3": "accepted"})
    assert out.mode == "resume"
    assert out.settled == ("m1", "m3")
    assert out.resend == (Delivery("m2", "received"),)
    assert link.unsettled == {"m2": "received"}


def test_reconcile_partitions_the_local_map():
    states = st.sampled_from([None, "received", "accepted", "rejected", "released", "modified"])
    maps = st.dictionaries(st.sampled_from([f"m{i}" for i in range(8)]), states, max_size=8)

    from hypothesis import given

    @given(st.sampled_from(["sending", "receiving"]), maps, maps)
    @settings(max_examples=300, deadline=None)
    def check(role, local, peer):
        resend, settled, peer_only, remaining = reconcile(role, local, peer)
        resent = {d.tag for d in resend}
        assert resent | set(settled) == set(local)
        assert not resent & set(settled)
        assert set(remaining) == resent and all(d.resumed for d in resend)
        assert set(peer_only) == set(peer) - set(local)
        for tag in settled:
            assert peer.get(tag) in {"accepted", "rejected", "released", "modified"} or (
                role == "receiving" and tag not in peer)

    check()


def test_recover_uses_the_stored_terminus():
    reg, events = registry()
    link = reg.get_sending_link("gbid1", "cc1")
    link.attach("conn1", src("kept"), Terminus("peer"))
    link.detach("conn1")
    out = link.attach("conn2", None, Terminus("peer"))
    assert out.mode == "recover" and out.recovered and out.terminus == src("kept")
    assert link.source == src("kept") and link.target == Terminus("peer")
    assert [e.connection_id for e in events if isinstance(e, LinkRecovered)] == ["conn2"]


def test_recover_of_an_unknown_link_is_refused_not_found():
    reg, events = registry()
    link = reg.get_sending_link("gbid1", "cc1")
    out = link.attach("conn1", None, Terminus("peer"))
    assert out.mode == "reject" and not out.ok
    assert out.error is not None and out.error.condition == ERR_NOT_FOUND
    assert link.owner is None and link.terminus is None
    assert [(e.mode, e.error) for e in events if isinstance(e, LinkAttached)] == [
        ("reject", ERR_NOT_FOUND)]


def test_steal_detaches_the_owner_with_link_stolen():
    reg, events = registry()
    link = reg.get_sending_link("gbid1", "cc1")
    told: list[LinkDetached] = []
    link.attach("conn1", src(), None, on_stolen=told.append)
    out = link.attach("conn2", src(), None)
    assert out.mode == "steal" and out.stolen_from == "conn1" and link.owner == "conn2"
    assert [(e.connection_id, e.error, e.stolen_by) for e in told] == [
        ("conn1", ERR_STOLEN, "conn2")]
    # The old owner's own detach arrives late and changes nothing.
    late = link.detach("conn1")
    assert not late.detached and link.owner == "conn2"
    assert [e.ev for e in events] == ["link.attach", "link.detach", "link.steal", "link.attach"]
    stolen = [e for e in events if isinstance(e, LinkStolen)]
    assert [(e.from_connection, e.to_connection) for e in stolen] == [("conn1", "conn2")]


def test_steal_of_a_recovered_link_reports_both():
    reg, events = registry()
    link = reg.get_sending_link("gbid1", "cc1")
    link.attach("conn1", src(), None)
    out = link.attach("conn2", None, None)
    assert (out.mode, out.recovered, out.stolen_from, out.terminus) == ("steal", True, "conn1", src())
    assert {"link.steal", "link.recover"} <= {e.ev for e in events}


def test_steal_moves_the_unsettled_state_and_resumes_it():
    reg, events = registry()
    link = reg.get_sending_link("gbid1", "cc1")
    link.attach("conn1", src(), None)
    link.add_unsettled("m1")
    link.add_unsettled("m2")
    out = link.attach("conn2", src(), None, unsettled={"m1": "accepted"})
    assert out.mode == "steal" and out.resumed
    assert out.settled == ("m1",) and out.resend == (Delivery("m2", None),)
    assert [e.ev for e in events][-2:] == ["link.attach", "link.resume"]


def test_a_peer_that_kept_no_state_makes_the_attach_an_establish():
    # An MQTT broker restarted without its sessions: CONNACK session present 0.
    reg, events = registry(store=DurableStore())
    link = reg.get_sending_link("gbid1", "cc1")
    link.attach("conn1", src("a", 2), None)
    link.add_unsettled("m1")
    link.add_unsettled("m2", "received")
    link.detach("conn1")
    out = link.attach("conn2", src("a", 2), None, peer_kept_state=False)
    assert (out.mode, out.resumed, out.settled, out.peer_only) == ("establish", False, (), ())
    # Nothing is resumed, nothing is lost: both go again as new deliveries, unsettled.
    assert out.resend == (Delivery("m1", None, resumed=False), Delivery("m2", None, resumed=False))
    assert link.unsettled == {"m1": None, "m2": None}
    assert [e.ev for e in events if e.ev != "link.store"][-1] == "link.attach"
    assert not [e for e in events if isinstance(e, LinkResumed)]


def test_a_receiving_link_settles_what_a_sender_without_state_forgot():
    reg, _ = registry(store=DurableStore())
    link = reg.get_receiving_link("gbid1", "cc1")
    link.attach("conn1", None, src("a", 2))
    link.add_unsettled("m1", "received")
    link.detach("conn1")
    out = link.attach("conn2", None, src("a", 2), peer_kept_state=False)
    assert (out.mode, out.resend, out.settled) == ("establish", (), ("m1",))
    assert link.unsettled == {}


def test_a_peer_without_state_has_no_unsettled_map():
    reg, events = registry()
    link = reg.get_sending_link("gbid1", "cc1")
    with pytest.raises(LinkError, match="unsettled: a peer that kept no state"):
        link.attach("conn1", src(), None, unsettled={}, peer_kept_state=False)
    with pytest.raises(LinkError, match="peer_kept_state: expected a bool"):
        link.attach("conn1", src(), None, peer_kept_state=0)
    assert link.owner is None and events == []


def test_a_store_must_advertise_a_durability():
    class Vague(MemoryLinkStore):
        max_durability = 3

    with pytest.raises(LinkError, match="store.max_durability: expected 0, 1 or 2, got 3"):
        LinkRegistry(store=Vague())


def test_registries_of_two_holders_on_one_store_keep_one_owner():
    store = DurableStore()
    a, a_events = registry(store=store, holder="a")
    b, b_events = registry(store=store, holder="b")
    a.get_sending_link("gbid1", "cc1").attach("a1", src("t", 2), None)
    a.get_sending_link("gbid1", "cc1").add_unsettled("m1")
    out = b.get_sending_link("gbid1", "cc1").attach("b1", src("t", 2), None)
    # b resumes what a left unsettled, as one registry would, and steals the link.
    assert (out.mode, out.stolen_from, out.resumed) == ("steal", "a1", True)
    assert out.resend == (Delivery("m1", None),)
    # a learns it at its next detach: its connection lost the link, the store keeps b's.
    assert a.get_sending_link("gbid1", "cc1").detach("a1").detached is False
    assert [(e.connection_id, e.stolen_by) for e in a_events if isinstance(e, LinkDetached)] == [
        ("a1", "b1")]
    assert store.find("sending", "gbid1", "cc1").owner == "b1"
    assert a.get_sending_link("gbid1", "cc1").owner == "b1"


def test_refresh_tells_a_connection_that_another_holder_took_its_link():
    # The broker may not close it (amqtt 0.12 keeps both): the registry tells it.
    store = DurableStore()
    a, a_events = registry(store=store, holder="a")
    b, _ = registry(store=store, holder="b")
    told: list[LinkDetached] = []
    a.get_sending_link("gbid1", "cc1").attach("a1", src("t", 1), None, on_stolen=told.append)
    a.refresh()
    assert told == [] and a.get_sending_link("gbid1", "cc1").owner == "a1"
    b.get_sending_link("gbid1", "cc1").attach("b1", src("t", 1), None)
    a.refresh()
    assert [(e.connection_id, e.error, e.stolen_by) for e in told] == [("a1", ERR_STOLEN, "b1")]
    assert a.get_sending_link("gbid1", "cc1").owner == "b1"
    a.refresh()  # told once
    assert len(told) == 1 and [e.ev for e in a_events if e.ev != "link.store"] == [
        "link.attach", "link.detach"]


class FindFails(DurableStore):
    """A store whose reads fail while ``unreadable``."""

    unreadable = False

    def find(self, role, remote_container_id, link_name):
        if self.unreadable:
            raise LinkStoreError("disk gone")
        return super().find(role, remote_container_id, link_name)


def test_a_store_that_cannot_be_read_rejects_attaches_and_refresh_keeps_the_owner():
    store = FindFails()
    reg, events = registry(store=store, holder="a")
    link = reg.get_sending_link("gbid1", "cc1")
    told: list[LinkDetached] = []
    link.attach("a1", src("t", 1), None, on_stolen=told.append)
    store.unreadable = True
    reg.refresh()
    assert link.owner == "a1" and told == []
    out = link.attach("a2", src("t", 1), None)
    assert out.mode == "reject" and out.error.condition == ERR_INTERNAL and link.owner == "a1"
    failures = [(e.op, e.error) for e in events if isinstance(e, LinkStored) and not e.ok]
    assert failures == [("find", "disk gone")] * 2


def test_a_reopened_registry_suspends_the_links_of_its_dead_connections():
    store = DurableStore()
    clock = FakeClock(1_000)
    reg, _ = registry(store=store, holder="p", clock=clock, detached_timeout_ms=100)
    reg.get_sending_link("gbid1", "cc1").attach("p1", src("t", 2), None)
    clock.advance(500)
    again = reg.reopen()  # same holder: the restarted process
    link = again.get_sending_link("gbid1", "cc1")
    assert link.owner is None and link.detached_since_ms == 1_500
    assert again.purge_expired(1_600) == [] and again.purge_expired(1_601) == [link]
    assert store.load() == []


class FailingStore(DurableStore):
    def __init__(self) -> None:
        super().__init__()
        self.fail = False

    def save(self, record: StoredLink) -> None:
        if self.fail:
            raise LinkStoreError("disk full")
        super().save(record)

    def delete(self, role, remote_container_id, link_name) -> None:
        if self.fail:
            raise LinkStoreError("disk full")
        super().delete(role, remote_container_id, link_name)


def test_rejected_steal_leaves_owner_and_stored_record_untouched():
    store = FailingStore()
    reg, events = registry(store=store)
    link = reg.get_sending_link("gbid1", "cc1")
    told: list[LinkDetached] = []
    link.attach("conn1", src("a", 2), None, on_stolen=told.append)
    link.add_unsettled("m1")
    before = store.load()
    store.fail = True
    out = link.attach("conn2", src("b", 2), None, unsettled={"m1": "accepted"})
    assert out.mode == "reject" and out.error is not None and out.error.condition == ERR_INTERNAL
    assert out.terminus == src("a", 2)
    assert link.owner == "conn1" and link.terminus == src("a", 2) and link.unsettled == {"m1": None}
    assert store.load() == before and told == []
    assert [(e.ev, getattr(e, "ok", None)) for e in events[-2:]] == [
        ("link.store", False), ("link.attach", None)]
    store.fail = False
    assert link.attach("conn2", src("b", 2), None).mode == "steal"


def test_rejected_establish_registers_no_owner():
    store = FailingStore()
    reg, _ = registry(store=store)
    store.fail = True
    link = reg.get_sending_link("gbid1", "cc1")
    out = link.attach("conn1", src("a", 1), None)
    assert out.mode == "reject" and link.owner is None and link.terminus is None
    assert store.load() == []


# -- detach, unsettled ----------------------------------------------------------------


def test_closed_detach_removes_the_link_and_its_record():
    store = DurableStore()
    reg, events = registry(store=store)
    link = reg.get_sending_link("gbid1", "cc1")
    link.attach("conn1", src("a", 2), None)
    link.add_unsettled("m1")
    assert len(store.load()) == 1
    out = link.detach("conn1", closed=True)
    assert out.detached and out.closed and link.removed
    assert store.load() == [] and reg.find_link("sending", "gbid1", "cc1") is None
    fresh = reg.get_sending_link("gbid1", "cc1")
    assert fresh is not link and fresh.terminus is None
    # An attach through the stale object lands on the live link of the key.
    assert link.attach("conn2", src(), None).mode == "establish"
    assert fresh.owner == "conn2"
    closes = [e for e in events if isinstance(e, LinkDetached)]
    assert [(e.connection_id, e.closed) for e in closes] == [("conn1", True)]


def test_unsettled_needs_an_attached_link_and_settle_reports_unknown_tags():
    reg, _ = registry()
    link = reg.get_sending_link("gbid1", "cc1")
    with pytest.raises(LinkStateError, match="not attached"):
        link.add_unsettled("m1")
    link.attach("conn1", src(), None)
    link.add_unsettled("m1")
    assert link.settle("m1") is True
    assert link.settle("m1") is False
    with pytest.raises(LinkError, match="state"):
        link.add_unsettled("m2", "bogus")
    assert link.unsettled == {}


def test_durability_is_lowered_to_what_the_store_keeps():
    reg, _ = registry()  # no store: nothing survives a restart
    out = reg.get_sending_link("gbid1", "cc1").attach("conn1", src("a", 2), None)
    assert out.terminus == src("a", 0)


# -- validation -----------------------------------------------------------------------

BAD_NAMES = [
    ("", "must not be empty"),
    ("x" * (MAX_NAME_BYTES + 1), "longer than 256"),
    ("\xe9" * (MAX_NAME_BYTES // 2 + 1), "bytes of UTF-8, longer"),  # 2 bytes each
    (b"\xff\xfe", "not valid UTF-8"),
    ("ab\ud800", "lone surrogate"),
    (42, "expected a string"),
    (None, "expected a string"),
]


@pytest.mark.parametrize("value,problem", BAD_NAMES)
@pytest.mark.parametrize("which", ["remote_container_id", "link_name"])
def test_bad_names_are_refused_and_nothing_is_registered(which, value, problem):
    reg, events = registry()
    args = {"remote_container_id": "gbid1", "link_name": "cc1", which: value}
    for get in (reg.get_sending_link, reg.get_receiving_link):
        with pytest.raises(LinkError, match=problem) as e:
            get(args["remote_container_id"], args["link_name"])
        assert e.value.field == which and which in str(e.value)
    assert len(reg) == 0 and events == []


def test_bad_local_container_id_is_refused():
    with pytest.raises(LinkError, match="container_id: must not be empty"):
        LinkRegistry(container_id="")


def test_names_at_the_bound_are_accepted():
    reg, _ = registry()
    assert reg.get_sending_link("g" * MAX_NAME_BYTES, "\xe9" * (MAX_NAME_BYTES // 2))


@pytest.mark.parametrize("value", ["", "a-b", "x" * 24, "caf\xe9", b"\xc3", "a\ud800"])
def test_strict_mqtt_client_ids(value):
    with pytest.raises(LinkError) as e:
        validate_mqtt_client_id(value, strict=True)
    assert e.value.field == "client_id"


def test_mqtt_client_ids():
    assert validate_mqtt_client_id("cc1Abc", strict=True) == "cc1Abc"
    assert validate_mqtt_client_id("z" * 23, strict=True) == "z" * 23
    assert validate_mqtt_client_id("joynr:cc-1/caf\xe9" + "x" * 300) .startswith("joynr:")
    assert validate_mqtt_client_id(b"cc\xc3\xa9") == "cc\xe9"
    for bad, problem in [("", "empty"), ("a\x00b", "U\\+0000"), ("x" * 65536, "longer than 65535"),
                         (b"\xc3(", "not valid UTF-8"), ("\udc80", "lone surrogate")]:
        with pytest.raises(LinkError, match=problem):
            validate_mqtt_client_id(bad)


def test_registry_with_mqtt_client_id_rules_refuses_bad_ids_and_registers_nothing():
    reg, _ = registry(link_name_validator=validate_mqtt_client_id)
    assert reg.get_sending_link("gbid1", "c" * 1000).link_name == "c" * 1000
    for bad in ["", "a\x00b", b"\xff"]:
        with pytest.raises(LinkError, match="link_name"):
            reg.get_sending_link("gbid1", bad)
    strict, _ = registry(link_name_validator=lambda v, f: validate_mqtt_client_id(v, f, strict=True))
    with pytest.raises(LinkError, match="link_name: must be 1-23"):
        strict.get_receiving_link("gbid1", "cc-1")
    assert len(reg) == 1 and len(strict) == 0


def test_bad_attach_input_changes_nothing():
    reg, events = registry()
    link = reg.get_sending_link("gbid1", "cc1")
    link.attach("conn1", src(), None)
    n = len(events)
    bad_calls = [
        (("", src(), None), {}, "connection_id"),
        (("conn2", "topic", None), {}, "source"),
        (("conn2", src(), None), {"unsettled": {"": None}}, "unsettled tag"),
        (("conn2", src(), None), {"unsettled": {"m1": "done"}}, "unsettled"),
        (("conn2", src(), None), {"unsettled": ["m1"]}, "unsettled"),
        (("conn2", src(), None), {"on_stolen": 3}, "on_stolen"),
    ]
    for args, kwargs, name in bad_calls:
        with pytest.raises(LinkError, match=name):
            link.attach(*args, **kwargs)
    assert link.owner == "conn1" and len(events) == n
    with pytest.raises(LinkError, match="terminus.durability"):
        Terminus("t", 3)
    with pytest.raises(LinkError, match="terminus.address"):
        Terminus("")


# -- expiry ---------------------------------------------------------------------------


def test_links_detached_longer_than_the_timeout_are_purged():
    clock = FakeClock(1_000)
    store = DurableStore()
    reg, events = registry(store=store, clock=clock, detached_timeout_ms=500)
    kept = reg.get_sending_link("gbid1", "attached")
    kept.attach("conn1", src("a", 1), None)
    old = reg.get_sending_link("gbid1", "old")
    old.attach("conn2", src("b", 1), None)
    old.detach("conn2")  # detached at 1000
    clock.advance(200)
    young = reg.get_sending_link("gbid1", "young")
    young.attach("conn3", src("c", 1), None)
    young.detach("conn3")  # detached at 1200
    assert reg.purge_expired(1_500) == []  # exactly the timeout is not longer
    assert reg.purge_expired(1_501) == [old]
    assert old.removed and reg.find_link("sending", "gbid1", "old") is None
    assert {r.link_name for r in store.load()} == {"attached", "young"}
    expired = [e for e in events if isinstance(e, LinkExpired)]
    assert [(e.key.link_name, e.detached_since_ms, e.timeout_ms) for e in expired] == [("old", 1000, 500)]
    assert reg.purge_expired(10_000) == [young]
    assert kept.owner == "conn1" and reg.links() == [kept]


def test_without_a_timeout_nothing_expires():
    reg, _ = registry()
    link = reg.get_sending_link("gbid1", "cc1")
    assert reg.purge_expired(10**15) == [] and reg.links() == [link]


# -- listener events ------------------------------------------------------------------


def test_listener_sees_every_event_kind_with_what_the_trace_needs():
    clock = FakeClock(5)
    store = DurableStore()
    reg, events = registry(store=store, clock=clock, detached_timeout_ms=10)
    link = reg.get_sending_link("gbid1", "cc1")
    link.attach("c1", src("a", 2), None)
    link.add_unsettled("m1")
    link.attach("c2", src("a", 2), None, unsettled={})
    link.detach("c2")
    link.attach("c3", None, None)
    link.detach("c3")
    clock.advance(100)
    reg.purge_expired(clock())
    # Every attach and detach saves the record: it names the connection the link is on.
    assert [e.ev for e in events] == [
        "link.store", "link.attach",  # establish, durable
        "link.store", "link.detach", "link.steal", "link.attach", "link.resume",  # steal, resume
        "link.store", "link.detach",
        "link.store", "link.attach", "link.resume", "link.recover",  # recover, m1 unsettled
        "link.store", "link.detach",
        "link.store", "link.expire",
    ]
    attach = events[1]
    assert attach.fields() == {
        "ev": "link.attach", "role": "sending", "local": "joynr-sim", "remote": "gbid1",
        "link": "cc1", "connection_id": "c1", "mode": "establish", "durability": 2, "error": None,
    }
    stored = [e for e in events if isinstance(e, LinkStored)]
    assert [(e.op, e.durability, e.ok) for e in stored] == [("save", 2, True)] * 5 + [
        ("delete", None, True)]
    assert all(e.ts == 5 for e in events[:-2]) and events[-1].ts == 105


def test_registry_restart_reports_the_load_and_keeps_links_per_durability():
    store = DurableStore()
    reg, _ = registry(store=store)
    for durability in (0, 1, 2):
        link = reg.get_sending_link("gbid1", f"d{durability}")
        link.attach("c1", src("a", durability), None)
        link.add_unsettled("m1")
    seen: list[LinkEvent] = []
    again = LinkRegistry(store=store, clock=FakeClock(), listeners=[seen.append])
    assert {l.link_name: (l.terminus, l.unsettled, l.owner) for l in again.links()} == {
        "d1": (src("a", 1), {}, None),
        "d2": (src("a", 2), {"m1": None}, None),
    }
    assert [(e.ev, e.op, e.count) for e in seen] == [("link.store", "load", 2)]
    out = again.get_sending_link("gbid1", "d2").attach("c9", src("a", 2), None)
    assert out.mode == "resume" and out.resend == (Delivery("m1", None),)
    out = again.get_sending_link("gbid1", "d1").attach("c9", src("a", 1), None)
    assert out.mode == "resume" and out.resend == ()  # the terminus without its deliveries
    assert again.get_sending_link("gbid1", "d0").attach("c9", src("a", 0), None).mode == "establish"


def test_a_callback_may_call_back_into_the_registry():
    reg, events = registry()
    link = reg.get_sending_link("gbid1", "cc1")

    def steal_back(event: LinkDetached) -> None:
        # What a paho client does: reconnect at once with the same client id.
        if event.connection_id == "conn1" and steal_back.count < 3:
            steal_back.count += 1
            link.attach("conn1", src(), None, on_stolen=steal_back)
    steal_back.count = 0

    link.attach("conn1", src(), None, on_stolen=steal_back)
    link.attach("conn2", src(), None)
    assert link.owner == "conn1"
    steals = [(e.from_connection, e.to_connection) for e in events if isinstance(e, LinkStolen)]
    assert steals == [("conn1", "conn2"), ("conn2", "conn1")]


# -- concurrency ----------------------------------------------------------------------


class GatedStore(DurableStore):
    """Blocks the first save after arm() until release(): a steal held in its turn."""

    def __init__(self) -> None:
        super().__init__()
        self.armed = False
        self.entered = threading.Event()
        self.gate = threading.Event()

    def save(self, record: StoredLink) -> None:
        if self.armed:
            self.armed = False
            self.entered.set()
            assert self.gate.wait(JOIN_S), "gate never opened"
        super().save(record)


def test_thieves_are_served_in_arrival_order():
    store = GatedStore()
    reg, events = registry(store=store)
    link = reg.get_sending_link("gbid1", "cc1")
    link.attach("c0", src("t0", 1), None)
    store.armed = True
    outcomes: dict[str, object] = {}

    def thief(n: int):
        def run():
            outcomes[f"c{n}"] = link.attach(f"c{n}", src(f"t{n}", 1), None)
        return run

    threads = [threading.Thread(target=thief(1), daemon=True)]
    threads[0].start()
    assert store.entered.wait(JOIN_S)  # c1 holds the turn, blocked in the store
    for n in range(2, 7):
        t = threading.Thread(target=thief(n), daemon=True)
        t.start()
        threads.append(t)
        assert link.wait_pending(n, JOIN_S)  # c<n> has queued behind the others
    store.gate.set()
    for t in threads:
        t.join(JOIN_S)
    assert not any(t.is_alive() for t in threads)
    steals = [(e.from_connection, e.to_connection) for e in events if isinstance(e, LinkStolen)]
    assert steals == [(f"c{n}", f"c{n + 1}") for n in range(6)]
    assert {c: o.stolen_from for c, o in outcomes.items()} == {f"c{n}": f"c{n - 1}" for n in range(1, 7)}
    assert link.owner == "c6" and link.terminus == src("t6", 1) and link.pending() == 0


def test_concurrent_thieves_all_finish_with_one_owner():
    reg, events = registry(store=DurableStore())
    link = reg.get_sending_link("gbid1", "cc1")
    told: dict[str, int] = {}
    lock = threading.Lock()

    def on_stolen(event: LinkDetached) -> None:
        with lock:
            told[event.connection_id] = told.get(event.connection_id, 0) + 1
        link.detach(event.connection_id)  # the victim's own detach: ignored

    barrier = threading.Barrier(8, timeout=JOIN_S)

    def thief(n: int):
        def run():
            barrier.wait()
            for i in range(25):
                out = link.attach(f"c{n}", src(f"t{n}", 1 + i % 2), None, on_stolen=on_stolen)
                # resume: a late on_stolen detached the thief that had taken the link back
                assert out.ok and out.mode in ("establish", "steal", "reattach", "resume")
        return run

    assert run_threads([thief(n) for n in range(8)]) == []
    # Replaying the steal events gives an unbroken chain of owners ending at the owner.
    owner = None
    for e in events:
        if isinstance(e, LinkAttached):
            owner = e.connection_id
        elif isinstance(e, LinkStolen):
            assert e.from_connection == owner
    assert owner == link.owner
    assert sum(told.values()) == sum(isinstance(e, LinkStolen) for e in events)
    assert link.pending() == 0


class BarrierStore(DurableStore):
    """Each save waits for the other thread's save: both steals are in their turn at once."""

    def __init__(self) -> None:
        super().__init__()
        self.barrier: threading.Barrier | None = None

    def save(self, record: StoredLink) -> None:
        if self.barrier is not None:
            self.barrier.wait()
        super().save(record)


def test_two_connections_stealing_each_others_links_never_deadlock():
    store = BarrierStore()
    reg, events = registry(store=store)
    for i in range(150):
        foo = reg.get_sending_link("gbid1", f"foo{i}")
        bar = reg.get_receiving_link("gbid1", f"bar{i}")
        notified = {"A": threading.Event(), "B": threading.Event()}

        def on_stolen(event: LinkDetached) -> None:
            notified[event.connection_id].set()
            reg.find_link(event.key.role, event.key.remote_container_id,
                          event.key.link_name).detach(event.connection_id)

        store.barrier = None
        foo.attach("A", src("foo", 1), None, on_stolen=on_stolen)
        bar.attach("B", None, src("bar", 1), on_stolen=on_stolen)
        store.barrier = threading.Barrier(2, timeout=JOIN_S)
        results: dict[str, object] = {}

        def a_steals_bar():
            results["A"] = bar.attach("A", None, src("bar-a", 1))

        def b_steals_foo():
            results["B"] = foo.attach("B", src("foo-b", 1), None)

        assert run_threads([a_steals_bar, b_steals_foo]) == []
        assert results["A"].mode == results["B"].mode == "steal"
        assert (foo.owner, bar.owner) == ("B", "A")
        assert notified["A"].wait(JOIN_S) and notified["B"].wait(JOIN_S)
    assert sum(isinstance(e, LinkStolen) for e in events) == 300


# -- random sequences -----------------------------------------------------------------

CONNS = ("c0", "c1", "c2")
NAMES = ("n0", "n1")


class OwnershipMachine(RuleBasedStateMachine):
    """Connections track what they believe they own from outcomes and on_stolen alone;
    at most one believes it owns a key, and it is the registry's owner."""

    def __init__(self) -> None:
        super().__init__()
        self.clock = FakeClock(0)
        self.store = DurableStore()
        self.reg = LinkRegistry(store=self.store, clock=self.clock, detached_timeout_ms=50)
        self.owns: dict[str, set[tuple[str, str]]] = {c: set() for c in CONNS}

    def link(self, role: str, name: str):
        get = self.reg.get_sending_link if role == "sending" else self.reg.get_receiving_link
        return get("gbid1", name)

    def on_stolen(self, event: LinkDetached) -> None:
        key = (event.key.role, event.key.link_name)
        assert key in self.owns[event.connection_id]
        self.owns[event.connection_id].discard(key)

    @rule(role=st.sampled_from(["sending", "receiving"]), name=st.sampled_from(NAMES),
          conn=st.sampled_from(CONNS), durability=st.integers(0, 2), null=st.booleans(),
          peer=st.none() | st.dictionaries(st.sampled_from(["m0", "m1", "m2"]),
                                          st.sampled_from([None, "received", "accepted"])))
    def attach(self, role, name, conn, durability, null, peer):
        link = self.link(role, name)
        terminus = None if null else Terminus(f"{name}-{conn}", durability)
        before = link.owner
        out = link.attach(conn, *((terminus, None) if role == "sending" else (None, terminus)),
                          unsettled=peer, on_stolen=self.on_stolen)
        if out.ok:
            self.owns[conn].add((role, name))
            assert out.stolen_from == (before if before not in (None, conn) else None)
        else:
            assert null and out.error.condition == ERR_NOT_FOUND and link.owner == before

    @rule(role=st.sampled_from(["sending", "receiving"]), name=st.sampled_from(NAMES),
          conn=st.sampled_from(CONNS), closed=st.booleans())
    def detach(self, role, name, conn, closed):
        out = self.link(role, name).detach(conn, closed=closed)
        assert out.detached == ((role, name) in self.owns[conn])
        self.owns[conn].discard((role, name))

    @rule(role=st.sampled_from(["sending", "receiving"]), name=st.sampled_from(NAMES),
          tag=st.sampled_from(["m0", "m1", "m2"]), settle=st.booleans())
    def delivery(self, role, name, tag, settle):
        link = self.link(role, name)
        if settle:
            link.settle(tag)
            assert tag not in link.unsettled
        elif link.owner is None:
            with pytest.raises(LinkStateError):
                link.add_unsettled(tag)
        else:
            link.add_unsettled(tag, "received")

    @rule(ms=st.integers(0, 100))
    def purge(self, ms):
        self.clock.advance(ms)
        for link in self.reg.purge_expired(self.clock()):
            assert link.owner is None

    @rule()
    def restart(self):
        # A crash: connections are gone, the store is what is left.
        before = {(l.role, l.link_name): (l.terminus, l.unsettled) for l in self.reg.links()
                  if l.terminus is not None and l.terminus.durability > 0}
        self.reg = LinkRegistry(store=self.store, clock=self.clock, detached_timeout_ms=50)
        self.owns = {c: set() for c in CONNS}
        after = {(l.role, l.link_name): (l.terminus, l.unsettled) for l in self.reg.links()}
        assert after == {k: (t, u if t.durability == 2 else {}) for k, (t, u) in before.items()}

    @invariant()
    def one_owner_per_key(self):
        for role in ("sending", "receiving"):
            for name in NAMES:
                believers = [c for c in CONNS if (role, name) in self.owns[c]]
                assert len(believers) <= 1
                link = self.reg.find_link(role, "gbid1", name)
                owner = None if link is None else link.owner
                assert owner == (believers[0] if believers else None)


TestOwnership = OwnershipMachine.TestCase
TestOwnership.settings = settings(max_examples=150, stateful_step_count=40, deadline=None,
                                  suppress_health_check=[HealthCheck.too_slow])


