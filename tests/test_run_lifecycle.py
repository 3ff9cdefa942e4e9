"""A run's lifecycle: its directory is private and replaced only when joynr-sim wrote it,
its run.json is complete or says it is not, an unexpected error keeps its traceback, and
closing a simulation stops every part of it even when one part fails to stop."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

import pytest

from joynr_sim.scenario import parse_scenario
from joynr_sim.scenario.rundir import RunDirError, claim_run_dir
from joynr_sim.scenario.runner import run_scenario
from joynr_sim.scenario.steps import ScenarioRunner
from joynr_sim.simulation import Simulation
from joynr_sim.trace import read_events

SCENARIO = """\
name: two-steps
reproduces: {seed: 000_65e83c7f1cb84fd7.txt, scenario: "A provider registers locally"}
backends: [gbid1]
runtimes:
  - {id: cc1, kind: cluster-controller}
steps:
  - register: {runtime: cc1, provider: p, domain: d, interface: joynrsim/Echo, scope: LOCAL}
  - expect_route: {runtime: cc1, participant: "@p", type: InProcess}
"""


def manifest(run_dir: str | Path) -> dict:
    return json.loads((Path(run_dir) / "run.json").read_text())


# -- the run directory ------------------------------------------------------------------


def test_replacing_a_run_directory_never_follows_a_link_out_of_it(tmp_path: Path) -> None:
    users = tmp_path / "users-data"
    users.mkdir()
    (users / "keep.txt").write_text("keep")
    own = tmp_path / "runs" / "two-steps"
    own.mkdir(parents=True)
    (own / "run.json").write_text(json.dumps({"generator": "joynr-sim", "run_id": "old"}))
    (own / "trace").mkdir()
    (own / "trace" / "link").symlink_to(users, target_is_directory=True)
    run_dir = claim_run_dir(tmp_path / "runs", "two-steps")
    assert run_dir == own and list(own.iterdir()) == []
    assert own.stat().st_mode & 0o777 == 0o700
    assert (users / "keep.txt").read_text() == "keep"


def test_a_run_directory_holding_what_joynr_sim_did_not_write_is_left_as_it_is(tmp_path: Path) -> None:
    own = tmp_path / "runs" / "two-steps"
    (own / "trace").mkdir(parents=True)
    (own / "run.json").write_text(json.dumps({"generator": "joynr-sim", "run_id": "old"}))
    (own / "trace" / "cc1.ndjson").write_text("{}\n")
    (own / "notes.txt").write_text("what I saw")
    (own / "analysis").mkdir()
    with pytest.raises(RunDirError, match=r"did not write \('analysis', 'notes.txt'\)"):
        claim_run_dir(tmp_path / "runs", "two-steps")
    assert sorted(p.name for p in own.iterdir()) == ["analysis", "notes.txt", "run.json", "trace"]
    assert (own / "notes.txt").read_text() == "what I saw"
    (own / "notes.txt").unlink()
    (own / "analysis").rmdir()
    (own / "check").mkdir()  # the checker's and the report's output are joynr-sim's own
    (own / "gcd.sqlite").write_text("")
    assert claim_run_dir(tmp_path / "runs", "two-steps") == own and list(own.iterdir()) == []


def test_a_link_in_place_of_the_run_directory_is_refused(tmp_path: Path) -> None:
    users = tmp_path / "users-data"
    users.mkdir()
    (users / "run.json").write_text(json.dumps({"generator": "joynr-sim", "run_id": "looks-like-ours"}))
    (tmp_path / "runs").mkdir()
    (tmp_path / "runs" / "two-steps").symlink_to(users, target_is_directory=True)
    with pytest.raises(RunDirError, match="symbolic link"):
        claim_run_dir(tmp_path / "runs", "two-steps")
    assert [p.name for p in users.iterdir()] == ["run.json"]


@pytest.mark.parametrize("name", ["", ".", "..", "a/b"])
def test_a_name_that_is_not_one_folder_is_refused(tmp_path: Path, name: str) -> None:
    with pytest.raises(RunDirError, match="cannot name a run directory"):
        claim_run_dir(tmp_path, name)


def test_a_simulation_makes_its_run_directory_private(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        sim = Simulation(tmp_path / "sim", gbids=["gbid1"])
    finally:
        os.umask(old)
    assert sim.run_dir.stat().st_mode & 0o777 == 0o700


# -- run.json: complete, or marked incomplete with the error ----------------------------


async def test_an_unexpected_set_up_error_is_recorded_with_its_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def start(self) -> None:
        raise TypeError("a bug in setting up")

    monkeypatch.setattr(Simulation, "start", start)
    result = await run_scenario(parse_scenario(SCENARIO), tmp_path)
    data = manifest(result.run_dir)
    assert data["outcome"] == "error" and data["complete"] is False
    assert data["error"] == "set-up failed: TypeError: a bug in setting up"
    assert "Traceback" in data["traceback"] and "a bug in setting up" in data["traceback"]
    assert [s["outcome"] for s in data["steps"]] == ["skipped", "skipped"]


@pytest.mark.e2e
async def test_a_step_that_raises_unexpectedly_keeps_its_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def broken_step(self, args) -> None:
        raise KeyError("no such thing")

    monkeypatch.setattr(ScenarioRunner, "_step_expect_route", broken_step)
    result = await run_scenario(parse_scenario(SCENARIO), tmp_path)
    assert result.outcome == "failed"
    data = manifest(result.run_dir)
    assert data["complete"] is True
    step = data["steps"][1]
    assert step["outcome"] == "failed" and step["detail"] == "KeyError: 'no such thing'"
    assert "Traceback" in step["traceback"] and "in broken_step" in step["traceback"]
    assert data["steps"][0]["traceback"] == ""


@pytest.mark.e2e
async def test_an_interrupted_run_is_marked_incomplete_and_torn_down(tmp_path: Path) -> None:
    task: asyncio.Task | None = None

    def interrupt(outcome) -> None:
        assert task is not None
        task.cancel()  # what asyncio.run does to the run on Ctrl-C

    # The advance step yields to the loop, where the cancellation arrives.
    text = SCENARIO.replace("  - expect_route", "  - advance: 1\n  - expect_route")
    task = asyncio.ensure_future(run_scenario(parse_scenario(text), tmp_path, on_step=interrupt))
    with pytest.raises(asyncio.CancelledError):
        await task
    run_dir = tmp_path / "two-steps"
    data = manifest(run_dir)
    assert data["outcome"] == "error" and data["complete"] is False and data["error"] == "interrupted"
    assert [s["outcome"] for s in data["steps"]] == ["ok", "skipped", "skipped"]
    stopped = {e["target"] for f in (run_dir / "trace").glob("*.ndjson") for e in read_events(f)
               if e["ev"] == "life.stop"}
    assert {"cc1", "gcd-gbid1", "broker-gbid1"} <= stopped


# -- closing a simulation -----------------------------------------------------------------


class StopFails:
    """A runtime whose graceful stop raises."""

    def __init__(self, runtime_id: str, kind: str, error: Exception) -> None:
        self.runtime_id, self.kind, self.error = runtime_id, kind, error
        self.running, self.closed = True, False

    async def stop(self) -> None:
        raise self.error

    def close(self) -> None:
        self.closed = True


async def test_a_cancellation_while_closing_is_raised_over_an_error_that_came_before_it(tmp_path: Path) -> None:
    # Ctrl-C while closing after a runtime failed to stop: the run was interrupted, and its
    # runner must see the cancellation, not the stop's error with the cancellation as a note.
    sim = Simulation(tmp_path / "run", gbids=["gbid1"], processes=False)
    sim.runtimes["broken-lib"] = StopFails("broken-lib", "libjoynr", RuntimeError("stop failed on purpose"))

    async def interrupted() -> None:
        raise asyncio.CancelledError

    sim.brokers.stop = interrupted
    with pytest.raises(asyncio.CancelledError) as err:
        await sim.close()
    assert any("RuntimeError: stop failed on purpose" in note for note in err.value.__notes__)


@pytest.mark.e2e
async def test_close_stops_everything_even_when_runtimes_fail_to_stop(tmp_path: Path) -> None:
    sim = Simulation(tmp_path / "run", gbids=["gbid1", "gbid2"])
    await sim.start()
    cc = await sim.cluster_controller("cc1")
    await sim.libjoynr("app1", cc)
    first = StopFails("broken-lib", "libjoynr", RuntimeError("stop failed on purpose"))
    second = StopFails("broken-cc", "cluster-controller", ValueError("this one too"))
    sim.runtimes[first.runtime_id] = first
    sim.runtimes[second.runtime_id] = second
    pids = [sim.brokers.pid(g) for g in sim.gbids]
    assert all(pids)

    with pytest.raises(RuntimeError, match="stop failed on purpose") as err:
        await sim.close()

    assert any("ValueError: this one too" in note for note in err.value.__notes__)
    assert first.closed and second.closed
    real = [r for r in sim.runtimes.values() if not isinstance(r, StopFails)]
    assert {r.runtime_id for r in real} == {"cc1", "app1", "gcd-gbid1", "gcd-gbid2"}
    assert not any(r.running for r in real)
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
