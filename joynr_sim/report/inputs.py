"""What a report is made from, read and checked where it enters: the run directories
(their trace through ``joynr-sim trace``'s reader, their ``run.json``) and the checker's
``report.json`` files with the trace slices they name.

A value of the wrong type in ``run.json`` or ``report.json`` is refused with one line
naming the file, the field and the value; a trace event without the common fields the
report relies on (``ts``, ``seq``, ``rt``, ``ev``) is counted and left out, as the checker
counts the lines it skips.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..inspect import Run
from ..trace import read_events

CHECK_SCHEMA = "joynr-sim-check/1"
MAX_JSON_BYTES = 256 * 1024 * 1024  # a report.json of 1000 violations is a few MB
MAX_SLICE_EVENTS = 500  # a slice shown in the page; the file keeps the rest


class ReportError(ValueError):
    """Input a report cannot be made from; the message names the file, field and value."""


@dataclass(frozen=True)
class Step:
    index: int
    title: str
    outcome: str
    detail: str
    context: str
    line: int | None
    duration_ms: float | None


@dataclass(frozen=True)
class BrokerProperty:
    """One row of ``broker_properties``: what the run's broker kind is declared to keep."""

    id: str
    kept: bool | None  # None: unknown (an external broker)
    how: str
    relied_on: bool | None


@dataclass(frozen=True)
class Manifest:
    """The parts of ``run.json`` a report shows."""

    scenario: str
    run_id: str
    policy: str
    broker: str
    seed: int | None
    outcome: str
    complete: bool
    error: str
    started: str
    ended: str
    duration_s: float | None
    path: str
    reproduces: dict[str, str]
    versions: dict[str, str]
    steps: tuple[Step, ...]
    broker_properties: tuple[BrokerProperty, ...] = ()  # none in a run.json written before they were recorded


@dataclass(frozen=True)
class Violation:
    check: str
    key: str
    kind: str
    summary: str
    details: dict[str, Any]
    refs: tuple[tuple[str, int], ...]  # (runtime, seq) of the events it refers to
    slice_file: Path | None
    slice_events: tuple[dict[str, Any], ...]
    slice_total: int


@dataclass(frozen=True)
class CheckVerdict:
    name: str
    description: str
    status: str  # pass, fail, or "not listed" when the report left this run's violations out
    notes: tuple[str, ...]
    violations: tuple[Violation, ...]


@dataclass(frozen=True)
class CheckReport:
    path: Path
    run_dirs: tuple[str, ...]
    checks: tuple[dict[str, Any], ...]  # validated, as in the file


@dataclass
class RunInput:
    path: Path
    run: Run
    manifest: Manifest | None
    skipped_events: int
    check_report: Path | None = None
    verdicts: list[CheckVerdict] = field(default_factory=list)
    expectation: Any = None  # matrix.Expectation of a run of a policy matrix
    in_matrix: bool = False

    @property
    def run_id(self) -> str:
        if self.manifest is not None and self.manifest.run_id:
            return self.manifest.run_id
        return next((str(e["run"]) for e in self.run.events if isinstance(e.get("run"), str)), self.path.name)


# -- validation helpers -----------------------------------------------------------------------

def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 64 else f"{text[:60]}… ({len(text)} characters)"


def _get(obj: dict[str, Any], key: str, types: type | tuple[type, ...], where: str, *,
         optional: bool = False, default: Any = None) -> Any:
    value = obj.get(key, default)
    if value is None and optional:
        return default
    # bool is an int in Python; a count or index that is true or false is still wrong
    if not isinstance(value, types) or (isinstance(value, bool) and bool not in _as_tuple(types)):
        names = "/".join(t.__name__ for t in _as_tuple(types))
        raise ReportError(f"{where}{key}: expected {names}, got {_shown(value)}")
    return value


def _as_tuple(types: type | tuple[type, ...]) -> tuple[type, ...]:
    return types if isinstance(types, tuple) else (types,)


def _read_json(path: Path) -> Any:
    try:
        if path.stat().st_size > MAX_JSON_BYTES:
            raise ReportError(f"{path}: larger than {MAX_JSON_BYTES // (1024 * 1024)} MB; not a file joynr-sim wrote")
        return json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ReportError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except (ValueError, UnicodeDecodeError) as exc:
        raise ReportError(f"{path}: not JSON: {exc}") from None


# -- run directories ------------------------------------------------------------------------------

def _is_run_dir(path: Path) -> bool:
    return any((path / "trace").glob("*.ndjson"))


def find_run_dirs(paths: list[Path]) -> list[Path]:
    """Each PATH is a run directory or a folder of run directories, as for ``joynr-sim check``."""
    found: list[Path] = []
    for path in paths:
        if not path.is_dir():
            raise ReportError(f"{path}: no such run directory or folder")
        if _is_run_dir(path):
            found.append(path)
            continue
        children = sorted(c for c in path.iterdir() if c.is_dir() and not c.is_symlink() and _is_run_dir(c))
        if not children:
            raise ReportError(f"{path}: neither a run directory (no trace/*.ndjson) nor a folder of run directories")
        found.extend(children)
    unique = list(dict.fromkeys(p.resolve() for p in found))
    return [Path(p) for p in unique]


