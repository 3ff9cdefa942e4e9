"""Small driver-side tables: a big one is not carried as a literal in every plan."""

from __future__ import annotations

import pytest

from analytics.frames import INLINE_LIMIT, rows_frame

pytestmark = pytest.mark.spark


def _plan_chars(df) -> int:
    return len(df._jdf.queryExecution().analyzed().toString())


def test_a_small_table_is_a_literal_and_a_big_one_a_computed_reference(spark):
    small = rows_frame(spark, [("a", 1), ("b", 2)], "k string, v long")
    assert sorted(tuple(r) for r in small.collect()) == [("a", 1), ("b", 2)]
    rows = [(f"key-{n:06d}", n) for n in range(INLINE_LIMIT // 10)]
    big = rows_frame(spark, rows, "k string, v long")
    assert big.count() == len(rows)
    # The literal alone would be several times the limit; the plan holds a reference.
    assert _plan_chars(big) < INLINE_LIMIT // 10
    assert _plan_chars(big.join(big, "k")) < INLINE_LIMIT // 5
