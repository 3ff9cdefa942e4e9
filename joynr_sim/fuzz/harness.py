"""Send hostile frames to a running simulation and account for every one.

The topology: cluster controllers ``cc1`` and ``cc2`` on ``gbid1``, a consumer runtime on
``cc1`` with a proxy for an Echo provider in a runtime on ``cc2``, and the GCD. Frames go
to each cluster controller's and the GCD's MQTT topic from a separate client holding the
broker password (every third round of targets at QoS 0, the others at QoS 1), and to
``cc1`` over the consumer's own WebSocket connection. After every batch a call must still
go through, and every frame must have exactly one fate in the trace of the runtime it was
sent to: a ``msg.in`` (it was a message; the router took it from there) or a ``msg.drop``
before it was one (``decode-error``, ``invalid-message``, ``duplicate``). A ``msg.drop``
with reason ``internal-error`` or a runtime that stopped running is a crash; a
``link.attach`` after the start is a reconnect (a broker closed a runtime's connection over
something a frame made it do).
"""

from __future__ import annotations

import asyncio
import json
import multiprocessing
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import msgpack
import paho.mqtt.client as paho
from hypothesis import HealthCheck, Phase, given, seed, settings
from paho.mqtt.enums import CallbackAPIVersion

from ..core.address import MqttAddress
from ..runtime.participants import EchoProvider
from ..simulation import Simulation
from .frames import hostile_frames, reply_topic, restart_ids

PROVIDER = "fuzz-echo"
# Where frames go: (runtime that receives, transport, MQTT topic or None for WebSocket).
TARGETS = (("cc2", "mqtt", "cc2/low"), ("cc1", "mqtt", "cc1/low"),
           ("gcd-gbid1", "mqtt", "discoverydirectory_channelid/low"), ("cc1", "ws", None))