def _well_formed(event: Any) -> bool:
    return (isinstance(event, dict) and isinstance(event.get("ts"), int) and isinstance(event.get("seq"), int)
            and isinstance(event.get("rt"), str) and isinstance(event.get("ev"), str)
            and not isinstance(event.get("ts"), bool))


def read_run_input(path: Path) -> RunInput:
    """The run's events through the trace's own reader (a torn line skipped), the malformed
    ones left out before they are ordered as ``read_run`` orders them."""
    read = [e for f in sorted((path / "trace").glob("*.ndjson")) for e in read_events(f)]
    events = sorted((e for e in read if _well_formed(e)), key=lambda e: (e["ts"], e["rt"], e["seq"]))
    manifest_path = path / "run.json"
    manifest = read_manifest(manifest_path) if manifest_path.is_file() else None
    return RunInput(path, Run(path, events), manifest, len(read) - len(events))


def read_manifest(path: Path) -> Manifest:
    """Every field may be missing (a run.json of the synthetic traces has only a few); a
    field that is there must have its type."""
    data = _read_json(path)
    where = f"{path}: "
    if not isinstance(data, dict):
        raise ReportError(f"{path}: expected a JSON object, got {_shown(data)}")
    steps = []
    for i, raw in enumerate(_get(data, "steps", list, where, optional=True, default=[])):
        at = f"{path}: steps[{i}]."
        if not isinstance(raw, dict):
            raise ReportError(f"{path}: steps[{i}]: expected an object, got {_shown(raw)}")
        steps.append(Step(
            index=_get(raw, "index", int, at), title=_get(raw, "title", str, at),
            outcome=_get(raw, "outcome", str, at),
            detail=_get(raw, "detail", str, at, optional=True, default=""),
            context=_get(raw, "context", str, at, optional=True, default=""),
            line=_get(raw, "line", int, at, optional=True),
            duration_ms=_get(raw, "duration_ms", (int, float), at, optional=True),
        ))
    reproduces = _get(data, "reproduces", dict, where, optional=True, default={})
    versions = _get(data, "versions", dict, where, optional=True, default={})
    return Manifest(
        scenario=_get(data, "scenario", str, where, optional=True, default=path.parent.name),
        run_id=_get(data, "run_id", str, where, optional=True, default=""),
        # the rule set: the policy, and the variant over it when the run had one (core.variants)
        policy="+".join(filter(None, (_get(data, "policy", str, where, optional=True, default=""),
                                      _get(data, "variant", str, where, optional=True, default="")))),
        broker=_get(data, "broker", str, where, optional=True, default=""),
        seed=_get(data, "seed", int, where, optional=True),
        outcome=_get(data, "outcome", str, where, optional=True, default=""),
        complete=_get(data, "complete", bool, where, optional=True, default=True),
        error=_get(data, "error", str, where, optional=True, default=""),
        started=_get(data, "started", str, where, optional=True, default=""),
        ended=_get(data, "ended", str, where, optional=True, default=""),
        duration_s=_get(data, "duration_s", (int, float), where, optional=True),
        path=_get(data, "path", str, where, optional=True, default=""),
        reproduces={str(k): str(v) for k, v in reproduces.items()},
        versions={str(k): str(v) for k, v in versions.items()},
        steps=tuple(steps),
        broker_properties=_broker_properties(data, path),
    )


def _broker_properties(data: dict[str, Any], path: Path) -> tuple[BrokerProperty, ...]:
    rows = []
    for prop_id, raw in _get(data, "broker_properties", dict, f"{path}: ", optional=True, default={}).items():
        at = f"{path}: broker_properties.{prop_id}."
        if not isinstance(raw, dict):
            raise ReportError(f"{path}: broker_properties.{prop_id}: expected an object, got {_shown(raw)}")
        rows.append(BrokerProperty(
            id=str(prop_id), kept=_get(raw, "kept", bool, at, optional=True),
            how=_get(raw, "how", str, at, optional=True, default=""),
            relied_on=_get(raw, "relied_on", bool, at, optional=True),
        ))
    return tuple(rows)


# -- the checker's report.json ----------------------------------------------------------------------

def candidate_check_reports(run_dir: Path) -> list[Path]:
    """Where ``joynr-sim check`` puts report.json by default: ``check/`` in the first run
    directory it was given, so a run's verdicts may sit in a sibling run directory."""
    own = run_dir / "check" / "report.json"
    siblings = sorted(run_dir.parent.glob("*/check/report.json"))
    return list(dict.fromkeys([own, *siblings]))


