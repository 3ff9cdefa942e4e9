"""Checks in two phases: every check's candidates collected in one query, as local relations."""

from __future__ import annotations

import pytest
from pyspark.sql import functions as F

from analytics.checks import base
from analytics.checks.base import Check, CheckContext, CheckOutput
from analytics.frames import is_local, rows_frame
from analytics.session import JobMeter, tune

pytestmark = pytest.mark.spark


def _check(name: str, find) -> Check:
    return Check(name, "", "", (), lambda ctx: CheckOutput(ctx.events.limit(0)), find)


def _ctx(spark) -> CheckContext:
    events = spark.range(100).select(F.col("id").alias("seq"), (F.col("id") % 7).alias("rt"))
    return CheckContext(spark, events, rows_frame(spark, [], "run_dir string, declared string, judged string"))


def test_the_candidates_of_every_check_are_one_query_and_local_relations(spark):
    tune(spark)
    ctx = _ctx(spark)
    odd = _check("odd", lambda c: {"seqs": c.events.filter(F.col("seq") % 2 == 1),
                                   "per_rt": c.events.groupBy("rt").agg(F.max("seq").alias("last"))})
    none = _check("none", lambda c: {"empty": c.events.filter(F.col("seq") < 0)})
    plain = _check("plain", None)
    with JobMeter(spark) as meter:
        ctx.find([odd, none, plain])
    assert meter.jobs == 1
    seqs, per_rt = ctx.candidates(odd)["seqs"], ctx.candidates(odd)["per_rt"]
    assert is_local(seqs) and is_local(per_rt)
    assert sorted(r["seq"] for r in seqs.collect()) == list(range(1, 100, 2))
    assert sorted(tuple(r) for r in per_rt.collect()) == [(rt, max(range(rt, 100, 7))) for rt in range(7)]
    assert per_rt.schema == ctx.events.groupBy("rt").agg(F.max("seq").alias("last")).schema
    assert ctx.candidates(none)["empty"].collect() == []
    assert ctx.candidates(plain) == {}


def test_candidates_beyond_the_limit_stay_distributed_with_the_same_rows(spark, monkeypatch):
    ctx = _ctx(spark)
    monkeypatch.setattr(base, "CANDIDATE_LIMIT", 10)
    many = _check("many", lambda c: {"seqs": c.events.filter(F.col("seq") >= 50)})
    found = ctx.candidates(many)["seqs"]  # found on demand: the runner did not ask first
    assert not is_local(found)
    assert sorted(r["seq"] for r in found.collect()) == list(range(50, 100))
    ctx.release()


@pytest.mark.parametrize("events", [2000, 50_000])
def test_a_check_run_is_the_reading_pass_and_one_job_per_phase(spark, tmp_path, events):
    """No join broadcasts: each broadcast would be a job of its own (adaptive execution is
    off). With them the small run took 18 jobs and an input from ``SMALL_INPUT`` events
    (a partition per core, compiled) 32. Seven jobs: the reading pass three (the message
    events kept, the others kept, the others counted by name), phase 1 one, lost-message's
    evidence two (the hops to judge, then their verdicts), phase 2 one. The planted
    violations are found, and nothing else."""
    from analytics.inputs import find_runs
    from analytics.runner import check_runs
    from analytics.session import SMALL_INPUT
    from analytics.synthetic import generate

    answer = generate(tmp_path / "runs", events=events, runs=2, workers=1)
    (tmp_path / "stage").mkdir()
    outcome = check_runs(spark, find_runs([str(tmp_path / "runs")]), tmp_path / "stage")
    assert (outcome.stats.events >= SMALL_INPUT) == (events >= SMALL_INPUT)
    assert outcome.cost.jobs == 7
    for result in outcome.results:
        assert sorted(v.key for v in result.violations) == answer["planted"][result.name], result.name
        assert result.count == len(result.violations), result.name


def test_a_small_input_is_interpreted_a_large_one_compiled(spark):
    """A small input's queries compile neither stages nor single expressions (each
    compiled class is JIT work on every check run); a larger input gets both back."""
    from analytics.session import SMALL_INPUT, partition_for

    try:
        assert partition_for(spark, SMALL_INPUT - 1)
        assert spark.conf.get("spark.sql.codegen.wholeStage") == "false"
        assert spark.conf.get("spark.sql.codegen.factoryMode") == "NO_CODEGEN"
        assert not partition_for(spark, SMALL_INPUT)
        assert spark.conf.get("spark.sql.codegen.wholeStage") == "true"
        assert spark.conf.get("spark.sql.codegen.factoryMode") == "FALLBACK"
    finally:
        tune(spark)
        partition_for(spark, SMALL_INPUT)
