"""A link store in an SQLite file, one row per link and one per unsettled delivery.

With ``group_commit=True`` (a runtime's own store) the unsettled deliveries a turn of the
event loop adds and settles are written in one transaction at its end (``GroupCommit``),
coalesced per delivery: one settled in the turn it was added costs one statement. Saving
or deleting a link and every read commit what is pending first, so the file always holds
the writes in the order they were made.

A write the disk refuses (full, read-only, an I/O error) is recorded as the run's write
failure (``joynr_sim.write_failure``). Saving or deleting a link still raises
``LinkStoreError``, which the link registry turns into an event (store and memory stay as
they were); the unsettled deliveries of a group commit are written off the message path,
so their failure is only recorded, never raised into the next delivery.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
from pathlib import Path
from typing import Any

from ... import write_failure
from ...core.links import ROLES, LinkStoreError, Role, StoredLink, Terminus
from ...write_failure import is_write_error
from ..group_commit import GroupCommit
from .records import CURRENT_VERSION, RecordKey, StoreVersionError, persistable, refuse_newer

_SQLITE_V1 = """
CREATE TABLE schema_version (version INTEGER NOT NULL);
CREATE TABLE links (
    role TEXT NOT NULL,
    remote_container_id TEXT NOT NULL,
    link_name TEXT NOT NULL,
    address TEXT,
    properties TEXT NOT NULL DEFAULT '{}',
    PRIMARY KEY (role, remote_container_id, link_name)
);
"""

# v1 kept configuration only, so every existing row is durability 1.
_SQLITE_V1_TO_V2 = """
ALTER TABLE links ADD COLUMN durability INTEGER NOT NULL DEFAULT 1;
CREATE TABLE unsettled (
    role TEXT NOT NULL,
    remote_container_id TEXT NOT NULL,
    link_name TEXT NOT NULL,
    tag TEXT NOT NULL,
    state TEXT,
    PRIMARY KEY (role, remote_container_id, link_name, tag)
);
"""

# v2 did not record the connection a link is attached on: every link is suspended.
_SQLITE_V2_TO_V3 = """
ALTER TABLE links ADD COLUMN owner TEXT;
ALTER TABLE links ADD COLUMN holder TEXT;
"""

_SQLITE_MIGRATIONS = {1: _SQLITE_V1_TO_V2, 2: _SQLITE_V2_TO_V3}


def _sql_statements(script: str) -> list[str]:
    return [s.strip() for s in script.split(";") if s.strip()]


class SqliteLinkStore:
    """Links in an SQLite file: a links table, an unsettled table (one row per delivery,
    so an update is one row, not the whole store) and a schema_version table. Keeps all
    three durabilities. Every read and write is a transaction of its own, so registries
    of several processes can share the file."""

    max_durability = 2

    def __init__(self, path: str | os.PathLike[str], synchronous: str = "FULL",
                 group_commit: bool = False) -> None:
        """synchronous: SQLite's setting; OFF survives a process crash, not a power cut,
        which is all a simulated crash needs and spares an fsync per delivery.
        group_commit: unsettled deliveries are committed once per event-loop turn."""
        if synchronous not in ("OFF", "NORMAL", "FULL", "EXTRA"):
            raise LinkStoreError(
                f"synchronous: expected OFF, NORMAL, FULL or EXTRA, got {synchronous!r}")
        self.path = Path(path)
        self._lock = threading.Lock()
        self.upgraded_from: int | None = None
        # (role, remote, link name, tag) -> ("put", state) | ("remove", None), in write order
        self._pending: dict[tuple[str, str, str, str], tuple[str, str | None]] = {}
        self._failed: LinkStoreError | None = None  # a group commit that failed, raised next
        self._link_writes = 0  # saves and deletes of link records through this object
        self.batch = GroupCommit(self._commit_pending) if group_commit else None
        try:
            # Autocommit mode: transactions are explicit (BEGIN IMMEDIATE ... COMMIT).
            self._db = sqlite3.connect(self.path, isolation_level=None,
                                       check_same_thread=False)
            self._db.execute(f"PRAGMA synchronous={synchronous}")
            if group_commit:
                # A write-ahead log appends a commit; the rollback journal creates and
                # deletes a file per transaction, about ten times the cost.
                self._db.execute("PRAGMA journal_mode=WAL")
        except sqlite3.Error as e:
            self._refused(e)
            raise LinkStoreError(f"{self.path}: cannot open the link store: {e}") from e
        try:
            self._open()
        except BaseException:
            self._db.close()
            raise
        self.version = CURRENT_VERSION

    def _open(self) -> None:
        try:
            tables = {row[0] for row in self._db.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table'")}
            if not tables:
                self._transaction(
                    _sql_statements(_SQLITE_V1)
                    + [s for step in sorted(_SQLITE_MIGRATIONS)
                       for s in _sql_statements(_SQLITE_MIGRATIONS[step])]
                    + [f"INSERT INTO schema_version (version) VALUES ({CURRENT_VERSION})"]
                )
                return
            if "schema_version" not in tables:
                raise LinkStoreError(f"{self.path}: not a link store (no schema_version table)")
            rows = self._db.execute("SELECT version FROM schema_version").fetchall()
        except sqlite3.Error as e:
            self._refused(e)
            raise LinkStoreError(f"{self.path}: cannot read the link store: {e}") from e
        if len(rows) != 1 or not isinstance(rows[0][0], int):
            raise StoreVersionError(f"{self.path}: schema_version: expected one integer row, "
                                    f"got {rows!r}")
        version = rows[0][0]
        if version > CURRENT_VERSION:
            raise refuse_newer(str(self.path), version)
        if version < 1:
            raise StoreVersionError(f"{self.path}: schema_version: no format version {version}")
        if version < CURRENT_VERSION:
            statements = [s for step in range(version, CURRENT_VERSION)
                          for s in _sql_statements(_SQLITE_MIGRATIONS[step])]
            statements.append(f"UPDATE schema_version SET version = {CURRENT_VERSION}")
            self._transaction(statements)
            self.upgraded_from = version

    def _transaction(self, statements: list[str | tuple[str, tuple[Any, ...]]]) -> None:
        """Run statements in one transaction: all of them or none."""
        try:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                for statement in statements:
                    if isinstance(statement, tuple):
                        self._db.execute(*statement)
                    else:
                        self._db.execute(statement)
                self._db.execute("COMMIT")
            except BaseException:
                # A full disk makes SQLite roll back itself: a second ROLLBACK would fail
                # and hide why the first statement did.
                if self._db.in_transaction:
                    self._db.execute("ROLLBACK")
                raise
        except sqlite3.Error as e:
            self._refused(e)
            raise LinkStoreError(f"{self.path}: link store write failed: {e}") from e

    def _refused(self, exc: sqlite3.Error) -> None:
        """Record an error the disk caused as the run's write failure."""
        if is_write_error(exc):
            write_failure.record(self.path, exc)

    def link_generation(self) -> tuple[int, int] | None:
        """What changes whenever a link's record may have: SQLite's data_version (commits
        of other connections to the file: another process's registry) and the saves and
        deletes of link records through this object (registries in this process share it).
        Equal twice, no holder took a link in between, so a periodic steal check has
        nothing to read. None when it cannot tell."""
        try:
            with self._lock:
                version = self._db.execute("PRAGMA data_version").fetchone()[0]
        except sqlite3.Error:
            return None
        return version, self._link_writes

    _LINK_COLUMNS = "role, remote_container_id, link_name, address, properties, durability, owner, holder"

    def load(self) -> list[StoredLink]:
        return self._read("", ())

    def find(self, role: Role, remote_container_id: str, link_name: str) -> StoredLink | None:
        key = (role, remote_container_id, link_name)
        found = self._read("WHERE role = ? AND remote_container_id = ? AND link_name = ?", key)
        return found[0] if found else None

    def _read(self, where: str, args: tuple[str, ...]) -> list[StoredLink]:
        """The links the where clause selects, with their unsettled deliveries: one snapshot."""
        self.flush()
        with self._lock:
            try:
                self._db.execute("BEGIN")
                try:
                    links = self._db.execute(
                        f"SELECT {self._LINK_COLUMNS} FROM links {where} "
                        "ORDER BY role, remote_container_id, link_name", args
                    ).fetchall()
                    unsettled: dict[RecordKey, list[tuple[str, str | None]]] = {}
                    for role, remote, name, tag, state in self._db.execute(
                        f"SELECT role, remote_container_id, link_name, tag, state FROM unsettled "
                        f"{where} ORDER BY tag", args
                    ):
                        unsettled.setdefault((role, remote, name), []).append((tag, state))
                finally:
                    self._db.execute("COMMIT")
            except sqlite3.Error as e:
                raise LinkStoreError(f"{self.path}: cannot read the link store: {e}") from e
        records = []
        for role, remote, name, address, properties, durability, owner, holder in links:
            where_ = f"{self.path}: links[{role!r}, {remote!r}, {name!r}]"
            if role not in ROLES:
                raise LinkStoreError(f"{where_}: role: expected one of {ROLES}, got {role!r}")
            try:
                terminus = Terminus(address, durability, tuple(json.loads(properties).items()))
            except (ValueError, AttributeError) as e:
                raise LinkStoreError(f"{where_}: {e}") from e
            for field, value in (("owner", owner), ("holder", holder)):
                if value is not None and (not isinstance(value, str) or not value):
                    raise LinkStoreError(f"{where_}: {field}: expected text or NULL, got {value!r}")
            pairs = tuple(unsettled.get((role, remote, name), ())) if durability == 2 else ()
            records.append(StoredLink(role, remote, name, terminus, pairs, owner, holder))
        return records

    def save(self, record: StoredLink) -> None:
        kept = persistable(record, self.max_durability)
        key = (record.role, record.remote_container_id, record.link_name)
        statements: list[str | tuple[str, tuple[Any, ...]]] = [
            ("DELETE FROM unsettled WHERE role = ? AND remote_container_id = ? "
             "AND link_name = ?", key)
        ]
        if kept is None:
            statements.append(("DELETE FROM links WHERE role = ? AND remote_container_id = ? "
                               "AND link_name = ?", key))
        else:
            t = kept.terminus
            statements.append((
                f"INSERT INTO links ({self._LINK_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT (role, remote_container_id, link_name) DO UPDATE SET "
                "address = excluded.address, properties = excluded.properties, "
                "durability = excluded.durability, owner = excluded.owner, "
                "holder = excluded.holder",
                (*key, t.address, json.dumps(dict(t.properties)), t.durability, kept.owner,
                 kept.holder),
            ))
            statements.extend(
                ("INSERT INTO unsettled (role, remote_container_id, link_name, tag, state) "
                 "VALUES (?, ?, ?, ?, ?)", (*key, tag, state))
                for tag, state in kept.unsettled
            )
        self.flush()
        with self._lock:
            self._link_writes += 1  # before: a failed write may still have changed the file
            self._transaction(statements)

    def delete(self, role: Role, remote_container_id: str, link_name: str) -> None:
        key = (role, remote_container_id, link_name)
        where = "WHERE role = ? AND remote_container_id = ? AND link_name = ?"
        self.flush()
        with self._lock:
            self._link_writes += 1
            self._transaction([(f"DELETE FROM unsettled {where}", key),
                               (f"DELETE FROM links {where}", key)])

    _PUT_UNSETTLED = (
        "INSERT INTO unsettled (role, remote_container_id, link_name, tag, state) "
        "SELECT ?, ?, ?, ?, ? WHERE EXISTS (SELECT 1 FROM links WHERE role = ? "
        "AND remote_container_id = ? AND link_name = ? AND durability = 2) "
        "ON CONFLICT (role, remote_container_id, link_name, tag) "
        "DO UPDATE SET state = excluded.state")
    _REMOVE_UNSETTLED = ("DELETE FROM unsettled WHERE role = ? AND remote_container_id = ? "
                         "AND link_name = ? AND tag = ?")

    def put_unsettled(self, role: Role, remote_container_id: str, link_name: str,
                      tag: str, state: str | None) -> None:
        self._unsettled((role, remote_container_id, link_name, tag), ("put", state))

    def remove_unsettled(self, role: Role, remote_container_id: str, link_name: str,
                         tag: str) -> None:
        self._unsettled((role, remote_container_id, link_name, tag), ("remove", None))

    def _unsettled(self, key: tuple[str, str, str, str], op: tuple[str, str | None]) -> None:
        self._raise_failed()
        with self._lock:
            self._pending.pop(key, None)  # the last write of a delivery is the one that counts
            self._pending[key] = op
        if self.batch is None:
            self._commit_pending()
            self._raise_failed()
        else:
            self.batch.pending()

    def _commit_pending(self) -> None:
        with self._lock:
            if not self._pending:
                return
            pending, self._pending = self._pending, {}
            statements: list[str | tuple[str, tuple[Any, ...]]] = []
            for (role, remote, name, tag), (op, state) in pending.items():
                key = (role, remote, name)
                if op == "put":
                    statements.append((self._PUT_UNSETTLED, (*key, tag, state, *key)))
                else:
                    statements.append((self._REMOVE_UNSETTLED, (*key, tag)))
            try:
                if len(statements) == 1:  # one statement is a transaction of its own
                    self._db.execute(*statements[0])
                else:
                    self._transaction(statements)
            except sqlite3.Error as e:
                if is_write_error(e):
                    self._refused(e)  # recorded: the run ends, no delivery fails for it
                else:
                    self._failed = LinkStoreError(f"{self.path}: link store write failed: {e}")
            except LinkStoreError as e:
                if not is_write_error(e.__cause__ or e):  # _transaction recorded a write error
                    self._failed = e

    def _raise_failed(self) -> None:
        if self._failed is not None:
            failed, self._failed = self._failed, None
            raise failed

    def flush(self) -> None:
        """Commit what is pending now; a failed group commit is raised here."""
        if self.batch is not None:
            self.batch.flush()
        self._raise_failed()

    def close(self) -> None:
        try:
            self.flush()
        finally:
            with self._lock:
                self._db.close()
