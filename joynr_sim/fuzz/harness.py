"""Send hostile frames to a running simulation and account for every one.

The topology: cluster controllers ``cc1`` and ``cc2`` on ``gbid1``, a consumer runtime on
``cc1`` with a proxy for an Echo provider in a runtime on ``cc2``, and the GCD. Frames go
to each cluster controller's and the GCD's MQTT topic from a separate client holding the
broker password (every third round of targets at QoS 0, the others at QoS 1), and to
``cc1`` over the consumer's own WebSocket connection. After every batch a call must still
go through, and every frame must have exactly one fate in the trace of the runtime it was
sent to: a ``msg.in`` (it was a message; the router took it from there) or a ``msg.drop``
before it was one (``decode-error``, ``invalid-message``, ``duplicate``, ``sender-limit``),
or a share of a line that counts a muted sender's messages (``sender-limit`` with ``count``,
``core.fairness``). A ``msg.drop`` with reason ``internal-error`` or a runtime that stopped
running is a crash; a ``link.attach`` after the start is a reconnect (a broker closed a
runtime's connection over something a frame made it do).

After the hostile frames come the phases of ``insiders`` (one client's flood of valid
requests) and ``intruders`` (CONNECTs under other identities, WebSocket connections that
never show a token); their outcomes are part of the report.
"""

from __future__ import annotations

import asyncio
import multiprocessing
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import paho.mqtt.client as paho
from hypothesis import HealthCheck, Phase, given, seed, settings
from paho.mqtt.enums import CallbackAPIVersion

from ..core.address import MqttAddress
from ..core.gcd import GCD_PARTICIPANT_ID, GCD_TOPIC
from ..runtime.participants import EchoProvider
from ..simulation import Simulation
from ..wire.codecs import DEFAULT_WIRE
from .fates import COUNTED, Expected, TraceTail
from .frames import restart_ids
from .insiders import FloodReport, flood_phase
from .intruders import ConnectReport, PreauthReport, connect_phase, preauth_phase
from .wires import source

PROVIDER = "fuzz-echo"
# Where frames go: (runtime that receives, transport, MQTT topic or None for WebSocket).
TARGETS = (("cc2", "mqtt", "cc2/low"), ("cc1", "mqtt", "cc1/low"),
           ("gcd-gbid1", "mqtt", f"{GCD_TOPIC}/low"), ("cc1", "ws", None))


