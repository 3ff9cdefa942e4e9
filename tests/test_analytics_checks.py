"""Each check on hand-written traces: a run with the violation next to a run without."""

from __future__ import annotations

import pytest

from analytics import loss
from analytics.checks import CHECKS
from analytics.checks.lost_message import verdicts_of_runs
from analytics_helpers import RunBuilder, check, entry, keys, wire
from trace_schema import loss_explanations

CC = [("lib-1", "ws"), ("cc-1", "mqtt"), ("cc-2", "ws"), ("lib-2", "ws")]
BACK = [("lib-2", "ws"), ("cc-2", "mqtt"), ("cc-1", "ws"), ("lib-1", "ws")]


def life_start(b: RunBuilder, ts: int = 0) -> None:
    for cc in ("cc-1", "cc-2", "cc-3"):
        b.add("runner", "life.start", ts, target=cc, target_kind="cluster-controller",
              gbids=["g1"], own_topics=[cc])
    b.add("runner", "life.start", ts, target="broker-g1", target_kind="broker", gbid="g1", port=1883)


def test_registry_order_matches_cli_names():
    from analytics.app import CHECK_NAMES

    assert tuple(CHECKS) == CHECK_NAMES


def test_routing_loop(spark, tmp_path):
    bad = RunBuilder("loop")
    bad.put("cc-1", 10, "prov", None, entry("Mqtt", "g1/cc-2"), "created", origin="gcd")
    bad.put("cc-2", 11, "prov", None, entry("Mqtt", "g1/cc-1"), "created", origin="gcd")
    bad.put("cc-3", 11, "prov", None, entry("Mqtt", "g1/cc-1"), "created", origin="gcd")
    wire(bad, "m1", [("cc-1", "mqtt"), ("cc-2", "mqtt"), ("cc-1", "mqtt"), ("cc-2", "mqtt")],
         100, deliver=False)
    bad.msg("cc-2", "msg.drop", 120, "m1", hops=4, reason="hop-limit")
    bad.msg("cc-3", "msg.drop", 130, "m2", hops=9, reason="hop-limit")  # caught by the bound only
    clean = RunBuilder("clean")
    t = wire(clean, "m1", CC, 100, corr="c1")
    # a re-send after a link resume is not a second routing decision
    clean.msg("cc-1", "msg.out", t, "m1", hops=2, via="mqtt", gbid="g1", target="g1/cc-2",
              resent=True)
    # a re-route: back at lib-1, whose provider registered meanwhile, and delivered in process
    t = wire(clean, "m3", [("lib-1", "ws"), ("cc-1", "ws"), ("lib-1", "ws")], t + 10, deliver=False)
    clean.msg("lib-1", "msg.out", t, "m3", hops=3, via="inprocess", target="inprocess:1")
    clean.msg("lib-1", "msg.deliver", t, "m3", hops=3)
    # a second copy with the hop count of the first is a duplicate, not a return
    t = wire(clean, "m4", CC, t + 10, corr="c4")
    clean.msg("cc-2", "msg.in", t, "m4", hops=2, via="mqtt", gbid="g1")
    clean.msg("cc-2", "msg.drop", t, "m4", hops=2, reason="duplicate")
    # came back and then expired, queued, or was delivered where it came from: loops all
    t = wire(bad, "m5", [("cc-1", "mqtt"), ("cc-2", "mqtt"), ("cc-1", "mqtt")], 200, deliver=False)
    bad.msg("cc-1", "msg.drop", t, "m5", hops=4, reason="expired")
    t = wire(bad, "m6", [("cc-1", "mqtt"), ("cc-2", "mqtt"), ("cc-1", "mqtt")], t, deliver=False)
    bad.msg("cc-1", "msg.queue", t, "m6", hops=4, reason="no-route")
    wire(bad, "m7", [("lib-1", "ws"), ("cc-1", "ws"), ("cc-2", "ws"), ("lib-1", "ws")], t + 1)
    result = check(spark, tmp_path, [bad, clean], "routing-loop")
    assert keys(result) == {"loop/m1", "loop/m2", "loop/m5", "loop/m6", "loop/m7"}
    assert {v.key: v.kind for v in result.violations if v.key != "loop/m1"} == {
        "loop/m2": "hop-limit", "loop/m5": "came-back", "loop/m6": "came-back", "loop/m7": "came-back"}
    loop = next(v for v in result.violations if v.key == "loop/m1")
    assert loop.details["cycle"] == ["cc-1", "cc-2"]
    assert set(loop.details["why"]) == {"came-back", "routed-twice", "hop-limit"}
    assert {(e["rt"], e["addr"]) for e in loop.details["routing_entries"]} == {
        ("cc-1", "g1/cc-2"), ("cc-2", "g1/cc-1")}
    assert "cc-1 -> cc-2 -> cc-1" in loop.summary
    assert len(loop.slice) == 9  # 3 hops (out and in), the drop, 2 routing entries
    assert all('"run": "loop"' in line for line in loop.slice)


