"""What every check is given and what it gives back.

A check runs in up to two phases. Phase 1 (``Check.find``, optional) names the small
frames its verdicts start from: the candidates, found by narrow aggregates. The runner
builds the phase-1 frames of every check into ONE query, collects them to the driver at
once and hands each back as a local relation (``CheckContext.candidates``). Phase 2
(``Check.compute``) builds the violations from them, joining the candidates (``CheckContext.small``) to
the events for details: a plan that holds the candidates' rows, not the lineage that
found them (which it would otherwise plan and run again in every branch that uses them).
A check with no ``find`` computes everything in ``compute``, as before; it still runs in
the runner's one phase-2 query.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import reduce

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F

VIOLATION_COLUMNS = ("run", "key", "kind", "summary", "details", "refs")
# Rows of one candidate frame collected to the driver at most; a frame with more (hostile
# or broken input: every hop lost) stays distributed, checkpointed, with the same results.
CANDIDATE_LIMIT = 10_000


@dataclass
class CheckContext:
    spark: SparkSession
    events: DataFrame  # ok events of every run: schema v1 fields plus run_dir
    policies: DataFrame  # run_dir, declared, judged
    storm_steals: int = 5
    storm_window_ms: int = 10_000
    ev_counts: dict[str, int] | None = None  # known counts per ev spare a Spark job
    declared: dict[str, str | None] | None = None  # run_dir -> declared policy, as policies holds
    # The msg.* events apart, as the reading pass leaves them: their message columns only,
    # partitioned by (run, msg); ``events`` then holds every other event. None: ``events``
    # holds them all.
    messages: DataFrame | None = None
    _shared: dict[str, DataFrame] = field(default_factory=dict)
    _found: dict[str, dict[str, DataFrame]] = field(default_factory=dict)
    _rows: dict[str, dict[str, int]] = field(default_factory=dict)

    def find(self, checks: list[Check]) -> None:
        """Phase 1 of ``checks``: every candidate frame of every check in one query, each
        limited to ``CANDIDATE_LIMIT`` + 1 rows, collected once as JSON lines and made local
        relations again with the frame's own schema."""
        parts = [(c.name, part, df) for c in checks if c.find is not None and c.name not in self._found
                 for part, df in c.find(self).items()]
        if not parts:
            return
        frames, rows = self._collect_rows([df for _, _, df in parts])
        for i, frame in enumerate(frames):
            check, part, _ = parts[i]
            self._found.setdefault(check, {})[part] = frame
            self._rows.setdefault(check, {})[part] = rows[i]

    def found_nothing(self, check: Check) -> bool:
        """Whether phase 1 found no row in any of ``check.leads`` (False when it has none)."""
        rows = self._rows.get(check.name, {})
        return bool(check.leads) and all(rows.get(part) == 0 for part in check.leads)

    def _collected(self, frames: list[DataFrame]) -> list[DataFrame]:
        return self._collect_rows(frames)[0]

    def _collect_rows(self, frames: list[DataFrame]) -> tuple[list[DataFrame], list[int]]:
        """``frames`` collected in one query, each as a local relation with its own schema (one
        of more than ``CANDIDATE_LIMIT`` rows stays distributed, checkpointed), and how many
        rows each has (up to ``CANDIDATE_LIMIT`` + 1)."""
        tagged = [
            df.limit(CANDIDATE_LIMIT + 1).select(
                F.lit(i).alias("part"), F.to_json(F.struct(*[F.col(f"`{c}`") for c in df.columns])).alias("row"))
            for i, df in enumerate(frames)
        ]
        lines: dict[int, list[str]] = {}
        for r in reduce(lambda a, b: a.unionByName(b), tagged).collect():
            lines.setdefault(r["part"], []).append(r["row"])
        from ..frames import json_frame

        kept = [df.localCheckpoint() if len(lines.get(i, [])) > CANDIDATE_LIMIT
                else json_frame(self.spark, lines.get(i, []), df.schema)
                for i, df in enumerate(frames)]
        return kept, [len(lines.get(i, [])) for i in range(len(frames))]

    def local(self, *frames: DataFrame) -> list[DataFrame]:
        """``frames``, each a few rows a check's second phase reads several times, computed
        now, in one query: each read is then of their rows, not of the lineage that found
        them (a lost hop's evidence joins it three times, and each join planned the
        message aggregates again)."""
        return self._collected(list(frames))

    def narrowed(self, df: DataFrame, few: DataFrame, column: str) -> DataFrame:
        """The rows of ``df`` whose ``column`` holds a value of ``few``'s, for a join of the two:
        a filter by the values, read on the driver, so the join reads only those rows and
        shuffles nothing else. ``few`` is a candidate frame or made of them (its rows are at
        hand); one of more than ``CANDIDATE_LIMIT`` rows leaves ``df`` whole. The join still
        decides: this only spares it the rest."""
        rows = few.select(column).limit(CANDIDATE_LIMIT + 1).collect()
        if len(rows) > CANDIDATE_LIMIT:
            return df
        values = sorted({r[0] for r in rows if r[0] is not None})
        return df.filter(F.col(column).isin(*values)) if values else df.limit(0)

    def candidates(self, check: Check) -> dict[str, DataFrame]:
        """The phase-1 frames of ``check`` (found now, alone, if the runner did not)."""
        if check.name not in self._found:
            self.find([check])
        return self._found.get(check.name, {})

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
        self._found.clear()
        self._rows.clear()

    def small(self, df: DataFrame) -> DataFrame:
        """The small side of a join (candidates, ends, rule tables): the hashed side of a
        shuffled hash join in the query's own job, at any input size. A broadcast costs a
        job of its own (adaptive execution is off; a local relation's too, in Spark 4):
        on the demo library 26 of a check run's 28 jobs were broadcasts, in chains, and
        29 of 32 at 1M synthetic events. Hashed, a check run is three jobs at any size.
        At 1M its two phases cost the JVM 74-103 s of CPU hashed and 69-100 s broadcast
        (four runs broadcast, five hashed, load 8-25): phase 2 more, shuffling the routing-table events
        where a broadcast left them in place, phase 1 less. A join that would shuffle
        every event by a key the driver knows is a lookup instead (the policy of a run
        directory)."""
        return df.hint("shuffle_hash")

    def has(self, *evs: str) -> bool:
        if self.ev_counts is not None:
            return any(self.ev_counts.get(ev, 0) for ev in evs)
        return bool(self.of(*evs).limit(1).count())

    def of(self, *evs: str) -> DataFrame:
        if self.messages is None:
            return self.events.filter(F.col("ev").isin(*evs))
        from .messages import MSG_EVENTS

        messages = [ev for ev in evs if ev in MSG_EVENTS]
        others = [ev for ev in evs if ev not in MSG_EVENTS]
        if messages and others:
            raise ValueError(f"events {evs}: message and other events are read apart")
        if messages:
            return self.messages.filter(F.col("ev").isin(*messages))
        return self.events.filter(F.col("ev").isin(*others))


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
    compute: Callable[[CheckContext], CheckOutput]  # phase 2 (or all of it)
    find: Callable[[CheckContext], dict[str, DataFrame]] | None = None  # phase 1: candidate frames
    # The events a violation can come from: a check run with none of them has nothing to
    # judge, and builds no query (a check's queries cost their planning whatever the input).
    judges: tuple[str, ...] = ()
    vacuous: str | None = None  # the note of a check run with none of them
    # The candidate frames a violation starts from: when none has a row, phase 2 is not built.
    leads: tuple[str, ...] = ()


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
