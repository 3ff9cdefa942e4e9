"""The outputs: a terminal table, report.json, JUnit XML and one NDJSON slice per violation.

Every file is written to a temporary name and renamed into place, and the slices folder
is swapped as a whole, so a reader never sees half a report.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import tempfile
from pathlib import Path
from xml.etree import ElementTree as ET

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from .atomic import write_atomic
from .runner import CheckResult, Outcome

REPORT_SCHEMA = "joynr-sim-check/1"


def _slice_name(index: int, key: str) -> str:
    return f"{index:04d}-{re.sub(r'[^A-Za-z0-9._+-]+', '_', key)[:120]}.ndjson"


def write_slices(out_dir: Path, outcome: Outcome) -> dict[tuple[str, str], str]:
    """Slices under ``out_dir/slices/<check>/``; returns (check, key) -> relative path."""
    out_dir.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".slices-", dir=out_dir))
    paths: dict[tuple[str, str], str] = {}
    try:
        for result in outcome.results:
            for i, v in enumerate(result.violations):
                if not v.slice:
                    continue
                rel = Path("slices") / result.name / _slice_name(i, v.key)
                target = staging / rel.relative_to("slices")
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text("".join(line + "\n" for line in v.slice), encoding="utf-8")
                paths[(result.name, v.key)] = str(rel)
        final = out_dir / "slices"
        old = None
        if final.exists():
            old = Path(tempfile.mkdtemp(prefix=".slices-old-", dir=out_dir))
            os.replace(final, old / "slices")
        os.replace(staging, final)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return paths


def report_dict(outcome: Outcome, exit_status: int, slices: dict[tuple[str, str], str]) -> dict:
    return {
        "schema": REPORT_SCHEMA,
        "exit_status": exit_status,
        "violations": outcome.violations,
        "runs": [
            {
                "dir": str(run.dir),
                "declared_policy": run.policy,
                "manifest_note": run.manifest_note,
                "trace_files": len(run.trace_files),
            }
            for run in outcome.runs
        ],
        "input": outcome.stats.as_dict(),
        "spark": outcome.cost.as_dict(),
        "checks": [
            {
                "name": r.name,
                "description": r.description,
                "seeds": r.seeds,
                "status": "pass" if r.passed else "fail",
                "events_scanned": r.events_scanned,
                "violations": r.count,
                "violations_listed": len(r.violations),
                "notes": r.notes,
                "seconds": round(r.seconds, 3),
                "details": [
                    {
                        "run": v.run,
                        "key": v.key,
                        "kind": v.kind,
                        "summary": v.summary,
                        "details": v.details,
                        "events": [{"rt": rt, "seq": seq} for rt, seq in v.refs],
                        "slice": slices.get((r.name, v.key)),
                    }
                    for v in r.violations
                ],
            }
            for r in outcome.results
        ],
    }


def junit_xml(outcome: Outcome) -> str:
    failures = sum(1 for r in outcome.results if not r.passed)
    suites = ET.Element("testsuites", name="joynr-sim check", tests=str(len(outcome.results)),
                        failures=str(failures), errors="0")
    suite = ET.SubElement(
        suites, "testsuite", name="joynr-sim check", tests=str(len(outcome.results)),
        failures=str(failures), errors="0", skipped="0",
        time=f"{sum(r.seconds for r in outcome.results):.3f}",
    )
    for r in outcome.results:
        case = ET.SubElement(suite, "testcase", classname="joynr-sim.check", name=r.name,
                             time=f"{r.seconds:.3f}")
        if not r.passed:
            failure = ET.SubElement(case, "failure", type="violation",
                                    message=f"{r.count} violation(s) of {r.name}")
            lines = [f"{v.key}: {v.summary}" for v in r.violations]
            if r.count > len(r.violations):
                lines.append(f"... and {r.count - len(r.violations)} more")
            failure.text = "\n".join(lines)
        out = [f"events scanned: {r.events_scanned}", *r.notes]
        ET.SubElement(case, "system-out").text = "\n".join(out)
    ET.indent(suites)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(suites, encoding="unicode") + "\n"


def print_table(console: Console, outcome: Outcome) -> None:
    table = Table(title="joynr-sim check")
    table.add_column("check")
    table.add_column("events scanned", justify="right")
    table.add_column("violations", justify="right")
    table.add_column("notes")
    for r in outcome.results:
        count = f"[green]{r.count}[/]" if r.passed else f"[bold red]{r.count}[/]"
        if len(r.notes) == 1 and len(r.notes[0]) <= 40:
            notes = escape(r.notes[0])
        else:
            notes = f"{len(r.notes)} notes, below" if r.notes else ""
        table.add_row(r.name, f"{r.events_scanned:,}", count, notes)
    console.print(table)
    s = outcome.stats
    skipped = s.torn + s.corrupt + sum(s.unknown_events.values())
    line = f"{len(outcome.runs)} run(s), {s.files} trace file(s), {s.events:,} events checked"
    if skipped:
        unknown = ", ".join(f"{ev} x{n}" for ev, n in sorted(s.unknown_events.items()))
        line += (f"; skipped {skipped:,}: {s.torn} torn last line(s), {s.corrupt} corrupt line(s)"
                 + (f", unknown events: {unknown}" if unknown else ""))
    console.print(escape(line), highlight=False, soft_wrap=True)
    c = outcome.cost
    spent = (f"read {c.read_s:.1f} s ({'trace cache' if c.from_cache else 'parsed'}), "
             f"checks {c.check_s:.1f} s")
    if c.jobs is not None:
        spent += f", {c.jobs} Spark jobs, {c.tasks} tasks"
    console.print(escape(spent), highlight=False, soft_wrap=True)
    for r in outcome.results:
        if len(r.notes) > 1 or (r.notes and len(r.notes[0]) > 40):
            for note in r.notes:
                console.print(f"  {r.name} note: {escape(note)}", highlight=False, soft_wrap=True)
    for r in outcome.results:
        for v in r.violations[:5]:
            console.print(f"  [red]{r.name}[/] {escape(v.summary)}", highlight=False, soft_wrap=True)
        if r.count > 5:
            console.print(f"  [red]{r.name}[/] ... {r.count - 5} more in report.json")


def write_outputs(out_dir: Path, junit: Path | None, outcome: Outcome, exit_status: int) -> Path:
    slices = write_slices(out_dir, outcome)
    report = out_dir / "report.json"
    write_atomic(report, json.dumps(report_dict(outcome, exit_status, slices), indent=2) + "\n")
    if junit is not None:
        write_atomic(junit, junit_xml(outcome))
    return report


__all__ = ["CheckResult", "junit_xml", "print_table", "report_dict", "write_atomic", "write_outputs"]
