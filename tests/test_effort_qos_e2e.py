"""A message's effort decides its MQTT QoS, as joynr's MqttMessagingStub decides it: BEST_EFFORT
at QoS 0, everything else at QoS 1. Checked on the real brokers, on both wires: a cluster
controller relays one message of each effort to a watcher's topic, and the watcher's broker
says at which QoS each came."""

from __future__ import annotations

import asyncio

import pytest

from e2e_helpers import BrokerClient, until
from joynr_sim.core.address import MqttAddress
from joynr_sim.core.limits import DEFAULT_LIMITS
from joynr_sim.core.message import BEST_EFFORT, NORMAL, ONE_WAY, JoynrMessage
from joynr_sim.runtime.participants import encode_request
from joynr_sim.simulation import Simulation
from joynr_sim.wire.codecs import DEFAULT_WIRE, JOYNR, codec

pytestmark = pytest.mark.e2e


@pytest.mark.parametrize("wire", [DEFAULT_WIRE, JOYNR])
@pytest.mark.parametrize("broker", ["amqtt", "mosquitto"])
async def test_a_best_effort_message_is_published_at_qos_0_and_a_normal_one_at_qos_1(tmp_path, broker, wire):
    async with Simulation(tmp_path, gbids=["gbid1"], broker=broker, wire=wire) as sim:
        # cc1 routes participant "far" to the watcher's topic: what it relays there, the
        # watcher receives at the QoS cc1 published it with (its subscription is QoS 1).
        await sim.cluster_controller("cc1", ["gbid1"], provisioned=[("far", MqttAddress("gbid1", "watcher"), True)])
        watcher = BrokerClient(sim, "watcher", subscribe=True)
        sender = BrokerClient(sim, "sender")
        try:
            assert await asyncio.to_thread(watcher.subscribed.wait, 10)
            frames = codec(wire)
            for effort in (NORMAL, BEST_EFFORT):
                msg = JoynrMessage(type=ONE_WAY, sender="someone", recipient="far",
                                   expiry_date_ms=sim.clock.now_ms() + 60_000, payload=encode_request("ping", []),
                                   id=f"one-way-{effort}", effort=effort)
                await asyncio.to_thread(sender.publish, "cc1/low", frames.encode(msg))
            await until(lambda: len(watcher.replies) == 2)
            got = {frames.decode(frame, DEFAULT_LIMITS).effort: qos
                   for frame, qos in zip(watcher.replies, watcher.qos, strict=True)}
            assert got == {NORMAL: 1, BEST_EFFORT: 0}
        finally:
            watcher.close()
            sender.close()

