"""Subscriptions, broadcasts and multicasts end to end on real brokers: a proxy on cc1's
libjoynr runtime subscribes to joynrsim/Counter on cc2's libjoynr runtime, in host processes
and in the runner's process."""

from __future__ import annotations

import asyncio

import jsonschema
import pytest

import trace_schema
from e2e_helpers import events, until
from joynr_sim.simulation import Simulation
from joynr_sim.trace import read_run

pytestmark = pytest.mark.e2e

COUNTER = "counter-provider"
WAIT_S = 15.0


async def counter_topology(sim: Simulation, scope: str = "GLOBAL"):
    cc1 = await sim.cluster_controller("cc1", ["gbid1"])
    cc2 = await sim.cluster_controller("cc2", ["gbid1"])
    consumer = await sim.libjoynr("consumer", cc1)
    provider_app = await sim.libjoynr("provider-app", cc2)
    from joynr_sim.runtime.participants import CounterProvider
    await provider_app.register_provider("dom", "joynrsim/Counter", CounterProvider(), participant_id=COUNTER,
                                         scope=scope)
    proxy = await consumer.discover_proxy("joynrsim/Counter", "dom", scope="GLOBAL_ONLY")
    return cc1, cc2, consumer, provider_app, proxy


def check_schema(run_dir) -> list[dict]:
    found = read_run(run_dir)
    for event in found:
        jsonschema.validate(event, trace_schema.json_schema(event["ev"]))
    return found


@pytest.mark.parametrize("processes", [False, True], ids=["in-process", "processes"])
async def test_attribute_selective_and_multicast_subscriptions(tmp_path, processes):
    async with Simulation(tmp_path, gbids=["gbid1"], broker="amqtt", processes=processes) as sim:
        cc1, cc2, consumer, provider_app, proxy = await counter_topology(sim)
        value = await proxy.subscribe_attribute("value")
        incremented = await proxy.subscribe_broadcast("incremented")
        multiples = await proxy.subscribe_broadcast("reachedMultiple", filter={"every": 2})
        assert await value.wait_for(1, WAIT_S) == [0]  # the initial value comes first
        for _ in range(4):
            await proxy.call("increment", ttl_ms=10_000)
        assert await value.wait_for(5, WAIT_S) == [0, 1, 2, 3, 4]
        assert await incremented.wait_for(4, WAIT_S) == [1, 2, 3, 4]
        assert await multiples.wait_for(2, WAIT_S) == [2, 4]

        for sub in (value, incremented, multiples):
            await proxy.unsubscribe(sub.subscription_id)
        await until(lambda: events(tmp_path, "mc.unsubscribe", rt="cc1"), WAIT_S)
        stopped = await proxy.call("increment", ttl_ms=10_000)
        assert stopped == 5
        await until(lambda: len(events(tmp_path, "sub.stop", side="provider")) == 2, WAIT_S)

    # cc1 subscribed the multicast's topic on the provider's backend once, and let it go.
    topic = f"joynr-sim-multicast/{COUNTER}/incremented"
    assert [(e["gbid"], e["topic"]) for e in events(tmp_path, "mc.subscribe")] == [("gbid1", topic)]
    assert [(e["gbid"], e["topic"]) for e in events(tmp_path, "mc.unsubscribe")] == [("gbid1", topic)]
    # cc2 published each multicast to the backend once; cc1 never published one.
    out = events(tmp_path, "msg.out", type="m", via="mqtt")
    assert {e["rt"] for e in out} == {"cc2"} and len(out) == 5
    # After the unsubscribe, nothing more reached the subscriptions.
    assert len(events(tmp_path, "sub.publication", outcome="delivered")) == 5 + 4 + 2
    assert all(e["visible"] for e in events(tmp_path, "mc.fire"))
    check_schema(tmp_path)


