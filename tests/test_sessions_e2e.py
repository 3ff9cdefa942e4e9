"""Broker sessions as links, end to end: takeovers, a crash with messages in flight, a
Mosquitto restart with persistence, and a session left detached past its timeout."""

from __future__ import annotations

import pytest

from e2e_helpers import events, until
from joynr_sim.runtime.participants import CounterProvider
from joynr_sim.simulation import Simulation
from joynr_sim.store.outbox import OUTGOING

pytestmark = pytest.mark.e2e  # every test runs brokers and runtimes

BROKERS = ["amqtt", "mosquitto"]


async def counter_topology(sim: Simulation):
    consumer_cc = await sim.cluster_controller("cc-consumer", ["gbid1"])
    provider_cc = await sim.cluster_controller("cc-provider", ["gbid1"])
    provider_app = await sim.libjoynr("provider-app", provider_cc)
    counter = CounterProvider()
    await provider_app.register_provider("dom", "joynrsim/Counter", counter, participant_id="counter")
    consumer_app = await sim.libjoynr("consumer-app", consumer_cc)
    proxy = await consumer_app.discover_proxy("joynrsim/Counter", "dom", scope="GLOBAL_ONLY")
    assert await proxy.call("get") == 0
    return consumer_cc, provider_cc, counter, proxy


@pytest.mark.parametrize("broker", BROKERS)
async def test_two_runtimes_with_one_cc_id_steal_the_session_and_storm(tmp_path, broker):
    async with Simulation(tmp_path, gbids=["gbid1"], broker=broker) as sim:
        await sim.cluster_controller("twin", ["gbid1"], runtime_id="twin-a")
        await sim.cluster_controller("twin", ["gbid1"], runtime_id="twin-b", start=False)
        await sim.runtimes["twin-b"].start()
        await until(lambda: events(tmp_path, "link.takeover-storm"), timeout_s=30)

    steals = events(tmp_path, "link.steal", client_id="twin")
    assert {e["rt"] for e in steals} == {"twin-a", "twin-b"}
    assert all(e["conn"].split("|")[0] == e["rt"] != e["victim"].split("|")[0] for e in steals)
    storm = events(tmp_path, "link.takeover-storm")[0]
    assert storm["runtimes"] == ["twin-a", "twin-b"] and storm["gbid"] == "gbid1"


@pytest.mark.parametrize("broker", BROKERS)
async def test_cc_crash_with_messages_in_flight_loses_and_duplicates_nothing(tmp_path, broker):
    async with Simulation(tmp_path, gbids=["gbid1"], broker=broker) as sim:
        consumer_cc, provider_cc, counter, proxy = await counter_topology(sim)

        # The broker is gone: the consumer CC publishes, nothing is acknowledged.
        await sim.brokers.stop_broker("gbid1")
        await until(lambda: not consumer_cc.mqtt["gbid1"].connected.is_set())
        for _ in range(5):
            proxy.one_way("increment")
        await until(lambda: len(consumer_cc.outbox.held(OUTGOING, "gbid1")) == 5)
        # The consumer CC crashes with five messages in flight; paho's queue dies with it.
        await consumer_cc.crash()
        await sim.brokers.start_broker("gbid1")
        await until(lambda: provider_cc.mqtt["gbid1"].connected.is_set())
        await consumer_cc.restart()  # resumes the session and re-sends from its outbox
        await until(lambda: counter.value == 5)
        assert await proxy.call("get", ttl_ms=10_000) == 5

    resumes = events(tmp_path, "link.resume", rt="cc-consumer")
    assert [e["resent"] for e in resumes] == [5]
    resent = events(tmp_path, "msg.out", rt="cc-consumer", resent=True)
    assert len(resent) == 5
    deliveries = [e for e in events(tmp_path, "msg.deliver", rt="provider-app") if e["type"] == "o"]
    assert len(deliveries) == len({e["msg"] for e in deliveries}) == 5


async def test_mosquitto_restart_keeps_the_queue_of_a_crashed_cc(tmp_path):
    async with Simulation(tmp_path, gbids=["gbid1"], broker="mosquitto") as sim:
        consumer_cc, provider_cc, counter, proxy = await counter_topology(sim)
        await provider_cc.crash()  # its session stays at the broker, suspended
        for _ in range(3):
            proxy.one_way("increment")
        await until(lambda: len(events(tmp_path, "msg.out", rt="cc-consumer", type="o")) == 3)
        await until(lambda: not consumer_cc.outbox.held(OUTGOING, "gbid1"))  # the broker has them
        await sim.brokers.stop_broker("gbid1")  # clean stop: Mosquitto saves its sessions
        await sim.brokers.start_broker("gbid1")
        await provider_cc.restart()  # session present: the queued messages come in
        await until(lambda: counter.value == 3)
        assert await proxy.call("get", ttl_ms=10_000) == 3


async def test_a_session_detached_past_the_timeout_expires(tmp_path):
    async with Simulation(tmp_path, gbids=["gbid1", "gbid2"], broker="amqtt") as sim:
        cc = await sim.cluster_controller("cc1", detached_timeout_ms=5_000)
        await cc.cut("gbid2")
        detached = events(tmp_path, "link.detach", rt="cc1", gbid="gbid2")
        assert detached and detached[-1]["closed"] is False
        sim.clock.advance(4_000)
        assert not events(tmp_path, "link.expire")
        sim.clock.advance(2_000)
        expired = events(tmp_path, "link.expire", rt="cc1")
        assert [(e["gbid"], e["client_id"]) for e in expired] == [("gbid2", "cc1")]
        await cc.heal("gbid2")
        assert events(tmp_path, "link.attach", rt="cc1", gbid="gbid2")[-1]["mode"] == "establish"
