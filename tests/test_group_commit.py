"""Group-committed bookkeeping: the writes of one event-loop turn are one transaction, what
depends on them runs after it, and a SIGKILL of a cluster controller's process under load
loses nothing it had handed to its MQTT client."""

from __future__ import annotations

import asyncio
import sqlite3

import pytest

from e2e_helpers import events, until
from joynr_sim.core.links import StoredLink, Terminus
from joynr_sim.runtime.participants import CounterProvider
from joynr_sim.simulation import Simulation
from joynr_sim.store.group_commit import after_commit
from joynr_sim.store.link_store import SqliteLinkStore
from joynr_sim.store.outbox import INCOMING, OUTGOING, Outbox


def rows_in_file(path) -> list[tuple]:
    """What another process would read: the committed rows only."""
    with sqlite3.connect(path) as db:
        return db.execute("SELECT direction, gbid, tag FROM messages ORDER BY rowid").fetchall()


async def test_a_turns_writes_are_committed_before_what_depends_on_them(tmp_path):
    outbox = Outbox(tmp_path / "o.sqlite", group_commit=True)
    seen = []
    outbox.put(OUTGOING, "gbid1", "m1/0", "t/low", b"one")
    outbox.put(OUTGOING, "gbid1", "m2/0", "t/low", b"two")
    assert rows_in_file(outbox.path) == []  # pending until the end of the turn
    after_commit(lambda: seen.append(rows_in_file(outbox.path)))
    await asyncio.sleep(0)  # one turn
    await asyncio.sleep(0)
    assert seen == [[("out", "gbid1", "m1/0"), ("out", "gbid1", "m2/0")]]
    assert outbox.batch.commits == 1  # both rows, one transaction
    outbox.close()


async def test_a_row_put_and_deleted_in_one_turn_never_reaches_the_file(tmp_path):
    outbox = Outbox(tmp_path / "o.sqlite", group_commit=True)
    statements = []
    outbox._db.set_trace_callback(statements.append)
    outbox.put(INCOMING, "gbid1", "m1/0", "t/low", b"x")
    outbox.delete(INCOMING, "gbid1", "m1/0")
    await asyncio.sleep(0)
    assert statements == [] and rows_in_file(outbox.path) == []
    # A committed row is deleted for real.
    outbox.put(INCOMING, "gbid1", "m2/0", "t/low", b"y")
    await asyncio.sleep(0)
    outbox.delete(INCOMING, "gbid1", "m2/0")
    assert outbox.held(INCOMING, "gbid1") == {}  # a read commits what is pending first
    assert rows_in_file(outbox.path) == []
    outbox.close()


async def test_a_simulated_crash_abandons_the_turns_writes(tmp_path):
    outbox = Outbox(tmp_path / "o.sqlite", group_commit=True)
    outbox.put(OUTGOING, "gbid1", "m1/0", "t/low", b"x")
    outbox.abandon()
    await asyncio.sleep(0)
    assert rows_in_file(outbox.path) == []
    outbox.close()


async def test_the_link_stores_unsettled_deliveries_are_committed_per_turn(tmp_path):
    path = tmp_path / "cc.links.sqlite"
    writer = SqliteLinkStore(path, synchronous="OFF")  # a link with durability 2 to hold them
    writer.save(StoredLink("sending", "gbid1", "cc1", Terminus("cc1", 2), (), None, None))
    writer.close()
    store = SqliteLinkStore(path, synchronous="OFF", group_commit=True)
    statements = []
    store._db.set_trace_callback(statements.append)
    for i in range(10):
        store.put_unsettled("sending", "gbid1", "cc1", f"m{i}/0", None)
    store.remove_unsettled("sending", "gbid1", "cc1", "m0/0")
    assert statements == []
    await asyncio.sleep(0)
    assert statements[0] == "BEGIN IMMEDIATE" and statements[-1] == "COMMIT" and len(statements) == 12
    reader = SqliteLinkStore(path, synchronous="OFF")
    assert [tag for tag, _ in reader.find("sending", "gbid1", "cc1").unsettled] == [f"m{i}/0" for i in range(1, 10)]
    reader.close()
    store.close()


@pytest.mark.e2e
@pytest.mark.parametrize("broker", ["amqtt", "mosquitto"])
async def test_a_sigkilled_cc_under_load_loses_nothing_its_mqtt_client_had(tmp_path, broker):
    # The consumer's cluster controller, cut off its broker, routes a burst of one-way calls:
    # paho holds them in memory only. Its process is SIGKILLed; what it committed to the
    # outbox before paho had them comes back with the restart, so every call arrives.
    count = 40
    async with Simulation(tmp_path, gbids=["gbid1"], broker=broker) as sim:
        consumer_cc = await sim.cluster_controller("cc-consumer", ["gbid1"])
        provider_cc = await sim.cluster_controller("cc-provider", ["gbid1"])
        provider_app = await sim.libjoynr("provider-app", provider_cc)
        await provider_app.register_provider("dom", "joynrsim/Counter", CounterProvider(), participant_id="counter")
        consumer_app = await sim.libjoynr("consumer-app", consumer_cc)
        proxy = await consumer_app.discover_proxy("joynrsim/Counter", "dom", scope="GLOBAL_ONLY")
        assert await proxy.call("get") == 0

        await sim.faults.partition("cc-consumer", "gbid1")
        await until(lambda: not consumer_cc.mqtt["gbid1"].connected.is_set())
        sent = {await proxy.one_way("increment", ttl_ms=120_000) for _ in range(count)}

        def routed_out() -> set[str]:
            return {e["msg"] for e in events(tmp_path, "msg.out", rt="cc-consumer", via="mqtt")} & sent

        await until(lambda: routed_out() == sent, timeout_s=30)
        # One more request on the host's loop, answered in a later turn than the routing.
        consumer_cc.table.lookup("counter")
        await consumer_cc.crash()  # SIGKILL
        await sim.faults.heal("cc-consumer", "gbid1")
        await consumer_cc.restart()
        await until(lambda: len([e for e in events(tmp_path, "msg.deliver", rt="provider-app")
                                 if e["msg"] in sent]) == count, timeout_s=60)
        assert await proxy.call("get") == count
    resumes = events(tmp_path, "link.resume", rt="cc-consumer")
    resent = events(tmp_path, "msg.out", rt="cc-consumer", resent=True)
    assert {e["msg"] for e in resent if e["type"] == "o"} == sent  # from the outbox, not from paho
    assert all(e["type"] == "rq" for e in resent if e["type"] != "o")
    assert sum(e["resent"] for e in resumes) == len(resent) == count  # the calls, nothing else


async def test_a_runtimes_trace_lines_of_a_turn_go_out_in_one_write(tmp_path):
    from joynr_sim.trace import TraceWriter, read_events

    writer = TraceWriter(tmp_path, "run", "cc1", "cluster-controller", lambda: 0, batched=True)
    path = tmp_path / "trace" / "cc1.ndjson"
    writes = []
    write = writer._file.write
    writer._file.write = lambda text: (writes.append(text), write(text))[1]
    for _ in range(3):
        writer.emit("life.start", target="cc1", target_kind="cluster-controller")
    assert list(read_events(path)) == []  # not yet: the turn is not over
    await asyncio.sleep(0)
    assert [e["seq"] for e in read_events(path)] == [0, 1, 2] and len(writes) == 1
    # Outside a loop (a tool, another thread) every line is written at once.
    await asyncio.to_thread(writer.emit, "life.stop", target="cc1", target_kind="cluster-controller")
    assert [e["seq"] for e in read_events(path)] == [0, 1, 2, 3]
    writer.close()
