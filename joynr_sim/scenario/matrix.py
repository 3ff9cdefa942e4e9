"""The policy matrix: what each run of a scenario under a policy should end with, what it
did, and the outputs (``matrix.json``, JUnit XML).

A scenario must hold under its own policy and fail under each policy it ``guards`` against:
fail means a step did not hold or, when the runs are checked, the checker found a
violation in the run. Under any other policy (and every other policy of a ``smoke``
scenario) either is accepted and shown. A run that could not be carried out (``error``) or
a scenario that checks nothing never meets its expectation.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path
from xml.etree import ElementTree

from .model import Scenario
from .rundir import GENERATOR
from .runner import RunResult

HOLD, FAIL, ANY = "hold", "fail", "any"
HELD, FAILED, ERROR = "held", "failed", "error"
MATRIX_FILE = "matrix.json"


def expectation(scenario: Scenario, policy: str, *, matrix: bool = True) -> str:
    """``hold``, ``fail`` or ``any``; outside a matrix every run must hold."""
    if not matrix or policy == scenario.policy:
        return HOLD
    return FAIL if policy in scenario.guards else ANY


@dataclass
class Cell:
    scenario: str
    policy: str
    expected: str  # hold | fail | any
    outcome: str  # held | failed | error
    detail: str  # the first failed step or the error; empty when held
    run_dir: str
    run_id: str
    violations: list[str] = field(default_factory=list)  # "check: summary", by the checker
    checks_nothing: bool = False  # the scenario has no checking step

    @property
    def ok(self) -> bool:
        if self.outcome == ERROR or self.checks_nothing:
            return False
        return self.expected == ANY or (self.expected == HOLD) == (self.outcome == HELD)

    def add_violations(self, found: list[str]) -> None:
        """Checker findings fail a run that held (a step that failed stays the reason)."""
        self.violations = list(found)
        if found and self.outcome == HELD:
            self.outcome = FAILED
            self.detail = f"{len(found)} checker violation{'s' if len(found) != 1 else ''}: {found[0]}"

    def text(self) -> str:
        """What the cell shows: held, the failed step or the violations, the error."""
        if self.checks_nothing:
            return "checks nothing"
        return HELD if self.outcome == HELD else self.detail or self.outcome


def cell_of(scenario: Scenario, result: RunResult, *, matrix: bool = True) -> Cell:
    if result.outcome == "error":
        outcome, detail = ERROR, f"error: {result.error.strip().splitlines()[0] if result.error.strip() else ''}"
    elif result.passed:
        outcome, detail = HELD, ""
    else:
        step = result.failed_step
        outcome = FAILED
        detail = f"step {step.index} '{step.title}': {step.detail}" if step else "failed"
    return Cell(result.scenario, result.column, expectation(scenario, result.column, matrix=matrix), outcome,
                _one_line(detail), result.run_dir, result.run_id, checks_nothing=not scenario.checks)


def _one_line(text: str, limit: int = 300) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def all_ok(cells: list[Cell]) -> bool:
    return all(c.ok for c in cells)


def matrix_document(scenarios: list[Scenario], policies: list[str], cells: list[Cell], checked: bool) -> dict:
    by_key = {(c.scenario, c.policy): c for c in cells}
    return {
        "generator": GENERATOR,
        "policies": policies,
        "checked": checked,
        "ok": all_ok(cells),
        "scenarios": [
            {
                "name": s.name,
                "path": str(s.path) if s.path else None,
                "policy": s.policy,
                "guards": list(s.guards),
                "smoke": s.smoke,
                "cells": {
                    p: {**{k: v for k, v in asdict(by_key[(s.name, p)]).items() if k not in ("scenario", "policy")},
                        "ok": by_key[(s.name, p)].ok}
                    for p in policies if (s.name, p) in by_key
                },
            }
            for s in scenarios
        ],
    }


def check_matrix_target(out: Path) -> str | None:
    """Whether ``out/matrix.json`` may be written: absent, or one joynr-sim wrote."""
    path = out / MATRIX_FILE
    if not os.path.lexists(path):
        return None
    try:
        if path.is_symlink() or not path.is_file():
            raise ValueError
        ours = json.loads(path.read_text(encoding="utf-8")).get("generator") == GENERATOR
    except (OSError, ValueError, AttributeError):
        ours = False
    return None if ours else f"{path} exists and was not written by joynr-sim; it is left as it is"


def write_json(path: Path, document: dict) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(document, indent=2))
    tmp.replace(path)


def junit_xml(cells: list[Cell], suite: str) -> bytes:
    """One test case per run: class the scenario, name the policy; a failure when the run
    did not end as expected, an error when it could not be carried out."""
    root = ElementTree.Element("testsuites")
    failures = sum(not c.ok and c.outcome != ERROR for c in cells)
    errors = sum(c.outcome == ERROR for c in cells)
    ts = ElementTree.SubElement(root, "testsuite", name=suite, tests=str(len(cells)),
                                failures=str(failures), errors=str(errors))
    for c in cells:
        case = ElementTree.SubElement(ts, "testcase", classname=c.scenario, name=c.policy)
        props = ElementTree.SubElement(case, "properties")
        for key, value in (("expected", c.expected), ("outcome", c.outcome), ("run_dir", c.run_dir)):
            ElementTree.SubElement(props, "property", name=key, value=value)
        if c.ok:
            continue
        tag = "error" if c.outcome == ERROR else "failure"
        element = ElementTree.SubElement(case, tag, message=_verdict(c))
        element.text = "\n".join([c.detail, *c.violations])
    return ElementTree.tostring(root, encoding="utf-8", xml_declaration=True)


def _verdict(c: Cell) -> str:
    if c.checks_nothing:
        return "the scenario checks nothing (waiting is not a check)"
    if c.outcome == ERROR:
        return c.detail
    if c.expected == HOLD:
        return f"must hold under {c.policy}: {c.detail}"
    return f"must fail under {c.policy}, which it guards against, but it held"
