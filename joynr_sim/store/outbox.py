"""The messages a cluster controller holds across a crash: published QoS 1 messages the
broker has not acknowledged (outgoing) and received ones not yet handled (incoming).

The link registry knows *which* deliveries are unsettled; this file keeps their bytes so
a restarted cluster controller can send or handle them again, whatever its broker does
on resume. A simulated crash ends a runtime, not the machine, so writes need no fsync.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from pathlib import Path

OUTGOING = "out"
INCOMING = "in"


class Outbox:
    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=OFF")
        self._db.execute(
            "CREATE TABLE IF NOT EXISTS messages (direction TEXT NOT NULL, gbid TEXT NOT NULL, "
            "tag TEXT NOT NULL, topic TEXT NOT NULL, payload BLOB NOT NULL, "
            "PRIMARY KEY (direction, gbid, tag))"
        )

    def put(self, direction: str, gbid: str, tag: str, topic: str, payload: bytes) -> None:
        with self._lock:
            self._db.execute(
                "INSERT OR REPLACE INTO messages VALUES (?, ?, ?, ?, ?)",
                (direction, gbid, tag, topic, payload),
            )

    def delete(self, direction: str, gbid: str, tag: str) -> None:
        with self._lock:
            self._db.execute(
                "DELETE FROM messages WHERE direction = ? AND gbid = ? AND tag = ?",
                (direction, gbid, tag),
            )

    def held(self, direction: str, gbid: str) -> dict[str, tuple[str, bytes]]:
        """tag -> (topic, payload), in the order they were put."""
        with self._lock:
            rows = self._db.execute(
                "SELECT tag, topic, payload FROM messages WHERE direction = ? AND gbid = ? ORDER BY rowid",
                (direction, gbid),
            ).fetchall()
        return {tag: (topic, bytes(payload)) for tag, topic, payload in rows}

    def close(self) -> None:
        with self._lock:
            self._db.close()
