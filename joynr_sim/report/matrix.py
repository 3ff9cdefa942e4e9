"""A policy matrix's output folder as the report reads it: ``run --policy all --out OUT``
writes ``OUT/<rule set>/<scenario>/`` per run and ``OUT/matrix.json``, which says per run
what it had to end with (``hold`` under the scenario's own policy, ``fail`` under each rule
set it guards against, ``any`` elsewhere) and whether it did.

The runs are those matrix.json lists (a run directory left from an earlier matrix in the
same folder is not one of them); a run that could not be carried out may have no trace and
has no page. A field of the wrong type is refused in one line, as in ``inputs``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..scenario.run_inputs import run_folder
from .inputs import ReportError, _get, _read_json, _shown

MATRIX_FILE = "matrix.json"
EXPECTATIONS = ("hold", "fail", "any")


@dataclass(frozen=True)
class Expectation:
    """One cell of the matrix: what the run had to end with and whether it did."""

    scenario: str
    column: str  # the policy or variant
    expected: str  # hold | fail | any
    outcome: str  # held | failed | error
    ok: bool
    detail: str

    @property
    def as_expected(self) -> bool:
        """Failed, as a guard of the scenario says it must: a pass of the matrix, not a red run."""
        return self.ok and self.expected == "fail" and self.outcome == "failed"


@dataclass(frozen=True)
class Matrix:
    folder: Path
    columns: tuple[str, ...]
    scenarios: tuple[str, ...]
    cells: dict[tuple[str, str], Expectation]  # (scenario, column)
    checked: bool

    def run_dir(self, cell: Expectation) -> Path:
        """Where ``run --policy all`` put the cell's run."""
        return self.folder / run_folder(cell.column) / cell.scenario

    def cell_of(self, run_dir: Path) -> Expectation | None:
        key = (run_dir.resolve().parent.name, run_dir.resolve().name)
        for cell in self.cells.values():
            if (run_folder(cell.column), cell.scenario) == key:
                return cell
        return None


def is_matrix(folder: Path) -> bool:
    return (folder / MATRIX_FILE).is_file()


def read_matrix(folder: Path) -> Matrix:
    path = folder / MATRIX_FILE
    data = _read_json(path)
    where = f"{path}: "
    if not isinstance(data, dict):
        raise ReportError(f"{path}: expected a JSON object, got {_shown(data)}")
    columns = _get(data, "policies", list, where)
    for i, column in enumerate(columns):
        if not isinstance(column, str):
            raise ReportError(f"{path}: policies[{i}]: expected str, got {_shown(column)}")
    cells: dict[tuple[str, str], Expectation] = {}
    names = []
    for i, s in enumerate(_get(data, "scenarios", list, where)):
        at = f"{path}: scenarios[{i}]."
        if not isinstance(s, dict):
            raise ReportError(f"{path}: scenarios[{i}]: expected an object, got {_shown(s)}")
        name = _get(s, "name", str, at)
        if not name or "/" in name or name in (".", ".."):
            raise ReportError(f"{at}name: not a scenario's folder name: {_shown(name)}")
        names.append(name)
        for column, raw in _get(s, "cells", dict, at).items():
            cat = f"{at}cells.{column}."
            if column not in columns or "/" in column or column in (".", ".."):
                raise ReportError(f"{at}cells: {_shown(column)} is not one of the matrix's policies")
            if not isinstance(raw, dict):
                raise ReportError(f"{at}cells.{column}: expected an object, got {_shown(raw)}")
            expected = _get(raw, "expected", str, cat)
            if expected not in EXPECTATIONS:
                raise ReportError(f"{cat}expected: expected one of {', '.join(EXPECTATIONS)}, got {_shown(expected)}")
            cells[(name, column)] = Expectation(name, column, expected, _get(raw, "outcome", str, cat),
                                                _get(raw, "ok", bool, cat),
                                                _get(raw, "detail", str, cat, optional=True, default=""))
    return Matrix(folder, tuple(columns), tuple(names), cells,
                  _get(data, "checked", bool, where, optional=True, default=False))


def matrix_view(matrix: Matrix, pages: dict[tuple[str, str], dict[str, Any]]) -> dict[str, Any]:
    """The index's grid: a row per scenario, a column per rule set; each cell what it had to
    end with, what it did and its page (``pages``: (scenario, column) -> index row)."""
    rows = []
    for name in matrix.scenarios:
        cells = []
        for column in matrix.columns:
            cell = matrix.cells.get((name, column))
            if cell is None:
                cells.append(None)
                continue
            row = pages.get((name, column))
            cells.append({"expected": cell.expected, "outcome": cell.outcome, "ok": cell.ok,
                          "as_expected": cell.as_expected, "detail": cell.detail,
                          "page": row["page"] if row else None, "violations": row["violations"] if row else 0})
        rows.append({"scenario": name, "cells": cells})
    cells = list(matrix.cells.values())
    return {"columns": list(matrix.columns), "rows": rows, "checked": matrix.checked,
            "ok": sum(c.ok for c in cells), "total": len(cells),
            "as_expected": sum(c.as_expected for c in cells)}
