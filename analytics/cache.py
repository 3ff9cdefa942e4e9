"""The trace cache: parsed traces as Parquet, keyed by the trace files' paths, sizes and mtimes.

``$XDG_CACHE_HOME/joynr-sim/traces`` (default ``~/.cache/joynr-sim/traces``) holds one entry
per set of trace files checked together: ``<key>/events`` (the kept events as Parquet:
``messages`` and ``others``, see ``analytics.load``) and
``<key>/meta.json`` (what the reading pass counted). A changed, added or removed file
changes the key, so the traces are read again. An entry is written under a temporary name
and renamed into place, so a reader never sees half of one. Only folders this module made
(a key with our ``meta.json``, or a temporary folder with our marker) are ever deleted:
the oldest entries beyond ``keep``, and temporary folders a crash left behind.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

FORMAT = "joynr-sim-trace-cache/1"
_KEY = re.compile(r"[0-9a-f]{64}")
_PARTIAL = ".joynr-sim-partial"  # the marker of a temporary entry
_STALE_S = 24 * 3600  # a temporary entry this old belongs to no running check


class CacheError(Exception):
    """The cache folder cannot be used; the message names it and why."""


def cache_root() -> Path:
    """``$XDG_CACHE_HOME/joynr-sim`` (an absolute XDG_CACHE_HOME only, as the spec says)."""
    base = os.environ.get("XDG_CACHE_HOME", "")
    root = Path(base) if base and Path(base).is_absolute() else Path.home() / ".cache"
    return root / "joynr-sim"


def input_key(files: list[Path], layout: str) -> str:
    """The key of a set of trace files: their paths, sizes and mtimes, and the kept layout."""
    parts = []
    for path in sorted(files):
        st = path.stat()
        parts.append([str(path), st.st_size, st.st_mtime_ns])
    text = json.dumps([FORMAT, layout, parts])
    return hashlib.sha256(text.encode("utf-8", "surrogateescape")).hexdigest()


@dataclass
class Entry:
    """A cache entry being written: Spark writes ``events``, the loader sets ``meta``."""

    events: Path
    meta: dict | None = None
    committed: bool = False
    folder: Path = field(default=Path())


class TraceCache:
    def __init__(self, root: Path | None = None, keep: int = 16) -> None:
        self.root = root if root is not None else cache_root() / "traces"
        self.keep = keep
        try:
            self.root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise CacheError(f"trace cache {self.root}: {exc.strerror or exc}") from None
        if not os.access(self.root, os.W_OK | os.X_OK):
            raise CacheError(f"trace cache {self.root}: not writable")

    def events_path(self, key: str) -> Path:
        return self.root / key / "events"

    def lookup(self, key: str) -> dict | None:
        """What the reading pass counted, if the entry is complete; None otherwise."""
        meta_path = self.root / key / "meta.json"
        try:
            meta = json.loads(meta_path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None
        if not isinstance(meta, dict) or meta.get("format") != FORMAT or not self.events_path(key).is_dir():
            return None
        os.utime(meta_path)  # the entry was used: the last to be evicted
        return meta.get("counts")

    @contextmanager
    def writing(self, key: str) -> Iterator[Entry]:
        """A temporary entry; renamed into place when the block ends without an error."""
        folder = Path(tempfile.mkdtemp(prefix=".tmp-", dir=self.root))
        (folder / _PARTIAL).write_text(key)
        entry = Entry(folder / "events", folder=folder)
        try:
            yield entry
            if entry.meta is not None:
                self._commit(key, entry)
        except BaseException:
            shutil.rmtree(folder, ignore_errors=True)
            raise
        if not entry.committed and self.lookup(key) is not None:
            shutil.rmtree(folder, ignore_errors=True)  # another check committed the same key
        self._evict()

    def _commit(self, key: str, entry: Entry) -> None:
        meta = {"format": FORMAT, "created": time.time(), "counts": entry.meta}
        (entry.folder / "meta.json").write_text(json.dumps(meta), encoding="utf-8")
        (entry.folder / _PARTIAL).unlink()
        try:
            os.rename(entry.folder, self.root / key)
        except OSError:
            (entry.folder / _PARTIAL).write_text(key)  # lost the race: ours stays temporary
            return
        entry.committed = True

    def _evict(self) -> None:
        """Removes the least recently used entries beyond ``keep`` and stale temporary ones."""
        entries = []
        now = time.time()
        for child in self.root.iterdir():
            try:
                if _KEY.fullmatch(child.name) and (child / "meta.json").is_file():
                    entries.append(((child / "meta.json").stat().st_mtime, child))
                elif (child.name.startswith(".tmp-") and (child / _PARTIAL).is_file()
                      and now - (child / _PARTIAL).stat().st_mtime > _STALE_S):
                    shutil.rmtree(child, ignore_errors=True)
            except OSError:
                continue
        entries.sort(reverse=True)
        for _, child in entries[self.keep:]:
            try:
                meta = json.loads((child / "meta.json").read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
            if isinstance(meta, dict) and meta.get("format") == FORMAT:
                shutil.rmtree(child, ignore_errors=True)
