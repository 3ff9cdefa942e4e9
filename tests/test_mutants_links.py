"""The rules of joynr_sim/core/links its other unit tests left unchecked (make mutate): the
order a turn serves its waiting operations in (the thief queue, and the last-comer lock of
the links:no-thief-queue variant), what a reopened registry keeps, and its listeners."""

from __future__ import annotations

import dataclasses
import threading
import time

import pytest

from joynr_sim.core.links import (
    ERR_INTERNAL,
    ERR_NOT_FOUND,
    ERR_RESOURCE_LOCKED,
    AttachOutcome,
    DetachOutcome,
    LinkAttached,
    LinkDetached,
    LinkError,
    LinkErrorCondition,
    LinkExpired,
    LinkRecovered,
    LinkRegistry,
    LinkStored,
    LinkStoreError,
    StoredLink,
    Terminus,
)
from joynr_sim.core.links.model import (
    ERR_STOLEN,
    ESTABLISH,
    REATTACH,
    RECOVER,
    REJECT,
    validate_connection_id,
    validate_container_id,
    validate_delivery_state,
    validate_delivery_tag,
    validate_link_name,
    validate_mqtt_client_id,
)
from joynr_sim.core.links.registry import wall_clock_ms
from joynr_sim.core.links.turn import LastComerTurn, Turn
from joynr_sim.core.links.variants import (
    NO_DETACHED_TIMEOUT,
    NO_RECOVER,
    NO_THIEF_QUEUE,
    STEAL_REFUSED,
    UNCAPPED_DURABILITY,
)
from joynr_sim.store.link_store import MemoryLinkStore
from test_links import DurableStore, FailingStore, FakeClock, FindFails, registry, src

JOIN_S = 5.0  # bound on every wait: a lost wake-up fails the test instead of hanging it


def served_order(turn, comers: int) -> list[int]:
    """Hold the turn, let ``comers`` threads queue for it one after another, release it:
    the order they got it in."""
    order: list[int] = []

    def comer(n: int) -> None:
        with turn:
            order.append(n)

    threads = []
    with turn:
        assert turn.pending() == 1
        for n in range(comers):
            t = threading.Thread(target=comer, args=(n,), daemon=True)
            t.start()
            threads.append(t)
            assert turn.wait_pending(n + 2, JOIN_S)  # n + 1 waiting behind the holder
    for t in threads:
        t.join(JOIN_S)
        assert not t.is_alive()
    assert turn.pending() == 0
    return order


def test_the_thief_queue_serves_waiting_operations_in_arrival_order() -> None:
    assert served_order(Turn(), 3) == [0, 1, 2]


def test_without_the_thief_queue_the_last_comer_goes_first() -> None:
    assert served_order(LastComerTurn(), 3) == [2, 1, 0]


def test_a_free_last_comer_turn_is_taken_at_once_and_released() -> None:
    turn = LastComerTurn()
    assert turn.pending() == 0
    with turn:
        assert turn.pending() == 1
    with turn:
        assert turn.pending() == 1
    assert turn.pending() == 0
    assert turn.wait_pending(0, 0.01) and not turn.wait_pending(1, 0.01)


def test_a_registry_of_the_variant_uses_the_last_comer_turn() -> None:
    link = LinkRegistry(variant=NO_THIEF_QUEUE).get_sending_link("peer", "link1")
    assert served_order(link._turn, 2) == [1, 0]
    link = LinkRegistry().get_sending_link("peer", "link1")
    assert served_order(link._turn, 2) == [0, 1]


def test_a_link_waits_for_operations_pending_with_a_timeout() -> None:
    link = LinkRegistry().get_sending_link("peer", "link1")
    started = time.monotonic()
    assert link.wait_pending(1, 0.05) is False
    assert time.monotonic() - started >= 0.04


def test_a_reopened_registry_keeps_the_settings_and_the_store() -> None:
    store = MemoryLinkStore()

    def names(value, field):
        return str(value).upper()

    reg = LinkRegistry(store=store, clock=lambda: 5, detached_timeout_ms=7, container_id="cc9",
                       link_name_validator=names, holder="proc1", variant=NO_DETACHED_TIMEOUT)
    again = reg.reopen()
    assert (again.store, again.detached_timeout_ms, again.container_id, again.holder, again.variant) == (
        store, 7, "cc9", "proc1", NO_DETACHED_TIMEOUT)
    assert again.get_sending_link("peer", "abc").link_name == "ABC"
    assert reg.reopen(holder="proc2").holder == "proc2"


