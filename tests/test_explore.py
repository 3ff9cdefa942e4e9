"""joynr-sim explore: what counts as a failure, the command's refusals, the exploring loop
with stand-ins for runs and checks (batches, guards, confirmation, one finding per file),
and (e2e, Spark) runs on a real broker judged in one Spark job."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest
import yaml

from joynr_sim.cli import main
from joynr_sim.explore.generate import Generator
from joynr_sim.explore.runner import Explorer, judge
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
    (["--network", "wifi"], "--network 'wifi' is unknown; choose one of memory, amqtt, mosquitto"),
    (["--network", "amqtt", "--broker", "mosquitto"], "--network amqtt and --broker mosquitto disagree"),
    (["--network", "memory", "--broker", "mosquitto"], "--network memory has its own brokers"),
    (["--confirm", "memory"], "--confirm 'memory' is unknown; choose one of amqtt, mosquitto"),
    (["--batch", "0"], "--batch 0: from 1 to 256"),
])
def test_a_bad_option_is_one_line_and_exit_2(argv, problem, tmp_path, capsys) -> None:
    assert _cli(["explore", *argv, "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert problem in err and "Traceback" not in err
    assert not (tmp_path / "out").exists()


def test_the_default_shrink_budget_grows_with_the_exploration() -> None:
    from joynr_sim.explore.console import shrink_budget

    assert shrink_budget(2, None) == 60 and shrink_budget(4, None) == 120  # half a minute a run
    assert shrink_budget(1000, None) == 900  # at most 15 minutes
    assert shrink_budget(None, 600) == 300 and shrink_budget(None, 60) == 30  # half of --budget


def test_an_out_folder_of_someone_else_is_refused_and_left_alone(tmp_path, capsys) -> None:
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "thesis.tex").write_text("precious")
    assert main(["explore", "--runs", "1", "--out", str(mine)]) == 2
    assert "did not write" in capsys.readouterr().err
    assert [p.name for p in mine.iterdir()] == ["thesis.tex"]


# -- the exploration loop, with stand-ins for the runs and the checks ---------------------


def _fixed_holders(doc: dict) -> dict[str, set]:
    holders: dict[str, set] = {}
    for step in doc["steps"]:
        if "register" in step and "participant_id" in step["register"]:
            holders.setdefault(step["register"]["participant_id"], set()).add(step["register"]["runtime"])
    return holders


def _cc_of(doc: dict, runtime: str) -> str:
    return next(r.get("cc", r["id"]) for r in doc["runtimes"] if r["id"] == runtime)


def _step_outcomes(doc: dict, keep_going: bool) -> list[StepOutcome]:
    """As the stand-in carries a schedule out: a call on a LOCAL_ONLY proxy holds only when
    a provider was registered behind the proxy's cluster controller before the proxy was
    built, any other call when some provider was; every other step holds."""
    outcomes, registered, proxies, failed = [], [], {}, False
    for i, step in enumerate(doc["steps"]):
        ((kind, args),) = step.items()
        ok = True
        if kind == "register":
            registered.append(_cc_of(doc, args["runtime"]))
        elif kind == "proxy":
            cc = _cc_of(doc, args["runtime"])
            local = args.get("scope") == "LOCAL_ONLY"
            proxies[args["name"]] = cc in registered if local else bool(registered)
        elif kind in ("call", "one_way"):
            ok = proxies.get(args["proxy"], False)
        outcome = "skipped" if failed and not keep_going else "ok" if ok else "failed"
        failed |= outcome == "failed"
        outcomes.append(StepOutcome(i, kind, kind, i + 1, outcome, "" if ok else "timed out: no reply"))
    return outcomes


class OverwriteJudge:
    """Stands in for the Spark checks: a fixed participant id registered in two runtimes is
    an overwrite violation under any policy but precedence (read from what the stand-in run
    left in its run directory). Records what it was asked."""

    def __init__(self, kinds: tuple[str, ...] = ("should-refuse:precedence",)) -> None:
        self.kinds = kinds
        self.asked: list[tuple[int, list | None]] = []

    def violations_many(self, runs, names=None):
        self.asked.append((len(runs), names))
        out = []
        for run_dir, run_id in runs:
            ran = json.loads((Path(run_dir) / "ran.json").read_text())
            assert ran["run_id"] == run_id
            broken = ran["policy"] != "precedence" and any(len(h) > 1 for h in _fixed_holders(ran["doc"]).values())
            wanted = names is None or "overwrite-violation" in names
            out.append([("overwrite-violation", k, f"{run_id}: cc1 took it") for k in self.kinds]
                       if broken and wanted else [])
        return out


class StandIn(Explorer):
    """Runs nothing: each run directory holds what it was asked to run (``ran.json``)."""

    def __init__(self, out: Path, seed: int, judge: OverwriteJudge | None = None, **kw) -> None:
        kw.setdefault("policy", "last-writer-wins")
        kw.setdefault("network", "memory")
        super().__init__(out, seed=seed, checker=judge or OverwriteJudge(), **kw)
        self.jobs: list = []

    def execute(self, job):
        self.jobs.append(job)
        parse_scenario(yaml.safe_dump(job.doc, sort_keys=False))  # every run is a loadable scenario
        run_dir = job.where / job.doc["name"]
        assert job.where.name == "findings" or not run_dir.exists()  # only a finding's run is run again
        shutil.rmtree(run_dir, ignore_errors=True)
        run_dir.mkdir(parents=True)
        run_id = f"{job.doc['name']}-{len(self.jobs)}"
        network = job.network or self.network
        (run_dir / "ran.json").write_text(json.dumps({"doc": job.doc, "policy": job.policy, "run_id": run_id,
                                                      "network": network, "seed": job.seed}))
        steps = _step_outcomes(job.doc, job.keep_going)
        outcome = "failed" if any(s.outcome == "failed" for s in steps) else "passed"
        return _result(outcome=outcome, run_dir=str(run_dir), run_id=run_id, policy=job.policy, steps=steps)

    def drawn(self) -> list[dict]:
        return [j.doc for j in self.jobs if re.fullmatch(r"explore-\d+-\d+", j.doc["name"])]


def test_the_same_seed_runs_the_same_schedules_and_another_seed_others(tmp_path) -> None:
    runs = []
    for n, seed in enumerate((5, 5, 6)):
        explorer = StandIn(tmp_path / str(n), seed, shrink_tries=0)
        explorer.explore(runs=4)
        runs.append((explorer.drawn(), [j.seed for j in explorer.jobs[:4]]))
    assert runs[0] == runs[1] and len(runs[0][0]) == 4
    assert [d["steps"] for d in runs[0][0]] != [d["steps"] for d in runs[2][0]]


def test_runs_are_judged_in_batches_each_run_by_its_own_violations(tmp_path) -> None:
    judge = OverwriteJudge()
    explorer = StandIn(tmp_path / "out", 5, judge, batch=4, shrink_budget_s=0)
    summary = explorer.explore(runs=10)
    exploring = [a for a in judge.asked if a[1] is None]
    assert [n for n, _ in exploring] == [4, 4, 2] and summary.batches == 3
    broken = sum(any(len(h) > 1 for h in _fixed_holders(d).values()) for d in explorer.drawn())
    assert 0 < broken < 10 and summary.seen == {"overwrite-violation/should-refuse:precedence": broken}


def test_a_batch_grows_until_running_it_took_as_long_as_judging_the_last(tmp_path) -> None:
    memory = StandIn(tmp_path / "m", 1)
    assert memory._room(0, 0.0, 0.0) and memory._room(7, 0.0, 0.0) and not memory._room(8, 0.0, 0.0)
    assert memory._room(50, 10.0, 20.0) and not memory._room(50, 25.0, 20.0) and not memory._room(128, 1.0, 60.0)
    assert not StandIn(tmp_path / "r", 1, network="amqtt")._room(2, 0.0, 0.0)  # a real run costs seconds
    fixed = StandIn(tmp_path / "f", 1, batch=3)
    assert fixed._room(2, 99.0, 1.0) and not fixed._room(3, 0.0, 99.0)
    assert StandIn(tmp_path / "z", 1)._room(0, 5.0, 0.001)  # never an empty batch


def _guard_prone() -> dict:
    """A fixed id registered behind cc1 and behind cc2 (last-writer-wins takes the second),
    a LOCAL_ONLY proxy behind cc2 built before anything was registered there (its call fails
    under every policy) and a global proxy whose call holds, among steps that do not matter."""
    reg = lambda rt, name, **more: {"register": {"runtime": rt, "provider": name, "domain": "dom",  # noqa: E731
                                                 "interface": "joynrsim/Echo", **more}}
    proxy = lambda rt, name, scope: {"proxy": {"runtime": rt, "name": name, "domain": "dom",  # noqa: E731
                                               "interface": "joynrsim/Echo", "scope": scope}}
    call = lambda px: {"call": {"proxy": px, "method": "echo", "args": ["a"], "ttl_ms": 2000}}  # noqa: E731
    return {"name": "explore-9-0", "description": "x", "reproduces": {"seed": "explore", "scenario": "x"},
            "backends": ["gbid1", "gbid2"],
            "runtimes": [{"kind": "cluster-controller", "id": "cc1"}, {"kind": "cluster-controller", "id": "cc2"},
                         {"kind": "libjoynr", "id": "app1a", "cc": "cc1"}],
            "steps": [reg("cc1", "p1", participant_id="fixed-echo-1"), {"advance": 2000},
                      proxy("cc2", "pxl", "LOCAL_ONLY"), call("pxl"), reg("app1a", "p2"), {"crash_broker": "gbid2"},
                      reg("cc2", "p3", participant_id="fixed-echo-1"), call("pxl"), {"restart_broker": "gbid2"},
                      proxy("cc1", "pxg", "GLOBAL_ONLY"), {"advance": 500}, call("pxg"), {"restart": "app1a"},
                      call("pxg"), reg("app1a", "p4")],
            "policy": "last-writer-wins"}


class OneSchedule(Generator):
    def __init__(self, doc: dict) -> None:
        super().__init__()
        self.doc = doc

    def scenario(self, rng, name, policy=None):
        return {**self.doc, "name": name}


def test_a_policy_difference_shrinks_to_a_guard_that_holds_under_precedence(tmp_path) -> None:
    """Shrunk only while it fails, the schedule ends as the two registrations, the LOCAL_ONLY
    proxy and its call: a scenario that fails under precedence too and guards nothing. Shrunk
    while it keeps both sides, it keeps the global proxy's call instead."""
    explorer = StandIn(tmp_path / "out", 9, generator=OneSchedule(_guard_prone()), batch=8)
    (finding,) = explorer.explore(runs=1).findings
    assert finding.signature == ("overwrite-violation", "should-refuse:precedence")
    assert (finding.replayed, finding.reference, finding.guard) == ("fails", "held", True)
    small = parse_scenario(Path(finding.scenario_file).read_text())
    assert (small.policy, small.guards) == ("precedence", ("last-writer-wins",)) and small.checks
    kinds = [s.kind for s in small.steps]
    assert sorted(kinds) == ["call", "proxy", "register", "register"] and finding.steps_after == 4 <= 8
    assert next(s for s in small.steps if s.kind == "proxy").args["scope"] != "LOCAL_ONLY"
    # both sides, as the stand-in carries them out: every step holds under precedence
    doc = yaml.safe_load(Path(finding.scenario_file).read_text())
    assert all(s.outcome == "ok" for s in _step_outcomes(doc, keep_going=False))
    # every candidate ran under both policies, precedence first, judged together
    shrinking = [j for j in explorer.jobs if re.search(r"-c\d+$", j.doc["name"])]
    assert {j.policy for j in shrinking} == {"precedence", "last-writer-wins"}
    text = Path(finding.scenario_file).read_text()
    assert f"# Replay: joynr-sim run {finding.scenario_file} --policy last-writer-wins --network memory" in text
    assert "# Confirmed on a real broker: not confirmed (no --confirm)" in text


