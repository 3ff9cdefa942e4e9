"""Each sender's share of the waiting queue, of discovery lookups and of the trace
(``core.fairness``): a flood from one sender is dropped with reason ``sender-limit`` before
it is received, and every other sender's messages still wait, are looked up and traced."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from joynr_sim.core.actions import Drop, Queue, Received, Resolve
from joynr_sim.core.address import MqttAddress
from joynr_sim.core.fairness import SenderShares
from test_router import Clock, cc_router, kinds, message

ATTACKER_REPLY_TO = MqttAddress("gbid1", "attacker")


def flood(router, n: int, sender: str = "attacker", *, distinct: bool = True):
    """n requests for participants nobody knows, received over MQTT; all actions."""
    actions = []
    for i in range(n):
        msg = message(to=f"nobody-{i if distinct else 0}", sender=sender, reply_to=ATTACKER_REPLY_TO,
                      id=f"{sender}-{i}")
        actions.extend(router.receive(msg, "mqtt", "gbid1"))
    return actions


def test_a_flood_holds_its_share_of_the_queue_and_everyone_else_still_waits() -> None:
    router = cc_router(max_queued=100, max_lookups_per_sender=1000)
    actions = flood(router, 1000)
    assert router.waiting.held_by("attacker") == 25  # a quarter of the queue by default
    limited = [a for a in actions if isinstance(a, Drop) and a.reason == "sender-limit"]
    assert not [a for a in actions if isinstance(a, Drop) and a.reason == "queue-full"]  # nobody evicted
    # Refused before it was received: no msg.in, no reply-to route learned, nothing looked up.
    assert sum(isinstance(a, Received) for a in actions) == 25
    assert sum(isinstance(a, Resolve) for a in actions) == 25
    assert limited[0].msg.id == "attacker-25" and "share of the queue" in limited[0].detail
    # A legitimate sender's message for a participant without a route still waits and is looked up.
    legit = router.receive(message(to="late-provider", sender="consumer", reply_to=MqttAddress("gbid1", "cc2")),
                           "mqtt", "gbid1")
    assert kinds(legit)[-2:] == ["Queue:no-route", "Resolve"]


def test_a_sender_has_its_share_of_lookups_under_way_and_gets_more_as_they_end() -> None:
    router = cc_router(max_lookups_per_sender=3)
    actions = flood(router, 10)
    resolves = [a.participant_id for a in actions if isinstance(a, Resolve)]
    assert resolves == ["nobody-0", "nobody-1", "nobody-2"]
    (first_limited, *_) = [a for a in actions if isinstance(a, Drop)]
    assert first_limited.reason == "sender-limit" and "3 discovery lookups under way" in first_limited.detail
    # A message for a participant being looked up anyway starts no lookup: it may wait.
    assert kinds(router.receive(message(to="nobody-1", sender="attacker", id="again"), "mqtt", "gbid1"))[-1] \
        == "Queue:no-route"
    router.resolved("nobody-0")  # not found: the message waits on, the lookup ended
    assert [a.participant_id for a in router.receive(message(to="nobody-99", sender="attacker"), "mqtt", "gbid1")
            if isinstance(a, Resolve)] == ["nobody-99"]
    assert router.shares.lookups("attacker") == 3
    # Another sender's lookups are its own.
    assert isinstance(router.receive(message(to="other", sender="consumer"), "mqtt", "gbid1")[-1], Resolve)


def test_a_sender_whose_messages_were_dropped_too_often_is_counted_not_traced() -> None:
    clock = Clock()
    router = cc_router(clock, max_queued=4, max_queued_per_sender=1)
    router.shares.traced_drops = 100
    actions = flood(router, 1 + 100 + 400)  # one waits, 100 traced drops, 400 counted
    drops = [a for a in actions if isinstance(a, Drop)]
    assert len(drops) == 100 and all(d.msg is not None and d.reason == "sender-limit" for d in drops)
    assert router.advance(clock.now + 1) == []  # the window is still open
    clock.now += 10_000
    (summary,) = [a for a in router.advance(clock.now) if isinstance(a, Drop) and a.msg is None]
    assert (summary.reason, summary.sender, summary.count) == ("sender-limit", "attacker", 400)
    assert "100 dropped" in summary.detail
    assert [a for a in router.advance(clock.now + 20_000) if isinstance(a, Drop) and a.msg is None] == []
    # A new window traces again.
    assert isinstance(flood(router, 1)[0], Drop)


def test_any_drop_counts_towards_the_share_and_a_muted_sender_is_refused_even_with_a_route() -> None:
    from test_router import in_process
    clock = Clock()
    router = cc_router(clock)
    router.shares.traced_drops = 10
    in_process(router, "provider")
    expired = [message(to="provider", sender="replayer", ttl=-1, id=f"old-{i}") for i in range(10)]
    for msg in expired:
        assert kinds(router.receive(msg, "mqtt", "gbid1"))[-1] == "Drop:expired"
    # From now on, within the window, even a deliverable message of that sender is refused.
    assert router.receive(message(to="provider", sender="replayer", id="fresh"), "mqtt", "gbid1") == []
    # Duplicates count too, and other senders are untouched.
    dup = message(to="provider", sender="consumer", id="d")
    router.receive(dup, "mqtt", "gbid1")
    assert kinds(router.receive(dup, "mqtt", "gbid1")) == ["Drop:duplicate"]
    assert "Deliver" in kinds(router.receive(message(to="provider", sender="consumer"), "mqtt", "gbid1"))
    clock.now += 10_000
    (summary,) = [a for a in router.advance(clock.now) if isinstance(a, Drop) and a.msg is None]
    assert (summary.sender, summary.count) == ("replayer", 1)


def test_messages_with_a_route_are_never_limited() -> None:
    router = cc_router(max_queued=4, max_queued_per_sender=1)
    flood(router, 3, distinct=False)
    from test_router import in_process
    in_process(router, "provider")
    for i in range(50):
        assert not [a for a in router.receive(message(to="provider", sender="attacker", id=f"ok-{i}"), "mqtt", "gbid1")
                    if isinstance(a, Drop)]


@pytest.mark.parametrize("bad", [0, -1])
def test_shares_are_at_least_one(bad) -> None:
    with pytest.raises(ValueError, match="max_queued_per_sender"):
        cc_router(max_queued_per_sender=bad)
    with pytest.raises(ValueError, match="max_lookups_per_sender"):
        cc_router(max_lookups_per_sender=bad)


@given(st.lists(st.tuples(st.sampled_from(["a", "b", "c"]), st.integers(0, 5), st.booleans()), max_size=80))
def test_no_sender_holds_more_than_its_share_and_every_message_is_accounted_for(steps) -> None:
    router = cc_router(max_queued=8, max_queued_per_sender=3, max_lookups_per_sender=2)
    for n, (sender, target, end_lookup) in enumerate(steps):
        msg = message(to=f"p{target}", sender=sender, id=f"m{n}")
        actions = router.receive(msg, "mqtt", "gbid1")
        outcome = [a for a in actions if isinstance(a, (Drop, Queue)) and a.msg is not None and a.msg.id == msg.id]
        assert len(outcome) == 1  # waits or is dropped with a reason, never silently
        if end_lookup and router._resolving:
            router.resolved(next(iter(router._resolving)))
        for s in ("a", "b", "c"):
            assert router.waiting.held_by(s) <= 3 and router.shares.lookups(s) <= 2


def test_a_window_closed_by_the_next_drop_is_summed_up_before_it() -> None:
    shares = SenderShares(traced_drops=1, window_ms=10)
    drop = [Drop(message(sender="s"), "expired")]
    assert shares.note("s", 0, drop) == drop
    assert shares.muted("s", 5)
    shares.count("s")
    shares.count("s")
    assert not shares.muted("s", 10)  # the window closed
    summary, *rest = shares.note("s", 10, drop)
    assert (summary.count, rest) == (2, drop)


def test_a_stop_sums_up_the_open_windows() -> None:
    shares = SenderShares(traced_drops=1, window_ms=10_000)
    shares.note("s", 0, [Drop(message(sender="s"), "expired")])
    shares.count("s")
    (summary,) = shares.flush()
    assert (summary.sender, summary.count) == ("s", 1) and shares.flush() == []
