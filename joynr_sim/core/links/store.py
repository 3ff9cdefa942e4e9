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
    """What a store holds for one link: its local terminus; at durability 2 its unsettled
    deliveries as sorted (tag, state) pairs; and the connection it is attached on (None:
    suspended) with the holder of that connection.

    The owner is what lets registries of different holders (processes) that share one
    store keep the link attached on one connection only: each reads the record before it
    attaches, detaches or purges the link. A holder is the process a registry belongs to
    and outlives its restarts, so a restarted registry knows that an owner of its own
    holder is a connection that died with its previous process."""

    role: Role
    remote_container_id: str
    link_name: str
    terminus: Terminus
    unsettled: tuple[tuple[str, str | None], ...] = ()
    owner: str | None = None
    holder: str | None = None


class LinkStore(Protocol):
    """What the registry needs of a store (see joynr_sim.store.link_store). Failures raise
    LinkStoreError.

    max_durability is the highest terminus durability the store can keep (the seed's
    "a Memory VH should not advertise any TerminusDurability"): the registry grants no
    more, and a store keeps no more of a record than it advertises."""

    max_durability: int

    def load(self) -> list[StoredLink]: ...
    def find(self, role: Role, remote_container_id: str, link_name: str) -> StoredLink | None: ...
    def save(self, record: StoredLink) -> None: ...
    def delete(self, role: Role, remote_container_id: str, link_name: str) -> None: ...
    def put_unsettled(
        self, role: Role, remote_container_id: str, link_name: str, tag: str, state: str | None
    ) -> None: ...
    def remove_unsettled(
        self, role: Role, remote_container_id: str, link_name: str, tag: str
    ) -> None: ...
