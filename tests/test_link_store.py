"""Link stores: restart per durability, format upgrade, downgrade refusal, atomic writes."""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import pytest

from joynr_sim.core.links import (
    Delivery,
    LinkRegistry,
    LinkStoreError,
    StoredLink,
    Terminus,
)
from joynr_sim.store.link_store import (
    CURRENT_VERSION,
    JsonLinkStore,
    MemoryLinkStore,
    SqliteLinkStore,
    StoreVersionError,
    open_link_store,
)

STORES = {"json": JsonLinkStore, "sqlite": SqliteLinkStore}


@pytest.fixture(params=sorted(STORES))
def make_store(request, tmp_path):
    cls = STORES[request.param]
    path = tmp_path / ("links.json" if request.param == "json" else "links.db")
    opened = []

    def make():
        store = cls(path)
        opened.append(store)
        return store

    make.path = path
    make.kind = request.param
    yield make
    for store in opened:
        store.close()


def registry(store) -> LinkRegistry:
    return LinkRegistry(store=store, clock=lambda: 0)


def test_current_version_is_2():
    assert CURRENT_VERSION == 2


def test_a_new_store_is_empty_and_current(make_store):
    store = make_store()
    assert store.load() == [] and store.version == CURRENT_VERSION
    assert store.upgraded_from is None and make_store.path.exists()


@pytest.mark.parametrize("role", ["sending", "receiving"])
def test_restart_keeps_links_per_durability(make_store, role):
    reg = registry(make_store())
    get = reg.get_sending_link if role == "sending" else reg.get_receiving_link
    for durability in (0, 1, 2):
        link = get("gbid1", f"cc-d{durability}")
        terminus = Terminus(f"topic/{durability}", durability, {"qos": "1"})
        local_remote = (terminus, None) if role == "sending" else (None, terminus)
        assert link.attach("conn1", *local_remote).mode == "establish"
        for tag in ("m1", "m2", "m3"):
            link.add_unsettled(tag)
        link.add_unsettled("m2", "received")
        link.settle("m3")
        link.detach("conn1")

    again = registry(make_store())
    get = again.get_sending_link if role == "sending" else again.get_receiving_link
    held = {l.link_name: (l.role, l.terminus, l.unsettled) for l in again.links()}
    assert held == {
        # durability 0: gone; 1: terminus, no unsettled state; 2: both
        "cc-d1": (role, Terminus("topic/1", 1, {"qos": "1"}), {}),
        "cc-d2": (role, Terminus("topic/2", 2, {"qos": "1"}), {"m1": None, "m2": "received"}),
    }
    recover = (None, None)
    assert get("gbid1", "cc-d0").attach("conn2", *recover).mode == "reject"
    assert get("gbid1", "cc-d1").attach("conn2", *recover).mode == "recover"
    out = get("gbid1", "cc-d2").attach("conn2", *recover, unsettled={"m2": "accepted"})
    assert out.mode == "recover" and out.resumed
    if role == "sending":
        assert out.settled == ("m2",) and out.resend == (Delivery("m1", None),)
    else:  # the sender no longer holds m1: settled; m2 it settled: settled too
        assert out.settled == ("m1", "m2") and out.resend == ()


def test_settled_and_closed_links_leave_the_store(make_store):
    reg = registry(make_store())
    link = reg.get_sending_link("gbid1", "cc1")
    link.attach("conn1", Terminus("t", 2), None)
    link.add_unsettled("m1")
    link.add_unsettled("m2")
    link.settle("m1")
    assert make_store().load() == [
        StoredLink("sending", "gbid1", "cc1", Terminus("t", 2), (("m2", None),))]
    link.detach("conn1", closed=True)
    assert make_store().load() == []


def test_lowering_durability_forgets_what_it_no_longer_covers(make_store):
    reg = registry(make_store())
    link = reg.get_sending_link("gbid1", "cc1")
    link.attach("conn1", Terminus("t", 2), None)
    link.add_unsettled("m1")
    link.attach("conn1", Terminus("t", 1), None)
    assert make_store().load() == [StoredLink("sending", "gbid1", "cc1", Terminus("t", 1))]
    link.attach("conn1", Terminus("t", 0), None)
    assert make_store().load() == []


