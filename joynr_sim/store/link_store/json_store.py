"""The seed's JSON layout of a link store, in one file replaced atomically on every write.

The layout: {"version", "sendingLinks": {remote: {name: {"source": {...}}}},
"receivingLinks": {remote: {name: {"target": {...}}}}}; version 2 adds "durability" to
the terminus and "unsettled": {tag: state} next to it; version 3 adds "owner" next to it,
{"connection", "holder"} or null.

The seed: "a JSON VirtualHost might be able to persist the configuration but not the
settled state" (rewriting the whole file per delivery cannot keep up with "high frequency
& low latency update of unsettled state"). So this store keeps terminus durability 1 at
most: termini, no unsettled deliveries; a version 2 file's unsettled maps are dropped when
it is upgraded. One process uses a file at a time: the records live in its memory.

A write that fails is recorded as the run's write failure (``joynr_sim.write_failure``) and
raised as ``LinkStoreError``, which the link registry turns into an event.
"""

from __future__ import annotations

import copy
import json
import os
import threading
from pathlib import Path
from typing import Any

from ... import write_failure
from ...core.links import LinkStoreError, Role, StoredLink, Terminus
from .records import (
    CURRENT_VERSION,
    RecordKey,
    StoreVersionError,
    persistable,
    refuse_newer,
)

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
        raise refuse_newer(where, version)
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


def _json_v2_to_v3(doc: dict[str, Any]) -> dict[str, Any]:
    """v2 did not record the connection a link is attached on: every link is suspended."""
    doc = copy.deepcopy(doc)
    for section, _ in _SECTIONS.values():
        for links in doc.get(section, {}).values():
            for entry in links.values():
                entry["owner"] = None
    doc["version"] = "3.0"
    return doc


_JSON_MIGRATIONS = {1: _json_v1_to_v2, 2: _json_v2_to_v3}


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


def _owner_from_json(where: str, value: object) -> tuple[str | None, str | None]:
    if value is None:
        return None, None
    if not isinstance(value, dict):
        raise LinkStoreError(f"{where}: expected {{\"connection\", \"holder\"}} or null, got {value!r}")
    connection, holder = value.get("connection"), value.get("holder")
    if not isinstance(connection, str) or not connection:
        raise LinkStoreError(f"{where}.connection: expected a connection id, got {connection!r}")
    if holder is not None and (not isinstance(holder, str) or not holder):
        raise LinkStoreError(f"{where}.holder: expected a holder or null, got {holder!r}")
    return connection, holder


class JsonLinkStore:
    """The seed's JSON layout in one file, replaced atomically on every write (temp file,
    fsync, os.replace, fsync of the directory). Keeps configuration only (durability 1)."""

    max_durability = 1

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self.upgraded_from: int | None = None
        self._records: dict[RecordKey, StoredLink] = {}
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

    def _parse(self, doc: dict[str, Any]) -> dict[RecordKey, StoredLink]:
        records: dict[RecordKey, StoredLink] = {}
        for role, (section, terminus_field) in _SECTIONS.items():
            for remote, links in doc.get(section, {}).items():
                for name, entry in links.items():
                    where = f"{self.path}: {section}[{remote!r}][{name!r}]"
                    terminus = _terminus_from_json(f"{where}.{terminus_field}",
                                                   entry.get(terminus_field))
                    owner, holder = _owner_from_json(f"{where}.owner", entry.get("owner"))
                    kept = persistable(
                        StoredLink(role, remote, name, terminus, (), owner, holder),
                        self.max_durability,
                    )
                    if kept is not None:
                        records[(role, remote, name)] = kept
        return records

    def _document(self, records: dict[RecordKey, StoredLink]) -> dict[str, Any]:
        doc: dict[str, Any] = {"version": f"{CURRENT_VERSION}.0"}
        for section, _ in _SECTIONS.values():
            doc[section] = {}
        for (role, remote, name), record in sorted(records.items()):
            section, terminus_field = _SECTIONS[role]  # type: ignore[index]
            owner = None if record.owner is None else {
                "connection": record.owner, "holder": record.holder}
            entry: dict[str, Any] = {terminus_field: _terminus_to_json(record.terminus), "owner": owner}
            doc[section].setdefault(remote, {})[name] = entry
        return doc

    def _write(self, records: dict[RecordKey, StoredLink]) -> None:
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
            write_failure.record(self.path, e)  # the run's write failure; the registry gets the error
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

    def _commit(self, records: dict[RecordKey, StoredLink]) -> None:
        self._write(records)  # memory follows only a successful write
        self._records = records

    def load(self) -> list[StoredLink]:
        with self._lock:
            return list(self._records.values())

    def find(self, role: Role, remote_container_id: str, link_name: str) -> StoredLink | None:
        with self._lock:
            return self._records.get((role, remote_container_id, link_name))

    def save(self, record: StoredLink) -> None:
        kept = persistable(record, self.max_durability)
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

    # No record is kept at durability 2, so there are no unsettled deliveries to keep.
    def put_unsettled(self, role: Role, remote_container_id: str, link_name: str,
                      tag: str, state: str | None) -> None:
        pass

    def remove_unsettled(self, role: Role, remote_container_id: str, link_name: str,
                         tag: str) -> None:
        pass

    def close(self) -> None:
        pass
