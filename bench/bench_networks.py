"""The scenario library under every routing policy on the memory network, next to the same
on amqtt in the same run: wall-clock seconds for all runs (the Spark check not included,
as the matrix's ``--check`` is not), each run one after the other.

On memory a run is simulated in virtual time: the rows also say how much simulated time the
library covers (its runs' trace spans added up) per wall-clock second. ``--quick`` takes
every fourth scenario of the library, on both networks alike.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from pathlib import Path
from typing import Any

from joynr_sim.core.policies import POLICIES
from joynr_sim.scenario import load_scenarios
from joynr_sim.scenario.matrix import cell_of
from joynr_sim.scenario.runner import run_scenario
from joynr_sim.trace import read_run

LIBRARY = Path(__file__).resolve().parent.parent / "scenarios"
SEED = 20261129


def _matrix(network: str, scenarios: list[Any], out: Path) -> dict[str, Any]:
    async def all_runs() -> list[tuple[Any, Any]]:
        runs = []
        for policy in POLICIES:
            for scenario in scenarios:
                runs.append((scenario, await run_scenario(scenario, out / policy, policy=policy, seed=SEED,
                                                          network=network)))
        return runs

    began = time.perf_counter()
    runs = asyncio.run(all_runs())
    seconds = time.perf_counter() - began
    simulated_ms = 0
    for _, result in runs:
        stamps = [e["ts"] for e in read_run(result.run_dir)]
        simulated_ms += max(stamps) - min(stamps) if stamps else 0
    cells = [cell_of(s, r) for s, r in runs]
    return {"seconds": seconds, "runs": len(runs), "wrong": sum(not c.ok for c in cells),
            "simulated_s": simulated_ms / 1000}


def run(quick: bool) -> list[dict[str, Any]]:
    scenarios = load_scenarios(LIBRARY)
    if quick:
        scenarios = scenarios[::4]
    with tempfile.TemporaryDirectory(prefix="bench-networks-") as tmp:
        memory = _matrix("memory", scenarios, Path(tmp) / "memory")
        amqtt = _matrix("amqtt", scenarios, Path(tmp) / "amqtt")
    group = f"library x {len(POLICIES)} policies ({len(scenarios)} scenarios)"
    rows = []
    for name, m in (("memory", memory), ("amqtt", amqtt)):
        rows.append({"group": group, "name": f"{name}: wall clock", "value": round(m["seconds"], 2), "unit": "s",
                     "runs": m["runs"], "not as the matrix expects": m["wrong"]})
    rows.append({"group": group, "name": "amqtt / memory", "value": round(amqtt["seconds"] / memory["seconds"], 1),
                 "unit": "x"})
    rows.append({"group": group, "name": "memory: simulated per wall-clock second",
                 "value": round(memory["simulated_s"] / memory["seconds"], 1), "unit": "s/s"})
    return rows
