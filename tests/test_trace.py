"""The trace writer: schema fields, sequence across restarts, a torn last line; and the
event catalogue it writes against: every event of a real run is declared there, field by
field, and the names the simulator's core defines are the catalogue's."""

from __future__ import annotations

import json
from pathlib import Path

import jsonschema
import pytest

import trace_schema
from joynr_sim.core.actions import Drop
from joynr_sim.core.address import ADDRESS_TYPES, MqttAddress
from joynr_sim.core.message import REQUEST, JoynrMessage
from joynr_sim.core.policies import POLICY_NAMES, RUNTIME_KINDS, Origin
from joynr_sim.core.routing import RoutingEntry, RoutingTable
from joynr_sim.runtime.action_trace import trace_action
from joynr_sim.scenario import load_scenario
from joynr_sim.scenario.runner import run_scenario
from joynr_sim.trace import SCHEMA_VERSION, TraceWriter, read_events, read_run

LIBRARY = Path(__file__).resolve().parent.parent / "scenarios"


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


def test_every_value_is_written_even_those_the_fast_encoder_refuses(tmp_path):
    """Lines are encoded by orjson; a lone surrogate (from a hostile frame's repr) or an
    int over 64 bits still makes a line, through json, and nothing is dropped."""
    writer = TraceWriter(tmp_path, "r", "cc1", "cluster-controller", clock=lambda: 5)
    values = ["caf\u00e9", "lone \ud800 surrogate", 2**70, [1, "x", None, True], {"k": 1.5}]
    for value in values:
        writer.emit("msg.drop", msg=None, reason="decode-error", detail=value)
    writer.close()
    events = list(read_events(tmp_path / "trace" / "cc1.ndjson"))
    assert [e["detail"] for e in events] == values
    assert [e["seq"] for e in events] == [0, 1, 2, 3, 4]


def test_an_unknown_event_name_is_refused(tmp_path):
    writer = TraceWriter(tmp_path, "r", "x", "libjoynr", clock=lambda: 0)
    with pytest.raises(ValueError, match="msg.lost"):
        writer.emit("msg.lost")
    writer.close()
    assert not list(read_events(tmp_path / "trace" / "x.ndjson"))


# -- the event catalogue ----------------------------------------------------------------

_VALIDATORS = {
    ev: jsonschema.Draft202012Validator(trace_schema.json_schema(ev)) for ev in trace_schema.EVENTS
}


def catalogue_problems(event: dict) -> list[str]:
    """What in one event the catalogue does not declare: its name, a field, a type, a value."""
    ev = event.get("ev")
    if ev not in _VALIDATORS:
        return [f"ev: {ev!r} is not a declared event"]
    return [
        f"{ev} {err.json_path}: {err.message}"
        for err in sorted(_VALIDATORS[ev].iter_errors(event), key=lambda err: err.json_path)
    ]


def _specs(node: dict, where: str):
    """Every field spec in the catalogue, nested record fields included, with its place."""
    for name, spec in node.items():
        yield f"{where}.{name}", spec
        props = trace_schema.resolve(spec).get("properties", {})
        items = trace_schema.resolve(spec).get("items", {})
        yield from _specs(props, f"{where}.{name}")
        yield from _specs(items.get("properties", {}), f"{where}.{name}[]")


def test_the_catalogue_declares_each_field_with_a_json_type_and_one_line():
    cat = trace_schema.catalogue()
    assert cat["version"] == SCHEMA_VERSION == 1
    places = list(_specs(cat["common"], "common"))
    for ev, event in cat["events"].items():
        assert event["description"] and "\n" not in event["description"], ev
        places += _specs(event["fields"], ev)
    json_types = {"string", "integer", "boolean", "array", "object", "null"}
    for where, spec in places:
        types = spec["type"] if isinstance(spec["type"], list) else [spec["type"]]
        assert types and set(types) <= json_types, where
        assert spec["description"] and "\n" not in spec["description"], where
        trace_schema.resolve(spec)  # every $ref resolves
    for ev in cat["events"]:
        jsonschema.Draft202012Validator.check_schema(trace_schema.json_schema(ev))
        assert not set(cat["events"][ev]["fields"]) & set(cat["common"]), ev


def test_the_core_names_are_the_catalogue_vocabularies():
    assert list(Origin) == list(trace_schema.vocabulary("origin"))
    assert ADDRESS_TYPES == trace_schema.vocabulary("address_type")
    assert POLICY_NAMES == trace_schema.vocabulary("policy")
    assert set(RUNTIME_KINDS) <= set(trace_schema.vocabulary("runtime_kind"))


