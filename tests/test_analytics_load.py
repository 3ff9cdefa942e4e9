"""Reading traces: run directories from first lines or paths, counts from the writing pass,
the trace cache, slices read back from the files, and job counts."""

from __future__ import annotations

import json
import os

from analytics.cache import TraceCache
from analytics.frames import rows_frame
from analytics.inputs import find_runs, trace_bytes
from analytics.load import event_lines, load
from analytics.runner import check_runs
from analytics.session import JobMeter, partition_for, tune
from analytics_helpers import RunBuilder, entry, wire

PATH = [("lib-1", "ws"), ("cc-1", "mqtt"), ("cc-2", "ws"), ("lib-2", "ws")]


def overwriting_run(name: str) -> RunBuilder:
    b = RunBuilder(name)
    b.put("cc-1", 1, "p", entry("WebSocketClient", "lib-1"), entry("Mqtt", "g1/cc-2"), "replaced")
    t = wire(b, "q1", PATH, 10, corr="c1")
    wire(b, "r1", list(reversed(PATH)), t, type_="rp", corr="c1")
    return b


def test_counts_ends_and_run_dirs_come_from_the_reading_pass(spark, tmp_path):
    a = overwriting_run("same-id")
    a.write(tmp_path / "one")
    a.write(tmp_path / "two")  # a copy: two directories, one run id
    other = overwriting_run("other")
    other.add("runner", "step", 500, index=0, name="x")
    other.write(tmp_path / "one")
    runs = find_runs([str(tmp_path / "one"), str(tmp_path / "two")])
    tune(spark)
    with JobMeter(spark) as meter:
        loaded = load(spark, runs)
    # the message events kept, the others kept, the others counted by name
    assert meter.jobs == 3 and meter.tasks >= meter.jobs
    assert loaded.ev_counts["rt.put"] == 3 and loaded.ev_counts["step"] == 1
    assert loaded.stats.events == sum(loaded.ev_counts.values()) == 3 * 15 + 1
    assert loaded.run_ends == {"other": 500, "same-id": max(e["ts"] for e in a.events)}
    assert sorted(loaded.run_dirs["same-id"]) == sorted(str(r.dir) for r in runs if r.dir.name == "same-id")
    dirs = {(r["run"], r["run_dir"]) for r in loaded.events.select("run", "run_dir").distinct().collect()}
    # The copy is placed by its path, the unique run id by its first line: each where it lies.
    assert dirs == {("same-id", str(tmp_path.resolve() / "one" / "same-id")),
                    ("same-id", str(tmp_path.resolve() / "two" / "same-id")),
                    ("other", str(tmp_path.resolve() / "one" / "other"))}
    assert "raw" not in loaded.events.columns


def test_the_cache_is_read_again_and_a_changed_file_is_parsed_again(spark, tmp_path):
    b = overwriting_run("run-1")
    run_dir = b.write(tmp_path / "runs")
    cache = TraceCache(tmp_path / "cache" / "traces")
    foreign = tmp_path / "cache" / "traces" / "not-ours"
    foreign.mkdir()

    def check():
        stage = tmp_path / f"stage-{len(os.listdir(tmp_path))}"
        stage.mkdir()
        return check_runs(spark, find_runs([str(run_dir)]), stage, ["overwrite-violation"], cache=cache)

    first, again = check(), check()
    assert not first.cost.from_cache and again.cost.from_cache
    assert [v.key for v in first.results[0].violations] == [v.key for v in again.results[0].violations] \
        == ["run-1/cc-1/0"]
    assert again.stats.as_dict() == first.stats.as_dict()
    # A second overwrite, appended: the file changed, so it is parsed again and found.
    line = json.dumps({"v": 1, "ts": 900, "seq": 99, "run": "run-1", "rt": "cc-1", "kind": "cluster-controller",
                       "ev": "rt.put", "participant": "p2", "policy": "precedence", "outcome": "replaced",
                       "reason": "", "origin": "local", "old": entry("WebSocketClient", "lib-1"),
                       "new": entry("Mqtt", "g1/cc-2"), "entry": entry("Mqtt", "g1/cc-2")})
    with open(run_dir / "trace" / "cc-1.ndjson", "a") as f:
        f.write(line + "\n")
    changed = check()
    assert not changed.cost.from_cache
    assert {v.key for v in changed.results[0].violations} == {"run-1/cc-1/0", "run-1/cc-1/99"}
    assert changed.results[0].violations[1].slice == [line]  # read back from the file
    entries = [p for p in cache.root.iterdir() if len(p.name) == 64]
    assert len(entries) == 2 and foreign.is_dir()
    small = TraceCache(cache.root, keep=1)
    small._evict()
    assert len([p for p in cache.root.iterdir() if len(p.name) == 64]) == 1 and foreign.is_dir()