def qos_of(n: int) -> int:
    """The QoS frame ``n`` of a batch is published at: every third round of targets at 0."""
    return 0 if (n // len(TARGETS)) % 3 == 2 else 1


def draw_frames(count: int, recipients: list[str], seed_value: int, first_id: int = 0) -> list[bytes]:
    """``count`` frames from the Hypothesis strategy, reproducibly for one seed; their own
    message ids are numbered from ``first_id``."""
    frames: list[bytes] = []
    restart_ids(first_id)

    @seed(seed_value)
    @settings(max_examples=count, database=None, phases=[Phase.generate], deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(hostile_frames(recipients))
    def collect(frame: bytes) -> None:
        frames.append(frame)

    collect()
    return frames


class TraceTail:
    """The events a runtime appended since the last read (a trace only grows)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._offset = 0

    def read(self) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        with open(self.path, "rb") as f:
            f.seek(self._offset)
            data = f.read()
        end = data.rfind(b"\n") + 1
        self._offset += end
        return [json.loads(line) for line in data[:end].splitlines() if line.strip()]


@dataclass
class FuzzReport:
    sent: Counter = field(default_factory=Counter)  # (runtime, via) -> frames
    fates: Counter = field(default_factory=Counter)  # (runtime, via) -> frames accounted for
    outcomes: Counter = field(default_factory=Counter)  # "msg.in" or the drop reason
    crashes: int = 0
    reconnects: int = 0  # link.attach of a runtime after the start
    calls: int = 0
    surplus: int = 0  # events matching a frame already accounted for (colliding hostile ids)
    qos0: int = 0  # frames published at QoS 0
    multilevel_reply_to: int = 0  # frames whose replyTo topic has a '/'

    def rows(self) -> list[tuple[str, int]]:
        rows = [("frames sent", sum(self.sent.values())), ("frames accounted for", sum(self.fates.values())),
                ("  at QoS 0", self.qos0), ("  with a replyTo topic holding '/'", self.multilevel_reply_to),
                ("calls after a batch", self.calls), ("runtime crashes", self.crashes),
                ("reconnects of a runtime", self.reconnects), ("events of colliding hostile ids", self.surplus)]
        rows += [(f"  {name}", n) for name, n in sorted(self.outcomes.items())]
        return rows

    def as_dict(self) -> dict[str, Any]:
        return {"sent": sum(self.sent.values()), "accounted": sum(self.fates.values()),
                "calls": self.calls, "crashes": self.crashes, "reconnects": self.reconnects,
                "surplus": self.surplus, "qos0": self.qos0, "multilevel_reply_to": self.multilevel_reply_to,
                "outcomes": dict(self.outcomes),
                "per_target": {f"{rt}/{via}": n for (rt, via), n in self.sent.items()}}


class Fuzzer:
    def __init__(self, sim: Simulation) -> None:
        self.sim = sim
        self.report = FuzzReport()
        self._tails: dict[str, TraceTail] = {}

    async def start(self) -> None:
        sim = self.sim
        self.cc1 = await sim.cluster_controller("cc1", ["gbid1"],
                                                provisioned=[(PROVIDER, MqttAddress("gbid1", "cc2"), True)])
        self.cc2 = await sim.cluster_controller("cc2", ["gbid1"])
        self.consumer = await sim.libjoynr("consumer", self.cc1)
        provider_app = await sim.libjoynr("provider-app", self.cc2)
        await provider_app.register_provider("fuzz", "joynrsim/Echo", EchoProvider(), participant_id=PROVIDER)
        self.proxy = await self.consumer.create_proxy("joynrsim/Echo", PROVIDER)
        self.recipients = [PROVIDER, self.cc2.routing_provider_id, self.cc1.routing_provider_id,
                           "capabilitiesdirectory_participantid", "nobody", self.consumer.runtime_id]
        host, port = sim.brokers.endpoint("gbid1")
        self.client = paho.Client(CallbackAPIVersion.VERSION2, client_id="fuzzer", protocol=paho.MQTTv311)
        self.client.username_pw_set(*sim.brokers.credentials("fuzzer"))
        self.client.connect(host, port)
        self.client.loop_start()
        for rt in {t[0] for t in TARGETS}:
            self._tails[rt] = TraceTail(sim.run_dir / "trace" / f"{rt}.ndjson")
            self._tails[rt].read()  # what start-up wrote is no fate of a fuzz frame

    def close(self) -> None:
        self.client.disconnect()
        self.client.loop_stop()

    async def batch(self, frames: list[bytes], timeout_s: float = 60.0) -> None:
        """Send one batch spread over the targets, then check fates and a call."""
        expected = Expected()
        pending = []
        for n, frame in enumerate(frames):
            rt, via, topic = TARGETS[n % len(TARGETS)]
            if topic is not None:
                qos = qos_of(n)
                pending.append(self.client.publish(topic, frame, qos=qos))
                self.report.qos0 += qos == 0
            else:
                assert self.consumer.ws is not None
                await self.consumer.ws.send(frame)
            expected.add(rt, via, frame)
            self.report.multilevel_reply_to += "/" in (reply_topic(frame) or "")
        for info in pending:
            await asyncio.to_thread(info.wait_for_publish, timeout_s)
        self.report.sent.update(expected.sent)
        await self._account(expected, timeout_s)
        await self.proxy.call("echo", "still here", ttl_ms=int(timeout_s * 1000))
        self.report.calls += 1
        for runtime in self.sim.runtimes.values():
            if not runtime.running:
                self.report.crashes += 1

    async def _account(self, expected: Expected, timeout_s: float) -> None:
        deadline = asyncio.get_running_loop().time() + timeout_s
        while True:
            for rt, tail in self._tails.items():
                for e in tail.read():
                    fate = expected.fate(rt, e)
                    if fate is not None:
                        self.report.outcomes[fate] += 1
                    if e["ev"] == "msg.drop" and e.get("reason") == "internal-error":
                        self.report.crashes += 1
                    self.report.reconnects += e["ev"] == "link.attach"
            if expected.complete():
                break
            if asyncio.get_running_loop().time() > deadline:
                raise AssertionError(f"frames without a fate in the trace after {timeout_s}s: {expected.missing()}")
            await asyncio.sleep(0.05)
        self.report.fates.update(expected.fates)
        self.report.surplus += expected.surplus


class Expected:
    """The frames of one batch and the fates found for them so far. A frame's fate is a
    ``msg.in`` of its id at the runtime it was sent to, over the transport it was sent on,
    or a drop there before it was a message (no id: it did not decode; ``duplicate``: its
    id and hop count were seen). The same id arriving later elsewhere is routing, not a fate."""

    def __init__(self) -> None:
        self.sent: Counter = Counter()  # (rt, via) -> frames
        self.fates: Counter = Counter()  # (rt, via) -> frames with a fate
        self._ids: Counter = Counter()  # (rt, via, id, hops) -> frames not yet seen arriving
        self.surplus = 0  # events that matched a frame already accounted for

    def add(self, rt: str, via: str, frame: bytes) -> None:
        self.sent[(rt, via)] += 1
        key = _frame_key(frame)
        if key is not None:
            self._ids[(rt, via, *key)] += 1

    def fate(self, rt: str, event: dict[str, Any]) -> str | None:
        via, mid = event.get("via"), event.get("msg")
        if event["ev"] == "msg.in" or (event["ev"] == "msg.drop" and event.get("reason") == "duplicate"):
            # By id and hop count as received: a fuzz message another runtime routed on
            # arrives with a higher count, so it is not taken for a frame sent here.
            key = (rt, via, mid, event.get("hops"))
            if self._ids[key] <= 0:
                return None  # the simulation's own traffic, or a fuzz message routed on
            self._ids[key] -= 1
        elif not (event["ev"] == "msg.drop" and mid is None and via is not None):
            return None
        if self.fates[(rt, via)] >= self.sent[(rt, via)]:
            # Hostile ids collide (two frames "0"): an event of the one is taken for the
            # other. Every frame already has its fate; this one is counted apart.
            self.surplus += 1
            return None
        self.fates[(rt, via)] += 1
        return "msg.in" if event["ev"] == "msg.in" else str(event.get("reason"))

    def complete(self) -> bool:
        return all(self.fates[key] >= n for key, n in self.sent.items())

    def missing(self) -> dict[str, int]:
        return {f"{rt}/{via}": n - self.fates[(rt, via)] for (rt, via), n in self.sent.items()
                if self.fates[(rt, via)] < n}


def _frame_key(frame: bytes) -> tuple[str, int] | None:
    """The id and hop count of a frame, where both slots have a message's types."""
    try:
        fields = msgpack.unpackb(frame, raw=False)
        mid, hops = fields[2], fields[9]
    except Exception:
        return None
    if isinstance(mid, str) and isinstance(hops, int) and not isinstance(hops, bool):
        return mid, hops
    return None


async def fuzz(run_dir: Path, *, frames: int, batch: int = 500, broker: str = "mosquitto", seed_value: int = 0,
               progress: Callable[[FuzzReport], None] | None = None) -> FuzzReport:
    """Send ``frames`` hostile frames in batches. Hypothesis draws the next batch in a worker
    process while this one is sent: drawing costs about as much as everything else (the
    profile: 90% of a single-process run was the Hypothesis engine)."""
    # The fuzzer writes into a libjoynr runtime's own WebSocket: the runtimes stay in this process.
    async with Simulation(run_dir, gbids=["gbid1"], broker=broker, seed=seed_value, processes=False) as sim:
        fuzzer = Fuzzer(sim)
        await fuzzer.start()
        loop = asyncio.get_running_loop()
        with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:

            def draw(start: int) -> asyncio.Future:
                n = min(batch, frames - start)
                return loop.run_in_executor(pool, draw_frames, n, fuzzer.recipients,
                                            seed_value * 1_000_003 + start, start)

            try:
                done = 0
                next_batch = draw(0)
                while done < frames:
                    current = await next_batch
                    done += len(current)
                    if done < frames:
                        next_batch = draw(done)
                    await fuzzer.batch(current)
                    if progress is not None:
                        progress(fuzzer.report)
            finally:
                fuzzer.close()
        return fuzzer.report
