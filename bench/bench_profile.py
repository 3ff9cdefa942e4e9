"""Where one request/reply spends its CPU: a cProfile of echo calls with every runtime in
the runner's process, and the SQLite statements each call costs, per kind of file.

Path as in ``bench_e2e``: libjoynr proxy -> CC1 (ws) -> broker -> CC2 -> provider and back,
without fault proxies, on Mosquitto (the broker runs in its own process, so the profile is
the runtimes' alone). The rows: CPU milliseconds per call of this process, first without
the profiler (and the part of it spent outside the event loop's thread), then under it;
the Python function calls and the event loop's callbacks per call under the profiler
(counts: they hold on a loaded machine, where times do not); SQLite statements per call
(outbox, link store, GCD store; BEGIN and COMMIT count); and the top functions by own
time, each with its share of the profile and its calls per request/reply. Last, the CPU per
call unprofiled on each event loop a host process can run on (uvloop, hosts' default, and the
standard library's), alternated in the same run, and their ratio.
"""

from __future__ import annotations

import asyncio
import cProfile
import pstats
import sqlite3
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from bench.bench_e2e import warm_echo_proxy
from joynr_sim.host.process.event_loop import CHOICES, event_loop_factory
from joynr_sim.simulation import Simulation

TOP_N = 15


def _file_kind(database: Any) -> str:
    name = Path(str(database)).name
    for suffix, kind in ((".outbox.sqlite", "outbox"), (".links.sqlite", "link store"), ("gcd.sqlite", "gcd store")):
        if name.endswith(suffix):
            return kind
    return "other"


@contextmanager
def count_statements() -> Iterator[Counter[str]]:
    """Every SQLite statement of connections opened meanwhile, counted per kind of file."""
    counts: Counter[str] = Counter()
    original = sqlite3.connect

    def connect(database: Any, *args: Any, **kwargs: Any) -> sqlite3.Connection:
        conn = original(database, *args, **kwargs)
        kind = _file_kind(database)
        conn.set_trace_callback(lambda _statement: counts.update((kind,)))
        return conn

    sqlite3.connect = connect  # type: ignore[assignment]
    try:
        yield counts
    finally:
        sqlite3.connect = original  # type: ignore[assignment]


async def _profile(n: int) -> tuple[list[dict], dict[str, float], dict[str, float]]:
    with tempfile.TemporaryDirectory() as tmp, count_statements() as statements:
        async with Simulation(Path(tmp), gbids=["gbid1"], broker="mosquitto", faults=False,
                              processes=False) as sim:
            proxy = await warm_echo_proxy(sim)
            await asyncio.sleep(0.2)  # the warm-up's PUBACKs settle outside the measurement
            cpu0, loop0 = time.process_time(), time.thread_time()
            for i in range(n):
                await proxy.call("echo", f"u{i}")
            cpu = {"plain": time.process_time() - cpu0, "off the loop": 0.0}
            cpu["off the loop"] = cpu["plain"] - (time.thread_time() - loop0)
            statements.clear()
            profiler = cProfile.Profile(time.thread_time)  # CPU of the event loop thread, not waits
            cpu0 = time.process_time()
            profiler.enable()
            for i in range(n):
                await proxy.call("echo", f"m{i}")
            profiler.disable()
            cpu["profiled"] = time.process_time() - cpu0
            per_kind = {kind: count / n for kind, count in statements.items()}
    stats = pstats.Stats(profiler)
    total = sum(tt for (_, _, tt, _, _) in stats.stats.values()) or 1.0  # type: ignore[attr-defined]
    # Counts, unlike times, do not change with the machine's load: what a change to the
    # call path saved can be read from them on a busy machine.
    cpu["function calls"] = sum(nc for (_, nc, _, _, _) in stats.stats.values())  # type: ignore[attr-defined]
    cpu["loop callbacks"] = sum(nc for (filename, _, func), (_, nc, _, _, _) in stats.stats.items()  # type: ignore[attr-defined]
                                if func == "_run" and filename.endswith(("asyncio/events.py", "asyncio\\events.py")))
    top = sorted(stats.stats.items(), key=lambda kv: kv[1][2], reverse=True)[:TOP_N]  # type: ignore[attr-defined]
    rows = []
    for (filename, line, func), (_, ncalls, tottime, cumtime, _) in top:
        where = f"{Path(filename).name}:{line}" if line else filename
        rows.append({
            "group": "top by own time", "name": f"{func} ({where})", "value": tottime / total * 100,
            "unit": "% of profile", "calls_per_call": round(ncalls / n, 2),
            "cumulative_ms_per_call": round(cumtime / n * 1e3, 3),
        })
    return rows, per_kind, {k: v / n for k, v in cpu.items()}


async def _plain_cpu(n: int) -> float:
    """CPU seconds per call of this process, unprofiled, on whatever loop runs this."""
    with tempfile.TemporaryDirectory() as tmp:
        async with Simulation(Path(tmp), gbids=["gbid1"], broker="mosquitto", faults=False,
                              processes=False) as sim:
            proxy = await warm_echo_proxy(sim)
            await asyncio.sleep(0.2)
            cpu0 = time.process_time()
            for i in range(n):
                await proxy.call("echo", f"u{i}")
            return (time.process_time() - cpu0) / n


def _loops(n: int, rounds: int = 2) -> list[dict]:
    """The same call path on each event loop a host can run on, alternated (A B A B) so that
    a change of the machine's load hits both; the best round of each."""
    best: dict[str, float] = {}
    for _ in range(rounds):
        for choice in CHOICES:
            with asyncio.Runner(loop_factory=event_loop_factory(choice)) as runner:
                cpu = runner.run(_plain_cpu(n))
            best[choice] = min(best.get(choice, cpu), cpu)
    rows = [{"group": "event loop", "name": f"CPU per call on {choice}'s loop (runner process)",
             "value": best[choice] * 1e3, "unit": "ms"} for choice in CHOICES]
    rows.append({"group": "event loop", "name": "CPU per call, uvloop ÷ asyncio (hosts run on uvloop)",
                 "value": best["uvloop"] / best["asyncio"], "unit": "ratio"})
    return rows


def run(quick: bool) -> list[dict]:
    n = 200 if quick else 1000
    top, statements, cpu = asyncio.run(_profile(n))
    rows = [
        {"group": "one request/reply", "name": "CPU per call (runner process)", "value": cpu["plain"] * 1e3,
         "unit": "ms"},
        {"group": "one request/reply", "name": "CPU per call outside the event loop's thread",
         "value": cpu["off the loop"] * 1e3, "unit": "ms"},
        {"group": "one request/reply", "name": "CPU per call (runner process, profiled)",
         "value": cpu["profiled"] * 1e3, "unit": "ms"},
        {"group": "one request/reply", "name": "Python function calls per call (profiled)",
         "value": cpu["function calls"], "unit": "calls"},
        {"group": "one request/reply", "name": "event-loop callbacks run per call (profiled)",
         "value": cpu["loop callbacks"], "unit": "callbacks"},
    ]
    for kind in sorted(statements):
        rows.append({"group": "one request/reply", "name": f"SQLite statements per call: {kind}",
                     "value": statements[kind], "unit": "statements"})
    rows.append({"group": "one request/reply", "name": "SQLite statements per call: all",
                 "value": sum(statements.values()), "unit": "statements"})
    return rows + _loops(n) + top