def test_overwrite_violation_per_policy(spark, tmp_path):
    wsc, mqtt = entry("WebSocketClient", "lib-1"), entry("Mqtt", "g1/cc-2")
    sticky = entry("Mqtt", "g1/cc-3", sticky=True)
    bad = RunBuilder("bad")
    life_start(bad)
    bad.put("cc-1", 10, "a", wsc, mqtt, "replaced", origin="gcd")  # 1: WSC lost to Mqtt
    bad.put("cc-1", 11, "b", mqtt, wsc, "refused")  # 2: should have replaced
    bad.put("cc-1", 12, "c", entry("Mqtt", "g1/cc-2", expiry=9000), mqtt, "merged")  # 3: correct
    bad.put("cc-1", 13, "d", entry("Mqtt", "g1/cc-2", expiry=20000), mqtt, "merged")  # 4: expiry
    bad.put("cc-1", 14, "e", sticky, entry("Mqtt", "g1/cc-3"), "merged",
            entry_after=entry("Mqtt", "g1/cc-3"))  # 5: sticky lost
    bad.put("cc-1", 15, "f", None, entry("Mqtt", "g1/cc-1"), "created", origin="reply-to")  # 6: own
    bad.add("cc-1", "rt.remove", 16, participant="g", policy="precedence", outcome="removed",
            old=sticky, entry=None)  # 7: sticky removed
    bad.put("libjoynr-x", 17, "h", None, mqtt, "created")  # no kind rule: unjudged
    bad.put("cc-1", 18, "i", None, entry("Carrier", "pigeon"), "created")  # 7: unknown type
    bad.add("cc-1", "rt.put", 19, participant="j", policy="precedence", outcome="created",
            reason="", origin="local", old=None, new=None, entry=None)  # 8: nothing offered
    bad.put("cc-1", 20, "k", None, entry("Mqtt", "g1/cc-2", visible=True), "created",
            entry_after=mqtt)  # 9: visibility not the offered one
    bad.put("cc-1", 21, "m", None, wsc, "created")  # 10
    bad.put("cc-1", 22, "m", mqtt, mqtt, "merged")  # 11: old is not what 10 left
    clean = RunBuilder("clean")
    life_start(clean)
    clean.put("cc-1", 10, "a", None, wsc, "created")
    clean.put("cc-1", 11, "a", wsc, mqtt, "refused", reason="precedence")
    clean.put("cc-1", 12, "b", mqtt, wsc, "replaced")
    clean.put("lib-1", 13, "c", entry("Mqtt", "g1/cc-2"), entry("WebSocket", "ws://cc-1"), "replaced")
    clean.put("cc-1", 14, "s", sticky, entry("Mqtt", "g1/cc-2"), "refused")
    clean.add("cc-1", "rt.remove", 15, participant="s", policy="precedence",
              outcome="refused-sticky", old=sticky, entry=sticky)
    clean.add("cc-1", "rt.purge", 20_000, participant="b", policy="precedence", outcome="removed",
              reason="expired", old=wsc)
    clean.add("cc-1", "rt.remove", 20_001, participant="b", policy="precedence", outcome="absent",
              old=None, entry=None)
    # a crash (written by the runtime) or a restart (by the runner) starts the table afresh
    clean.put("cc-2", 30, "n", None, wsc, "created")
    clean.add("cc-2", "life.crash", 31, target="cc-2", target_kind="cluster-controller")
    clean.put("cc-2", 32, "n", None, entry("Mqtt", "g1/cc-3"), "created")
    clean.put("cc-3", 30, "n", None, wsc, "created")
    clean.add("runner", "life.restart", 31, target="cc-3", target_kind="cluster-controller")
    clean.put("cc-3", 32, "n", None, mqtt, "created")
    local_remote = RunBuilder("lr", policy="local-remote")
    local_remote.put("cc-1", 10, "a", wsc, mqtt, "replaced")  # local -> remote: violation
    local_remote.put("cc-1", 11, "b", mqtt, wsc, "replaced")
    local_remote.put("cc-1", 12, "c", sticky, wsc, "replaced",
                     entry_after=entry("WebSocketClient", "lib-1", sticky=True))
    local_remote.add("cc-1", "rt.remove", 13, participant="c", policy="local-remote",
                     outcome="removed", old=entry("WebSocketClient", "lib-1", sticky=True), entry=None)
    gcd_trust = RunBuilder("gt", policy="gcd-trust")
    gcd_trust.put("cc-1", 10, "a", wsc, mqtt, "replaced", origin="gcd")
    gcd_trust.put("cc-1", 11, "b", wsc, mqtt, "replaced", origin="reply-to")  # violation
    naive = RunBuilder("lww", policy="last-writer-wins")
    naive.put("cc-1", 10, "a", wsc, mqtt, "replaced")  # judged as precedence: violation
    result = check(spark, tmp_path, [bad, clean, local_remote, gcd_trust, naive],
                   "overwrite-violation")
    kinds = {v.key: v.kind for v in result.violations}
    assert kinds == {
        "bad/cc-1/0": "should-refuse:precedence",
        "bad/cc-1/1": "should-accept:precedence",
        "bad/cc-1/3": "expiry-not-max",
        "bad/cc-1/4": "sticky-lost",
        "bad/cc-1/5": "should-refuse:own-topic",
        "bad/cc-1/6": "should-refuse:sticky",
        "bad/libjoynr-x/0": "unjudged",
        "bad/cc-1/7": "unjudged",
        "bad/cc-1/8": "unjudged",
        "bad/cc-1/9": "visible-not-offered",
        "bad/cc-1/11": "old-not-held",
        "lr/cc-1/0": "should-refuse:local-remote",
        "gt/cc-1/1": "should-refuse:routing-info-changed",
        "lww/cc-1/0": "should-refuse:precedence",
    }
    assert any("last-writer-wins" in n and "precedence" in n for n in result.notes)
    assert result.violations[0].details["seed"].startswith("000")