def read_check_report(path: Path) -> CheckReport:
    data = _read_json(path)
    where = f"{path}: "
    if not isinstance(data, dict):
        raise ReportError(f"{path}: expected a JSON object, got {_shown(data)}")
    schema = data.get("schema")
    if schema != CHECK_SCHEMA:
        raise ReportError(f"{path}: schema: expected {CHECK_SCHEMA!r}, got {_shown(schema)}")
    run_dirs = []
    for i, r in enumerate(_get(data, "runs", list, where)):
        if not isinstance(r, dict):
            raise ReportError(f"{path}: runs[{i}]: expected an object, got {_shown(r)}")
        run_dirs.append(_get(r, "dir", str, f"{path}: runs[{i}]."))
    checks = []
    for i, c in enumerate(_get(data, "checks", list, where)):
        at = f"{path}: checks[{i}]."
        if not isinstance(c, dict):
            raise ReportError(f"{path}: checks[{i}]: expected an object, got {_shown(c)}")
        for key, types in (("name", str), ("status", str), ("violations", int), ("violations_listed", int)):
            _get(c, key, types, at)
        _get(c, "description", str, at, optional=True)
        for n, note in enumerate(_get(c, "notes", list, at, optional=True, default=[])):
            if not isinstance(note, str):
                raise ReportError(f"{at}notes[{n}]: expected str, got {_shown(note)}")
        for d, v in enumerate(_get(c, "details", list, at, optional=True, default=[])):
            _check_violation(v, f"{at}details[{d}].")
        checks.append(c)
    return CheckReport(path, tuple(run_dirs), tuple(checks))


def _check_violation(v: Any, at: str) -> None:
    if not isinstance(v, dict):
        raise ReportError(f"{at.rstrip('.')}: expected an object, got {_shown(v)}")
    for key in ("run", "key", "kind", "summary"):
        _get(v, key, str, at)
    _get(v, "details", dict, at, optional=True)
    _get(v, "slice", str, at, optional=True)
    for n, ref in enumerate(_get(v, "events", list, at, optional=True, default=[])):
        if not isinstance(ref, dict):
            raise ReportError(f"{at}events[{n}]: expected an object, got {_shown(ref)}")
        _get(ref, "rt", str, f"{at}events[{n}].")
        _get(ref, "seq", int, f"{at}events[{n}].")


def _covers(report: CheckReport, run: RunInput) -> bool:
    """A report covers a run it lists (the same folder, or one of that name: report.json
    keeps the paths as they were given, relative to wherever the checker ran)."""
    for d in report.run_dirs:
        p = Path(d)
        if p.name == run.path.name or (p.is_absolute() and p.resolve() == run.path.resolve()):
            return True
    return False


def attach_verdicts(run: RunInput, explicit: list[Path]) -> None:
    """The newest report.json that covers ``run`` (an explicit one first) gives its verdicts."""
    reports = []
    seen: set[Path] = set()
    for path in [*explicit, *candidate_check_reports(run.path)]:
        if path.resolve() in seen or not path.is_file():
            continue
        seen.add(path.resolve())
        report = read_check_report(path)
        if _covers(report, run):
            reports.append((path in explicit, path.stat().st_mtime, report))
    if not reports:
        return
    _, _, report = max(reports, key=lambda r: (r[0], r[1]))
    run.check_report = report.path
    run.verdicts = [_verdict(report, c, run) for c in report.checks]


def _verdict(report: CheckReport, check: dict[str, Any], run: RunInput) -> CheckVerdict:
    mine = [v for v in check.get("details") or [] if v["run"] == run.run_id]
    others = [d for d in report.run_dirs if Path(d).name != run.path.name]
    notes = tuple(n for n in check.get("notes") or [] if not any(n.startswith(f"{d}:") for d in others))
    if mine:
        status = "fail"
    elif check["status"] == "pass" or check["violations"] == check["violations_listed"]:
        status = "pass"
    else:
        status = "not listed"  # violations past --max-details may be this run's
    return CheckVerdict(check["name"], check.get("description") or "", status, notes,
                        tuple(_violation(report.path, check["name"], v) for v in mine))


def _violation(report_path: Path, check: str, v: dict[str, Any]) -> Violation:
    slice_file = None
    events: list[dict[str, Any]] = []
    total = 0
    if v.get("slice"):
        candidate = report_path.parent / v["slice"]
        # a slice lies under the report's folder; a path that leaves it is not followed
        if candidate.resolve().is_relative_to(report_path.parent.resolve()) and candidate.is_file():
            slice_file = candidate
            with open(candidate, encoding="utf-8") as f:
                for line in f:
                    try:
                        event = json.loads(line)
                    except ValueError:
                        continue
                    if _well_formed(event):
                        total += 1
                        if len(events) < MAX_SLICE_EVENTS:
                            events.append(event)
    refs = tuple((r["rt"], r["seq"]) for r in v.get("events") or [])
    return Violation(check, v["key"], v["kind"], v["summary"], v.get("details") or {}, refs,
                     slice_file, tuple(events), total)
