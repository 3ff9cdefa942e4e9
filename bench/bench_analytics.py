"""The Spark checker at scale, warm and cold, on ``local[2]``: every figure in one run.

For 100k, 1M and 10M synthetic events (``--quick``: 100k and 1M), two run directories each,
in one Spark session warmed up by a small check first:
- the floor: Spark's JSON reader parses every field the checks read, in the same session,
  and writes nothing (the ``noop`` sink); every ratio below is to the floor of the same size;
- the bounds: a scan that keeps the message events partitioned by message, one that keeps
  the other events, and a scan that hash-aggregates per message (``_bounds``), each / floor;
- the checker (``check_runs``, no trace cache): its wall time, and apart the reading pass
  (the stage-free pass: parse and keep the events in Spark's memory, nothing written) and
  the checks; the JVM's CPU seconds beside the wall time (2 shared cores: CPU time is the
  steadier figure); events per second; Spark jobs and tasks; the load average;
- the whole command, ``joynr-sim check DIR --no-cache --quiet --master local[2]``: a new
  process and JVM (after one warm-up command and its class archive), its wall time;
- whether every planted violation is found and nothing else;
- the local JVM's peak resident memory so far, and the growth of the checker's time from
  each size to the next (10 = linear).
The fixed cost: in the same warm session, the checker on a run whose trace is one empty
file and on one of 10 events (each checked twice, the second timed).
A real input: the fleet restart wave (``scenarios/fleet/restart-wave-1000x10000.yaml``;
``--quick``: ``restart-wave-100x1000.yaml``) run by ``joynr-sim run`` in a new process, then
its run directory checked in the warm session and by the whole command; the check's time
as a ratio to the run's. A run that fails is reported with its exit status and goes on.
Then the demo library (the runs of ``scenarios/``; ``JOYNR_BENCH_DEMO_RUNS=DIR`` reuses
runs already made): ``joynr-sim check`` cold (a new JVM, no trace cache) twice, the first
one's JVM writing Spark's class archive as its process ends (the time until it has, apart),
the second committing and mapping it; and on a warm Spark Connect server (after one check
that warms it) without and with the trace cache.
Peak memory: this process, the local JVM and the Connect server's JVM.

Targets (docs/benchmarks.md): the checker at most 3x the floor at 10M and 6x at 1M, every
planted violation found and nothing else; the demo library under 30 s cold and at most 5 s
on a warm Connect server; the 1,000 x 10,000 restart wave's trace checked in less time than
its run took; the local JVM's peak at 1M events not above 1.7 GiB.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pyspark.sql import functions as F

from analytics.checks.messages import MESSAGE_COLUMNS, MSG_EVENTS
from analytics.classarchive import started, writers
from analytics.inputs import InputError, find_runs
from analytics.load import release
from analytics.runner import check_runs
from analytics.schema import TRACE_V1
from analytics.session import start, tune
from analytics.synthetic import CHECK_NAMES, generate
from joynr_sim.host.process.peak_memory import peak_mib

ROOT = Path(__file__).resolve().parent.parent
FLEET = ROOT / "scenarios" / "fleet"
TARGET = {1_000_000: "ratio (target <= 6)", 10_000_000: "ratio (target <= 3)"}
MEMORY_TARGET = "MiB (target <= 1,740 at 1M)"
WAVE = {True: "restart-wave-100x1000.yaml", False: "restart-wave-1000x10000.yaml"}  # by --quick


def _label(n: int) -> str:
    return f"{n // 1_000_000}M" if n >= 1_000_000 else f"{n // 1000}k"


def _emit(rows: list[dict], *new: dict) -> None:
    """Keeps the rows and prints them at once: a long run's figures survive its interruption."""
    for row in new:
        rows.append(row)
        print(json.dumps(row), flush=True)


def _load() -> float:
    return round(os.getloadavg()[0], 1)


def _cpu_s(pid: int | None) -> float:
    """User and system CPU seconds of a process so far, from /proc; 0 when unknown."""
    if pid is None:
        return 0.0
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _floor(spark, runs, pid: int | None) -> tuple[float, float]:
    """Wall and JVM CPU seconds of parsing every checked field with the noop sink."""
    files = [str(p) for run in runs for p in run.trace_files]
    cpu, begun = _cpu_s(pid), time.perf_counter()
    spark.read.schema(TRACE_V1).json(files).write.format("noop").mode("overwrite").save()
    return time.perf_counter() - begun, _cpu_s(pid) - cpu


