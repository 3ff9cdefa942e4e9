"""Link stores: where a LinkRegistry keeps termini across restarts.

Every store has a format version. Opening an older one upgrades it in one transaction;
opening a newer one is refused ("cannot downgrade") and leaves it untouched.

Terminus durability decides what is kept: 0 nothing, 1 the terminus (configuration),
2 the terminus and its unsettled deliveries. Each store advertises the most it can keep
(``max_durability``), as the seed has it: memory none (0), JSON the configuration (1),
SQLite all three (2); the registry grants no more.

Format versions:
  1  the seed's layout: termini without durability, no unsettled state (durability 1 by
     definition: configuration only).
  2  adds the terminus durability and, for durability 2, the unsettled deliveries.
  3  adds the connection a link is attached on and its holder (the process), so that
     registries of several processes sharing a store keep each link on one connection.

The stores: ``MemoryLinkStore`` (records.py, with what all stores share), ``JsonLinkStore``
(json_store.py) and ``SqliteLinkStore`` (sqlite_store.py).
"""

from __future__ import annotations

import os

from .json_store import JsonLinkStore
from .records import CURRENT_VERSION, MemoryLinkStore, StoreVersionError
from .sqlite_store import SqliteLinkStore

__all__ = [
    "CURRENT_VERSION",
    "JsonLinkStore",
    "MemoryLinkStore",
    "SqliteLinkStore",
    "StoreVersionError",
    "open_link_store",
]


def open_link_store(path: str | os.PathLike[str]) -> JsonLinkStore | SqliteLinkStore:
    """A JsonLinkStore for *.json, an SqliteLinkStore otherwise."""
    return JsonLinkStore(path) if str(path).endswith(".json") else SqliteLinkStore(path)