async def test_local_provider_not_published_to_the_backend(tmp_path):
    """A provider registered LOCAL fires its multicast to its own runtime's receivers only."""
    async with Simulation(tmp_path, gbids=["gbid1"], broker="amqtt", processes=False) as sim:
        cc1 = await sim.cluster_controller("cc1", ["gbid1"])
        app = await sim.libjoynr("app", cc1)
        consumer = await sim.libjoynr("consumer", cc1)
        from joynr_sim.runtime.participants import CounterProvider
        await app.register_provider("dom", "joynrsim/Counter", CounterProvider(), participant_id=COUNTER,
                                    scope="LOCAL")
        proxy = await consumer.discover_proxy("joynrsim/Counter", "dom")
        incremented = await proxy.subscribe_broadcast("incremented")
        await proxy.call("increment", ttl_ms=10_000)
        assert await incremented.wait_for(1, WAIT_S) == [1]
    assert not events(tmp_path, "msg.out", type="m", via="mqtt")
    assert not events(tmp_path, "mc.subscribe")
    (fire,) = events(tmp_path, "mc.fire")
    assert fire["visible"] is False
    (withheld,) = events(tmp_path, "mc.withhold", rt="cc1")
    assert (withheld["msg"], withheld["reason"]) == (fire["msg"], "provider-not-visible")
    check_schema(tmp_path)


async def test_refused_subscriptions(tmp_path):
    async with Simulation(tmp_path, gbids=["gbid1"], broker="amqtt", processes=False) as sim:
        cc1, cc2, consumer, provider_app, proxy = await counter_topology(sim)
        from joynr_sim.core.errors import SubscriptionException
        with pytest.raises(SubscriptionException, match="no attribute 'missing'"):
            await proxy.subscribe_attribute("missing")
        with pytest.raises(SubscriptionException, match="every"):
            await proxy.subscribe_broadcast("reachedMultiple", filter={"every": 0})
        await asyncio.sleep(0)
    assert [e["outcome"] for e in events(tmp_path, "sub.add")] == ["refused", "refused"]
    check_schema(tmp_path)


@pytest.mark.parametrize("republish", [False, True], ids=["fixed", "republishing"])
async def test_a_received_multicast_is_never_published_again(tmp_path, republish):
    """Without joynr's rule, cc1 publishes what it received from the backend to the topic it
    is subscribed to, receives it again, and so on until the hop limit."""
    async with Simulation(tmp_path, gbids=["gbid1"], broker="amqtt") as sim:
        cc1 = await sim.cluster_controller("cc1", ["gbid1"], republish_received_multicasts=republish)
        cc2 = await sim.cluster_controller("cc2", ["gbid1"])
        consumer = await sim.libjoynr("consumer", cc1)
        provider_app = await sim.libjoynr("provider-app", cc2)
        from joynr_sim.runtime.participants import CounterProvider
        await provider_app.register_provider("dom", "joynrsim/Counter", CounterProvider(), participant_id=COUNTER)
        proxy = await consumer.discover_proxy("joynrsim/Counter", "dom", scope="GLOBAL_ONLY")
        incremented = await proxy.subscribe_broadcast("incremented")
        await proxy.call("increment", ttl_ms=10_000)
        assert await incremented.wait_for(1, WAIT_S) == [1]
        if republish:
            await until(lambda: events(tmp_path, "msg.drop", rt="cc1", type="m", reason="hop-limit"), WAIT_S)
        else:  # what cc1 received it handed to its runtime only
            await until(lambda: events(tmp_path, "msg.out", rt="cc1", type="m", via="ws"), WAIT_S)
        assert incremented.values == [1]  # the subscriber's runtime drops the copies
    echoed = events(tmp_path, "msg.out", rt="cc1", type="m", via="mqtt")
    if republish:
        (fired,) = events(tmp_path, "mc.fire")
        assert len(echoed) > 10 and {e["msg"] for e in echoed} == {fired["msg"]}
        assert events(tmp_path, "msg.drop", rt="consumer", type="m", reason="duplicate")
    else:
        assert echoed == []
        # cc1 said why it did not publish what it received
        assert {e["reason"] for e in events(tmp_path, "mc.withhold", rt="cc1")} == {"received-from-backend"}
    check_schema(tmp_path)
