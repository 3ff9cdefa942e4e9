"""Reading traces once: Spark's JSON reader with the v1 schema, the events kept in Spark's memory.

Every non-blank line is classified: ``ok``, ``corrupt`` (not a JSON object, or missing one
of the fields that place an event: v, ts, seq, run, rt, ev), ``version`` (``v`` other than
1), ``unknown`` (an ``ev`` the schema does not name). Only ``ok`` events are checked; the
others are counted. A ``version`` line makes the whole input unusable: its meaning is
unknown to this checker, so judging it would be guessing.

The message events (``msg.*``, nine in ten of a run's) and the rest are kept apart in
Spark's block manager (local checkpoints) for the check run; nothing is written as files
unless a trace cache asks for it. The message events keep only the message columns, left
partitioned by (run, msg) and sorted by (run, msg, hops), as every message aggregate of
the checks groups them; the other events keep every column, and the skipped lines their
status (without their text). Large files are read in two scans, a small input or many
small files in one (``_passes``). The scans count the lines by status, the message events
per name and the last timestamp of every run as they go; the other events per name are
counted from their few kept rows. A run's directory comes from the ``run`` of its files'
first lines (one map lookup per event), or from the file's path where two directories
hold the same run id. With a trace cache, both frames are written to it as Parquet, so
checking the same traces again reads Parquet columns, not JSON.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from pyspark.sql import Column, DataFrame, Observation, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from .cache import TraceCache, input_key
from .checks.messages import MESSAGE_COLUMNS, MESSAGE_ORDER, MSG_EVENTS
from .inputs import InputError, Run, first_run_ids, torn_last_lines, trace_bytes
from .schema import EVENTS, REQUIRED, SCHEMA_VERSION, TRACE_V1
from .session import SMALL_TRACE_BYTES, is_connect, partition_for

_MAX_UNKNOWN_NAMES = 1000  # hostile input may name millions of events: list the most frequent
_MAX_OBSERVED_RUNS = 256  # beyond this, run ends come from a narrow job over the kept frames
_BYTES_PER_EVENT = 400  # about a trace line's size (the demo library: 376): sizes a pass before it runs
# Files under this on average are read in one scan (``_passes``): opening them costs more than parsing
# them. 1M synthetic events, warm: in 5,578 files 29.6 s in two scans, 16.1 s in one; in 30, 6.0 and 6.7 s.
_ONCE_BELOW_FILE_BYTES = 1 << 20

OTHER_SCHEMA = T.StructType(
    [f for f in TRACE_V1.fields if f.name != "ev"]
    + [T.StructField(name, T.StringType()) for name in ("run_dir", "status", "bad_ev", "file")]
    + [T.StructField("ev", T.StringType())]
)
MESSAGE_SCHEMA = T.StructType([TRACE_V1[name] for name in MESSAGE_COLUMNS])


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
    events: DataFrame  # ok events but the messages: the schema's fields plus run_dir
    stats: LoadStats
    ev_counts: dict[str, int]  # ok events per ev name
    run_ends: dict[str, int]  # run id -> timestamp of its last ok event
    run_dirs: dict[str, list[str]]  # run id -> the directories whose files name it first
    from_cache: bool = False
    messages: DataFrame | None = None  # ok msg.* events: MESSAGE_COLUMNS, partitioned by (run, msg)
    kept: list[DataFrame] = field(default_factory=list)  # what the pass keeps in Spark's memory

    def release(self) -> None:
        """Frees what the reading pass kept, once the checks have run."""
        for frame in self.kept:
            release(frame)
        self.kept.clear()


def release(frame: DataFrame) -> None:
    """Frees the blocks of a local checkpoint now, not when the JVM's garbage collector finds
    it unused: a check run's kept events are most of its memory. (``unpersist`` does not:
    a checkpoint is no cached query.) On Spark Connect the server owns them."""
    from .session import is_connect

    if is_connect(frame.sparkSession):
        return
    plan = frame._jdf.queryExecution().logical()
    if plan.getClass().getSimpleName() == "LogicalRDD":
        plan.rdd().unpersist(False)


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


def _status() -> Column:
    """Null for an ok line, else why it is skipped."""
    placed = F.lit(True)
    for name in REQUIRED:
        placed = placed & F.col(name).isNotNull()
    return (
        F.when(~placed, "corrupt")
        .when(F.col("v") != SCHEMA_VERSION, "version")
        .when(~F.col("ev").isin(*sorted(EVENTS)), "unknown")
    )


def _metrics(runs_seen: list[str], names: tuple[str, ...]) -> list[Column]:
    """What the pass counts as it goes: lines by status, ok events of the few ``names`` (the
    others are counted from the few rows kept of them) and the last timestamp of every run."""
    status = F.col("status")
    ok = status.isNull()
    metrics = [
        F.count(F.lit(1)).alias("lines"),
        F.count_if(status == "corrupt").alias("corrupt"),
        F.count_if(status == "version").alias("version"),
        F.count_if(status == "unknown").alias("unknown"),
    ]
    metrics += [F.count_if(ok & (F.col("ev") == name)).alias(f"ev:{i}") for i, name in enumerate(names)]
    if len(runs_seen) <= _MAX_OBSERVED_RUNS:
        metrics += [F.max(F.when(ok & (F.col("run") == run), F.col("ts"))).alias(f"end:{i}")
                    for i, run in enumerate(runs_seen)]
    return metrics


def _json(spark: SparkSession, files: list[str]) -> DataFrame:
    return spark.read.schema(TRACE_V1).option("mode", "PERMISSIVE").json(files)


def _passes(spark: SparkSession, files: list[str], run_dirs: dict[str, list[str]],
            once: bool) -> tuple[DataFrame, ...]:
    """The reading pass: the message events and the rest, each kept; what it counted.

    Two scans of large files: one scan that kept both (the other events in a struct the
    messages leave null, all shuffled and sorted together, then the others taken apart)
    cost the JVM more CPU than two (1M synthetic events, three warm rounds: 9.1-11.6 s
    against 7.4-8.4 s, load 4-5). A small input, or one of many small files (``once``),
    is read once and kept whole, and both are taken from that copy: there, opening each
    file costs more than parsing it (the demo library's 292 files: 1.3-1.5 s a scan on a
    warm Connect server; see ``_ONCE_BELOW_FILE_BYTES``).
    """
    runs_seen = sorted(run_dirs)
    is_message = F.col("ev").isin(*MSG_EVENTS)
    skipped = F.col("status").isNotNull()
    # Spark Connect returns no metrics observed in a checkpoint, and its observe costs a
    # round trip in which the server lists every trace file (1.3 s for the demo library's
    # 292): there the kept frames are counted instead, which costs a small query each.
    connect = is_connect(spark)
    observations: list[Observation] = []

    def observed(df: DataFrame, names: tuple[str, ...]) -> DataFrame:
        observations.append(Observation(f"pass-{len(observations)}"))
        return df if connect else df.observe(observations[-1], *_metrics(runs_seen, names))

    def parsed(keep: Column) -> DataFrame:
        """The lines ``keep`` selects, with every column the other events keep."""
        return _json(spark, files).filter(keep).withColumn("status", _status()).select(
            *(F.col(f.name) for f in OTHER_SCHEMA.fields
              if f.name not in ("run_dir", "status", "bad_ev", "file", "ev")),
            _run_dir_column(run_dirs).alias("run_dir"),
            "status",
            F.when(skipped, F.col("ev")).alias("bad_ev"),
            F.when(skipped, _path_column()).alias("file"),
            "ev",
        )

    rest = F.col("ev").isNull() | ~is_message
    if once:
        whole = observed(parsed(F.lit(True)), MSG_EVENTS).localCheckpoint(eager=True)
        from_messages, others = whole.filter(is_message), whole.filter(rest)
    else:
        from_messages = observed(_json(spark, files).filter(is_message).withColumn("status", _status()), MSG_EVENTS)
    kept_m = (
        from_messages.select(*MESSAGE_COLUMNS, "status")  # a skipped line is kept for its count only
        .repartition("run", "msg").sortWithinPartitions(*MESSAGE_ORDER)
        .localCheckpoint(eager=True)
    )
    if once:
        passes, kept = [(whole, MSG_EVENTS)], [whole, kept_m]
    else:
        others = observed(parsed(rest), ()).localCheckpoint(eager=True)
        passes, kept = [(kept_m, MSG_EVENTS), (others, ())], [kept_m, others]
    counted = [df.agg(*_metrics(runs_seen, names)).first().asDict() if connect else observation.get
               for (df, names), observation in zip(passes, observations, strict=True)]
    messages = kept_m.filter(~skipped).select(*MESSAGE_COLUMNS)
    counts = {k: sum(c[k] for c in counted) for k in ("lines", "corrupt", "version", "unknown")}
    ev_counts = {name: counted[0][f"ev:{i}"] for i, name in enumerate(MSG_EVENTS) if counted[0][f"ev:{i}"]}
    for r in others.filter(~skipped).groupBy("ev").count().collect():
        ev_counts[r["ev"]] = r["count"]
    counts["ev_counts"] = dict(sorted(ev_counts.items()))
    if len(runs_seen) <= _MAX_OBSERVED_RUNS:
        ends = {run: max((c[f"end:{i}"] for c in counted if c[f"end:{i}"] is not None), default=None)
                for i, run in enumerate(runs_seen)}
    else:
        ends = {r["run"]: r["end"] for r in (
            messages.select("run", "ts").unionByName(others.filter(~skipped).select("run", "ts"))
            .groupBy("run").agg(F.max("ts").alias("end")).collect())}
    counts["run_ends"] = {run: end for run, end in sorted(ends.items()) if end is not None}
    unknown = counts.pop("unknown")
    counts["version"] = _versions(spark, files) if counts.pop("version") else None
    counts["unknown_events"] = _unknown(others, unknown) if unknown else {}
    return kept, messages, others, counts


def _versions(spark: SparkSession, files: list[str]) -> dict:
    """Which schema versions the skipped lines name, and a file of the newest: the input is
    unusable, so this costs one more pass, over the lines that name another version."""
    lines = (_json(spark, files).filter(F.col("v") != SCHEMA_VERSION)
             .withColumn("status", _status()).filter(F.col("status") == "version")
             .select("v", _path_column().alias("file")))
    rows = (lines.groupBy("v").agg(F.count(F.lit(1)).alias("n"), F.min("file").alias("file"))
            .orderBy("v").collect())
    return {"file": rows[-1]["file"], "v": rows[-1]["v"], "found": [[r["v"], r["n"]] for r in rows]}


def _unknown(others: DataFrame, total: int) -> dict[str, int]:
    rows = (others.filter(F.col("status") == "unknown").groupBy("bad_ev").count()
            .orderBy(F.desc("count"), "bad_ev").limit(_MAX_UNKNOWN_NAMES).collect())
    names = {r["bad_ev"]: r["count"] for r in rows}
    rest = total - sum(names.values())
    if rest:
        names["(other names)"] = rest
    return names


_OPEN_COST = "spark.sql.files.openCostInBytes"
_SMALL_OPEN_COST = 8192
_PUSHDOWN = "spark.sql.json.filterPushdown.enabled"


@contextmanager
def _reading(spark: SparkSession, trace_bytes: int) -> Iterator[None]:
    """The settings of the reading pass, the session's own restored after it.

    No filter is pushed into the JSON parser: it judges a pushed filter by the fields it
    read before a line turned out malformed, so a torn last line (``..."ev":"msg.in","msg":"q``)
    left both passes, where it must be counted as corrupt, not vanish.

    A small input's files are packed into splits by their bytes, one split per core. Spark
    charges every file a nominal 4 MB to open when it packs files into splits, so the demo
    library's 292 files of 15 KB on average (4.5 MB) counted as 1.2 GB: ten tasks for a
    few thousand lines. A small input (under ``SMALL_TRACE_BYTES``) is charged 8 KB a file:
    two tasks on two cores. Demo library, cold, load 3.5-5 (measured with Spark's classes
    archived, see ``analytics.classarchive``): the reading pass 13.7 s (twice) -> 10.9 and 8.6 s.
    """
    settings = {_PUSHDOWN: "false"}
    if trace_bytes < SMALL_TRACE_BYTES:
        settings[_OPEN_COST] = str(_SMALL_OPEN_COST)
    before = {name: spark.conf.get(name, None) for name in settings}
    for name, value in settings.items():
        spark.conf.set(name, value)
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                spark.conf.unset(name)
            else:
                spark.conf.set(name, value)


def _read_cached(spark: SparkSession, path: Path) -> tuple[DataFrame, DataFrame]:
    """The kept frames of a cache entry, the messages partitioned again as the checks group
    them. An explicit schema: Spark infers none, which would cost a job per read."""
    messages = (spark.read.schema(MESSAGE_SCHEMA).parquet(str(path / "messages"))
                .repartition("run", "msg").sortWithinPartitions(*MESSAGE_ORDER).localCheckpoint(eager=True))
    others = spark.read.schema(OTHER_SCHEMA).parquet(str(path / "others"))
    return messages, others


def _write_cached(messages: DataFrame, others: DataFrame, path: Path) -> None:
    # Plain encoding: building a dictionary per column chunk cost more than it saved.
    for name, frame in (("messages", messages), ("others", others)):
        frame.write.option("parquet.enable.dictionary", "false").parquet(str(path / name))


def load(spark: SparkSession, runs: list[Run], cache: TraceCache | None = None) -> Loaded:
    files = [p for run in runs for p in run.trace_files]
    run_dirs = first_run_ids(runs)
    torn = torn_last_lines(runs)
    size = trace_bytes(files)
    # Sized by bytes before a line is read: a small input in one partition, interpreted.
    partition_for(spark, size // _BYTES_PER_EVENT)
    key = input_key(files, json.dumps([MESSAGE_SCHEMA.json(), OTHER_SCHEMA.json()]))
    counts = cache.lookup(key) if cache is not None else None
    from_cache = counts is not None
    if counts is not None:
        messages, others = _read_cached(spark, cache.events_path(key))
        kept = [messages]
    else:
        with _reading(spark, size):
            once = size < SMALL_TRACE_BYTES or size < len(files) * _ONCE_BELOW_FILE_BYTES
            kept, messages, others, counts = _passes(spark, [str(p) for p in files], run_dirs, once)
        if cache is not None and not counts["version"]:
            with cache.writing(key) as entry:
                _write_cached(messages, others, entry.events)
                entry.meta = counts

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
    events = others.filter(F.col("status").isNull()).drop("status", "bad_ev", "file")
    return Loaded(events, stats, ev_counts, dict(counts["run_ends"]), run_dirs, from_cache, messages, kept)


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
