"""The trace writer: schema fields, sequence across restarts, a torn last line."""

from __future__ import annotations

import pytest

from joynr_sim.core.address import MqttAddress
from joynr_sim.core.routing import RoutingEntry, RoutingTable
from joynr_sim.trace import SCHEMA_VERSION, TraceWriter, read_events, read_run


def test_events_carry_the_common_fields_and_routing_decisions(tmp_path):
    writer = TraceWriter(tmp_path, "run-1", "cc1", "cluster-controller", clock=lambda: 1234)
    table = RoutingTable("cluster-controller", clock=lambda: 0)
    table.add_listener(writer.routing_listener)
    table.put("p", RoutingEntry(MqttAddress("gbid1", "cc2"), True, 99), origin="gcd")
    writer.emit("life.stop", target="cc1", target_kind="cluster-controller")
    writer.close()
    put, stop = read_events(tmp_path / "trace" / "cc1.ndjson")
    assert {k: put[k] for k in ("v", "ts", "seq", "run", "rt", "kind", "ev")} == {
        "v": SCHEMA_VERSION, "ts": 1234, "seq": 0, "run": "run-1", "rt": "cc1",
        "kind": "cluster-controller", "ev": "rt.put",
    }
    assert put["outcome"] == "created" and put["origin"] == "gcd" and put["old"] is None
    assert put["entry"] == {"type": "Mqtt", "addr": "gbid1/cc2", "visible": True, "expiry": 99,
                            "sticky": False}
    assert stop["seq"] == 1


def test_a_torn_last_line_is_skipped_and_a_restart_continues_the_sequence(tmp_path):
    writer = TraceWriter(tmp_path, "r", "cc1", "cluster-controller", clock=lambda: 1)
    for _ in range(3):
        writer.emit("life.start", target="cc1", target_kind="cluster-controller")
    writer.close()
    path = tmp_path / "trace" / "cc1.ndjson"
    with open(path, "a") as f:  # a crash in the middle of a write
        f.write('{"v":1,"ts":2,"seq":3,"ev":"msg.')
    assert [e["seq"] for e in read_events(path)] == [0, 1, 2]
    again = TraceWriter(tmp_path, "r", "cc1", "cluster-controller", clock=lambda: 3)
    event = again.emit("life.restart", target="cc1", target_kind="cluster-controller")
    again.close()
    assert event["seq"] == 3
    # The torn fragment now sits inside the file: readers skip it, nothing else is lost.
    assert [e["seq"] for e in read_run(tmp_path)] == [0, 1, 2, 3]


def test_an_unknown_event_name_is_refused(tmp_path):
    writer = TraceWriter(tmp_path, "r", "x", "libjoynr", clock=lambda: 0)
    with pytest.raises(ValueError, match="msg.lost"):
        writer.emit("msg.lost")
    writer.close()
    assert not list(read_events(tmp_path / "trace" / "x.ndjson"))