def test_event_lines_finds_shifted_lines_and_only_those_of_the_runtime(tmp_path):
    path = tmp_path / "cc-1.ndjson"
    events = [{"v": 1, "ts": i, "seq": i, "run": "r", "rt": "cc-1", "ev": "step"} for i in range(5)]
    lines = [json.dumps(e) for e in events]
    path.write_text("\n".join(["", "garbage", lines[0], lines[1], json.dumps({**events[2], "rt": "cc-2"}),
                               lines[3], lines[4]]) + "\n")
    assert event_lines(path, "r", "cc-1", {1, 2, 4}) == {1: lines[1], 4: lines[4]}
    assert event_lines(path, "other-run", "cc-1", {1}) == {}


def test_trace_bytes_counts_each_file_and_a_vanished_one_as_nothing(tmp_path):
    a, b = tmp_path / "a.ndjson", tmp_path / "b.ndjson"
    a.write_bytes(b"x" * 10)
    b.write_bytes(b"y" * 5)
    assert trace_bytes([a, b, tmp_path / "gone.ndjson"]) == 15


def test_rows_frame_types_and_empty_tables(spark):
    df = rows_frame(spark, [("a", 1, True), ("b", None, None)], "name string, n bigint, flag boolean")
    assert [tuple(r) for r in df.collect()] == [("a", 1, True), ("b", None, None)]
    assert rows_frame(spark, [], "x string, y int").collect() == []
    assert rows_frame(spark, [], "x string, y int").columns == ["x", "y"]


def test_a_reading_pass_after_a_small_check_run_compiles_its_stages(spark):
    """A small input's check run turns whole-stage code generation and expression
    compilation off (``partition_for``); the next check run in the same session reads its
    traces with both on again. Left off, the reading pass of 1M events after a small
    warm-up ran interpreted: JVM CPU 26.5 s, not 21.5, with stages interpreted; 79-84 s,
    not 30-48, with expressions interpreted too."""
    partition_for(spark, 10)
    assert spark.conf.get("spark.sql.codegen.wholeStage") == "false"
    assert spark.conf.get("spark.sql.codegen.factoryMode") == "NO_CODEGEN"
    tune(spark)
    assert spark.conf.get("spark.sql.codegen.wholeStage") == "true"
    assert spark.conf.get("spark.sql.codegen.factoryMode") == "FALLBACK"


def test_a_small_input_is_read_in_a_task_per_core_not_one_per_32_files(spark, tmp_path):
    """Spark charges each file 4 MB to open when it packs files into tasks: 100 files of a
    few hundred bytes made 4 tasks."""
    for i in range(100):
        b = RunBuilder(f"run-{i}")
        b.add("runner", "step", 1, index=0, name="x")
        b.write(tmp_path / "runs")
    runs = find_runs([str(tmp_path / "runs")])
    before = spark.conf.get("spark.sql.files.openCostInBytes", None)
    loaded = load(spark, runs)
    assert loaded.stats.events == 100
    # the other events are kept as the scan read them: a partition per task
    assert 1 <= loaded.events.rdd.getNumPartitions() <= spark.sparkContext.defaultParallelism
    assert spark.conf.get("spark.sql.files.openCostInBytes", None) == before