def test_a_removed_listener_hears_nothing_more_and_removing_twice_is_harmless() -> None:
    heard: list = []
    reg = LinkRegistry()
    reg.add_listener(heard.append)
    reg.remove_listener(heard.append)
    reg.remove_listener(heard.append)
    reg.remove_listener(print)
    assert reg._listeners == []


def test_the_wall_clock_is_whole_epoch_milliseconds() -> None:
    before = time.time_ns() // 1_000_000
    now = wall_clock_ms()
    assert isinstance(now, int) and before <= now <= time.time_ns() // 1_000_000


@pytest.mark.parametrize("variant", ["links:nonsense", 1])
def test_an_unknown_variant_is_refused(variant) -> None:
    with pytest.raises(LinkError):
        LinkRegistry(variant=variant)


def test_an_unknown_variant_names_the_field_and_the_value() -> None:
    with pytest.raises(LinkError) as info:
        LinkRegistry(variant="links:nonsense")
    assert (info.value.field, info.value.value) == ("variant", "links:nonsense")
    assert LinkRegistry(variant=NO_THIEF_QUEUE).variant == NO_THIEF_QUEUE


@pytest.mark.parametrize("now", ["soon", True, 1.5])
def test_purge_expired_takes_epoch_ms_as_int_only(now) -> None:
    with pytest.raises(LinkError) as info:
        LinkRegistry(detached_timeout_ms=10).purge_expired(now)
    assert (info.value.field, info.value.value) == ("now_ms", now)


@pytest.mark.parametrize("name, strict", [("a" * 24, True), ("has-dash", True), ("nul\x00", False)])
def test_an_mqtt_client_id_link_name_is_refused_naming_the_value(name, strict) -> None:
    with pytest.raises(LinkError) as info:
        validate_mqtt_client_id(name, "link_name", strict=strict)
    assert (info.value.field, info.value.value) == ("link_name", name)
    assert validate_mqtt_client_id("abc123", "link_name", strict=strict) == "abc123"


def test_a_link_whose_record_cannot_be_deleted_is_not_purged_and_the_failure_is_told() -> None:
    store = FailingStore()
    reg, events = registry(store=store, clock=FakeClock(), detached_timeout_ms=500)
    link = reg.get_sending_link("gbid1", "old")
    link.attach("conn1", src("a", 1), None)
    link.detach("conn1")  # detached at the clock's start
    store.fail = True
    assert reg.purge_expired(10**9) == []
    assert not link.removed and reg.links() == [link]
    assert [(e.ev, getattr(e, "ok", None)) for e in events[-1:]] == [("link.store", False)]
    store.fail = False
    assert reg.purge_expired(10**9) == [link] and link.removed


def _link() -> object:
    return LinkRegistry().get_sending_link("peer", "link1")


class _NoDurability(MemoryLinkStore):
    max_durability = 3


@pytest.mark.parametrize("make, field, value", [
    (lambda: LinkRegistry(detached_timeout_ms=-1), "detached_timeout_ms", -1),
    (lambda: LinkRegistry(detached_timeout_ms=True), "detached_timeout_ms", True),
    (lambda: LinkRegistry(clock=5), "clock", 5),
    (lambda: LinkRegistry(holder=""), "holder", ""),
    (lambda: LinkRegistry(container_id=""), "container_id", ""),
    (lambda: LinkRegistry(store=_NoDurability()), "store.max_durability", 3),
    (lambda: _link().detach("conn1", closed="yes"), "closed", "yes"),
    (lambda: _link().detach("conn1", error=5), "error", 5),
    (lambda: Terminus("a", 3), "terminus.durability", 3),
    (lambda: Terminus("a", True), "terminus.durability", True),
    (lambda: Terminus("a", 0, (("k",),)), "terminus.properties", (("k",),)),
    (lambda: Terminus("a", 0, (("k", 1),)), "terminus.properties", (("k", 1),)),
])
def test_refused_input_names_its_field_and_value(make, field, value) -> None:
    with pytest.raises(LinkError) as info:
        make()
    assert (info.value.field, info.value.value) == (field, value)