def test_lost_message(spark, tmp_path):
    bad = RunBuilder("bad")
    life_start(bad)
    wire(bad, "q1", CC, 10, corr="c1")  # request delivered, never answered
    t = wire(bad, "q2", CC, 30, corr="c2")
    bad.msg("lib-2", "msg.deliver", t, "q2", corr="c2", hops=3)  # delivered twice
    wire(bad, "r2", BACK, t + 1, type_="rp", corr="c2")
    bad.msg("cc-1", "msg.out", 80, "o1", "o", hops=2, via="mqtt", gbid="g1", target="g1/cc-2")
    clean = RunBuilder("clean")
    life_start(clean)
    t = wire(clean, "q1", CC, 10, corr="c1")
    t = wire(clean, "r1", BACK, t, type_="rp", corr="c1")
    # answered by a recorded drop
    clean.msg("lib-1", "msg.out", t, "q2", corr="c2", via="ws", target="ws://cc-1")
    clean.msg("cc-1", "msg.in", t + 1, "q2", corr="c2", via="ws")
    clean.msg("cc-1", "msg.drop", t + 2, "q2", corr="c2", reason="no-connection")
    # lost where cc-2 crashed after last seeing it
    wire(clean, "q3", CC[:3], t + 3, corr="c3", deliver=False)
    # a hop that vanished in a broker that crashed afterwards
    clean.msg("cc-1", "msg.out", t + 10, "o1", "o", hops=2, via="mqtt", gbid="g1", target="g1/cc-3")
    clean.add("runner", "life.crash", t + 11, target="broker-g1", target_kind="broker", gbid="g1")
    clean.add("runner", "life.crash", t + 12, target="cc-2", target_kind="cluster-controller")
    result = check(spark, tmp_path, [bad, clean], "lost-message")
    assert keys(result) == {
        "bad/lost-request/q1",
        "bad/duplicate-delivery/q2/lib-2",
        "bad/vanished-hop/o1/2/cc-1",
    }
    lost = next(v for v in result.violations if v.kind == "lost-request")
    assert lost.details["last"]["rt"] == "lib-2"
    assert len(lost.slice) == 7


