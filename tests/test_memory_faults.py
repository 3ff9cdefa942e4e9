"""The memory network's own link faults, ``duplicate`` and ``reorder``, end to end: what a
run on memory shows of them in the trace, the scenario steps and what the loader refuses,
and the one-line refusal wherever the network is TCP (a fault proxy on loopback), before a
run (``check_inputs``) and at the fault itself. Runs on memory are in this process, in
virtual time: no broker, no socket."""

from __future__ import annotations

from pathlib import Path

import jsonschema
import pytest

import trace_schema
from joynr_sim.faults import FaultProxy, Faults
from joynr_sim.network.links import MemoryLink
from joynr_sim.scenario import ScenarioError, parse_scenario
from joynr_sim.scenario.failure import StepFailed
from joynr_sim.scenario.run_inputs import check_inputs
from joynr_sim.scenario.runner import run_scenario
from joynr_sim.scenario.steps import ScenarioRunner
from joynr_sim.trace import TraceWriter, read_run

HEAD = """\
name: memory-faults
reproduces: {seed: 004_b96328aa0d55de66.txt, scenario: "a link that duplicates or reorders packets"}
smoke: the network's own faults
backends: [gbid1]
runtimes:
  - {kind: cluster-controller, id: cc1}
  - {kind: libjoynr, id: app1, cc: cc1}
  - {kind: cluster-controller, id: cc2}
  - {kind: libjoynr, id: consumer, cc: cc2}
steps:
  - register: {runtime: app1, provider: echo, domain: dom, interface: joynrsim/Echo, scope: GLOBAL}
  - proxy: {runtime: consumer, name: px, domain: dom, interface: joynrsim/Echo, scope: GLOBAL_ONLY}
"""

DUPLICATE = HEAD + """\
  - duplicate: {runtime: cc1, gbid: gbid1, percent: 100}
  - call: {proxy: px, method: echo, args: [one], expect: {result: one}}
  - call: {proxy: px, method: echo, args: [two], expect: {result: two}}
  - heal: {runtime: cc1, gbid: gbid1}
  - call: {proxy: px, method: echo, args: [three], expect: {result: three}}
"""

REORDER = HEAD + """\
  - call: {proxy: px, method: echo, args: [first], expect: {result: first}}
  - reorder: {runtime: cc1, gbid: gbid1, ms: 50}
  - start_calls: {name: shuffled, proxy: px, method: echo, args: [s], count: 10, interval_ms: 1}
  - await_calls: {name: shuffled, expect: {result: s}}
  - heal: {runtime: cc1, gbid: gbid1}
  - start_calls: {name: ordered, proxy: px, method: echo, args: [o], count: 10, interval_ms: 1}
  - await_calls: {name: ordered, expect: {result: o}}
"""

ONE_LINERS = {
    "duplicate": "duplicate: only the memory network duplicates packets (TCP cannot); run with --network memory",
    "reorder": "reorder: only the memory network reorders packets (TCP cannot); run with --network memory",
}


def catalogue_problems(event: dict) -> list[str]:
    validator = jsonschema.Draft202012Validator(trace_schema.json_schema(event["ev"]))
    return [f"{err.json_path}: {err.message}" for err in validator.iter_errors(event)]


def in_order(events: list[dict], rt: str, ev: str, **match: object) -> list[dict]:
    """One runtime's events of a name, in the order it wrote them."""
    return sorted((e for e in events if e["rt"] == rt and e["ev"] == ev
                   and all(e.get(k) == v for k, v in match.items())), key=lambda e: e["seq"])


def echo_requests(events: list[dict], rt: str, ev: str) -> list[str]:
    """The correlation ids of the echo requests ``rt`` sent or received over MQTT (not the
    discovery's, which go to the GCD), in its order."""
    return [e["corr"] for e in in_order(events, rt, ev, via="mqtt", type="rq")
            if not e["to"].startswith("capabilities")]


# -- on the memory network ---------------------------------------------------------------

