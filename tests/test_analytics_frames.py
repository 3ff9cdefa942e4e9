"""Small driver-side tables are local relations: neither a literal in every plan nor a lineage."""

from __future__ import annotations

import pytest
from pyspark.sql import functions as F

from analytics.frames import is_local, json_frame, rows_frame

pytestmark = pytest.mark.spark


def _plan_chars(df) -> int:
    return len(df._jdf.queryExecution().analyzed().toString())


def test_a_table_is_a_local_relation_whatever_its_size(spark):
    small = rows_frame(spark, [("a", 1), ("b", 2)], "k string, v long")
    assert sorted(tuple(r) for r in small.collect()) == [("a", 1), ("b", 2)]
    assert is_local(small)
    rows = [(f"key-{n:06d}", n) for n in range(20_000)]
    big = rows_frame(spark, rows, "k string, v long")
    assert is_local(big)
    assert big.count() == len(rows)
    # The rows' text (about 600 KB) is not carried in the plan, as a literal or otherwise.
    assert _plan_chars(big.join(big, "k")) < 2_000


def test_json_frame_gives_back_exactly_what_to_json_wrote(spark):
    df = spark.sql(
        "SELECT 'a\\nb' AS s, 9007199254740993L AS n, true AS ok, "
        "named_struct('x', 1, 'y', CAST(NULL AS STRING)) AS st, "
        "array(named_struct('rt', 'r', 'seq', 2L)) AS refs, CAST(NULL AS ARRAY<STRING>) AS none"
    )
    lines = [r[0] for r in df.select(F.to_json(F.struct(*df.columns))).collect()]
    back = json_frame(spark, lines, df.schema)
    assert is_local(back)
    assert back.collect() == df.collect()
    assert json_frame(spark, [], df.schema).collect() == []
