"""Where the global capabilities directory keeps its rows: SQLite (default) or PostgreSQL.

All GCD instances of a run share one store, so every instance knows the providers of every
backend. Both stores implement the ``GcdStore`` protocol of ``joynr_sim.core.gcd_store``
(one row per (participantId, GBID), dumb on purpose): the rules live in
``joynr_sim.core.gcd``, which runs each call inside one ``store.transaction()`` so a
rejected or failed call changes nothing.

Writers are serialised across processes: SQLite by ``BEGIN IMMEDIATE`` (WAL mode, busy
timeout), PostgreSQL by a transaction-scoped advisory lock on the table.
"""

from __future__ import annotations

import json
import re
import sqlite3
import threading
import zlib
from abc import ABC, abstractmethod
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from typing import Any

from joynr_sim.core.discovery import GlobalDiscoveryEntry
from joynr_sim.core.gcd_store import GcdRow, RowKey


class SqlGcdStore(ABC):
    """What both SQL stores share besides their SQL: reading all rows, closing."""

    @abstractmethod
    def transaction(self, write: bool = False) -> AbstractContextManager[_SqlTransaction]: ...

    @abstractmethod
    def close(self) -> None: ...

    def all_rows(self) -> list[GcdRow]:
        with self.transaction() as tx:
            return tx.all_rows()


# -- the SQL shared by both stores --------------------------------------------------------

_COLUMNS = (
    "participant_id, gbid, domain, interface_name, cluster_controller_id, "
    "last_seen_date_ms, expiry_date_ms, entry"
)


def _encode(row: GcdRow) -> tuple[Any, ...]:
    e = row.entry
    return (
        e.participant_id,
        row.gbid,
        e.domain,
        e.interface_name,
        row.cluster_controller_id,
        e.last_seen_date_ms,
        e.expiry_date_ms,
        json.dumps(e.to_wire(), separators=(",", ":"), sort_keys=True),
    )


def _decode(record: Sequence[Any]) -> GcdRow:
    gbid, text = record
    return GcdRow(GlobalDiscoveryEntry.from_wire(json.loads(text)), gbid)


class _SqlTransaction:
    """A GcdTransaction on a DB-API cursor; the SQL is the same for both drivers."""

    def __init__(self, cursor: Any, table: str, ph: str, collate: str = "") -> None:
        self._cur = cursor
        self._t = table
        self._ph = ph  # the driver's placeholder: ? or %s
        # Rows come in code-point order of (participantId, GBID), as the protocol says:
        # SQLite's default collation is that already; PostgreSQL's is the database's locale.
        self._order = f"ORDER BY participant_id{collate}, gbid{collate}"

    def _select(self, where: str = "", params: Sequence[Any] = ()) -> list[GcdRow]:
        sql = f"SELECT gbid, entry FROM {self._t}"
        if where:
            sql += f" WHERE {where}"
        self._cur.execute(f"{sql} {self._order}", tuple(params))
        return [_decode(r) for r in self._cur.fetchall()]

    def all_rows(self) -> list[GcdRow]:
        return self._select()

    def rows_for_participant(self, participant_id: str) -> list[GcdRow]:
        return self._select(f"participant_id = {self._ph}", (participant_id,))

    def rows_for_interface(self, domains: Sequence[str], interface_name: str) -> list[GcdRow]:
        if not domains:
            return []
        marks = ", ".join([self._ph] * len(domains))
        return self._select(
            f"interface_name = {self._ph} AND domain IN ({marks})", (interface_name, *domains)
        )

    def rows_for_cluster_controller(self, cluster_controller_id: str) -> list[GcdRow]:
        return self._select(f"cluster_controller_id = {self._ph}", (cluster_controller_id,))

    def put(self, row: GcdRow) -> None:
        marks = ", ".join([self._ph] * 8)
        self._cur.execute(
            f"INSERT INTO {self._t} ({_COLUMNS}) VALUES ({marks}) "
            "ON CONFLICT (participant_id, gbid) DO UPDATE SET "
            "domain = excluded.domain, interface_name = excluded.interface_name, "
            "cluster_controller_id = excluded.cluster_controller_id, "
            "last_seen_date_ms = excluded.last_seen_date_ms, "
            "expiry_date_ms = excluded.expiry_date_ms, entry = excluded.entry",
            _encode(row),
        )

    def delete(self, key: RowKey) -> None:
        self._cur.execute(
            f"DELETE FROM {self._t} WHERE participant_id = {self._ph} AND gbid = {self._ph}", key
        )

    def delete_expired(self, now_ms: int) -> list[RowKey]:
        return self._delete_where("expiry_date_ms", now_ms)

    def delete_last_seen_before(self, bound_ms: int) -> list[RowKey]:
        return self._delete_where("last_seen_date_ms", bound_ms)

    def _delete_where(self, column: str, bound_ms: int) -> list[RowKey]:
        """Delete the rows whose ``column`` lies before the bound; their keys in key order."""
        self._cur.execute(
            f"SELECT participant_id, gbid FROM {self._t} WHERE {column} < {self._ph} {self._order}",
            (bound_ms,),
        )
        keys = [(p, g) for p, g in self._cur.fetchall()]
        self._cur.execute(f"DELETE FROM {self._t} WHERE {column} < {self._ph}", (bound_ms,))
        return keys