async def test_a_duplicating_link_delivers_each_message_twice_and_the_copy_is_dropped(tmp_path):
    """cc1's broker link doubles every packet both ways: the broker sends cc1 each request
    twice, and takes each reply cc1 publishes twice (two QoS 1 publishes), so cc2 receives it
    twice. The second copy is not a second ``msg.in``: each controller drops it by message id,
    as ``msg.drop`` reason ``duplicate`` via mqtt, and every call is answered once."""
    result = await run_scenario(parse_scenario(DUPLICATE), tmp_path, seed=3, network="memory")
    assert result.passed, result.error or result.failed_step
    events = list(read_run(result.run_dir))

    faults = [e for e in events if e["ev"].startswith("fault.")]
    assert [(e["ev"], e["target"], e["target_kind"], e["gbid"]) for e in faults] == [
        ("fault.duplicate", "cc1", "cluster-controller", "gbid1"), ("fault.heal", "cc1", "cluster-controller", "gbid1")]
    assert faults[0]["percent"] == 100 and faults[0]["connections"] == 1
    assert faults[1]["fault"] == "duplicate"
    assert [catalogue_problems(e) for e in faults] == [[], []]

    one, two, three = echo_requests(events, "cc2", "msg.out")
    assert echo_requests(events, "cc1", "msg.in") == [one, two, three]  # each taken in once
    drops = {(e["rt"], e["type"], e["corr"], e["via"], e["gbid"])
             for e in events if e["ev"] == "msg.drop" and e["reason"] == "duplicate"}
    assert drops == {("cc1", "rq", one, "mqtt", "gbid1"), ("cc1", "rq", two, "mqtt", "gbid1"),
                     ("cc2", "rp", one, "mqtt", "gbid1"), ("cc2", "rp", two, "mqtt", "gbid1")}
    # healed: the third call's request and reply passed once, nothing dropped
    assert not [e for e in events if e["ev"] == "msg.drop" and e.get("corr") == three]


async def test_a_reordering_link_lets_later_requests_overtake_until_healed(tmp_path):
    """Ten requests a millisecond apart, each late by a drawn 0..50 ms on cc1's link: cc1
    takes them in another order than cc2 sent them, loses none; after the heal the next ten
    arrive in the order they were sent."""
    result = await run_scenario(parse_scenario(REORDER), tmp_path, seed=3, network="memory")
    assert result.passed, result.error or result.failed_step
    events = list(read_run(result.run_dir))

    faults = [e for e in events if e["ev"].startswith("fault.")]
    assert [(e["ev"], e["target"], e["gbid"], e.get("ms"), e.get("fault")) for e in faults] == [
        ("fault.reorder", "cc1", "gbid1", 50, None), ("fault.heal", "cc1", "gbid1", None, "reorder")]
    assert [catalogue_problems(e) for e in faults] == [[], []]

    sent, taken = echo_requests(events, "cc2", "msg.out"), echo_requests(events, "cc1", "msg.in")
    assert len(sent) == 21 and sorted(taken) == sorted(sent)  # the warm-up call and twenty more
    during, after = slice(1, 11), slice(11, 21)
    assert set(taken[during]) == set(sent[during]) and taken[during] != sent[during]
    assert taken[after] == sent[after]
    assert not [e for e in events if e["ev"] == "msg.drop"]


# -- the scenario steps ------------------------------------------------------------------

def test_the_steps_load_with_their_titles():
    s = parse_scenario(HEAD + """\
  - duplicate: {runtime: cc1, gbid: gbid1, percent: 25}
  - heal: {runtime: cc1, gbid: gbid1}
  - reorder: {runtime: app1, ms: 40}
  - heal: {runtime: app1}
  - call: {proxy: px, method: echo}
""")
    assert (s.steps[2].kind, dict(s.steps[2].args)) == ("duplicate", {"runtime": "cc1", "gbid": "gbid1", "percent": 25})
    assert (s.steps[4].kind, dict(s.steps[4].args)) == ("reorder", {"runtime": "app1", "gbid": None, "ms": 40})
    assert [st.title for st in s.steps[2:6]] == [
        "duplicate cc1-gbid1 25%", "heal cc1-gbid1", "reorder app1-cc 0..40 ms", "heal app1-cc"]
    assert not s.steps[2].checks  # a fault, not a check


