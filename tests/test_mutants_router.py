"""The rules of joynr_sim/core/router.py its other unit tests left unchecked (make mutate):
the whole of each action a router returns (which message, over which transport and GBID,
with which field), the bookkeeping of a sender's lookups, and routes learned from requests."""

from __future__ import annotations

from joynr_sim.core.actions import Deliver, Drop, LearnRoute, Queue, Received, Reject, Resolve, Send, Withhold
from joynr_sim.core.address import InProcessAddress, MqttAddress, WebSocketClientAddress
from joynr_sim.core.limits import WireLimits
from joynr_sim.core.message import MULTICAST, ONE_WAY, REQUEST, encode
from joynr_sim.core.router import CcMessageRouter
from joynr_sim.core.routing import RoutingEntry, RoutingTable
from test_router import CC_WS, FOREVER, NOW, Clock, cc_router, in_process, lib_router, message

REMOTE = MqttAddress("gbid1", "cc9")


def test_a_decode_error_names_the_transport_the_backend_and_the_field() -> None:
    router = cc_router()
    drop = router.decode_frame(b"\x00not a message", "mqtt", "gbid2")
    assert (drop.msg, drop.via, drop.gbid) == (None, "mqtt", "gbid2")
    assert drop.field is not None or drop.reason == "malformed"


def test_the_routers_limits_bound_what_a_frame_may_carry() -> None:
    frame = encode(message(to="p" * 50, id="m" * 50))
    assert not isinstance(cc_router().decode_frame(frame, "mqtt"), Drop)
    drop = cc_router(limits=WireLimits(max_id_bytes=40)).decode_frame(frame, "mqtt", "gbid1")
    assert isinstance(drop, Drop) and drop.field == "id" and drop.gbid == "gbid1"


def test_a_received_message_is_recorded_as_it_arrived() -> None:
    router = cc_router()
    in_process(router, "provider")
    msg = message(type_=ONE_WAY)
    actions = router.receive(msg, "mqtt", gbid="gbid2")
    assert actions[0] == Received(msg, "mqtt", "gbid2")


def test_a_resent_mqtt_copy_is_a_duplicate_of_its_transport_and_backend() -> None:
    router = cc_router()
    in_process(router, "provider")
    msg = message(type_=ONE_WAY)
    router.receive(msg, "mqtt", gbid="gbid1")
    assert router.receive(msg, "mqtt", gbid="gbid1") == [Drop(msg, "duplicate", via="mqtt", gbid="gbid1")]


def test_a_next_hop_on_an_unknown_backend_is_dropped_naming_it() -> None:
    router = cc_router()
    router.table.put("a", RoutingEntry(MqttAddress("gbid9", "cc2"), True, FOREVER), "local")
    msg = message(to="a", type_=ONE_WAY)
    assert router.route(msg) == [Drop(msg, "unknown-gbid", via="mqtt", gbid="gbid9")]


def test_a_cluster_controller_sends_the_message_itself_to_an_mqtt_or_websocket_client_hop() -> None:
    router = cc_router()
    router.table.put("a", RoutingEntry(REMOTE, True, FOREVER), "local")
    router.table.put("b", RoutingEntry(WebSocketClientAddress("lib1"), False, FOREVER), "local")
    one_way = message(to="a", type_=ONE_WAY)
    assert router.route(one_way) == [Send(one_way, REMOTE)]
    to_client = message(to="b")
    assert router.route(to_client) == [Send(to_client, WebSocketClientAddress("lib1"))]


def test_a_cluster_controller_cannot_connect_to_a_websocket_server() -> None:
    router = cc_router()
    router.table.put("b", RoutingEntry(CC_WS, False, FOREVER), "local")
    msg = message(to="b")
    assert router.route(msg) == [Drop(msg, "no-connection", via="ws")]