def _bounds(spark, runs, floor: float, group: str) -> list[dict]:
    """What no check run can go below, each as a ratio to the floor: a scan that keeps the
    message events partitioned by message (the reading pass's shuffle, without its sort), a
    scan that keeps the other events, and the cheapest per-message pass there is (a scan
    hash-aggregating numeric columns by message, nothing kept). The first two are the reading
    pass's parts; a check run that keeps no events must scan again for its details instead."""
    files = [str(p) for run in runs for p in run.trace_files]
    is_message = F.col("ev").isin(*MSG_EVENTS)

    def parsed():
        return spark.read.schema(TRACE_V1).json(files)

    def kept(df) -> None:
        release(df.localCheckpoint(eager=True))

    def aggregated() -> None:
        (parsed().filter(is_message).groupBy("run", "msg")
         .agg(F.count(F.lit(1)), F.max("hops"), F.max("ts"), F.min("seq"), F.max(F.xxhash64("corr")))
         .write.format("noop").mode("overwrite").save())

    parts = (
        ("bound: scan, keep the message events by message", lambda: kept(
            parsed().filter(is_message).select(*MESSAGE_COLUMNS).repartition("run", "msg"))),
        ("bound: scan, keep the other events", lambda: kept(parsed().filter(~is_message))),
        ("bound: scan, hash-aggregate per message, keep nothing", aggregated),
    )
    rows = []
    for name, measure in parts:
        begun = time.perf_counter()
        measure()
        took = time.perf_counter() - begun
        rows.append({"group": group, "name": f"{name} / floor", "value": took / floor, "unit": "ratio",
                     "seconds": round(took, 2)})
    return rows


def _check(spark, runs, stage: Path, pid: int | None):
    """The checker's outcome, wall seconds and JVM CPU seconds."""
    stage.mkdir(parents=True, exist_ok=True)
    cpu, begun = _cpu_s(pid), time.perf_counter()
    outcome = check_runs(spark, runs, stage)
    return outcome, time.perf_counter() - begun, _cpu_s(pid) - cpu


def _joynr(env: dict, *args: str, timeout: float = 3600) -> dict:
    """``joynr-sim ARGS`` in a new process: exit status, wall seconds, and the tail of its
    stderr when it failed (its JVM and hosts are not its children: their CPU is not counted)."""
    begun = time.perf_counter()
    try:
        done = subprocess.run([sys.executable, "-m", "joynr_sim.cli", *args], env=env, cwd=ROOT,
                              capture_output=True, text=True, timeout=timeout)
        status, err = done.returncode, done.stderr
    except subprocess.TimeoutExpired as exc:
        status, err = f"timeout after {timeout:.0f} s", (exc.stderr or b"").decode(errors="replace")
    out = {"seconds": time.perf_counter() - begun, "exit": status}
    if status not in (0, 1):
        out["stderr"] = err.strip()[-500:]
    return out


def _whole(env: dict, data: Path, out: Path) -> dict:
    return _joynr(env, "check", str(data), "--no-cache", "--quiet", "--master", "local[2]", "--out", str(out))


def _archive_written(folder: Path, deadline_s: float = 600.0) -> float:
    """Seconds until the JVMs writing a class archive in ``folder`` have exited."""
    begun = time.perf_counter()
    for pid, since in writers(folder):
        while started(pid) == since:
            if time.perf_counter() - begun > deadline_s:
                raise RuntimeError(f"the JVM {pid} writing the class archive still runs after {deadline_s} s")
            time.sleep(0.2)
    return time.perf_counter() - begun


def _size(rows, spark, pid, env, tmp: Path, n: int) -> float:
    """The rows of one size; returns the checker's wall seconds."""
    data = tmp / f"runs-{n}"
    key = generate(data, n, runs=2)
    runs = find_runs([str(data)])
    group, load_avg = f"check {_label(n)} local[2]", _load()
    floor, floor_cpu = _floor(spark, runs, pid)
    outcome, took, took_cpu = _check(spark, runs, tmp / f"stage-{n}", pid)
    events, cost = outcome.stats.events, outcome.cost
    whole = _whole(env, data, tmp / f"out-{n}")
    _emit(rows,
          {"group": group, "name": "floor: parse the checked fields", "value": floor, "unit": "s",
           "jvm_cpu_s": round(floor_cpu, 1), "events_per_s": round(events / floor), "load_avg": load_avg},
          {"group": group, "name": "reading pass (stage-free) / floor", "value": cost.read_s / floor,
           "unit": "ratio", "seconds": round(cost.read_s, 2)},
          {"group": group, "name": "checks / floor", "value": cost.check_s / floor, "unit": "ratio",
           "seconds": round(cost.check_s, 2), "slices_s": round(cost.slices_s, 2)},
          {"group": group, "name": "checker / floor", "value": took / floor, "unit": TARGET.get(n, "ratio"),
           "seconds": round(took, 2), "jvm_cpu_s": round(took_cpu, 1),
           "cpu_ratio": round(took_cpu / floor_cpu, 2) if floor_cpu else None, "load_avg": _load()},
          {"group": group, "name": "whole command (new process and JVM) / floor",
           "value": whole["seconds"] / floor, "unit": "ratio",
           **{k: round(v, 2) if isinstance(v, float) else v for k, v in whole.items()}, "load_avg": _load()},
          {"group": group, "name": "checker", "value": events / took, "unit": "events/s", "events": events},
          {"group": group, "name": "Spark jobs", "value": cost.jobs, "unit": "jobs"},
          {"group": group, "name": "Spark tasks", "value": cost.tasks, "unit": "tasks"},
          *_bounds(spark, runs, floor, group))
    for r in outcome.results:
        found = sorted(v.key for v in r.violations)
        exact = found == key["planted"][r.name] and r.count == len(found)
        row = {"group": f"planted {_label(n)}", "name": r.name, "value": exact, "unit": "found all, nothing else"}
        if not exact:
            row.update(found=r.count, planted=len(key["planted"][r.name]))
        _emit(rows, row)
    missing = set(CHECK_NAMES) - {r.name for r in outcome.results}
    if missing:
        _emit(rows, {"group": f"planted {_label(n)}", "name": "checks not run", "value": sorted(missing),
                     "unit": "check names"})
    _emit(rows, {"group": "memory", "name": f"peak local JVM RSS after {_label(n)}", "value": peak_mib(pid),
                 "unit": MEMORY_TARGET if n == 1_000_000 else "MiB"})
    shutil.rmtree(data)  # the bench's own copy; 10M events take gigabytes
    return took


