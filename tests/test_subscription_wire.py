"""Subscription payloads on the wire and subscription requests on the control protocol:
hostile input is refused with the field it broke, before anything is sent or made."""

from __future__ import annotations

import msgpack
import pytest

from brokers import access
from joynr_sim.clock import SimClock
from joynr_sim.core.message import (
    BROADCAST_SUBSCRIPTION_REQUEST,
    MULTICAST_SUBSCRIPTION_REQUEST,
    SUBSCRIPTION_REQUEST,
)
from joynr_sim.core.subscription_wire import (
    SubscriptionPayloadError,
    SubscriptionRequest,
    decode_multicast,
    decode_publication,
    decode_reply,
    decode_request,
    decode_stop,
    encode_multicast,
    encode_publication,
    encode_reply,
    encode_request,
    encode_stop,
)
from joynr_sim.core.subscriptions import SubscriptionQos
from joynr_sim.host.rpc.dispatch import Host
from joynr_sim.host.rpc.framing import ProtocolError, request
from joynr_sim.host.rpc.ops import validate_request
from joynr_sim.runtime.participants import CounterProvider, ProxySkeleton
from joynr_sim.transport.mqtt import MULTICAST_TOPIC_PREFIX, multicast_topic


def test_payloads_survive_the_wire():
    qos = SubscriptionQos("on-change-keep-alive", min_interval_ms=10, max_interval_ms=100)
    for kind, req in [
        (SUBSCRIPTION_REQUEST, SubscriptionRequest("s1", "value", qos)),
        (BROADCAST_SUBSCRIPTION_REQUEST, SubscriptionRequest("s2", "reachedMultiple", qos, {"every": 3})),
        (MULTICAST_SUBSCRIPTION_REQUEST, SubscriptionRequest("s3", "incremented", qos, None, ("a", "+"))),
    ]:
        assert decode_request(encode_request(req, kind), kind) == req
    assert decode_reply(encode_reply("s1", "no")) == ("s1", "no")
    assert decode_stop(encode_stop("s1")) == "s1"
    assert decode_publication(encode_publication("s1", 7)) == ("s1", 7)
    assert decode_multicast(encode_multicast("x")) == "x"


def _pack(data) -> bytes:
    return msgpack.packb(data, use_bin_type=True)


GOOD = {"sid": "s", "name": "value", "qos": {"kind": "on-change"}}


@pytest.mark.parametrize("payload, field", [
    (b"\xc1", "pl"),
    (_pack([1, 2]), "pl"),
    (_pack({**GOOD, "extra": 1}), "pl"),
    (_pack({**GOOD, "sid": ""}), "sid"),
    (_pack({**GOOD, "sid": 5}), "sid"),
    (_pack({**GOOD, "name": "no such/name"}), "name"),
    (_pack({**GOOD, "qos": {"kind": "sometimes"}}), "qos"),
    (_pack({**GOOD, "qos": {"kind": "periodic", "period_ms": 0}}), "qos"),
    (_pack({**GOOD, "qos": {"kind": "on-change", "surprise": 1}}), "qos"),
    (_pack({**GOOD, "qos": {"kind": "on-change", "expiry_date_ms": "soon"}}), "qos"),
])
def test_a_hostile_subscription_request_names_its_field(payload, field):
    with pytest.raises(SubscriptionPayloadError) as err:
        decode_request(payload, SUBSCRIPTION_REQUEST)
    assert err.value.field == field


@pytest.mark.parametrize("extra, field", [
    ({"filter": {"every": [1]}}, "filter"),
    ({"filter": {str(n): n for n in range(17)}}, "filter"),
    ({"filter": "every"}, "filter"),
])
def test_a_hostile_filter_is_refused(extra, field):
    with pytest.raises(SubscriptionPayloadError) as err:
        decode_request(_pack({**GOOD, **extra}), BROADCAST_SUBSCRIPTION_REQUEST)
    assert err.value.field == field


def test_hostile_replies_publications_and_multicasts_are_refused():
    with pytest.raises(SubscriptionPayloadError, match="error"):
        decode_reply(_pack({"sid": "s", "error": 3}))
    with pytest.raises(SubscriptionPayloadError, match="value"):
        decode_publication(_pack({"sid": "s", "value": {"deep": [1]}}))
    with pytest.raises(SubscriptionPayloadError, match="pl"):
        decode_multicast(_pack({"value": 1, "sid": "s"}))