def test_a_difference_that_checks_nothing_gets_a_check_and_becomes_a_guard(tmp_path) -> None:
    doc = _guard_prone()
    doc["steps"] = [s for s in doc["steps"] if not {"call", "proxy"} & set(s)]
    explorer = StandIn(tmp_path / "out", 9, generator=OneSchedule(doc), batch=8)
    (finding,) = explorer.explore(runs=1).findings
    assert (finding.guard, finding.reference) == (True, "held") and finding.steps_after <= 4
    small = yaml.safe_load(Path(finding.scenario_file).read_text())
    assert [next(iter(s)) for s in small["steps"]][-2:] == ["proxy", "call"]


def test_the_shrink_ends_in_the_same_guard_whatever_the_batch(tmp_path) -> None:
    ends = []
    for batch in (1, 3, 32):
        explorer = StandIn(tmp_path / str(batch), 9, generator=OneSchedule(_guard_prone()), batch=batch)
        (finding,) = explorer.explore(runs=1).findings
        doc = yaml.safe_load(Path(finding.scenario_file).read_text())
        ends.append((doc["steps"], doc["runtimes"], doc["backends"], finding.steps_after))
    assert ends[0] == ends[1] == ends[2]


def test_a_difference_that_fails_under_precedence_too_is_written_under_its_policy(tmp_path) -> None:
    class Everywhere(OverwriteJudge):
        def violations_many(self, runs, names=None):
            found = super().violations_many(runs, names)
            return [v or [("lost-message", "lost-request", "x")] for v in found]

    explorer = StandIn(tmp_path / "out", 9, Everywhere(), generator=OneSchedule(_guard_prone()), batch=8)
    finding = next(f for f in explorer.explore(runs=1).findings if f.signature[0] == "overwrite-violation")
    assert not finding.guard and finding.reference.startswith("failed: ")
    assert parse_scenario(Path(finding.scenario_file).read_text()).policy == "last-writer-wins"


