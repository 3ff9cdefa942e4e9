"""Opening a PostgreSQL GCD store for tests (the ``store`` fixture is in ``conftest.py``)."""

from __future__ import annotations

import os
import uuid

import pytest

from joynr_sim.store.gcd_store import PostgresGcdStore

POSTGRES_URL = os.environ.get(
    "JOYNR_SIM_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"
)


def open_postgres(prefix: str | None = None) -> PostgresGcdStore:
    """A store on a fresh table (or the given prefix's); unreachable fails the test."""
    try:
        return PostgresGcdStore(POSTGRES_URL, table_prefix=prefix or f"t{uuid.uuid4().hex[:16]}")
    except ConnectionError as exc:
        pytest.fail(f"PostgreSQL must be reachable for the postgres store tests "
                    f"(set JOYNR_SIM_TEST_POSTGRES_URL): {exc}")
