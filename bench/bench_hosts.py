"""Runtimes in host processes: what a process costs at start, crash and restart.

Rows: the start of a host process until it answers, forked from the fork server and as a
program of its own (a Python start and its imports); a cluster
controller's start and a crash-and-restart, each in host processes (a warm spare host
taken from the pool, as a scenario run does) next to the same in the runner's process.
"""

from __future__ import annotations

import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

from joynr_sim.host.process.host_process import HostProcess
from joynr_sim.simulation import Simulation


class _Program(HostProcess):
    def command(self) -> list[str]:
        return [sys.executable, "-m", "joynr_sim.host"]


async def _host_starts(n: int, kind: type[HostProcess]) -> list[float]:
    samples = []
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(n + 1):
            host = kind("bench", Path(tmp))
            t = time.perf_counter()
            await host.spawn()
            samples.append(time.perf_counter() - t)
            await host.close()
    return samples[1:]  # the first also starts the fork server: once per runner process


async def _cc_lifecycle(n: int, processes: bool) -> tuple[list[float], list[float]]:
    starts, restarts = [], []
    with tempfile.TemporaryDirectory() as tmp:
        async with Simulation(Path(tmp), gbids=["gbid1"], processes=processes) as sim:
            for i in range(n):
                t = time.perf_counter()
                cc = await sim.cluster_controller(f"cc{i}")
                starts.append(time.perf_counter() - t)
                await asyncio.sleep(0.2)  # let the spare host that replaced the one taken come up
                t = time.perf_counter()
                await cc.restart()
                restarts.append(time.perf_counter() - t)
                await asyncio.sleep(0.2)
    return starts, restarts


def _row(group: str, name: str, samples: list[float], **extra) -> dict:
    return {"group": group, "name": name, "value": statistics.median(samples) * 1e3, "unit": "ms",
            "max_ms": max(samples) * 1e3, "n": len(samples), **extra}


def run(quick: bool) -> list[dict]:
    n = 3 if quick else 10
    forked = asyncio.run(_host_starts(n, HostProcess))
    program = asyncio.run(_host_starts(n, _Program))
    starts, restarts = asyncio.run(_cc_lifecycle(n, processes=True))
    in_starts, in_restarts = asyncio.run(_cc_lifecycle(n, processes=False))
    return [
        _row("hosts", "host process start, forked (p50)", forked),
        _row("hosts", "host process start, python -m joynr_sim.host (p50)", program),
        _row("hosts", "cluster controller start, host process (p50)", starts),
        _row("hosts", "cluster controller start, in process (p50)", in_starts),
        _row("hosts", "crash + restart, host process (p50)", restarts),
        _row("hosts", "crash + restart, in process (p50)", in_restarts),
    ]