def test_a_check_that_faults_the_shrunk_guard_under_precedence_is_asked_in_the_next_round(tmp_path) -> None:
    """The precedence side of a candidate is judged by the signature's check only, until the
    minimal scenario, judged by every check, shows another one under precedence: here when
    nothing names app1a any more. The shrink then runs again asking that check too."""

    class Orphaned(OverwriteJudge):
        def violations_many(self, runs, names=None):
            found = super().violations_many(runs, names)
            for n, (run_dir, run_id) in enumerate(runs):
                ran = json.loads((Path(run_dir) / "ran.json").read_text())
                orphan = ran["policy"] == "precedence" and "app1a" not in json.dumps(ran["doc"]["steps"])
                if orphan and (names is None or "lost-message" in names):
                    found[n] = [*found[n], ("lost-message", "lost-request", f"{run_id}: nothing named app1a")]
            return found

    judge = Orphaned()
    explorer = StandIn(tmp_path / "out", 9, judge, generator=OneSchedule(_guard_prone()))
    (finding,) = explorer.explore(runs=1).findings
    assert (finding.guard, finding.reference) == (True, "held")
    assert "app1a" in json.dumps(yaml.safe_load(Path(finding.scenario_file).read_text())["steps"])
    asked = [names for _, names in judge.asked]
    assert ["overwrite-violation"] in asked and ["lost-message", "overwrite-violation"] in asked
    assert asked.index(["overwrite-violation"]) < asked.index(["lost-message", "overwrite-violation"])