def test_store_drops_what_durability_does_not_cover(make_store):
    store = make_store()
    store.save(StoredLink("sending", "g", "d0", Terminus("t", 0), (("m1", None),)))
    store.save(StoredLink("sending", "g", "d1", Terminus("t", 1), (("m1", None),)))
    store.put_unsettled("sending", "g", "d1", "m2", None)
    assert make_store().load() == [StoredLink("sending", "g", "d1", Terminus("t", 1))]


def test_names_survive_the_round_trip(make_store):
    store = make_store()
    record = StoredLink("receiving", "gbid-\xe9", "cc/\u4e2d\u6587 'x\"",
                        Terminus("a/b", 2, {"k": "v\xe9"}), (("tag \u00e9", "received"),))
    store.save(record)
    assert make_store().load() == [record]


# -- versions -------------------------------------------------------------------------

V1_LINKS = [
    ("sending", "gbid1", "cc1", "cc1/topic", {"qos": "1"}),
    ("receiving", "gbid2", "cc1", "cc1/in", {}),
]


def write_v1(kind: str, path: Path) -> None:
    """A version 1 store as the seed lays it out: termini without durability, no unsettled."""
    if kind == "json":
        doc: dict = {"version": "1.0", "sendingLinks": {}, "receivingLinks": {}}
        for role, remote, name, address, props in V1_LINKS:
            section, field = ("sendingLinks", "source") if role == "sending" else (
                "receivingLinks", "target")
            doc[section].setdefault(remote, {})[name] = {
                field: {"address": address, "properties": props}}
        path.write_text(json.dumps(doc))
        return
    db = sqlite3.connect(path)
    db.executescript("""
        CREATE TABLE schema_version (version INTEGER NOT NULL);
        INSERT INTO schema_version VALUES (1);
        CREATE TABLE links (role TEXT NOT NULL, remote_container_id TEXT NOT NULL,
            link_name TEXT NOT NULL, address TEXT, properties TEXT NOT NULL DEFAULT '{}',
            PRIMARY KEY (role, remote_container_id, link_name));
    """)
    db.executemany("INSERT INTO links VALUES (?, ?, ?, ?, ?)",
                   [(r, g, n, a, json.dumps(p)) for r, g, n, a, p in V1_LINKS])
    db.commit()
    db.close()


def stored_version(kind: str, path: Path) -> int:
    if kind == "json":
        return int(json.loads(path.read_text())["version"].split(".")[0])
    db = sqlite3.connect(path)
    try:
        return db.execute("SELECT version FROM schema_version").fetchone()[0]
    finally:
        db.close()


def test_a_version_1_store_is_upgraded_on_open(make_store):
    write_v1(make_store.kind, make_store.path)
    store = make_store()
    assert store.upgraded_from == 1 and stored_version(make_store.kind, make_store.path) == 2
    assert sorted(store.load(), key=lambda r: r.role, reverse=True) == [
        StoredLink(r, g, n, Terminus(a, 1, p)) for r, g, n, a, p in V1_LINKS]
    # The upgraded store takes durability 2 state, and a second open upgrades nothing.
    reg = registry(store)
    link = reg.get_sending_link("gbid1", "cc1")
    assert link.attach("conn1", None, None).mode == "recover"
    link.attach("conn1", Terminus("cc1/topic", 2), None)
    link.add_unsettled("m1")
    again = make_store()
    assert again.upgraded_from is None
    assert {r.link_name: r.unsettled for r in again.load() if r.role == "sending"} == {
        "cc1": (("m1", None),)}


def test_a_failed_upgrade_changes_nothing(tmp_path):
    # A v1 SQLite store whose unsettled table name is already taken: the upgrade fails
    # half way and must roll back, schema version included.
    path = tmp_path / "links.db"
    write_v1("sqlite", path)
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE unsettled (x)")
    db.commit()
    db.close()
    with pytest.raises(LinkStoreError, match="unsettled already exists"):
        SqliteLinkStore(path)
    db = sqlite3.connect(path)
    columns = [row[1] for row in db.execute("PRAGMA table_info(links)")]
    assert db.execute("SELECT version FROM schema_version").fetchone()[0] == 1
    assert "durability" not in columns
    db.close()


