"""A file written whole or not at all: a temporary file in the same folder, renamed over it."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def write_atomic(path: Path, text: str, prefix: str | None = None) -> None:
    """Writes ``text`` to ``path`` through a temporary file named ``prefix``… (default:
    ``.<name>.``) beside it, so a reader never sees half a file; the temporary file is
    removed when the write fails."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=prefix or f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def unwritable(path: Path, option: str) -> str | None:
    """Why the folder ``path`` (or the folder it would be created in) cannot be written,
    as one line naming ``option`` and the folder; None when it can. Checked before the
    checks run, so a bad output folder costs no Spark start; nothing is created."""
    probe = path
    while not os.path.lexists(probe) and probe.parent != probe:  # the folder it would be made in
        probe = probe.parent
    if not probe.is_dir():
        return f"{option} {path}: {probe} is not a folder"
    if not os.access(probe, os.W_OK | os.X_OK):
        why = "Read-only file system" if _read_only(probe) else "Permission denied"
        return f"{option} {path}: cannot write in {probe}: {why}"
    return None


def _read_only(path: Path) -> bool:
    try:
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except OSError:
        return False
