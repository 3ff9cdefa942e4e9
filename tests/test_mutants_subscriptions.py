"""The rules of joynr_sim/core/subscriptions.py its other unit tests left unchecked (make
mutate): the bounds of a quality of service, the edges of expiry and of the minimum interval,
and the consumer's counts of publications and alerts."""

from __future__ import annotations

import pytest

from joynr_sim.core.subscriptions import (
    ATTRIBUTE,
    BROADCAST,
    NO_EXPIRY,
    Missed,
    Publication,
    PublicationManager,
    SubscriptionError,
    SubscriptionManager,
    SubscriptionQos,
)

NOW = 1_000


def qos(kind: str = "periodic", **kw) -> SubscriptionQos:
    if kind == "periodic":
        kw.setdefault("period_ms", 100)
    if kind == "on-change-keep-alive":
        kw.setdefault("max_interval_ms", 100)
    return SubscriptionQos(kind, **kw)


# -- quality of service ---------------------------------------------------------------------


@pytest.mark.parametrize("bad", [
    dict(kind="sometimes"),
    dict(kind="on-change", min_interval_ms=-1),
    dict(kind="on-change", publication_ttl_ms=True),
    dict(kind="on-change", expiry_date_ms=NO_EXPIRY + 1),
    dict(kind="on-change", max_interval_ms=1.0),
    dict(kind="periodic", period_ms=0),
    dict(kind="on-change-keep-alive", max_interval_ms=0),
    dict(kind="on-change-keep-alive", min_interval_ms=50, max_interval_ms=49),
    dict(kind="periodic", period_ms=100, alert_after_interval_ms=99),
    dict(kind="on-change-keep-alive", max_interval_ms=100, alert_after_interval_ms=99),
    dict(kind="on-change", alert_after_interval_ms=1),
])
def test_a_quality_of_service_out_of_joynrs_bounds_is_refused(bad) -> None:
    with pytest.raises(SubscriptionError):
        SubscriptionQos(**bad).check()


@pytest.mark.parametrize("good", [
    dict(kind="periodic", period_ms=1),
    dict(kind="on-change-keep-alive", max_interval_ms=1),
    dict(kind="on-change-keep-alive", min_interval_ms=50, max_interval_ms=50),
    dict(kind="periodic", period_ms=100, alert_after_interval_ms=100),
    dict(kind="on-change", expiry_date_ms=NO_EXPIRY, min_interval_ms=0, publication_ttl_ms=0),
])
def test_a_quality_of_service_at_joynrs_bounds_is_taken(good) -> None:
    q = SubscriptionQos(**good)
    assert q.check() is q


def test_the_interval_is_the_period_or_the_keep_alive() -> None:
    assert qos("periodic", period_ms=70).interval_ms == 70
    assert qos("on-change-keep-alive", max_interval_ms=80).interval_ms == 80
    assert qos("on-change", min_interval_ms=90).interval_ms == 0


# -- the provider side ----------------------------------------------------------------------


def test_an_attribute_subscription_publishes_its_current_value_at_once_with_its_ttl() -> None:
    pm = PublicationManager()
    out = pm.add("s1", "proxy", "speed", ATTRIBUTE, qos(publication_ttl_ms=500), NOW, current=42)
    assert out == [Publication("s1", "proxy", "speed", 42, 500)]
    assert pm.subscriptions() == {"s1": ("proxy", "speed")}
    assert pm.add("s2", "proxy", "fired", BROADCAST, qos("on-change"), NOW) == []


def test_a_subscription_of_an_unknown_kind_or_already_expired_is_refused() -> None:
    pm = PublicationManager()
    with pytest.raises(SubscriptionError):
        pm.add("s1", "proxy", "speed", "event", qos(), NOW)
    with pytest.raises(SubscriptionError):
        pm.add("s1", "proxy", "speed", ATTRIBUTE, qos(expiry_date_ms=NOW), NOW)
    assert pm.add("s1", "proxy", "speed", ATTRIBUTE, qos(expiry_date_ms=NOW + 1), NOW)
    with pytest.raises(SubscriptionError):
        pm.add("s2", "proxy", "speed", ATTRIBUTE, qos("periodic", period_ms=0), NOW)


def test_a_change_is_published_when_the_minimum_interval_has_passed_exactly() -> None:
    pm = PublicationManager()
    pm.add("s1", "proxy", "speed", ATTRIBUTE, qos("on-change", min_interval_ms=100), NOW, current=0)
    assert pm.changed("speed", 1, NOW + 99) == []
    assert pm.next_due() == NOW + 100
    assert [p.value for p in pm.tick(NOW + 99, {"speed": 1})] == []
    assert [p.value for p in pm.tick(NOW + 100, {"speed": 1})] == [1]
    assert [p.value for p in pm.changed("speed", 2, NOW + 200)] == [2]


