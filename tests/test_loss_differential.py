"""One truth about loss: the harness (``joynr_sim.loss``, behind ``await_calls``) and the
Spark ``lost-message`` check implement ``trace_schema/loss.json`` apart, and give the same
verdict (answered, explained and by what, unexplained) on every request of the same traces:
the whole scenario library as it runs, and every copy of three of its runs with a single
``msg.in`` or ``msg.deliver`` deleted. A planted disagreement is reported, naming the
message and each side's verdict."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from analytics.checks.lost_message import verdicts_of_runs
from joynr_sim import loss
from joynr_sim.cli import main
from joynr_sim.trace import read_run

pytestmark = [pytest.mark.e2e, pytest.mark.spark]

LIBRARY = Path(__file__).resolve().parent.parent / "scenarios"
# Runs whose messages cross crashes, partitions and restarts: the deletions' material.
MUTATED = ("provider-cc-crash-with-calls-in-flight", "partition-with-calls-in-flight",
           "libjoynr-restart-with-messages-in-flight")
DELETABLE = ("msg.in", "msg.deliver")

Verdicts = dict[tuple[str, str], tuple[str, str | None]]


def harness_verdicts(run_dirs: list[Path]) -> Verdicts:
    found: Verdicts = {}
    for run_dir in run_dirs:
        events = read_run(run_dir)
        run_id = events[0]["run"] if events else run_dir.name
        for msg, v in loss.Exchanges(events).verdicts().items():
            found[(run_id, msg)] = (v.outcome, v.why)
    return found


def disagreements(harness: Verdicts, checker: Verdicts) -> list[str]:
    """Every request on which the two sides differ, with both verdicts."""
    def show(v: tuple[str, str | None] | None) -> str:
        return "no verdict" if v is None else v[0] if v[1] is None else f"{v[0]} ({v[1]})"

    return [f"run {run} request {msg}: harness {show(harness.get((run, msg)))}, "
            f"checker {show(checker.get((run, msg)))}"
            for run, msg in sorted(harness.keys() | checker.keys())
            if harness.get((run, msg)) != checker.get((run, msg))]


def deletions(run_dir: Path, into: Path) -> list[Path]:
    """A copy of ``run_dir`` per msg.in and msg.deliver line of its trace, without that
    line; each copy is a run of its own (its run id and every event's ``run`` renamed)."""
    manifest = json.loads((run_dir / "run.json").read_text())
    lines = {f.name: f.read_text().splitlines(keepends=True) for f in sorted((run_dir / "trace").glob("*.ndjson"))}
    copies = []
    for name, file_lines in lines.items():
        for n, line in enumerate(file_lines):
            if json.loads(line)["ev"] not in DELETABLE:
                continue
            run_id = f"{manifest['run_id']}-del-{name.removesuffix('.ndjson')}-{n}"
            copy = into / run_id
            (copy / "trace").mkdir(parents=True)
            (copy / "run.json").write_text(json.dumps({**manifest, "run_id": run_id}))
            old = f'"run":"{manifest["run_id"]}"'
            for other, other_lines in lines.items():
                kept = other_lines[:n] + other_lines[n + 1:] if other == name else other_lines
                (copy / "trace" / other).write_text("".join(kept).replace(old, f'"run":"{run_id}"'))
            copies.append(copy)
    return copies


@pytest.fixture(scope="module")
def library(tmp_path_factory) -> list[Path]:
    """Every scenario of the library, run once on the embedded broker."""
    out = tmp_path_factory.mktemp("library")
    code = main(["run", str(LIBRARY), str(LIBRARY / "faults"), "--out", str(out)])
    assert code in (0, 1)  # a failed step is judged like any other trace
    runs = sorted(p for p in out.iterdir() if (p / "run.json").exists())
    assert len(runs) >= 40
    return runs


def test_the_harness_and_the_checker_agree_on_every_library_request(spark, library, tmp_path):
    harness = harness_verdicts(library)
    checker = verdicts_of_runs(spark, [str(p) for p in library])
    assert len(harness) > 500 and not disagreements(harness, checker), "\n".join(disagreements(harness, checker))


def test_they_agree_on_every_run_with_a_receipt_or_delivery_deleted(spark, library, tmp_path):
    copies = [c for name in MUTATED for c in deletions(next(p for p in library if p.name == name), tmp_path / name)]
    assert len(copies) > 300
    harness = harness_verdicts(copies)
    checker = verdicts_of_runs(spark, [str(c) for c in copies])
    found = disagreements(harness, checker)
    assert not found, f"{len(found)} disagreements:\n" + "\n".join(found[:40])
    # A reply's receipt or delivery deleted: the request is no longer answered, and both
    # judges say so alike (mostly explained by the stops that end the run, see docs/design/checking.md).
    assert sum(v[0] != loss.ANSWERED for v in harness.values()) > len(copies) / 10
    shutil.rmtree(tmp_path / "stage", ignore_errors=True)


def test_a_planted_disagreement_names_the_message_and_both_verdicts(spark, library, tmp_path, monkeypatch):
    """The harness without one explanation (a recorded drop) no longer agrees with the
    checker on library runs whose requests were dropped."""
    runs = [p for p in library if p.name in MUTATED]
    checker = verdicts_of_runs(spark, [str(p) for p in runs])
    assert not disagreements(harness_verdicts(runs), checker)
    monkeypatch.setitem(loss.EXPLANATIONS, "drop-recorded", lambda *_: False)
    found = disagreements(harness_verdicts(runs), checker)
    assert found and all(line.endswith("checker explained (drop-recorded)") for line in found), found
