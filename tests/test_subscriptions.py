"""When a provider publishes and a consumer misses a publication, without a clock or a loop."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from joynr_sim.core.subscriptions import (
    ATTRIBUTE,
    BROADCAST,
    PublicationManager,
    SubscriptionError,
    SubscriptionManager,
    SubscriptionQos,
)

T0 = 1_000


def qos(kind: str = "on-change", **kw) -> SubscriptionQos:
    return SubscriptionQos(kind, **kw)


@pytest.mark.parametrize("bad, problem", [
    (qos("sometimes"), "qos kind"),
    (qos("periodic"), "period_ms"),
    (qos("on-change-keep-alive", min_interval_ms=50, max_interval_ms=10), "max_interval_ms"),
    (qos("periodic", period_ms=100, alert_after_interval_ms=50), "alert_after_interval_ms"),
    (qos("on-change", alert_after_interval_ms=50), "no interval to miss"),
    (qos(min_interval_ms=-1), "min_interval_ms"),
    (qos(expiry_date_ms=True), "expiry_date_ms"),
])
def test_a_bad_quality_of_service_is_refused_with_its_field_named(bad, problem) -> None:
    with pytest.raises(SubscriptionError, match=problem):
        bad.check()


def test_an_attribute_subscription_publishes_the_current_value_at_once() -> None:
    pm = PublicationManager()
    [first] = pm.add("s1", "proxy", "value", ATTRIBUTE, qos(), T0, current=7)
    assert (first.subscriber, first.name, first.value) == ("proxy", "value", 7)


def test_a_broadcast_subscription_publishes_only_what_is_fired() -> None:
    pm = PublicationManager()
    assert pm.add("s1", "proxy", "incremented", BROADCAST, qos(), T0) == []
    assert [p.value for p in pm.changed("incremented", 3, T0 + 1)] == [3]


def test_a_subscription_that_expired_before_it_started_is_refused() -> None:
    with pytest.raises(SubscriptionError, match="expired"):
        PublicationManager().add("s1", "proxy", "value", ATTRIBUTE, qos(expiry_date_ms=T0), T0)


def test_a_change_inside_the_minimum_interval_is_held_and_the_latest_value_published_when_it_ends() -> None:
    pm = PublicationManager()
    pm.add("s1", "proxy", "value", ATTRIBUTE, qos(min_interval_ms=100), T0, current=0)
    assert pm.changed("value", 1, T0 + 10) == []
    assert pm.changed("value", 2, T0 + 20) == []
    assert pm.next_due() == T0 + 100
    assert pm.tick(T0 + 99, {"value": 2}) == []
    assert [p.value for p in pm.tick(T0 + 100, {"value": 2})] == [2]


def test_a_stopped_or_expired_subscription_publishes_nothing() -> None:
    pm = PublicationManager()
    pm.add("s1", "proxy", "value", ATTRIBUTE, qos(expiry_date_ms=T0 + 50), T0)
    pm.add("s2", "proxy", "value", ATTRIBUTE, qos(), T0)
    assert pm.remove("s2") and not pm.remove("s2")
    assert pm.changed("value", 1, T0 + 50) == []
    assert pm.subscriptions() == {}


def test_a_periodic_attribute_subscription_ignores_changes_and_publishes_each_period() -> None:
    pm = PublicationManager()
    pm.add("s1", "proxy", "value", ATTRIBUTE, qos("periodic", period_ms=100), T0, current=0)
    assert pm.changed("value", 5, T0 + 30) == []
    assert [p.value for p in pm.tick(T0 + 100, {"value": 5})] == [5]


def drive(pm: PublicationManager, changes: list[tuple[int, int]], until: int) -> list[int]:
    """Feed changes at their times and tick whenever the manager says something is due:
    the times publications went out."""
    sent, value, now = [], 0, T0
    pending = sorted(changes)
    while True:
        due = pm.next_due()
        nxt = min([t for t, _ in pending[:1]] + ([due] if due is not None and due > now else []) + [until])
        now = nxt
        if pending and pending[0][0] == now:
            _, value = pending.pop(0)
            sent += [now for _ in pm.changed("value", value, now)]
        sent += [now for _ in pm.tick(now, {"value": value})]
        if now >= until and not pending:
            return sent


changes = st.lists(st.tuples(st.integers(T0 + 1, T0 + 5_000), st.integers(0, 9)), max_size=30,
                   unique_by=lambda c: c[0])


@given(changes, st.integers(1, 500))
def test_on_change_publications_keep_the_minimum_interval_and_the_last_change_is_published(chs, min_interval) -> None:
    pm = PublicationManager()
    initial = pm.add("s1", "proxy", "value", ATTRIBUTE, qos(min_interval_ms=min_interval), T0, current=0)
    sent = [T0] * len(initial) + drive(pm, chs, T0 + 6_000)
    assert all(b - a >= min_interval for a, b in zip(sent, sent[1:], strict=False))
    if chs:  # the last change is never swallowed: something went out at or after it
        assert sent[-1] >= max(t for t, _ in chs)


@given(changes, st.integers(1, 200), st.integers(1, 1_000))
def test_keep_alive_publications_never_leave_a_gap_longer_than_the_maximum_interval(chs, min_i, extra) -> None:
    max_i = min_i + extra
    pm = PublicationManager()
    pm.add("s1", "proxy", "value", ATTRIBUTE,
           qos("on-change-keep-alive", min_interval_ms=min_i, max_interval_ms=max_i), T0, current=0)
    sent = [T0] + drive(pm, chs, T0 + 6_000)
    assert all(b - a <= max_i for a, b in zip(sent, sent[1:], strict=False))
    assert all(b - a >= min_i for a, b in zip(sent, sent[1:], strict=False))


@given(st.integers(1, 1_000))
def test_a_periodic_subscription_publishes_once_per_period(period) -> None:
    pm = PublicationManager()
    pm.add("s1", "proxy", "value", ATTRIBUTE, qos("periodic", period_ms=period), T0, current=0)
    sent = [T0] + drive(pm, [], T0 + 10_000)
    assert len(sent) == 10_000 // period + 1


def test_a_consumer_is_alerted_of_each_missed_interval_and_told_when_it_expires() -> None:
    sm = SubscriptionManager()
    sm.register("s1", qos("periodic", period_ms=100, alert_after_interval_ms=150, expiry_date_ms=T0 + 1_000), T0)
    assert sm.received("s1", T0 + 100)
    assert sm.tick(T0 + 249) == ([], [])
    missed, _ = sm.tick(T0 + 250)
    assert [(m.subscription_id, m.since_ms) for m in missed] == [("s1", T0 + 100)]
    assert sm.next_due() == T0 + 400
    assert sm.counts("s1") == (1, 1)
    assert sm.tick(T0 + 1_000) == ([], ["s1"])
    assert not sm.received("s1", T0 + 1_001)
    assert sm.counts("s1") is None