def test_a_failure_found_after_the_shrink_budget_is_spent_is_written_as_drawn(tmp_path) -> None:
    explorer = StandIn(tmp_path / "out", 1, shrink_tries=100, shrink_budget_s=0, confirm="amqtt")
    (finding,) = explorer.explore(runs=30).findings
    assert (finding.shrink_runs, finding.replayed, finding.reference) == (0, "not run", "not run")
    assert finding.steps_after == finding.steps_before and finding.confirmed == "not confirmed"
    text = Path(finding.scenario_file).read_text()
    assert "not shrunk" in text and parse_scenario(text).policy == "last-writer-wins"
    assert [d["name"] for d in (j.doc for j in explorer.jobs)] == [f"explore-1-{n}" for n in range(30)]


def test_every_finding_is_confirmed_once_on_the_real_broker_named(tmp_path) -> None:
    class RealHolds(OverwriteJudge):  # the real broker's run does not show it
        def violations_many(self, runs, names=None):
            found = super().violations_many(runs, names)
            nets = [json.loads((Path(d) / "ran.json").read_text())["network"] for d, _ in runs]
            return [[] if net == "mosquitto" else v for v, net in zip(found, nets)]

    for double, said in ((OverwriteJudge(), "reproduced"), (RealHolds(), "held")):
        explorer = StandIn(tmp_path / said, 9, double, generator=OneSchedule(_guard_prone()), confirm="mosquitto")
        (finding,) = explorer.explore(runs=1).findings
        on_real = [j for j in explorer.jobs if j.network == "mosquitto"]
        assert sorted(j.policy for j in on_real) == ["last-writer-wins", "precedence"]  # once, both sides
        assert (finding.confirmed, finding.confirm_broker, finding.confirm_reference) == (said, "mosquitto", "held")
        assert f"# Confirmed on mosquitto: {said} (under precedence: held)" in Path(finding.scenario_file).read_text()
        data = json.loads((tmp_path / said / "explore.json").read_text())
        assert data["findings"][0]["confirmed"] == said


