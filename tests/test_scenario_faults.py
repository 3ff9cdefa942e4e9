"""Scenario steps for link faults and background calls, guards/smoke and the sharper route
and GCD expectations, without brokers: what the loader accepts and refuses (one line naming
the field), what ``await_calls`` counts as answered or accounted for, and how an expiry is
judged. Each check is shown failing on a broken input."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest

from joynr_sim.runtime.base import FOREVER_MS
from joynr_sim.scenario import ScenarioError, parse_scenario
from joynr_sim.scenario.background import CallOutcome, problems
from joynr_sim.scenario.model import thaw
from joynr_sim.scenario.steps import ScenarioRunner, _expiry_problems

HEAD = """\
name: faults
reproduces: {seed: 004_b96328aa0d55de66.txt, scenario: s}
backends: [gbid1, gbid2]
runtimes:
  - {id: cc1, kind: cluster-controller, gbids: [gbid1], on_client_disconnect: remove}
  - {id: app1, kind: libjoynr, cc: cc1, route_back_to_parent: true}
steps:
  - register: {runtime: app1, provider: p1, domain: d, interface: joynrsim/Echo, participant_id: e1}
  - proxy: {runtime: app1, name: px, domain: d, interface: joynrsim/Echo}
"""


def load(steps: str, head: str = HEAD):
    return parse_scenario(head + steps, "faults.yaml")


def refused(steps: str, field: str, words: str, head: str = HEAD) -> None:
    with pytest.raises(ScenarioError) as err:
        load(steps, head)
    assert err.value.field == field and words in err.value.message, str(err.value)


def test_fault_steps_and_background_calls_load():
    s = load("""\
  - partition: {runtime: cc1, gbid: gbid1}
  - heal: {runtime: cc1, gbid: gbid1}
  - blackhole: {runtime: app1}
  - heal: {runtime: app1}
  - delay: {runtime: app1, ms: 100, jitter_ms: 20}
  - start_calls: {name: bg, proxy: px, method: echo, args: [x], count: 3, interval_ms: 5}
  - await_calls: {name: bg, drops: recorded, min_answered: 1}
  - expect_route: {runtime: cc1, participant: e1, type: WebSocketClient, client_id: app1, expires: never}
  - expect_route: {runtime: app1, participant: e1, type: InProcess, expires: {after_ms: 0, before_ms: 5000}}
  - expect_gcd: {participant: e1, gbids: [gbid1], exact: true}
