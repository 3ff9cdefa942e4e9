"""What the link registry persists through: the record of one link and the store protocol.

The stores themselves (memory, JSON file, SQLite) live in ``joynr_sim.store.link_store``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from .model import Role, Terminus


class LinkStoreError(Exception):
    """A link store could not be opened, read or written."""


@dataclass(frozen=True)
class StoredLink:
    """What a store holds for one link: its local terminus and, at durability 2, its
    unsettled deliveries as sorted (tag, state) pairs."""

    role: Role
    remote_container_id: str
    link_name: str
    terminus: Terminus
    unsettled: tuple[tuple[str, str | None], ...] = ()


class LinkStore(Protocol):
    """What the registry needs of a store (see joynr_sim.store.link_store). Failures raise
    LinkStoreError."""

    max_durability: int

    def load(self) -> list[StoredLink]: ...
    def save(self, record: StoredLink) -> None: ...
    def delete(self, role: Role, remote_container_id: str, link_name: str) -> None: ...
    def put_unsettled(
        self, role: Role, remote_container_id: str, link_name: str, tag: str, state: str | None
    ) -> None: ...
    def remove_unsettled(
        self, role: Role, remote_container_id: str, link_name: str, tag: str
    ) -> None: ...
