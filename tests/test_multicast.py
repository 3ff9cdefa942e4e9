"""Multicast ids, the receiver directory and where a multicast goes, without a socket."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from joynr_sim.core.actions import Deliver, Drop, Send, Subscribe, Unsubscribe
from joynr_sim.core.address import MqttAddress, WebSocketClientAddress
from joynr_sim.core.message import MULTICAST
from joynr_sim.core.multicast import MulticastError, MulticastId, MulticastReceiverDirectory, multicast_id, parse
from joynr_sim.core.routing import RoutingEntry
from test_router import CC_WS, FOREVER, Clock, cc_router, in_process, lib_router, message

# -- ids -------------------------------------------------------------------------------


def test_a_multicast_id_is_provider_broadcast_and_partitions() -> None:
    mid = parse("prov1/incremented/a/b")
    assert mid == MulticastId("prov1", "incremented", ("a", "b"))
    assert str(mid) == "prov1/incremented/a/b" == mid.topic()
    assert parse("prov1/incremented", wildcards=True).partitions == ()


@pytest.mark.parametrize("text, wildcards, problem", [
    ("prov1", False, "expected <provider>/<broadcast>"),
    ("prov1/1st", False, "broadcast name"),
    ("prov1/b/a-b", False, "partition 0"),
    ("prov1/b/+", False, "a provider fires no wildcard"),
    ("prov1/b/*/a", True, "may only end"),
    ("prov1/b/x+", True, "partition 0"),
    ("/b", False, "provider"),
    ("p" * 300 + "/b", False, "provider"),
    ("prov1/b/" + "/".join(["a"] * 17), False, "at most 16"),
])
def test_a_bad_multicast_id_is_refused_with_its_part_named(text: str, wildcards: bool, problem: str) -> None:
    with pytest.raises(MulticastError, match=re.escape(problem)):
        parse(text, wildcards=wildcards)


def test_a_provider_id_that_cannot_be_a_topic_level_is_refused() -> None:
    for provider in ("a/b", "a+", "a#", "a*"):
        with pytest.raises(MulticastError, match="cannot name a multicast topic"):
            multicast_id(provider, "b")


@pytest.mark.parametrize("pattern, fired, matches", [
    ("p/b/a/+/c", "p/b/a/b/c", True),
    ("p/b/a/+/c", "p/b/a/a/c", True),
    ("p/b/a/+/c", "p/b/a/b/d", False),
    ("p/b/a/+/c", "p/b/a/b/c/d", False),
    ("p/b/a/b/*", "p/b/a/b/c", True),
    ("p/b/a/b/*", "p/b/a/b/c/d", True),
    ("p/b/a/b/*", "p/b/a/b", True),
    ("p/b/a/b/*", "p/b/a/c/d", False),
    ("p/b", "p/b/a", False),
    ("p/b/*", "q/b/a", False),
    ("p/b/*", "p/c/a", False),
])
def test_wildcards_match_as_joynr_documents(pattern: str, fired: str, matches: bool) -> None:
    assert parse(pattern, wildcards=True).matches(parse(fired)) is matches


levels = st.lists(st.sampled_from(["a", "b", "c"]), max_size=4)


@given(levels, st.lists(st.sampled_from(["a", "b", "+"]), max_size=4), st.booleans())
def test_matching_is_mqtt_topic_filter_matching(fired, pattern, multi) -> None:
    # The topic filter a cluster controller subscribes with and the directory must agree:
    # otherwise a receiver would get what the broker never sends it, or miss what it does.
    subscriber = multicast_id("p", "b", pattern + (["*"] if multi else []), wildcards=True)
    topic = str(multicast_id("p", "b", fired))
    filter_levels = subscriber.topic().split("/")
    multi_level = filter_levels[-1] == "#"
    body = "/".join("[^/]+" if p == "+" else re.escape(p) for p in filter_levels[: -1 if multi_level else None])
    regex = "^" + body + ("(/.*)?" if multi_level else "") + "$"
    assert subscriber.matches(parse(topic)) is bool(re.match(regex, topic))


def test_the_directory_finds_receivers_by_pattern_and_forgets_them() -> None:
    d = MulticastReceiverDirectory()
    all_of_b = parse("p/b/*", wildcards=True)
    assert d.register(all_of_b, "r1") and d.register(parse("p/b/x"), "r2")
    assert not d.register(all_of_b, "r1")
    assert d.receivers(parse("p/b/x")) == {"r1", "r2"}
    assert d.receivers(parse("p/b/y")) == {"r1"}
    assert d.unregister(all_of_b, "r1") and not d.unregister(all_of_b, "r1")
    assert d.receivers(parse("p/b/y")) == set()


# -- a libjoynr runtime ------------------------------------------------------------------


def multicast(to: str = "prov/incremented", *, hops: int = 0, id: str = "m1"):
    return message(MULTICAST, to=to, sender="prov", hops=hops, id=id)


def test_libjoynr_delivers_locally_and_sends_what_its_provider_fired_to_its_cluster_controller() -> None:
    r = lib_router()
    in_process(r, "prov")
    skeleton = in_process(r, "proxy1")
    r.multicast.add_receiver(parse("prov/incremented"), "proxy1")
    actions = r.route(multicast())
    assert [a.recipient for a in actions if isinstance(a, Deliver)] == [skeleton]
    assert [a.address for a in actions if isinstance(a, Send)][-1] == CC_WS


def test_libjoynr_never_sends_a_multicast_back_to_its_cluster_controller() -> None:
    r = lib_router()
    r.table.put("prov", RoutingEntry(CC_WS, False, FOREVER), "registration")
    in_process(r, "proxy1")
    r.multicast.add_receiver(parse("prov/incremented"), "proxy1")
    actions = r.receive(multicast(), via="ws")
    assert not [a for a in actions if isinstance(a, Send) and a.address == CC_WS]
    assert len([a for a in actions if isinstance(a, Deliver)]) == 1


def test_a_multicast_is_delivered_once_to_each_receiver() -> None:
    r = lib_router()
    in_process(r, "prov")
    in_process(r, "proxy1")
    r.multicast.add_receiver(parse("prov/incremented"), "proxy1")
    r.route(multicast())
    again = r.route(multicast())
    assert [a.reason for a in again if isinstance(a, Drop)] == ["duplicate"]


def test_a_multicast_nobody_receives_is_a_recorded_drop() -> None:
    r = cc_router()
    actions = r.receive(multicast(), via="mqtt", gbid="gbid1")
    assert [a.reason for a in actions if isinstance(a, Drop)] == ["no-receivers"]


def test_a_malformed_multicast_id_is_an_invalid_message() -> None:
    r = cc_router()
    actions = r.receive(multicast(to="no-broadcast-name"), via="mqtt", gbid="gbid1")
    drops = [a for a in actions if isinstance(a, Drop)]
    assert [(d.reason, d.field) for d in drops] == [("invalid-message", "to")]


def test_an_expired_multicast_is_dropped() -> None:
    clock = Clock()
    r = cc_router(clock)
    msg = multicast()
    clock.now += 120_000
    assert [a.reason for a in r.route(msg) if isinstance(a, Drop)] == ["expired"]


# -- a cluster controller ---------------------------------------------------------------


def test_a_receiver_of_a_remote_provider_subscribes_its_topic_once() -> None:
    r = cc_router()
    r.table.put("prov", RoutingEntry(MqttAddress("gbid2", "cc9"), True, FOREVER), "gcd")
    in_process(r, "proxy1")
    in_process(r, "proxy2")
    assert r.multicast.add_receiver(parse("prov/incremented/*", wildcards=True), "proxy1") == [
        Subscribe("gbid2", "prov/incremented/#")
    ]
    assert r.multicast.add_receiver(parse("prov/incremented/*", wildcards=True), "proxy2") == []
    assert r.multicast.remove_receiver(parse("prov/incremented/*", wildcards=True), "proxy1") == []
    assert r.multicast.remove_receiver(parse("prov/incremented/*", wildcards=True), "proxy2") == [
        Unsubscribe("gbid2", "prov/incremented/#")
    ]


def test_a_receiver_of_a_local_provider_subscribes_nothing() -> None:
    r = cc_router()
    in_process(r, "prov")
    in_process(r, "proxy1")
    assert r.multicast.add_receiver(parse("prov/incremented"), "proxy1") == []


def test_a_receiver_of_an_unknown_provider_is_refused() -> None:
    with pytest.raises(MulticastError, match="no routing entry for provider"):
        cc_router().multicast.add_receiver(parse("prov/incremented"), "proxy1")


@pytest.mark.parametrize("visible, published", [(True, True), (False, False)])
def test_a_local_providers_multicast_goes_to_the_backends_only_when_it_is_globally_visible(visible, published) -> None:
    r = cc_router()
    r.table.put("prov", RoutingEntry(WebSocketClientAddress("lib1"), visible, FOREVER), "registration")
    actions = r.receive(multicast(), via="ws", source="lib1")
    sent = [a.address for a in actions if isinstance(a, Send)]
    expected = [MqttAddress("gbid1", "prov/incremented"), MqttAddress("gbid2", "prov/incremented")]
    assert sent == (expected if published else [])


def test_a_cluster_controller_sends_to_other_runtimes_receivers_but_not_back_to_the_source() -> None:
    r = cc_router()
    r.table.put("prov", RoutingEntry(WebSocketClientAddress("lib1"), False, FOREVER), "registration")
    r.table.put("proxyA", RoutingEntry(WebSocketClientAddress("lib1"), False, FOREVER), "registration")
    r.table.put("proxyB", RoutingEntry(WebSocketClientAddress("lib2"), False, FOREVER), "registration")
    r.multicast.add_receiver(parse("prov/incremented"), "proxyA")
    r.multicast.add_receiver(parse("prov/incremented"), "proxyB")
    actions = r.receive(multicast(), via="ws", source="lib1")
    assert [a.address for a in actions if isinstance(a, Send)] == [WebSocketClientAddress("lib2")]


# -- the echo between two cluster controllers ---------------------------------------------


def _echo_run(republish: bool) -> tuple[int, list[str]]:
    """Two cluster controllers on one backend: cc1 hosts the provider, cc2 a receiver.
    A tiny broker hands what is published on a topic to every router subscribed to it."""
    cc1, cc2 = cc_router(republish_received_multicasts=republish), cc_router(republish_received_multicasts=republish)
    in_process(cc1, "prov")
    cc1.table.put("prov", RoutingEntry(cc1.table.lookup("prov").address, True, FOREVER), "registration")
    cc2.table.put("prov", RoutingEntry(MqttAddress("gbid1", "cc9"), True, FOREVER), "gcd")
    in_process(cc2, "proxy")
    subscribed = {}
    for action in cc2.multicast.add_receiver(parse("prov/incremented"), "proxy"):
        subscribed.setdefault((action.gbid, action.topic), []).append(cc2)
    pending = [a for a in cc1.route(multicast()) if isinstance(a, Send)]
    deliveries, drops = 0, []
    while pending:
        send = pending.pop(0)
        for router in subscribed.get((send.address.broker_uri, send.address.topic), []):
            for a in router.receive(send.msg, via="mqtt", gbid=send.address.broker_uri):
                if isinstance(a, Send) and isinstance(a.address, MqttAddress):
                    pending.append(a)
                deliveries += isinstance(a, Deliver)
                drops += [a.reason] if isinstance(a, Drop) else []
    return deliveries, drops


def test_a_multicast_received_from_the_backend_is_never_published_back() -> None:
    assert _echo_run(republish=False) == (1, [])


def test_without_that_rule_a_multicast_echoes_until_the_hop_limit() -> None:
    deliveries, drops = _echo_run(republish=True)
    assert "hop-limit" in drops
    assert deliveries == 1  # delivered once, then only echoed: duplicates
    assert drops.count("duplicate") > 10