def test_a_terminus_keeps_its_durability_as_an_int_and_its_properties_sorted() -> None:
    terminus = Terminus("a", 2, {"b": "2", "a": "1"})
    assert terminus.durability == 2 and type(terminus.durability) is int
    assert terminus.properties == (("a", "1"), ("b", "2"))


def test_a_detach_by_a_connection_that_does_not_own_the_link_changes_nothing() -> None:
    link = _link()
    link.attach("conn1", src("a", 0), None)
    outcome = link.detach("conn2", closed=True)
    assert (outcome.connection_id, outcome.detached, outcome.closed) == ("conn2", False, True)
    assert link.owner == "conn1"


def test_a_detach_with_an_error_tells_it_in_its_event() -> None:
    reg, events = registry()
    link = reg.get_sending_link("peer", "link1")
    link.attach("conn1", src("a", 0), None)
    assert link.detach("conn1", error="amqp:internal-error").detached
    detached = [e for e in events if e.ev == "link.detach"]
    assert [(e.connection_id, e.closed, e.error) for e in detached] == [("conn1", False, "amqp:internal-error")]


def test_every_event_of_a_link_names_the_link_and_the_time_it_happened() -> None:
    clock = FakeClock(1_000)
    store = FailingStore()
    reg, events = registry(store=store, clock=clock)
    link = reg.get_sending_link("gbid1", "cc1")
    link.attach("conn1", src("a", 2), None)
    link.add_unsettled("m1")
    clock.advance(10)
    link.attach("conn2", src("a", 2), None, unsettled={"m1": None})  # a steal, resumed
    clock.advance(10)
    link.detach("conn2", error="amqp:internal-error")
    clock.advance(10)
    link.attach("conn3", None, None)  # recovered by link name
    clock.advance(10)
    store.fail = True
    link.attach("conn4", src("b", 2), None)  # the store fails: rejected
    assert events and all(e.key == link.key for e in events)
    assert [(e.ev, e.ts, getattr(e, "connection_id", None)) for e in events if e.ev != "link.store"] == [
        ("link.attach", 1_000, "conn1"),
        ("link.detach", 1_010, "conn1"), ("link.steal", 1_010, None), ("link.attach", 1_010, "conn2"),
        ("link.resume", 1_010, "conn2"),
        ("link.detach", 1_020, "conn2"),
        ("link.attach", 1_030, "conn3"), ("link.resume", 1_030, "conn3"), ("link.recover", 1_030, "conn3"),
        ("link.attach", 1_040, "conn4"),
    ]
    assert [(e.mode, e.durability, e.error) for e in events if e.ev == "link.attach"] == [
        ("establish", 2, None), ("steal", 2, None), ("recover", 2, None), ("reject", 2, "amqp:internal-error")]
    assert [(e.closed, e.error, e.stolen_by) for e in events if e.ev == "link.detach"] == [
        (False, "amqp:link:stolen", "conn2"), (False, "amqp:internal-error", None)]
    assert [(e.op, e.ok, e.ts) for e in events if e.ev == "link.store"][-1] == ("save", False, 1_040)


def test_a_registry_tells_what_it_loaded_and_a_load_that_failed() -> None:
    store = FailingStore()
    first = LinkRegistry(store=store, clock=FakeClock(1_000))
    first.get_sending_link("gbid1", "kept").attach("conn1", src("a", 2), None)
    first.get_sending_link("gbid1", "none").attach("conn1", src("b", 0), None)
    first.get_sending_link("gbid1", "suspended").attach("conn1", src("c", 1), None)
    first.get_sending_link("gbid1", "suspended").detach("conn1")
    heard: list = []
    again = LinkRegistry(store=store, clock=FakeClock(2_000), listeners=(heard.append,))
    [loaded] = heard
    assert (loaded.ev, loaded.ts, loaded.key, loaded.op, loaded.ok, loaded.error, loaded.count) == (
        "link.store", 2_000, None, "load", True, None, 2)
    assert sorted(link.link_name for link in again.links()) == ["kept", "suspended"]

    class Unreadable(MemoryLinkStore):
        def load(self):
            raise LinkStoreError("unreadable")

    heard.clear()
    with pytest.raises(LinkStoreError):
        LinkRegistry(store=Unreadable(), clock=FakeClock(3_000), listeners=(heard.append,))
    [failed] = heard
    assert (failed.ts, failed.key, failed.op, failed.ok, failed.error, failed.count) == (
        3_000, None, "load", False, "unreadable", 0)