def teardown(b: RunBuilder, ts: int) -> None:
    """The graceful stops that end every run, libjoynr runtimes first, brokers last."""
    for rt in ("lib-1", "lib-2", "lib-3", "cc-1", "cc-2", "cc-3"):
        kind = "libjoynr" if rt.startswith("lib") else "cluster-controller"
        b.add(rt, "life.stop", ts, target=rt, target_kind=kind)
        ts += 1
    b.add("runner", "life.stop", ts, target="broker-g1", target_kind="broker", gbid="g1")


def test_lost_message_is_excused_only_while_in_flight(spark, tmp_path):
    late = RunBuilder("late")
    life_start(late)
    # expired at 100; the stop at 300 came too late to explain it
    wire(late, "q1", CC, 10, corr="c1", exp=100)
    # overtaken: a later message cc-1 sent to the same topic arrived before the stops
    late.msg("cc-1", "msg.out", 200, "q2", corr="c2", hops=2, via="mqtt", gbid="g1", target="g1/cc-2")
    wire(late, "o3", [("cc-1", "mqtt"), ("cc-2", "ws")], 210, type_="o", start_hops=2)
    # only a duplicate drop: the first copy's fate is owed
    t = wire(late, "q4", CC, 220, corr="c4", exp=250)
    late.msg("lib-2", "msg.drop", t, "q4", corr="c4", hops=4, reason="duplicate", exp=250)
    # seen further on: the hop arrived, its receipt is missing; no end excuses that
    late.msg("cc-1", "msg.out", 240, "o5", "o", hops=2, via="mqtt", gbid="g1", target="g1/cc-2")
    wire(late, "o5", [("cc-2", "ws"), ("lib-2", "ws")], 241, type_="o", start_hops=3)
    late.add("runner", "life.crash", 245, target="broker-g1", target_kind="broker", gbid="g1")
    # sent to cc-3 after it had crashed and come back: that crash explains nothing
    late.add("runner", "life.crash", 150, target="cc-3", target_kind="cluster-controller")
    late.add("runner", "life.restart", 155, target="cc-3", target_kind="cluster-controller",
             own_topics=["cc-3"])
    late.msg("cc-1", "msg.out", 160, "o6", "o", hops=2, via="mqtt", gbid="g1", target="g1/cc-3", exp=200)
    teardown(late, 300)

    ok = RunBuilder("ok")
    life_start(ok)
    t = wire(ok, "q1", CC, 10, corr="c1", exp=10_000)
    wire(ok, "r1", BACK, t, type_="rp", corr="c1", exp=10_000)
    # published while the broker was down: the broker that came back had no subscriber yet
    ok.add("runner", "life.crash", 170, target="broker-g1", target_kind="broker", gbid="g1")
    ok.msg("cc-1", "msg.out", 175, "o7", "o", hops=2, via="mqtt", gbid="g1", target="g1/cc-2", exp=10_000)
    ok.add("runner", "life.restart", 180, target="broker-g1", target_kind="broker", gbid="g1")
    wire(ok, "o8", [("cc-1", "mqtt"), ("cc-2", "ws")], 185, type_="o", start_hops=2)  # so no later end is owed
    # in flight when the run ended: its broker stopped before it expired (so did cc-2, its
    # receiver, never to start again)
    ok.msg("lib-1", "msg.out", 288, "q2", corr="c2", hops=1, via="ws", target="ws://cc-1", exp=10_000)
    ok.msg("cc-1", "msg.in", 289, "q2", corr="c2", hops=1, via="ws", exp=10_000)
    ok.msg("cc-1", "msg.out", 290, "q2", corr="c2", hops=2, via="mqtt", gbid="g1", target="g1/cc-2",
           exp=10_000)
    # a send the transport refused, recorded at the sender
    ok.msg("lib-1", "msg.out", 100, "q3", corr="c3", hops=1, via="ws", target="ws://cc-1")
    ok.msg("lib-1", "msg.drop", 101, "q3", corr="c3", hops=1, via="ws", reason="no-connection")
    # a cluster controller's message to its own topic comes back to it
    wire(ok, "o4", [("cc-1", "mqtt"), ("cc-1", "ws")], 110, type_="o", start_hops=2)
    # sent over WebSocket to cc-3 while it was down (crashed, not back): ws-receiver-down
    ok.add("runner", "life.crash", 150, target="cc-3", target_kind="cluster-controller")
    ok.msg("lib-3", "msg.out", 160, "o6", "o", hops=1, via="ws", target="cc-3", exp=200)
    teardown(ok, 300)
    result = check(spark, tmp_path, [late, ok], "lost-message")
    assert keys(result) == {
        "late/lost-request/q1", "late/lost-request/q2", "late/vanished-hop/q2/2/cc-1",
        "late/lost-request/q4", "late/vanished-hop/o5/2/cc-1", "late/vanished-hop/o6/2/cc-1",
    }
    gone = next(v for v in result.violations if v.key == "late/vanished-hop/o5/2/cc-1")
    assert gone.details["seen_further_on"] and "seen further on" in gone.summary


