"""What every link store shares: the format version, what a store keeps of a record per the
durability it advertises, and the memory store, which advertises none."""

from __future__ import annotations

from ...core.links import (
    ROLES,
    LinkStoreError,
    Role,
    StoredLink,
    TerminusDurability,
)

CURRENT_VERSION = 3


class StoreVersionError(LinkStoreError):
    """The store's format version is unknown or newer than this code."""


def refuse_newer(where: str, version: int) -> StoreVersionError:
    return StoreVersionError(
        f"{where}: format version {version} is newer than {CURRENT_VERSION}: cannot downgrade"
    )


def persistable(record: StoredLink, max_durability: int) -> StoredLink | None:
    """What a store that keeps at most max_durability keeps of a record: its terminus
    lowered to that durability, its unsettled deliveries only at durability 2, nothing at
    durability 0."""
    if not isinstance(record, StoredLink) or record.role not in ROLES:
        raise LinkStoreError(f"record: expected a StoredLink, got {record!r}")
    terminus = record.terminus
    if terminus.durability > max_durability:
        terminus = terminus.with_durability(max_durability)
    if terminus.durability == TerminusDurability.NONE:
        return None
    unsettled = record.unsettled if terminus.durability == TerminusDurability.UNSETTLED_STATE else ()
    if terminus == record.terminus and unsettled == record.unsettled:
        return record
    return StoredLink(record.role, record.remote_container_id, record.link_name, terminus,
                      unsettled, record.owner, record.holder)


RecordKey = tuple[str, str, str]  # (role, remote container id, link name)


class MemoryLinkStore:
    """The seed's memory store: "a Memory VH should not advertise any TerminusDurability".
    Process memory does not outlive the process, so it keeps nothing; a registry over it,
    like one without a store, grants durability 0 and after a restart knows nothing of
    before."""

    max_durability = int(TerminusDurability.NONE)
    version = CURRENT_VERSION
    upgraded_from: int | None = None

    def load(self) -> list[StoredLink]:
        return []

    def find(self, role: Role, remote_container_id: str, link_name: str) -> StoredLink | None:
        return None

    def save(self, record: StoredLink) -> None:
        persistable(record, self.max_durability)  # refuses what is not a record; keeps nothing

    def delete(self, role: Role, remote_container_id: str, link_name: str) -> None:
        pass

    def put_unsettled(self, role: Role, remote_container_id: str, link_name: str,
                      tag: str, state: str | None) -> None:
        pass

    def remove_unsettled(self, role: Role, remote_container_id: str, link_name: str,
                         tag: str) -> None:
        pass

    def close(self) -> None:
        pass
