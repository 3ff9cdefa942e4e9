"""Link stores: where a LinkRegistry keeps termini across restarts.

Every store has a format version. Opening an older one upgrades it in one transaction;
opening a newer one is refused ("cannot downgrade") and leaves it untouched.

Terminus durability decides what is kept: 0 nothing, 1 the terminus (configuration),
2 the terminus and its unsettled deliveries. Qpid's stores stop at 1; these keep all three.

Format versions:
  1  the seed's layout: termini without durability, no unsettled state (durability 1 by
     definition: configuration only).
  2  adds the terminus durability and, for durability 2, the unsettled deliveries.
"""

from __future__ import annotations

import copy
import json
import os
import sqlite3
import threading
from pathlib import Path
from typing import Any

from ..core.links import (
    ROLES,
    LinkStoreError,
    Role,
    StoredLink,
    Terminus,
    TerminusDurability,
)

CURRENT_VERSION = 2


class StoreVersionError(LinkStoreError):
    """The store's format version is unknown or newer than this code."""


def _refuse_newer(where: str, version: int) -> StoreVersionError:
    return StoreVersionError(
        f"{where}: format version {version} is newer than {CURRENT_VERSION}: cannot downgrade"
    )


def _persistable(record: StoredLink) -> StoredLink | None:
    """What a store keeps of a record, per its terminus durability."""
    if not isinstance(record, StoredLink) or record.role not in ROLES:
        raise LinkStoreError(f"record: expected a StoredLink, got {record!r}")
    durability = record.terminus.durability
    if durability == TerminusDurability.NONE:
        return None
    if durability == TerminusDurability.CONFIGURATION and record.unsettled:
        return StoredLink(record.role, record.remote_container_id, record.link_name,
                          record.terminus)
    return record


_Key = tuple[str, str, str]  # (role, remote container id, link name)


def _with_unsettled(
    record: StoredLink | None, tag: str, state: str | None, remove: bool
) -> StoredLink | None:
    """The record with one unsettled delivery set or removed; None when nothing changes
    (no record, a record below durability 2, or removing a tag it does not hold)."""
    if record is None or record.terminus.durability != TerminusDurability.UNSETTLED_STATE:
        return None
    pairs = dict(record.unsettled)
    if remove:
        if tag not in pairs:
            return None
        del pairs[tag]
    else:
        pairs[tag] = state
    return StoredLink(record.role, record.remote_container_id, record.link_name, record.terminus,
                      tuple(sorted(pairs.items())))


class _UnsettledInRecords:
    """Unsettled deliveries kept inside each link's record (memory and JSON stores); a
    store says how a changed record is kept (``_keep``, called under its lock)."""

    _lock: threading.Lock
    _records: dict[_Key, StoredLink]

    def put_unsettled(self, role: Role, remote_container_id: str, link_name: str,
                      tag: str, state: str | None) -> None:
        self._change_unsettled((role, remote_container_id, link_name), tag, state, False)

    def remove_unsettled(self, role: Role, remote_container_id: str, link_name: str,
                         tag: str) -> None:
        self._change_unsettled((role, remote_container_id, link_name), tag, None, True)

    def _change_unsettled(self, key: _Key, tag: str, state: str | None, remove: bool) -> None:
        with self._lock:
            changed = _with_unsettled(self._records.get(key), tag, state, remove)
            if changed is not None:
                self._keep(key, changed)

    def _keep(self, key: _Key, record: StoredLink) -> None:
        raise NotImplementedError


class MemoryLinkStore(_UnsettledInRecords):
    """A store in process memory: survives a registry restart, not a process restart."""

    max_durability = 2
    version = CURRENT_VERSION
    upgraded_from: int | None = None

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._records: dict[_Key, StoredLink] = {}

    def load(self) -> list[StoredLink]:
        with self._lock:
            return list(self._records.values())

    def save(self, record: StoredLink) -> None:
        kept = _persistable(record)
        key = (record.role, record.remote_container_id, record.link_name)
        with self._lock:
            if kept is None:
                self._records.pop(key, None)
            else:
                self._records[key] = kept

    def delete(self, role: Role, remote_container_id: str, link_name: str) -> None:
        with self._lock:
            self._records.pop((role, remote_container_id, link_name), None)

    def _keep(self, key: _Key, record: StoredLink) -> None:
        self._records[key] = record

    def close(self) -> None:
        pass


