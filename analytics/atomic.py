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
