"""The harness's reading of ``trace_schema/loss.json``: each explanation holds where the
specification says and nowhere else; a receiver's crash never explains an MQTT hop its
broker still owed it."""

from __future__ import annotations

import pytest

from joynr_sim import loss
from joynr_sim.loss import ANSWERED, EXPLAINED, UNEXPLAINED, Exchanges
from trace_schema import loss_explanations, loss_spec

_seq = iter(range(1_000_000))


def ev(ts: int, rt: str, name: str, **fields) -> dict:
    return {"v": 1, "ts": ts, "seq": next(_seq), "run": "r", "rt": rt, "ev": name, **fields}


def life(ts: int, name: str, who: str, kind: str = "cluster-controller", **fields) -> dict:
    rt = "brokers" if kind == "broker" else who
    return ev(ts, rt, name, target=who, target_kind=kind, **fields)


def started(ts: int = 0) -> list[dict]:
    return [life(ts, "life.start", "cc1", own_topics=["cc1"]), life(ts, "life.start", "cc2", own_topics=["cc2"]),
            life(ts, "life.start", "app1", "libjoynr"), life(ts, "life.start", "broker-gbid1", "broker", gbid="gbid1")]


def mqtt_hop(ts: int, msg: str = "m1", corr: str = "c1", type_: str = "rq", rt: str = "cc2", to: str = "cc1",
             **more) -> dict:
    return ev(ts, rt, "msg.out", msg=msg, type=type_, corr=corr, hops=1, exp=10_000, via="mqtt", gbid="gbid1",
              target=f"gbid1/{to}", **more)


def ws_hop(ts: int, msg: str = "m1", corr: str = "c1", type_: str = "rq", rt: str = "cc1", to: str = "app1") -> dict:
    return ev(ts, rt, "msg.out", msg=msg, type=type_, corr=corr, hops=2, exp=10_000, via="ws", target=to)


def arrives(ts: int, rt: str, msg: str = "m1", corr: str = "c1", type_: str = "rq", hops: int = 1) -> dict:
    return ev(ts, rt, "msg.in", msg=msg, type=type_, corr=corr, hops=hops, exp=10_000)


def verdict(events: list[dict], request: str = "m1") -> str:
    return str(Exchanges(events).verdict(request))


def test_the_harness_implements_exactly_the_specified_explanations():
    assert tuple(loss.EXPLANATIONS) == loss_explanations()
    assert len(set(loss_explanations())) == len(loss_spec()["explanations"])
    assert loss.ENDS == {"life.crash", "life.stop"} and "duplicate" in loss.UNACCOUNTED_DROPS


def test_a_reply_delivered_answers_the_request():
    events = [*started(), mqtt_hop(10), ev(12, "cc2", "msg.deliver", msg="r1", type="rp", corr="c1", hops=3)]
    assert verdict(events) == ANSWERED


@pytest.mark.parametrize("reason, outcome", [("expired", "explained (drop-recorded)"), ("duplicate", UNEXPLAINED)])
def test_a_drop_explains_unless_it_was_of_a_copy(reason, outcome):
    events = [*started(), mqtt_hop(10), arrives(11, "cc1"),
              ev(12, "cc1", "msg.drop", msg="m1", type="rq", corr="c1", hops=1, reason=reason)]
    assert verdict(events) == outcome


def test_a_receivers_crash_and_restart_never_explain_an_mqtt_hop_its_broker_owed_it():
    owed = [*started(), mqtt_hop(10), life(12, "life.crash", "cc1"), life(20, "life.restart", "cc1")]
    assert verdict(owed) == UNEXPLAINED
    senders_crash = [*started(), mqtt_hop(10), life(12, "life.crash", "cc2"), life(20, "life.restart", "cc2")]
    assert verdict(senders_crash) == UNEXPLAINED  # its outbox sends again what the broker never took


def test_a_receiver_gone_for_good_explains_an_mqtt_hop_in_flight():
    assert verdict([*started(), mqtt_hop(10), life(30, "life.stop", "cc1")]) == "explained (receiver-gone)"
    after_expiry = [*started(), mqtt_hop(10), life(10_001, "life.stop", "cc1")]
    assert verdict(after_expiry) == UNEXPLAINED
    overtaken = [*started(), mqtt_hop(10), mqtt_hop(11, "m2", "c2"), arrives(12, "cc1", "m2", "c2"),
                 life(30, "life.stop", "cc1")]
    assert verdict(overtaken) == UNEXPLAINED  # a later message on the same way got through first


def test_a_hop_to_a_party_outside_the_run_is_explained_by_it_alone():
    gcd = "discoverydirectory_channelid"
    outside = ev(0, "brokers", "life.outside", target="gcd-gbid1", target_kind="gcd", gbids=["gbid1"],
                 own_topics=[gcd])
    assert verdict([*started(), outside, mqtt_hop(10, to=gcd)]) == "explained (receiver-outside)"
    assert verdict([*started(), mqtt_hop(10, to=gcd)]) == UNEXPLAINED  # nobody said it is served outside
    assert verdict([*started(), outside, mqtt_hop(10)]) == UNEXPLAINED  # cc1 is the run's own: it traces


