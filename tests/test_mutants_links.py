"""The rules of joynr_sim/core/links its other unit tests left unchecked (make mutate): the
order a turn serves its waiting operations in (the thief queue, and the last-comer lock of
the links:no-thief-queue variant), what a reopened registry keeps, and its listeners."""

from __future__ import annotations

import threading
import time

import pytest

from joynr_sim.core.links import LinkError, LinkRegistry, LinkStoreError, Terminus
from joynr_sim.core.links.model import validate_mqtt_client_id
from joynr_sim.core.links.registry import wall_clock_ms
from joynr_sim.core.links.turn import LastComerTurn, Turn
from joynr_sim.core.links.variants import NO_DETACHED_TIMEOUT, NO_THIEF_QUEUE
from joynr_sim.store.link_store import MemoryLinkStore
from test_links import FailingStore, FakeClock, registry, src

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
