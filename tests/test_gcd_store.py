"""The GCD stores: one row per (participantId, GBID), transactions, sharing, the factory.

The contract of ``joynr_sim.core.gcd_store`` runs against all three stores (SQLite,
PostgreSQL, in memory), so the GCD logic tests on the in-memory one hold for the others.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import uuid

import psycopg
import pytest

from gcd_helpers import POSTGRES_URL, open_postgres
from joynr_sim.core.address import ChannelAddress, MqttAddress
from joynr_sim.core.discovery import GlobalDiscoveryEntry, ProviderQos, Version
from joynr_sim.core.gcd_store import GcdRow, InMemoryGcdStore
from joynr_sim.store.gcd_store import PostgresGcdStore, SqliteGcdStore, open_gcd_store


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres), "memory"])
def store(request, tmp_path):
    if request.param == "sqlite":
        s = SqliteGcdStore(str(tmp_path / "gcd.sqlite"))
        yield s
        s.close()
    elif request.param == "postgres":
        s = open_postgres()
        yield s
        s.drop()
        s.close()
    else:
        yield InMemoryGcdStore()


def row(pid="p1", gbid="GBID1", domain="d", interface="i", cc="cc1", last_seen=1, expiry=100,
        priority=0) -> GcdRow:
    entry = GlobalDiscoveryEntry(pid, domain, interface, Version(1, 2),
                                 ProviderQos(priority=priority, custom_parameters=(("k", "v"),)),
                                 last_seen, expiry, "key", MqttAddress(gbid, cc))
    return GcdRow(entry, gbid)


def test_put_and_read_back(store):
    r = row()
    with store.transaction(write=True) as tx:
        tx.put(r)
    assert store.all_rows() == [r]
    assert r.cluster_controller_id == "cc1" and r.key == ("p1", "GBID1")


def test_a_channel_address_row_keeps_its_address_and_names_its_cluster_controller(store):
    """An old cluster controller on joynr's HTTP transport registers a ChannelAddress: it names
    no backend, so the row keeps it as sent; its channel id is the cluster controller id."""
    channel = row()
    channel = GcdRow(channel.entry.with_address(ChannelAddress("http://bounceproxy/", "cc-http")), "GBID2")
    with store.transaction(write=True) as tx:
        tx.put(channel)
    assert store.all_rows() == [channel]
    with store.transaction() as tx:
        assert tx.rows_for_cluster_controller("cc-http") == [channel]
    with pytest.raises(ValueError):
        GcdRow(row().entry, "GBID2")  # an MqttAddress must carry the row's GBID


def test_put_replaces_the_row_of_the_same_participant_and_gbid(store):
    with store.transaction(write=True) as tx:
        tx.put(row(priority=1))
        tx.put(row(gbid="GBID2", priority=1))
        tx.put(row(priority=2, cc="cc2", domain="d2"))
    assert store.all_rows() == [row(priority=2, cc="cc2", domain="d2"), row(gbid="GBID2", priority=1)]


def test_queries(store):
    rows = [row("p1", "GBID1", domain="d1", cc="cc1"), row("p1", "GBID2", domain="d1", cc="cc1"),
            row("p2", "GBID1", domain="d2", cc="cc2"), row("p3", "GBID1", domain="d1", interface="j")]
    with store.transaction(write=True) as tx:
        for r in reversed(rows):
            tx.put(r)
    with store.transaction() as tx:
        assert tx.rows_for_participant("p1") == rows[:2]
        assert tx.rows_for_interface(["d1", "d2"], "i") == rows[:3]
        assert tx.rows_for_interface(["d1"], "j") == rows[3:]
        assert tx.rows_for_interface([], "i") == []
        assert tx.rows_for_cluster_controller("cc1") == [rows[0], rows[1], rows[3]]
        assert tx.rows_for_cluster_controller("nobody") == []


def test_rows_come_in_code_point_order(store):
    # Upper case, digits and "_" sort before lower case by code point, not in a locale.
    pids = ["a", "B", "_z", "A1", "a0", "\u00e9"]
    with store.transaction(write=True) as tx:
        for pid in pids:
            tx.put(row(pid, "g", cc="cc1", expiry=10))
            tx.put(row(pid, "G", cc="cc1", expiry=10))
    expected = sorted((pid, gbid) for pid in pids for gbid in ("g", "G"))
    assert [r.key for r in store.all_rows()] == expected
    with store.transaction() as tx:
        assert [r.key for r in tx.rows_for_cluster_controller("cc1")] == expected
        assert [r.key for r in tx.rows_for_interface(["d"], "i")] == expected
    with store.transaction(write=True) as tx:
        assert tx.delete_expired(11) == expected


def test_delete_and_delete_expired(store):
    with store.transaction(write=True) as tx:
        tx.put(row("p1", expiry=10))
        tx.put(row("p2", expiry=11))
        tx.put(row("p3", expiry=12))
    with store.transaction(write=True) as tx:
        tx.delete(("p3", "GBID1"))
        tx.delete(("nobody", "GBID1"))
        assert tx.delete_expired(11) == [("p1", "GBID1")]
    assert [r.participant_id for r in store.all_rows()] == ["p2"]


def test_delete_last_seen_before(store):
    with store.transaction(write=True) as tx:
        tx.put(row("p1", last_seen=10))
        tx.put(row("p2", last_seen=11))
        tx.put(row("p1", "GBID2", last_seen=5))
    with store.transaction(write=True) as tx:
        assert tx.delete_last_seen_before(11) == [("p1", "GBID1"), ("p1", "GBID2")]
        assert tx.delete_last_seen_before(11) == []
    assert [r.participant_id for r in store.all_rows()] == ["p2"]


def test_a_failed_transaction_changes_nothing(store):
    with store.transaction(write=True) as tx:
        tx.put(row("p1"))
    with pytest.raises(RuntimeError):
        with store.transaction(write=True) as tx:
            tx.put(row("p2"))
            tx.delete(("p1", "GBID1"))
            raise RuntimeError("boom")
    assert store.all_rows() == [row("p1")]
    with store.transaction(write=True) as tx:  # the store is usable afterwards
        tx.put(row("p2"))
    assert len(store.all_rows()) == 2


def test_row_address_must_carry_its_gbid():
    entry = row().entry
    with pytest.raises(ValueError, match="GBID2"):
        GcdRow(entry, "GBID2")


def test_sqlite_file_is_shared_between_stores_and_uses_wal(tmp_path):
    path = str(tmp_path / "gcd.sqlite")
    a, b = SqliteGcdStore(path), SqliteGcdStore(path)
    with a.transaction(write=True) as tx:
        tx.put(row())
    assert b.all_rows() == [row()]
    mode = a._conn.execute("PRAGMA journal_mode").fetchone()[0]
    assert mode == "wal"
    a.close()
    b.close()


def test_sqlite_file_is_shared_across_processes(tmp_path):
    path = str(tmp_path / "gcd.sqlite")
    store = SqliteGcdStore(path)
    with store.transaction(write=True) as tx:
        tx.put(row("p1"))
    script = textwrap.dedent(f"""
        from joynr_sim.core.address import ChannelAddress, MqttAddress
        from joynr_sim.core.gcd import GlobalCapabilitiesDirectory
        from joynr_sim.store.gcd_store import open_gcd_store
        gcd = GlobalCapabilitiesDirectory(open_gcd_store({path!r}), own_gbid="GBID2",
                                          known_gbids=["GBID1", "GBID2"], clock=lambda: 1)
        found = gcd.lookup_participant("p1", ["GBID1"])
        entry = found.with_address(MqttAddress("x", "cc7"))
        gcd.add_old([entry])
    """)
    subprocess.run([sys.executable, "-c", script], check=True)
    rows = {r.key: r for r in store.all_rows()}
    assert sorted(rows) == [("p1", "GBID1"), ("p1", "GBID2")]
    assert rows[("p1", "GBID2")].cluster_controller_id == "cc7"
    store.close()


@pytest.mark.postgres
def test_postgres_stores_with_one_prefix_share_a_table():
    prefix = f"t{uuid.uuid4().hex[:16]}"
    a, b = open_postgres(prefix), open_postgres(prefix)
    try:
        with a.transaction(write=True) as tx:
            tx.put(row())
        assert b.all_rows() == [row()]
    finally:
        a.drop()
        a.close()
        b.close()


@pytest.mark.postgres
def test_open_gcd_store_chooses_by_url(tmp_path):
    s = open_gcd_store(str(tmp_path / "a.sqlite"))
    assert isinstance(s, SqliteGcdStore)
    s.close()
    s = open_gcd_store(f"sqlite:///{tmp_path / 'b.sqlite'}")
    assert isinstance(s, SqliteGcdStore) and s.path == str(tmp_path / "b.sqlite")
    s.close()
    s = open_gcd_store(POSTGRES_URL, table_prefix=f"t{uuid.uuid4().hex[:16]}")
    assert isinstance(s, PostgresGcdStore)
    s.drop()
    s.close()


@pytest.mark.parametrize("prefix", ["", "1abc", "a;drop table x", "a-b", None])
def test_table_prefix_must_be_an_identifier(prefix):
    with pytest.raises(ValueError, match="table_prefix"):
        SqliteGcdStore(":memory:", table_prefix=prefix)


def test_open_gcd_store_rejects_an_empty_location():
    with pytest.raises(ValueError, match="url_or_path"):
        open_gcd_store("")


def test_postgres_unreachable_is_a_clear_error():
    with pytest.raises(ConnectionError, match="cannot connect to PostgreSQL"):
        PostgresGcdStore("postgresql://postgres@127.0.0.1:1/test?connect_timeout=2")


@pytest.mark.postgres
def test_postgres_order_does_not_follow_the_database_locale():
    # A database whose default collation is a locale (en_US is common) sorts "a" before "B";
    # a table made with such columns must still come back in code-point order.
    prefix = f"t{uuid.uuid4().hex[:16]}"
    with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
        conn.execute(
            f"CREATE TABLE {prefix}_entries (participant_id TEXT COLLATE \"en-x-icu\" NOT NULL, "
            "gbid TEXT COLLATE \"en-x-icu\" NOT NULL, domain TEXT NOT NULL, "
            "interface_name TEXT NOT NULL, cluster_controller_id TEXT NOT NULL, "
            "last_seen_date_ms BIGINT NOT NULL, expiry_date_ms BIGINT NOT NULL, "
            "entry TEXT NOT NULL, PRIMARY KEY (participant_id, gbid))")
    s = open_postgres(prefix)
    try:
        with s.transaction(write=True) as tx:
            tx.put(row("a"))
            tx.put(row("B"))
        assert [r.participant_id for r in s.all_rows()] == ["B", "a"]
    finally:
        s.drop()
        s.close()