# -- what a link's operations leave behind, exactly: outcomes, events and state --------------


def test_an_attach_the_store_cannot_read_for_is_rejected_with_what_failed() -> None:
    store = FindFails()
    reg, events = registry(store=store, clock=FakeClock(1_000))
    link = reg.get_sending_link("gbid1", "cc1")
    store.unreadable = True
    out = link.attach("conn1", src("a", 1), None)
    key = link.key
    assert out == AttachOutcome(REJECT, key, "conn1", None,
                                error=LinkErrorCondition(ERR_INTERNAL, "link store: disk gone"))
    assert events == [LinkStored(1_000, key, "find", None, False, "disk gone"),
                      LinkAttached(1_000, key, "conn1", REJECT, None, ERR_INTERNAL)]


@pytest.mark.parametrize("variant, description", [
    (None, "no terminus to recover for link 'cc1'"),
    (NO_RECOVER, "no terminus given for link 'cc1', and termini are not looked up by link name"),
])
def test_a_recover_of_nothing_is_rejected_with_why(variant, description) -> None:
    reg, _ = registry(store=DurableStore(), variant=variant)
    link = reg.get_sending_link("gbid1", "cc1")
    if variant == NO_RECOVER:
        link.attach("conn0", src("a", 2), None)
    out = link.attach("conn1", None, None)
    assert (out.mode, out.key, out.connection_id, out.error) == (
        REJECT, link.key, "conn1", LinkErrorCondition(ERR_NOT_FOUND, description))


def test_a_steal_refused_says_the_link_is_locked() -> None:
    reg, _ = registry(variant=STEAL_REFUSED)
    link = reg.get_sending_link("gbid1", "cc1")
    link.attach("conn1", src("a"), None)
    out = link.attach("conn2", src("a"), None)
    assert out.error == LinkErrorCondition(ERR_RESOURCE_LOCKED, "link 'cc1' is attached on another connection")


def test_a_detach_the_store_cannot_write_for_keeps_the_link_suspended_and_says_why() -> None:
    store = FailingStore()
    reg, _ = registry(store=store)
    link = reg.get_sending_link("gbid1", "cc1")
    link.attach("conn1", src("a", 2), None, on_stolen=print)
    store.fail = True
    out = link.detach("conn1", closed=True)
    assert out == DetachOutcome(link.key, "conn1", True, False,
                                LinkErrorCondition(ERR_INTERNAL, "link store: disk full"))
    assert (link.owner, link.removed, link.terminus) == (None, False, src("a", 2))
    assert reg.links() == [link] and link._on_stolen is None
    store.fail = False
    assert link.detach("conn1", closed=True).detached is False  # not attached any more
    assert link.attach("conn2", None, None).mode == RECOVER


def test_a_closed_link_holds_nothing_and_its_outcome_names_it() -> None:
    reg, _ = registry(store=DurableStore())
    link = reg.get_sending_link("gbid1", "cc1")
    link.attach("conn1", src("a", 2), Terminus("peer"))
    link.add_unsettled("m1")
    out = link.detach("conn1", closed=True)
    assert out == DetachOutcome(link.key, "conn1", True, True, None)
    assert (link.terminus, link.source, link.target, link.unsettled, link.removed) == (None, None, None, {}, True)
    assert link.detach("conn1") == DetachOutcome(link.key, "conn1", False, False)