# -- JSON -----------------------------------------------------------------------------

# The seed's layout: {"version", "sendingLinks": {remote: {name: {"source": {...}}}},
# "receivingLinks": {remote: {name: {"target": {...}}}}}; version 2 adds "durability" to
# the terminus and "unsettled": {tag: state} next to it.
_SECTIONS: dict[Role, tuple[str, str]] = {
    "sending": ("sendingLinks", "source"),
    "receiving": ("receivingLinks", "target"),
}


def _parse_json_version(where: str, value: object) -> int:
    # The seed writes "1.0"; the major number is the format version.
    if isinstance(value, int) and not isinstance(value, bool):
        version = value
    elif isinstance(value, str) and value.split(".")[0].isdigit():
        version = int(value.split(".")[0])
    else:
        raise StoreVersionError(f"{where}: version: expected e.g. \"2.0\", got {value!r}")
    if version < 1:
        raise StoreVersionError(f"{where}: version: no format version {version}")
    if version > CURRENT_VERSION:
        raise _refuse_newer(where, version)
    return version


def _json_v1_to_v2(doc: dict[str, Any]) -> dict[str, Any]:
    """v1 kept only configuration: every terminus is durability 1, nothing unsettled."""
    doc = copy.deepcopy(doc)
    for section, terminus_field in _SECTIONS.values():
        for links in doc.get(section, {}).values():
            for entry in links.values():
                entry[terminus_field] = {**entry.get(terminus_field, {}), "durability": 1}
                entry["unsettled"] = {}
    doc["version"] = "2.0"
    return doc


_JSON_MIGRATIONS = {1: _json_v1_to_v2}


def _terminus_to_json(t: Terminus) -> dict[str, Any]:
    return {"address": t.address, "durability": t.durability, "properties": dict(t.properties)}


def _terminus_from_json(where: str, value: object) -> Terminus:
    if not isinstance(value, dict):
        raise LinkStoreError(f"{where}: expected a terminus object, got {value!r}")
    try:
        return Terminus(value.get("address"), value.get("durability", 1),
                        tuple(value.get("properties", {}).items()))
    except (ValueError, AttributeError) as e:
        raise LinkStoreError(f"{where}: {e}") from e


