"""The messages a cluster controller holds across a crash: published QoS 1 messages the
broker has not acknowledged (outgoing) and received ones not yet handled (incoming).

The link registry knows *which* deliveries are unsettled; this file keeps their bytes so
a restarted cluster controller can send or handle them again, whatever its broker does
on resume. A simulated crash ends a runtime, not the machine, so writes need no fsync.

With ``group_commit=True`` (a runtime's outbox) the writes of one event-loop turn are one
transaction (``GroupCommit``), and a row put and deleted in the same turn (a message
received and handled at once) never reaches the file; what must follow a write (the
publish, the PUBACK) is scheduled with ``group_commit.after_commit``.
"""

from __future__ import annotations

import os

from .batched import BatchedStore

OUTGOING = "out"
INCOMING = "in"

_Key = tuple[str, str, str]  # direction, gbid, tag


class Outbox(BatchedStore):
    def __init__(self, path: str | os.PathLike[str], group_commit: bool = False) -> None:
        super().__init__(
            path,
            "CREATE TABLE IF NOT EXISTS messages (direction TEXT NOT NULL, gbid TEXT NOT NULL, "
            "tag TEXT NOT NULL, topic TEXT NOT NULL, payload BLOB NOT NULL, "
            "PRIMARY KEY (direction, gbid, tag))",
            group_commit,
        )
        # One writer per file (the runtime whose outbox it is): the keys in the file are
        # known, so a delete of a row never committed needs no statement.
        self._stored: set[_Key] = {
            (d, g, t) for d, g, t in self._db.execute("SELECT direction, gbid, tag FROM messages")}

    def put(self, direction: str, gbid: str, tag: str, topic: str, payload: bytes) -> None:
        with self._lock:
            key = (direction, gbid, tag)
            self._pending.pop(key, None)  # re-inserted last: the file keeps put order
            self._pending[key] = (topic, payload)
        self._written()

    def delete(self, direction: str, gbid: str, tag: str) -> None:
        with self._lock:
            key = (direction, gbid, tag)
            if key in self._stored:
                self._pending[key] = None
            else:
                self._pending.pop(key, None)  # never reached the file: nothing to delete
        self._written()

    def _apply(self, pending: dict[_Key, tuple[str, bytes] | None]) -> None:
        for key, row in pending.items():
            if row is None:
                self._db.execute("DELETE FROM messages WHERE direction = ? AND gbid = ? AND tag = ?", key)
                self._stored.discard(key)
            else:  # REPLACE deletes first: a re-put goes last in put order (rowid)
                self._db.execute("INSERT OR REPLACE INTO messages VALUES (?, ?, ?, ?, ?)", (*key, *row))
                self._stored.add(key)

    def held(self, direction: str, gbid: str) -> dict[str, tuple[str, bytes]]:
        """tag -> (topic, payload), in the order they were put."""
        self.flush()
        with self._lock:
            rows = self._db.execute(
                "SELECT tag, topic, payload FROM messages WHERE direction = ? AND gbid = ? ORDER BY rowid",
                (direction, gbid),
            ).fetchall()
        return {tag: (topic, bytes(payload)) for tag, topic, payload in rows}