def _tiny_run(folder: Path, lines: list[str]) -> Path:
    """A run directory whose trace is one file of these lines, with its manifest."""
    (folder / "trace").mkdir(parents=True)
    (folder / "trace" / "cc-0.ndjson").write_text("".join(lines))
    run_id = json.loads(lines[0])["run"] if lines else folder.name
    (folder / "run.json").write_text(json.dumps({"run": run_id, "policy": "precedence", "synthetic": True}))
    return folder


def _fixed(rows, spark, pid, tmp: Path, source: Path) -> None:
    """The checker on an empty trace and on 10 events, in the warm session: the cost of a check
    before it has anything to read."""
    with open(source, encoding="utf-8") as f:
        ten = [next(f) for _ in range(10)]
    for name, lines in (("empty trace", []), ("10 events", ten)):
        run_dir = _tiny_run(tmp / "fixed" / name.replace(" ", "-"), lines)
        runs = find_runs([str(run_dir)])
        try:
            for _ in range(2):  # the second is timed: the first compiles what the size needs
                outcome, took, took_cpu = _check(spark, runs, tmp / "fixed" / "stage", pid)
            _emit(rows, {"group": "fixed cost (warm session)", "name": f"checker on {name}", "value": took,
                         "unit": "s (fixed cost)", "jvm_cpu_s": round(took_cpu, 2), "events": outcome.stats.events,
                         "load_avg": _load()})
        except Exception as exc:  # noqa: BLE001 - a refusal is a figure of this row too
            _emit(rows, {"group": "fixed cost (warm session)", "name": f"checker on {name}", "value": None,
                         "unit": "s (fixed cost)", "error": f"{type(exc).__name__}: {str(exc)[-300:]}"})


def _fleet(rows, spark, pid, env, tmp: Path, quick: bool) -> None:
    """The restart wave run by ``joynr-sim run``, then its trace checked."""
    scenario = FLEET / WAVE[quick]
    group, out = f"fleet {scenario.stem}", tmp / "fleet"
    ran = _joynr(env, "run", str(scenario), "--out", str(out), timeout=7200)
    _emit(rows, {"group": group, "name": "joynr-sim run", "value": ran["seconds"], "unit": "s",
                 **{k: v for k, v in ran.items() if k != "seconds"}, "load_avg": _load()})
    try:
        runs = find_runs([str(out)])
    except InputError as exc:
        _emit(rows, {"group": group, "name": "run directory", "value": None, "unit": "", "error": str(exc)})
        return
    try:
        outcome, took, took_cpu = _check(spark, runs, tmp / "fleet-stage", pid)
    except Exception as exc:  # noqa: BLE001 - the command below still runs and is reported
        outcome, took, took_cpu = None, None, 0.0
        _emit(rows, {"group": group, "name": "checker (warm session)", "value": None, "unit": "s",
                     "error": f"{type(exc).__name__}: {str(exc)[-300:]}"})
    whole = _whole(env, out, tmp / "fleet-check")
    if outcome is not None:
        _emit(rows,
              {"group": group, "name": "events", "value": outcome.stats.events, "unit": "events"},
              {"group": group, "name": "checker (warm session)", "value": took, "unit": "s",
               "jvm_cpu_s": round(took_cpu, 1), "violations": outcome.violations,
               "read_s": round(outcome.cost.read_s, 2), "check_s": round(outcome.cost.check_s, 2)})
    _emit(rows,
          {"group": group, "name": "whole check command", "value": whole["seconds"], "unit": "s",
           **{k: v for k, v in whole.items() if k != "seconds"}, "load_avg": _load()},
          {"group": group, "name": "check / run (whole command)", "value": whole["seconds"] / ran["seconds"],
           "unit": "ratio (target < 1)",
           "warm_session_ratio": round(took / ran["seconds"], 3) if took is not None else None})


