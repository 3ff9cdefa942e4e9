"""Routing-table persistency of a cluster controller (joynr's message-router persistency,
off by default): the entries its table accepted, except provisioned and InProcess ones, are
kept in ``state/<cc id>.routes.sqlite``, group-committed per loop turn, and offered to the
table again through its policy at every start, expired ones left out. The scenarios show the
replies of requests handed on before a crash lost without it and delivered with it."""

from __future__ import annotations

import asyncio
import dataclasses
import sqlite3
from pathlib import Path

import pytest

from joynr_sim.clock import SimClock
from joynr_sim.core.address import InProcessAddress, MqttAddress, WebSocketClientAddress
from joynr_sim.core.routing import RoutingEntry, RoutingTable
from joynr_sim.runtime.cluster_controller import ClusterController
from joynr_sim.scenario import ScenarioError, load_scenario, parse_scenario
from joynr_sim.scenario.runner import run_scenario
from joynr_sim.store.route_store import RouteStore, RoutingTablePersistency

LIBRARY = Path(__file__).resolve().parent.parent / "scenarios"
OFF = "replies-after-provider-cc-crash-persistency-off.yaml"
ON = "replies-after-provider-cc-crash-persistency-on.yaml"
NOW = 1_000_000
REPLY_TO = RoutingEntry(MqttAddress("gbid1", "cc2"), True, NOW + 8_000)


def rows_in_file(path: Path) -> list[tuple]:
    """What the next process would read: the committed rows only."""
    with sqlite3.connect(path) as db:
        return db.execute("SELECT participant_id, origin FROM routes ORDER BY rowid").fetchall()


def cc_table(clock=lambda: NOW) -> RoutingTable:
    return RoutingTable("cluster-controller", own_addresses=[MqttAddress("gbid1", "cc1")],
                        known_gbids=["gbid1"], clock=clock)


# -- the store ----------------------------------------------------------------------------

def test_routes_survive_the_store_and_expired_ones_are_not_loaded(tmp_path):
    store = RouteStore(tmp_path / "cc1.routes.sqlite")  # no loop: every write commits at once
    store.put("proxy-1", REPLY_TO, "reply-to")
    store.put("provider-1", RoutingEntry(WebSocketClientAddress("app1"), True, NOW + 60_000), "routing-provider")
    store.put("old-proxy", RoutingEntry(MqttAddress("gbid1", "cc3"), True, NOW - 1), "reply-to")
    store.close()

    again = RouteStore(tmp_path / "cc1.routes.sqlite")
    assert again.load(NOW) == [
        ("proxy-1", REPLY_TO, "reply-to"),
        ("provider-1", RoutingEntry(WebSocketClientAddress("app1"), True, NOW + 60_000), "routing-provider"),
    ]
    again.delete("proxy-1")
    assert [pid for pid, _, _ in again.load(NOW)] == ["provider-1"]
    again.close()


def test_an_inprocess_entry_is_never_stored(tmp_path):
    store = RouteStore(tmp_path / "r.sqlite")
    with pytest.raises(ValueError, match="^entry: an InProcess address"):
        store.put("p", RoutingEntry(InProcessAddress(object()), False, NOW), "registration")
    store.close()


async def test_a_turns_writes_commit_at_its_end_and_a_crash_loses_only_them(tmp_path):
    store = RouteStore(tmp_path / "r.sqlite")
    store.put("proxy-1", REPLY_TO, "reply-to")
    store.put("proxy-2", REPLY_TO, "reply-to")
    assert rows_in_file(store.path) == []  # pending until the end of the turn
    await asyncio.sleep(0)
    assert rows_in_file(store.path) == [("proxy-1", "reply-to"), ("proxy-2", "reply-to")]
    assert store.batch.commits == 1  # one transaction for the turn

    store.put("proxy-3", REPLY_TO, "reply-to")
    store.abandon()  # a SIGKILL in this turn
    await asyncio.sleep(0)
    assert [pid for pid, _, _ in store.load(NOW)] == ["proxy-1", "proxy-2"]
    store.close()


async def test_a_failed_write_is_reported_and_raised(tmp_path):
    failures: list[BaseException] = []
    store = RouteStore(tmp_path / "r.sqlite", group_commit=False, on_error=failures.append)
    store._db.execute("DROP TABLE routes")  # the file no longer takes the row
    with pytest.raises(sqlite3.OperationalError):
        store.put("proxy-1", REPLY_TO, "reply-to")
    assert len(failures) == 1 and isinstance(failures[0], sqlite3.OperationalError)
    store.close()


# -- following a routing table ----------------------------------------------------------

