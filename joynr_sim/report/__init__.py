"""``joynr-sim report``: a static HTML page per run and an index over them.

    written = write_report([Path("runs/demo")], out=Path("runs/demo/report"))
    written.index  # the index page; written.pages: one per run
"""

from __future__ import annotations

from pathlib import Path

from .inputs import ReportError, RunInput, attach_verdicts, find_run_dirs, read_run_input
from .matrix import is_matrix, read_matrix
from .render import Written, check_out, page_label, write_reports

__all__ = ["ReportError", "Written", "check_out", "default_out", "page_label", "write_report"]


def default_out(paths: list[Path]) -> Path:
    """``report/`` in the first RUN given, as ``joynr-sim check`` writes ``check/`` there."""
    return paths[0] / "report"


def read_inputs(paths: list[Path]) -> list[RunInput]:
    """The runs under ``paths``: a policy matrix's folder (with its matrix.json) gives the
    runs it lists, each with what it had to end with; anything else, its run directories."""
    runs: list[RunInput] = []
    plain: list[Path] = []
    for path in paths:
        if path.is_dir() and is_matrix(path):
            matrix = read_matrix(path)
            for cell in matrix.cells.values():
                run_dir = matrix.run_dir(cell)
                if any((run_dir / "trace").glob("*.ndjson")):  # a run that erred may have none
                    run = read_run_input(run_dir)
                    run.expectation, run.in_matrix = cell, True
                    runs.append(run)
        else:
            plain.append(path)
    if plain:
        runs.extend(read_run_input(p) for p in find_run_dirs(plain))
    unique = {r.path.resolve(): r for r in runs}
    return list(unique.values())


def write_report(paths: list[Path], *, out: Path | None = None, check_reports: list[Path] = ()) -> Written:
    """Reports of the run directories under ``paths``; ``check_reports`` names report.json
    files of ``joynr-sim check`` beyond those it finds next to the runs. Raises ReportError
    on input it cannot use, before it writes anything."""
    for path in check_reports:
        if not path.is_file():
            raise ReportError(f"--check {path}: no such file")
    runs = read_inputs(paths)
    if not runs:
        raise ReportError(f"{paths[0]}: the matrix lists no run with a trace")
    for run in runs:
        attach_verdicts(run, list(check_reports))
    return write_reports(runs, out if out is not None else default_out(paths))
