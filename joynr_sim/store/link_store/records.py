"""What every link store shares: the format version, what a record keeps per durability,
the unsettled deliveries kept inside records, and the store that is only records in memory."""

from __future__ import annotations

import threading

from ...core.links import (
    ROLES,
    LinkStoreError,
    Role,
    StoredLink,
    TerminusDurability,
)

CURRENT_VERSION = 2


class StoreVersionError(LinkStoreError):
    """The store's format version is unknown or newer than this code."""


def refuse_newer(where: str, version: int) -> StoreVersionError:
    return StoreVersionError(
        f"{where}: format version {version} is newer than {CURRENT_VERSION}: cannot downgrade"
    )


def persistable(record: StoredLink) -> StoredLink | None:
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


RecordKey = tuple[str, str, str]  # (role, remote container id, link name)


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


class UnsettledInRecords:
    """Unsettled deliveries kept inside each link's record (memory and JSON stores); a
    store says how a changed record is kept (``_keep``, called under its lock)."""

    _lock: threading.Lock
    _records: dict[RecordKey, StoredLink]

    def put_unsettled(self, role: Role, remote_container_id: str, link_name: str,
                      tag: str, state: str | None) -> None:
        self._change_unsettled((role, remote_container_id, link_name), tag, state, False)

    def remove_unsettled(self, role: Role, remote_container_id: str, link_name: str,
                         tag: str) -> None:
        self._change_unsettled((role, remote_container_id, link_name), tag, None, True)

    def _change_unsettled(self, key: RecordKey, tag: str, state: str | None, remove: bool) -> None:
        with self._lock:
            changed = _with_unsettled(self._records.get(key), tag, state, remove)
            if changed is not None:
                self._keep(key, changed)

    def _keep(self, key: RecordKey, record: StoredLink) -> None:
        raise NotImplementedError


class MemoryLinkStore(UnsettledInRecords):
    """A store in process memory: survives a registry restart, not a process restart."""

    max_durability = 2
    version = CURRENT_VERSION
    upgraded_from: int | None = None

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._records: dict[RecordKey, StoredLink] = {}

    def load(self) -> list[StoredLink]:
        with self._lock:
            return list(self._records.values())

    def save(self, record: StoredLink) -> None:
        kept = persistable(record)
        key = (record.role, record.remote_container_id, record.link_name)
        with self._lock:
            if kept is None:
                self._records.pop(key, None)
            else:
                self._records[key] = kept

    def delete(self, role: Role, remote_container_id: str, link_name: str) -> None:
        with self._lock:
            self._records.pop((role, remote_container_id, link_name), None)

    def _keep(self, key: RecordKey, record: StoredLink) -> None:
        self._records[key] = record

    def close(self) -> None:
        pass