def _loss_case(name: str, via: str = "mqtt", to: str = "cc-2", at: int = 10, **ends: int | None) -> RunBuilder:
    """A run whose request ``q`` leaves on one hop at ``at`` and is never seen again: via
    mqtt from cc-1 to ``to``'s topic, via ws from lib-1 to ``to``. ``ends`` names who ends
    when (``broker`` for broker-g1), and ``<who>_up`` when it starts again."""
    b = RunBuilder(name)
    life_start(b)
    sender = "cc-1" if via == "mqtt" else "lib-1"
    target = f"g1/{to}" if via == "mqtt" else to
    b.msg(sender, "msg.out", at, "q", corr="c", hops=2, via=via, gbid="g1" if via == "mqtt" else None,
          target=target, exp=1000)
    for who, ts in ends.items():
        if who.endswith("_up") or ts is None:
            continue
        target_ = "broker-g1" if who == "broker" else who.replace("_", "-")
        kind = "broker" if who == "broker" else "cluster-controller" if who.startswith("cc") else "libjoynr"
        extra = {"gbid": "g1"} if who == "broker" else {}
        b.add("runner", "life.crash", ts, target=target_, target_kind=kind, **extra)
        up = ends.get(f"{who}_up")
        if up is not None:
            b.add("runner", "life.restart", up, target=target_, target_kind=kind, **extra,
                  **({} if who == "broker" else {"own_topics": [target_]}))
    return b


def _outside(b: RunBuilder) -> RunBuilder:
    """An external GCD serves topic ``gcd`` on g1."""
    b.add("brokers", "life.outside", 0, target="gcd-g1", target_kind="gcd", gbids=["g1"], own_topics=["gcd"])
    return b


def _session(b: RunBuilder, present: bool) -> RunBuilder:
    """cc-2 attached to g1 before its broker ended, and again at 15 (after the send)."""
    b.add("cc-2", "link.attach", 1, gbid="g1", client_id="cc-2", conn="a", mode="establish", session_present=False)
    b.add("cc-2", "link.attach", 15, gbid="g1", client_id="cc-2", conn="b", mode="establish",
          session_present=present)
    return b


CC1_WS = "ws://cc-1:4242/"  # names no runtime: who receives from it is learned


def _learned(b: RunBuilder) -> RunBuilder:
    """What is sent to ``CC1_WS`` reaches cc-1: cc-1 is a receiver of a hop sent there."""
    b.msg("lib-3", "msg.out", 1, "o", "o", hops=2, via="ws", target=CC1_WS)
    b.msg("cc-1", "msg.in", 2, "o", "o", hops=2, via="ws")
    return b