def test_the_counters_filter_checks_its_parameters():
    CounterProvider._check_filter_reachedMultiple({"every": 2})
    for bad in ({}, {"every": 0}, {"every": True}, {"every": 2, "more": 1}):
        with pytest.raises(ValueError, match="every"):
            CounterProvider._check_filter_reachedMultiple(bad)


def test_multicast_topics_are_the_brokers_grants_and_no_unicast_topic():
    assert MULTICAST_TOPIC_PREFIX == access.MULTICAST_PREFIX
    topic = multicast_topic("provider/incremented")
    assert access.may_publish("cc1", topic) and access.may_subscribe("cc1", topic)
    assert access.may_subscribe("cc1", multicast_topic("provider/incremented/#"))
    assert access.may_subscribe("cc1", multicast_topic("provider/incremented/+/a"))
    # Exactly multicasts: not every topic under the prefix, and no other client's unicast.
    assert not access.may_subscribe("cc1", MULTICAST_TOPIC_PREFIX + "#")
    assert not access.may_subscribe("cc1", MULTICAST_TOPIC_PREFIX + "provider")
    assert not access.may_subscribe("cc1", "+/low") and not access.may_receive("cc1", "cc2/low")
    assert not access.may_publish("cc1", "cc2/incremented")


def _host_with_proxy(tmp_path) -> Host:
    host = Host(clock=SimClock())
    host.create("app", "libjoynr", dict(
        run_dir=str(tmp_path), run_id="r", policy="precedence", max_hops=32, seed=None, incarnation=0, options={},
        cc_id="cc1", token=None,
        cc_address={"_typeName": "joynr.system.RoutingTypes.WebSocketAddress", "protocol": "WS",
                    "host": "127.0.0.1", "port": 1, "path": "/"}))
    runtime = host.runtimes["app"]
    runtime.proxies["proxy"] = ProxySkeleton("proxy", "joynrsim/Counter", "counter")
    return host


SUBSCRIBE = {"runtime": "app", "proxy": "proxy", "name": "value", "kind": "attribute",
             "qos": {"kind": "on-change"}, "filter": None, "partitions": []}


@pytest.mark.parametrize("changes, problem", [
    ({"qos": "on-change"}, "subscribe.qos: expected dict"),
    ({"filter": [1]}, "subscribe.filter: expected dict/NoneType"),
    ({"partitions": "a"}, "subscribe.partitions: expected list"),
    ({"kind": 1}, "subscribe.kind: expected str"),
])
def test_the_control_protocol_types_every_subscribe_field(changes, problem):
    with pytest.raises(ProtocolError, match=problem):
        validate_request(request(1, "subscribe", {**SUBSCRIBE, **changes}))
    with pytest.raises(ProtocolError, match="await_publications.count"):
        validate_request(request(1, "await_publications", {"runtime": "app", "subscription_id": "s",
                                                            "count": "1", "timeout_ms": 1}))


@pytest.mark.parametrize("changes, problem", [
    ({"proxy": "nobody"}, "subscribe.proxy: no proxy"),
    ({"name": "not a name"}, "subscribe.name"),
    ({"qos": {"kind": "periodic"}}, "subscribe.qos"),
    ({"filter": {"every": {"x": 1}}}, "subscribe.filter"),
    ({"partitions": [1]}, "subscribe.partitions"),
    ({"kind": "event"}, "subscribe.kind: expected attribute or broadcast"),
    ({"filter": {"every": 2}}, "an attribute subscription has no filter"),
])
async def test_the_host_refuses_a_hostile_subscribe_before_sending_anything(tmp_path, changes, problem):
    host = _host_with_proxy(tmp_path)
    args = validate_request(request(1, "subscribe", {**SUBSCRIBE, **changes}))[2]
    with pytest.raises(ProtocolError, match=problem):
        await host.handle("subscribe", args)
    assert host.runtimes["app"].subscriptions.subscriptions == {}


async def test_the_host_names_an_unknown_subscription(tmp_path):
    host = _host_with_proxy(tmp_path)
    with pytest.raises(KeyError, match="no subscription 'nope'"):
        await host.handle("publications", {"runtime": "app", "subscription_id": "nope"})