def qos_of(n: int, targets: int = len(TARGETS)) -> int:
    """The QoS frame ``n`` of a batch is published at: every third round of targets at 0."""
    return 0 if (n // targets) % 3 == 2 else 1


def draw_frames(count: int, recipients: list[str], seed_value: int, first_id: int = 0,
                wire: str = DEFAULT_WIRE) -> list[bytes]:
    """``count`` frames from the Hypothesis strategy of ``wire``, reproducibly for one seed;
    their own message ids are numbered from ``first_id``."""
    frames: list[bytes] = []
    restart_ids(first_id)

    @seed(seed_value)
    @settings(max_examples=count, database=None, phases=[Phase.generate], deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(source(wire).hostile_frames(recipients))
    def collect(frame: bytes) -> None:
        frames.append(frame)

    collect()
    return frames


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
    cut: int = 0  # link.detach of a runtime with closed: false (a connection lost, not ended)
    flood: FloodReport | None = None
    connects: ConnectReport | None = None
    preauth: PreauthReport | None = None

    def rows(self) -> list[tuple[str, int | str]]:
        rows: list[tuple[str, int | str]] = [
            ("frames sent", sum(self.sent.values())), ("frames accounted for", sum(self.fates.values())),
            ("  at QoS 0", self.qos0), ("  with a replyTo topic holding '/'", self.multilevel_reply_to),
            ("calls after a batch", self.calls), ("runtime crashes", self.crashes),
            ("reconnects of a runtime", self.reconnects), ("connections lost by a runtime", self.cut),
            ("events of colliding hostile ids", self.surplus)]
        rows += [(f"  {name}", n) for name, n in sorted(self.outcomes.items())]
        for phase in (self.flood, self.connects, self.preauth):
            if phase is not None:
                rows += phase.rows()
        return rows

    def failures(self) -> list[str]:
        """What makes the run fail, one line each; empty when it passed."""
        failed = []
        if self.crashes:
            failed.append(f"{self.crashes} runtime crashes")
        # A takeover with a controller's own login ends its connection by design (``intruders``).
        allowed = self.connects.takeovers if self.connects is not None else 0
        if self.reconnects > allowed or self.cut > allowed:
            failed.append(f"{self.reconnects} reconnects, {self.cut} connections lost by a runtime")
        if self.fates != self.sent:
            failed.append(f"frames without a fate: {sum(self.sent.values()) - sum(self.fates.values())}")
        for phase in (self.flood, self.connects, self.preauth):
            if phase is not None:
                failed += phase.failures()
        return failed

    def as_dict(self) -> dict[str, Any]:
        report = {"sent": sum(self.sent.values()), "accounted": sum(self.fates.values()),
                  "calls": self.calls, "crashes": self.crashes, "reconnects": self.reconnects, "cut": self.cut,
                  "surplus": self.surplus, "qos0": self.qos0, "multilevel_reply_to": self.multilevel_reply_to,
                  "outcomes": dict(self.outcomes),
                  "per_target": {f"{rt}/{via}": n for (rt, via), n in self.sent.items()},
                  "failures": self.failures()}
        for key, phase in (("flood", self.flood), ("connects", self.connects), ("ws_preauth", self.preauth)):
            if phase is not None:
                report[key] = phase.as_dict()
        return report


class Fuzzer:
    def __init__(self, sim: Simulation, targets: tuple[tuple[str, str, str | None], ...] = TARGETS) -> None:
        self.sim = sim
        self.targets = targets
        self.report = FuzzReport()
        self.source = source(sim.wire)  # the frames of the run's wire: how to read their ids and replyTo
        self._tails: dict[str, TraceTail] = {}
        # Called with (runtime, event) for every event read: the later phases' own accounting.
        self.observers: list[Callable[[str, dict[str, Any]], None]] = []

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
                           GCD_PARTICIPANT_ID, "nobody", self.consumer.runtime_id]
        host, port = sim.brokers.endpoint("gbid1")
        self.client = paho.Client(CallbackAPIVersion.VERSION2, client_id="fuzzer", protocol=paho.MQTTv311)
        self.client.username_pw_set(*sim.brokers.credentials("fuzzer"))
        self.client.connect(host, port)
        self.client.loop_start()
        for rt in {t[0] for t in TARGETS}:  # every runtime with a broker connection, whatever the targets
            self._tails[rt] = TraceTail(sim.run_dir / "trace" / f"{rt}.ndjson")
            self._tails[rt].read()  # what start-up wrote is no fate of a fuzz frame

    def close(self) -> None:
        self.client.disconnect()
        self.client.loop_stop()

    async def batch(self, frames: list[bytes], timeout_s: float = 60.0) -> None:
        """Send one batch spread over the targets, then check fates and a call."""
        expected = Expected(self.source.frame_key)
        pending = []
        for n, frame in enumerate(frames):
            rt, via, topic = self.targets[n % len(self.targets)]
            if topic is not None:
                qos = qos_of(n, len(self.targets))
                pending.append(self.client.publish(topic, frame, qos=qos))
                self.report.qos0 += qos == 0
            else:
                assert self.consumer.ws is not None
                await self.consumer.ws.send(frame)
            expected.add(rt, via, frame)
            self.report.multilevel_reply_to += "/" in (self.source.reply_topic(frame) or "")
        for info in pending:
            await asyncio.to_thread(info.wait_for_publish, timeout_s)
        self.report.sent.update(expected.sent)
        await self._account(expected, timeout_s)
        await self.proxy.call("echo", "still here", ttl_ms=int(timeout_s * 1000))
        self.report.calls += 1
        for runtime in self.sim.runtimes.values():
            if not runtime.running:
                self.report.crashes += 1

    def read(self) -> list[tuple[str, dict[str, Any]]]:
        """The events the watched runtimes traced since the last read, after counting the
        crashes and lost connections among them and showing each to the observers."""
        events = []
        for rt, tail in self._tails.items():
            for e in tail.read():
                if e["ev"] == "msg.drop" and e.get("reason") == "internal-error":
                    self.report.crashes += 1
                self.report.reconnects += e["ev"] == "link.attach"
                self.report.cut += e["ev"] == "link.detach" and e.get("closed") is False
                for observer in self.observers:
                    observer(rt, e)
                events.append((rt, e))
        return events

    async def until(self, condition: Callable[[], bool], timeout_s: float) -> bool:
        """Read the traces until ``condition`` holds (an observer makes it), at most
        ``timeout_s``; whether it does."""
        deadline = asyncio.get_running_loop().time() + timeout_s
        while True:
            self.read()
            if condition():
                return True
            if asyncio.get_running_loop().time() > deadline:
                return False
            await asyncio.sleep(0.05)

    async def _account(self, expected: Expected, timeout_s: float) -> None:
        # The bound covers a muted sender: its frames have their fate in the line that
        # counts them, written when its window of DEFAULT_WINDOW_MS closes.
        deadline = asyncio.get_running_loop().time() + timeout_s
        while True:
            for rt, e in self.read():
                fate = expected.fate(rt, e)
                if fate is not None:
                    self.report.outcomes[fate] += 1
            if expected.complete():
                break
            if asyncio.get_running_loop().time() > deadline:
                raise AssertionError(f"frames without a fate in the trace after {timeout_s}s: {expected.missing()}")
            await asyncio.sleep(0.05)
        counted = expected.settle()
        if counted:
            self.report.outcomes[COUNTED] += counted
        self.report.fates.update(expected.fates)
        self.report.surplus += expected.surplus


async def fuzz(run_dir: Path, *, frames: int, batch: int = 500, broker: str = "mosquitto", wire: str = DEFAULT_WIRE,
               seed_value: int = 0, flood: int = 0, connects: int = 0, ws_attempts: int = 0,
               progress: Callable[[FuzzReport], None] | None = None,
               phase: Callable[[str], None] | None = None) -> FuzzReport:
    """Send ``frames`` hostile frames in batches, then the phases asked for: a flood of
    ``flood`` frames, ``connects`` CONNECTs of each kind, ``ws_attempts`` WebSocket
    connections of each kind (0: the phase is left out). Hypothesis draws the next batch in
    a worker process while this one is sent: drawing costs about as much as everything else
    (the profile: 90% of a single-process run was the Hypothesis engine). ``phase`` is told
    the name of each phase as it begins. ``wire``: what every runtime speaks
    (``joynr_sim.wire.codecs``), and so what the hostile frames, the flood and the
    intruders' messages are written in."""
    # The fuzzer writes into a libjoynr runtime's own WebSocket: the runtimes stay in this process.
    async with Simulation(run_dir, gbids=["gbid1"], broker=broker, seed=seed_value, processes=False,
                          wire=wire) as sim:
        fuzzer = Fuzzer(sim)
        await fuzzer.start()
        loop = asyncio.get_running_loop()
        with ProcessPoolExecutor(1, mp_context=multiprocessing.get_context("spawn")) as pool:

            def draw(start: int) -> asyncio.Future:
                n = min(batch, frames - start)
                return loop.run_in_executor(pool, draw_frames, n, fuzzer.recipients,
                                            seed_value * 1_000_003 + start, start, sim.wire)

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
        report = fuzzer.report
        if flood:
            _tell(phase, f"flood: {flood} frames to cc2")
            report.flood = await flood_phase(fuzzer, flood)
        if connects:
            _tell(phase, f"CONNECTs: {connects} of each kind")
            report.connects = await connect_phase(fuzzer, connects)
        if ws_attempts:
            _tell(phase, f"WebSocket connections without a token: {ws_attempts} of each kind")
            report.preauth = await preauth_phase(fuzzer, ws_attempts)
        _tell(phase, "stopping the simulation")
    # The lines written on the graceful stop: the last counting lines, the connections' ends.
    fuzzer.read()
    if report.flood is not None:
        report.flood.final = True
    return report


def _tell(phase: Callable[[str], None] | None, what: str) -> None:
    if phase is not None:
        phase(what)