def test_an_attach_on_a_closed_link_object_goes_whole_to_the_new_link() -> None:
    reg, _ = registry(store=DurableStore())
    old = reg.get_sending_link("gbid1", "cc1")
    old.attach("conn1", src("a", 2), None)
    old.add_unsettled("m1")
    old.detach("conn1", closed=True)
    told: list = []
    out = old.attach("conn2", src("b", 2), Terminus("peer"), {"m9": None}, told.append)
    new = reg.get_sending_link("gbid1", "cc1")
    assert new is not old and (out.mode, out.peer_only) == (ESTABLISH, ("m9",))
    assert (new.owner, new.target) == ("conn2", Terminus("peer"))
    new.attach("conn3", src("b", 2), None)
    assert [e.stolen_by for e in told] == ["conn3"]
    gone = reg.get_sending_link("gbid1", "cc2")
    gone.attach("conn1", src("a"), None)
    gone.detach("conn1", closed=True)
    assert gone.attach("conn4", None, None, peer_kept_state=False).mode == REJECT


def test_the_remote_terminus_is_kept_over_an_attach_that_gives_none_and_reset_on_establish() -> None:
    reg, _ = registry(store=DurableStore())
    link = reg.get_sending_link("gbid1", "cc1")
    assert (link.source, link.target, link.detached_since_ms) == (None, None, 1_000)
    link.attach("conn1", src("a", 2), Terminus("peer1"))
    assert link.target == Terminus("peer1") and link.detached_since_ms is None
    link.detach("conn1")
    link.attach("conn2", src("a", 2), None)  # resumed: the peer gave no target
    assert link.target == Terminus("peer1")
    link.attach("conn3", src("a", 2), Terminus("peer3"))  # stolen, with a target
    assert link.target == Terminus("peer3")
    link.detach("conn3")
    link.attach("conn4", src("a", 2), None, peer_kept_state=False)  # established anew
    assert link.target is None


def test_a_recover_tells_the_durability_it_recovered_and_only_a_steal_names_a_victim() -> None:
    reg, events = registry(store=DurableStore(), clock=FakeClock(1_000))
    link = reg.get_sending_link("gbid1", "cc1")
    link.attach("conn1", src("a", 1), None)
    again = link.attach("conn1", src("a", 1), None)
    assert (again.mode, again.stolen_from, again.connection_id, again.key) == (REATTACH, None, "conn1", link.key)
    link.detach("conn1")
    link.attach("conn2", None, None)
    assert events[-1] == LinkRecovered(1_000, link.key, "conn2", 1)


@pytest.mark.parametrize("call, field", [
    (lambda link: link.attach("conn1", "a", None), "source"),
    (lambda link: link.attach("conn1", None, "a"), "target"),
    (lambda link: link.attach("conn1", src(), None, on_stolen="x"), "on_stolen"),
    (lambda link: link.attach("conn1", src(), None, peer_kept_state="x"), "peer_kept_state"),
    (lambda link: link.attach("conn1", src(), None, {"m1": None}, peer_kept_state=False), "unsettled"),
    (lambda link: link.add_unsettled("m1"), "link"),
    (lambda link: link.attach("", src(), None), "connection_id"),
    (lambda link: link.add_unsettled(""), "tag"),
    (lambda link: link.add_unsettled("m1", "bogus"), "state"),
    (lambda link: link.attach("conn1", src(), None, unsettled=["m1"]), "unsettled"),
    (lambda link: Terminus(""), "terminus.address"),
    (lambda link: Terminus(b"\xff"), "terminus.address"),
    (lambda link: Terminus("\ud800"), "terminus.address"),
    (lambda link: Terminus(5), "terminus.address"),
])
def test_a_refused_operation_names_its_field_and_carries_the_value(call, field) -> None:
    link = LinkRegistry().get_sending_link("peer", "link1")
    with pytest.raises(LinkError) as info:
        call(link)
    assert info.value.field == field and info.value.value is not None


def test_the_validators_name_their_default_fields() -> None:
    for validate, field in ((validate_connection_id, "connection_id"), (validate_container_id, "container_id"),
                            (validate_delivery_tag, "tag"), (validate_link_name, "link_name"),
                            (validate_delivery_state, "state")):
        with pytest.raises(LinkError) as info:
            validate(7)
        assert info.value.field == field
    with pytest.raises(LinkError) as info:
        LinkRegistry(container_id=7)
    assert info.value.field == "container_id"