def test_failures_of_one_run_the_minimal_scenario_shows_too_are_one_finding(tmp_path) -> None:
    judge = OverwriteJudge(kinds=("should-refuse:precedence", "expiry-not-max"))
    explorer = StandIn(tmp_path / "out", 9, judge, generator=OneSchedule(_guard_prone()))
    summary = explorer.explore(runs=2)
    (finding,) = summary.findings
    assert finding.signature == ("overwrite-violation", "expiry-not-max")
    assert finding.also == ["overwrite-violation/should-refuse:precedence"]
    assert [p.name for p in (tmp_path / "out" / "findings").glob("*.yaml")] == [Path(finding.scenario_file).name]
    assert summary.seen == {"overwrite-violation/expiry-not-max": 2, "overwrite-violation/should-refuse:precedence": 2}


def test_a_finding_file_is_never_written_twice(tmp_path) -> None:
    from joynr_sim.explore.findings import claim_path

    long = ("overwrite-violation", "should-refuse:precedence,expiry-not-max,sticky-lost,visible-not-offered")
    paths = [claim_path(tmp_path, "explore-5-", long), claim_path(tmp_path, "explore-5-", long),
             claim_path(tmp_path, "explore-5-", (long[0], long[1] + ",old-not-held"))]
    assert len(set(paths)) == 3 and all(p.exists() and len(p.stem) <= 64 for p in paths)
    (tmp_path / "explore-5-x").mkdir()  # a run directory of that name is taken too
    assert claim_path(tmp_path, "explore-5-", ("x", "")).name == "explore-5-x-2.yaml"


# -- real runs: on the memory network with a judge that reads the traces, on amqtt with Spark


