"""A cluster controller's persisted routing table: joynr's routing-table persistency
(C++ ``lib-joynr/message-router-persistency``, off by default), one SQLite file per
runtime in the run's state folder.

joynr wrote its whole routing table to a file after every change and read it back at the
next start, so a restarted cluster controller still knew where to send a reply whose
request had arrived before the crash. Here a row is a routing entry as the table held it
after a put, with the origin of that put, so a start offers it to the table again through
the same policy. Entries an InProcess address points to are never rows: they name objects
of a process that is gone.

Writes are group-committed (``GroupCommit``): the writes of one event-loop turn are one
transaction at its end, so a SIGKILL loses at most the routes learned in that turn. A
write the disk refuses is the run's write failure (``BatchedStore``), as the outbox's is:
recorded, logged by the runtime, never raised into it.
"""

from __future__ import annotations

import os
from collections.abc import Callable

from ..core.address import AddressError, InProcessAddress, from_json, to_json
from ..core.routing import RoutingDecision, RoutingEntry, RoutingTable
from .batched import BatchedStore

_Row = tuple[str, int, int, int, str]  # address (joynr JSON), visible, expiry, sticky, origin


def persistable(entry: RoutingEntry | None) -> bool:
    """Whether an entry can outlive its process: not an InProcess address."""
    return entry is not None and not isinstance(entry.address, InProcessAddress)


class RouteStore(BatchedStore):
    def __init__(self, path: str | os.PathLike[str], group_commit: bool = True,
                 on_error: Callable[[BaseException], None] | None = None) -> None:
        """on_error: told of a commit that failed, before it is raised or recorded (a write
        is never lost silently)."""
        super().__init__(
            path,
            "CREATE TABLE IF NOT EXISTS routes (participant_id TEXT PRIMARY KEY, address TEXT NOT NULL, "
            "visible INTEGER NOT NULL, expiry_ms INTEGER NOT NULL, sticky INTEGER NOT NULL, "
            "origin TEXT NOT NULL)",
            group_commit,
        )
        self._on_error = on_error

    def put(self, participant_id: str, entry: RoutingEntry, origin: str) -> None:
        if not persistable(entry):
            raise ValueError(f"entry: an InProcess address cannot be persisted ({participant_id!r})")
        row = (to_json(entry.address), int(entry.is_globally_visible), entry.expiry_date_ms,
               int(entry.is_sticky), str(origin))
        with self._lock:
            self._pending[participant_id] = row
        self._written()

    def delete(self, participant_id: str) -> None:
        with self._lock:
            # Always a statement: every runtime with this CC id writes the file, as every
            # start of a joynr cluster controller wrote its one persistence file.
            self._pending[participant_id] = None
        self._written()

    def load(self, now_ms: int) -> list[tuple[str, RoutingEntry, str]]:
        """(participantId, entry, origin) of every route not yet expired at ``now_ms``. A row
        that no longer parses is skipped: a start must not fail on one bad route."""
        self.flush()
        with self._lock:
            rows = self._db.execute(
                "SELECT participant_id, address, visible, expiry_ms, sticky, origin FROM routes "
                "WHERE expiry_ms > ? ORDER BY rowid", (now_ms,),
            ).fetchall()
        loaded = []
        for pid, address, visible, expiry_ms, sticky, origin in rows:
            try:
                parsed = from_json(address)
            except AddressError:
                continue
            loaded.append((pid, RoutingEntry(parsed, bool(visible), expiry_ms, bool(sticky)), origin))
        return loaded

    def _apply(self, pending: dict[str, _Row | None]) -> None:
        for pid, row in pending.items():
            if row is None:
                self._db.execute("DELETE FROM routes WHERE participant_id = ?", (pid,))
            else:
                self._db.execute("INSERT OR REPLACE INTO routes VALUES (?, ?, ?, ?, ?, ?)", (pid, *row))

    def _failed(self, exc: BaseException) -> None:
        if self._on_error is not None:
            self._on_error(exc)


class RoutingTablePersistency:
    """Keeps a routing table's learned entries in a ``RouteStore`` and offers them to the
    table again at a start. Provisioned entries are left out (every start provisions them
    again), as are InProcess ones; WebSocketClient entries are kept, as joynr wrote its
    whole table: the libjoynr runtime that reconnects announces the same address again."""

    def __init__(self, store: RouteStore) -> None:
        self.store = store
        self._table: RoutingTable | None = None

    def attach(self, table: RoutingTable) -> None:
        """Follow this table's decisions (once per table: a stop and start keep the table)."""
        if self._table is not table:
            self._table = table
            table.add_listener(self._on_decision)

    def restore(self, add_next_hop: Callable[[str, RoutingEntry, str], object], now_ms: int) -> int:
        """Offer every persisted entry not yet expired through ``add_next_hop`` (the
        router's, so the table's policy judges it), with the origin it was learned from;
        how many were offered."""
        routes = self.store.load(now_ms)
        for participant_id, entry, origin in routes:
            add_next_hop(participant_id, entry, origin)
        return len(routes)

    def _on_decision(self, decision: RoutingDecision) -> None:
        if decision.op == "put":
            if decision.outcome == "refused" or decision.origin == "provisioned":
                return
            if persistable(decision.entry):
                assert decision.entry is not None
                self.store.put(decision.participant_id, decision.entry, str(decision.origin))
            else:  # an InProcess entry took its place: the old route is no longer held
                self.store.delete(decision.participant_id)
        elif decision.outcome == "removed":  # a remove or a purge
            self.store.delete(decision.participant_id)