def write_newer(kind: str, path: Path) -> None:
    if kind == "json":
        path.write_text(json.dumps({"version": "3.0", "sendingLinks": {}, "receivingLinks": {}}))
        return
    db = sqlite3.connect(path)
    db.executescript("CREATE TABLE schema_version (version INTEGER NOT NULL);"
                     "INSERT INTO schema_version VALUES (3);")
    db.commit()
    db.close()


def test_a_newer_store_is_refused_and_left_alone(make_store):
    write_newer(make_store.kind, make_store.path)
    before = make_store.path.read_bytes()
    with pytest.raises(StoreVersionError, match="version 3 is newer than 2: cannot downgrade"):
        make_store()
    assert make_store.path.read_bytes() == before


@pytest.mark.parametrize("version", [None, "abc", 0, True])
def test_a_json_store_without_a_valid_version_is_refused(tmp_path, version):
    path = tmp_path / "links.json"
    path.write_text(json.dumps({"version": version}))
    with pytest.raises(StoreVersionError, match="version"):
        JsonLinkStore(path)


def test_an_sqlite_file_that_is_no_link_store_is_refused(tmp_path):
    path = tmp_path / "other.db"
    db = sqlite3.connect(path)
    db.execute("CREATE TABLE something (x)")
    db.commit()
    db.close()
    with pytest.raises(LinkStoreError, match="not a link store"):
        SqliteLinkStore(path)


def test_unreadable_json_is_refused(tmp_path):
    path = tmp_path / "links.json"
    path.write_text("{not json")
    with pytest.raises(LinkStoreError, match="cannot read"):
        JsonLinkStore(path)


# -- JSON specifics ---------------------------------------------------------------------


def test_json_layout_is_the_seeds(tmp_path):
    store = JsonLinkStore(tmp_path / "links.json")
    reg = registry(store)
    reg.get_sending_link("gbid1", "cc1").attach("c", Terminus("t", 1), None)
    link = reg.get_receiving_link("gbid2", "cc1")
    link.attach("c", None, Terminus("u", 2))
    link.add_unsettled("m1", "received")
    assert json.loads((tmp_path / "links.json").read_text()) == {
        "version": "2.0",
        "sendingLinks": {"gbid1": {"cc1": {
            "source": {"address": "t", "durability": 1, "properties": {}}, "unsettled": {}}}},
        "receivingLinks": {"gbid2": {"cc1": {
            "target": {"address": "u", "durability": 2, "properties": {}},
            "unsettled": {"m1": "received"}}}},
    }


def test_json_write_failure_keeps_the_old_file_and_leaves_no_temp(tmp_path, monkeypatch):
    path = tmp_path / "links.json"
    store = JsonLinkStore(path)
    store.save(StoredLink("sending", "g", "a", Terminus("t", 1)))
    before = path.read_bytes()

    def fail(*args, **kwargs):
        raise OSError("no space left on device")

    monkeypatch.setattr(os, "replace", fail)
    with pytest.raises(LinkStoreError, match="no space left"):
        store.save(StoredLink("sending", "g", "b", Terminus("t", 1)))
    monkeypatch.undo()
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["links.json"]
    assert [r.link_name for r in store.load()] == ["a"]  # memory follows only the file


def test_open_link_store_picks_by_suffix(tmp_path):
    json_store = open_link_store(tmp_path / "a.json")
    sqlite_store = open_link_store(tmp_path / "a.db")
    assert isinstance(json_store, JsonLinkStore) and isinstance(sqlite_store, SqliteLinkStore)
    sqlite_store.close()


def test_memory_store_survives_a_registry_restart():
    store = MemoryLinkStore()
    link = registry(store).get_sending_link("g", "cc1")
    link.attach("c", Terminus("t", 2), None)
    link.add_unsettled("m1")
    again = registry(store).get_sending_link("g", "cc1")
    assert again.terminus == Terminus("t", 2) and again.unsettled == {"m1": None}
