"""Helpers of the end-to-end tests: the events of a run, waiting for what a system reaches
on its own, with a bound, and the two-controller topology and broker client that the
hostile-input tests share."""

from __future__ import annotations

import asyncio
import os
import threading
from pathlib import Path

import paho.mqtt.client as paho
from paho.mqtt.enums import CallbackAPIVersion

from joynr_sim.core.address import MqttAddress
from joynr_sim.runtime.participants import EchoProvider
from joynr_sim.simulation import Simulation
from joynr_sim.trace import read_run

PROVIDER = "echo-provider"  # the Echo provider of ``topology``, behind cc2


def events(run_dir: Path, ev: str | None = None, **match):
    return [
        e for e in read_run(run_dir)
        if (ev is None or e["ev"] == ev) and all(e.get(k) == v for k, v in match.items())
    ]


async def until(predicate, timeout_s: float = 10.0) -> None:
    """Wait for a condition the system reaches on its own, with a bound."""
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not predicate():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not reached within the bound")
        await asyncio.sleep(0.02)


def process_exists(pid: int) -> bool:
    """Whether a process with this pid is still there (a SIGKILLed one is not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


async def topology(sim: Simulation, **cc_options):
    """cc1 with a consumer app whose proxy reaches the Echo provider ``PROVIDER`` of an app
    on cc2 (``cc_options`` go to cc2), both controllers on gbid1, the route provisioned."""
    cc1 = await sim.cluster_controller("cc1", ["gbid1"], provisioned=[(PROVIDER, MqttAddress("gbid1", "cc2"), True)])
    cc2 = await sim.cluster_controller("cc2", ["gbid1"], **cc_options)
    consumer = await sim.libjoynr("consumer", cc1)
    provider_app = await sim.libjoynr("provider-app", cc2)
    await provider_app.register_provider("dom", "joynrsim/Echo", EchoProvider(), participant_id=PROVIDER)
    proxy = await consumer.create_proxy("joynrsim/Echo", PROVIDER)
    return cc1, cc2, provider_app, proxy


class BrokerClient:
    """A separate MQTT client with its own login to gbid1's broker, as a hostile local process
    would have; with ``subscribe`` it receives on its own prefix ``<client id>/#``."""

    def __init__(self, sim: Simulation, client_id: str, *, subscribe: bool = False) -> None:
        host, port = sim.brokers.endpoint("gbid1")
        self.replies: list[bytes] = []
        self.qos: list[int] = []  # the QoS each reply was delivered at, in their order
        self.subscribed = threading.Event()
        self.client = paho.Client(CallbackAPIVersion.VERSION2, client_id=client_id, protocol=paho.MQTTv311)
        self.client.username_pw_set(*sim.brokers.credentials(client_id))
        self.client.on_message = lambda c, u, m: (self.replies.append(bytes(m.payload)), self.qos.append(m.qos))
        self.client.on_subscribe = lambda *args: self.subscribed.set()
        self.client.connect(host, port)
        if subscribe:
            self.client.subscribe(f"{client_id}/#", qos=1)
        self.client.loop_start()

    def publish(self, topic: str, payload: bytes, qos: int = 1) -> None:
        self.client.publish(topic, payload, qos=qos).wait_for_publish(10)

    def close(self) -> None:
        self.client.disconnect()
        self.client.loop_stop()
