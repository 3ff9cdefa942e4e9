"""A message's path from hand-written trace events: hops paired and ordered by the hop
counter where the clock cannot order them, decisions, the fate, and request with reply."""

from __future__ import annotations

import random
from collections import defaultdict
from typing import Any

import pytest

from joynr_sim.message_path import Decision, Hop, conversation_of, conversations, message_paths

T0 = 1_700_000_000_000


class _Trace:
    """Events as runtimes write them: a sequence number per runtime, ``ts`` in simulated ms."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []
        self._seq: dict[str, int] = defaultdict(int)

    def ev(self, rt: str, ev: str, msg: str | None, hops: int | None, ts: int = 0, *, type: str = "rq",
           to: str = "provider-1", corr: str | None = "corr-1", **fields: Any) -> dict[str, Any]:
        event = {"v": 1, "ts": T0 + ts, "seq": self._seq[rt], "run": "r1", "rt": rt, "ev": ev, "msg": msg,
                 "type": type, "from": "proxy-1", "to": to, "hops": hops, "corr": corr, **fields}
        self._seq[rt] += 1
        self.events.append(event)
        return event

    def out(self, rt: str, msg: str, hops: int, via: str, target: str, gbid: str | None = None,
            ts: int = 0, **kw: Any) -> dict[str, Any]:
        return self.ev(rt, "msg.out", msg, hops, ts, via=via, target=target, gbid=gbid,
                       resent=kw.pop("resent", False), **kw)

    def inn(self, rt: str, msg: str, hops: int, via: str, gbid: str | None = None, ts: int = 0,
            **kw: Any) -> dict[str, Any]:
        return self.ev(rt, "msg.in", msg, hops, ts, via=via, gbid=gbid, **kw)


def _request_over_two_cluster_controllers(t: _Trace, ts: int = 10) -> None:
    """app1 -> cc1 (WebSocket) -> cc2 (MQTT, gbid1) -> app2 (WebSocket), delivered in app2:
    all in one millisecond, so only the hop counter orders the hops."""
    t.out("app1", "req-1", 0, "ws", "ws://cc1:4242/", ts=ts)
    t.inn("cc1", "req-1", 0, "ws", ts=ts)
    t.out("cc1", "req-1", 1, "mqtt", "gbid1/cc2", "gbid1", ts=ts)
    t.inn("cc2", "req-1", 1, "mqtt", "gbid1", ts=ts)
    t.out("cc2", "req-1", 2, "ws", "app2", ts=ts)
    t.inn("app2", "req-1", 2, "ws", ts=ts)
    t.out("app2", "req-1", 3, "inprocess", "inprocess:7", ts=ts)
    t.ev("app2", "msg.deliver", "req-1", 3, ts=ts)


def _rows(path) -> list[tuple[str, ...]]:
    """The steps as (sender, receiver, label) for a hop and (kind, runtime, reason) for a decision."""
    return [(step.sender, step.receiver, step.label) if isinstance(step, Hop)
            else (step.kind, step.event["rt"], step.event.get("reason")) for step in path.steps]


def test_hops_across_two_cluster_controllers_in_one_millisecond_follow_the_hop_counter():
    t = _Trace()
    _request_over_two_cluster_controllers(t)
    events = t.events[:]
    random.Random(1).shuffle(events)  # file and arrival order must not matter
    path = message_paths(events)["req-1"]
    # the in-process hand-over to the provider is no hop of its own
    assert _rows(path) == [("app1", "cc1", "ws"), ("cc1", "cc2", "mqtt gbid1"), ("cc2", "app2", "ws"),
                           ("deliver", "app2", None)]
    assert [(e["rt"], e["ev"]) for e in path.events[:3]] == [("app1", "msg.out"), ("cc1", "msg.in"),
                                                             ("cc1", "msg.out")]
    assert (path.fate.kind, path.fate.outcome, path.fate.where) == ("delivered", "delivered", "app2")
    assert path.hops == 3 and path.delivered
    assert path.first["rt"] == "app1" and path.first["ts"] == T0 + 10
    hop = path.steps[1]
    assert hop.at is hop.received and hop.at["hops"] == 1  # a hop is shown at its receipt


def test_a_message_queued_then_dropped_ends_dropped_with_the_reason_where_it_was_dropped():
    t = _Trace()
    t.out("app1", "lost-2", 0, "ws", "ws://cc1:4242/", ts=20, type="o", corr=None, to="gone-9")
    t.inn("cc1", "lost-2", 0, "ws", ts=20, type="o", corr=None, to="gone-9")
    t.ev("cc1", "msg.queue", "lost-2", 1, ts=20, type="o", corr=None, to="gone-9", reason="no-route")
    t.ev("cc1", "msg.drop", "lost-2", 1, ts=900, type="o", corr=None, to="gone-9", reason="expired")
    waiting = message_paths(t.events[:-1])["lost-2"]  # before it expired
    assert (waiting.fate.kind, waiting.fate.outcome, waiting.fate.where) == ("queued", "queued", "cc1")
    paths = message_paths(t.events)
    path = paths["lost-2"]
    assert _rows(path) == [("app1", "cc1", "ws"), ("queue", "cc1", "no-route"), ("drop", "cc1", "expired")]
    assert (path.fate.kind, path.fate.reason, path.fate.outcome, path.fate.where) == (
        "dropped", "expired", "dropped: expired", "cc1")
    assert not path.delivered
    # a one-way message waits for no reply, yet it was not delivered
    (conv,) = conversations(paths)
    assert conv.failing and not conv.unanswered


def test_a_loop_between_cluster_controllers_is_dropped_at_the_hop_limit():
    t = _Trace()
    t.out("cc1", "loop-3", 1, "mqtt", "gbid1/cc2", "gbid1", ts=30)
    t.inn("cc2", "loop-3", 1, "mqtt", "gbid1", ts=30)
    t.out("cc2", "loop-3", 2, "mqtt", "gbid1/cc1", "gbid1", ts=30)
    t.inn("cc1", "loop-3", 2, "mqtt", "gbid1", ts=30)
    t.ev("cc1", "msg.drop", "loop-3", 3, ts=30, reason="hop-limit")
    path = message_paths(t.events)["loop-3"]
    assert _rows(path) == [("cc1", "cc2", "mqtt gbid1"), ("cc2", "cc1", "mqtt gbid1"), ("drop", "cc1", "hop-limit")]
    assert path.fate.outcome == "dropped: hop-limit" and path.hops == 3


def test_a_message_sent_and_never_received_ends_at_its_sender_naming_the_next_hop():
    t = _Trace()
    t.out("app1", "void-4", 0, "ws", "ws://cc1:4242/", ts=40, corr=None, type="o")
    t.inn("cc1", "void-4", 0, "ws", ts=40, corr=None, type="o")
    t.out("cc1", "void-4", 1, "mqtt", "gbid2/cc3", "gbid2", ts=40, corr=None, type="o")
    path = message_paths(t.events)["void-4"]
    lost = path.steps[-1]
    assert isinstance(lost, Hop) and lost.received is None and lost.at is lost.sent
    assert _rows(path) == [("app1", "cc1", "ws"), ("cc1", None, "mqtt gbid2")]
    assert (path.fate.kind, path.fate.outcome, path.fate.where) == (
        "not-received", "sent, not received", "cc1 → gbid2/cc3")


def test_a_receipt_whose_sender_left_no_trace_and_a_message_never_routed_on():
    t = _Trace()
    t.inn("cc2", "orphan-5", 3, "mqtt", "gbid1", ts=50, type="o", corr=None)
    path = message_paths(t.events)["orphan-5"]
    (hop,) = path.steps
    assert isinstance(hop, Hop) and hop.sent is None and (hop.receiver, hop.label) == ("cc2", "mqtt gbid1")
    assert (path.fate.kind, path.fate.outcome, path.fate.where) == ("not-routed", "received, not routed", "cc2")


def test_a_request_with_its_reply_is_one_conversation_request_first():
    t = _Trace()
    _request_over_two_cluster_controllers(t)
    reply = dict(type="rp", to="proxy-1", ts=10)
    t.out("app2", "rep-1", 0, "ws", "ws://cc2:4242/", **reply)
    t.inn("cc2", "rep-1", 0, "ws", **reply)
    t.out("cc2", "rep-1", 1, "mqtt", "gbid1/cc1", "gbid1", **reply)
    t.inn("cc1", "rep-1", 1, "mqtt", "gbid1", **reply)
    t.out("cc1", "rep-1", 2, "ws", "app1", **reply)
    t.inn("app1", "rep-1", 2, "ws", **reply)
    t.ev("app1", "msg.deliver", "rep-1", 3, **reply)
    # the reply's events first: which message comes first must not depend on it
    paths = message_paths(t.events[8:] + t.events[:8])
    assert list(paths) == ["rep-1", "req-1"]
    conv = conversation_of(paths, "rep-1")
    assert conv.ids == ["req-1", "rep-1"]
    assert conv.runtimes == ["app1", "cc1", "cc2", "app2"]
    assert _rows(paths["rep-1"])[:2] == [("app2", "cc2", "ws"), ("cc2", "cc1", "mqtt gbid1")]
    assert not conv.unanswered and not conv.failing
    assert [c.ids for c in conversations(paths)] == [["req-1", "rep-1"]]


def test_a_request_without_a_reply_is_unanswered_and_failing_though_delivered():
    t = _Trace()
    _request_over_two_cluster_controllers(t)
    t.out("app1", "oneway-6", 0, "ws", "ws://cc1:4242/", ts=60, type="o", corr=None)
    t.inn("cc1", "oneway-6", 0, "ws", ts=60, type="o", corr=None)
    t.ev("cc1", "msg.deliver", "oneway-6", 1, ts=60, type="o", corr=None)
    request, oneway = conversations(message_paths(t.events))
    assert request.ids == ["req-1"] and request.paths[0].delivered
    assert request.unanswered and request.failing
    # a one-way message waits for no reply
    assert oneway.ids == ["oneway-6"] and not oneway.unanswered and not oneway.failing


def test_a_receipt_pairs_with_the_earliest_send_over_its_own_transport():
    t = _Trace()
    t.inn("cc1", "multi-7", 0, "ws", ts=70, type="o", corr=None)
    t.out("cc1", "multi-7", 1, "mqtt", "gbid1/cc2", "gbid1", ts=70, type="o", corr=None)
    t.out("cc1", "multi-7", 1, "ws", "app2", ts=71, type="o", corr=None, resent=True)
    t.inn("app2", "multi-7", 1, "ws", ts=72, type="o", corr=None)
    path = message_paths(t.events)["multi-7"]
    # app2's WebSocket receipt is the WebSocket send's, though the MQTT send came first
    assert _rows(path) == [(None, "cc1", "ws"), ("cc1", None, "mqtt gbid1"), ("cc1", "app2", "ws resent")]
    assert path.fate.outcome == "received, not routed" and path.fate.where == "app2"


def test_delivered_wins_over_a_dropped_duplicate_and_undecodable_drops_belong_to_no_path():
    t = _Trace()
    t.out("cc1", "dup-8", 0, "mqtt", "gbid1/cc2", "gbid1", ts=80, type="o", corr=None)
    t.inn("cc2", "dup-8", 0, "mqtt", "gbid1", ts=80, type="o", corr=None)
    t.ev("cc2", "msg.deliver", "dup-8", 1, ts=80, type="o", corr=None)
    t.inn("cc2", "dup-8", 0, "mqtt", "gbid1", ts=81, type="o", corr=None)
    t.ev("cc2", "msg.drop", "dup-8", 1, ts=81, type="o", corr=None, reason="duplicate")
    t.ev("cc2", "msg.drop", None, None, ts=82, type=None, corr=None, reason="decode-error")
    t.ev("cc2", "rt.put", None, None, ts=83)
    paths = message_paths(t.events)
    assert list(paths) == ["dup-8"]
    path = paths["dup-8"]
    assert path.fate.kind == "delivered" and path.fate.where == "cc2"
    assert [type(s) for s in path.steps] == [Hop, Hop, Decision, Decision]
    assert isinstance(path.steps[1], Hop) and path.steps[1].sent is None  # the duplicate's second receipt


def test_a_hop_needs_one_of_its_ends():
    with pytest.raises(ValueError):
        Hop(None, None)