def test_a_request_over_websocket_without_a_source_teaches_no_route() -> None:
    router = cc_router()
    in_process(router, "provider")
    actions = router.receive(message(sender="anon"), "ws", source=None)
    assert not [a for a in actions if isinstance(a, LearnRoute)]
    assert "anon" not in router.table


def test_a_request_from_the_same_connection_with_the_same_expiry_teaches_nothing_new() -> None:
    router = cc_router()
    in_process(router, "provider")
    first = router.receive(message(sender="lib-proxy", id="r1"), "ws", source="lib1")
    entry = RoutingEntry(WebSocketClientAddress("lib1"), False, NOW + 60_000)
    assert [a for a in first if isinstance(a, LearnRoute)] == [LearnRoute("lib-proxy", entry, "created")]
    again = router.receive(message(sender="lib-proxy", id="r2"), "ws", source="lib1")
    assert not [a for a in again if isinstance(a, LearnRoute)]


def test_a_learned_route_sends_what_waited_for_the_requester() -> None:
    router = cc_router()
    in_process(router, "provider")
    waiting = message(to="requester", sender="provider", type_=ONE_WAY)
    router.route(waiting)
    actions = router.receive(message(sender="requester", reply_to=REMOTE), "mqtt", gbid="gbid1")
    assert Send(waiting, REMOTE) in actions


def test_a_refused_route_leaves_the_waiting_messages_waiting() -> None:
    router = cc_router()
    waiting = message(to="q", type_=ONE_WAY)
    router.route(waiting)
    result, actions = router.add_next_hop("q", RoutingEntry(REMOTE, True, FOREVER), "reply-to")
    assert result.outcome == "created" and actions == [Send(waiting, REMOTE)]
    router.route(message(to="p2"))
    router.table.put("p2", RoutingEntry(REMOTE, True, FOREVER, True), "provisioned")  # sticky
    refused, nothing = router.add_next_hop("p2", RoutingEntry(WebSocketClientAddress("x"), False, FOREVER), "reply-to")
    assert refused.outcome == "refused" and nothing == []
    assert router.queued("p2") == 1


def test_add_next_hop_offers_the_route_with_its_origin() -> None:
    router = cc_router()
    result, _ = router.add_next_hop("p", RoutingEntry(REMOTE, True, FOREVER), "gcd")
    assert result.outcome == "created"
    # The origin decides what may replace the route later: a gcd route gives way to a
    # registration of the same participant.
    local, _ = router.add_next_hop("p", RoutingEntry(WebSocketClientAddress("lib1"), False, FOREVER), "registration")
    assert local.outcome == "replaced"


# -- a sender's share ------------------------------------------------------------------------


def test_a_sender_past_its_lookups_is_refused_where_its_message_came_from() -> None:
    router = cc_router(max_lookups_per_sender=1)
    first, second = message(to="p1", sender="s"), message(to="p2", sender="s")
    assert router.receive(first, "mqtt", gbid="gbid1")[-1] == Resolve("p1")
    [drop] = router.receive(second, "mqtt", gbid="gbid2")
    assert (drop.msg, drop.reason, drop.via, drop.gbid) == (second, "sender-limit", "mqtt", "gbid2")


def test_a_local_sender_past_its_lookups_is_refused_too() -> None:
    router = cc_router(max_lookups_per_sender=1)
    router.route(message(to="p1", sender="s"), via="ws")
    second = message(to="p2", sender="s")
    [drop] = router.route(second, via="ws")
    assert (drop.msg, drop.reason, drop.via) == (second, "sender-limit", "ws")


def test_a_lookup_that_ended_gives_the_sender_its_share_back() -> None:
    router = cc_router(max_lookups_per_sender=1)
    router.route(message(to="p1", sender="s"))
    router.resolved("p1")
    assert router.route(message(to="p2", sender="s"))[-1] == Resolve("p2")