@pytest.mark.parametrize("step, field, words", [
    ("duplicate: {runtime: cc1, gbid: gbid1, percent: 0}", "steps[2].duplicate.percent", "at least 1"),
    ("duplicate: {runtime: cc1, gbid: gbid1, percent: 101}", "steps[2].duplicate.percent", "at most 100"),
    ("duplicate: {runtime: cc1, gbid: gbid1, percent: 50.5}", "steps[2].duplicate.percent", "expected an integer"),
    ("duplicate: {runtime: cc1, gbid: gbid1}", "steps[2].duplicate", "missing required key 'percent'"),
    ("duplicate: {runtime: cc1, percent: 5}", "steps[2].duplicate", "name the broker link with gbid"),
    ("duplicate: {runtime: app1, gbid: gbid1, percent: 5}", "steps[2].duplicate.gbid", "leave gbid out"),
    ("duplicate: {runtime: nobody, percent: 5}", "steps[2].duplicate.runtime", "unknown runtime"),
    ("reorder: {runtime: cc1, gbid: gbid1, ms: 600001}", "steps[2].reorder.ms", "at most 600000"),
    ("reorder: {runtime: cc1, gbid: gbid1, ms: -1}", "steps[2].reorder.ms", "at least 0"),
    ("reorder: {runtime: cc1, gbid: gbid1}", "steps[2].reorder", "missing required key 'ms'"),
    ("reorder: {runtime: app1, ms: 5, jitter_ms: 5}", "steps[2].reorder.jitter_ms", "unknown key"),
    ("reorder: {runtime: cc1, gbid: gbid2, ms: 5}", "steps[2].reorder.gbid", "gbid2"),
])
def test_a_bad_step_is_refused_in_one_line_naming_the_field(step, field, words):
    with pytest.raises(ScenarioError) as err:
        parse_scenario(HEAD + f"  - {step}\n", "bad.yaml")
    assert (err.value.field, "\n" in str(err.value)) == (field, False), str(err.value)
    assert words in err.value.message, str(err.value)


@pytest.mark.parametrize("kind, step", [
    ("duplicate", "duplicate: {runtime: cc1, gbid: gbid1, percent: 10}"),
    ("reorder", "reorder: {runtime: app1, ms: 10}"),
])
def test_a_real_network_is_refused_before_anything_runs(kind, step, tmp_path):
    faulty = parse_scenario(HEAD + f"  - {step}\n  - call: {{proxy: px, method: echo}}\n", "faulty.yaml")
    plain = parse_scenario(HEAD.replace("name: memory-faults", "name: plain") + "  - call: {proxy: px, method: echo}\n",
                           "plain.yaml")
    for network in (None, "amqtt", "mosquitto"):  # None: the scenario's broker, a real one
        assert check_inputs([plain], out=tmp_path, broker=None, gcd_store=None, network=network) is None
        assert check_inputs([plain, faulty], out=tmp_path, broker=None, gcd_store=None, network=network) == (
            f"faulty.yaml: step 2 {kind} needs --network memory")
    assert check_inputs([plain, faulty], out=tmp_path, broker=None, gcd_store=None, network="memory") is None


# -- on a fault proxy: TCP ---------------------------------------------------------------

def faults_over(make: type, tmp_path: Path) -> tuple[Faults, list[TraceWriter]]:
    """A ``Faults`` whose links are ``make(name, seed)`` objects, none of them started: a
    ``FaultProxy`` opens its socket only in ``start``, which these checks never need."""
    opened: list[TraceWriter] = []

    def open_trace() -> TraceWriter:
        opened.append(TraceWriter(tmp_path, "r", "faults", "runner", lambda: 0))
        return opened[-1]

    async def make_link(name, runtime_id, gbid, upstream):
        return make(name, upstream) if make is FaultProxy else make(name, 7)

    return Faults(open_trace, seed=7, make_link=make_link), opened


