"""Broker sessions as links, end to end: takeovers; a cluster controller crash with
messages in flight, its link recovered from the store and its deliveries resumed where the
broker kept the session, nothing lost either way; what each link store lets a restarted
cluster controller recover and resume; a Mosquitto restart with persistence; a session left detached past its
timeout."""

from __future__ import annotations

import pytest

from e2e_helpers import events, until
from joynr_sim.core.links import LinkRegistry, validate_mqtt_client_id
from joynr_sim.runtime.cluster_controller import ClusterController
from joynr_sim.runtime.participants import CounterProvider
from joynr_sim.simulation import Simulation
from joynr_sim.store.link_store import JsonLinkStore, MemoryLinkStore, SqliteLinkStore
from joynr_sim.store.outbox import OUTGOING

pytestmark = pytest.mark.e2e  # every test runs brokers and runtimes

BROKERS = ["amqtt", "mosquitto"]


async def counter_topology(sim: Simulation, consumer_cc: ClusterController | None = None):
    consumer_cc = consumer_cc or await sim.cluster_controller("cc-consumer", ["gbid1"])
    provider_cc = await sim.cluster_controller("cc-provider", ["gbid1"])
    provider_app = await sim.libjoynr("provider-app", provider_cc)
    counter = CounterProvider()
    await provider_app.register_provider("dom", "joynrsim/Counter", counter, participant_id="counter")
    consumer_app = await sim.libjoynr("consumer-app", consumer_cc)
    proxy = await consumer_app.discover_proxy("joynrsim/Counter", "dom", scope="GLOBAL_ONLY")
    assert await proxy.call("get") == 0
    return consumer_cc, provider_cc, counter, proxy


async def crash_with_unacknowledged_publishes(sim, consumer_cc, provider_cc, proxy, count=5):
    """The broker stops (Mosquitto saves its sessions, amqtt loses them), the consumer's
    cluster controller publishes ``count`` one-way calls nobody acknowledges, crashes with
    them in flight (paho's queue dies with it), the broker comes back and the cluster
    controller restarts."""
    await sim.brokers.stop_broker("gbid1")
    await until(lambda: not consumer_cc.mqtt["gbid1"].connected.is_set())
    for _ in range(count):
        await proxy.one_way("increment")
    await until(lambda: len(consumer_cc.outbox.held(OUTGOING, "gbid1")) == count)
    await consumer_cc.crash()
    await sim.brokers.start_broker("gbid1")
    await until(lambda: provider_cc.mqtt["gbid1"].connected.is_set())
    await consumer_cc.restart()


def resent_by(run_dir, runtime: str) -> tuple[list[dict], list[dict]]:
    """What a restarted runtime's outbox sent again: the one-way calls, and the rest (none:
    a PUBACK goes at the end of its turn, so nothing the runtime handled comes again)."""
    resent = events(run_dir, "msg.out", rt=runtime, resent=True)
    return [e for e in resent if e["type"] == "o"], [e for e in resent if e["type"] != "o"]


def delivered_once_each(run_dir, count: int) -> bool:
    deliveries = [e for e in events(run_dir, "msg.deliver", rt="provider-app") if e["type"] == "o"]
    return len(deliveries) == len({e["msg"] for e in deliveries}) == count


@pytest.mark.parametrize("broker", BROKERS)
async def test_two_runtimes_with_one_cc_id_steal_the_session_and_storm(tmp_path, broker):
    # Each has its own link registry over the one store: they learn each other's steals
    # from the store's records.
    async with Simulation(tmp_path, gbids=["gbid1"], broker=broker, processes=False) as sim:
        a = await sim.cluster_controller("twin", ["gbid1"], runtime_id="twin-a")
        b = await sim.cluster_controller("twin", ["gbid1"], runtime_id="twin-b", start=False)
        await b.start()
        assert a.link_registry is not b.link_registry
        assert a.link_registry.store is b.link_registry.store
        await until(lambda: events(tmp_path, "link.takeover-storm"), timeout_s=30)

    steals = events(tmp_path, "link.steal", client_id="twin")
    assert {e["rt"] for e in steals} == {"twin-a", "twin-b"}
    assert all(e["conn"].split("|")[0] == e["rt"] != e["victim"].split("|")[0] for e in steals)
    storm = events(tmp_path, "link.takeover-storm")[0]
    assert storm["runtimes"] == ["twin-a", "twin-b"] and storm["gbid"] == "gbid1"


