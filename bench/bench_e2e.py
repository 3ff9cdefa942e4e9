"""End-to-end request/reply through the simulator next to raw MQTT round trips.

Path: libjoynr proxy -> CC1 (ws) -> broker (MQTT) -> CC2 -> libjoynr provider (ws) and back.
Baseline, on the same broker in the same run: two paho clients bouncing a QoS 1 message,
one round trip at a time. Both are measured one call at a time, so the ratio is the cost
of joynr routing (two WebSocket hops and four routing decisions per direction) on top of
the broker round trip.

The simulation runs with its fault proxies and every runtime in a host process of its own
(the defaults): every hop crosses one more loopback connection, and the proxy's call
crosses the control channel to its host. Two more rows compare that call rate with a
simulation without the proxies and with the runtimes in the runner's process.

The path the ratio is about is the call itself, so one more pair of rows measures just
that: no fault proxies, and the calls driven inside the consumer's host process (its
``load`` op, one call at a time), so neither the proxies' relays nor the runner's control
channel is in the time. The first ratio keeps the harness in, as a scenario's call has it.
That pair is measured twice: with every runtime in a host process of its own, and with the
runtimes placed as a fleet places them (``hosts=2``: each cluster controller and its
libjoynr runtime share a host process, so the WebSocket hop between them stays in one
process and one event loop).

The call and the in-host call are measured on both wires at once (the joynr wire: SMRF frames
with joynr's JSON payloads, ``joynr_sim.wire``), the two simulations taking turns, and the
joynr wire's rate is given as a ratio to the default wire's.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import paho.mqtt.client as paho
from paho.mqtt.enums import CallbackAPIVersion

from joynr_sim.core.address import MqttAddress
from joynr_sim.runtime.participants import EchoProvider
from joynr_sim.simulation import Simulation
from joynr_sim.wire.codecs import DEFAULT_WIRE, JOYNR


def _percentile(samples: list[float], p: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))]


def _raw_round_trips(sim: Simulation, gbid: str, n: int) -> list[float]:
    host, port = sim.brokers.endpoint(gbid)
    got = threading.Event()

    def client(name: str) -> paho.Client:
        c = paho.Client(CallbackAPIVersion.VERSION2, client_id=name, protocol=paho.MQTTv311)
        c.username_pw_set(*sim.brokers.credentials(name))
        # TCP_NODELAY, as the cluster controllers set it.
        c.on_socket_open = lambda cl, ud, sock: sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        c.connect(host, port)
        return c

    pinger, ponger = client("bench-ping"), client("bench-pong")
    ponger.on_message = lambda c, ud, m: c.publish("bench-ping/low", m.payload, qos=1)
    pinger.on_message = lambda c, ud, m: got.set()
    subscribed = threading.Barrier(3)
    for c in (pinger, ponger):
        c.on_subscribe = lambda *args: subscribed.wait(5)
    ponger.subscribe("bench-pong/#", qos=1)  # each reads its own topics, as the ACLs say
    pinger.subscribe("bench-ping/#", qos=1)
    ponger.loop_start()
    pinger.loop_start()
    subscribed.wait(5)  # both SUBACKs are in before the first ping
    samples = []
    payload = b"x" * 200  # about the size of an encoded echo request
    for _ in range(n):
        got.clear()
        t = time.perf_counter()
        pinger.publish("bench-pong/low", payload, qos=1)
        if not got.wait(5):
            raise RuntimeError("raw MQTT round trip lost a message")
        samples.append(time.perf_counter() - t)
    for c in (pinger, ponger):
        c.disconnect()
        c.loop_stop()
    return samples


async def warm_echo_proxy(sim: Simulation) -> Any:
    """The path every request/reply benchmark measures: a proxy in libjoynr runtime
    ``consumer`` behind cc1, the Echo provider in ``provider`` behind cc2, one broker
    between; its routes and connections warmed up by 20 calls."""
    cc1 = await sim.cluster_controller("cc1", ["gbid1"], provisioned=[("echo", MqttAddress("gbid1", "cc2"), True)])
    cc2 = await sim.cluster_controller("cc2", ["gbid1"])
    consumer = await sim.libjoynr("consumer", cc1)
    provider = await sim.libjoynr("provider", cc2)
    await provider.register_provider("d", "joynrsim/Echo", EchoProvider(), participant_id="echo")
    proxy = await consumer.create_proxy("joynrsim/Echo", "echo")
    for _ in range(20):
        await proxy.call("echo", "warm")
    return proxy


async def _calls(broker: str, n: int, faults: bool, raw_too: bool,
                 processes: bool = True) -> tuple[list[float], list[float]]:
    """Seconds per call, one at a time; and, when asked, raw paho round trips next to them."""
    raw: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        async with Simulation(Path(tmp), gbids=["gbid1"], broker=broker, faults=faults, processes=processes) as sim:
            proxy = await warm_echo_proxy(sim)
            e2e = []
            for i in range(n):
                t = time.perf_counter()
                await proxy.call("echo", f"m{i}")
                e2e.append(time.perf_counter() - t)
            if raw_too:
                raw = await asyncio.to_thread(_raw_round_trips, sim, "gbid1", n)
    return e2e, raw


async def _calls_in_host(broker: str, n: int, hosts: int | None = None) -> float:
    """Calls per second of ``n`` calls driven one at a time inside the consumer's host
    process, with no fault proxies: the request/reply path alone. ``hosts=2``: each
    cluster controller shares its host with its libjoynr runtime, as a fleet places them."""
    with tempfile.TemporaryDirectory() as tmp:
        async with Simulation(Path(tmp), gbids=["gbid1"], broker=broker, faults=False, hosts=hosts) as sim:
            return n / await _round(await warm_echo_proxy(sim), n, True, broker)


async def _wires_interleaved(broker: str, n: int, in_host: bool, rounds: int = 20) -> dict[str, float]:
    """Calls per second on each wire, ``n`` calls each, one at a time: both simulations run at
    once and take turns, ``rounds`` rounds of ``n // rounds`` calls, the first wire of a round
    alternating. Measured one after the other, a wire's figure took whatever else the two cores
    did meanwhile (swings of 20% between runs); taking turns gives both wires the same load.
    The simulation started second ran up to a few percent faster than the first when both
    were the same (0.99-1.07 in four runs of the same wire), and how a pair of simulations'
    processes shared the two cores changed the ratio by a few percent from one pair to the
    next: the rounds are spread over four pairs started anew, each wire's simulation started
    first in two of them.
    ``in_host``: the calls are driven inside the consumer's host with no fault proxies, as in
    ``_calls_in_host``; else through the runner with fault proxies, as a scenario's call."""
    per_round = max(1, n // rounds)
    seconds = {DEFAULT_WIRE: 0.0, JOYNR: 0.0}
    pairs = ((DEFAULT_WIRE, JOYNR), (JOYNR, DEFAULT_WIRE)) * 2
    for started in pairs:
        with tempfile.TemporaryDirectory() as tmp:
            async with contextlib.AsyncExitStack() as stack:
                proxies = {}
                for wire in started:
                    sim = await stack.enter_async_context(
                        Simulation(Path(tmp) / wire, gbids=["gbid1"], broker=broker, faults=not in_host, wire=wire))
                    proxies[wire] = await warm_echo_proxy(sim)
                for r in range(rounds // len(pairs)):
                    for wire in started if r % 2 == 0 else started[::-1]:
                        seconds[wire] += await _round(proxies[wire], per_round, in_host, f"{broker}, {wire} wire")
    calls = per_round * (rounds // len(pairs)) * len(pairs)
    return {wire: calls / s for wire, s in seconds.items()}


async def _round(proxy: Any, calls: int, in_host: bool, what: str) -> float:
    """Seconds for ``calls`` calls one at a time: in the consumer's host, or through the runner."""
    if in_host:
        done = await proxy.runtime.load(proxy.participant_id, proxy.provider_participant_id, "echo", ["m"],
                                        calls=calls, concurrency=1)
        if done["ok"] != calls:
            raise RuntimeError(f"{what}: calls in the host failed: {done}")
        return done["seconds"]
    t = time.perf_counter()
    for i in range(calls):
        await proxy.call("echo", f"m{i}")
    return time.perf_counter() - t


async def _measure(broker: str, n: int) -> list[dict]:
    e2e, raw = await _calls(broker, n, faults=True, raw_too=True)
    direct, _ = await _calls(broker, n, faults=False, raw_too=False)
    in_process, _ = await _calls(broker, n, faults=True, raw_too=False, processes=False)
    in_host = await _calls_in_host(broker, n)
    in_shared_host = await _calls_in_host(broker, n, hosts=2)
    by_wire = await _wires_interleaved(broker, n, in_host=False)
    by_wire_in_host = await _wires_interleaved(broker, n, in_host=True)
    rows = []
    for name, samples in (("raw paho round trip", raw), ("joynr-sim request/reply", e2e)):
        rate = len(samples) / sum(samples)
        rows.append({"group": broker, "name": f"{name} rate", "value": rate, "unit": "calls/s"})
        rows.append({"group": broker, "name": f"{name} p50", "value": statistics.median(samples) * 1e3, "unit": "ms"})
        rows.append({"group": broker, "name": f"{name} p99", "value": _percentile(samples, 99) * 1e3, "unit": "ms"})
    rows.append({
        "group": broker,
        "name": "request/reply ÷ raw round trip",
        "value": (len(e2e) / sum(e2e)) / (len(raw) / sum(raw)),
        "unit": "ratio",
    })
    rows.append({"group": broker, "name": "request/reply in the consumer's host, no fault proxies, rate",
                 "value": in_host, "unit": "calls/s"})
    rows.append({
        "group": broker,
        "name": "request/reply in the consumer's host, no fault proxies ÷ raw round trip",
        "value": in_host / (len(raw) / sum(raw)),
        "unit": "ratio (target >= 0.5 on Mosquitto)",
    })
    rows.append({
        "group": broker,
        "name": "request/reply in the consumer's host shared with its cluster controller (fleet placement) "
                "÷ raw round trip",
        "value": in_shared_host / (len(raw) / sum(raw)),
        "unit": "ratio (target >= 0.5 on Mosquitto)",
    })
    rows.append({
        "group": broker,
        "name": "request/reply with fault proxies ÷ without",
        "value": (len(e2e) / sum(e2e)) / (len(direct) / sum(direct)),
        "unit": "ratio",
    })
    rows.append({
        "group": broker,
        "name": "request/reply in host processes ÷ in the runner's process",
        "value": (len(e2e) / sum(e2e)) / (len(in_process) / sum(in_process)),
        "unit": "ratio",
    })
    # The joynr wire (SMRF frames, joynr's JSON payloads) against the default wire, each path
    # measured on both wires at once, round by round: what joynr's bytes cost the same routing.
    rows.append({"group": broker, "name": "request/reply on the joynr wire rate",
                 "value": by_wire[JOYNR], "unit": "calls/s"})
    rows.append({
        "group": broker,
        "name": "request/reply on the joynr wire ÷ on the default wire",
        "value": by_wire[JOYNR] / by_wire[DEFAULT_WIRE],
        "unit": "ratio (target >= 0.8)",
    })
    rows.append({
        "group": broker,
        "name": "request/reply in the consumer's host, no fault proxies, on the joynr wire ÷ on the default wire",
        "value": by_wire_in_host[JOYNR] / by_wire_in_host[DEFAULT_WIRE],
        "unit": "ratio (target >= 0.8)",
    })
    return rows


def run(quick: bool) -> list[dict]:
    n = 200 if quick else 2000
    rows = []
    for broker in ("amqtt", "mosquitto"):
        rows.extend(asyncio.run(_measure(broker, n)))
    return rows
