"""The rules of joynr_sim/core/multicast.py its other unit tests left unchecked (make mutate):
the bounds of a multicast id, which actions name which message, a receiver without a route,
and the directory's views."""

from __future__ import annotations

import pytest

from joynr_sim.core.actions import Deliver, Drop, Send, Withhold
from joynr_sim.core.address import InProcessAddress, MqttAddress, WebSocketAddress, WebSocketClientAddress
from joynr_sim.core.limits import WireLimits
from joynr_sim.core.message import MULTICAST, JoynrMessage
from joynr_sim.core.multicast import (
    MAX_PARTITIONS,
    MulticastError,
    MulticastReceiverDirectory,
    MulticastRouting,
    multicast_id,
    parse,
)
from joynr_sim.core.routing import RoutingEntry, RoutingTable

NOW = 1_000_000
FOREVER = 2**62
PARENT = WebSocketAddress("WS", "127.0.0.1", 4242, "/")


class Clock:
    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> int:
        return self.now


def routing(kind: str = "cc", *, clock: Clock | None = None, **kwargs) -> MulticastRouting:
    clock = clock or Clock()
    table = RoutingTable("cluster-controller" if kind == "cc" else "libjoynr", clock=clock)
    if kind == "libjoynr":
        kwargs.setdefault("parent", PARENT)
    return MulticastRouting(table, clock, kind=kind, gbids=("gbid1",), **kwargs)


def put(r: MulticastRouting, pid: str, address, visible: bool = False) -> None:
    r.table.put(pid, RoutingEntry(address, visible, FOREVER), "registration")


def in_process(r: MulticastRouting, pid: str) -> object:
    skeleton = object()
    put(r, pid, InProcessAddress(skeleton))
    return skeleton


def fired(to: str = "prov/incremented", *, expiry: int = NOW + 60_000, id: str = "m1") -> JoynrMessage:
    return JoynrMessage(MULTICAST, "prov", to, expiry, b"x", id=id)


# -- multicast ids --------------------------------------------------------------------------


def test_a_provider_fires_no_wildcard_unless_wildcards_are_asked_for() -> None:
    for bad in (["+"], ["*"]):
        with pytest.raises(MulticastError):
            multicast_id("prov", "incremented", bad)
        with pytest.raises(MulticastError):
            parse("prov/incremented/" + bad[0])
    assert parse("prov/incremented/+", wildcards=True).has_wildcard


def test_at_most_max_partitions() -> None:
    assert len(multicast_id("prov", "b", ["p"] * MAX_PARTITIONS).partitions) == MAX_PARTITIONS
    with pytest.raises(MulticastError):
        multicast_id("prov", "b", ["p"] * (MAX_PARTITIONS + 1))


def test_every_partition_after_a_wildcard_is_checked_too() -> None:
    with pytest.raises(MulticastError, match="partition 1"):
        multicast_id("prov", "b", ["+", "not-alnum"], wildcards=True)


def test_a_bad_provider_id_names_the_provider() -> None:
    with pytest.raises(MulticastError, match="^provider: "):
        multicast_id("", "b")


def test_the_limits_bound_the_provider_id_and_the_topic() -> None:
    small = WireLimits(max_id_bytes=4, max_topic_bytes=12)
    with pytest.raises(MulticastError):
        multicast_id("provider", "b", limits=small)
    with pytest.raises(MulticastError):
        parse("provider/b", limits=small)
    assert str(parse("prov/abcdefg", limits=small)) == "prov/abcdefg"  # exactly 12 bytes
    with pytest.raises(MulticastError):
        parse("prov/abcdefgh", limits=small)


def test_the_directory_lists_its_ids_and_the_receivers_registered_for_one() -> None:
    d = MulticastReceiverDirectory()
    exact, pattern = parse("prov/b/x"), parse("prov/b/+", wildcards=True)
    d.register(exact, "r1")
    d.register(pattern, "r2")
    assert sorted(map(str, d.ids())) == ["prov/b/+", "prov/b/x"]
    assert d.registered(exact) == {"r1"}
    assert d.registered(parse("prov/b/y")) == set()
    assert d.receivers(parse("prov/b/x")) == {"r1", "r2"}


# -- routing ----------------------------------------------------------------------------------


def test_by_default_a_cluster_controller_withholds_what_it_received_from_a_backend() -> None:
    r = routing()
    put(r, "prov", MqttAddress("gbid1", "cc9"), visible=True)
    msg = fired()
    assert r.route(msg, "mqtt") == [Withhold(msg, "received-from-backend"), Drop(msg, "no-receivers",
                                     detail="no receiver of multicast prov/incremented")]


def test_withholds_name_the_multicast() -> None:
    r = routing()
    msg = fired()
    assert Withhold(msg, "provider-unknown") in r.route(msg, "inprocess")
    put(r, "prov", WebSocketClientAddress("lib1"), visible=False)
    assert Withhold(msg, "provider-not-visible") in r.route(msg, "ws", source="lib1")


