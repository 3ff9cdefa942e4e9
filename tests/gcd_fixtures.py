"""The GCD store fixture both store test modules use: every test runs on SQLite and on
PostgreSQL (the machine runs one on loopback; unreachable is a failure, never a skip)."""

from __future__ import annotations

import os
import uuid

import pytest

from joynr_sim.store.gcd_store import PostgresGcdStore, SqliteGcdStore

POSTGRES_URL = os.environ.get(
    "JOYNR_SIM_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"
)


def open_postgres(prefix: str | None = None) -> PostgresGcdStore:
    try:
        return PostgresGcdStore(POSTGRES_URL, table_prefix=prefix or f"t{uuid.uuid4().hex[:16]}")
    except ConnectionError as exc:
        pytest.fail(f"PostgreSQL must be reachable for the postgres store tests "
                    f"(set JOYNR_SIM_TEST_POSTGRES_URL): {exc}")


@pytest.fixture(params=["sqlite", "postgres"])
def store(request, tmp_path):
    if request.param == "sqlite":
        s = SqliteGcdStore(str(tmp_path / "gcd.sqlite"))
        yield s
        s.close()
    else:
        s = open_postgres()
        yield s
        s.drop()
        s.close()