def test_learned_entries_are_kept_provisioned_and_inprocess_ones_are_not(tmp_path):
    persistency = RoutingTablePersistency(RouteStore(tmp_path / "r.sqlite"))
    table = cc_table()
    persistency.attach(table)
    persistency.attach(table)  # a stop and a start keep the table: one listener
    table.put("gcd", RoutingEntry(MqttAddress("gbid1", "gcd"), False, 2**62, True), "provisioned")
    table.put("own", RoutingEntry(InProcessAddress(object()), False, 2**62), "registration")
    table.put("proxy-1", REPLY_TO, "reply-to")
    table.put("provider-2", RoutingEntry(MqttAddress("gbid1", "cc3"), True, NOW + 60_000), "gcd")
    table.put("provider-1", RoutingEntry(WebSocketClientAddress("app1"), True, 2**62), "routing-provider")
    table.put("loop", RoutingEntry(MqttAddress("gbid1", "cc1"), True, NOW + 60_000), "gcd")  # refused
    assert rows_in_file(persistency.store.path) == [
        ("proxy-1", "reply-to"), ("provider-2", "gcd"), ("provider-1", "routing-provider")]

    table.remove("provider-1")
    table.purge_expired(NOW + 10_000)  # proxy-1's route expires
    assert rows_in_file(persistency.store.path) == [("provider-2", "gcd")]
    persistency.store.close()


def test_a_start_offers_the_kept_entries_to_the_table_through_its_policy(tmp_path):
    path = tmp_path / "r.sqlite"
    first = RoutingTablePersistency(RouteStore(path))
    table = cc_table()
    first.attach(table)
    table.put("proxy-1", REPLY_TO, "reply-to")
    table.put("provider-1", RoutingEntry(WebSocketClientAddress("app1"), True, 2**62), "routing-provider")
    first.store.close()

    # The next start: the libjoynr runtime's participant already announced a local entry.
    restarted = cc_table()
    decisions = []
    restarted.add_listener(decisions.append)
    restarted.put("provider-1", RoutingEntry(InProcessAddress(object()), True, 2**62), "registration")
    second = RoutingTablePersistency(RouteStore(path))
    second.attach(restarted)
    assert second.restore(restarted.put, NOW) == 2
    assert restarted.lookup("proxy-1") == REPLY_TO
    assert [(d.participant_id, d.origin, d.outcome) for d in decisions[1:]] == [
        ("proxy-1", "reply-to", "created"), ("provider-1", "routing-provider", "refused")]
    assert isinstance(restarted.lookup("provider-1").address, InProcessAddress)
    # The refused offer changed nothing the table holds: its row stays as it was.
    assert sorted(rows_in_file(path)) == [("provider-1", "routing-provider"), ("proxy-1", "reply-to")]
    # Later, once its route expired, a start loads nothing for it.
    assert second.restore(cc_table().put, NOW + 8_000) == 1
    second.store.close()


# -- where the option enters --------------------------------------------------------------

@pytest.mark.parametrize("bad", ["yes", 1, None])
def test_a_cluster_controller_refuses_a_persistency_that_is_not_a_boolean(tmp_path, bad):
    with pytest.raises(ValueError, match="^persist_routing_table: expected true or false"):
        ClusterController("cc1", ["gbid1"], brokers=None, run_dir=tmp_path, run_id="r",  # type: ignore[arg-type]
                          clock=SimClock(), persist_routing_table=bad)


def test_the_option_is_off_by_default_and_opens_no_file(tmp_path):
    cc = ClusterController("cc1", ["gbid1"], brokers=None, run_dir=tmp_path, run_id="r",  # type: ignore[arg-type]
                           clock=SimClock())
    assert cc.persistency is None
    cc.close()
    assert not (tmp_path / "state" / "cc1.routes.sqlite").exists()


SCENARIO = """\
name: x
reproduces: {{seed: 003_6b6ea9fcba272a2c.txt, scenario: All rules with persistency ON or OFF}}
smoke: "x"
backends: [gbid1]
runtimes:
  - {{kind: cluster-controller, id: cc1{option}}}
steps:
  - advance: 1
"""


def test_a_scenario_reads_the_option_and_refuses_a_bad_value():
    assert parse_scenario(SCENARIO.format(option="")).runtimes[0].persist_routing_table is False
    on = parse_scenario(SCENARIO.format(option=", persist_routing_table: true"))
    assert on.runtimes[0].persist_routing_table is True
    with pytest.raises(ScenarioError, match=r"runtimes\[0\]\.persist_routing_table: expected true or false"):
        parse_scenario(SCENARIO.format(option=", persist_routing_table: 'yes'"))


# -- the scenarios ------------------------------------------------------------------------

@pytest.mark.e2e
async def test_replies_are_lost_after_the_crash_without_persistency(tmp_path):
    result = await run_scenario(load_scenario(LIBRARY / OFF), tmp_path, broker="amqtt")
    assert result.outcome == "passed", result.failed_step
    assert not (Path(result.run_dir) / "state" / "cc1.routes.sqlite").exists()


@pytest.mark.e2e
async def test_replies_are_delivered_after_the_crash_with_persistency(tmp_path):
    scenario = load_scenario(LIBRARY / ON)
    result = await run_scenario(scenario, tmp_path / "on", broker="amqtt")
    assert result.outcome == "passed", result.failed_step
    assert (Path(result.run_dir) / "state" / "cc1.routes.sqlite").exists()

    # The same run with the option off fails: the feature is what delivers the replies.
    off = dataclasses.replace(scenario, runtimes=tuple(
        dataclasses.replace(rt, persist_routing_table=False) for rt in scenario.runtimes))
    result = await run_scenario(off, tmp_path / "off", broker="amqtt")
    assert result.outcome == "failed"
    assert result.failed_step is not None and result.failed_step.kind == "expect_route"