def test_a_periodic_attribute_ignores_changes_but_a_periodic_broadcast_does_not() -> None:
    pm = PublicationManager()
    pm.add("a", "proxy", "speed", ATTRIBUTE, qos("periodic"), NOW, current=0)
    pm.add("b", "proxy", "speed", BROADCAST, qos("periodic"), NOW)
    assert [p.subscription_id for p in pm.changed("speed", 5, NOW + 1)] == ["b"]
    assert [p.subscription_id for p in pm.changed("other", 5, NOW + 1)] == []


def test_a_periodic_publication_is_due_exactly_one_period_after_the_last() -> None:
    pm = PublicationManager()
    pm.add("s1", "proxy", "speed", ATTRIBUTE, qos("periodic", period_ms=100), NOW, current=0)
    assert pm.next_due() == NOW + 100
    assert pm.tick(NOW + 99, {"speed": 3}) == []
    assert [p.value for p in pm.tick(NOW + 100, {"speed": 3})] == [3]
    assert pm.tick(NOW + 150, {}) == []
    assert pm.tick(NOW + 200, {}) == []  # no current value: nothing to publish


def test_a_subscription_ends_at_its_expiry_date() -> None:
    pm = PublicationManager()
    pm.add("s1", "proxy", "speed", ATTRIBUTE, qos("periodic", expiry_date_ms=NOW + 100), NOW, current=0)
    assert pm.next_due() == NOW + 100
    assert pm.tick(NOW + 100, {"speed": 1}) == []
    assert pm.subscriptions() == {} and pm.next_due() is None
    assert pm.remove("s1") is False


def test_remove_says_whether_there_was_a_subscription() -> None:
    pm = PublicationManager()
    pm.add("s1", "proxy", "fired", BROADCAST, qos("on-change"), NOW)
    assert pm.remove("s1") is True and pm.remove("s1") is False


# -- the consumer side ----------------------------------------------------------------------


def test_the_consumer_counts_publications_and_alerts() -> None:
    sm = SubscriptionManager()
    sm.register("s1", qos("periodic", period_ms=100, alert_after_interval_ms=100), NOW)
    assert sm.counts("s1") == (0, 0)
    assert sm.received("s1", NOW + 10) and sm.received("s1", NOW + 20)
    assert sm.counts("s1") == (2, 0)
    assert sm.next_due() == NOW + 120
    assert sm.tick(NOW + 119) == ([], [])
    assert sm.tick(NOW + 120) == ([Missed("s1", NOW + 20)], [])
    assert sm.tick(NOW + 220) == ([Missed("s1", NOW + 120)], [])
    assert sm.counts("s1") == (2, 2)


def test_the_first_alert_counts_from_the_registration() -> None:
    sm = SubscriptionManager()
    sm.register("s1", qos("periodic", period_ms=100, alert_after_interval_ms=100), NOW)
    assert sm.next_due() == NOW + 100
    assert sm.tick(NOW + 100) == ([Missed("s1", NOW)], [])


def test_a_publication_at_or_after_the_expiry_date_is_late() -> None:
    sm = SubscriptionManager()
    sm.register("s1", qos("on-change", expiry_date_ms=NOW + 100), NOW)
    assert sm.next_due() == NOW + 100
    assert sm.received("s1", NOW + 99) is True
    assert sm.received("s1", NOW + 100) is False
    assert sm.received("nobody", NOW) is False
    assert sm.tick(NOW + 100) == ([], ["s1"])
    assert sm.counts("s1") is None


def test_unregister_says_whether_there_was_a_subscription() -> None:
    sm = SubscriptionManager()
    sm.register("s1", qos("on-change"), NOW)
    sm.register("s2", qos("on-change"), NOW)
    assert sm.unregister("s1") is True and sm.unregister("s1") is False
    assert sm.counts("s2") == (0, 0)


def test_a_consumer_refuses_a_quality_of_service_out_of_bounds() -> None:
    with pytest.raises(SubscriptionError):
        SubscriptionManager().register("s1", SubscriptionQos("periodic"), NOW)


def test_tick_publishes_every_subscription_due_each_under_its_own_id() -> None:
    pm = PublicationManager()
    pm.add("slow", "proxy", "speed", ATTRIBUTE, qos("periodic", period_ms=1_000), NOW, current=0)
    pm.add("fast", "proxy", "speed", ATTRIBUTE, qos("periodic", period_ms=100), NOW, current=0)
    pm.add("held", "proxy", "speed", ATTRIBUTE, qos("on-change", min_interval_ms=100), NOW, current=0)
    pm.changed("speed", 7, NOW + 50)
    out = pm.tick(NOW + 100, {"speed": 7})
    assert sorted((p.subscription_id, p.value) for p in out) == [("fast", 7), ("held", 7)]
