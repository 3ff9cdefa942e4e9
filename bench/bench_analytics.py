"""The Spark checker at scale and warm: every figure in one run, on ``local[2]``.

For 1M and 10M synthetic events (``--quick``: 100k and 1M), two run directories each:
- the floor: Spark's JSON reader parses every field the checks read, in the same session,
  and writes nothing (the ``noop`` sink);
- Spark's own write of the same lines as Parquet partitioned by event name, nothing else:
  the least the reading pass's stage can cost, as a ratio to the floor;
- the checker (reading pass, Parquet stage, checks, slices; no trace cache): its time, and
  the reading pass's and the checks' apart, each as a ratio to the floor; the JVM's CPU
  seconds of each beside the wall time (2 shared cores: CPU time is the steadier
  figure); events per second; Spark jobs and tasks of the check run; the load average;
- whether every planted violation is found and nothing else;
- the growth from the smaller size to the larger (10 = linear).
Then the demo library (the runs of ``scenarios/``; ``JOYNR_BENCH_DEMO_RUNS=DIR`` reuses
runs already made): ``joynr-sim check`` cold (a new JVM, no trace cache) twice, the first
one's JVM writing Spark's class archive as its process ends (the time until it has, apart),
the second committing and mapping it; and on a warm Spark Connect server (after one check
that warms it) without and with the trace cache.
Peak memory: this process, the local JVM and the Connect server's JVM.

Targets (docs/benchmarks.md): 1M at most 2x the floor, 10M at most 11x the 1M time, the demo library
under 10 s on a warm Connect server and under 30 s cold.
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from analytics.classarchive import started, writers
from analytics.inputs import find_runs
from analytics.runner import check_runs
from analytics.schema import TRACE_V1
from analytics.session import start, tune
from analytics.synthetic import CHECK_NAMES, generate
from joynr_sim.host.process.peak_memory import peak_mib

ROOT = Path(__file__).resolve().parent.parent


def _label(n: int) -> str:
    return f"{n // 1_000_000}M" if n >= 1_000_000 else f"{n // 1000}k"


def _cpu_s(pid: int | None) -> float:
    """User and system CPU seconds of a process so far, from /proc; 0 when unknown."""
    if pid is None:
        return 0.0
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _floor(spark, runs, jvm_pid: int | None) -> tuple[float, float]:
    """Wall and JVM CPU seconds of parsing every checked field with the noop sink."""
    files = [str(p) for run in runs for p in run.trace_files]
    cpu, started = _cpu_s(jvm_pid), time.perf_counter()
    spark.read.schema(TRACE_V1).json(files).write.format("noop").mode("overwrite").save()
    return time.perf_counter() - started, _cpu_s(jvm_pid) - cpu


def _stage_alone(spark, runs, path: Path, jvm_pid: int | None) -> tuple[float, float]:
    """Wall and JVM CPU seconds of Spark's own write of the same lines as Parquet
    partitioned by event name, nothing else: the least the reading pass's stage can cost."""
    files = [str(p) for run in runs for p in run.trace_files]
    cpu, started = _cpu_s(jvm_pid), time.perf_counter()
    (spark.read.schema(TRACE_V1).json(files).write.option("parquet.enable.dictionary", "false")
     .mode("overwrite").partitionBy("ev").parquet(str(path)))
    return time.perf_counter() - started, _cpu_s(jvm_pid) - cpu


def _scale(tmp: Path, sizes: tuple[int, int]) -> tuple[list[dict], float]:
    rows: list[dict] = []
    seconds: dict[int, float] = {}
    scratch = tmp / "spark"
    scratch.mkdir()
    handle = start("local[2]", work_dir=scratch)
    try:
        tune(handle.spark)
        # A first small run pays the JVM's warm-up, so the sizes below compare scaling.
        warm = tmp / "warm-up"
        generate(warm / "runs", 20_000, runs=2)
        (warm / "stage").mkdir()
        runs = find_runs([str(warm / "runs")])
        pid = handle.jvm_pid
        _floor(handle.spark, runs, pid)
        check_runs(handle.spark, runs, warm / "stage")
        for n in sizes:
            data = tmp / f"runs-{n}"
            key = generate(data, n, runs=2)
            runs = find_runs([str(data)])
            floor, floor_cpu = _floor(handle.spark, runs, pid)
            alone, alone_cpu = _stage_alone(handle.spark, runs, tmp / f"alone-{n}", pid)
            stage = tmp / f"stage-{n}"
            stage.mkdir()
            cpu, started = _cpu_s(pid), time.perf_counter()
            outcome = check_runs(handle.spark, runs, stage)
            took, took_cpu = time.perf_counter() - started, _cpu_s(pid) - cpu
            seconds[n] = took
            events, cost = outcome.stats.events, outcome.cost
            group = f"check {_label(n)} local[2]"
            load_avg = round(os.getloadavg()[0], 1)
            rows += [
                {"group": group, "name": "floor: parse the checked fields", "value": floor, "unit": "s",
                 "jvm_cpu_s": round(floor_cpu, 1), "events_per_s": round(events / floor), "load_avg": load_avg},
                {"group": group, "name": "Spark's partitioned Parquet write alone / floor",
                 "value": alone / floor, "unit": "ratio", "seconds": round(alone, 2),
                 "jvm_cpu_s": round(alone_cpu, 1)},
                {"group": group, "name": "reading pass / floor", "value": cost.read_s / floor,
                 "unit": "ratio", "seconds": round(cost.read_s, 2)},
                {"group": group, "name": "checks / floor", "value": cost.check_s / floor, "unit": "ratio",
                 "seconds": round(cost.check_s, 2), "slices_s": round(cost.slices_s, 2)},
                {"group": group, "name": "checker / floor", "value": took / floor, "unit": "ratio (target <= 2)",
                 "seconds": round(took, 2), "jvm_cpu_s": round(took_cpu, 1),
                 "cpu_ratio": round(took_cpu / floor_cpu, 2) if floor_cpu else None},
                {"group": group, "name": "checker", "value": events / took, "unit": "events/s",
                 "events": events},
                {"group": group, "name": "Spark jobs", "value": cost.jobs, "unit": "jobs"},
                {"group": group, "name": "Spark tasks", "value": cost.tasks, "unit": "tasks"},
            ]
            for r in outcome.results:
                found = sorted(v.key for v in r.violations)
                exact = found == key["planted"][r.name] and r.count == len(found)
                rows.append({"group": f"planted {_label(n)}", "name": r.name, "value": exact,
                             "unit": "found all, nothing else"})
            missing = set(CHECK_NAMES) - {r.name for r in outcome.results}
            assert not missing, missing
            # The table comes at the end; a long run's figures so far survive its interruption.
            for row in rows:
                if row["group"] == group:
                    print(json.dumps(row), flush=True)
    finally:
        jvm = peak_mib(handle.jvm_pid)
        handle.stop()
    small, large = sizes
    rows.append({"group": "scale", "name": f"time {_label(large)} / time {_label(small)}",
                 "value": seconds[large] / seconds[small],
                 "unit": f"ratio (target <= {1.1 * large / small:.0f}; {large // small} = linear)",
                 "load_avg": round(os.getloadavg()[0], 1)})
    return rows, jvm