def _loss_cases() -> dict[str, tuple[RunBuilder, str, str | None, str | None]]:
    """run -> (its run, the verdict of its request q, the explanation, the hop reported as
    vanished: msg/hops/sender)."""
    answered = RunBuilder("answered")
    life_start(answered)
    wire(answered, "r", BACK, wire(answered, "q", CC, 10, corr="c"), type_="rp", corr="c")
    dropped = RunBuilder("dropped")
    life_start(dropped)
    wire(dropped, "q", CC[:2], 10, corr="c", deliver=False)
    dropped.msg("cc-1", "msg.drop", 20, "q", corr="c", hops=1, reason="no-route")
    reply_dropped = RunBuilder("reply-dropped")
    life_start(reply_dropped)
    t = wire(reply_dropped, "q", CC, 10, corr="c")
    wire(reply_dropped, "r", BACK[:2], t, type_="rp", corr="c", deliver=False)
    reply_dropped.msg("cc-2", "msg.drop", 40, "r", "rp", corr="c", hops=1, reason="expired")
    duplicate = RunBuilder("duplicate-drop")
    life_start(duplicate)
    t = wire(duplicate, "q", CC, 10, corr="c")
    duplicate.msg("lib-2", "msg.drop", t, "q", corr="c", hops=3, reason="duplicate")
    holder = RunBuilder("holder")
    life_start(holder)
    wire(holder, "q", CC, 10, corr="c")
    holder.add("runner", "life.crash", 30, target="lib-2", target_kind="libjoynr")
    delivered = RunBuilder("delivered")  # its fate is its reply's, however late a copy comes again
    life_start(delivered)
    t = wire(delivered, "q", CC, 10, corr="c")
    delivered.msg("lib-2", "msg.out", t, "r", "rp", corr="c", hops=1, via="ws", target="ws://cc-2")
    delivered.msg("cc-2", "msg.in", t + 1, "r", "rp", corr="c", hops=1, via="ws")
    delivered.msg("cc-2", "msg.out", t + 2, "r", "rp", corr="c", hops=2, via="mqtt", gbid="g1", target="g1/cc-1")
    delivered.msg("lib-2", "msg.drop", t + 9, "q", corr="c", hops=3, reason="duplicate")
    delivered.add("runner", "life.crash", t + 10, target="lib-2", target_kind="libjoynr")
    overtaken = _loss_case("overtaken", cc_2=13)
    wire(overtaken, "o", [("cc-1", "mqtt"), ("cc-2", "ws")], 11, type_="o", start_hops=2)
    return {
        "answered": (answered, "answered", None, None),
        "dropped": (dropped, "explained", "drop-recorded", None),
        "reply-dropped": (reply_dropped, "explained", "drop-recorded", None),
        "duplicate-drop": (duplicate, "unexplained", None, None),
        "holder": (holder, "explained", "holder-ended", None),
        "delivered": (delivered, "unexplained", None, "r/2/cc-2"),
        # WebSocket: either end of the connection
        "ws-end": (_learned(_loss_case("ws-end", "ws", CC1_WS, cc_1=12)), "explained", "ws-end", None),
        "ws-sender-end": (_loss_case("ws-sender-end", "ws", CC1_WS, lib_1=12), "explained", "ws-end", None),
        "ws-down": (_learned(_loss_case("ws-down", "ws", CC1_WS, cc_1=5)), "explained", "ws-receiver-down", None),
        "ws-back": (_learned(_loss_case("ws-back", "ws", CC1_WS, cc_1=5, cc_1_up=8)),
                    "unexplained", None, "q/2/lib-1"),
        "ws-target": (_loss_case("ws-target", "ws", "cc-3", cc_3=12), "explained", "ws-end", None),
        "ws-unresolved": (_loss_case("ws-unresolved", "ws", CC1_WS, cc_1=12), "unexplained", None, "q/2/lib-1"),
        # MQTT: the broker, a lost session, a receiver that never came back
        "broker-ended": (_loss_case("broker-ended", broker=12), "explained", "broker-ended", None),
        "broker-down": (_loss_case("broker-down", broker=5, broker_up=20), "explained", "broker-down", None),
        "broker-back": (_loss_case("broker-back", broker=5, broker_up=8), "unexplained", None, "q/2/cc-1"),
        "session-lost": (_session(_loss_case("session-lost", broker=5, broker_up=6), False),
                         "explained", "session-lost", None),
        "session-kept": (_session(_loss_case("session-kept", broker=5, broker_up=6), True),
                         "unexplained", None, "q/2/cc-1"),
        "receiver-gone": (_loss_case("receiver-gone", cc_2=12), "explained", "receiver-gone", None),
        "first-in-order": (_loss_case("first-in-order", cc_2=12, broker=13), "explained", "broker-ended", None),
        # a receiver that comes back resumes its session; a sender's outbox sends again
        "receiver-back": (_loss_case("receiver-back", cc_2=12, cc_2_up=14), "unexplained", None, "q/2/cc-1"),
        "receiver-down": (_loss_case("receiver-down", cc_2=5), "unexplained", None, "q/2/cc-1"),
        "sender-ended": (_loss_case("sender-ended", cc_1=12), "unexplained", None, "q/2/cc-1"),
        # no runtime owns the topic: nobody's end but the broker's explains it
        "unresolved": (_loss_case("unresolved", to="cc-9", cc_2=12), "unexplained", None, "q/2/cc-1"),
        # a party outside the run serves the topic (run --gcd external): its arrival is in no trace
        "receiver-outside": (_outside(_loss_case("receiver-outside", to="gcd")), "explained", "receiver-outside",
                             None),
        "outside-elsewhere": (_outside(_loss_case("outside-elsewhere")), "unexplained", None, "q/2/cc-1"),
        "overtaken": (overtaken, "unexplained", None, "q/2/cc-1"),
    }


