"""Small driver-side tables as DataFrames.

On a classic session a JSON literal parsed in the JVM: ``createDataFrame`` from Python rows
goes through a Python RDD, which starts Python worker processes. On Spark Connect,
``createDataFrame``: the client sends the rows as one Arrow batch, a local relation the
server plans at once (a big ``VALUES`` list or SQL literal is parsed again at every
analysis there).
"""

from __future__ import annotations

import json
import re

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

INLINE_LIMIT = 64 * 1024  # characters of JSON a table's plan may carry as a literal
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


def rows_frame(spark: SparkSession, rows: list[tuple], schema: str) -> DataFrame:
    """``rows`` as a DataFrame with the DDL ``schema`` (e.g. ``"a string, b long"``)."""
    fields = _fields(schema)
    width = len(fields)
    if any(len(row) != width for row in rows):
        raise ValueError(f"rows_frame: every row needs {width} values for {schema!r}")
    from .session import is_connect

    if is_connect(spark):
        return spark.createDataFrame([tuple(row) for row in rows], schema=schema)
    names = [name for name, _ in fields]
    text = json.dumps([dict(zip(names, row)) for row in rows])
    struct = "array<struct<" + ", ".join(f"`{name}`: {type_}" for name, type_ in fields) + ">>"
    frame = spark.range(1).select(F.inline(F.from_json(F.lit(text), struct)))
    if len(text) > INLINE_LIMIT:
        # A literal this big is copied into every plan and stage that uses the table: the
        # overwrite rule table (about 4,000 rows) unioned with the other checks ran the
        # driver out of its 1 GiB heap. Computed once, the plans hold a reference instead.
        frame = frame.localCheckpoint()
    return frame
