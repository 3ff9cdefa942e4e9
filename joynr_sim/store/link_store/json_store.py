"""The seed's JSON layout of a link store, in one file replaced atomically on every write.

The layout: {"version", "sendingLinks": {remote: {name: {"source": {...}}}},
"receivingLinks": {remote: {name: {"target": {...}}}}}; version 2 adds "durability" to
the terminus and "unsettled": {tag: state} next to it.
"""

from __future__ import annotations

import copy
import json
import os
import threading
from pathlib import Path
from typing import Any

from ...core.links import LinkStoreError, Role, StoredLink, Terminus
from .records import (
    CURRENT_VERSION,
    RecordKey,
    StoreVersionError,
    UnsettledInRecords,
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


class JsonLinkStore(UnsettledInRecords):
    """The seed's JSON layout in one file, replaced atomically on every write (temp file,
    fsync, os.replace, fsync of the directory)."""

    max_durability = 2

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
                    unsettled = entry.get("unsettled", {})
                    if not isinstance(unsettled, dict):
                        raise LinkStoreError(f"{where}.unsettled: expected an object")
                    records[(role, remote, name)] = StoredLink(
                        role, remote, name, terminus, tuple(sorted(unsettled.items()))
                    )
        return records

    def _document(self, records: dict[RecordKey, StoredLink]) -> dict[str, Any]:
        doc: dict[str, Any] = {"version": f"{CURRENT_VERSION}.0"}
        for section, _ in _SECTIONS.values():
            doc[section] = {}
        for (role, remote, name), record in sorted(records.items()):
            section, terminus_field = _SECTIONS[role]  # type: ignore[index]
            entry: dict[str, Any] = {terminus_field: _terminus_to_json(record.terminus)}
            entry["unsettled"] = dict(record.unsettled)
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

    def save(self, record: StoredLink) -> None:
        kept = persistable(record)
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

    def _keep(self, key: RecordKey, record: StoredLink) -> None:
        self._commit({**self._records, key: record})

    def close(self) -> None:
        pass