""")
    kinds = [st.kind for st in s.steps[2:]]
    assert kinds[:5] == ["partition", "heal", "blackhole", "heal", "delay"]
    assert [st.title for st in s.steps[2:8]] == [
        "partition cc1-gbid1", "heal cc1-gbid1", "blackhole app1-cc", "heal app1-cc", "delay app1-cc 100±20 ms",
        "start 3x px.echo as bg"]
    assert s.steps[8].args["drops"] == "recorded" and s.steps[8].args["expect"] is None
    assert thaw(s.steps[10].args["expires"]) == {"after_ms": 0, "before_ms": 5000}
    assert s.steps[11].title == "expect gcd e1 in exactly gbid1"
    cc1, app1 = s.runtimes
    assert (cc1.on_client_disconnect, app1.route_back_to_parent) == ("remove", True)
    assert s.checks and (s.guards, s.smoke) == ((), None)


@pytest.mark.parametrize("steps, field, words", [
    ("  - partition: {runtime: cc1}\n", "steps[2].partition", "name the broker link with gbid"),
    ("  - blackhole: {runtime: app1, gbid: gbid1}\n", "steps[2].blackhole.gbid", "leave gbid out"),
    ("  - delay: {runtime: cc1, gbid: gbid2, ms: 5}\n", "steps[2].delay.gbid", "not one of cc1's GBIDs"),
    ("  - delay: {runtime: app1, ms: 600001}\n", "steps[2].delay.ms", "at most 600000"),
    ("  - heal: {runtime: nobody}\n", "steps[2].heal.runtime", "unknown runtime"),
    ("  - await_calls: {name: bg}\n", "steps[2].await_calls.name", "never started"),
    ("  - start_calls: {name: bg, proxy: px, method: echo, count: 1}\n", "steps", "never awaited"),
    ("  - start_calls: {name: bg, proxy: px, method: echo, count: 1}\n  - await_calls: {name: bg}\n"
     "  - await_calls: {name: bg}\n", "steps[4].await_calls.name", "awaited already"),
    ("  - start_calls: {name: bg, proxy: px, method: nope, count: 1}\n", "steps[2].start_calls.method", "no method"),
    ("  - await_calls: {name: bg, drops: some}\n", "steps[2].await_calls.drops", "not one of none, recorded"),
    ("  - expect_route: {runtime: cc1, participant: e1, type: InProcess, topic: t}\n",
     "steps[2].expect_route.topic", "only goes with type Mqtt"),
    ("  - expect_route: {runtime: cc1, participant: e1, type: Mqtt, client_id: c}\n",
     "steps[2].expect_route.client_id", "only goes with type WebSocketClient"),
    ("  - expect_route: {runtime: cc1, participant: e1, type: absent, expires: never}\n",
     "steps[2].expect_route.expires", "absent route has no expiry"),
    ("  - expect_route: {runtime: cc1, participant: e1, type: Mqtt, expires: {}}\n",
     "steps[2].expect_route.expires", ""),
])
def test_bad_fault_and_expectation_steps_are_refused(steps, field, words):
    refused(steps, field, words)


def test_a_clock_skew_names_a_runtime_and_a_bounded_skew_either_way():
    s = load("""\
  - clock_skew: {runtime: cc1, ms: 60000}
  - clock_skew: {runtime: app1, ms: -86400000}
  - clock_skew: {runtime: cc1, ms: 0}
