"""Reading traces once: Spark's JSON reader with the v1 schema, staged as Parquet by event.

Every non-blank line is classified: ``ok``, ``corrupt`` (not a JSON object, or missing one
of the fields that place an event: v, ts, seq, run, rt, ev), ``version`` (``v`` other than
1), ``unknown`` (an ``ev`` the schema does not name). Only ``ok`` events are checked; the
others are counted. A ``version`` line makes the whole input unusable: its meaning is
unknown to this checker, so judging it would be guessing.

One Spark job reads the JSON and writes the Parquet stage, one folder per event name (a
check reads only the events it names; skipped lines go to one folder of their own, without
their text). The same job counts the skipped lines and finds the last timestamp of every
run, as metrics observed while writing; the events per name are the row counts Parquet
wrote into the footers of each event's files. A run's directory comes from
the ``run`` of its files' first lines (one map lookup per event), or from the file's path
where two directories hold the same run id. A stage lives in the trace cache when there
is one, so checking the same traces again reads Parquet columns, not JSON.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow.parquet as pq
from pyspark.sql import Column, DataFrame, Observation, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from .cache import TraceCache, input_key
from .inputs import InputError, Run, first_run_ids, torn_last_lines, trace_bytes
from .schema import EVENTS, REQUIRED, SCHEMA_VERSION, TRACE_V1
from .session import SMALL_TRACE_BYTES

SKIPPED = "~skipped"  # the stage folder of lines that are not ok events
_MAX_UNKNOWN_NAMES = 1000  # hostile input may name millions of events: list the most frequent
_MAX_OBSERVED_RUNS = 256  # beyond this, run ends come from a second, narrow job

STAGE_SCHEMA = T.StructType(
    [f for f in TRACE_V1.fields if f.name != "ev"]
    + [T.StructField(name, T.StringType()) for name in ("run_dir", "status", "bad_ev", "file")]
    + [T.StructField("ev", T.StringType())]
)


@dataclass
class LoadStats:
    files: int = 0
    lines: int = 0  # non-blank lines read
    events: int = 0  # lines checked
    torn: int = 0
    corrupt: int = 0
    unknown_events: dict[str, int] = field(default_factory=dict)
    torn_files: list[str] = field(default_factory=list)

    def as_dict(self) -> dict:
        return {
            "files": self.files,
            "lines": self.lines,
            "events": self.events,
            "skipped": {
                "torn_last_line": self.torn,
                "corrupt": self.corrupt,
                "unknown_event": dict(sorted(self.unknown_events.items())),
            },
            "torn_files": self.torn_files,
        }


@dataclass
class Loaded:
    events: DataFrame  # ok events: the schema's fields plus run_dir
    stats: LoadStats
    ev_counts: dict[str, int]  # ok events per ev name
    run_ends: dict[str, int]  # run id -> timestamp of its last ok event
    run_dirs: dict[str, list[str]]  # run id -> the directories whose files name it first
    from_cache: bool = False


def _path_column() -> Column:
    """The trace file as a plain absolute path (Spark reports a URI).

    ``input_file_name()``, not ``_metadata.file_path``: it reads the file of the task's
    current split and is evaluated only where asked (a skipped line, a run without one
    directory), while the metadata column makes the scan append a struct to every row, one
    more copy of all 60 columns. Reading pass, 1M synthetic events, back to back after a
    warm-up: JVM CPU 26.2 -> 22.8 s (load 11).
    """
    uri = F.regexp_replace(F.input_file_name(), r"\+", "%2B")  # url_decode reads + as space
    return F.url_decode(F.regexp_replace(uri, r"^file:/*", "/"))


def _run_dir_column(run_dirs: dict[str, list[str]]) -> Column:
    """The run directory of an event: by its run id where one directory names it, else by path."""
    from_path = F.regexp_extract(_path_column(), r"^(.*)/trace/[^/]*$", 1)
    unique = sorted((run, dirs[0]) for run, dirs in run_dirs.items() if len(dirs) == 1)
    if not unique:
        return from_path
    lookup = F.create_map(*(F.lit(x) for pair in unique for x in pair))
    return F.coalesce(F.element_at(lookup, F.col("run")), from_path)


def _metrics(runs_seen: list[str]) -> list[Column]:
    """What the writing pass counts as it goes: lines by status and the last timestamp of
    every run. Not the events per name: 45 string comparisons and counters per line cost
    the pass more than the rest of these (1M synthetic events, warm: JVM CPU 23.6 -> 19.2 s
    without them); the Parquet footers of each event folder hold those counts
    (``_ev_counts``)."""
    status = F.col("status")
    metrics = [
        F.count(F.lit(1)).alias("lines"),
        F.count_if(status == "corrupt").alias("corrupt"),
        F.count_if(status == "version").alias("version"),
        F.count_if(status == "unknown").alias("unknown"),
    ]
    if len(runs_seen) <= _MAX_OBSERVED_RUNS:
        ok = status.isNull()
        metrics += [F.max(F.when(ok & (F.col("run") == run), F.col("ts"))).alias(f"end:{i}")
                    for i, run in enumerate(runs_seen)]
    return metrics


def _ev_counts(path: Path) -> dict[str, int]:
    """Ok events per name, from the row counts in the footers of the stage's Parquet files
    (one folder per event name; the skipped lines' folder is not an event's)."""
    counts: dict[str, int] = {}
    for name in sorted(EVENTS):
        folder = path / f"ev={name}"
        rows = sum(pq.read_metadata(f).num_rows for f in sorted(folder.glob("*.parquet")))
        if rows:
            counts[name] = rows
    return counts


def _stage(spark: SparkSession, files: list[Path], run_dirs: dict[str, list[str]], path: Path) -> dict:
    """Parses ``files`` into the Parquet stage at ``path``; returns what the pass counted."""
    with _splits_by_bytes(spark, trace_bytes(files)):
        return _stage_all(spark, [str(p) for p in files], run_dirs, path)


def _stage_all(spark: SparkSession, files: list[str], run_dirs: dict[str, list[str]], path: Path) -> dict:
    e = spark.read.schema(TRACE_V1).option("mode", "PERMISSIVE").json(files)
    placed = F.lit(True)
    for name in REQUIRED:
        placed = placed & F.col(name).isNotNull()
    status = (
        F.when(~placed, "corrupt")
        .when(F.col("v") != SCHEMA_VERSION, "version")
        .when(~F.col("ev").isin(*sorted(EVENTS)), "unknown")
    )
    skipped = F.col("status").isNotNull()
    runs_seen = sorted(run_dirs)
    observation = Observation("load")
    # One projection of every line, observed as it is written: with the metrics between two
    # projections, each line was copied into a row of 64 columns twice (JVM CPU 26.3 ->
    # 23.6 s for 1M synthetic events, warm).
    (
        e.withColumn("status", status)
        .select(
            *(F.col(f.name) for f in STAGE_SCHEMA.fields
              if f.name not in ("run_dir", "status", "bad_ev", "file", "ev")),
            _run_dir_column(run_dirs).alias("run_dir"),
            "status",
            F.when(skipped, F.col("ev")).alias("bad_ev"),
            F.when(skipped, _path_column()).alias("file"),
            F.when(skipped, F.lit(SKIPPED)).otherwise(F.col("ev")).alias("ev"),
        )
        .observe(observation, *_metrics(runs_seen))
        # Plain encoding: building a dictionary per column chunk cost more than it saved.
        # 1M synthetic events, two warm rounds alternating in one JVM (load 2.4-4): the pass's
        # JVM CPU 17.7-18.6 s with dictionaries, 14.2-16.4 s without; the checks no slower;
        # the stage 18.6 -> 26.8 MB.
        .write.option("parquet.enable.dictionary", "false")
        .mode("overwrite").partitionBy("ev").parquet(str(path))
    )
    m = observation.get
    counts = {
        "lines": m["lines"], "corrupt": m["corrupt"],
        "ev_counts": _ev_counts(path),
        "unknown_events": {}, "version": None,
    }
    table = _read_stage(spark, path)
    if len(runs_seen) <= _MAX_OBSERVED_RUNS:
        ends = {run: m[f"end:{i}"] for i, run in enumerate(runs_seen)}
    else:
        rows = (table.filter(F.col("ev") != SKIPPED).groupBy("run").agg(F.max("ts").alias("end"))
                .collect())
        ends = {r["run"]: r["end"] for r in rows}
    counts["run_ends"] = {run: end for run, end in sorted(ends.items()) if end is not None}
    bad = table.filter(F.col("ev") == SKIPPED)
    if m["version"]:
        rows = bad.filter(F.col("status") == "version").groupBy("v").agg(
            F.count(F.lit(1)).alias("n"), F.min("file").alias("file")).orderBy("v").collect()
        counts["version"] = {"file": rows[-1]["file"], "v": rows[-1]["v"],
                             "found": [[r["v"], r["n"]] for r in rows]}
    if m["unknown"]:
        rows = (bad.filter(F.col("status") == "unknown").groupBy("bad_ev").count()
                .orderBy(F.desc("count"), "bad_ev").limit(_MAX_UNKNOWN_NAMES).collect())
        names = {r["bad_ev"]: r["count"] for r in rows}
        rest = m["unknown"] - sum(names.values())
        if rest:
            names["(other names)"] = rest
        counts["unknown_events"] = names
    return counts


_OPEN_COST = "spark.sql.files.openCostInBytes"
_SMALL_OPEN_COST = 8192


@contextmanager
def _splits_by_bytes(spark: SparkSession, trace_bytes: int) -> Iterator[None]:
    """A small input's files packed into splits by their bytes, one split per core.

    Spark charges every file a nominal 4 MB to open when it packs files into splits, so
    the demo library's 292 files of 15 KB on average (4.5 MB) counted as 1.2 GB: ten
    tasks, each writing its own Parquet file for every event name it met (some 300). A
    small input (under ``SMALL_TRACE_BYTES``) is charged 8 KB a file: two tasks on two
    cores. Demo library, cold, load 3.5-5 (measured with Spark's classes archived, see
    ``analytics.classarchive``): the reading pass 13.7 s (twice) -> 10.9 and 8.6 s. A larger
    input keeps the setting it had.
    """
    if trace_bytes >= SMALL_TRACE_BYTES:
        yield
        return
    before = spark.conf.get(_OPEN_COST, None)
    spark.conf.set(_OPEN_COST, str(_SMALL_OPEN_COST))
    try:
        yield
    finally:
        if before is None:
            spark.conf.unset(_OPEN_COST)
        else:
            spark.conf.set(_OPEN_COST, before)


def _read_stage(spark: SparkSession, path: Path) -> DataFrame:
    # An explicit schema: Spark infers none, which would cost a job per read.
    return spark.read.schema(STAGE_SCHEMA).parquet(str(path))


def load(spark: SparkSession, runs: list[Run], stage_dir: Path, cache: TraceCache | None = None) -> Loaded:
    files = [p for run in runs for p in run.trace_files]
    run_dirs = first_run_ids(runs)
    torn = torn_last_lines(runs)
    key = input_key(files, STAGE_SCHEMA.json())
    counts = cache.lookup(key) if cache is not None else None
    from_cache = counts is not None
    if counts is not None:
        path = cache.events_path(key)
    elif cache is not None:
        with cache.writing(key) as entry:
            counts = _stage(spark, files, run_dirs, entry.events)
            entry.meta = counts
        # Lost a race to another check of the same traces: its entry is as good as ours.
        path = cache.events_path(key) if cache.lookup(key) is not None else entry.events
    else:
        path = stage_dir / "events.parquet"
        counts = _stage(spark, files, run_dirs, path)

    if counts["version"]:
        version = counts["version"]
        found = ", ".join(f"v={v} ({n} events)" for v, n in version["found"])
        raise InputError(
            f"{version['file']}: trace schema version {version['v']} is not supported "
            f"(this checker reads v{SCHEMA_VERSION}; found {found})"
        )
    stats = LoadStats(files=len(files), lines=counts["lines"])
    stats.torn = min(torn.count, counts["corrupt"])
    stats.corrupt = counts["corrupt"] - stats.torn
    stats.torn_files = torn.files
    stats.unknown_events = dict(counts["unknown_events"])
    ev_counts = dict(counts["ev_counts"])
    stats.events = sum(ev_counts.values())
    events = (_read_stage(spark, path).filter(F.col("ev") != SKIPPED)
              .drop("status", "bad_ev", "file"))
    return Loaded(events, stats, ev_counts, dict(counts["run_ends"]), run_dirs, from_cache)


def event_lines(path: Path, run: str, rt: str, seqs: set[int]) -> dict[int, str]:
    """The raw lines of run ``run`` and runtime ``rt`` with sequence numbers ``seqs`` from its trace file.

    A runtime numbers its events from 0, one per line, so line ``seq`` is tried first and
    nothing else is parsed; a file whose numbering is shifted (blank or skipped lines) is
    then scanned, parsing only lines that mention a wanted number. Only lines that parse
    and name ``rt`` count.
    """
    found: dict[int, str] = {}
    wanted = set(seqs)
    if not wanted:
        return found
    last = max(wanted)
    with open(path, encoding="utf-8", errors="replace") as f:
        for number, line in enumerate(f):
            if number in wanted and _seq_of(line, run, rt) == number:
                found[number] = line.rstrip("\n")
            if number >= last:
                break
    missing = wanted - set(found)
    if missing:
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                if any(int(n) in missing for n in _SEQ.findall(line)):
                    seq = _seq_of(line, run, rt)
                    if seq in missing:
                        found[seq] = line.rstrip("\n")
                        missing.discard(seq)
                        if not missing:
                            break
    return found


_SEQ = re.compile(r'"seq"\s*:\s*(\d+)')


def _seq_of(line: str, run: str, rt: str) -> int | None:
    try:
        event = json.loads(line)
    except ValueError:
        return None
    if not isinstance(event, dict) or event.get("rt") != rt or event.get("run") != run:
        return None
    seq = event.get("seq")
    return seq if isinstance(seq, int) and not isinstance(seq, bool) else None
