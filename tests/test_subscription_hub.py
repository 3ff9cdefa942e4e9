"""A runtime's subscriptions (``joynr_sim.runtime.subscriptions``) against a recording
runtime, without transports: the provider side answers, publishes, filters and refuses;
hostile messages are dropped or refused with their reason."""

from __future__ import annotations

import msgpack
import pytest

from joynr_sim.core.limits import DEFAULT_LIMITS
from joynr_sim.core.message import (
    BROADCAST_SUBSCRIPTION_REQUEST,
    PUBLICATION,
    SUBSCRIPTION_REPLY,
    SUBSCRIPTION_REQUEST,
    SUBSCRIPTION_STOP,
    JoynrMessage,
)
from joynr_sim.core.subscription_wire import (
    SubscriptionRequest,
    decode_publication,
    decode_reply,
    encode_publication,
    encode_request,
    encode_stop,
)
from joynr_sim.core.subscriptions import SubscriptionManager, SubscriptionQos
from joynr_sim.runtime.participants import CounterProvider, ProviderSkeleton, ProxySkeleton
from joynr_sim.runtime.subscriptions import Subscriptions

NOW = 1_000_000


class Recorder:
    """What the hub needs of a runtime, recording what it routes and traces."""

    running = False  # no timers: time is driven by the test

    def __init__(self) -> None:
        self.routed: list[JoynrMessage] = []
        self.events: list[tuple[str, dict]] = []
        self.clock = type("Clock", (), {"now_ms": staticmethod(lambda: NOW)})()
        self.node = type("Node", (), {"router": type("Router", (), {"limits": DEFAULT_LIMITS})(),
                                      "subscription_manager": SubscriptionManager(), "publication_managers": {}})()
        self.table = type("Table", (), {"lookup": staticmethod(lambda pid: None)})()

    def route(self, msg: JoynrMessage) -> None:
        self.routed.append(msg)

    def emit(self, ev: str, **fields) -> None:
        self.events.append((ev, fields))

    def carry_out(self, actions) -> None:
        """The hub's drops, as the events they become (``action_trace``)."""
        for drop in actions:
            self.events.append(("msg.drop", {"msg": drop.msg.id if drop.msg else None, "reason": drop.reason,
                                             "detail": drop.detail, "field": drop.field}))


async def _none(*args) -> None:
    return None


@pytest.fixture
def provider_side():
    runtime = Recorder()
    hub = Subscriptions(runtime, _none, _none)
    counter = CounterProvider()
    hub.attach(ProviderSkeleton("counter", "dom", "joynrsim/Counter", counter))
    return runtime, hub, counter, ProviderSkeleton("counter", "dom", "joynrsim/Counter", counter)


def request(sender: str, sid: str, name: str, kind: str = SUBSCRIPTION_REQUEST, flt=None) -> JoynrMessage:
    req = SubscriptionRequest(sid, name, SubscriptionQos("on-change"), flt)
    return JoynrMessage(kind, sender, "counter", NOW + 10_000, encode_request(req, kind))


def replies(runtime: Recorder) -> list[tuple[str, str, str | None]]:
    return [(m.recipient, *decode_reply(m.payload)) for m in runtime.routed if m.type == SUBSCRIPTION_REPLY]


def publications(runtime: Recorder) -> list[tuple[str, str, object]]:
    return [(m.recipient, *decode_publication(m.payload)) for m in runtime.routed if m.type == PUBLICATION]


def test_a_provider_answers_publishes_and_filters(provider_side):
    runtime, hub, counter, skeleton = provider_side
    assert hub.dispatch(request("px", "s1", "value"), skeleton)
    assert hub.dispatch(request("px", "s2", "reachedMultiple", BROADCAST_SUBSCRIPTION_REQUEST, {"every": 2}), skeleton)
    assert replies(runtime) == [("px", "s1", None), ("px", "s2", None)]
    assert publications(runtime) == [("px", "s1", 0)]  # the initial value
    counter.increment()
    counter.increment()
    assert publications(runtime)[1:] == [("px", "s1", 1), ("px", "s1", 2), ("px", "s2", 2)]
    # the stop of its subscriber ends it; another participant's stop does not
    hub.dispatch(JoynrMessage(SUBSCRIPTION_STOP, "intruder", "counter", NOW + 1, encode_stop("s1")), skeleton)
    hub.dispatch(JoynrMessage(SUBSCRIPTION_STOP, "px", "counter", NOW + 1, encode_stop("s2")), skeleton)
    counter.increment()
    counter.increment()
    assert publications(runtime)[4:] == [("px", "s1", 3), ("px", "s1", 4)]
    stops = [f["reason"] for ev, f in runtime.events if ev == "sub.stop"]
    assert stops == ["unknown", "stop-received"]