""")
    assert [(st.kind, thaw(st.args)) for st in s.steps[2:]] == [
        ("clock_skew", {"runtime": "cc1", "ms": 60_000}), ("clock_skew", {"runtime": "app1", "ms": -86_400_000}),
        ("clock_skew", {"runtime": "cc1", "ms": 0})]
    assert [st.title for st in s.steps[2:]] == [
        "clock skew cc1 +60000 ms", "clock skew app1 -86400000 ms", "clock skew cc1 +0 ms"]
    assert not s.steps[2].checks  # a fault, not a check


@pytest.mark.parametrize("steps, field, words", [
    ("  - clock_skew: {runtime: nobody, ms: 5}\n", "steps[2].clock_skew.runtime", "unknown runtime 'nobody'"),
    ("  - clock_skew: {runtime: gcd-gbid1, ms: 5}\n", "steps[2].clock_skew.runtime", "unknown runtime"),
    ("  - clock_skew: {runtime: cc1, ms: 86400001}\n", "steps[2].clock_skew.ms", "at most 86400000"),
    ("  - clock_skew: {runtime: cc1, ms: -86400001}\n", "steps[2].clock_skew.ms", "at least -86400000"),
    ("  - clock_skew: {runtime: cc1, ms: 1.5}\n", "steps[2].clock_skew.ms", "expected an integer"),
    ("  - clock_skew: {runtime: cc1, ms: '5'}\n", "steps[2].clock_skew.ms", "expected an integer"),
    ("  - clock_skew: {runtime: cc1}\n", "steps[2].clock_skew", "missing required key 'ms'"),
    ("  - clock_skew: {runtime: cc1, ms: 5, gbid: gbid1}\n", "steps[2].clock_skew.gbid", "unknown key"),
    ("  - clock_skew: cc1\n", "steps[2].clock_skew", "expected a mapping"),
])
def test_a_bad_clock_skew_is_refused_in_one_line(steps, field, words):
    refused(steps, field, words)


async def test_a_clock_skew_step_asks_the_simulation_to_skew_the_runtime():
    skewed: list[tuple[str, int]] = []

    class Sim:
        async def clock_skew(self, runtime_id: str, ms: int) -> None:
            skewed.append((runtime_id, ms))

    s = load("  - clock_skew: {runtime: app1, ms: -250}\n")
    await ScenarioRunner(s, Sim()).run_step(s.steps[2])  # type: ignore[arg-type]
    assert skewed == [("app1", -250)]


def test_guards_name_known_policies_other_than_its_own():
    def base(line: str) -> str:
        return HEAD.replace("backends:", line + "backends:")

    load("  - call: {proxy: px, method: echo}\n", base("guards: [last-writer-wins, gcd-trust]\n"))
    refused("", "guards[0]", "'lww' is not one of precedence, local-remote, gcd-trust, last-writer-wins",
            base("guards: [lww]\n"))
    refused("", "guards[0]", "the scenario's own policy", base("guards: [precedence]\n"))
    refused("", "guards[1]", "listed twice", base("guards: [gcd-trust, gcd-trust]\n"))
    refused("", "smoke", "not both", base("guards: [gcd-trust]\nsmoke: why\n"))
    refused("", "smoke", "does not match", base("smoke: '  '\n"))
    smoke = load("", base("smoke: no rule decides it\n"))
    assert smoke.smoke == "no rule decides it" and not smoke.checks  # waits and acts only: flagged


# -- await_calls -------------------------------------------------------------------------

def write_trace(run_dir: Path, events: list[dict]) -> Path:
    import json
    (run_dir / "trace").mkdir(parents=True)
    with open(run_dir / "trace" / "t.ndjson", "w") as f:
        for seq, e in enumerate(events):
            f.write(json.dumps({"v": 1, "seq": seq, "run": "r", "kind": "cluster-controller", **e}) + "\n")
    return run_dir


ARGS = {"name": "bg", "expect": {"result": "x"}, "drops": "none", "min_answered": 0}


async def test_every_call_answered_or_it_fails(tmp_path):
    answered = [CallOutcome(0, result="x"), CallOutcome(1, result="x")]
    assert await problems(answered, ARGS, tmp_path) == []
    wrong = [CallOutcome(0, result="y"), CallOutcome(1, error="timeout", message_id="m1")]
    found = await problems(wrong, ARGS, tmp_path)
    assert found == ["call 0: expected result 'x', got 'y'", "1 of 2 calls unanswered (calls 1)"]
    assert await problems([CallOutcome(0, error="caller-gone")], ARGS, tmp_path) == [
        "1 of 1 calls unanswered (calls 0)"]
    assert "expected at least 2" in (await problems(answered[:1], {**ARGS, "min_answered": 2}, tmp_path))[0]


def request(ts: int, msg: str, corr: str, *, rt: str = "cc2", target: str = "gbid1/cc1", **more) -> dict:
    """A request's hop from cluster controller ``rt`` over MQTT."""
    return {"ts": ts, "rt": rt, "ev": "msg.out", "msg": msg, "type": "rq", "corr": corr, "hops": 0,
            "exp": 10_000, "via": "mqtt", "gbid": "gbid1", "target": target, **more}


def broker(ts: int, ev: str) -> dict:
    return {"ts": ts, "rt": "brokers", "kind": "broker", "ev": ev, "target": "broker-gbid1",
            "target_kind": "broker", "gbid": "gbid1"}


async def test_an_unanswered_call_needs_a_recorded_drop_or_a_killed_broker(tmp_path):
    run = write_trace(tmp_path / "run", [
        request(10, "m1", "c1"),
        {"ts": 11, "rt": "cc1", "ev": "msg.drop", "msg": "r1", "type": "rp", "corr": "c1", "hops": 0,
         "reason": "expired"},
        broker(20, "life.crash"),
        request(21, "m2", "c2"),
        broker(30, "life.restart"),
        request(31, "m3", "c3"),
    ])
    recorded = {**ARGS, "drops": "recorded"}
    dropped = CallOutcome(0, error="timeout", message_id="m1")  # its reply's drop is recorded
    with_broker = CallOutcome(1, error="timeout", message_id="m2")  # sent while the broker was dead
    silent = CallOutcome(2, error="timeout", message_id="m3")  # sent after the restart: lost silently
    gone = CallOutcome(3, error="caller-gone")  # its runtime's crash is recorded
    assert await problems([dropped, with_broker, gone], recorded, run) == []
    assert await problems([dropped, silent], recorded, run, grace_s=0) == [
        "1 of 2 calls unanswered and not explained by the trace "
        "(calls 2: last seen msg.out at cc2 via mqtt to gbid1/cc1)"]
    assert await problems([CallOutcome(4, error="timeout")], recorded, run)  # no message id: not accounted