def test_request_verdicts_name_the_first_explanation_of_loss_json(spark, tmp_path):
    cases = _loss_cases()
    for b, *_ in cases.values():
        b.write(tmp_path / "runs")
    found = verdicts_of_runs(spark, [str(tmp_path / "runs")])
    assert found == {(run, "q"): (outcome, why) for run, (_, outcome, why, _) in cases.items()}
    # the check reports exactly the unexplained requests, and the hops they vanished on
    result = check(spark, tmp_path / "check", [b for b, *_ in cases.values()], "lost-message")
    expected = {f"{run}/lost-request/q" for run, (_, outcome, *_) in cases.items() if outcome == "unexplained"}
    expected |= {f"{run}/vanished-hop/{hop}" for run, (*_, hop) in cases.items() if hop}
    assert keys(result) == expected


def test_the_explanations_are_loss_json_s_in_its_order():
    assert tuple(loss.EXPLANATIONS) == loss.IDS == loss_explanations()
    assert set(loss.ENDS) == {"life.crash", "life.stop"} and "duplicate" in loss.UNACCOUNTED_DROPS
    with pytest.raises(ImportError, match=r"\['drop-recorded'\].*\['drop-recorded', 'new-excuse'\]"):
        loss.refuse_unless_specified(("drop-recorded",), ("drop-recorded", "new-excuse"))


def test_gcd_consistency(spark, tmp_path):
    def lookup(b, ts, gbids, result):
        return b.add("gcd-g1", "gcd.lookup", ts, op="lookup_participant", gbids=gbids,
                     participant="p", result=[{"participant": p, "gbid": g} for p, g in result],
                     error=None)

    bad = RunBuilder("bad")
    bad.add("gcd-g1", "gcd.add", 1, op="add", participant="p", gbids=["g1", "g2"], cc="cc-1", error=None)
    lookup(bad, 2, ["g1", "g2"], [("p", "g1"), ("p", "g2")])  # 1: duplicate
    lookup(bad, 3, ["g1"], [("p", "g2")])  # 2: foreign GBID
    bad.add("gcd-g2", "gcd.remove", 4, op="remove", participant="p", gbids=["g2"],
            removed=[["p", "g2"]], error=None)
    lookup(bad, 5, ["g2"], [("p", "g2")])  # 4: removed
    bad.add("gcd-g1", "gcd.add", 6, op="add", participant="p", gbids=["g2"], cc="cc-1",
            error="UNKNOWN_GBID")
    lookup(bad, 7, ["g2"], [("p", "g2")])  # 6: a failed add registers nothing
    clean = RunBuilder("clean")
    clean.add("gcd-g1", "gcd.add", 1, op="add", participant="p", gbids=["g1"], cc="cc-1", error=None)
    clean.add("gcd-g1", "gcd.remove_stale", 2, cc="cc-1", max_last_seen=1, removed=[["p", "g1"]])
    clean.add("gcd-g1", "gcd.add", 3, op="add", participant="p", gbids=["g1"], cc="cc-1", error=None)
    lookup(clean, 4, ["g1", "g2"], [("p", "g1")])
    clean.add("gcd-g1", "gcd.lookup", 5, op="lookup_domains", gbids=["g1"], result=[],
              error="NO_ENTRY_FOR_SELECTED_BACKENDS")
    result = check(spark, tmp_path, [bad, clean], "gcd-consistency")
    assert {v.key: v.kind for v in result.violations} == {
        "bad/gcd-g1/1": "duplicate-participant",
        "bad/gcd-g1/2": "foreign-gbid",
        "bad/gcd-g1/3": "removed-registration",
        "bad/gcd-g1/5": "removed-registration",
    }
    removed = next(v for v in result.violations if v.key == "bad/gcd-g1/3")
    assert ("gcd-g2", 0) in removed.refs


