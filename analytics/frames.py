"""Small driver-side tables as DataFrames whose plan is a local relation.

Each row is sent as one JSON object and parsed by ``from_json`` with the table's schema;
the optimizer folds that projection into the local relation itself, so a plan that uses
the table holds its rows, not a literal of its text nor a lineage: joining it reads those
rows, and no expression carries the whole table into every stage
(a literal of the overwrite rule table, about 4,000 rows, copied into every plan and stage
that used it, ran the driver out of its 1 GiB heap). On a
classic session the lines go to the JVM as one string (one call, not one per row), split
there, and become a ``createDataset`` of strings; on Spark Connect, ``createDataFrame``: the client
sends them as one Arrow batch, a local relation the server plans at once.
``createDataFrame`` from Python rows on a classic session would go through a Python RDD,
which starts Python worker processes and is a lineage, not a local relation.
"""

from __future__ import annotations

import json
import re

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_TYPE = re.compile(r"[A-Za-z][A-Za-z0-9_<>:, ()]*")


def _fields(schema: str) -> list[tuple[str, str]]:
    """``"a string, b array<struct<x:int,y:int>>"`` as [(name, type)]: split at top-level commas."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(schema):
        if ch in "<(":
            depth += 1
        elif ch in ">)":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(schema[start:i])
            start = i + 1
    parts.append(schema[start:])
    fields = []
    for part in parts:
        name, _, type_ = part.strip().partition(" ")
        type_ = type_.strip()
        if not _NAME.fullmatch(name) or not _TYPE.fullmatch(type_):
            raise ValueError(f"schema: expected 'name type, ...', got {schema!r}")
        fields.append((name, type_))
    return fields


def json_frame(spark: SparkSession, lines: list[str], schema: str | T.StructType) -> DataFrame:
    """Rows given as JSON objects, one per line (e.g. ``to_json`` of collected rows), as a
    local relation with ``schema``: the values come back exactly as ``to_json`` wrote them."""
    if any("\n" in line for line in lines):
        raise ValueError("json_frame: a row's JSON text must be one line")
    from .session import is_connect

    if is_connect(spark):
        base = spark.createDataFrame([(line,) for line in lines], "value string")
    else:
        jvm = spark.sparkContext._jvm
        texts = (jvm.java.util.regex.Pattern.compile("\n").splitAsStream("\n".join(lines)).toList()
                 if lines else jvm.java.util.ArrayList())
        strings = spark._jsparkSession.createDataset(texts, jvm.org.apache.spark.sql.Encoders.STRING())
        base = DataFrame(strings.toDF(), spark)
    return base.select(F.from_json("value", schema).alias("r")).select("r.*")


def rows_frame(spark: SparkSession, rows: list[tuple], schema: str) -> DataFrame:
    """``rows`` as a DataFrame with the DDL ``schema`` (e.g. ``"a string, b long"``)."""
    fields = _fields(schema)
    width = len(fields)
    if any(len(row) != width for row in rows):
        raise ValueError(f"rows_frame: every row needs {width} values for {schema!r}")
    names = [name for name, _ in fields]
    lines = [json.dumps(dict(zip(names, row))) for row in rows]
    return json_frame(spark, lines, schema)


def is_local(df: DataFrame) -> bool:
    """Whether the optimized plan of ``df`` is a local relation (classic sessions only)."""
    return df._jdf.queryExecution().optimizedPlan().getClass().getSimpleName() == "LocalRelation"
