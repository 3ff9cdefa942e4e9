"""The policy matrix without brokers: what each cell must end with, how a run's outcome and
the checker's violations make a cell, and matrix.json / JUnit. The verdict can fail: a
scenario that holds under a policy it guards against, or fails under its own, is not ok."""

from __future__ import annotations

import json
from pathlib import Path
from xml.etree import ElementTree

import pytest

from joynr_sim.scenario import parse_scenario
from joynr_sim.scenario.matrix import (
    ANY,
    FAIL,
    HOLD,
    all_ok,
    cell_of,
    check_matrix_target,
    expectation,
    junit_xml,
    matrix_document,
)
from joynr_sim.scenario.runner import RunResult, StepOutcome

GUARDED = """\
name: guarded
reproduces: {seed: 000_65e83c7f1cb84fd7.txt, scenario: s}
policy: precedence
guards: [last-writer-wins]
backends: [gbid1]
runtimes: [{id: cc1, kind: cluster-controller}]
steps:
  - register: {runtime: cc1, provider: p, domain: d, interface: joynrsim/Echo, participant_id: p1}
  - expect_route: {runtime: cc1, participant: p1, type: InProcess}
"""


def fake_result(policy: str, outcome: str, failed_at: int | None = None, name: str = "guarded") -> RunResult:
    """A run's result as the runner writes it, without running anything."""
    steps = [StepOutcome(0, "register", "register p", 8, "ok"),
             StepOutcome(1, "expect_route", "expect route p1 on cc1 = InProcess", 9, "ok")]
    if failed_at is not None:
        steps[failed_at].outcome, steps[failed_at].detail = "failed", "cc1 has a Mqtt route for p1"
    return RunResult(name, None, f"/runs/{policy}/{name}", f"{name}-{policy}", policy, "amqtt", 1,
                     {"seed": "000", "scenario": "s"}, outcome=outcome, complete=outcome != "error",
                     error="set-up failed: no broker" if outcome == "error" else "", steps=steps)


@pytest.fixture
def scenario():
    return parse_scenario(GUARDED)


def test_expectations_follow_own_policy_and_guards(scenario):
    assert expectation(scenario, "precedence") == HOLD
    assert expectation(scenario, "last-writer-wins") == FAIL
    assert expectation(scenario, "local-remote") == ANY
    assert expectation(scenario, "last-writer-wins", matrix=False) == HOLD  # a plain run must hold


def test_a_guard_that_holds_is_not_ok(scenario):
    """The failing case: the wrong rule set did not break the scenario."""
    held = cell_of(scenario, fake_result("last-writer-wins", "passed"))
    assert (held.expected, held.outcome, held.ok) == (FAIL, "held", False)
    broke = cell_of(scenario, fake_result("last-writer-wins", "failed", failed_at=1))
    assert broke.ok and broke.text().startswith("step 1 'expect route p1 on cc1 = InProcess'")


def test_own_policy_must_hold_and_errors_are_never_ok(scenario):
    assert cell_of(scenario, fake_result("precedence", "passed")).ok
    assert not cell_of(scenario, fake_result("precedence", "failed", failed_at=0)).ok
    errored = cell_of(scenario, fake_result("last-writer-wins", "error"))
    assert not errored.ok and errored.text().startswith("error: set-up failed")
    assert cell_of(scenario, fake_result("local-remote", "failed", failed_at=0)).ok  # not guarded: either


def test_checker_violations_fail_a_run_that_held(scenario):
    own = cell_of(scenario, fake_result("precedence", "passed"))
    own.add_violations(["routing-loop: message m to p1 looped: cc1 -> cc1"])
    assert not own.ok and own.text().startswith("1 checker violation: routing-loop")
    guard = cell_of(scenario, fake_result("last-writer-wins", "passed"))
    guard.add_violations(["overwrite-violation: p1"])
    assert guard.ok  # a violation is a failure, as the guard asks
    failed = cell_of(scenario, fake_result("last-writer-wins", "failed", failed_at=1))
    failed.add_violations(["routing-loop: x"])
    assert failed.text().startswith("step 1")  # the failed step stays the reason


def test_a_scenario_that_only_waits_is_flagged():
    waits = parse_scenario(GUARDED.replace(
        "  - expect_route: {runtime: cc1, participant: p1, type: InProcess}\n",
        "  - wait: {until: {route: {runtime: cc1, participant: p1, type: InProcess}}}\n"))
    assert not waits.checks
    cell = cell_of(waits, fake_result("precedence", "passed"))
    assert not cell.ok and cell.text() == "checks nothing"
    assert parse_scenario(GUARDED).checks


def test_matrix_json_and_junit(scenario, tmp_path: Path):
    cells = [cell_of(scenario, fake_result(p, o, f)) for p, o, f in (
        ("precedence", "passed", None), ("last-writer-wins", "passed", None), ("local-remote", "failed", 1))]
    assert not all_ok(cells)
    doc = matrix_document([scenario], ["precedence", "local-remote", "last-writer-wins"], cells, checked=False)
    row = doc["scenarios"][0]
    assert (doc["ok"], row["guards"], row["smoke"]) == (False, ["last-writer-wins"], None)
    assert row["cells"]["last-writer-wins"]["ok"] is False
    assert row["cells"]["precedence"]["expected"] == "hold"
    json.dumps(doc)  # plain JSON
    root = ElementTree.fromstring(junit_xml(cells, "joynr-sim matrix"))
    suite = root.find("testsuite")
    assert (suite.get("tests"), suite.get("failures"), suite.get("errors")) == ("3", "1", "0")
    failure = root.find(".//testcase[@name='last-writer-wins']/failure")
    assert "guards against" in failure.get("message")


def test_matrix_json_is_replaced_only_when_ours(tmp_path: Path):
    assert check_matrix_target(tmp_path) is None
    (tmp_path / "matrix.json").write_text('{"generator": "joynr-sim"}')
    assert check_matrix_target(tmp_path) is None
    (tmp_path / "matrix.json").write_text('{"mine": true}')
    assert "not written by joynr-sim" in check_matrix_target(tmp_path)