def _create_table_sql(table: str, bigint: str) -> list[str]:
    return [
        f"CREATE TABLE IF NOT EXISTS {table} ("
        "participant_id TEXT NOT NULL, gbid TEXT NOT NULL, domain TEXT NOT NULL, "
        "interface_name TEXT NOT NULL, cluster_controller_id TEXT NOT NULL, "
        f"last_seen_date_ms {bigint} NOT NULL, expiry_date_ms {bigint} NOT NULL, "
        "entry TEXT NOT NULL, PRIMARY KEY (participant_id, gbid))",
        f"CREATE INDEX IF NOT EXISTS {table}_interface ON {table} (interface_name, domain)",
        f"CREATE INDEX IF NOT EXISTS {table}_cc ON {table} (cluster_controller_id)",
    ]


_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,40}")


def _table_name(table_prefix: str) -> str:
    # The prefix is spliced into SQL, so only plain identifiers are allowed.
    if not isinstance(table_prefix, str) or not _IDENTIFIER.fullmatch(table_prefix):
        raise ValueError(f"table_prefix: expected an SQL identifier, got {table_prefix!r}")
    return f"{table_prefix}_entries"


class SqliteGcdStore(SqlGcdStore):
    """A SQLite file (or ``":memory:"``) shared by all GCD instances, even across processes."""

    def __init__(self, path: str = ":memory:", *, table_prefix: str = "gcd",
                 busy_timeout_ms: int = 10_000) -> None:
        self.path = str(path)
        self.table = _table_name(table_prefix)
        # Autocommit mode: transactions are begun explicitly, one per GCD call.
        self._conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        self._lock = threading.Lock()
        self._conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
        if self.path != ":memory:":
            self._conn.execute("PRAGMA journal_mode = WAL")
            self._conn.execute("PRAGMA synchronous = NORMAL")
        for sql in _create_table_sql(self.table, "INTEGER"):
            self._conn.execute(sql)

    @contextmanager
    def transaction(self, write: bool = False) -> Iterator[_SqlTransaction]:
        with self._lock:
            cur = self._conn.cursor()
            # IMMEDIATE takes the write lock up front, so a read-then-write call cannot
            # be overtaken by another process between its read and its write.
            cur.execute("BEGIN IMMEDIATE" if write else "BEGIN")
            try:
                yield _SqlTransaction(cur, self.table, "?")
            except BaseException:
                cur.execute("ROLLBACK")
                raise
            else:
                cur.execute("COMMIT")
            finally:
                cur.close()

    def close(self) -> None:
        self._conn.close()


CONNECT_TIMEOUT_S = 10


class PostgresGcdStore(SqlGcdStore):
    """A PostgreSQL table ``<table_prefix>_entries`` (psycopg 3)."""

    def __init__(self, url: str, *, table_prefix: str = "gcd") -> None:
        import psycopg  # only needed when PostgreSQL is asked for

        self.url = url
        self.table = _table_name(table_prefix)
        self._lock = threading.Lock()
        shown = re.sub(r"(://[^:/@\s]*:)[^@\n]*@", r"\1***@", url)  # never the password
        try:
            # A host that drops packets must fail the set-up, not hang it.
            self._conn = psycopg.connect(url, autocommit=True, connect_timeout=CONNECT_TIMEOUT_S)
        except psycopg.OperationalError as exc:
            raise ConnectionError(
                f"GCD store: cannot connect to PostgreSQL at {shown}: {str(exc).replace(url, shown)}") from None
        # Advisory lock key: stable per table, so all processes serialise their writes.
        self._lock_key = zlib.crc32(self.table.encode())
        with self._conn.transaction():
            self._conn.execute("SELECT pg_advisory_xact_lock(%s)", (self._lock_key,))
            for sql in _create_table_sql(self.table, "BIGINT"):
                self._conn.execute(sql)

    @contextmanager
    def transaction(self, write: bool = False) -> Iterator[_SqlTransaction]:
        with self._lock, self._conn.transaction(), self._conn.cursor() as cur:
            if write:
                cur.execute("SELECT pg_advisory_xact_lock(%s)", (self._lock_key,))
            yield _SqlTransaction(cur, self.table, "%s", ' COLLATE "C"')

    def drop(self) -> None:
        """Drop the table (tests and tools that made a store of their own)."""
        with self._lock, self._conn.transaction():
            self._conn.execute(f"DROP TABLE IF EXISTS {self.table}")

    def close(self) -> None:
        self._conn.close()


def open_gcd_store(url_or_path: str, *, table_prefix: str = "gcd") -> SqlGcdStore:
    """A PostgreSQL store for a ``postgresql://`` (or ``postgres://``) URL, else SQLite."""
    if not isinstance(url_or_path, str) or not url_or_path:
        raise ValueError(f"url_or_path: expected a URL or a file path, got {url_or_path!r}")
    if url_or_path.startswith(("postgresql://", "postgres://")):
        return PostgresGcdStore(url_or_path, table_prefix=table_prefix)
    if url_or_path.startswith("sqlite:///"):
        url_or_path = url_or_path[len("sqlite:///"):]
    return SqliteGcdStore(url_or_path, table_prefix=table_prefix)
