"""The message router's rules, without a socket or an event loop."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from joynr_sim.core.actions import (
    Deliver,
    Drop,
    LearnRoute,
    Queue,
    Received,
    Resolve,
    Send,
)
from joynr_sim.core.address import (
    InProcessAddress,
    MqttAddress,
    WebSocketAddress,
    WebSocketClientAddress,
)
from joynr_sim.core.libjoynr_router import LibJoynrMessageRouter
from joynr_sim.core.message import ONE_WAY, REPLY, REQUEST, JoynrMessage, encode
from joynr_sim.core.router import CcMessageRouter
from joynr_sim.core.routing import RoutingEntry, RoutingTable

NOW = 1_000_000
FOREVER = 2**62
CC_WS = WebSocketAddress("WS", "127.0.0.1", 4242, "/")


NO_SHARE = 10**9  # a sender's share of the queue larger than the queue: its bounds alone


class Clock:
    def __init__(self) -> None:
        self.now = NOW

    def __call__(self) -> int:
        return self.now


def cc_router(clock: Clock | None = None, **kwargs) -> CcMessageRouter:
    clock = clock or Clock()
    table = RoutingTable(
        "cluster-controller", own_addresses=[MqttAddress("gbid1", "cc1"), MqttAddress("gbid2", "cc1")],
        known_gbids=["gbid1", "gbid2"], gcd_participant_id="gcd", clock=clock,
    )
    return CcMessageRouter(table, clock, own_topic="cc1", gbids=["gbid1", "gbid2"], **kwargs)


def lib_router(clock: Clock | None = None, **kwargs) -> LibJoynrMessageRouter:
    clock = clock or Clock()
    return LibJoynrMessageRouter(RoutingTable("libjoynr", clock=clock), clock, parent=CC_WS, **kwargs)


def message(type_: str = REQUEST, to: str = "provider", sender: str = "proxy", *, hops: int = 0,
            ttl: int = 60_000, reply_to=None, payload: bytes = b"x", id: str | None = None) -> JoynrMessage:
    kw = {"id": id} if id is not None else {}
    return JoynrMessage(type_, sender, to, NOW + ttl, payload, reply_to=reply_to, hops=hops, **kw)


def kinds(actions) -> list[str]:
    return [type(a).__name__ + (f":{a.reason}" if isinstance(a, (Drop, Queue)) else "") for a in actions]


def in_process(router, pid: str = "provider") -> object:
    skeleton = object()
    router.table.put(pid, RoutingEntry(InProcessAddress(skeleton), False, FOREVER), "registration")
    return skeleton


# -- hop limit -------------------------------------------------------------------------
@given(hops=st.integers(min_value=0, max_value=200), max_hops=st.integers(min_value=1, max_value=64))
def test_a_message_past_the_hop_limit_is_dropped_and_goes_no_further(hops: int, max_hops: int) -> None:
    router = cc_router(max_hops=max_hops)
    in_process(router)
    actions = router.receive(message(hops=hops), "ws", source="app1")
    assert isinstance(actions[0], Received) and actions[0].msg.hops == hops
    if hops + 1 > max_hops:
        assert kinds(actions) == ["Received", "Drop:hop-limit"]
        assert actions[1].msg.hops == hops + 1
    else:
        assert "Deliver" in kinds(actions)


# -- expiry ----------------------------------------------------------------------------
def test_an_expired_message_is_dropped_before_any_lookup() -> None:
    router = cc_router()
    in_process(router)
    assert kinds(router.route(message(ttl=-1))) == ["Drop:expired"]


def test_waiting_messages_expire_when_time_advances() -> None:
    clock = Clock()
    router = cc_router(clock)
    short, long = message(to="nobody", ttl=1_000), message(to="nobody", ttl=10_000)
    router.route(short)
    router.route(long)
    clock.now = NOW + 5_000
    actions = router.advance(clock.now)
    assert [(type(a), a.msg.id) for a in actions] == [(Drop, short.id)]
    assert router.queued("nobody") == 1


def test_advance_purges_expired_routing_entries() -> None:
    clock = Clock()
    router = cc_router(clock)
    router.table.put("old", RoutingEntry(MqttAddress("gbid1", "cc9"), True, NOW + 10), "reply-to")
    router.advance(NOW + 11)
    assert "old" not in router.table


# -- queue until a route appears -----------------------------------------------------------
def test_a_message_for_an_unknown_participant_waits_and_asks_once() -> None:
    router = cc_router()
    first, second = message(to="p"), message(to="p")
    assert kinds(router.route(first)) == ["Queue:no-route", "Resolve"]
    assert kinds(router.route(second)) == ["Queue:no-route"]  # one question at a time
    router.resolved("p")
    assert kinds(router.route(message(to="p"))) == ["Queue:no-route", "Resolve"]
    skeleton = in_process(router, "p")
    flushed = router.route_appeared("p")
    delivered = [a for a in flushed if isinstance(a, Deliver)]
    assert [a.msg.id for a in delivered][:2] == [first.id, second.id]  # in arrival order
    assert all(a.recipient is skeleton for a in delivered)
    assert router.queued() == 0


def test_a_router_without_discovery_queues_without_asking() -> None:
    router = cc_router(resolves=False)
    assert kinds(router.route(message(to="p"))) == ["Queue:no-route"]


@given(sizes=st.lists(st.integers(min_value=0, max_value=300), max_size=40),
       max_queued=st.integers(min_value=1, max_value=8), max_bytes=st.integers(min_value=1, max_value=1000))
def test_the_queue_is_bounded_and_every_message_is_accounted_for(sizes, max_queued, max_bytes) -> None:
    # One sender with no share of its own: the bounds of the queue itself.
    router = cc_router(max_queued=max_queued, max_queued_bytes=max_bytes, max_queued_per_sender=NO_SHARE,
                       resolves=False)
    sent = []
    dropped = []
    for n, size in enumerate(sizes):
        msg = message(to=f"p{n % 3}", payload=b"x" * size)
        sent.append(msg.id)
        for action in router.route(msg):
            if isinstance(action, Drop):
                assert action.reason == "queue-full"
                dropped.append(action.msg.id)
        assert router.queued() <= max_queued
        assert router.queued_bytes <= max_bytes
    waiting = []
    for pid in ("p0", "p1", "p2"):
        in_process(router, pid)
        waiting += [a.msg.id for a in router.route_appeared(pid) if isinstance(a, Deliver)]
    assert sorted(waiting + dropped) == sorted(sent)  # nothing lost without a trace
    assert router.queued_bytes == 0


def test_the_oldest_waiting_message_makes_room_first() -> None:
    router = cc_router(max_queued=2, max_queued_per_sender=NO_SHARE, resolves=False)
    a, b, c = message(to="p1"), message(to="p2"), message(to="p1")
    router.route(a)
    router.route(b)
    actions = router.route(c)
    assert [(type(x).__name__, x.msg.id) for x in actions] == [("Drop", a.id), ("Queue", c.id)]


# -- duplicates ------------------------------------------------------------------------
def test_a_message_is_delivered_once() -> None:
    router = cc_router()
    in_process(router)
    msg = message()
    assert kinds(router.route(msg)) == ["Send", "Deliver"]
    assert kinds(router.route(msg)) == ["Send", "Drop:duplicate"]


def test_a_resent_mqtt_copy_is_dropped_but_a_looping_message_goes_on() -> None:
    router = cc_router()
    router.table.put("provider", RoutingEntry(MqttAddress("gbid1", "cc2"), True, FOREVER), "gcd")
    msg = message(hops=3)
    assert kinds(router.receive(msg, "mqtt", "gbid1"))[0] == "Received"
    assert kinds(router.receive(msg, "mqtt", "gbid1")) == ["Drop:duplicate"]
    assert kinds(router.receive(message(hops=5, id=msg.id), "mqtt", "gbid1"))[0] == "Received"
    # Over WebSocket there are no broker re-sends to filter.
    assert kinds(router.receive(msg, "ws", source="app1"))[0] == "Received"


# -- reply-to learning -----------------------------------------------------------------------
def test_a_request_over_mqtt_teaches_a_route_on_the_gbid_it_arrived_on() -> None:
    router = cc_router()
    in_process(router)
    request = message(reply_to=MqttAddress("gbid-other", "cc2"), ttl=30_000)
    learned = [a for a in router.receive(request, "mqtt", "gbid2") if isinstance(a, LearnRoute)]
    assert learned and learned[0].outcome == "created"
    entry = router.table.lookup("proxy")
    assert entry == RoutingEntry(MqttAddress("gbid2", "cc2"), True, NOW + 30_000)


@given(mtype=st.sampled_from([REPLY, ONE_WAY, "p", "m", "srp", "sst"]))
def test_only_requests_teach_reply_to_routes(mtype: str) -> None:
    router = cc_router()
    in_process(router)
    router.receive(message(mtype, reply_to=MqttAddress("gbid1", "cc2")), "mqtt", "gbid1")
    assert "proxy" not in router.table


def test_a_request_over_websocket_from_an_unknown_sender_is_answered_on_its_connection() -> None:
    router = cc_router()
    in_process(router)
    router.receive(message(), "ws", source="app7")
    assert router.table.lookup("proxy").address == WebSocketClientAddress("app7")
    # A sender the table knows keeps its route.
    router.table.put("other", RoutingEntry(WebSocketClientAddress("app1"), False, FOREVER), "routing-provider")
    router.receive(message(sender="other"), "ws", source="app9")
    assert router.table.lookup("other").address == WebSocketClientAddress("app1")


def test_a_request_over_websocket_renews_the_route_an_earlier_shorter_one_taught() -> None:
    clock = Clock()
    router = cc_router(clock)
    in_process(router)
    router.receive(message(ttl=10_000), "ws", source="app7")
    assert router.table.lookup("proxy").expiry_date_ms == NOW + 10_000
    clock.now = NOW + 9_000  # still held: a longer-lived request extends it
    router.receive(message(ttl=30_000), "ws", source="app7")
    assert router.table.lookup("proxy").expiry_date_ms == NOW + 30_000
    assert router.table.purge_expired(NOW + 10_001) == []  # its reply finds the route
    clock.now = NOW + 30_001  # expired, not purged yet: the next request renews it
    router.receive(message(ttl=60_000), "ws", source="app7")
    assert router.table.lookup("proxy").expiry_date_ms == NOW + 60_000
    # A shorter-lived request changes nothing, and learns nothing anew.
    assert kinds(router.receive(message(ttl=1_000), "ws", source="app7")).count("LearnRoute") == 0
    assert router.table.lookup("proxy").expiry_date_ms == NOW + 60_000


def test_a_libjoynr_runtime_reaches_an_unknown_requester_through_its_cluster_controller() -> None:
    router = lib_router()
    in_process(router)
    router.receive(message(), "ws")
    assert router.table.lookup("proxy").address == CC_WS


# -- next hop --------------------------------------------------------------------------
def test_a_cluster_controller_sets_its_reply_to_on_requests_it_publishes() -> None:
    router = cc_router()
    router.table.put("provider", RoutingEntry(MqttAddress("gbid2", "cc2"), True, FOREVER), "gcd")
    (send,) = router.route(message())
    assert isinstance(send, Send) and send.gbid == "gbid2" and send.via == "mqtt"
    assert send.msg.reply_to == MqttAddress("gbid2", "cc1")
    (reply,) = router.route(message(REPLY))
    assert reply.msg.reply_to is None


def test_the_gcd_is_reached_on_the_backend_asked_for() -> None:
    router = cc_router()
    router.table.put("gcd", RoutingEntry(MqttAddress("gbid1", "gcd-topic"), False, FOREVER, True), "provisioned")
    (send,) = router.route(message(to="gcd"), gbid="gbid2")
    assert send.address == MqttAddress("gbid2", "gcd-topic")


def test_next_hops_a_cluster_controller_cannot_take_are_drops() -> None:
    router = cc_router()
    router.table.put("a", RoutingEntry(MqttAddress("gbid9", "cc2"), True, FOREVER), "local")
    router.table.put("b", RoutingEntry(CC_WS, False, FOREVER), "local")
    assert kinds(router.route(message(to="a"))) == ["Drop:unknown-gbid"]
    assert kinds(router.route(message(to="b"))) == ["Drop:no-connection"]
    assert kinds(router.send_failed(message(), WebSocketClientAddress("x"))) == ["Drop:no-connection"]


def test_a_libjoynr_runtime_sends_only_to_its_cluster_controller() -> None:
    router = lib_router()
    router.table.put("a", RoutingEntry(CC_WS, False, FOREVER), "routing-provider")
    router.table.put("b", RoutingEntry(MqttAddress("gbid1", "cc2"), True, FOREVER), "local")
    assert kinds(router.route(message(to="a"))) == ["Send"]
    assert kinds(router.route(message(to="b"))) == ["Drop:no-connection"]


# -- connections -------------------------------------------------------------------------
def test_a_libjoynr_runtime_holds_messages_while_its_cluster_controller_is_away() -> None:
    clock = Clock()
    router = lib_router(clock)
    kept, expiring = message(ttl=60_000), message(ttl=1_000)
    assert router.send_failed(kept, CC_WS) == [] and router.send_failed(expiring, CC_WS) == []
    assert router.held == 2
    clock.now = NOW + 2_000
    actions = router.connection_restored()
    assert [(type(a).__name__, a.msg.id) for a in actions] == [("Send", kept.id), ("Drop", expiring.id)]
    assert actions[0].resent and actions[0].address == CC_WS
    assert router.held == 0


def test_held_messages_expire_with_time() -> None:
    clock = Clock()
    router = lib_router(clock)
    router.send_failed(message(ttl=1_000), CC_WS)
    assert kinds(router.advance(NOW + 5_000)) == ["Drop:expired"]
    assert router.held == 0


def test_a_gone_client_keeps_its_routes_by_default() -> None:
    router = cc_router()
    router.table.put("p", RoutingEntry(WebSocketClientAddress("app1"), False, FOREVER), "routing-provider")
    assert router.client_gone("app1") == []
    assert router.table.lookup("p").address == WebSocketClientAddress("app1")


def test_a_gone_client_takes_its_non_sticky_routes_along_when_asked() -> None:
    router = cc_router(on_client_disconnect="remove")
    router.table.put("p", RoutingEntry(WebSocketClientAddress("app1"), False, FOREVER), "routing-provider")
    router.table.put("s", RoutingEntry(WebSocketClientAddress("app1"), False, FOREVER, True), "provisioned")
    router.table.put("q", RoutingEntry(WebSocketClientAddress("app2"), False, FOREVER), "routing-provider")
    router.client_gone("app1")
    assert "p" not in router.table and "s" in router.table and "q" in router.table


# -- frames ----------------------------------------------------------------------------
@given(data=st.binary(max_size=64))
def test_a_frame_is_a_message_or_a_decode_error_drop(data: bytes) -> None:
    decoded = lib_router().decode_frame(data, "ws")
    if isinstance(decoded, Drop):
        assert decoded.reason == "decode-error" and decoded.msg is None and decoded.detail
    else:
        assert isinstance(decoded, JoynrMessage)


def test_a_text_frame_is_no_message() -> None:
    decoded = lib_router().decode_frame(encode(message()).decode("latin-1"), "ws")
    assert isinstance(decoded, Drop) and "binary" in decoded.detail


def test_every_unanswered_participant_is_asked_for_once_per_wait() -> None:
    router = lib_router()
    asks = [a for n in range(5) for a in router.route(message(to=f"p{n % 2}")) if isinstance(a, Resolve)]
    assert sorted(a.participant_id for a in asks) == ["p0", "p1"]


def test_an_internal_provider_takes_calls_only_from_its_own_runtime() -> None:
    router = cc_router()
    in_process(router, "routing")
    router.local_only.add("routing")
    refused = router.receive(message(to="routing", reply_to=MqttAddress("gbid1", "x")), "mqtt", "gbid1")
    assert kinds(refused)[-2:] == ["Drop:not-permitted", "Reject"]
    assert kinds(router.receive(message(ONE_WAY, to="routing"), "mqtt", "gbid1"))[-1] == "Drop:not-permitted"
    # Its own runtimes call it over WebSocket; the replies to its own calls come from anywhere.
    assert kinds(router.receive(message(to="routing"), "ws", source="app1"))[-1] == "Deliver"
    assert kinds(router.receive(message(REPLY, to="routing"), "mqtt", "gbid1"))[-1] == "Deliver"


def test_a_message_from_the_cluster_controller_is_never_sent_back() -> None:
    router = lib_router()
    # A proxy of the previous run made a route to the provider through the cluster controller.
    router.table.put("provider", RoutingEntry(CC_WS, False, FOREVER), "discovery")
    msg = message()
    # (the requester is learnt as reachable through the cluster controller, as before)
    assert kinds(router.receive(msg, "ws")) == ["Received", "LearnRoute", "Queue:no-route"]  # no Send
    assert kinds(router.receive(message(REPLY, to="nobody"), "ws")) == ["Received", "Queue:no-route"]  # no Resolve
    skeleton = in_process(router)  # the provider registers again
    delivered = router.route_appeared("provider")
    assert [(type(a).__name__, a.msg.id) for a in delivered][-1] == ("Deliver", msg.id)
    assert delivered[-1].recipient is skeleton
    # Its own participants' messages still go to the cluster controller.
    assert kinds(router.route(message(to="nobody-else", sender="provider"))) == ["Queue:no-route", "Resolve"]


def test_the_unfixed_runtime_sends_it_back() -> None:
    router = lib_router(route_back_to_parent=True)
    router.table.put("provider", RoutingEntry(CC_WS, False, FOREVER), "discovery")
    send = router.receive(message(hops=3), "ws")[-1]
    assert isinstance(send, Send) and send.address == CC_WS and send.msg.hops == 4