def test_the_broker_of_the_hop_ending_or_down_explains_it():
    ended = [*started(), mqtt_hop(10), life(12, "life.crash", "broker-gbid1", "broker", gbid="gbid1")]
    assert verdict(ended) == "explained (broker-ended)"
    down = [*started(), life(5, "life.crash", "broker-gbid1", "broker", gbid="gbid1"), mqtt_hop(10)]
    assert verdict(down) == "explained (broker-down)"
    back = [*started(), life(5, "life.crash", "broker-gbid1", "broker", gbid="gbid1"),
            life(8, "life.start", "broker-gbid1", "broker", gbid="gbid1"), mqtt_hop(10)]
    assert verdict(back) == UNEXPLAINED
    other_gbid = [*started(), mqtt_hop(10), life(12, "life.crash", "broker-gbid2", "broker", gbid="gbid2")]
    assert verdict(other_gbid) == UNEXPLAINED


def test_a_session_the_broker_lost_explains_a_hop_until_the_receiver_attaches_again():
    def attach(ts, present):
        return ev(ts, "cc1", "link.attach", gbid="gbid1", client_id="cc1", session_present=present)

    base = [*started(), attach(1, False), life(5, "life.crash", "broker-gbid1", "broker", gbid="gbid1"),
            life(8, "life.start", "broker-gbid1", "broker", gbid="gbid1")]
    assert verdict([*base, mqtt_hop(10), attach(20, False)]) == "explained (session-lost)"
    assert verdict([*base, mqtt_hop(10), attach(20, True)]) == UNEXPLAINED  # the broker kept it
    assert verdict([*base, attach(9, False), mqtt_hop(10)]) == UNEXPLAINED  # subscribed again before


def test_a_websocket_dies_with_either_end():
    receiver = [*started(), ws_hop(10), life(11, "life.crash", "app1", "libjoynr"),
                life(20, "life.restart", "app1", "libjoynr")]
    assert verdict(receiver) == "explained (ws-end)"
    sender = [*started(), ws_hop(10), life(11, "life.crash", "cc1")]
    assert verdict(sender) == "explained (ws-end)"
    before = [*started(), life(5, "life.crash", "app1", "libjoynr"), arrives(6, "app1", "x", "cx", hops=2),
              ws_hop(10)]
    assert verdict(before) == "explained (ws-receiver-down)"  # app1 was down when it was sent
    nobody = [*started(), ws_hop(10)]
    assert verdict(nobody) == UNEXPLAINED


def test_a_message_taken_over_dies_with_its_holder_only():
    queued = [*started(), mqtt_hop(10), arrives(11, "cc1"),
              ev(11, "cc1", "msg.queue", msg="m1", type="rq", corr="c1", hops=1, exp=10_000, reason="no-route")]
    assert verdict(queued) == UNEXPLAINED
    assert verdict([*queued, life(15, "life.crash", "cc1"), life(16, "life.restart", "cc1")]) == \
        "explained (holder-ended)"
    assert verdict([*queued, life(15, "life.crash", "cc2")]) == UNEXPLAINED  # not its holder
    assert verdict([*queued, life(10_001, "life.stop", "cc1")]) == UNEXPLAINED  # after it expired


def test_the_reply_is_followed_when_it_was_seen_last():
    events = [*started(), mqtt_hop(10), arrives(11, "cc1"), ws_hop(11, rt="cc1"), arrives(12, "app1", hops=2),
              ev(12, "app1", "msg.deliver", msg="m1", type="rq", corr="c1", hops=2),
              ev(13, "app1", "msg.out", msg="r1", type="rp", corr="c1", hops=0, exp=10_000, via="ws", target="cc1"),
              arrives(14, "cc1", "r1", "c1", "rp", hops=0),
              mqtt_hop(15, "r1", "c1", "rp", rt="cc1", to="cc2"),
              life(16, "life.crash", "cc2"), life(20, "life.restart", "cc2")]
    v = Exchanges(events).verdict("m1")
    assert v.outcome == UNEXPLAINED and v.last["msg"] == "r1" and v.last["via"] == "mqtt"
    assert Exchanges([*events, life(30, "life.stop", "cc2")]).verdict("m1").why == "receiver-gone"
    assert EXPLAINED == "explained"


def test_a_request_delivered_is_followed_on_its_reply_not_on_a_later_copy():
    """The broker delivered the request again after the provider had answered it; the
    provider's runtime drops the copy as a duplicate. The reply's fate decides: here it
    died with the cluster controller that had taken it over."""
    events = [*started(), mqtt_hop(10), arrives(11, "cc1"), ws_hop(11, rt="cc1"), arrives(12, "app1", hops=2),
              ev(12, "app1", "msg.deliver", msg="m1", type="rq", corr="c1", hops=2),
              ev(13, "app1", "msg.out", msg="r1", type="rp", corr="c1", hops=0, exp=10_000, via="ws", target="cc1"),
              life(14, "life.crash", "cc1"), life(20, "life.restart", "cc1"),
              arrives(30, "cc1"), ws_hop(30, rt="cc1"), arrives(31, "app1", hops=2),
              ev(31, "app1", "msg.drop", msg="m1", type="rq", corr="c1", hops=2, reason="duplicate")]
    v = Exchanges(events).verdict("m1")
    assert (v.outcome, v.why, v.last["msg"]) == (EXPLAINED, "ws-end", "r1")
