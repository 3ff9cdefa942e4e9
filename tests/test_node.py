"""The nodes (``joynr_sim.core.node``): each call answers with the actions to carry out, with
no socket, no event loop and no trace."""

from __future__ import annotations

from joynr_sim.clock import RuntimeClock, SimClock
from joynr_sim.core.actions import Deliver, Drop, Queue, Received, Resolve, Send
from joynr_sim.core.address import InProcessAddress, MqttAddress, WebSocketAddress, WebSocketClientAddress
from joynr_sim.core.message import REQUEST, JoynrMessage, encode
from joynr_sim.core.node import ClusterControllerNode, GcdNode, LibJoynrNode
from joynr_sim.core.routing import RoutingEntry

NOW = 1_000_000
FOREVER = 2**62
CC_WS = WebSocketAddress("WS", "127.0.0.1", 4242, "/")


def clock() -> int:
    return NOW


def request(to: str = "provider", sender: str = "proxy") -> JoynrMessage:
    return JoynrMessage(REQUEST, sender, to, NOW + 60_000, b"x")


def kinds(actions) -> list[str]:
    return [type(a).__name__ for a in actions]


def test_a_frame_is_decoded_and_routed_in_one_call():
    node = ClusterControllerNode("cc1", ["gbid1"], clock)
    node.add_next_hop("provider", RoutingEntry(InProcessAddress("skeleton"), False, FOREVER), "registration")
    actions = node.receive_frame(encode(request()), "mqtt", "gbid1")
    assert kinds(actions) == ["Received", "Send", "Deliver"]
    assert isinstance(actions[0], Received) and actions[0].gbid == "gbid1"
    assert isinstance(actions[2], Deliver) and actions[2].recipient == "skeleton"


def test_a_frame_that_is_no_message_is_one_drop_with_its_reason():
    node = ClusterControllerNode("cc1", ["gbid1"], clock)
    (drop,) = node.receive_frame(b"\x00garbage", "mqtt", "gbid1")
    assert isinstance(drop, Drop) and drop.msg is None and drop.reason == "decode-error" and drop.gbid == "gbid1"
    (drop,) = node.receive_frame("text, not bytes", "ws")
    assert isinstance(drop, Drop) and drop.via == "ws"


def test_a_route_added_sends_what_waited_for_it_in_the_same_call():
    node = ClusterControllerNode("cc1", ["gbid1"], clock, resolves=False)
    waiting = node.route(request(to="late"))
    assert kinds(waiting) == ["Queue"] and isinstance(waiting[0], Queue)
    assert node.queued("late") == 1
    result, sends = node.add_next_hop("late", RoutingEntry(MqttAddress("gbid1", "cc2"), False, FOREVER), "gcd")
    assert result.outcome == "created"
    assert kinds(sends) == ["Send"] and sends[0].address == MqttAddress("gbid1", "cc2")
    assert node.queued() == 0


def test_a_cluster_controller_asks_discovery_and_a_gcd_does_not():
    cc = ClusterControllerNode("cc1", ["gbid1"], clock)
    assert Resolve in {type(a) for a in cc.route(request(to="unknown"))}
    gcd = GcdNode("gbid1", clock)
    assert gcd.kind == "gcd" and Resolve not in {type(a) for a in gcd.route(request(to="unknown"))}
    assert gcd.table.lookup("unknown") is None


def test_a_lost_client_takes_its_routes_only_where_the_rule_set_says_so():
    for rule, left in (("keep", True), ("remove", False)):
        node = ClusterControllerNode("cc1", ["gbid1"], clock, on_client_disconnect=rule)
        node.add_next_hop("app-provider", RoutingEntry(WebSocketClientAddress("app"), False, FOREVER),
                          "routing-provider")
        assert node.connection_lost("app") == []
        assert (node.table.lookup("app-provider") is not None) is left


def test_a_libjoynr_node_holds_for_its_cluster_controller_and_sends_when_it_is_back():
    node = LibJoynrNode(CC_WS, clock)
    node.add_next_hop("remote", RoutingEntry(CC_WS, False, FOREVER), "routing-provider")
    (send,) = node.route(request(to="remote"))
    assert isinstance(send, Send) and send.address == CC_WS
    assert node.send_failed(send.msg, CC_WS) == []  # held, not dropped
    (again,) = node.connection_restored()
    assert isinstance(again, Send) and again.resent and again.msg.id == send.msg.id
    assert node.connection_restored() == []


def test_a_graceful_stop_says_what_was_counted():
    node = ClusterControllerNode("cc1", ["gbid1"], clock)
    assert node.closing() == []


def test_a_cluster_controller_whose_clock_runs_ahead_by_the_ttl_drops_a_request_as_expired():
    """joynr's expiry dates are absolute: the sender stamps its now plus the TTL, and a
    receiver whose clock is ahead by the TTL judges the request dead on arrival."""
    run = SimClock(source=clock)
    sender, cc_clock = RuntimeClock(run), RuntimeClock(run)
    cc = ClusterControllerNode("cc1", ["gbid1"], cc_clock)
    cc.add_next_hop("provider", RoutingEntry(InProcessAddress("skeleton"), False, FOREVER), "registration")
    ttl = 60_000

    def sent() -> JoynrMessage:
        return JoynrMessage(REQUEST, "proxy", "provider", sender() + ttl, b"x")

    assert kinds(cc.receive_frame(encode(sent()), "mqtt", "gbid1")) == ["Received", "Send", "Deliver"]
    cc_clock.set_skew(ttl)  # exactly the TTL ahead: the expiry date is now, not yet past
    assert kinds(cc.receive_frame(encode(sent()), "mqtt", "gbid1"))[-1] == "Deliver"
    cc_clock.set_skew(ttl + 1)
    late = sent()
    received, drop = cc.receive_frame(encode(late), "mqtt", "gbid1")
    assert isinstance(received, Received) and isinstance(drop, Drop) and drop.reason == "expired"
    assert (drop.msg.id, drop.msg.expiry_date_ms, drop.now) == (late.id, NOW + ttl, NOW + ttl + 1)
    cc_clock.set_skew(-ttl)  # a clock behind takes what is dead by the run's time
    dead = JoynrMessage(REQUEST, "proxy", "provider", run() - 1, b"x")
    assert kinds(cc.receive_frame(encode(dead), "mqtt", "gbid1"))[-1] == "Deliver"


def test_what_expired_while_waiting_for_a_route_says_when_it_was_judged():
    node = ClusterControllerNode("cc1", ["gbid1"], clock, resolves=False)
    node.route(request(to="late"))
    (drop,) = node.tick(NOW + 60_001)
    assert isinstance(drop, Drop) and (drop.reason, drop.msg.expiry_date_ms, drop.now) == (
        "expired", NOW + 60_000, NOW + 60_001)