def test_a_terminus_durability_given_as_a_float_is_kept_as_an_int() -> None:
    assert type(Terminus("a", 2.0).durability) is int


def test_a_fresh_link_is_not_removed_and_its_store_is_not_written_for_a_durability_it_cannot_keep() -> None:
    reg, events = registry(store=MemoryLinkStore())
    link = reg.get_sending_link("gbid1", "cc1")
    assert link.removed is False and link.pending() == 0
    link.attach("conn1", src("a"), None)
    link.detach("conn1", closed=True)
    assert [e.ev for e in events] == ["link.attach", "link.detach"]


# -- two holders on one store: what one registry learns of the other's changes -------------


def two_holders() -> tuple[DurableStore, tuple, tuple, FakeClock]:
    store = DurableStore()
    a_clock = FakeClock(1_000)
    return store, registry(store=store, holder="a", clock=a_clock), registry(
        store=store, holder="b", clock=FakeClock(5_000)), a_clock


def test_a_link_another_holder_stole_is_detached_here_with_who_took_it() -> None:
    store, (a, a_events), (b, _), a_clock = two_holders()
    mine = a.get_sending_link("gbid1", "cc1")
    mine.attach("a1", src("t", 1), None, on_stolen=print)
    mine.add_unsettled("m1")  # durability 1: memory holds the delivery, the store does not
    b.get_sending_link("gbid1", "cc1").attach("b1", src("t", 1), None)
    a_clock.advance(500)
    a.refresh()
    assert a_events[-1] == LinkDetached(1_500, mine.key, "a1", False, ERR_STOLEN, "b1")
    assert (mine.owner, mine.detached_since_ms, mine._on_stolen, mine.unsettled) == ("b1", None, None, {"m1": None})


def test_a_link_another_holder_closed_is_suspended_here_since_then() -> None:
    store, (a, a_events), (b, _), a_clock = two_holders()
    mine = a.get_sending_link("gbid1", "cc1")
    mine.attach("a1", src("t", 2), None)
    mine.add_unsettled("m1")
    theirs = b.get_sending_link("gbid1", "cc1")
    theirs.attach("b1", src("t", 2), None)
    mine.attach("a1", src("t", 2), None)  # steals it back: learns of b1 first
    theirs.attach("b2", src("t", 2), None)
    theirs.detach("b2", closed=True)
    a_clock.advance(500)
    assert mine.detach("a1") == DetachOutcome(mine.key, "a1", False, False)
    assert a_events[-1] == LinkDetached(1_500, mine.key, "a1", False, None, None)
    assert (mine.owner, mine.terminus, mine.unsettled, mine.detached_since_ms) == (None, None, {}, 1_500)


def test_a_link_taken_back_and_closed_leaves_no_record() -> None:
    store, (a, _), (b, _), _ = two_holders()
    mine = a.get_sending_link("gbid1", "cc1")
    mine.attach("a1", src("t", 1), None)
    b.get_sending_link("gbid1", "cc1").attach("b1", src("t", 1), None)
    assert mine.attach("a2", src("t", 1), None).stolen_from == "b1"
    mine.detach("a2", closed=True)
    assert store.find("sending", "gbid1", "cc1") is None


def test_a_record_another_holder_suspended_leaves_a_suspended_link_here_as_it_was() -> None:
    store = DurableStore()
    a, a_events = registry(store=store, holder="a", detached_timeout_ms=10_000)
    b, _ = registry(store=store, holder="b", clock=FakeClock(5_000))
    mine = a.get_sending_link("gbid1", "cc1")
    mine.attach("a1", src("t", 1), None)
    mine.detach("a1")  # suspended at 1_000
    theirs = b.get_sending_link("gbid1", "cc1")
    theirs.attach("b1", src("t2", 1), None)
    theirs.detach("b1")
    heard = len(a_events)
    assert a.purge_expired(1_500) == []
    assert a_events[heard:] == [] and mine.detached_since_ms == 1_000 and mine.terminus == src("t2", 1)