def test_a_subscription_id_is_never_taken_over(provider_side):
    runtime, hub, counter, skeleton = provider_side
    hub.dispatch(request("px", "s1", "value"), skeleton)
    hub.dispatch(request("px", "s1", "value"), skeleton)  # joynr's update: its own subscriber
    hub.dispatch(request("intruder", "s1", "value"), skeleton)
    outcomes = [f["outcome"] for ev, f in runtime.events if ev == "sub.add"]
    assert outcomes == ["added", "replaced", "refused"]
    assert replies(runtime)[-1] == ("intruder", "s1", "subscription id 's1' belongs to another subscriber")
    counter.increment()
    assert publications(runtime)[-1] == ("px", "s1", 1)


@pytest.mark.parametrize("name, kind, flt, refusal", [
    ("missing", SUBSCRIPTION_REQUEST, None, "no attribute 'missing'"),
    ("increment", SUBSCRIPTION_REQUEST, None, "no attribute 'increment'"),  # a method is no attribute
    ("incremented", BROADCAST_SUBSCRIPTION_REQUEST, None, "no broadcast 'incremented'"),  # a multicast
    ("reachedMultiple", BROADCAST_SUBSCRIPTION_REQUEST, {"every": -1}, "every: an integer from 1"),
])
def test_a_request_the_provider_cannot_serve_is_refused(provider_side, name, kind, flt, refusal):
    runtime, hub, counter, skeleton = provider_side
    hub.dispatch(request("px", "s1", name, kind, flt), skeleton)
    ((_, sid, error),) = replies(runtime)
    assert sid == "s1" and refusal in error
    assert not publications(runtime)


def test_hostile_payloads_are_dropped_with_their_field(provider_side):
    runtime, hub, counter, skeleton = provider_side
    bad = msgpack.packb({"sid": "s", "name": "value", "qos": {"kind": "sometimes"}})
    hub.dispatch(JoynrMessage(SUBSCRIPTION_REQUEST, "px", "counter", NOW + 1, bad), skeleton)
    proxy = ProxySkeleton("px", "joynrsim/Counter", "counter")
    hub.dispatch(JoynrMessage(PUBLICATION, "counter", "px", NOW + 1, b"\xc1"), proxy)
    drops = [(f["reason"], f["field"]) for ev, f in runtime.events if ev == "msg.drop"]
    assert drops == [("invalid-message", "qos"), ("invalid-message", "pl")]
    assert runtime.routed == []


def test_a_publication_for_no_live_subscription_is_late():
    runtime = Recorder()
    hub = Subscriptions(runtime, _none, _none)
    proxy = ProxySkeleton("px", "joynrsim/Counter", "counter")
    hub.dispatch(JoynrMessage(PUBLICATION, "counter", "px", NOW + 1, encode_publication("gone", 5)), proxy)
    assert [f["outcome"] for ev, f in runtime.events if ev == "sub.publication"] == ["late"]


async def test_the_routing_provider_refuses_a_hostile_multicast_receiver():
    from joynr_sim.runtime.cluster_controller import RoutingProvider

    added = []

    class Routes:
        table = None

        async def add_multicast_receiver(self, mid, receiver):
            added.append((str(mid), receiver))

        async def remove_multicast_receiver(self, mid, receiver):
            added.remove((str(mid), receiver))

    provider = RoutingProvider(Routes())
    await provider.addMulticastReceiver("prov/incremented/+", "proxy", "prov")
    for args, words in [
        (("prov/incremented", 5, "prov"), "subscriberParticipantId"),
        (("prov/incremented", "", "prov"), "subscriberParticipantId"),
        (("other/incremented", "proxy", "prov"), "is not a multicast of provider"),
        (("prov/incremented/a/*/b", "proxy", "prov"), "'*' may only end"),
        ((["prov"], "proxy", "prov"), "multicastId"),
    ]:
        with pytest.raises(ValueError, match=words):
            await provider.addMulticastReceiver(*args)
    assert added == [("prov/incremented/+", "proxy")]