async def test_a_drop_written_after_the_calls_ended_accounts_for_its_call(tmp_path):
    """A request the broker held for a cluster controller that came back after the call's
    TTL is dropped as expired there, after the call timed out at its proxy."""
    import json
    run = write_trace(tmp_path / "run", [request(10, "m1", "c1")])
    recorded = {**ARGS, "drops": "recorded"}
    late = CallOutcome(0, error="timeout", message_id="m1")
    silent = ["1 of 1 calls unanswered and not explained by the trace "
              "(calls 0: last seen msg.out at cc2 via mqtt to gbid1/cc1)"]
    assert await problems([late], recorded, run, grace_s=0) == silent  # read once, the drop is not there yet

    async def cc1_drops_it_later():
        await asyncio.sleep(0.3)
        with open(run / "trace" / "cc1.ndjson", "w") as f:
            f.write(json.dumps({"v": 1, "seq": 0, "run": "r", "kind": "cluster-controller", "ts": 4100,
                                "rt": "cc1", "ev": "msg.drop", "msg": "m1", "type": "rq", "corr": "c1", "hops": 0,
                                "reason": "expired"}) + "\n")

    writer = asyncio.create_task(cc1_drops_it_later())
    assert await problems([late], recorded, run) == []
    assert writer.done()  # accounted for by the drop written after the calls ended, not before

    started = time.monotonic()
    lost = CallOutcome(1, error="timeout", message_id="m9")  # no trace of it ever comes
    assert await problems([lost], recorded, run, grace_s=0.3) == [
        "1 of 1 calls unanswered and not explained by the trace (calls 1: no trace of m9)"]
    assert time.monotonic() - started >= 0.3  # waited out the grace before saying so


def test_expiry_exact_never_or_a_window():
    now = 1_000_000
    assert _expiry_problems(FOREVER_MS, "never", now) == []
    assert _expiry_problems(now + 5, "never", now) == ["expires in 5 ms, expected never"]
    assert _expiry_problems(now + 5000, {"after_ms": 4000, "before_ms": 6000}, now) == []
    assert _expiry_problems(now + 5000, {"before_ms": 4000}, now) == [
        f"expires in 5000 ms (at {now + 5000}), expected within 4000 ms from now"]
    assert _expiry_problems(now + 5000, {"after_ms": 5000}, now) == [
        f"expires in 5000 ms (at {now + 5000}), expected later than 5000 ms from now"]
    assert _expiry_problems(now + 7, {"at_ms": now + 7}, now) == []
    assert _expiry_problems(FOREVER_MS, {"at_ms": now}, now) == [f"expires never, expected at {now}"]


async def test_a_publish_before_the_receiver_subscribed_again_died_with_the_broker(tmp_path):
    run = write_trace(tmp_path / "run", [
        {"ts": 0, "rt": "cc1", "ev": "life.start", "target": "cc1", "target_kind": "cluster-controller",
         "own_topics": ["cc1"]},
        {"ts": 1, "rt": "cc1", "ev": "link.attach", "gbid": "gbid1", "client_id": "cc1", "session_present": False},
        broker(20, "life.crash"),
        broker(30, "life.restart"),
        request(31, "m4", "c4"),
        # The broker came back without cc1's session: cc1 subscribes again with its attach.
        {"ts": 40, "rt": "cc1", "ev": "link.attach", "gbid": "gbid1", "client_id": "cc1", "session_present": False},
        request(45, "m5", "c5"),
    ])
    recorded = {**ARGS, "drops": "recorded"}
    assert await problems([CallOutcome(0, error="timeout", message_id="m4")], recorded, run) == []
    cc1_heard_again_first = CallOutcome(1, error="timeout", message_id="m5")
    assert await problems([cc1_heard_again_first], recorded, run, grace_s=0)
