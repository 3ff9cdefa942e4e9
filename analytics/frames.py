"""Small driver-side tables as DataFrames without Python workers.

``createDataFrame`` from Python rows goes through a Python RDD, which starts Python
worker processes; a JSON literal parsed in the JVM does not.
"""

from __future__ import annotations

import json

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T


def rows_frame(spark: SparkSession, rows: list[tuple], schema: str) -> DataFrame:
    """``rows`` as a DataFrame with the DDL ``schema`` (e.g. ``"a string, b long"``)."""
    struct = T._parse_datatype_string(schema)
    if not isinstance(struct, T.StructType):
        raise ValueError(f"schema: expected a struct DDL string, got {schema!r}")
    names = struct.fieldNames()
    text = json.dumps([dict(zip(names, row)) for row in rows])
    return spark.range(1).select(
        F.explode(F.from_json(F.lit(text), T.ArrayType(struct))).alias("r")
    ).select("r.*")