class JsonLinkStore(_UnsettledInRecords):
    """The seed's JSON layout in one file, replaced atomically on every write (temp file,
    fsync, os.replace, fsync of the directory)."""

    max_durability = 2

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self.upgraded_from: int | None = None
        self._records: dict[_Key, StoredLink] = {}
        if not self.path.exists():
            self._write({})
        else:
            self._open()
        self.version = CURRENT_VERSION

    def _open(self) -> None:
        try:
            doc = json.loads(self.path.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
            raise LinkStoreError(f"{self.path}: cannot read the link store: {e}") from e
        if not isinstance(doc, dict):
            raise LinkStoreError(f"{self.path}: expected a JSON object, got {type(doc).__name__}")
        version = _parse_json_version(str(self.path), doc.get("version"))
        if version < CURRENT_VERSION:
            for step in range(version, CURRENT_VERSION):
                doc = _JSON_MIGRATIONS[step](doc)
        records = self._parse(doc)
        if version < CURRENT_VERSION:
            # The upgrade is one atomic replace: the old file stays whole until it is done.
            self._write(records)
            self.upgraded_from = version
        self._records = records

    def _parse(self, doc: dict[str, Any]) -> dict[_Key, StoredLink]:
        records: dict[_Key, StoredLink] = {}
        for role, (section, terminus_field) in _SECTIONS.items():
            for remote, links in doc.get(section, {}).items():
                for name, entry in links.items():
                    where = f"{self.path}: {section}[{remote!r}][{name!r}]"
                    terminus = _terminus_from_json(f"{where}.{terminus_field}",
                                                   entry.get(terminus_field))
                    unsettled = entry.get("unsettled", {})
                    if not isinstance(unsettled, dict):
                        raise LinkStoreError(f"{where}.unsettled: expected an object")
                    records[(role, remote, name)] = StoredLink(
                        role, remote, name, terminus, tuple(sorted(unsettled.items()))
                    )
        return records

    def _document(self, records: dict[_Key, StoredLink]) -> dict[str, Any]:
        doc: dict[str, Any] = {"version": f"{CURRENT_VERSION}.0"}
        for section, _ in _SECTIONS.values():
            doc[section] = {}
        for (role, remote, name), record in sorted(records.items()):
            section, terminus_field = _SECTIONS[role]  # type: ignore[index]
            entry: dict[str, Any] = {terminus_field: _terminus_to_json(record.terminus)}
            entry["unsettled"] = dict(record.unsettled)
            doc[section].setdefault(remote, {})[name] = entry
        return doc

    def _write(self, records: dict[_Key, StoredLink]) -> None:
        text = json.dumps(self._document(records), indent=2, ensure_ascii=False)
        tmp = self.path.with_name(f".{self.path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
        try:
            with open(tmp, "w", encoding="utf-8") as f:
                f.write(text)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)
            self._fsync_dir()
        except OSError as e:
            try:
                tmp.unlink(missing_ok=True)
            except OSError:
                pass
            raise LinkStoreError(f"{self.path}: cannot write the link store: {e}") from e

    def _fsync_dir(self) -> None:
        # Makes the rename itself durable; not every platform can open a directory.
        try:
            fd = os.open(self.path.parent, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        except OSError:
            return
        try:
            os.fsync(fd)
        except OSError:
            pass
        finally:
            os.close(fd)

    def _commit(self, records: dict[_Key, StoredLink]) -> None:
        self._write(records)  # memory follows only a successful write
        self._records = records

    def load(self) -> list[StoredLink]:
        with self._lock:
            return list(self._records.values())

    def save(self, record: StoredLink) -> None:
        kept = _persistable(record)
        key = (record.role, record.remote_container_id, record.link_name)
        with self._lock:
            records = dict(self._records)
            if kept is None:
                if records.pop(key, None) is None:
                    return
            else:
                records[key] = kept
            self._commit(records)

    def delete(self, role: Role, remote_container_id: str, link_name: str) -> None:
        with self._lock:
            records = dict(self._records)
            if records.pop((role, remote_container_id, link_name), None) is not None:
                self._commit(records)

    def _keep(self, key: _Key, record: StoredLink) -> None:
        self._commit({**self._records, key: record})

    def close(self) -> None:
        pass


# -- SQLite ---------------------------------------------------------------------------

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

_SQLITE_MIGRATIONS = {1: _SQLITE_V1_TO_V2}


def _sql_statements(script: str) -> list[str]:
    return [s.strip() for s in script.split(";") if s.strip()]


class SqliteLinkStore:
    """Links in an SQLite file: a links table, an unsettled table (one row per delivery,
    so an update is one row, not the whole store) and a schema_version table."""

    max_durability = 2

    def __init__(self, path: str | os.PathLike[str], synchronous: str = "FULL") -> None:
        """synchronous: SQLite's setting; OFF survives a process crash, not a power cut,
        which is all a simulated crash needs and spares an fsync per delivery."""
        if synchronous not in ("OFF", "NORMAL", "FULL", "EXTRA"):
            raise LinkStoreError(f"synchronous: expected OFF, NORMAL, FULL or EXTRA, got {synchronous!r}")
        self.path = Path(path)
        self._lock = threading.Lock()
        self.upgraded_from: int | None = None
        try:
            # Autocommit mode: transactions are explicit (BEGIN IMMEDIATE ... COMMIT).
            self._db = sqlite3.connect(self.path, isolation_level=None,
                                       check_same_thread=False)
            self._db.execute(f"PRAGMA synchronous={synchronous}")
        except sqlite3.Error as e:
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
            raise LinkStoreError(f"{self.path}: cannot read the link store: {e}") from e
        if len(rows) != 1 or not isinstance(rows[0][0], int):
            raise StoreVersionError(f"{self.path}: schema_version: expected one integer row, "
                                    f"got {rows!r}")
        version = rows[0][0]
        if version > CURRENT_VERSION:
            raise _refuse_newer(str(self.path), version)
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
                self._db.execute("ROLLBACK")
                raise
        except sqlite3.Error as e:
            raise LinkStoreError(f"{self.path}: link store write failed: {e}") from e

    def load(self) -> list[StoredLink]:
        with self._lock:
            try:
                links = self._db.execute(
                    "SELECT role, remote_container_id, link_name, address, properties, "
                    "durability FROM links ORDER BY role, remote_container_id, link_name"
                ).fetchall()
                unsettled: dict[_Key, list[tuple[str, str | None]]] = {}
                for role, remote, name, tag, state in self._db.execute(
                    "SELECT role, remote_container_id, link_name, tag, state FROM unsettled "
                    "ORDER BY tag"
                ):
                    unsettled.setdefault((role, remote, name), []).append((tag, state))
            except sqlite3.Error as e:
                raise LinkStoreError(f"{self.path}: cannot read the link store: {e}") from e
        records = []
        for role, remote, name, address, properties, durability in links:
            where = f"{self.path}: links[{role!r}, {remote!r}, {name!r}]"
            if role not in ROLES:
                raise LinkStoreError(f"{where}: role: expected one of {ROLES}, got {role!r}")
            try:
                terminus = Terminus(address, durability, tuple(json.loads(properties).items()))
            except (ValueError, AttributeError) as e:
                raise LinkStoreError(f"{where}: {e}") from e
            pairs = unsettled.get((role, remote, name), []) if durability == 2 else []
            records.append(StoredLink(role, remote, name, terminus, tuple(pairs)))
        return records

    def save(self, record: StoredLink) -> None:
        kept = _persistable(record)
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
                "INSERT INTO links (role, remote_container_id, link_name, address, properties, "
                "durability) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT "
                "(role, remote_container_id, link_name) DO UPDATE SET address = excluded.address, "
                "properties = excluded.properties, durability = excluded.durability",
                (*key, t.address, json.dumps(dict(t.properties)), t.durability),
            ))
            statements.extend(
                ("INSERT INTO unsettled (role, remote_container_id, link_name, tag, state) "
                 "VALUES (?, ?, ?, ?, ?)", (*key, tag, state))
                for tag, state in kept.unsettled
            )
        with self._lock:
            self._transaction(statements)

    def delete(self, role: Role, remote_container_id: str, link_name: str) -> None:
        key = (role, remote_container_id, link_name)
        where = "WHERE role = ? AND remote_container_id = ? AND link_name = ?"
        with self._lock:
            self._transaction([(f"DELETE FROM unsettled {where}", key),
                               (f"DELETE FROM links {where}", key)])

    def put_unsettled(self, role: Role, remote_container_id: str, link_name: str,
                      tag: str, state: str | None) -> None:
        key = (role, remote_container_id, link_name)
        with self._lock:
            self._transaction([(
                "INSERT INTO unsettled (role, remote_container_id, link_name, tag, state) "
                "SELECT ?, ?, ?, ?, ? WHERE EXISTS (SELECT 1 FROM links WHERE role = ? "
                "AND remote_container_id = ? AND link_name = ? AND durability = 2) "
                "ON CONFLICT (role, remote_container_id, link_name, tag) "
                "DO UPDATE SET state = excluded.state",
                (*key, tag, state, *key),
            )])

    def remove_unsettled(self, role: Role, remote_container_id: str, link_name: str,
                         tag: str) -> None:
        with self._lock:
            self._transaction([(
                "DELETE FROM unsettled WHERE role = ? AND remote_container_id = ? "
                "AND link_name = ? AND tag = ?",
                (role, remote_container_id, link_name, tag),
            )])

    def close(self) -> None:
        with self._lock:
            self._db.close()


def open_link_store(path: str | os.PathLike[str]) -> JsonLinkStore | SqliteLinkStore:
    """A JsonLinkStore for *.json, an SqliteLinkStore otherwise."""
    return JsonLinkStore(path) if str(path).endswith(".json") else SqliteLinkStore(path)
