"""Running the checks over loaded traces and collecting what the report needs."""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from . import rules
from .checks import CHECKS, CheckContext
from .frames import rows_frame
from .inputs import Run
from .load import Loaded, LoadStats, load


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
    seconds: float

    @property
    def passed(self) -> bool:
        return self.count == 0


@dataclass
class Outcome:
    runs: list[Run]
    stats: LoadStats
    results: list[CheckResult]

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
) -> Outcome:
    loaded = load(spark, runs, stage_dir)
    return run_checks(
        spark, runs, loaded, names, storm_steals=storm_steals,
        storm_window_ms=storm_window_ms, max_details=max_details,
    )


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
    policies = rows_frame(
        spark,
        [(str(r.dir), r.policy, judged_policy(r.policy)) for r in runs],
        "run_dir string, declared string, judged string",
    )
    ctx = CheckContext(
        spark, loaded.events, policies, storm_steals, storm_window_ms, loaded.ev_counts
    )
    results = []
    for name in names or list(CHECKS):
        check = CHECKS[name]
        started = time.perf_counter()
        output = check.compute(ctx)
        found = output.violations.persist()
        try:
            count = found.count()
            rows = found.orderBy("key").limit(max_details).collect() if count else []
        finally:
            found.unpersist()
            for frame in output.cached:
                frame.unpersist()
        shown = [
            Violation(
                check.name, r["run"], r["key"], r["kind"], r["summary"],
                json.loads(r["details"]) if r["details"] else {},
                sorted({(x["rt"], x["seq"]) for x in r["refs"] or [] if x["rt"] is not None},
                       key=lambda t: (t[0], t[1])),
            )
            for r in rows
        ]
        scanned = sum(loaded.ev_counts.get(ev, 0) for ev in check.events)
        results.append(
            CheckResult(
                check.name, check.description, check.seeds, scanned, count, shown,
                output.notes, time.perf_counter() - started,
            )
        )
    ctx.release()
    _attach_slices(spark, loaded, results)
    return Outcome(runs, loaded.stats, results)


def _attach_slices(spark: SparkSession, loaded: Loaded, results: list[CheckResult]) -> None:
    """One join for every shown violation: the raw lines of the events it refers to."""
    shown = [v for r in results for v in r.violations]
    wanted = [(i, v.run, rt, seq) for i, v in enumerate(shown) for rt, seq in v.refs]
    if not wanted:
        return
    refs = rows_frame(spark, wanted, "vid int, run string, rt string, seq long")
    lines = (
        loaded.events.select("run", "rt", "seq", "ts", "raw")
        .join(F.broadcast(refs), ["run", "rt", "seq"])
        .select("vid", "ts", "rt", "seq", "raw")
        .collect()
    )
    by_vid: dict[int, list[tuple]] = {}
    for row in lines:
        by_vid.setdefault(row["vid"], []).append((row["ts"], row["rt"], row["seq"], row["raw"]))
    for vid, rows in by_vid.items():
        shown[vid].slice = [raw for *_, raw in sorted(rows)]
