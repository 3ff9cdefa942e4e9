"""What the global capabilities directory (GCD) logic needs of a store, and a store in memory.

The logic in ``joynr_sim.core.gcd`` holds the rules; a store is dumb on purpose. It keeps
one row per (participantId, GBID) and offers the few calls below, all inside one
transaction, so a rejected or failed GCD call changes nothing. The SQLite and PostgreSQL
stores (``joynr_sim.store.gcd_store``) implement the same protocol; the contract tests in
``tests/test_gcd_store.py`` run against all three.

Every row list comes in the order of (participantId, GBID), compared by code point.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import Protocol

from .address import ChannelAddress, MqttAddress
from .discovery import GlobalDiscoveryEntry

RowKey = tuple[str, str]  # (participantId, GBID)


@dataclass(frozen=True)
class GcdRow:
    """One registration of a provider in one backend.

    ``entry.address`` is an MqttAddress whose broker_uri is ``gbid`` (the cluster controller
    id is its topic), or a ChannelAddress of joynr's HTTP transport, which names no backend
    (the cluster controller id is its channel id).
    """

    entry: GlobalDiscoveryEntry
    gbid: str

    def __post_init__(self) -> None:
        address = self.entry.address
        if isinstance(address, ChannelAddress):
            return
        if not isinstance(address, MqttAddress) or address.broker_uri != self.gbid:
            raise ValueError(
                f"row address must be MqttAddress({self.gbid!r}, ...) or a ChannelAddress, got {address!r}")

    @property
    def participant_id(self) -> str:
        return self.entry.participant_id

    @property
    def cluster_controller_id(self) -> str:
        address = self.entry.address
        if isinstance(address, ChannelAddress):
            return address.channel_id
        return address.topic  # type: ignore[union-attr]

    @property
    def key(self) -> RowKey:
        return (self.entry.participant_id, self.gbid)


class GcdTransaction(Protocol):
    """The operations a GCD call may use, all inside one transaction."""

    def rows_for_participant(self, participant_id: str) -> list[GcdRow]: ...

    def rows_for_interface(self, domains: Sequence[str], interface_name: str) -> list[GcdRow]:
        """The rows of ``interface_name`` in any of ``domains`` (none for no domains)."""
        ...

    def rows_for_cluster_controller(self, cluster_controller_id: str) -> list[GcdRow]: ...

    def put(self, row: GcdRow) -> None:
        """Create or replace the row of (participantId, GBID)."""
        ...

    def delete(self, key: RowKey) -> None:
        """Delete the row of the key; a key without a row is no error."""
        ...

    def delete_expired(self, now_ms: int) -> list[RowKey]:
        """Delete the rows whose expiry date lies before ``now_ms``; return their keys."""
        ...

    def delete_last_seen_before(self, bound_ms: int) -> list[RowKey]:
        """Delete the rows last seen before ``bound_ms``; return their keys, in key order."""
        ...


class GcdStore(Protocol):
    def transaction(self, write: bool = False) -> AbstractContextManager[GcdTransaction]:
        """One transaction: committed when the block ends normally, else rolled back.

        ``write`` announces that the call may write, so a store shared between processes
        can take its write lock before the first read.
        """
        ...


class InMemoryGcdStore:
    """A store in process memory, shared by the GCD instances that are given it.

    A transaction works on a copy of the rows and replaces them only when it ends
    normally; one transaction runs at a time.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._rows: dict[RowKey, GcdRow] = {}

    @contextmanager
    def transaction(self, write: bool = False) -> Iterator[GcdTransaction]:
        with self._lock:
            tx = _MemoryTransaction(dict(self._rows))
            yield tx
            self._rows = tx.rows

    def all_rows(self) -> list[GcdRow]:
        with self._lock:
            return _ordered(self._rows.values())

    def close(self) -> None:
        """Nothing to release; here so a caller can close any store the same way."""


class _MemoryTransaction:
    def __init__(self, rows: dict[RowKey, GcdRow]) -> None:
        self.rows = rows

    def rows_for_participant(self, participant_id: str) -> list[GcdRow]:
        return _ordered(r for r in self.rows.values() if r.participant_id == participant_id)

    def rows_for_interface(self, domains: Sequence[str], interface_name: str) -> list[GcdRow]:
        wanted = set(domains)
        return _ordered(r for r in self.rows.values()
                        if r.entry.interface_name == interface_name and r.entry.domain in wanted)

    def rows_for_cluster_controller(self, cluster_controller_id: str) -> list[GcdRow]:
        return _ordered(r for r in self.rows.values()
                        if r.cluster_controller_id == cluster_controller_id)

    def put(self, row: GcdRow) -> None:
        self.rows[row.key] = row

    def delete(self, key: RowKey) -> None:
        self.rows.pop(key, None)

    def delete_expired(self, now_ms: int) -> list[RowKey]:
        expired = sorted(k for k, r in self.rows.items() if r.entry.expiry_date_ms < now_ms)
        for key in expired:
            del self.rows[key]
        return expired

    def delete_last_seen_before(self, bound_ms: int) -> list[RowKey]:
        stale = sorted(k for k, r in self.rows.items() if r.entry.last_seen_date_ms < bound_ms)
        for key in stale:
            del self.rows[key]
        return stale


def _ordered(rows: Iterable[GcdRow]) -> list[GcdRow]:
    return sorted(rows, key=lambda r: r.key)
