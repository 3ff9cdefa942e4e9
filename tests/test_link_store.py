"""Link stores: the durability each keeps, restart per durability, registries of several
processes on one store, format upgrade, downgrade refusal, atomic writes."""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path

import pytest

from joynr_sim.core.links import (
    Delivery,
    LinkAttached,
    LinkDetached,
    LinkEvent,
    LinkRegistry,
    LinkStolen,
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
KEEPS = {"memory": 0, "json": 1, "sqlite": 2}  # the terminus durability each can keep


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


@pytest.fixture(params=sorted(KEEPS))
def any_store(request, tmp_path):
    """A store of each kind, memory included; store.kind names it."""
    if request.param == "memory":
        store = MemoryLinkStore()
    else:
        store = STORES[request.param](tmp_path / f"links.{request.param}")
    store.kind = request.param
    yield store
    store.close()


def registry(store, holder: str | None = None) -> LinkRegistry:
    return LinkRegistry(store=store, clock=lambda: 0, holder=holder)


def test_current_version_is_3():
    assert CURRENT_VERSION == 3


def test_each_store_advertises_the_durability_it_can_keep(any_store):
    # The seed: memory none, JSON the configuration, a store like BDB all three.
    assert any_store.max_durability == KEEPS[any_store.kind]


@pytest.mark.parametrize("asked", [0, 1, 2])
def test_the_registry_grants_no_more_durability_than_its_store_keeps(any_store, asked):
    reg = registry(any_store)
    events: list[LinkEvent] = []
    reg.add_listener(events.append)
    granted = min(asked, KEEPS[any_store.kind])
    assert reg.max_durability == KEEPS[any_store.kind]
    out = reg.get_sending_link("gbid1", "cc1").attach("conn1", Terminus("t", asked), None)
    assert out.mode == "establish" and out.terminus == Terminus("t", granted)
    attached = [e for e in events if isinstance(e, LinkAttached)]
    assert [e.durability for e in attached] == [granted]
    assert [r.terminus.durability for r in any_store.load()] == ([granted] if granted else [])


def test_a_store_keeps_no_more_of_a_record_than_it_advertises(any_store):
    any_store.save(StoredLink("sending", "g", "cc1", Terminus("t", 2), (("m1", None),), "c1", "p"))
    kept = {2: [StoredLink("sending", "g", "cc1", Terminus("t", 2), (("m1", None),), "c1", "p")],
            1: [StoredLink("sending", "g", "cc1", Terminus("t", 1), (), "c1", "p")], 0: []}
    assert any_store.load() == kept[KEEPS[any_store.kind]]
    assert any_store.find("sending", "g", "cc1") == (kept[KEEPS[any_store.kind]] or [None])[0]


@pytest.mark.parametrize("asked", [1, 2])
def test_after_a_crash_a_new_registry_knows_only_what_the_store_kept(any_store, asked):
    reg = registry(any_store, holder="cc1-process")
    link = reg.get_sending_link("gbid1", "cc1")
    link.attach("cc1|gbid1|1", Terminus("t", asked), None)
    link.add_unsettled("m1")
    # The process dies: nothing is detached, the store is what is left.
    again = reg.reopen()
    assert again is not reg and again.store is any_store and again.holder == "cc1-process"
    kept = min(asked, KEEPS[any_store.kind])
    relink = again.get_sending_link("gbid1", "cc1")
    assert relink is not link
    # The connection the store names died with the old process: the link is suspended.
    assert relink.owner is None
    assert relink.terminus == (Terminus("t", kept) if kept else None)
    assert relink.unsettled == ({"m1": None} if kept == 2 else {})
    out = relink.attach("cc1|gbid1|2", Terminus("t", asked), None)
    # Nothing kept: establish. The terminus, with or without its unsettled state: resume (its
    # link endpoint died with the process); what it resends is what the store kept.
    assert out.mode == {0: "establish", 1: "resume", 2: "resume"}[kept]
    assert out.stolen_from is None
    assert out.resend == ((Delivery("m1", None),) if kept == 2 else ())


def test_a_new_store_is_empty_and_current(make_store):
    store = make_store()
    assert store.load() == [] and store.version == CURRENT_VERSION
    assert store.upgraded_from is None and make_store.path.exists()


@pytest.mark.parametrize("role", ["sending", "receiving"])
def test_restart_keeps_links_per_durability(make_store, role):
    reg = registry(make_store())
    keeps = make_store().max_durability
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
    d2 = (
        (role, Terminus("topic/2", 2, {"qos": "1"}), {"m1": None, "m2": "received"})
        if keeps == 2 else (role, Terminus("topic/2", 1, {"qos": "1"}), {})  # granted 1 only
    )
    assert held == {
        # durability 0: gone; 1: terminus, no unsettled state; 2: both
        "cc-d1": (role, Terminus("topic/1", 1, {"qos": "1"}), {}),
        "cc-d2": d2,
    }
    recover = (None, None)
    assert get("gbid1", "cc-d0").attach("conn2", *recover).mode == "reject"
    assert get("gbid1", "cc-d1").attach("conn2", *recover).mode == "recover"
    out = get("gbid1", "cc-d2").attach("conn2", *recover, unsettled={"m2": "accepted"})
    assert out.mode == "recover" and out.resumed  # the attach carried an unsettled map
    if keeps < 2:
        assert out.settled == out.resend == ()
    elif role == "sending":
        assert out.settled == ("m2",) and out.resend == (Delivery("m1", None),)
    else:  # the sender no longer holds m1: settled; m2 it settled: settled too
        assert out.settled == ("m1", "m2") and out.resend == ()


def test_settled_closed_and_suspended_links_in_the_store():
    path_store = SqliteLinkStore(":memory:")
    reg = registry(path_store, holder="p1")
    link = reg.get_sending_link("gbid1", "cc1")
    link.attach("conn1", Terminus("t", 2), None)
    link.add_unsettled("m1")
    link.add_unsettled("m2")
    link.settle("m1")
    assert path_store.load() == [
        StoredLink("sending", "gbid1", "cc1", Terminus("t", 2), (("m2", None),), "conn1", "p1")]
    link.detach("conn1")  # suspended: the record names no connection
    assert path_store.load() == [
        StoredLink("sending", "gbid1", "cc1", Terminus("t", 2), (("m2", None),))]
    link.attach("conn2", Terminus("t", 2), None)
    link.detach("conn2", closed=True)
    assert path_store.load() == []


def test_lowering_durability_forgets_what_it_no_longer_covers(make_store):
    reg = registry(make_store())
    link = reg.get_sending_link("gbid1", "cc1")
    link.attach("conn1", Terminus("t", 2), None)
    link.add_unsettled("m1")
    link.attach("conn1", Terminus("t", 1), None)
    assert make_store().load() == [StoredLink("sending", "gbid1", "cc1", Terminus("t", 1), (), "conn1")]
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
    durability = store.max_durability
    record = StoredLink("receiving", "gbid-\xe9", "cc/\u4e2d\u6587 'x\"",
                        Terminus("a/b", durability, {"k": "v\xe9"}),
                        (("tag \u00e9", "received"),) if durability == 2 else (),
                        "conn \xe9|gbid-\xe9|1", "runtime-\xe9")
    store.save(record)
    assert make_store().load() == [record]
    assert make_store().find("receiving", "gbid-\xe9", "cc/\u4e2d\u6587 'x\"") == record
    assert make_store().find("sending", "gbid-\xe9", "cc/\u4e2d\u6587 'x\"") is None


# -- registries of several processes on one store ---------------------------------------


# A JSON file is one process's (its records live in that process's memory); processes
# share an SQLite file.
@pytest.fixture
def shared_file(tmp_path):
    """Opens the one SQLite file again per call, as another process would."""
    opened: list[SqliteLinkStore] = []

    def make() -> SqliteLinkStore:
        opened.append(SqliteLinkStore(tmp_path / "links.db"))
        return opened[-1]

    yield make
    for store in opened:
        store.close()


def process(make_store, holder: str) -> tuple[LinkRegistry, list[LinkEvent]]:
    """A process of its own: its own store object on the shared file, its own registry."""
    events: list[LinkEvent] = []
    reg = registry(make_store(), holder=holder)
    reg.add_listener(events.append)
    return reg, events


def test_processes_sharing_a_store_see_each_others_steals(shared_file):
    a, a_events = process(shared_file, "twin-a")
    b, b_events = process(shared_file, "twin-b")
    a_link = a.get_sending_link("gbid1", "twin")
    assert a_link.attach("a|1", Terminus("t", 1), None).mode == "establish"
    # b attaches the link a holds: a steal, learnt from the store's record.
    b_link = b.get_sending_link("gbid1", "twin")
    out = b_link.attach("b|1", Terminus("t", 1), None)
    assert (out.mode, out.stolen_from) == ("steal", "a|1")
    assert [(e.from_connection, e.to_connection) for e in b_events if isinstance(e, LinkStolen)] == [
        ("a|1", "b|1")]
    # a's broker closed a|1; when it attaches again, a learns it lost the link to b|1 and
    # steals it back.
    assert a_link.owner == "a|1"  # a has not looked yet
    out = a_link.attach("a|1", Terminus("t", 1), None)
    assert (out.mode, out.stolen_from) == ("steal", "b|1")
    detached = [(e.connection_id, e.error, e.stolen_by) for e in a_events if isinstance(e, LinkDetached)]
    assert detached == [("a|1", "amqp:link:stolen", "b|1"), ("b|1", "amqp:link:stolen", "a|1")]
    # b's late detach of the connection it lost changes nothing in the store.
    assert b_link.detach("b|1").detached is False
    assert shared_file().find("sending", "gbid1", "twin").owner == "a|1"


def test_a_process_purges_no_link_another_attached(shared_file):
    a, _ = process(shared_file, "twin-a")
    a.detached_timeout_ms = 10
    a_link = a.get_sending_link("gbid1", "twin")
    a_link.attach("a|1", Terminus("t", 1), None)
    a_link.detach("a|1")
    b, _ = process(shared_file, "twin-b")
    b.get_sending_link("gbid1", "twin").attach("b|1", Terminus("t", 1), None)
    assert a.purge_expired(1_000) == [] and a_link.owner == "b|1"
    assert shared_file().find("sending", "gbid1", "twin").owner == "b|1"


def test_a_restarted_process_resumes_what_its_dead_connection_held(shared_file):
    # Its twin is alive and attached elsewhere; its own old connection is gone.
    a, _ = process(shared_file, "twin-a")
    a.get_sending_link("gbid1", "mine").attach("a|1", Terminus("t", 1), None)
    b, _ = process(shared_file, "twin-b")
    b.get_sending_link("gbid1", "theirs").attach("b|1", Terminus("t", 1), None)
    restarted = a.reopen()
    assert restarted.get_sending_link("gbid1", "mine").owner is None
    assert restarted.get_sending_link("gbid1", "theirs").owner == "b|1"
    assert restarted.get_sending_link("gbid1", "mine").attach("a|2", Terminus("t", 1), None).mode == "resume"
    assert restarted.get_sending_link("gbid1", "theirs").attach("a|2", Terminus("t", 1), None).mode == "steal"


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


def write_v2(kind: str, path: Path) -> None:
    """A version 2 store: a sending link at durability 2 with an unsettled delivery."""
    if kind == "json":
        path.write_text(json.dumps({"version": "2.0", "receivingLinks": {}, "sendingLinks": {
            "gbid1": {"cc1": {"source": {"address": "t", "durability": 2, "properties": {}},
                              "unsettled": {"m1": None}}}}}))
        return
    db = sqlite3.connect(path)
    db.executescript("""
        CREATE TABLE schema_version (version INTEGER NOT NULL);
        INSERT INTO schema_version VALUES (2);
        CREATE TABLE links (role TEXT NOT NULL, remote_container_id TEXT NOT NULL,
            link_name TEXT NOT NULL, address TEXT, properties TEXT NOT NULL DEFAULT '{}',
            durability INTEGER NOT NULL DEFAULT 1,
            PRIMARY KEY (role, remote_container_id, link_name));
        CREATE TABLE unsettled (role TEXT NOT NULL, remote_container_id TEXT NOT NULL,
            link_name TEXT NOT NULL, tag TEXT NOT NULL, state TEXT,
            PRIMARY KEY (role, remote_container_id, link_name, tag));
        INSERT INTO links VALUES ('sending', 'gbid1', 'cc1', 't', '{}', 2);
        INSERT INTO unsettled VALUES ('sending', 'gbid1', 'cc1', 'm1', NULL);
    """)
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
    assert store.upgraded_from == 1 and stored_version(make_store.kind, make_store.path) == 3
    assert sorted(store.load(), key=lambda r: r.role, reverse=True) == [
        StoredLink(r, g, n, Terminus(a, 1, p)) for r, g, n, a, p in V1_LINKS]
    # The upgraded store takes the state it can keep, and a second open upgrades nothing.
    reg = registry(store)
    link = reg.get_sending_link("gbid1", "cc1")
    assert link.attach("conn1", None, None).mode == "recover"
    link.attach("conn1", Terminus("cc1/topic", 2), None)
    link.add_unsettled("m1")
    again = make_store()
    assert again.upgraded_from is None
    assert {r.link_name: (r.unsettled, r.owner) for r in again.load() if r.role == "sending"} == {
        "cc1": ((("m1", None),) if store.max_durability == 2 else (), "conn1")}


def test_a_version_2_store_is_upgraded_on_open(make_store):
    write_v2(make_store.kind, make_store.path)
    store = make_store()
    assert store.upgraded_from == 2 and stored_version(make_store.kind, make_store.path) == 3
    # v2 named no connection: suspended. JSON keeps configuration only: the unsettled map goes.
    kept = (StoredLink("sending", "gbid1", "cc1", Terminus("t", 2), (("m1", None),))
            if make_store.kind == "sqlite" else StoredLink("sending", "gbid1", "cc1", Terminus("t", 1)))
    assert store.load() == [kept] and make_store().load() == [kept]


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
        path.write_text(json.dumps({"version": "4.0", "sendingLinks": {}, "receivingLinks": {}}))
        return
    db = sqlite3.connect(path)
    db.executescript("CREATE TABLE schema_version (version INTEGER NOT NULL);"
                     "INSERT INTO schema_version VALUES (4);")
    db.commit()
    db.close()


def test_a_newer_store_is_refused_and_left_alone(make_store):
    write_newer(make_store.kind, make_store.path)
    before = make_store.path.read_bytes()
    with pytest.raises(StoreVersionError, match="version 4 is newer than 3: cannot downgrade"):
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
    reg = registry(store, holder="p1")
    reg.get_sending_link("gbid1", "cc1").attach("c", Terminus("t", 1), None)
    link = reg.get_receiving_link("gbid2", "cc1")
    link.attach("c", None, Terminus("u", 2))  # granted 1: configuration only
    link.add_unsettled("m1", "received")
    link.detach("c")
    assert json.loads((tmp_path / "links.json").read_text()) == {
        "version": "3.0",
        "sendingLinks": {"gbid1": {"cc1": {
            "source": {"address": "t", "durability": 1, "properties": {}},
            "owner": {"connection": "c", "holder": "p1"}}}},
        "receivingLinks": {"gbid2": {"cc1": {
            "target": {"address": "u", "durability": 1, "properties": {}}, "owner": None}}},
    }


@pytest.mark.parametrize("owner,problem", [
    ("c", "owner: expected"), ({"holder": "p"}, "owner.connection"),
    ({"connection": "c", "holder": 3}, "owner.holder"),
])
def test_a_json_store_with_a_bad_owner_is_refused(tmp_path, owner, problem):
    path = tmp_path / "links.json"
    path.write_text(json.dumps({"version": "3.0", "receivingLinks": {}, "sendingLinks": {
        "g": {"cc1": {"source": {"address": "t", "durability": 1}, "owner": owner}}}}))
    with pytest.raises(LinkStoreError, match=problem):
        JsonLinkStore(path)


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


def test_the_memory_store_keeps_nothing_for_a_restarted_registry():
    store = MemoryLinkStore()
    reg = registry(store)
    link = reg.get_sending_link("g", "cc1")
    link.attach("c", Terminus("t", 2), None)
    assert link.terminus == Terminus("t", 0)
    link.add_unsettled("m1")
    again = reg.reopen().get_sending_link("g", "cc1")
    assert again.terminus is None and again.unsettled == {}
    assert again.attach("c2", Terminus("t", 2), None).mode == "establish"


def test_sqlite_store_generation_moves_with_every_holders_link_writes(tmp_path):
    """The periodic steal check reads the store only when its link generation moved: a
    link record written through another connection (another process's registry) or
    through this object (registries in one process share it); not an unsettled delivery."""
    mine = SqliteLinkStore(tmp_path / "links.db", synchronous="OFF", group_commit=True)
    other_process = SqliteLinkStore(tmp_path / "links.db", synchronous="OFF", group_commit=True)
    before = mine.link_generation()
    assert before is not None and mine.link_generation() == before
    mine.save(StoredLink("sending", "g", "cc1", Terminus("t", 2), (), "c1", "p"))
    saved = mine.link_generation()
    assert saved != before  # a registry sharing this object may have taken the link
    mine.put_unsettled("sending", "g", "cc1", "m1", None)
    mine.flush()
    assert mine.link_generation() == saved
    other_process.save(StoredLink("sending", "g", "cc1", Terminus("t", 2), (), "c2", "q"))
    stolen = mine.link_generation()
    assert stolen != saved
    other_process.delete("sending", "g", "cc1")
    assert mine.link_generation() != stolen
    mine.close()
    other_process.close()
