"""``joynr-sim report``: a static HTML page per run and an index over them.

    written = write_report([Path("runs/demo")], out=Path("runs/demo/report"))
    written.index  # the index page; written.pages: one per run
"""

from __future__ import annotations

from pathlib import Path

from .inputs import ReportError, attach_verdicts, find_run_dirs, read_run_input
from .render import Written, check_out, write_reports

__all__ = ["ReportError", "Written", "check_out", "default_out", "write_report"]


def default_out(paths: list[Path]) -> Path:
    """``report/`` in the first RUN given, as ``joynr-sim check`` writes ``check/`` there."""
    return paths[0] / "report"


def write_report(paths: list[Path], *, out: Path | None = None, check_reports: list[Path] = ()) -> Written:
    """Reports of the run directories under ``paths``; ``check_reports`` names report.json
    files of ``joynr-sim check`` beyond those it finds next to the runs. Raises ReportError
    on input it cannot use, before it writes anything."""
    for path in check_reports:
        if not path.is_file():
            raise ReportError(f"--check {path}: no such file")
    runs = [read_run_input(p) for p in find_run_dirs(paths)]
    for run in runs:
        attach_verdicts(run, list(check_reports))
    return write_reports(runs, out if out is not None else default_out(paths))