def test_libjoynr_sends_the_multicast_itself_to_its_cluster_controller() -> None:
    r = routing("libjoynr")
    in_process(r, "prov")
    msg = fired()
    assert Send(msg, PARENT) in r.route(msg, "inprocess")


def test_an_invalid_multicast_id_is_dropped_with_the_transport_it_came_over() -> None:
    r = routing()
    msg = fired("no-broadcast")
    [drop] = r.route(msg, "mqtt")
    assert (drop.msg, drop.reason, drop.via, drop.field) == (msg, "invalid-message", "mqtt", "to")
    assert drop.detail


def test_the_router_limits_bound_the_multicast_id() -> None:
    r = routing(limits=WireLimits(max_topic_bytes=8))
    [drop] = r.route(fired("prov/incremented"), "inprocess")
    assert drop.reason == "invalid-message"


def test_a_multicast_expires_after_its_expiry_date_not_at_it() -> None:
    clock = Clock()
    r = routing(clock=clock)
    in_process(r, "prov")
    in_process(r, "proxy")
    r.add_receiver(parse("prov/incremented"), "proxy")
    assert any(isinstance(a, Deliver) for a in r.route(fired(expiry=NOW), "mqtt"))
    msg = fired(expiry=NOW - 1, id="m2")
    assert r.route(msg, "mqtt") == [Drop(msg, "expired", now=NOW)]


def test_a_receiver_without_a_routing_entry_is_a_no_route_drop_and_the_others_still_receive() -> None:
    r = routing("libjoynr")
    in_process(r, "prov")
    skeleton = in_process(r, "zz-proxy")
    directory_only = parse("prov/incremented")
    r.add_receiver(directory_only, "zz-proxy")
    r.directory.register(directory_only, "a-gone")  # its routing entry went, its registration stayed
    msg = fired()
    actions = r.route(msg, "inprocess")
    drops = [a for a in actions if isinstance(a, Drop)]
    assert [(d.msg, d.reason) for d in drops] == [(msg, "no-route")]
    assert Deliver(msg, skeleton) in actions


def test_each_receiver_in_process_gets_the_multicast_itself_once() -> None:
    r = routing("libjoynr")
    in_process(r, "prov")
    skeletons = [in_process(r, f"proxy{n}") for n in (1, 2)]
    for n in (1, 2):
        r.add_receiver(parse("prov/incremented"), f"proxy{n}")
    msg = fired()
    actions = r.route(msg, "inprocess")
    assert [a for a in actions if isinstance(a, Deliver)] == [Deliver(msg, s) for s in skeletons]
    sends = [a for a in actions if isinstance(a, Send)]
    assert all(a.msg is msg for a in sends)
    assert [a.address for a in sends if isinstance(a.address, InProcessAddress)] == [
        InProcessAddress(s) for s in skeletons
    ]


def test_a_cluster_controller_sends_to_its_websocket_receivers_the_multicast_itself() -> None:
    r = routing()
    put(r, "prov", MqttAddress("gbid1", "cc9"), visible=True)
    put(r, "proxyB", WebSocketClientAddress("lib2"))
    r.add_receiver(parse("prov/incremented"), "proxyB")
    msg = fired()
    assert Send(msg, WebSocketClientAddress("lib2")) in r.route(msg, "mqtt")


def test_a_receiver_behind_another_cluster_controller_gets_no_send_of_its_own() -> None:
    r = routing()
    put(r, "prov", WebSocketClientAddress("lib1"), visible=False)
    put(r, "remote-proxy", MqttAddress("gbid1", "cc9"))
    r.directory.register(parse("prov/incremented"), "remote-proxy")
    msg = fired()
    actions = r.route(msg, "ws", source="lib1")
    assert not [a for a in actions if isinstance(a, Send)]
    assert [(a.msg, a.reason) for a in actions if isinstance(a, Drop)] == [(msg, "no-receivers")]


def test_a_libjoynr_runtime_without_a_parent_sends_nothing_onward() -> None:
    r = routing("libjoynr", parent=None)
    msg = fired()
    assert r.route(msg, "inprocess") == [Drop(msg, "no-receivers", detail="no receiver of multicast prov/incremented")]


def test_subscribed_topics_are_sorted() -> None:
    r = routing()
    for prov, gbid in (("provB", "gbid2"), ("provA", "gbid1")):
        put(r, prov, MqttAddress(gbid, "cc9"), visible=True)
    in_process(r, "proxy")
    r.add_receiver(parse("provB/b"), "proxy")
    r.add_receiver(parse("provA/b"), "proxy")
    assert r.subscribed_topics() == [("gbid1", "provA/b"), ("gbid2", "provB/b")]


def test_a_kind_other_than_cc_or_libjoynr_is_refused() -> None:
    with pytest.raises(ValueError):
        routing("broker")


def test_a_multicast_delivered_again_is_a_duplicate_of_that_multicast() -> None:
    r = routing("libjoynr")
    in_process(r, "prov")
    in_process(r, "proxy")
    r.add_receiver(parse("prov/incremented"), "proxy")
    msg = fired()
    r.route(msg, "inprocess")
    assert Drop(msg, "duplicate") in r.route(msg, "inprocess")
