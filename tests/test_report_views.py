"""What the report's views are made of, without a browser: the verdicts ``run --check``
keeps per run (read back by the report's one reader), the scenario names of proxies and
providers, the participant the routing view opens on and its zoomed time axis, the words
for an explained loss, and a policy matrix's matrix.json as the report reads it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from analytics.inputs import Run as CheckedRun
from analytics.load import LoadStats
from analytics.runner import CheckResult, Outcome, Violation
from analytics_helpers import RunBuilder, entry
from joynr_sim.cli import main
from joynr_sim.inspect import load_run
from joynr_sim.report import ReportError, write_report
from joynr_sim.report.explain import loss_verdicts
from joynr_sim.report.inputs import Step, attach_verdicts, read_run_input
from joynr_sim.report.matrix import read_matrix
from joynr_sim.report.names import participant_names
from joynr_sim.report.routing import opening, routing, zoom
from joynr_sim.scenario.checking import keep_reports


def _violation(run: str, key: str) -> Violation:
    return Violation("overwrite-violation", run, key, "should-refuse", f"{key} replaced", {"participant": "p1"},
                     [("cc-1", 0)], ['{"v":1,"ts":100,"seq":0,"rt":"cc-1","ev":"rt.put"}'])


def test_each_checked_run_keeps_its_own_verdicts_where_the_report_reads_them(tmp_path):
    a, b = RunBuilder("run-a"), RunBuilder("run-b")
    for builder in (a, b):
        builder.put("cc-1", 100, "p1", None, entry("Mqtt", "g1/cc-2"), "created")
    dirs = [a.write(tmp_path / "runs"), b.write(tmp_path / "runs")]
    result = CheckResult("overwrite-violation", "d", "s", 2, 1, [_violation("run-b", "k1")],
                         [f"{dirs[0]}: declares no policy", f"{dirs[1]}: declares no policy"], 0.1)
    outcome = Outcome([CheckedRun(d, (), "precedence") for d in dirs], LoadStats(), [result])
    written = keep_reports(outcome, {str(dirs[0]): "run-a", str(dirs[1]): "run-b"})
    assert written == [d / "check" / "report.json" for d in dirs]
    kept = [json.loads(p.read_text()) for p in written]
    assert [k["exit_status"] for k in kept] == [0, 1]
    assert [k["checks"][0]["notes"] for k in kept] == [[f"{d}: declares no policy"] for d in dirs]
    run_a, run_b = read_run_input(dirs[0]), read_run_input(dirs[1])
    attach_verdicts(run_a, [])
    attach_verdicts(run_b, [])
    assert [(v.status, len(v.violations)) for v in run_a.verdicts] == [("pass", 0)]
    assert [(v.status, len(v.violations)) for v in run_b.verdicts] == [("fail", 1)]
    assert run_b.verdicts[0].violations[0].slice_total == 1  # the slice was written next to it


def _named_run(tmp_path: Path) -> Path:
    b = RunBuilder()
    b.put("app-1", 2, "app-1", None, entry("InProcess", "inprocess:1"), "created", origin="provisioned")
    b.put("app-1", 4, "crash-echo", None, entry("InProcess", "inprocess:2"), "created", origin="registration")
    b.add("runner", "step", 5, index=0, name="register echo on app-1 (joynrsim/Echo, GLOBAL)", outcome="ok",
          detail="", line=3)
    b.put("lib-2", 6, "4f2c-uuid", None, entry("InProcess", "inprocess:3"), "created", origin="registration")
    b.add("runner", "step", 7, index=1, name="proxy px on lib-2 -> dom/joynrsim/Echo", outcome="ok", detail="",
          line=4)
    b.put("cc-1", 8, "crash-echo", None, entry("Mqtt", "g1/cc-1"), "created", origin="gcd")
    b.put("cc-1", 40, "crash-echo", entry("Mqtt", "g1/cc-1"), entry("Mqtt", "g1/cc-1"), "replaced", origin="gcd")
    b.add("runner", "step", 41, index=2, name="call px.echo", outcome="failed", detail="timed out", line=5)
    b.put("cc-1", 300, "late", None, entry("Mqtt", "g1/cc-1"), "created", origin="gcd")
    b.put("cc-2", 340, "late", None, entry("Mqtt", "g1/cc-1"), "created", origin="gcd")
    return b.write(tmp_path / "runs")


def test_proxies_and_providers_are_named_as_the_scenario_names_them(tmp_path):
    names = participant_names(load_run(_named_run(tmp_path)).events)
    assert {p: (n.name, n.role, n.runtime) for p, n in names.items()} == {
        "crash-echo": ("echo", "provider", "app-1"), "4f2c-uuid": ("px", "proxy", "lib-2")}


def test_the_routing_view_opens_on_what_a_failed_step_names(tmp_path):
    run = load_run(_named_run(tmp_path))
    names = participant_names(run.events)
    failed = Step(2, "call px.echo", "failed", "timed out", "", 5, None)
    data = routing(run, steps=[failed], names=names)
    assert (data["first"], data["why"]) == ("4f2c-uuid", "step 2's, which failed")  # "px" in its title
    # a violation's participant comes first
    assert opening(data["participants"], data["changes"], ["crash-echo"], [failed], names)[0] == "crash-echo"
    # neither: the participant whose entry changed most
    assert routing(run, names=names)["first"] == "crash-echo"
    # "late" changed at +298 and +338 ms: its axis spans those, not the run from 0
    assert data["zooms"]["late"] == [294, 338] and data["end"] == 338


@pytest.mark.parametrize(("times", "end", "expected"), [([100], 1000, [90, 110]), ([100, 300], 1000, [80, 320]),
                                                        ([0, 5], 5, [0, 5])])
def test_zoom_spans_the_changes_with_room_either_side(times, end, expected):
    assert zoom(times, end) == expected


def test_a_request_lost_to_a_broker_outage_is_explained_in_words(tmp_path):
    b = RunBuilder()
    b.add("brokers", "life.start", 0, target="broker-g1", target_kind="broker", gbid="g1")
    b.add("cc-2", "life.start", 0, target="cc-2", target_kind="cluster-controller", own_topics=["cc-2"])
    b.add("brokers", "life.crash", 10, target="broker-g1", target_kind="broker", gbid="g1")
    b.msg("cc-1", "msg.out", 12, "m1", via="mqtt", gbid="g1", target="g1/cc-2", corr="c1")
    b.add("brokers", "life.restart", 30, target="broker-g1", target_kind="broker", gbid="g1")
    verdicts = loss_verdicts(load_run(b.write(tmp_path / "runs")))
    assert verdicts["m1"]["explained"] is True
    assert verdicts["m1"]["text"] == ("explained (broker-down): its broker was down when it was sent: "
                                      "broker of g1 crashed at +10ms, up again at +30ms")


def _matrix(tmp_path: Path, cells: dict) -> Path:
    out = tmp_path / "matrix"
    out.mkdir()
    (out / "matrix.json").write_text(json.dumps({"generator": "joynr-sim", "policies": list(cells), "checked": False,
                                                 "scenarios": [{"name": "s", "policy": "precedence", "cells": cells}]}))
    return out


def test_a_matrix_folder_gives_the_runs_it_lists_with_their_expectations(tmp_path):
    out = _matrix(tmp_path, {
        "precedence": {"expected": "hold", "outcome": "held", "ok": True, "detail": ""},
        "routing:ignores-sticky": {"expected": "fail", "outcome": "failed", "ok": True, "detail": "step 2"}})
    for folder in ("precedence", "routing-ignores-sticky", "gcd-trust"):  # gcd-trust: an older matrix's run
        b = RunBuilder("s")
        b.add("runner", "step", 1, index=0, name="x", outcome="ok", detail="", line=1)
        b.write(out / folder)
    matrix = read_matrix(out)
    assert [(c.column, c.as_expected) for c in matrix.cells.values()] == [
        ("precedence", False), ("routing:ignores-sticky", True)]
    written = write_report([out])
    assert sorted(p.name for p in written.pages) == ["precedence_s.html", "routing-ignores-sticky_s.html"]
    index = written.index.read_text()
    assert 'data-column="routing:ignores-sticky"' in index and "failed: expected" in index


@pytest.mark.parametrize(("cells", "message"), [
    ({"precedence": {"expected": "maybe", "outcome": "held", "ok": True}}, "expected: expected one of hold, fail"),
    ({"precedence": {"expected": "hold", "outcome": "held", "ok": "yes"}}, "cells.precedence.ok: expected bool"),
    ({"../../elsewhere": {"expected": "hold", "outcome": "held", "ok": True}}, "is not one of the matrix's policies"),
])
def test_a_matrix_json_of_the_wrong_shape_is_refused_in_one_line(tmp_path, capsys, cells, message):
    out = _matrix(tmp_path, cells)
    with pytest.raises(ReportError, match=message):
        write_report([out])
    assert main(["report", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and message in err
    assert not (out / "report").exists()


def test_run_matrix_report_checks_where_its_pages_go_before_anything_runs(tmp_path, capsys):
    out = tmp_path / "runs"
    (out / "report").mkdir(parents=True)
    (out / "report" / "precedence_provider-unregisters.html").write_text("mine")
    scenario = Path(__file__).resolve().parent.parent / "scenarios" / "provider-unregisters.yaml"
    assert main(["run", str(scenario), "--out", str(out), "--policy", "all", "--network", "memory", "--report"]) == 2
    err = capsys.readouterr().err
    assert "--report:" in err and "precedence_provider-unregisters.html exists and was not written" in err
    assert sorted(p.name for p in out.iterdir()) == ["report"]  # nothing ran
