"""explore in a terminal: one shrink per run whatever failures it showed together, a shrink
budget in proportion to the exploration and its bound said before anything runs, and a
closing table that fits 80 columns."""

from __future__ import annotations

import json
from pathlib import Path

from rich.console import Console

from joynr_sim.explore.console import expected_bound_s, findings_table, shrink_budget
from test_explore import OneSchedule, OverwriteJudge, StandIn, _guard_prone


class TwoFailures(OverwriteJudge):
    """The overwrite violation of the stand-in, and a lost request of every run under the
    explored policy whose schedule crashes a broker: two failures of one run that hang on
    different steps."""

    def violations_many(self, runs, names=None):
        found = super().violations_many(runs, names)
        for n, (run_dir, run_id) in enumerate(runs):
            ran = json.loads((Path(run_dir) / "ran.json").read_text())
            crashes = any("crash_broker" in s for s in ran["doc"]["steps"])
            if ran["policy"] != "precedence" and crashes and (names is None or "lost-message" in names):
                found[n] = [*found[n], ("lost-message", "lost-request", f"{run_id}: the broker crashed")]
        return found


def test_the_failures_of_one_run_are_shrunk_once_into_one_file(tmp_path) -> None:
    explorer = StandIn(tmp_path / "out", 9, TwoFailures(), generator=OneSchedule(_guard_prone()), batch=8)
    summary = explorer.explore(runs=1)
    (finding,) = summary.findings
    assert finding.signature == ("lost-message", "lost-request")
    assert finding.also == ["overwrite-violation/should-refuse:precedence"]
    assert [p.name for p in (tmp_path / "out" / "findings").glob("*.yaml")] == [Path(finding.scenario_file).name]
    assert "crash_broker" in Path(finding.scenario_file).read_text()
    # every candidate of the shrink was asked for both failures' checks
    shrinking = [j for j in explorer.jobs if j.doc["name"].rsplit("-", 1)[-1].startswith("c")
                 and j.policy == "last-writer-wins"]
    assert shrinking and all(j.checks == ["lost-message", "overwrite-violation"] for j in shrinking)


def test_the_shrink_budget_and_the_bound_follow_runs_and_budget() -> None:
    assert shrink_budget(2, None) < shrink_budget(20, None) <= 15 * 60
    assert shrink_budget(2, None) <= 60  # two runs: a minute of shrinking, not two
    assert shrink_budget(None, 120) == 60
    two = expected_bound_s(2, None, shrink_budget(2, None))
    assert two <= 5 * 60  # a two-run exploration ends within a few minutes
    assert expected_bound_s(None, 600, 300) == 600 + 300 + expected_bound_s(None, 0, 0)


def test_explore_announces_its_bound_before_it_runs(tmp_path, capsys, monkeypatch) -> None:
    import joynr_sim.explore.console as console_mod
    from analytics.session import SparkStartError

    def refuse(*_a, **_kw):
        raise SparkStartError("no Spark here")

    monkeypatch.setattr(console_mod, "_checker", refuse)
    from joynr_sim.cli import main

    assert main(["explore", "--runs", "2", "--out", str(tmp_path / "x")]) == 3
    out = " ".join(capsys.readouterr().out.split())
    assert "exploring 2 runs" in out and "shrinking at most 1 min" in out and "ends within about" in out


def test_the_closing_table_fits_80_columns(tmp_path) -> None:
    explorer = StandIn(tmp_path / "out", 9, TwoFailures(), generator=OneSchedule(_guard_prone()), batch=8)
    summary = explorer.explore(runs=1)
    console = Console(width=80, record=True, color_system=None)
    console.print(findings_table(summary, "memory"))
    lines = console.export_text().splitlines()
    assert lines and max(map(len, lines)) <= 80
    text = "\n".join(lines)
    # the signatures break between check and kind, never inside a word
    for word in ("lost-message/", "lost-request", "+ overwrite-violation/", "should-refuse:precedence"):
        assert word in text
    assert Path(summary.findings[0].scenario_file).name[:30] in text
