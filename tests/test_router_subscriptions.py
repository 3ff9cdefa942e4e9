"""The routes a subscription request teaches: its subscriber's publications come long after
the request expired, so the route lives as long as the subscription (the router does not
read it: it does not expire); a plain request's route lives as long as the request. And why
a cluster controller withholds a multicast from its backends."""

from __future__ import annotations

import pytest

from joynr_sim.core.actions import Send, Withhold
from joynr_sim.core.address import MqttAddress, WebSocketClientAddress
from joynr_sim.core.message import (
    BROADCAST_SUBSCRIPTION_REQUEST,
    MULTICAST,
    MULTICAST_SUBSCRIPTION_REQUEST,
    REQUEST,
    SUBSCRIPTION_REQUEST,
)
from joynr_sim.core.router import SUBSCRIBER_ROUTE_EXPIRY_MS
from joynr_sim.core.routing import RoutingEntry
from test_router import CC_WS, NOW, cc_router, lib_router, message


@pytest.mark.parametrize("type_, lives", [
    (SUBSCRIPTION_REQUEST, SUBSCRIBER_ROUTE_EXPIRY_MS),
    (BROADCAST_SUBSCRIPTION_REQUEST, SUBSCRIBER_ROUTE_EXPIRY_MS),
    (MULTICAST_SUBSCRIPTION_REQUEST, NOW + 60_000),  # a multicast's publications take no route back
    (REQUEST, NOW + 60_000),
])
def test_a_subscription_request_teaches_a_route_for_the_subscription(type_, lives):
    cc = cc_router()
    cc.table.put("provider", RoutingEntry(WebSocketClientAddress("app"), True, 2**62), "registration")
    cc.receive(message(type_, reply_to=MqttAddress("gbid1", "cc2")), "mqtt", "gbid1")
    assert cc.table.lookup("proxy") == RoutingEntry(MqttAddress("gbid1", "cc2"), True, lives)
    cc.advance(NOW + 120_000)  # the request is long gone; a subscriber's route is not
    assert (cc.table.lookup("proxy") is not None) == (lives == SUBSCRIBER_ROUTE_EXPIRY_MS)

    ws = cc_router()
    ws.table.put("provider", RoutingEntry(WebSocketClientAddress("app"), True, 2**62), "registration")
    ws.receive(message(type_, sender="local-proxy"), "ws", source="app2")
    assert ws.table.lookup("local-proxy") == RoutingEntry(WebSocketClientAddress("app2"), False, lives)


@pytest.mark.parametrize("type_", [SUBSCRIPTION_REQUEST, BROADCAST_SUBSCRIPTION_REQUEST,
                                   MULTICAST_SUBSCRIPTION_REQUEST, REQUEST])
def test_a_libjoynr_runtime_reaches_a_subscriber_through_its_cluster_controller(type_):
    lib = lib_router()
    lib.receive(message(type_), "ws")
    entry = lib.table.lookup("proxy")
    assert entry is not None and entry.address == CC_WS  # its reply need not ask the cluster controller


@pytest.mark.parametrize("via, entry, republish, withheld", [
    ("mqtt", RoutingEntry(MqttAddress("gbid1", "cc2"), True, 2**62), False, ["received-from-backend"]),
    ("mqtt", RoutingEntry(MqttAddress("gbid1", "cc2"), True, 2**62), True, []),  # the echoing rule set
    ("ws", RoutingEntry(WebSocketClientAddress("lib1"), False, 2**62), False, ["provider-not-visible"]),
    ("ws", RoutingEntry(WebSocketClientAddress("lib1"), True, 2**62), False, []),
    ("ws", None, False, ["provider-unknown"]),
])
def test_a_cluster_controller_says_why_it_withholds_a_multicast(via, entry, republish, withheld):
    cc = cc_router(republish_received_multicasts=republish)
    if entry is not None:
        cc.table.put("prov", entry, "registration")
    fired = message(MULTICAST, to="prov/incremented", sender="prov")
    actions = cc.receive(fired, via, "gbid1" if via == "mqtt" else None, source="lib1" if via == "ws" else None)
    assert [a.reason for a in actions if isinstance(a, Withhold)] == withheld
    published = [a for a in actions if isinstance(a, Send) and isinstance(a.address, MqttAddress)]
    assert bool(published) == (not withheld)
