"""Calls during one sender's flood, next to the same calls without it.

Topology as the hostile-input tests build it: a consumer on cc1 calls an Echo provider on
cc2, both controllers on one broker, every runtime in a host process of its own. The flood:
``python -m joynr_sim.fuzz.publisher`` publishes N valid requests for participants nobody
knows, at QoS 1, from one sender, to cc2's topic, as fast as the broker takes them. A call
goes every 100 ms with joynr's default TTL (60 s), during the flood and, as the baseline in
the same run, for as long before it. Rows per broker: the calls answered during the flood,
their median and 90th-percentile latency against the baseline's (the ratio), and the trace
lines cc2 wrote about the flooding sender, per flood message.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from joynr_sim.core.address import MqttAddress
from joynr_sim.runtime.participants import EchoProvider
from joynr_sim.simulation import Simulation
from joynr_sim.trace import read_events

PROVIDER = "bench-echo"
CALL_INTERVAL_S = 0.1
BASELINE_CALLS = 50


def _percentile(samples: list[float], p: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))] if ordered else float("nan")


async def _timed(proxy: Any, text: str) -> float | None:
    started = time.perf_counter()
    try:
        await proxy.call("echo", text)
    except Exception:
        return None
    return time.perf_counter() - started


async def _calls(proxy: Any, until: asyncio.Future | None, count: int = 0) -> list[float | None]:
    """A call every 100 ms: ``count`` of them, or until ``until`` is done; their latencies."""
    calls = []
    while (until is not None and not until.done()) or len(calls) < count:
        calls.append(asyncio.create_task(_timed(proxy, f"c{len(calls)}")))
        await asyncio.sleep(CALL_INTERVAL_S)
    return list(await asyncio.gather(*calls))


async def _measure(broker: str, flood: int) -> list[dict[str, Any]]:
    with tempfile.TemporaryDirectory(prefix="joynr-sim-bench-flood-") as tmp:
        run_dir = Path(tmp)
        async with Simulation(run_dir, gbids=["gbid1"], broker=broker) as sim:
            await sim.cluster_controller("cc1", ["gbid1"], provisioned=[(PROVIDER, MqttAddress("gbid1", "cc2"), True)])
            cc2 = await sim.cluster_controller("cc2", ["gbid1"])
            consumer = await sim.libjoynr("consumer", sim.runtimes["cc1"])
            app = await sim.libjoynr("provider-app", cc2)
            await app.register_provider("dom", "joynrsim/Echo", EchoProvider(), participant_id=PROVIDER)
            proxy = await consumer.create_proxy("joynrsim/Echo", PROVIDER)
            baseline = await _calls(proxy, None, BASELINE_CALLS)
            host, port = sim.brokers.endpoint("gbid1")
            started = time.perf_counter()
            publisher = await asyncio.create_subprocess_exec(
                sys.executable, "-m", "joynr_sim.fuzz.publisher", host, str(port),
                *sim.brokers.credentials("flooder"), "cc2/low", str(flood), "flooder",
                str(sim.clock.now_ms() + 600_000), "flood-", stdout=asyncio.subprocess.DEVNULL,
            )
            during = await _calls(proxy, asyncio.ensure_future(publisher.wait()))
            flood_s = time.perf_counter() - started
        lines = sum(1 for e in read_events(run_dir / "trace" / "cc2.ndjson") if e.get("from") == "flooder")
    answered = [t for t in during if t is not None]
    base = [t for t in baseline if t is not None]
    rows = [
        {"group": f"flood {broker}", "name": f"calls answered during a flood of {flood:,}",
         "value": round(100 * len(answered) / max(1, len(during)), 1), "unit": "%",
         "calls": len(during), "flood_s": round(flood_s, 1)},
        {"group": f"flood {broker}", "name": "trace lines about the flooding sender per flood message",
         "value": round(lines / flood, 3), "unit": "lines"},
    ]
    for p in (50, 90):
        during_p, base_p = _percentile(answered, p), _percentile(base, p)
        rows.append({"group": f"flood {broker}", "name": f"call latency p{p} during the flood",
                     "value": round(during_p * 1000, 1), "unit": "ms",
                     "baseline_ms": round(base_p * 1000, 1), "ratio": round(during_p / base_p, 1)})
    return rows


def run(quick: bool) -> list[dict[str, Any]]:
    flood = 2_000 if quick else 10_000
    rows: list[dict[str, Any]] = []
    for broker in ("amqtt", "mosquitto"):
        rows.extend(asyncio.run(_measure(broker, flood)))
    return rows
