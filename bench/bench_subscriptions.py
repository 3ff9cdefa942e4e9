"""Publications end to end next to calls on the same path.

Path: joynrsim/Counter in app1 behind cc1, a proxy in app2 behind cc2, one broker. One
increment at a time, fired where the provider runs (``invoke_provider``): the time until
the subscriber's runtime holds the new value, for the attribute subscription (publication:
provider -> cc1 -> broker -> cc2 -> proxy) and the multicast (provider -> cc1 -> the
multicast topic -> cc2 -> proxy). Baseline in the same run: a call of ``get`` through the
proxy (there and back on the same path). Every runtime runs in a host process of its own,
so each wait crosses the proxy's control channel as well.
"""

from __future__ import annotations

import asyncio
import statistics
import tempfile
import time

from joynr_sim.runtime.participants import CounterProvider
from joynr_sim.simulation import Simulation


async def _measure(n: int) -> dict[str, list[float]]:
    with tempfile.TemporaryDirectory() as tmp:
        async with Simulation(tmp, gbids=["gbid1"], broker="amqtt") as sim:
            cc1 = await sim.cluster_controller("cc1", ["gbid1"])
            cc2 = await sim.cluster_controller("cc2", ["gbid1"])
            app1 = await sim.libjoynr("app1", cc1)
            app2 = await sim.libjoynr("app2", cc2)
            provider = await app1.register_provider("dom", "joynrsim/Counter", CounterProvider(),
                                                    participant_id="bench-counter")
            proxy = await app2.discover_proxy("joynrsim/Counter", "dom", scope="GLOBAL_ONLY")
            value = await proxy.subscribe_attribute("value")
            fired = await proxy.subscribe_broadcast("incremented")
            await value.wait_for(1, 10)
            out: dict[str, list[float]] = {"call": [], "attribute": [], "multicast": []}
            for i in range(1, n + 1):
                t = time.perf_counter()
                await proxy.call("get", ttl_ms=10_000)
                out["call"].append(time.perf_counter() - t)
                t = time.perf_counter()
                await app1.invoke_provider(provider.participant_id, "increment", [])
                await fired.wait_for(i, 10)
                out["multicast"].append(time.perf_counter() - t)
                await value.wait_for(i + 1, 10)
                out["attribute"].append(time.perf_counter() - t)
            return out


def run(quick: bool) -> list[dict]:
    n = 20 if quick else 200
    samples = asyncio.run(_measure(n))
    base = statistics.median(samples["call"])
    rows = []
    for name, label in (("call", "call get (baseline)"), ("multicast", "increment -> multicast held"),
                        ("attribute", "increment -> attribute publication held")):
        median = statistics.median(samples[name])
        rows.append({"group": "subscriptions", "name": label, "value": round(median * 1000, 2), "unit": "ms median",
                     "n": n, "ratio_to_call": round(median / base, 2)})
    return rows