def _joynr(env: dict, *args: str) -> tuple[int, float]:
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "joynr_sim.cli", *args], env=env, cwd=ROOT,
                          capture_output=True, text=True, timeout=1800)
    took = time.perf_counter() - started
    if done.returncode not in (0, 1):
        raise RuntimeError(f"joynr-sim {' '.join(args)} failed: {done.stderr.strip()[-500:]}")
    return done.returncode, took


def _archive_written(folder: Path, deadline_s: float = 600.0) -> float:
    """Seconds until the JVMs writing a class archive in ``folder`` have exited."""
    begun = time.perf_counter()
    for pid, since in writers(folder):
        while started(pid) == since:
            if time.perf_counter() - begun > deadline_s:
                raise RuntimeError(f"the JVM {pid} writing the class archive still runs after {deadline_s} s")
            time.sleep(0.2)
    return time.perf_counter() - begun


def _demo(tmp: Path) -> tuple[list[dict], float]:
    env = dict(os.environ, XDG_CACHE_HOME=str(tmp / "xdg"), PYTHONPATH=str(ROOT))
    demo = os.environ.get("JOYNR_BENCH_DEMO_RUNS")
    if demo:
        runs = Path(demo)
    else:
        runs = tmp / "demo"
        subprocess.run([sys.executable, "-m", "joynr_sim.cli", "run", str(ROOT / "scenarios"), "--out", str(runs)],
                       env=env, cwd=ROOT, capture_output=True, timeout=1800)
    out = ["--out", str(tmp / "demo-check"), "--quiet"]
    events = sum(1 for run in find_runs([str(runs)]) for p in run.trace_files for _ in open(p, "rb"))
    rows = []
    # The first short local check's JVM writes Spark's class archive as its process ends
    # (once per JVM and pyspark install); the next cold check commits and maps it.
    status, first = _joynr(env, "check", str(runs), "--no-cache", *out)
    rows.append({"group": "demo library", "name": "first check cold (its JVM writes the class archive)",
                 "value": first, "unit": "s", "events": events, "exit": status})
    rows.append({"group": "demo library", "name": "class archive written, after the first check ended",
                 "value": _archive_written(tmp / "xdg" / "joynr-sim" / "jvm"), "unit": "s"})
    status, cold = _joynr(env, "check", str(runs), "--no-cache", *out)
    rows.append({"group": "demo library", "name": "check cold (new JVM, no trace cache)", "value": cold,
                 "unit": "s (target < 30)", "events": events, "exit": status})
    port = "15077"
    _joynr(env, "spark", "start", "--port", port, "--master", "local[2]")
    server = None
    try:
        from analytics.server import running

        server = running(tmp / "xdg" / "joynr-sim" / "spark")
        url = f"sc://127.0.0.1:{port}"
        _joynr(env, "check", str(runs), "--connect", url, "--no-cache", *out)  # warms the server
        status, warm = _joynr(env, "check", str(runs), "--connect", url, "--no-cache", *out)
        rows.append({"group": "demo library", "name": "check on a warm Connect server, no cache", "value": warm,
                     "unit": "s (target < 10)", "exit": status})
        _joynr(env, "check", str(runs), "--connect", url, *out)  # fills the trace cache
        status, cached = _joynr(env, "check", str(runs), "--connect", url, *out)
        rows.append({"group": "demo library", "name": "check on a warm Connect server, cached traces",
                     "value": cached, "unit": "s (target < 10)", "exit": status})
    finally:
        server_mib = peak_mib(server.pid if server else None)
        _joynr(env, "spark", "stop")
    return rows, server_mib


def run(quick: bool) -> list[dict]:
    sizes = (100_000, 1_000_000) if quick else (1_000_000, 10_000_000)
    with tempfile.TemporaryDirectory(prefix="bench-analytics-") as tmp:
        rows, jvm = _scale(Path(tmp), sizes)
        demo_rows, server = _demo(Path(tmp))
    rows += demo_rows
    driver = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    rows.append({"group": "memory", "name": "peak driver RSS + local JVM RSS", "value": driver + jvm,
                 "unit": "MiB", "driver": round(driver), "jvm": round(jvm)})
    rows.append({"group": "memory", "name": "peak Connect server JVM RSS", "value": server, "unit": "MiB"})
    return rows