def test_a_changed_record_that_names_this_registrys_connection_keeps_it_the_owner() -> None:
    store, (a, a_events), _, _ = two_holders()
    mine = a.get_sending_link("gbid1", "cc1")
    mine.attach("a1", src("t", 1), None)
    record = store.find("sending", "gbid1", "cc1")
    store.save(dataclasses.replace(record, terminus=src("t2", 1)))  # written by another process of "a"
    out = mine.attach("a1", src("t", 1), None)
    assert out.mode == REATTACH and [e.ev for e in a_events if e.ev == "link.detach"] == []


def test_a_closed_link_object_attaching_again_establishes_when_the_peer_kept_nothing() -> None:
    store, (a, _), (b, _), _ = two_holders()
    old = a.get_sending_link("gbid1", "cc1")
    old.attach("a1", src("t", 1), None)
    old.detach("a1", closed=True)
    b.get_sending_link("gbid1", "cc1").attach("b1", src("t", 1), None)
    b.get_sending_link("gbid1", "cc1").detach("b1")
    assert old.attach("a2", src("t", 1), None, peer_kept_state=False).mode == ESTABLISH


def test_refresh_leaves_a_suspended_link_alone() -> None:
    store, (a, a_events), (b, _), _ = two_holders()
    mine = a.get_sending_link("gbid1", "cc1")
    mine.attach("a1", src("t", 1), None)
    mine.detach("a1")
    b.get_sending_link("gbid1", "cc1").attach("b1", src("t", 1), None)
    heard = len(a_events)
    a.refresh()
    assert mine.owner is None and a_events[heard:] == []


def test_a_loaded_link_a_live_connection_of_another_holder_has_is_attached_and_stolen_cleanly(caplog) -> None:
    store, (a, _), (b, _), _ = two_holders()
    b.get_sending_link("gbid1", "cc1").attach("b1", src("t", 1), None)
    again = a.reopen()
    link = again.get_sending_link("gbid1", "cc1")
    assert (link.owner, link.detached_since_ms) == ("b1", None)
    assert link.attach("a1", src("t", 1), None).stolen_from == "b1"
    assert [r for r in caplog.records if r.levelname == "ERROR"] == []


def test_a_registry_loads_every_record_it_can_keep_past_one_it_cannot() -> None:
    class Listed(MemoryLinkStore):
        max_durability = 2

        def load(self):
            return [StoredLink("sending", "gbid1", "none", src("n", 0), (), None, None),
                    StoredLink("sending", "gbid1", "kept", src("k", 2), (("m1", None),), None, None)]

    reg = LinkRegistry(store=Listed(), clock=FakeClock(1_000))
    [link] = reg.links()
    assert (link.link_name, link.unsettled, link.detached_since_ms) == ("kept", {"m1": None}, 1_000)


def test_the_store_keeps_deliveries_of_durability_two_only() -> None:
    store = DurableStore()
    reg, _ = registry(store=store)
    one = reg.get_sending_link("gbid1", "one")
    one.attach("conn1", src("a", 1), None)
    one.add_unsettled("m1")
    one.detach("conn1")
    assert store.find("sending", "gbid1", "one").unsettled == ()


def test_a_failed_write_tells_the_durability_and_the_error() -> None:
    store = FailingStore()
    reg, events = registry(store=store, clock=FakeClock(1_000))
    link = reg.get_sending_link("gbid1", "cc1")
    store.fail = True
    link.attach("conn1", src("a", 2), None)
    assert LinkStored(1_000, link.key, "save", 2, False, "disk full") in events


def test_a_detach_the_store_cannot_read_for_still_detaches_and_tells_when() -> None:
    store = FindFails()
    clock = FakeClock(1_000)
    reg, events = registry(store=store, clock=clock)
    link = reg.get_sending_link("gbid1", "cc1")
    link.attach("conn1", src("a", 1), None)
    store.unreadable = True
    clock.advance(5)
    heard = len(events)
    assert link.detach("conn1").detached
    assert events[heard] == LinkStored(1_005, link.key, "find", None, False, "disk gone")


