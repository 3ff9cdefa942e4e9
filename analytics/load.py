"""Reading traces: NDJSON as text, parsed with the v1 schema, staged once as Parquet.

Every line is classified: ``ok``, ``corrupt`` (not a JSON object, or missing one of the
fields that place an event: v, ts, seq, run, rt, ev), ``version`` (``v`` other than 1),
``unknown`` (an ``ev`` the schema does not name). Only ``ok`` events are checked; the
others are counted. A ``version`` line makes the whole input unusable: its meaning is
unknown to this checker, so judging it would be guessing.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from .frames import rows_frame
from .inputs import InputError, Run, torn_last_lines
from .schema import EVENTS, FIELD_NAMES, REQUIRED, SCHEMA_VERSION, TRACE_V1


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
    events: DataFrame  # ok events: the schema's fields plus run_dir and raw
    stats: LoadStats
    ev_counts: dict[str, int]  # ok events per ev name


def _path_column() -> F.Column:
    """The trace file as a plain absolute path (Spark reports a URI)."""
    uri = F.regexp_replace(F.input_file_name(), r"\+", "%2B")  # url_decode reads + as space
    return F.url_decode(F.regexp_replace(uri, r"^file:/*", "/"))


def load(spark: SparkSession, runs: list[Run], stage_dir: Path) -> Loaded:
    files = [str(p) for run in runs for p in run.trace_files]
    dir_of_file = {str(p): str(run.dir) for run in runs for p in run.trace_files}
    file_map = rows_frame(spark, list(dir_of_file.items()), "file string, run_dir string")

    lines = (
        spark.read.text(files)
        .withColumn("file", _path_column())
        .filter(F.length(F.trim("value")) > 0)
    )
    e = F.from_json("value", TRACE_V1).alias("e")
    parsed = lines.select(F.col("value").alias("raw"), "file", e)
    placed = F.lit(True)
    for name in REQUIRED:
        placed = placed & F.col(f"e.{name}").isNotNull()
    status = (
        F.when(~placed, "corrupt")
        .when(F.col("e.v") != SCHEMA_VERSION, "version")
        .when(~F.col("e.ev").isin(*sorted(EVENTS)), "unknown")
        .otherwise("ok")
    )
    staged = parsed.select(
        *(F.col(f"e.{name}").alias(name) for name in FIELD_NAMES),
        F.col("raw"),
        F.col("file"),
        status.alias("status"),
    ).join(F.broadcast(file_map), "file", "left")
    path = str(stage_dir / "events.parquet")
    # One folder per event name: a check reads only the events it names.
    staged.write.mode("overwrite").partitionBy("ev").parquet(path)
    table = spark.read.parquet(path)

    stats = LoadStats(files=len(files))
    counts = table.groupBy("status", "ev", "v").count().collect()
    ev_counts: dict[str, int] = {}
    versions: dict[int, int] = {}
    for row in counts:
        stats.lines += row["count"]
        if row["status"] == "ok":
            ev_counts[row["ev"]] = ev_counts.get(row["ev"], 0) + row["count"]
        elif row["status"] == "corrupt":
            stats.corrupt += row["count"]
        elif row["status"] == "unknown":
            stats.unknown_events[row["ev"]] = stats.unknown_events.get(row["ev"], 0) + row["count"]
        elif row["status"] == "version":
            versions[row["v"]] = versions.get(row["v"], 0) + row["count"]
    if versions:
        example = (
            table.filter(F.col("status") == "version").select("file", "v").limit(1).collect()[0]
        )
        found = ", ".join(f"v={v} ({n} events)" for v, n in sorted(versions.items()))
        raise InputError(
            f"{example['file']}: trace schema version {example['v']} is not supported "
            f"(this checker reads v{SCHEMA_VERSION}; found {found})"
        )
    torn = torn_last_lines(runs)
    stats.torn = min(torn.count, stats.corrupt)
    stats.corrupt -= stats.torn
    stats.torn_files = torn.files
    stats.events = sum(ev_counts.values())
    events = table.filter(F.col("status") == "ok").drop("status", "file")
    return Loaded(events, stats, ev_counts)