def _probe(name: str, *extra: dict) -> dict:
    """A fixed id registered in cc1 and then in cc2 (last-writer-wins takes the second: the
    overwrite check's should-refuse), a global proxy's call that holds under precedence,
    and steps that do not matter."""
    reg = lambda rt, p, **more: {"register": {"runtime": rt, "provider": p, "domain": "dom",  # noqa: E731
                                              "interface": "joynrsim/Echo", "scope": "GLOBAL", **more}}
    return {"name": name, "reproduces": {"seed": "explore", "scenario": "x"}, "backends": ["gbid1"],
            "runtimes": [{"kind": "cluster-controller", "id": "cc1"}, {"kind": "cluster-controller", "id": "cc2"},
                         {"kind": "libjoynr", "id": "app2a", "cc": "cc2"}],
            "steps": [reg("cc1", "p1", participant_id="fixed-echo-1"), {"advance": 2000},
                      {**reg("app2a", "p2")}, *extra,
                      reg("cc2", "p3", participant_id="fixed-echo-1"),
                      {"proxy": {"runtime": "cc1", "name": "pxg", "domain": "dom", "interface": "joynrsim/Echo",
                                 "scope": "GLOBAL_ONLY"}},
                      {"call": {"proxy": "pxg", "method": "echo", "args": ["b"], "ttl_ms": 2000}}]}


class TraceJudge:
    """Stands in for the Spark checks on real runs: a fixed participant id that two cluster
    controllers registered, under a policy other than precedence, is an overwrite violation
    (read from the trace's lcd.register events)."""

    def __init__(self) -> None:
        self.asked: list[int] = []

    def violations_many(self, runs, names=None):
        self.asked.append(len(runs))
        out = []
        for run_dir, run_id in runs:
            policy = json.loads((Path(run_dir) / "run.json").read_text())["policy"]
            holders: dict[str, set] = {}
            for path in (Path(run_dir) / "trace").glob("*.ndjson"):
                for line in path.read_text().splitlines():
                    ev = json.loads(line)
                    if ev.get("ev") == "lcd.register" and ev["participant"].startswith("fixed") and not ev["error"]:
                        assert ev["run"] == run_id
                        holders.setdefault(ev["participant"], set()).add(ev["rt"])
            broken = policy != "precedence" and any(len(h) > 1 for h in holders.values())
            out.append([("overwrite-violation", "should-refuse:precedence", "two holders")] if broken else [])
        return out


def _memory_network() -> bool:
    import inspect

    from joynr_sim.scenario.runner import run_scenario

    return "network" in inspect.signature(run_scenario).parameters


@pytest.mark.skipif(not _memory_network(), reason="run_scenario has no network yet")
def test_on_the_memory_network_a_difference_shrinks_to_a_guard_that_replays_from_its_seed(tmp_path) -> None:
    noise = {"proxy": {"runtime": "app2a", "name": "pxl", "domain": "dom", "interface": "joynrsim/Echo",
                       "scope": "LOCAL_ONLY"}}
    judge = TraceJudge()
    explorer = Explorer(tmp_path / "out", policy="last-writer-wins", seed=2, checker=judge, network="memory",
                        generator=OneSchedule(_probe("x", noise, {"call": {"proxy": "pxl", "method": "echo"}})),
                        shrink_tries=40)
    (finding,) = explorer.explore(runs=1).findings
    assert (finding.replayed, finding.reference, finding.guard, finding.network) == ("fails", "held", True, "memory")
    assert finding.steps_after <= 5 < finding.steps_before
    small = parse_scenario(Path(finding.scenario_file).read_text())
    assert (small.policy, small.guards) == ("precedence", ("last-writer-wins",))
    # the same seed replays the same run, byte for byte
    again, _ = explorer.run_doc(yaml.safe_load(Path(finding.scenario_file).read_text()), tmp_path / "again",
                                seed=finding.run_seed)
    traces = sorted(p.name for p in (Path(finding.run_dir) / "trace").glob("*.ndjson"))
    assert traces and traces == sorted(p.name for p in (Path(again.run_dir) / "trace").glob("*.ndjson"))
    for name in traces:
        first, second = (Path(d) / "trace" / name for d in (finding.run_dir, again.run_dir))
        assert first.read_bytes() == second.read_bytes()
    explorer.close()