def test_a_purge_the_store_cannot_read_for_purges_nothing_and_tells_when() -> None:
    store = FindFails()
    reg, events = registry(store=store, clock=FakeClock(1_000), detached_timeout_ms=10)
    link = reg.get_sending_link("gbid1", "cc1")
    link.attach("conn1", src("a", 1), None)
    link.detach("conn1")
    store.unreadable = True
    assert reg.purge_expired(2_000) == [] and not link.removed
    assert events[-1] == LinkStored(2_000, link.key, "find", None, False, "disk gone")
    store.unreadable = False
    assert reg.purge_expired(2_000) == [link]
    assert events[-2:] == [LinkStored(2_000, link.key, "delete", None, True), LinkExpired(2_000, link.key, 1_000, 10)]


def test_a_registry_without_a_store_keeps_an_uncapped_durability_in_memory() -> None:
    reg, _ = registry(variant=UNCAPPED_DURABILITY)
    link = reg.get_sending_link("gbid1", "cc1")
    assert link.attach("conn1", src("a", 2), None).terminus.durability == 2


def test_a_detached_timeout_of_zero_is_allowed_and_a_store_must_say_its_durability() -> None:
    assert LinkRegistry(detached_timeout_ms=0).detached_timeout_ms == 0
    with pytest.raises(LinkError) as info:
        LinkRegistry(store=object())
    assert (info.value.field, info.value.value) == ("store.max_durability", None)


def test_events_a_listener_causes_are_delivered_after_it_returns_and_an_interrupt_stops_no_later_delivery() -> None:
    reg = LinkRegistry()
    seen: list[str] = []

    def listener(event) -> None:
        seen.append(f"enter {event.connection_id}")
        if event.connection_id == "conn1":
            reg.get_sending_link("gbid1", "other").attach("conn2", src("b"), None)
        seen.append(f"exit {event.connection_id}")

    reg.add_listener(listener)
    reg.get_sending_link("gbid1", "cc1").attach("conn1", src("a"), None)
    assert seen == ["enter conn1", "exit conn1", "enter conn2", "exit conn2"]
    reg.remove_listener(listener)

    def interrupted(event) -> None:
        raise KeyboardInterrupt

    reg.add_listener(interrupted)
    with pytest.raises(KeyboardInterrupt):
        reg.get_sending_link("gbid1", "cc3").attach("conn3", src("a"), None)
    reg.remove_listener(interrupted)
    heard: list = []
    reg.add_listener(heard.append)
    reg.get_sending_link("gbid1", "cc4").attach("conn4", src("a"), None)
    assert [e.connection_id for e in heard] == ["conn4"]


class CountingCondition:
    """A condition that counts its notify_all calls."""

    def __init__(self, cond) -> None:
        self._cond, self.notified = cond, 0

    def __enter__(self):
        return self._cond.__enter__()

    def __exit__(self, *exc):
        return self._cond.__exit__(*exc)

    def wait(self, timeout=None):
        return self._cond.wait(timeout)

    def wait_for(self, predicate, timeout=None):
        return self._cond.wait_for(predicate, timeout)

    def notify_all(self) -> None:
        self.notified += 1
        self._cond.notify_all()


def test_a_turn_nobody_waits_for_notifies_nobody_after_others_waited() -> None:
    turn = Turn()
    served_order(turn, 3)
    turn.wait_pending(0, 0.01)
    turn.cond = CountingCondition(turn.cond)
    for _ in range(3):
        with turn:
            pass
    assert turn.cond.notified == 0


def test_a_turn_counts_what_is_pending_after_turns_were_served() -> None:
    turn = Turn()
    for _ in range(3):
        with turn:
            pass
    with turn:
        assert turn.wait_pending(1, 0.01) and not turn.wait_pending(2, 0.01)


def test_a_last_comer_turn_counts_its_holder_and_its_waiters() -> None:
    turn = LastComerTurn()
    seen: list[int] = []

    def comer() -> None:
        with turn:
            pass

    with turn:
        threads = [threading.Thread(target=comer, daemon=True) for _ in range(2)]
        for n, t in enumerate(threads):
            t.start()
            assert turn.wait_pending(n + 2, JOIN_S)
        seen.append(turn.pending())
    for t in threads:
        t.join(JOIN_S)
    assert seen == [3]
