"""Small driver-side tables as DataFrames that cost no Spark job.

A ``VALUES`` list with bound parameters is a local relation: Spark plans it without
Python workers (``createDataFrame`` from Python rows goes through a Python RDD), collects
it without a job, broadcasts it in a join, and Spark Connect builds it the same way. The
values are parameters, never SQL text, so a hostile path or id cannot change the query.
"""

from __future__ import annotations

import re

from pyspark.sql import DataFrame, SparkSession

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_TYPE = re.compile(r"[A-Za-z][A-Za-z0-9_<>:, ()]*")


def _fields(schema: str) -> list[tuple[str, str]]:
    """``"a string, b array<struct<x:int,y:int>>"`` as [(name, type)]: split at top-level commas."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(schema):
        depth += ch in "<(" and 1 or ch in ">)" and -1 or 0
        if ch == "," and depth == 0:
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


def rows_frame(spark: SparkSession, rows: list[tuple], schema: str) -> DataFrame:
    """``rows`` as a DataFrame with the DDL ``schema`` (e.g. ``"a string, b long"``)."""
    fields = _fields(schema)
    width = len(fields)
    if any(len(row) != width for row in rows):
        raise ValueError(f"rows_frame: every row needs {width} values for {schema!r}")
    cols = ", ".join(f"CAST(col{i + 1} AS {type_}) AS `{name}`" for i, (name, type_) in enumerate(fields))
    if not rows:  # VALUES needs a row: one of nulls, filtered out
        nulls = ", ".join(["NULL"] * width)
        return spark.sql(f"SELECT {cols} FROM VALUES ({nulls}) WHERE false")
    marks = "(" + ", ".join(["?"] * width) + ")"
    values = ", ".join([marks] * len(rows))
    return spark.sql(f"SELECT {cols} FROM VALUES {values}", args=[v for row in rows for v in row])