@pytest.mark.skipif(not _memory_network(), reason="run_scenario has no network yet")
def test_a_memory_run_that_does_not_end_in_time_is_a_hang_and_the_next_run_gets_a_new_worker(tmp_path) -> None:
    from joynr_sim.explore.runner import Job
    from joynr_sim.explore.worker import Worker

    explorer = Explorer(tmp_path / "out", policy="precedence", seed=2, checker=None, network="memory")
    explorer._worker = Worker(hang_s=0.01)  # not even the worker's start fits in 10 ms
    hung = explorer.execute(Job(_probe("hangs"), tmp_path / "a", "precedence", seed=1))
    assert (hung.outcome, hung.error) == ("error", "hung: the run did not end within 0.01 s")
    assert judge(hung, []).signatures == {("run-error", "hung")} and explorer._worker.hangs == 1
    explorer._worker.hang_s = 60
    again = explorer.execute(Job(_probe("ends"), tmp_path / "b", "precedence", seed=1))
    explorer.close()
    assert again.outcome == "passed", [s.detail for s in again.steps]


def _two_schedules(rng, name, policy=None):
    """Run 0 breaks last-writer-wins, run 1 is clean: one Spark job must keep them apart.
    Run 0: a provider registered globally in a libjoynr runtime and a GLOBAL_ONLY proxy in the
    same runtime, whose lookup replaces the provider's InProcess entry there by a route to its
    cluster controller under last-writer-wins (precedence refuses it). Run 1: the proxy is
    built in the cluster controller instead."""
    where = "app2a" if name.endswith("-0") else "cc2"
    return {"name": name, "reproduces": {"seed": "explore", "scenario": "x"}, "backends": ["gbid1"],
            "runtimes": [{"kind": "cluster-controller", "id": "cc2"}, {"kind": "libjoynr", "id": "app2a", "cc": "cc2"}],
            "steps": [{"register": {"runtime": "app2a", "provider": "p", "domain": "dom", "interface": "joynrsim/Echo",
                                    "scope": "GLOBAL"}},
                      {"proxy": {"runtime": where, "name": "px", "domain": "dom", "interface": "joynrsim/Echo",
                                 "scope": "GLOBAL_ONLY"}},
                      {"call": {"proxy": "px", "method": "echo", "args": ["b"], "ttl_ms": 2000}}],
            "policy": policy}


@pytest.mark.e2e
@pytest.mark.spark
def test_runs_on_amqtt_are_judged_in_one_spark_job_each_by_its_own_violations(tmp_path) -> None:
    from joynr_sim.explore.runner import Checker

    class Counting(Checker):
        def violations_many(self, runs, names=None):
            self.batches = getattr(self, "batches", []) + [len(runs)]
            return super().violations_many(runs, names)

    gen = Generator()
    gen.scenario = _two_schedules
    checker = Counting(tmp_path / "spark")
    try:
        explorer = Explorer(tmp_path / "out", policy="last-writer-wins", seed=3, checker=checker, network="amqtt",
                            generator=gen, batch=2, shrink_budget_s=0)
        summary = explorer.explore(runs=2)
    finally:
        checker.close()
    assert checker.batches == [2] and summary.batches == 1
    overwrite = [k for k in summary.seen if k.startswith("overwrite-violation/")]
    assert overwrite and all(summary.seen[k] == 1 for k in overwrite), summary.seen  # run 0's, not run 1's
    # every failure of run 0, written as drawn: one scenario, so one file
    (finding,) = summary.findings
    assert set(overwrite) <= {"/".join(finding.signature), *finding.also}
    assert (finding.run_index, finding.replayed, finding.network) == (0, "not run", "amqtt")
    text = Path(finding.scenario_file).read_text()
    assert text.startswith("# joynr-sim explore --seed 3 --policy last-writer-wins --network amqtt, run 0")
    assert parse_scenario(text).policy == "last-writer-wins"
    assert json.loads((tmp_path / "out" / "explore.json").read_text())["runs"] == 2


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
