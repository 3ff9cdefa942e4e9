"""A write that failed ends the run, and says which file and why.

A runtime's trace, its outbox, its persisted routing table and its link store are files in
the run directory. When a write to one of them fails (the file system is full or read-only,
a permission was taken away), the writer records a ``WriteFailure`` and goes on without
raising: an error thrown into the message path would stop a runtime's loop in the middle of
a turn, and every other runtime would then carry on beside a broken one. A trace writer
that failed writes nothing more, so its file ends on its last whole line; a group-committed
store that failed commits nothing more.

The failure is the run's: the first one recorded wins (the later ones are usually what the
first one caused). A writer records with ``record(path, exc)``; the failure goes to the
``Failures`` of the deepest watched directory that holds ``path`` (``watch``): the runner
watches its run directory, a host process the run directory of the runtimes it holds and
hands what it recorded back to the runner with every answer (``host.protocol``). The runner
ends the run after the step during which it happened: ``run.json`` says ``"complete":
false`` and, as ``error``, the one line ``cannot write <path>: <reason>``.

A writer nobody watches (a tool, a test that builds one alone) keeps its own ``failure``.
"""

from __future__ import annotations

import errno
import os
import threading
from pathlib import Path

# SQLite's primary result codes for what the disk refused (the low byte of the extended code).
_SQLITE_PERM, _SQLITE_READONLY, _SQLITE_IOERR, _SQLITE_FULL, _SQLITE_CANTOPEN = 3, 8, 10, 13, 14
_SQLITE_WRITE_CODES = frozenset({_SQLITE_PERM, _SQLITE_READONLY, _SQLITE_IOERR, _SQLITE_FULL, _SQLITE_CANTOPEN})
# What an OSError says when the disk, not the caller, refused a write.
WRITE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EIO, errno.EFBIG, errno.EACCES,
                          errno.EPERM})
MAX_TEXT = 4096  # a path or a reason longer than this is cut: it travels in one protocol frame


class WriteFailure(Exception):
    """A file of the run could not be written; ``str`` is the one line a user is shown."""

    def __init__(self, path: str | os.PathLike[str], reason: str) -> None:
        self.path = str(path)[:MAX_TEXT]
        self.reason = (str(reason) or "write failed")[:MAX_TEXT]
        super().__init__(self.path, self.reason)

    def __str__(self) -> str:
        return f"cannot write {self.path}: {self.reason}"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, WriteFailure) and (self.path, self.reason) == (other.path, other.reason)

    def __hash__(self) -> int:
        return hash((self.path, self.reason))

    @classmethod
    def of(cls, path: str | os.PathLike[str], exc: BaseException) -> WriteFailure:
        return cls(path, reason(exc))


def reason(exc: BaseException) -> str:
    """What the operating system said: ``No space left on device``, not a wrapper's words.
    SQLite says "database or disk is full" for ENOSPC; it is named as the OS names it."""
    if isinstance(exc, OSError):
        return exc.strerror or str(exc) or type(exc).__name__
    code = getattr(exc, "sqlite_errorcode", None)
    if isinstance(code, int) and code & 0xFF == _SQLITE_FULL:
        return os.strerror(errno.ENOSPC)
    return str(exc) or type(exc).__name__


def is_write_error(exc: BaseException) -> bool:
    """Whether ``exc``, raised by a write, is the disk's refusal rather than a bug: any
    OSError, or an SQLite error whose code is a permission, read-only, I/O, full or
    cannot-open error (a constraint or a syntax error stays a bug and is raised)."""
    if isinstance(exc, OSError):
        return True
    code = getattr(exc, "sqlite_errorcode", None)
    return isinstance(code, int) and code & 0xFF in _SQLITE_WRITE_CODES


class Failures:
    """The write failure of one run: the first recorded wins."""

    def __init__(self) -> None:
        self._lock = threading.Lock()  # writers record from the loop and from other threads
        self.failure: WriteFailure | None = None

    def add(self, failure: WriteFailure) -> WriteFailure:
        """Record ``failure`` unless one is recorded already; the run's failure."""
        with self._lock:
            if self.failure is None:
                self.failure = failure
            return self.failure


_lock = threading.Lock()
_watched: dict[str, tuple[Failures, int]] = {}  # directory -> (its failures, how many watch it)


def _key(path: str | os.PathLike[str]) -> str:
    # Not resolve(): a file that is a link (e.g. to /dev/full) still belongs to its folder.
    return os.path.abspath(os.fspath(path))


def watch(directory: str | os.PathLike[str]) -> Failures:
    """The failures of writes under ``directory`` from now on; watching it again returns the
    same ``Failures`` (a run's runner and its simulation share one). ``unwatch`` once per call."""
    key = _key(directory)
    with _lock:
        failures, count = _watched.get(key, (None, 0))
        if failures is None:
            failures = Failures()
        _watched[key] = (failures, count + 1)
        return failures


def unwatch(directory: str | os.PathLike[str]) -> None:
    key = _key(directory)
    with _lock:
        failures, count = _watched.get(key, (None, 0))
        if failures is None:
            return
        if count <= 1:
            del _watched[key]
        else:
            _watched[key] = (failures, count - 1)


def watcher(path: str | os.PathLike[str]) -> Failures | None:
    """The failures of the deepest watched directory holding ``path``."""
    key = Path(_key(path))
    with _lock:
        for folder in (key, *key.parents):
            found = _watched.get(str(folder))
            if found is not None:
                return found[0]
    return None


def report(failure: WriteFailure) -> WriteFailure:
    """Hand a failure to the run that watches its path (if any); returns it."""
    failures = watcher(failure.path)
    if failures is not None:
        failures.add(failure)
    return failure


def record(path: str | os.PathLike[str], exc: BaseException) -> WriteFailure:
    """A write to ``path`` raised ``exc``: the failure, reported to its run."""
    return report(WriteFailure.of(path, exc))


def prepare_out_dir(path: Path, option: str = "--out") -> Path:
    """Create an output folder for a command before anything runs; raises ``OutDirError``
    naming the folder when it cannot be created or written (a read-only file system, a
    missing permission, a parent that is a file). A full file system is found later, by
    the first write that fails."""
    try:
        path.mkdir(parents=True, exist_ok=True, mode=0o700)
    except OSError as exc:
        raise OutDirError(f"{option} {path}: cannot create the folder: {reason(exc)}") from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise OutDirError(f"{option} {path}: cannot write in the folder: "
                          f"{os.strerror(errno.EROFS) if _read_only(path) else os.strerror(errno.EACCES)}")
    return path


def _read_only(path: Path) -> bool:
    try:
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except OSError:
        return False


class OutDirError(ValueError):
    """An output folder a command cannot use; the message is one line naming it."""