def test_rdds_planned_inside_the_meter_take_the_check_as_their_call_site(spark):
    """Spark would find each RDD's creation site by walking the driver thread's stack; the
    meter names it instead (pyspark sets only the short form, per action)."""
    sc = spark.sparkContext

    def site() -> str:
        return spark.range(3).selectExpr("id + 1 AS x")._jdf.queryExecution().toRdd().creationSite().longForm()

    with JobMeter(spark):
        inside = site()
    assert inside == "joynr-sim check"
    assert site() != "joynr-sim check"  # after it, Spark finds the site again
    assert sc.getLocalProperty("callSite.short") is None and sc.getLocalProperty("callSite.long") is None


def _hostile_run(tmp_path):
    """Two runs: overwrites and an exchange, a line of an unknown event, a line that is no
    JSON and a torn last line that names a message event before it breaks off."""
    a = overwriting_run("run-a")
    a.add("runner", "step", 40, index=0, name="x")
    a.write(tmp_path / "runs", extra_lines={
        "cc-1": '{"v":1,"ts":99,"seq":9,"run":"run-a","rt":"cc-1","ev":"msg.teleport"}\nnot json\n',
        "cc-2": '{"v":1,"ts":99,"seq":5,"run":"run-a","rt":"cc-2","ev":"msg.in","msg":"q',
    })
    overwriting_run("run-b").write(tmp_path / "runs")
    return find_runs([str(tmp_path / "runs")])


def _kept(loaded):
    messages = sorted(tuple(r) for r in loaded.messages.collect())
    others = sorted(json.dumps(r.asDict(recursive=True), sort_keys=True) for r in loaded.events.collect())
    return messages, others


def test_a_small_and_a_large_input_are_read_alike(spark, tmp_path, monkeypatch):
    """A small input (or many small files) is read once and kept whole; large files in two
    scans (the message events, the rest). Both give the same events, counts and run ends, skipped lines
    included: the torn line that names msg.in is corrupt in both, not lost in one."""
    import analytics.load as load_module

    runs = _hostile_run(tmp_path)
    tune(spark)
    small = load(spark, runs)
    monkeypatch.setattr(load_module, "SMALL_TRACE_BYTES", 0)
    monkeypatch.setattr(load_module, "_ONCE_BELOW_FILE_BYTES", 0)
    with JobMeter(spark) as meter:
        large = load(spark, runs)
    assert meter.jobs == 4  # two scans kept, the others counted by name, the unknown names: the large path ran
    assert small.stats.as_dict() == large.stats.as_dict()
    assert small.stats.corrupt == 1 and small.stats.torn == 1
    assert small.stats.unknown_events == {"msg.teleport": 1}
    assert small.ev_counts == large.ev_counts and small.run_ends == large.run_ends
    assert _kept(small) == _kept(large)
    assert "status" not in large.events.columns and "status" not in large.messages.columns
    small.release()
    large.release()


def test_a_check_with_nothing_to_judge_builds_no_query(spark, tmp_path):
    """A run of link events only: the message, routing-table, GCD and multicast checks have
    nothing to judge and are not built; nor is a second phase of a check whose first found
    nothing. Four jobs: the reading pass (the input is small: kept whole, the messages
    taken from it, the others counted by name) and the one query of link-uniqueness."""
    b = RunBuilder("links-only")
    b.add("cc-1", "link.attach", 1, gbid="g1", client_id="k", conn="c1", mode="establish")
    b.add("cc-1", "link.detach", 2, gbid="g1", client_id="k", conn="c1", closed=True, error=None)
    b.write(tmp_path / "runs")
    tune(spark)
    outcome = check_runs(spark, find_runs([str(tmp_path / "runs")]), tmp_path)
    assert outcome.cost.jobs == 4
    built = {r.name for r in outcome.results if r.seconds}
    assert built == {"link-uniqueness"}
    assert all(r.count == 0 for r in outcome.results)

    clean = overwriting_run("answered")  # every request answered: nothing for phase 2 of the message checks
    clean.write(tmp_path / "clean")
    outcome = check_runs(spark, find_runs([str(tmp_path / "clean")]), tmp_path)
    by_name = {r.name: r for r in outcome.results}
    assert by_name["routing-loop"].seconds == 0 and by_name["lost-message"].seconds == 0
    assert by_name["overwrite-violation"].count == 1
    assert outcome.cost.jobs == 5  # reading three, phase 1 one, phase 2 one: lost-message's evidence is not built