async def test_a_fault_proxy_refuses_both_in_one_line_and_traces_nothing(tmp_path):
    faults, opened = faults_over(FaultProxy, tmp_path)
    await faults.mqtt_links("cc1", "cluster-controller", ["gbid1"], lambda gbid: ("127.0.0.1", 1))
    await faults.websocket_link("app1", lambda: ("127.0.0.1", 2))
    with pytest.raises(ValueError) as duplicate:
        await faults.duplicate("cc1", "gbid1", percent=50)
    with pytest.raises(ValueError) as reorder:
        await faults.reorder("app1", ms=5)
    assert (str(duplicate.value), str(reorder.value)) == (ONE_LINERS["duplicate"], ONE_LINERS["reorder"])
    assert (faults.active("cc1", "gbid1"), faults.active("app1"), opened) == (None, None, [])
    with pytest.raises(ValueError, match="no runtime 'cc9'"):  # the link is named before the network is judged
        await faults.duplicate("cc9", "gbid1", percent=50)
    await faults.close()


@pytest.mark.parametrize("kind, args", [("duplicate", {"percent": 100}), ("reorder", {"ms": 30})])
async def test_a_scenario_step_on_a_fault_proxy_fails_with_the_one_line(kind, args, tmp_path):
    faults, _ = faults_over(FaultProxy, tmp_path)
    await faults.mqtt_links("cc1", "cluster-controller", ["gbid1"], lambda gbid: ("127.0.0.1", 1))

    class Sim:
        pass

    sim = Sim()
    sim.faults = faults  # type: ignore[attr-defined]
    (key, value), = args.items()
    s = parse_scenario(HEAD + f"  - {kind}: {{runtime: cc1, gbid: gbid1, {key}: {value}}}\n")
    with pytest.raises(StepFailed) as err:
        await ScenarioRunner(s, sim).run_step(s.steps[2])  # type: ignore[arg-type]
    assert str(err.value) == ONE_LINERS[kind]
    await faults.close()


async def test_on_memory_links_both_are_validated_reported_traced_and_healed(tmp_path):
    faults, opened = faults_over(MemoryLink, tmp_path)
    await faults.mqtt_links("cc1", "cluster-controller", ["gbid1"], lambda gbid: ("127.0.0.1", 1))
    for bad in (0, 101, True, 5.0, "5", None):
        with pytest.raises(ValueError, match=r"^percent: .*from 1 to 100"):
            await faults.duplicate("cc1", "gbid1", percent=bad)  # type: ignore[arg-type]
    for bad in (-1, 600_001, None):
        with pytest.raises(ValueError, match=r"^ms: .*from 0 to 600000"):
            await faults.reorder("cc1", "gbid1", ms=bad)
    assert faults.active("cc1", "gbid1") is None and opened == []  # nothing took effect

    await faults.duplicate("cc1", "gbid1", percent=40)
    assert faults.active("cc1", "gbid1") == "duplicate"
    await faults.heal("cc1", "gbid1")
    await faults.reorder("cc1", "gbid1", ms=0)
    assert faults.active("cc1", "gbid1") == "reorder"
    await faults.heal("cc1", "gbid1")
    assert faults.active("cc1", "gbid1") is None
    await faults.close()

    events = list(read_run(tmp_path))
    link = {"target": "cc1", "target_kind": "cluster-controller", "gbid": "gbid1", "connections": 0}
    assert [{k: e[k] for k in e if k not in ("v", "ts", "seq", "run", "rt", "kind")} for e in events] == [
        {"ev": "fault.duplicate", **link, "percent": 40}, {"ev": "fault.heal", **link, "fault": "duplicate"},
        {"ev": "fault.reorder", **link, "ms": 0}, {"ev": "fault.heal", **link, "fault": "reorder"}]
    assert [catalogue_problems(e) for e in events] == [[]] * 4
