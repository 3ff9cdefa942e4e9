"""What every check is given and what it gives back."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

VIOLATION_COLUMNS = ("run", "key", "kind", "summary", "details", "refs")


@dataclass
class CheckContext:
    spark: SparkSession
    events: DataFrame  # ok events of every run: schema v1 fields plus run_dir
    policies: DataFrame  # run_dir, declared, judged
    storm_steals: int = 5
    storm_window_ms: int = 10_000
    ev_counts: dict[str, int] | None = None  # known counts per ev spare a Spark job
    declared: dict[str, str | None] | None = None  # run_dir -> declared policy, as policies holds
    _shared: dict[str, DataFrame] = field(default_factory=dict)

    def shared(self, name: str, build: Callable[[], DataFrame]) -> DataFrame:
        """A frame several checks group the same way, built and kept once per check run
        (lazily: the first check that counts its violations fills it). A local checkpoint,
        not a cache: the plans of the checks that use it then hold a reference, not the
        frame's own plan; lost-message's optimized plan shrank from 670 KB to 92 KB of text,
        and the one query of every check no longer runs the driver out of a 1 GiB heap."""
        if name not in self._shared:
            self._shared[name] = build().localCheckpoint(eager=False)
        return self._shared[name]

    def release(self) -> None:
        """Forgets the shared frames once every check has run (their blocks go with them)."""
        for frame in self._shared.values():
            frame.unpersist()
        self._shared.clear()

    def has(self, *evs: str) -> bool:
        if self.ev_counts is not None:
            return any(self.ev_counts.get(ev, 0) for ev in evs)
        return bool(self.of(*evs).limit(1).count())

    def of(self, *evs: str) -> DataFrame:
        return self.events.filter(F.col("ev").isin(*evs))


@dataclass
class CheckOutput:
    violations: DataFrame
    notes: list[str] = field(default_factory=list)
    cached: list[DataFrame] = field(default_factory=list)  # unpersisted once counted


@dataclass(frozen=True)
class Check:
    name: str
    description: str
    seeds: str
    events: tuple[str, ...]  # the ev names it reads: its "events scanned"
    compute: Callable[[CheckContext], CheckOutput]


def ref(rt: str | Column = "rt", seq: str | Column = "seq") -> Column:
    """One event of a slice: runtime and sequence number place it within a run."""
    return F.struct(F.col(rt).alias("rt") if isinstance(rt, str) else rt.alias("rt"),
                    F.col(seq).alias("seq") if isinstance(seq, str) else seq.alias("seq"))


def violations(df: DataFrame, *, run: Column, key: Column, kind: Column, summary: Column,
               details: Column, refs: Column) -> DataFrame:
    """The common shape of a check's result."""
    return df.select(
        run.alias("run"),
        key.alias("key"),
        kind.alias("kind"),
        summary.alias("summary"),
        details.alias("details"),
        refs.alias("refs"),
    )


def key(*parts: str | Column) -> Column:
    return F.concat_ws("/", *(F.col(p) if isinstance(p, str) else p for p in parts))
