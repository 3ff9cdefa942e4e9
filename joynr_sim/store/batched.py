"""What the group-committed SQLite stores of a runtime share (the outbox, the persisted
routing table): one connection per file in WAL mode without fsync (a simulated crash ends a
process, not the machine), writes kept in memory by key until the end of the loop turn
(``GroupCommit``), and a crash that loses what the turn had not committed.

A subclass writes ``_pending`` (key -> row, None: delete) under ``_lock`` and calls
``_written``; its ``_apply`` turns what is pending into statements inside the commit.

A commit the disk refuses (full, read-only, an I/O error) is rolled back and recorded as the
run's write failure (``joynr_sim.write_failure``), never raised into the runtime: the
store commits nothing more, and the run ends. Any other error in a commit is a bug, and
raised.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import threading
from pathlib import Path
from typing import Any

from .. import write_failure
from ..write_failure import WriteFailure, is_write_error
from .group_commit import GroupCommit


class BatchedStore:
    def __init__(self, path: str | os.PathLike[str], schema: str, group_commit: bool) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self.failure: WriteFailure | None = None  # the commit the disk refused, if one was
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=OFF")
            self._db.execute(schema)
        except (OSError, sqlite3.Error) as exc:
            # A store that cannot be set up is the runtime's start failing, raised; the run
            # still learns which file and why.
            if is_write_error(exc):
                self.failure = write_failure.record(self.path, exc)
            raise
        self._pending: dict[Any, Any] = {}  # key -> row; None: delete
        self.batch = GroupCommit(self._commit) if group_commit else None
        self._closed = False

    def _written(self) -> None:
        if self.batch is None:
            self._commit()
        else:
            self.batch.pending()

    def _commit(self) -> None:
        with self._lock:
            if not self._pending or self._closed:
                return
            pending, self._pending = self._pending, {}
            if self.failure is not None:
                return  # a store the disk refused writes no more: the run is ending
            single = len(pending) == 1  # one statement is a transaction of its own
            try:
                if not single:
                    self._db.execute("BEGIN")
                self._apply(pending)
                if not single:
                    self._db.execute("COMMIT")
            except BaseException as exc:
                if self._db.in_transaction:
                    # SQLite may have rolled back already (a full disk does): no second error.
                    with contextlib.suppress(sqlite3.Error):
                        self._db.execute("ROLLBACK")
                self._failed(exc)
                if not is_write_error(exc):
                    raise
                self.failure = write_failure.record(self.path, exc)

    def _apply(self, pending: dict[Any, Any]) -> None:
        raise NotImplementedError

    def _failed(self, exc: BaseException) -> None:
        """A commit failed: told before it is raised or recorded (a subclass reports it)."""

    def flush(self) -> None:
        """Commit what is pending now (before a read, a close, or at the end of the turn)."""
        if self.batch is not None:
            self.batch.flush()
        else:
            self._commit()

    def abandon(self) -> None:
        """A simulated crash: what this turn had not committed is lost, as in a killed process."""
        if self.batch is not None:
            self.batch.discard()
        with self._lock:
            self._pending.clear()

    def close(self) -> None:
        self.flush()
        with self._lock:
            self._closed = True
            self._db.close()
