"""``joynr-sim run --check``: the Spark checks (the ``analytics`` package, an independent
oracle) over the run directories just written, in one Spark session for all of them.

Each run is judged by the policy its ``run.json`` declares. The answer is, per run id, the
violations found as one line each (``check: summary``). ``check_and_keep`` also writes
each run's verdicts where ``joynr-sim check`` puts them by default, ``<run>/check/report.json``
with its slices, by the checker's own writer: ``joynr-sim report`` reads them as it reads
any ``check`` report, so a violation printed by ``run --check`` is never "not checked" in
the report.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path

CHECK_DIR = "check"  # as joynr-sim check's default --out: check/ in the run directory


class CheckError(Exception):
    """The checks could not be carried out (Spark did not start, a run was unreadable)."""


def violations_by_run(run_dirs: Iterable[str | Path]) -> dict[str, list[str]]:
    return _found(_outcome(run_dirs))


def check_and_keep(run_ids: dict[str, str]) -> tuple[dict[str, list[str]], OSError | None]:
    """The violations of the runs (run directory -> run id), and each run's verdicts kept
    in ``<run>/check/report.json``; the OSError of a write that failed, with the verdicts
    found all the same."""
    outcome = _outcome(run_ids)
    try:
        keep_reports(outcome, run_ids)
    except OSError as exc:
        return _found(outcome), exc
    return _found(outcome), None


def _outcome(run_dirs: Iterable[str | Path]):
    from analytics.inputs import InputError, find_runs
    from analytics.runner import check_runs
    from analytics.session import SparkStartError, start

    with tempfile.TemporaryDirectory(prefix="joynr-check-") as scratch:
        try:
            runs = find_runs([str(d) for d in run_dirs])
            handle = start(work_dir=Path(scratch))
        except (InputError, SparkStartError) as exc:
            raise CheckError(str(exc)) from exc
        try:
            stage = Path(scratch) / "stage"
            stage.mkdir()
            return check_runs(handle.spark, runs, stage)
        finally:
            handle.stop()


def _found(outcome) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for result in outcome.results:
        for v in result.violations:
            found.setdefault(v.run, []).append(f"{result.name}: {' '.join(v.summary.split())}")
    return found


def keep_reports(outcome, run_ids: dict[str, str]) -> list[Path]:
    """One report.json per run of ``outcome`` named in ``run_ids`` (run directory -> run
    id), holding that run's violations and notes: the verdicts of one run never depend on
    which runs were checked with it, and a run's report moves with its folder."""
    from analytics.report import write_outputs
    from analytics.runner import Outcome

    by_dir = {str(Path(d).resolve()): run_id for d, run_id in run_ids.items()}
    written = []
    for run in outcome.runs:
        run_id = by_dir.get(str(Path(run.dir).resolve()))
        if run_id is None:
            continue
        others = [f"{r.dir}:" for r in outcome.runs if r is not run]
        results = []
        for r in outcome.results:
            mine = [v for v in r.violations if v.run == run_id]
            # violations past the listing limit may be this run's: counted, not listed
            unlisted = r.count - len(r.violations)
            results.append(replace(r, violations=mine, count=len(mine) + unlisted,
                                   notes=[n for n in r.notes if not n.startswith(tuple(others))]))
        single = Outcome(runs=[run], stats=outcome.stats, results=results, cost=outcome.cost)
        status = 1 if single.violations else 0  # as joynr-sim check exits on these verdicts
        written.append(write_outputs(Path(run.dir) / CHECK_DIR, None, single, status))
    return written
