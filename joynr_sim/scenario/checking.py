"""``joynr-sim run --check``: the Spark checks (the ``analytics`` package, an independent
oracle) over the run directories just written, in one Spark session for all of them.

Each run is judged by the policy its ``run.json`` declares. The answer is, per run id, the
violations found as one line each (``check: summary``).
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterable
from pathlib import Path


class CheckError(Exception):
    """The checks could not be carried out (Spark did not start, a run was unreadable)."""


def violations_by_run(run_dirs: Iterable[str | Path]) -> dict[str, list[str]]:
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
            outcome = check_runs(handle.spark, runs, stage)
        finally:
            handle.stop()
    found: dict[str, list[str]] = {}
    for result in outcome.results:
        for v in result.violations:
            found.setdefault(v.run, []).append(f"{result.name}: {' '.join(v.summary.split())}")
    return found