@pytest.mark.parametrize("broker,resumed", [("mosquitto", True), ("amqtt", False)])
async def test_a_crashed_cc_resumes_only_a_session_the_broker_kept_and_loses_nothing(
    tmp_path, broker, resumed
):
    # The restarted cluster controller recovers its link by name from its store. Mosquitto
    # saved the session (CONNACK session present 1): the five deliveries are resumed. amqtt
    # lost it (session present 0): nothing is resumed. The outbox re-sends the five either way.
    async with Simulation(tmp_path, gbids=["gbid1"], broker=broker, processes=False) as sim:
        consumer_cc, provider_cc, counter, proxy = await counter_topology(sim)
        before = consumer_cc.link_registry
        await crash_with_unacknowledged_publishes(sim, consumer_cc, provider_cc, proxy)
        assert consumer_cc.link_registry is not before  # as a restarted process has
        await until(lambda: counter.value == 5)
        assert await proxy.call("get", ttl_ms=10_000) == 5
        if resumed:  # traced once the broker acknowledged the five
            await until(lambda: events(tmp_path, "link.resume", rt="cc-consumer"))

    attaches = events(tmp_path, "link.attach", rt="cc-consumer")
    assert [(e["mode"], e["session_present"]) for e in attaches] == [("establish", False), ("recover", resumed)]
    resumes = events(tmp_path, "link.resume", rt="cc-consumer")
    calls, other = resent_by(tmp_path, "cc-consumer")
    assert len(calls) == 5 and all(e["type"] == "rq" for e in other)
    assert other == []
    # What was settled comes from the broker's PUBACKs for the five held before the crash.
    assert [(e["resent"], e["settled"]) for e in resumes] == (
        [(5 + len(other), 5)] if resumed else [])
    assert delivered_once_each(tmp_path, 5)


@pytest.mark.parametrize("kind,granted,after_crash", [
    # nothing kept: the restarted registry recovers nothing (rejected) and establishes anew
    ("memory", 0, [("reject", None), ("establish", 0)]),
    ("json", 1, [("recover", 1)]),  # the terminus, not the unsettled deliveries: nothing resumed
    ("sqlite", 2, [("recover", 2)]),  # both: the five resumed
])
async def test_the_link_store_grants_the_durability_it_keeps_and_decides_the_resume(
    tmp_path, kind, granted, after_crash
):
    # Mosquitto keeps the session in every case; only the cluster controller's store varies.
    store = {
        "memory": MemoryLinkStore,
        "json": lambda: JsonLinkStore(tmp_path / "cc-consumer.links.json"),
        "sqlite": lambda: SqliteLinkStore(tmp_path / "cc-consumer.links.sqlite"),
    }[kind]()
    resumed = kind == "sqlite"
    try:
        async with Simulation(tmp_path / "run", gbids=["gbid1"], broker="mosquitto", processes=False) as sim:
            consumer_cc = ClusterController(
                "cc-consumer", ["gbid1"], sim.brokers, run_dir=sim.run_dir, run_id=sim.run_id,
                clock=sim.clock, link_registry=LinkRegistry(
                    store=store, clock=sim.clock.now_ms, link_name_validator=validate_mqtt_client_id),
            )
            sim.runtimes[consumer_cc.runtime_id] = consumer_cc  # stopped and closed with the rest
            await consumer_cc.start()
            consumer_cc, provider_cc, counter, proxy = await counter_topology(sim, consumer_cc)
            await crash_with_unacknowledged_publishes(sim, consumer_cc, provider_cc, proxy)
            await until(lambda: counter.value == 5)
            if resumed:
                await until(lambda: events(sim.run_dir, "link.resume", rt="cc-consumer"))
    finally:
        store.close()

    run = tmp_path / "run"
    attaches = events(run, "link.attach", rt="cc-consumer")
    assert [(e["mode"], e["durability"]) for e in attaches] == [("establish", granted), *after_crash]
    resumes = [(e["resent"], e["settled"]) for e in events(run, "link.resume", rt="cc-consumer")]
    calls, other = resent_by(run, "cc-consumer")
    assert len(calls) == 5 and all(e["type"] == "rq" for e in other)
    assert other == []
    assert resumes == ([(5 + len(other), 5)] if resumed else [])
    assert delivered_once_each(run, 5)  # the outbox re-sent them whatever the store kept


async def test_mosquitto_restart_keeps_the_queue_of_a_crashed_cc(tmp_path):
    async with Simulation(tmp_path, gbids=["gbid1"], broker="mosquitto", processes=False) as sim:
        consumer_cc, provider_cc, counter, proxy = await counter_topology(sim)
        await provider_cc.crash()  # its session stays at the broker, suspended
        for _ in range(3):
            await proxy.one_way("increment")
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


@pytest.mark.parametrize("processes", [False, True], ids=["in-process", "host-process"])
@pytest.mark.parametrize("broker,kept", [("amqtt", False), ("mosquitto", True)])
async def test_a_broker_crash_shows_in_the_attach_whether_it_kept_the_session(
    tmp_path, broker, kept, processes
):
    # amqtt keeps its sessions in memory: a SIGKILL loses them. Mosquitto saved the session
    # and its subscription at the connect (autosave on every change).
    async with Simulation(tmp_path, gbids=["gbid1"], broker=broker, processes=processes) as sim:
        await sim.cluster_controller("cc1", ["gbid1"])
        await sim.brokers.crash_broker("gbid1")
        await sim.brokers.restart_broker("gbid1")
        await until(lambda: len(events(tmp_path, "link.attach", rt="cc1")) == 2, timeout_s=30)

    first, again = events(tmp_path, "link.attach", rt="cc1")
    assert (first["session_present"], again["session_present"]) == (False, kept)
    assert again["ts"] >= events(tmp_path, "life.crash", target="broker-gbid1")[0]["ts"]
