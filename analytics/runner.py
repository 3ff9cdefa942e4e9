"""Running the checks over loaded traces and collecting what the report needs.

Two phases, one query each. Phase 1: the candidate frames of every check that names
some (``Check.find``) are collected to the driver together and come back as local
relations. Phase 2: every check builds its violations as a DataFrame from them; they are
unioned and collected in one query that also counts them per check. So a check run costs
the reading pass plus those two queries, not a persist, a count and a collect per check. The slices of
the violations shown are read from the referenced trace files, by runtime and sequence
number, without Spark.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from functools import reduce
from pathlib import Path

from pyspark.sql import SparkSession, Window
from pyspark.sql import functions as F

from . import rules
from .cache import TraceCache
from .checks import CHECKS, CheckContext, CheckOutput
from .checks.base import VIOLATION_COLUMNS
from .frames import rows_frame
from .inputs import Run
from .load import Loaded, LoadStats, event_lines, load
from .session import JobMeter, partition_for, tune


@dataclass
class Violation:
    check: str
    run: str
    key: str
    kind: str
    summary: str
    details: dict
    refs: list[tuple[str, int]]  # (rt, seq) within run
    slice: list[str] = field(default_factory=list)  # raw NDJSON lines, in trace order


@dataclass
class CheckResult:
    name: str
    description: str
    seeds: str
    events_scanned: int
    count: int
    violations: list[Violation]  # the first ``max_details`` by key
    notes: list[str]
    seconds: float  # building this check's query; the checks run together (Outcome.spark)

    @property
    def passed(self) -> bool:
        return self.count == 0


@dataclass
class SparkCost:
    """What one check run cost Spark: seconds per stage, and jobs and tasks where known."""

    read_s: float = 0.0  # reading the traces (or the cache) and counting
    check_s: float = 0.0  # building the checks and the one query that collects them
    slices_s: float = 0.0
    from_cache: bool = False
    jobs: int | None = None  # None on Spark Connect: its client sees no jobs
    tasks: int | None = None

    def as_dict(self) -> dict:
        return {"read_s": round(self.read_s, 3), "check_s": round(self.check_s, 3),
                "slices_s": round(self.slices_s, 3), "from_cache": self.from_cache,
                "jobs": self.jobs, "tasks": self.tasks}


@dataclass
class Outcome:
    runs: list[Run]
    stats: LoadStats
    results: list[CheckResult]
    cost: SparkCost = field(default_factory=SparkCost)

    @property
    def violations(self) -> int:
        return sum(r.count for r in self.results)


def judged_policy(declared: str | None) -> str:
    return declared if declared in rules.JUDGED else rules.DEFAULT


def check_runs(
    spark: SparkSession,
    runs: list[Run],
    stage_dir: Path,
    names: list[str] | None = None,
    *,
    storm_steals: int = 5,
    storm_window_ms: int = 10_000,
    max_details: int = 1000,
    cache: TraceCache | None = None,
) -> Outcome:
    tune(spark)
    meter = JobMeter(spark)
    with meter:
        started = time.perf_counter()
        loaded = load(spark, runs, cache)
        read_s = time.perf_counter() - started
        outcome = run_checks(
            spark, runs, loaded, names, storm_steals=storm_steals,
            storm_window_ms=storm_window_ms, max_details=max_details,
        )
    outcome.cost.read_s = read_s
    outcome.cost.jobs, outcome.cost.tasks = meter.jobs, meter.tasks
    return outcome


def run_checks(
    spark: SparkSession,
    runs: list[Run],
    loaded: Loaded,
    names: list[str] | None = None,
    *,
    storm_steals: int = 5,
    storm_window_ms: int = 10_000,
    max_details: int = 1000,
) -> Outcome:
    partition_for(spark, loaded.stats.events)
    policies = rows_frame(
        spark,
        [(str(r.dir), r.policy, judged_policy(r.policy)) for r in runs],
        "run_dir string, declared string, judged string",
    )
    ctx = CheckContext(
        spark, loaded.events, policies, storm_steals, storm_window_ms, loaded.ev_counts,
        {str(r.dir): r.policy for r in runs}, messages=loaded.messages,
    )
    started = time.perf_counter()
    checks = [CHECKS[name] for name in names or list(CHECKS)]
    # Nothing to judge, nothing to build: a check's queries cost their planning on any input.
    idle = {c.name for c in checks if c.judges and not ctx.has(*c.judges)}
    ctx.find([c for c in checks if c.name not in idle])  # phase 1: the candidates of every check, one query
    idle |= {c.name for c in checks if ctx.found_nothing(c)}
    built = []
    for check in checks:
        name = check.name
        t = time.perf_counter()
        if name in idle:
            notes = [check.vacuous] if check.vacuous and not ctx.has(*check.judges) else []
            built.append((check, CheckOutput(None, notes), None, 0.0))
            continue
        output = check.compute(ctx)
        found = output.violations.select(F.lit(name).alias("check"), *VIOLATION_COLUMNS)
        built.append((check, output, found, time.perf_counter() - t))
    try:
        queries = [b[2] for b in built if b[2] is not None]
        rows = _collect(reduce(lambda a, b: a.unionByName(b), queries), max_details) if queries else []
    finally:
        for _, output, _, _ in built:
            for frame in output.cached:
                frame.unpersist()
        ctx.release()  # the message frames the checks share were cached for this run of them only
        loaded.release()
    by_check: dict[str, list] = {}
    for r in rows:
        by_check.setdefault(r["check"], []).append(r)
    results = []
    for check, output, _, seconds in built:
        mine = sorted(by_check.get(check.name, []), key=lambda r: r["rank"])
        count = mine[0]["total"] if mine else 0
        shown = [
            Violation(
                check.name, r["run"], r["key"], r["kind"], r["summary"],
                json.loads(r["details"]) if r["details"] else {},
                sorted({(x["rt"], x["seq"]) for x in r["refs"] or [] if x["rt"] is not None
                        and x["seq"] is not None}),
            )
            for r in mine if r["rank"] <= max_details
        ]
        scanned = sum(loaded.ev_counts.get(ev, 0) for ev in check.events)
        results.append(CheckResult(check.name, check.description, check.seeds, scanned, count, shown,
                                   output.notes, seconds))
    cost = SparkCost(from_cache=loaded.from_cache, check_s=time.perf_counter() - started)
    started = time.perf_counter()
    _attach_slices(runs, loaded, results)
    cost.slices_s = time.perf_counter() - started
    return Outcome(runs, loaded.stats, results, cost)


def _collect(found, max_details: int) -> list:
    """One query: every check's count, and its first ``max_details`` violations by key.

    The first row of a check is kept even when no details are asked for: it carries the count.
    """
    by_check = Window.partitionBy("check")
    ranked = (
        found.withColumn("total", F.count(F.lit(1)).over(by_check))
        .withColumn("rank", F.row_number().over(by_check.orderBy("key", "run", "kind")))
    )
    return ranked.filter((F.col("rank") <= max_details) | (F.col("rank") == 1)).collect()


def _attach_slices(runs: list[Run], loaded: Loaded, results: list[CheckResult]) -> None:
    """The raw lines of the events each shown violation refers to, from the trace files.

    A run id leads to the directories whose files name it first (every directory when
    none does); a runtime to its file there by name, among the files found, never to a
    path built from the trace's own text.
    """
    files = {str(run.dir): {p.name: p for p in run.trace_files} for run in runs}
    shown = [v for r in results for v in r.violations]
    wanted: dict[tuple[str, str], set[int]] = {}
    for v in shown:
        for rt, seq in v.refs:
            wanted.setdefault((v.run, rt), set()).add(seq)
    lines: dict[tuple[str, str, int], str] = {}
    for (run, rt), seqs in wanted.items():
        for run_dir in loaded.run_dirs.get(run, list(files)):
            path = files.get(run_dir, {}).get(f"{rt}.ndjson")
            if path is None:
                continue
            for seq, line in event_lines(path, run, rt, seqs).items():
                lines.setdefault((run, rt, seq), line)
    for v in shown:
        found = [(rt, seq, lines[(v.run, rt, seq)]) for rt, seq in v.refs if (v.run, rt, seq) in lines]
        v.slice = [line for *_, line in sorted(found, key=lambda f: (_ts(f[2]), f[0], f[1]))]


def _ts(line: str) -> int:
    ts = json.loads(line).get("ts")
    return ts if isinstance(ts, int) else 0
