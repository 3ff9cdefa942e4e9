"""Finding run directories and their manifests; the checks of the input that need no Spark.

A run directory holds ``trace/*.ndjson`` and a ``run.json`` manifest naming the routing
policy the run declared. A path may be a run directory, a folder of run directories, or a
glob of either, each also as a ``file:`` URL (``trace_schema.run_location``).
"""

from __future__ import annotations

import glob
import json
from dataclasses import dataclass, field
from pathlib import Path

from trace_schema.run_location import RunLocationError, run_location


class InputError(Exception):
    """The input cannot be checked (exit status 2); the message names the path and why."""


@dataclass(frozen=True)
class Run:
    dir: Path
    trace_files: tuple[Path, ...]
    policy: str | None  # as declared in run.json; None when the manifest does not say
    manifest_note: str | None = None


@dataclass
class TornLines:
    """Last lines cut short by a crash mid-write: no newline and not a JSON object."""

    count: int = 0
    files: list[str] = field(default_factory=list)


def _is_run_dir(path: Path) -> bool:
    return (path / "trace").is_dir() or (path / "run.json").is_file()


def _expand(text: str) -> list[Path]:
    try:
        pattern = str(run_location(text))
    except RunLocationError as exc:
        raise InputError(str(exc)) from None
    if any(ch in pattern for ch in "*?["):
        matches = sorted(Path(p) for p in glob.glob(pattern))
        if not matches:
            raise InputError(f"{pattern}: the pattern matches nothing")
        return matches
    path = Path(pattern)
    if not path.exists():
        raise InputError(f"{pattern}: no such run directory")
    if not path.is_dir():
        raise InputError(f"{pattern}: not a directory (expected a run directory)")
    return [path]


def find_runs(paths: list[str]) -> list[Run]:
    """The run directories named by ``paths``, in order, each once."""
    if not paths:
        raise InputError("no run directory given")
    seen: dict[Path, None] = {}
    for pattern in paths:
        for path in _expand(pattern):
            if not path.is_dir():
                continue
            if _is_run_dir(path):
                seen[path.resolve()] = None
                continue
            children = sorted(c for c in path.iterdir() if c.is_dir() and _is_run_dir(c))
            if not children:
                raise InputError(
                    f"{path}: neither a run directory (no trace/ or run.json) "
                    "nor a folder of run directories"
                )
            for child in children:
                seen[child.resolve()] = None
    return [_load_run(d) for d in seen]


def _load_run(run_dir: Path) -> Run:
    files = tuple(sorted((run_dir / "trace").glob("*.ndjson")))
    if not files:
        raise InputError(f"{run_dir}: no trace files (expected trace/*.ndjson)")
    manifest = run_dir / "run.json"
    if not manifest.is_file():
        return Run(run_dir, files, None, "no run.json")
    try:
        data = json.loads(manifest.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise InputError(f"{manifest}: not a readable JSON manifest ({exc})") from None
    if not isinstance(data, dict):
        raise InputError(f"{manifest}: expected a JSON object, got {type(data).__name__}")
    policy = data.get("policy")
    if not isinstance(policy, str) or not policy:
        return Run(run_dir, files, None, "run.json names no policy")
    return Run(run_dir, files, policy)


def trace_bytes(files: list[Path]) -> int:
    """The bytes of these trace files; one gone since it was listed counts 0 (reading it
    will say so)."""
    total = 0
    for path in files:
        try:
            total += path.stat().st_size
        except OSError:
            continue
    return total


def first_run_ids(runs: list[Run], limit: int = 1 << 20) -> dict[str, list[str]]:
    """Run id -> the run directories (as text) with a trace file whose first line names it.

    Only the first non-blank line of each file is read (at most ``limit`` bytes of it); a
    file whose first line is no JSON object with a text ``run`` names nothing.
    """
    dirs: dict[str, list[str]] = {}
    for run in runs:
        for path in run.trace_files:
            run_id = _first_run_id(path, limit)
            if run_id is not None and str(run.dir) not in dirs.setdefault(run_id, []):
                dirs[run_id].append(str(run.dir))
    return dirs


def _first_run_id(path: Path, limit: int) -> str | None:
    with open(path, "rb") as f:
        raw = f.readline(limit + 1)
        while raw and not raw.strip():
            raw = f.readline(limit + 1)
    if not raw or len(raw) > limit:
        return None
    try:
        event = json.loads(raw)
    except ValueError:
        return None
    run_id = event.get("run") if isinstance(event, dict) else None
    return run_id if isinstance(run_id, str) else None


def torn_last_lines(runs: list[Run]) -> TornLines:
    """Files whose last line has no newline and does not parse: a write torn by a crash.

    Spark reads such a line too and counts it as corrupt; the loader moves it from the
    corrupt count to the torn count. A final line without newline that is a complete JSON
    object is an event like any other.
    """
    torn = TornLines()
    for run in runs:
        for path in run.trace_files:
            tail = _last_line_without_newline(path)
            if tail is None:
                continue
            try:
                ok = isinstance(json.loads(tail), dict)
            except ValueError:
                ok = False
            if not ok:
                torn.count += 1
                torn.files.append(str(path))
    return torn


def _last_line_without_newline(path: Path, chunk: int = 1 << 16) -> str | None:
    with open(path, "rb") as f:
        f.seek(0, 2)
        size = f.tell()
        if size == 0:
            return None
        f.seek(size - 1)
        if f.read(1) == b"\n":
            return None
        data = b""
        pos = size
        while pos > 0 and b"\n" not in data:
            step = min(chunk, pos)
            pos -= step
            f.seek(pos)
            data = f.read(step) + data
        line = data.rsplit(b"\n", 1)[-1]
    if not line.strip():
        return None  # trailing blank space: Spark drops it as a blank line too
    return line.decode("utf-8", errors="replace")
