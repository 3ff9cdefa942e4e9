"""How many schedules ``joynr-sim explore`` judges within one budget on the memory network
and on amqtt, in the same bench run: the command itself, as a user runs it (generation,
runs, the Spark judgement in batches, shrinking of what it finds), read back from its
``explore.json``.

Both explore under ``last-writer-wins`` with the same seed, so both meet findings and
shrink them within their budget, as an exploration does. ``--quick``: one minute each
instead of ten.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

SEED = 11  # not a seed the tests explore with


def _explore(network: str, budget: str, out: Path) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "joynr_sim.cli", "explore", "--network", network, "--policy", "last-writer-wins",
           "--seed", str(SEED), "--budget", budget, "--out", str(out)]
    subprocess.run(cmd, check=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return json.loads((out / "explore.json").read_text())


def run(quick: bool) -> list[dict[str, Any]]:
    budget = "1m" if quick else "10m"
    with tempfile.TemporaryDirectory(prefix="bench-explore-") as tmp:
        memory = _explore("memory", budget, Path(tmp) / "memory")
        amqtt = _explore("amqtt", budget, Path(tmp) / "amqtt")
    group = f"explore --budget {budget} (last-writer-wins, seed {SEED})"
    rows = []
    for name, summary in (("memory", memory), ("amqtt", amqtt)):
        rows.append({"group": group, "name": f"{name}: schedules judged", "value": summary["runs"], "unit": "runs",
                     "findings": len(summary["findings"]), "first finding s": summary["first_finding_s"]})
    rows.append({"group": group, "name": "memory / amqtt", "value": round(memory["runs"] / max(amqtt["runs"], 1), 1),
                 "unit": "x"})
    return rows
