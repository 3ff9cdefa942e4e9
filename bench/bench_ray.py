"""Host processes on Ray against host processes on this machine, in one run.

The fleet of ``bench fleet`` (``JOYNR_SIM_FLEET=CCSxAPPS``; default 100x1000, ``--quick``
10x100) twice: its hosts as host processes of this machine, one per core
(``Simulation(hosts=N)``), then as Ray actors on a two-node Ray cluster on loopback (Ray's
own multi-node test cluster, the cores split between its nodes: ``Simulation(hosts="ray")``).
Rows: calls/s and lost calls of each, and their ratio (target: Ray within 10% of the local
hosts, none lost).

Then, on Ray, the Ray worker process of one host's actor is SIGKILLed: rows for the runtimes
it held, how many of them the trace records as crashed (``life.crash``), and, after they
were restarted (in new actors of the same bundles; the providers registered and the proxies
made again, as a restarted application would), the calls answered by the whole fleet.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import time
from typing import Any

from bench.bench_fleet import CONCURRENCY, TTL_MS, _all, _fleet, autosave, fleet_size
from joynr_sim.host.ray.ray_hosts import SINGLE_MACHINE
from joynr_sim.runtime.participants import EchoProvider

CALLS = 20_000  # in all (--quick: 2,000), as bench fleet's
CRASH_BOUND_S = 60.0  # for the runtimes of a killed host to be seen down


def _crashes(run_dir) -> set[str]:
    found = set()
    for path in (run_dir / "trace").glob("*.ndjson"):
        for line in path.read_text(errors="replace").splitlines():
            if '"life.crash"' in line:
                found.add(json.loads(line)["rt"])
    return found


async def _kill_one_host(sim, pairs: list[tuple[Any, Any]]) -> dict[str, Any]:
    """SIGKILL of one actor's worker: its runtimes seen down and traced crashed; then
    restarted, and two calls per consumer."""
    host = next(r.process for r in sim.runtimes.values() if r.kind == "cluster-controller")
    held = [r for r in sim.runtimes.values() if getattr(r, "process", None) is host]
    os.kill(host.actor_pid, signal.SIGKILL)
    begun = time.perf_counter()
    while any(r.running for r in held) and time.perf_counter() - begun < CRASH_BOUND_S:
        await asyncio.sleep(0.05)
    seen_s = time.perf_counter() - begun
    crashed = _crashes(sim.run_dir) & {r.runtime_id for r in held}
    for kind in ("cluster-controller", "libjoynr"):  # a controller before its applications
        await _all(r.restart() for r in held if r.kind == kind)
    # A new process knows what its runtime persisted: no provider object, no proxy.
    ccs = sum(1 for r in sim.runtimes.values() if r.kind == "cluster-controller")

    def k(runtime) -> int:  # app<k>-<i>
        return int(runtime.runtime_id[3:].split("-")[0])

    await _all(r.register_provider("d", "joynrsim/Echo", EchoProvider(), participant_id=f"echo-{k(r)}")
               for r in held if r.kind == "libjoynr" and r.runtime_id.endswith("-0"))

    async def again(app, proxy):
        if app in held:
            proxy = await app.create_proxy("joynrsim/Echo", f"echo-{(k(app) + 1) % ccs}")
        return app, proxy

    pairs = await _all(again(app, proxy) for app, proxy in pairs)
    results = await _all(app.load(proxy.participant_id, proxy.provider_participant_id, "echo", ["y"],
                                  calls=2, concurrency=1, ttl_ms=TTL_MS) for app, proxy in pairs)
    return {"held": len(held), "crashed": len(crashed), "seen_down_s": seen_s,
            "calls": 2 * len(pairs), "ok": sum(r["ok"] for r in results)}


def run(quick: bool) -> list[dict]:
    os.environ.setdefault(SINGLE_MACHINE, "0")  # before Ray is imported: its nodes stay on loopback
    import ray
    from ray.cluster_utils import Cluster

    ccs, apps = fleet_size(quick) if os.environ.get("JOYNR_SIM_FLEET") else ((10, 100) if quick else (100, 1000))
    calls = max(10, (CALLS // 10 if quick else CALLS) // (apps - ccs))
    saves = autosave()
    cores = os.cpu_count() or 1
    local = asyncio.run(_fleet(ccs, apps, calls, saves, hosts=cores, extras=False))
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": max(1, cores // 2),
                                                           "include_dashboard": False})
    try:
        cluster.add_node(num_cpus=max(1, cores - cores // 2))
        cluster.wait_for_nodes()
        on_ray = asyncio.run(_fleet(ccs, apps, calls, saves, hosts="ray", ray_address=cluster.address,
                                    extras=False, after=_kill_one_host))
    finally:
        ray.shutdown()
        cluster.shutdown()
    group = f"{ccs} CCs / {apps} runtimes on Mosquitto (autosave {saves}), {CONCURRENCY} calls in flight per consumer"
    rows = []
    for name, r in (("host processes on this machine", local), ("Ray actors on a two-node Ray cluster", on_ray)):
        rows += [
            {"group": group, "name": f"fleet calls: {name} ({r['hosts']} hosts)", "value": r["ok"] / r["wall"],
             "unit": "calls/s", "calls": r["calls"]},
            {"group": group, "name": f"calls lost or failed: {name}", "value": r["calls"] - r["ok"],
             "unit": "calls", "failed": r["failed"]},
            {"group": group, "name": f"start-up: {name}", "value": r["startup"], "unit": "s"},
        ]
    rows.append({"group": group, "name": "fleet calls on Ray ÷ on this machine's host processes",
                 "value": (on_ray["ok"] / on_ray["wall"]) / (local["ok"] / local["wall"]),
                 "unit": "ratio (target >= 0.9)"})
    killed = on_ray["after"]
    rows += [
        {"group": f"{group}: one actor's worker SIGKILLed", "name": "runtimes in its host", "value": killed["held"],
         "unit": "runtimes"},
        {"group": f"{group}: one actor's worker SIGKILLed", "name": "of them traced life.crash",
         "value": killed["crashed"], "unit": "runtimes", "seen_down_s": round(killed["seen_down_s"], 2)},
        {"group": f"{group}: one actor's worker SIGKILLed", "name": "calls answered after they were restarted",
         "value": killed["ok"], "unit": f"of {killed['calls']}"},
    ]
    return rows