def test_a_field_or_value_the_catalogue_does_not_declare_is_caught(tmp_path):
    writer = TraceWriter(tmp_path, "r", "cc1", "cluster-controller", clock=lambda: 5)
    table = RoutingTable("cluster-controller", clock=lambda: 0)
    table.add_listener(writer.routing_listener)
    table.put("p", RoutingEntry(MqttAddress("gbid1", "cc2"), True, 99), origin="gcd")
    writer.close()
    (put,) = read_events(tmp_path / "trace" / "cc1.ndjson")
    assert catalogue_problems(put) == []
    problems = catalogue_problems({**put, "field": "participantId"})
    assert len(problems) == 1 and "'field' was unexpected" in problems[0]
    assert catalogue_problems({**put, "origin": "gdc"}) == [
        f"rt.put $.origin: 'gdc' is not one of {[str(o) for o in Origin]}"
    ]
    assert "$.entry.sticky" in catalogue_problems({**put, "entry": {**put["entry"], "sticky": 1}})[0]
    assert catalogue_problems({**put, "ev": "rt.lost"}) == ["ev: 'rt.lost' is not a declared event"]
    del put["seq"]
    assert catalogue_problems(put) == ["rt.put $: 'seq' is a required property"]


def test_an_expired_drop_says_the_expiry_date_and_the_time_it_was_judged_by(tmp_path):
    writer = TraceWriter(tmp_path, "r", "cc1", "cluster-controller", clock=lambda: 5_000)
    msg = JoynrMessage(REQUEST, "proxy", "provider", 4_000, b"x")
    trace_action(writer, Drop(msg, "expired", now=4_001))  # the runtime's clock, ahead of the run's ts
    trace_action(writer, Drop(msg, "hop-limit"))
    writer.close()
    expired, hops = read_events(tmp_path / "trace" / "cc1.ndjson")
    assert (expired["reason"], expired["exp"], expired["now"], expired["ts"]) == ("expired", 4_000, 4_001, 5_000)
    assert "now" not in hops
    assert catalogue_problems(expired) == catalogue_problems(hops) == []
    assert catalogue_problems({**expired, "now": "4001"}) != []


# Together they write every event but three that no library scenario is sure to reach: a
# failed link-store write, a takeover storm, and a resume (amqtt loses its sessions when it
# restarts, so there the link is established anew). A restarted cluster controller recovers
# its broker sessions by link name (link.recover).
CATALOGUE_RUNS = (
    "cc-crash-with-requests-in-flight.yaml", "gcd-touch-keeps-entries-fresh.yaml",
    "session-detached-past-timeout.yaml", "faults/duplicate-cc-id.yaml",
    "subscription-to-global-broadcast.yaml",  # every sub.* and mc.* event
)
NOT_SURE_TO_BE_REACHED = {
    "link.store", "link.takeover-storm", "link.resume",
    "fault.partition", "fault.blackhole", "fault.delay", "fault.heal", "fault.clock_skew",  # no library scenario yet
    "fault.duplicate", "fault.reorder",  # the memory network's own: never on the real brokers these runs use
    "life.outside",  # only with --gcd external on external brokers: test_external_gcd_e2e reads it
}


@pytest.mark.e2e
async def test_every_event_of_real_runs_is_declared_in_the_catalogue(tmp_path):
    written: set[str] = set()
    problems: dict[str, list[str]] = {}
    for file in CATALOGUE_RUNS:
        result = await run_scenario(load_scenario(LIBRARY / file), tmp_path / Path(file).stem)
        assert result.passed, f"{file}: {result.outcome} {result.error}"
        for event in read_run(result.run_dir):
            written.add(event["ev"])
            for problem in catalogue_problems(event):
                problems.setdefault(problem, []).append(f"{file}: {event['rt']}#{event['seq']}")
    assert problems == {}
    assert written >= trace_schema.EVENTS - NOT_SURE_TO_BE_REACHED


def test_read_run_passes_over_lines_it_cannot_order(tmp_path):
    trace = tmp_path / "trace"
    trace.mkdir()
    good = {"v": 1, "ts": 5, "seq": 0, "run": "r", "rt": "a", "kind": "runner", "ev": "step"}
    lines = [good, [1, 2], {**good, "ts": "5"}, {**good, "seq": None}, {**good, "rt": 3}, {**good, "seq": 1}]
    (trace / "a.ndjson").write_text("".join(json.dumps(x) + "\n" for x in lines))
    assert [e["seq"] for e in read_run(tmp_path)] == [0, 1]
