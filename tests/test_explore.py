"""joynr-sim explore: what counts as a failure, the command's refusals, and (e2e, Spark) a
broken policy found and shrunk on real brokers."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
import yaml

from joynr_sim.cli import main
from joynr_sim.explore.generate import Generator, StepKind
from joynr_sim.explore.runner import Explorer, Judgement, judge
from joynr_sim.scenario.loader import parse_scenario
from joynr_sim.scenario.runner import RunResult, StepOutcome


def _result(**kw) -> RunResult:
    r = RunResult("s", None, "/tmp/x", "s-1", "precedence", "amqtt", 1, {"seed": "explore", "scenario": "x"})
    for k, v in kw.items():
        setattr(r, k, v)
    return r


def test_a_joynr_error_of_a_step_is_an_outcome_not_a_failure() -> None:
    step = StepOutcome(0, "call", "call px.echo", 3, "failed", "timed out: no reply")
    assert judge(_result(outcome="failed", steps=[step]), []).signatures == set()


def test_violations_unexpected_errors_and_run_errors_are_failures() -> None:
    crashed = StepOutcome(1, "restart", "restart app1", 4, "failed", "RemoteError: KeyError: 'x'", traceback="tb")
    verdict = judge(_result(outcome="error", error="teardown: OSError: gone", steps=[crashed]),
                    [("routing-loop", "loop", "cc1 -> app1 -> cc1")])
    assert verdict.signatures == {("run-error", "teardown"), ("step-error", "KeyError"), ("routing-loop", "loop")}
    assert any("cc1 -> app1 -> cc1" in d for d in verdict.details)


def _cli(argv: list[str]) -> int:
    try:
        return main(argv)
    except SystemExit as exc:  # argparse's usage errors
        return int(exc.code)


@pytest.mark.parametrize("argv, problem", [
    (["--policy", "nonsense"], "--policy 'nonsense' is unknown"),
    (["--runs", "0"], "--runs 0"),
    (["--budget", "ten minutes"], "--budget"),
    (["--runs", "1", "--budget", "1m"], "not allowed with"),
])
def test_a_bad_option_is_one_line_and_exit_2(argv, problem, tmp_path, capsys) -> None:
    assert _cli(["explore", *argv, "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert problem in err and "Traceback" not in err
    assert not (tmp_path / "out").exists()


def test_an_out_folder_of_someone_else_is_refused_and_left_alone(tmp_path, capsys) -> None:
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "thesis.tex").write_text("precious")
    assert main(["explore", "--runs", "1", "--out", str(mine)]) == 2
    assert "did not write" in capsys.readouterr().err
    assert [p.name for p in mine.iterdir()] == ["thesis.tex"]


# -- the exploration loop, with a stand-in for runs and checks ---------------------------


class _Broken(Explorer):
    """Runs nothing: a schedule 'fails' as last-writer-wins does under the overwrite check
    when one fixed participant id is registered in two runtimes; under precedence it holds."""

    def __init__(self, out: Path, seed: int, **kw) -> None:
        super().__init__(out, policy="last-writer-wins", broker="amqtt", seed=seed, checker=None, **kw)
        self.docs: list[dict] = []
        self.asked: list = []

    def run_doc(self, doc, where, *, policy=None, checks=None, keep_going=True):
        self.docs.append(doc)
        self.asked.append(checks)
        parse_scenario(yaml.safe_dump(doc, sort_keys=False))  # every run is a loadable scenario
        holders: dict[str, set] = {}
        for step in doc["steps"]:
            if "register" in step and "participant_id" in step["register"]:
                holders.setdefault(step["register"]["participant_id"], set()).add(step["register"]["runtime"])
        broken = policy != "precedence" and any(len(h) > 1 for h in holders.values())
        where.mkdir(parents=True, exist_ok=True)
        run_dir = where / f"{doc['name']}-{len(self.docs)}"
        run_dir.mkdir()
        result = _result(outcome="passed", run_dir=str(run_dir))
        sig = {("overwrite-violation", "should-refuse:precedence")} if broken else set()
        return result, Judgement(sig, ["overwrite-violation/should-refuse:precedence: cc1 took it"] if broken else [])


def test_the_same_seed_runs_the_same_schedules_and_another_seed_others(tmp_path) -> None:
    runs = []
    for n, seed in enumerate((5, 5, 6)):
        explorer = _Broken(tmp_path / str(n), seed, shrink_tries=0)
        explorer.explore(runs=4)
        runs.append([d for d in explorer.docs if d["name"].startswith("explore-") and d["name"][-1].isdigit()][:4])
    assert runs[0] == runs[1] and len(runs[0]) == 4
    assert [d["steps"] for d in runs[0]] != [d["steps"] for d in runs[2]]


def test_a_broken_policy_is_found_shrunk_to_a_few_steps_and_written_as_a_guard(tmp_path) -> None:
    explorer = _Broken(tmp_path / "out", 5, shrink_tries=100)  # its first failing schedule has calls
    summary = explorer.explore(runs=30)
    assert summary.first_finding_s is not None
    (finding,) = summary.findings
    assert finding.signature == ("overwrite-violation", "should-refuse:precedence")
    # the two registrations, and a proxy and its call: the finding must check something to hold
    assert finding.steps_after == 4 < finding.steps_before and finding.shrink_runs <= 100
    assert (finding.replayed, finding.reference) == ("fails", "held")
    text = Path(finding.scenario_file).read_text()
    scenario = parse_scenario(text)
    assert scenario.policy == "precedence" and scenario.guards == ("last-writer-wins",) and scenario.checks
    assert f"# Replay: joynr-sim run {finding.scenario_file} --policy last-writer-wins --check" in text
    # the shrink asked only the check whose violation it keeps; the finding's own run asked every check
    shrinking = explorer.asked[finding.run_index + 1:finding.run_index + 1 + finding.shrink_runs]
    assert shrinking and all(c == ["overwrite-violation"] for c in shrinking)
    data = json.loads((tmp_path / "out" / "explore.json").read_text())
    assert data["findings"][0]["steps_after"] == 4 and data["first_finding_s"] is not None


def test_a_failure_found_after_the_shrink_budget_is_spent_is_written_as_drawn(tmp_path) -> None:
    explorer = _Broken(tmp_path / "out", 1, shrink_tries=100, shrink_budget_s=0)
    (finding,) = explorer.explore(runs=30).findings
    assert (finding.shrink_runs, finding.replayed, finding.reference) == (0, "not run", "not run")
    assert finding.steps_after == finding.steps_before
    text = Path(finding.scenario_file).read_text()
    assert "not shrunk" in text and parse_scenario(text).policy == "last-writer-wins"
    assert [d["name"] for d in explorer.docs] == [f"explore-1-{n}" for n in range(30)]  # no shrink, no replay


def test_two_kinds_of_one_check_cut_to_the_same_name_get_two_files(tmp_path) -> None:
    long = "should-refuse:precedence,expiry-not-max,sticky-lost,visible-not-offered"

    class TwoKinds(_Broken):
        def run_doc(self, doc, where, **kw):
            result, verdict = super().run_doc(doc, where, **kw)
            if verdict.signatures:
                verdict.signatures = {("overwrite-violation", long), ("overwrite-violation", long + ",old-not-held")}
            return result, verdict

    summary = TwoKinds(tmp_path / "out", 5, shrink_tries=2).explore(runs=1)
    files = {f.scenario_file for f in summary.findings}
    assert len(summary.findings) == len(files) == 2
    assert all(parse_scenario(Path(f).read_text()) for f in files)  # names within the format's 64 characters


# -- on real brokers, judged by Spark -------------------------------------------------------


def _overwrite_prone(rng: random.Random, w) -> dict | None:
    """A provider with a fixed id registered again on another runtime: the conflict the
    routing rules decide (precedence refuses what last-writer-wins takes)."""
    hosts = [rt for rt in w.runtimes if w.usable(rt)]
    if len(hosts) < 2:
        return None
    name = w.name("prov")
    rt = rng.choice(hosts)
    w.providers[name] = (rt, "fixed-echo-1", w.epoch[rt])
    return {"register": {"runtime": rt, "provider": name, "domain": "dom", "interface": "joynrsim/Echo",
                         "participant_id": "fixed-echo-1", "scope": "GLOBAL"}}


class _Checker:
    def __init__(self, spark_checker) -> None:
        self.inner = spark_checker
        self.calls = 0

    def violations(self, run_dir: Path, names=None):
        self.calls += 1
        return self.inner.violations(run_dir, names)


@pytest.mark.e2e
@pytest.mark.spark
def test_a_broken_policy_is_found_shrunk_and_the_minimal_scenario_replays(tmp_path) -> None:
    from joynr_sim.explore.runner import Checker

    gen = Generator(min_steps=6, max_steps=8, extra_kinds=[StepKind("re-register", 12, _overwrite_prone)])
    checker = Checker(tmp_path / "spark")
    try:
        explorer = Explorer(tmp_path / "out", policy="last-writer-wins", broker="amqtt", seed=3,
                            checker=_Checker(checker), generator=gen, shrink_tries=6)
        summary = explorer.explore(runs=2)
    finally:
        checker.close()
    assert summary.findings, summary.seen
    finding = next(f for f in summary.findings if f.signature[0] == "overwrite-violation")
    assert finding.steps_after <= finding.steps_before and finding.steps_after <= 8
    text = Path(finding.scenario_file).read_text()
    assert text.startswith("# joynr-sim explore --seed 3 --policy last-writer-wins")
    scenario = parse_scenario(text)  # replayable as a library scenario
    if finding.reference == "held":  # as it must: the conflict precedence refuses
        assert (scenario.policy, scenario.guards) == ("precedence", ("last-writer-wins",))
    else:
        assert scenario.policy == "last-writer-wins", finding.reference
    assert (Path(finding.run_dir) / "checker.txt").read_text().count("overwrite-violation") >= 1
    data = json.loads((tmp_path / "out" / "explore.json").read_text())
    assert data["runs"] == 2 and data["findings"][0]["signature"]
    assert yaml.safe_load(text)["steps"]


@pytest.mark.e2e
async def test_a_run_that_keeps_going_records_failed_steps_and_runs_the_rest(tmp_path) -> None:
    from joynr_sim.scenario.runner import run_scenario

    scenario = parse_scenario(yaml.safe_dump({
        "name": "keeps-going", "reproduces": {"seed": "explore", "scenario": "x"}, "backends": ["gbid1"],
        "runtimes": [{"kind": "cluster-controller", "id": "cc1"}],
        "steps": [
            {"proxy": {"runtime": "cc1", "name": "px", "domain": "d", "interface": "joynrsim/Echo",
                       "scope": "LOCAL_ONLY"}},
            {"call": {"proxy": "px", "method": "echo", "args": ["a"]}},
            {"register": {"runtime": "cc1", "provider": "p", "domain": "d", "interface": "joynrsim/Echo",
                          "scope": "LOCAL"}},
        ],
    }))
    result = await run_scenario(scenario, tmp_path, keep_going=True)
    assert [s.outcome for s in result.steps] == ["failed", "failed", "ok"]
    assert "its proxy step failed" in result.steps[1].detail and not result.steps[1].traceback
    stopped = await run_scenario(scenario, tmp_path / "again")
    assert [s.outcome for s in stopped.steps] == ["failed", "skipped", "skipped"]