def _scale(rows: list[dict], tmp: Path, sizes: tuple[int, ...], quick: bool) -> None:
    scratch = tmp / "spark"
    scratch.mkdir()
    # Whole commands use a class archive of their own, written by a warm-up command below.
    env = dict(os.environ, XDG_CACHE_HOME=str(tmp / "xdg-command"), PYTHONPATH=str(ROOT))
    handle = start("local[2]", work_dir=scratch)
    pid, seconds = handle.jvm_pid, {}
    try:
        tune(handle.spark)
        # A first small run pays the JVM's warm-up, so the sizes below compare scaling.
        warm = tmp / "warm-up"
        generate(warm / "runs", 20_000, runs=2)
        runs = find_runs([str(warm / "runs")])
        _floor(handle.spark, runs, pid)
        _check(handle.spark, runs, warm / "stage", pid)
        _whole(env, warm / "runs", warm / "out")
        _archive_written(tmp / "xdg-command" / "joynr-sim" / "jvm")
        for n in sizes:
            seconds[n] = _size(rows, handle.spark, pid, env, tmp, n)
        for small, large in zip(sizes, sizes[1:], strict=False):
            _emit(rows, {"group": "scale", "name": f"checker time {_label(large)} / time {_label(small)}",
                         "value": seconds[large] / seconds[small], "unit": f"ratio ({large // small} = linear)",
                         "load_avg": _load()})
        _fixed(rows, handle.spark, pid, tmp, runs[0].trace_files[0])
        _fleet(rows, handle.spark, pid, env, tmp, quick)
    finally:
        jvm = peak_mib(pid)
        handle.stop()
    _emit(rows, {"group": "memory", "name": f"peak local JVM RSS (whole session, up to {_label(sizes[-1])})",
                 "value": jvm, "unit": "MiB"})


def _demo(rows: list[dict], tmp: Path) -> float:
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
    group = "demo library"

    def row(name: str, done: dict, unit: str, **extra) -> dict:
        return {"group": group, "name": name, "value": done["seconds"], "unit": unit,
                **{k: v for k, v in done.items() if k != "seconds"}, **extra}

    # The first short local check's JVM writes Spark's class archive as its process ends
    # (once per JVM and pyspark install); the next cold check commits and maps it.
    first = _joynr(env, "check", str(runs), "--no-cache", *out)
    _emit(rows, row("first check cold (its JVM writes the class archive)", first, "s", events=events))
    _emit(rows, {"group": group, "name": "class archive written, after the first check ended",
                 "value": _archive_written(tmp / "xdg" / "joynr-sim" / "jvm"), "unit": "s"})
    cold = _joynr(env, "check", str(runs), "--no-cache", *out)
    _emit(rows, row("check cold (new JVM, no trace cache)", cold, "s (target < 30)", events=events))
    port = "15077"
    _joynr(env, "spark", "start", "--port", port, "--master", "local[2]")
    server = None
    try:
        from analytics.server import running

        server = running(tmp / "xdg" / "joynr-sim" / "spark")
        url = f"sc://127.0.0.1:{port}"
        _joynr(env, "check", str(runs), "--connect", url, "--no-cache", *out)  # warms the server
        warm = _joynr(env, "check", str(runs), "--connect", url, "--no-cache", *out)
        _emit(rows, row("check on a warm Connect server, no cache", warm, "s (target <= 5)"))
        _joynr(env, "check", str(runs), "--connect", url, *out)  # fills the trace cache
        cached = _joynr(env, "check", str(runs), "--connect", url, *out)
        _emit(rows, row("check on a warm Connect server, cached traces", cached, "s (target <= 5)"))
    finally:
        server_mib = peak_mib(server.pid if server else None)
        _joynr(env, "spark", "stop")
    return server_mib


def run(quick: bool) -> list[dict]:
    sizes = (100_000, 1_000_000) if quick else (100_000, 1_000_000, 10_000_000)
    rows: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="bench-analytics-") as tmp:
        _scale(rows, Path(tmp), sizes, quick)
        server = _demo(rows, Path(tmp))
    driver = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    _emit(rows,
          {"group": "memory", "name": "peak driver RSS (this process)", "value": driver, "unit": "MiB"},
          {"group": "memory", "name": "peak Connect server JVM RSS", "value": server, "unit": "MiB"})
    return rows