def test_a_waiting_message_is_routed_as_from_the_transport_it_came_over() -> None:
    router = cc_router()
    router.local_only.add("internal")
    call = message(to="internal", sender="s")
    assert Queue(call.with_hop()) in router.receive(call, "mqtt", gbid="gbid1")
    in_process(router, "internal")
    actions = router.route_appeared("internal")
    assert [(a.reason, a.via) for a in actions if isinstance(a, Drop)] == [("not-permitted", "mqtt")]
    assert [type(a) for a in actions] == [Drop, Reject]


def test_queued_counts_the_messages_of_one_participant() -> None:
    router = cc_router(resolves=False)
    router.route(message(to="a"))
    router.route(message(to="b"))
    router.route(message(to="b"))
    assert (router.queued("a"), router.queued("b"), router.queued()) == (1, 2, 3)


def test_a_muted_senders_window_is_summed_up_when_time_advances() -> None:
    clock = Clock()
    router = cc_router(clock)
    router.shares.traced_drops = 1
    in_process(router, "provider")
    expired = message(ttl=-1, type_=ONE_WAY)
    assert [type(a) for a in router.receive(expired, "mqtt", gbid="gbid1")] == [Received, Drop]
    assert router.receive(message(type_=ONE_WAY, id="m2"), "mqtt", gbid="gbid1") == []  # muted
    clock.now = NOW + router.shares.window_ms
    [summary] = router.advance(clock.now)
    assert (summary.reason, summary.sender, summary.count) == ("sender-limit", "proxy", 1)


def test_a_sender_is_muted_only_within_its_window() -> None:
    clock = Clock()
    router = cc_router(clock)
    router.shares.traced_drops = 1
    in_process(router, "provider")
    router.receive(message(ttl=-1, type_=ONE_WAY), "mqtt", gbid="gbid1")
    clock.now = NOW + router.shares.window_ms
    assert router.receive(message(type_=ONE_WAY, id="m2", ttl=60_000 + router.shares.window_ms), "mqtt",
                          gbid="gbid1")


def test_a_libjoynr_runtime_sends_a_request_to_its_cluster_controller_as_it_is() -> None:
    router = lib_router()
    router.table.put("a", RoutingEntry(CC_WS, False, FOREVER), "routing-provider")
    msg = message(to="a", type_=REQUEST)
    assert router.route(msg) == [Send(msg, CC_WS)]


def test_a_cluster_controller_withholds_received_multicasts_by_default() -> None:
    router = cc_router()
    router.table.put("prov", RoutingEntry(REMOTE, True, FOREVER), "gcd")
    msg = message(MULTICAST, to="prov/fired", sender="prov")
    assert Withhold(msg, "received-from-backend") in router.route(msg, via="mqtt")


def test_a_cluster_controllers_limits_bound_a_multicast_id_too() -> None:
    router = cc_router(limits=WireLimits(max_topic_bytes=8))
    [drop] = router.route(message(MULTICAST, to="prov/incremented", sender="prov"), via="mqtt")
    assert (drop.reason, drop.field) == ("invalid-message", "to")


def test_the_memory_of_received_copies_is_as_large_as_asked() -> None:
    router = cc_router(memory=1)
    in_process(router, "provider")
    first, second = message(type_=ONE_WAY, id="a"), message(type_=ONE_WAY, id="b")
    router.receive(first, "mqtt", gbid="gbid1")
    router.receive(second, "mqtt", gbid="gbid1")
    again = router.receive(first, "mqtt", gbid="gbid1")  # forgotten: taken as new
    assert again[0] == Received(first, "mqtt", "gbid1")


def test_a_message_from_the_parent_waits_without_a_lookup_or_a_share_of_lookups() -> None:
    router = lib_router(max_lookups_per_sender=1)
    assert router.route(message(to="p1", sender="s"))[-1] == Resolve("p1")
    from_parent = message(to="p2", sender="s")
    assert router.route(from_parent, via="ws") == [Queue(from_parent)]