def attach(b, rt, ts, key, conn, mode="establish"):
    b.add(rt, "link.attach", ts, gbid="g1", client_id=key, conn=conn, mode=mode)


def test_link_uniqueness(spark, tmp_path):
    bad = RunBuilder("bad")
    attach(bad, "cc-1", 1, "k", "c1")
    attach(bad, "cc-2", 5, "k", "c2")  # c1 still attached
    bad.add("cc-1", "link.detach", 9, gbid="g1", client_id="k", conn="c1", closed=True, error=None)
    attach(bad, "cc-1", 20, "k2", "d1")
    attach(bad, "cc-2", 30, "k2", "d2")  # d1 lives until the run ends
    clean = RunBuilder("clean")
    attach(clean, "cc-1", 1, "k", "c1")
    clean.add("cc-2", "link.steal", 5, gbid="g1", client_id="k", conn="c2", victim="c1")
    attach(clean, "cc-2", 5, "k", "c2", "steal")
    clean.add("cc-2", "link.detach", 7, gbid="g1", client_id="k", conn="c2", closed=False, error=None)
    attach(clean, "cc-2", 8, "k", "c3", "resume")
    clean.add("runner", "life.crash", 10, target="cc-2", target_kind="cluster-controller")
    attach(clean, "cc-1", 11, "k", "c4", "establish")
    attach(clean, "cc-3", 12, "k", "c5", "reject")
    result = check(spark, tmp_path, [bad, clean], "link-uniqueness")
    assert keys(result) == {"bad/g1/k/c1+c2", "bad/g1/k2/d1+d2"}
    assert not result.notes


def test_link_uniqueness_without_link_events_passes_vacuously(spark, tmp_path):
    b = RunBuilder("quiet")
    wire(b, "o1", CC, 1, type_="o")
    result = check(spark, tmp_path, [b], "link-uniqueness")
    assert result.count == 0
    assert result.notes == ["no link events: passes vacuously"]


def test_takeover_storm(spark, tmp_path):
    def steals(b, key, times):
        attach(b, "cc-1", times[0] - 1, key, f"{key}-0")
        for i, ts in enumerate(times, 1):
            rt = f"cc-{1 + i % 2}"
            b.add(rt, "link.steal", ts, gbid="g1", client_id=key, conn=f"{key}-{i}",
                  victim=f"{key}-{i - 1}")
            attach(b, rt, ts, key, f"{key}-{i}", "steal")

    bad = RunBuilder("bad")
    steals(bad, "hot", [100, 2000, 4000, 6000, 8000, 10_200])  # five within 10 s
    bad.add("cc-3", "link.takeover-storm", 20_000, gbid="g2", client_id="k", runtimes=["cc-3", "cc-4"],
            count=9, window_ms=10_000)
    clean = RunBuilder("clean")
    steals(clean, "warm", [100, 200, 300, 400])
    steals(clean, "slow", [1000, 4000, 7000, 10_000, 13_000, 16_000])
    result = check(spark, tmp_path, [bad, clean], "takeover-storm")
    assert keys(result) == {"bad/g1/hot", "bad/g2/k"}
    hot = next(v for v in result.violations if v.key == "bad/g1/hot")
    assert hot.details["runtimes"] == ["cc-1", "cc-2"]
    assert hot.details["max_takeovers_in_window"] == 5
    narrower = check(spark, tmp_path / "again", [bad], "takeover-storm", storm_steals=6)
    assert keys(narrower) == {"bad/g2/k"}