def test_a_sender_with_its_lookups_under_way_still_reaches_a_known_recipient() -> None:
    router = cc_router(max_lookups_per_sender=1)
    skeleton = in_process(router, "known")
    router.route(message(to="p1", sender="s"))
    msg = message(to="known", sender="s", type_=ONE_WAY)
    actions = router.receive(msg, "mqtt", gbid="gbid1")
    assert [type(a).__name__ for a in actions] == ["Received", "Send", "Deliver"]
    assert actions[-1].recipient is skeleton


def test_a_sender_holding_its_share_of_the_queue_is_refused() -> None:
    router = cc_router(resolves=False, max_queued_per_sender=1)
    router.route(message(to="p1", sender="s"))
    other = message(to="p1", sender="t")
    assert router.route(other) == [Queue(other)]
    second = message(to="p2", sender="s")
    [drop] = router.route(second, via="ws")
    assert (drop.msg, drop.reason, drop.via) == (second, "sender-limit", "ws")


def test_a_route_offered_with_its_origin_is_judged_by_it() -> None:
    clock = Clock()
    table = RoutingTable("cluster-controller", policy="gcd-trust", clock=clock)
    router = CcMessageRouter(table, clock, own_topic="cc1", gbids=["gbid1"])
    router.add_next_hop("p", RoutingEntry(REMOTE, True, FOREVER), "gcd")
    moved = RoutingEntry(MqttAddress("gbid1", "cc7"), True, FOREVER)
    result, _ = router.add_next_hop("p", moved, "gcd")  # gcd-trust takes changed routes from the GCD only
    assert (result.outcome, result.entry) == ("replaced", moved)
    refused, _ = router.add_next_hop("p", RoutingEntry(MqttAddress("gbid1", "cc5"), True, FOREVER), "reply-to")
    assert refused.outcome == "refused"


def test_resolved_for_a_participant_never_asked_for_changes_nothing() -> None:
    router = cc_router(max_lookups_per_sender=1)
    router.resolved("never-asked")
    assert router.route(message(to="p1", sender="s"))[-1] == Resolve("p1")


def test_remove_next_hop_takes_the_route_out() -> None:
    router = cc_router()
    router.table.put("p", RoutingEntry(REMOTE, True, FOREVER), "gcd")
    assert router.remove_next_hop("p") == "removed"
    assert "p" not in router.table


def test_a_local_participants_call_reaches_an_internal_provider() -> None:
    router = cc_router()
    router.local_only.add("internal")
    skeleton = in_process(router, "internal")
    msg = message(to="internal")
    actions = router.route(msg)
    assert [type(a).__name__ for a in actions] == ["Send", "Deliver"]
    assert actions[0].msg is msg and actions[1].recipient is skeleton


def test_a_remote_call_to_an_internal_provider_is_refused_and_answered() -> None:
    router = cc_router()
    router.local_only.add("internal")
    in_process(router, "internal")
    msg = message(to="internal")
    drop, reject = router.route(msg, via="mqtt")
    assert (drop.msg, drop.reason, drop.via) == (msg, "not-permitted", "mqtt")
    assert reject.msg is msg and reject.detail


def test_an_in_process_delivery_and_its_duplicate_name_the_message() -> None:
    router = cc_router()
    skeleton = in_process(router, "provider")
    msg = message(type_=ONE_WAY)
    assert router.route(msg) == [Send(msg, InProcessAddress(skeleton)), Deliver(msg, skeleton)]
    assert router.route(msg) == [Send(msg, InProcessAddress(skeleton)), Drop(msg, "duplicate")]


def test_a_failed_send_is_a_drop_of_that_message_over_that_transport() -> None:
    msg = message()
    assert cc_router().send_failed(msg, WebSocketClientAddress("lib1"), "write-failed", "broken pipe") == [
        Drop(msg, "write-failed", via="ws", detail="broken pipe")
    ]


def test_a_frame_that_is_not_binary_is_refused_as_a_frame() -> None:
    drop = cc_router().decode_frame("a text frame", "ws")
    assert (drop.msg, drop.field, drop.via) == (None, "frame", "ws")
