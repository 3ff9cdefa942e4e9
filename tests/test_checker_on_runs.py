"""The checker can fail: real runs under a rule set that loops or overwrites what it must
not are flagged, naming the participant; the same runs under precedence are clean."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from analytics.inputs import find_runs
from analytics.runner import check_runs
from e2e_helpers import until
from joynr_sim.core.address import MqttAddress
from joynr_sim.core.errors import JoynrTimeoutException
from joynr_sim.core.policies import Decision, PrecedencePolicy
from joynr_sim.core.routing import RoutingEntry
from joynr_sim.runtime.participants import EchoProvider
from joynr_sim.scenario import load_scenario
from joynr_sim.scenario.runner import run_scenario
from joynr_sim.simulation import Simulation
from joynr_sim.trace import read_run

pytestmark = pytest.mark.e2e  # simulated runs, then the checker (spark: by its fixture)

LIBRARY = Path(__file__).resolve().parent.parent / "scenarios"
CHECKS = ["routing-loop", "overwrite-violation", "lost-message"]


class BrokenPrecedence(PrecedencePolicy):
    """Precedence with one guard missing: a global address replaces a WebSocketClient entry."""

    name = "broken-wsc-guard"

    def judge_put(self, runtime_kind, existing, new, *, origin, own_topics, now_ms):
        decision = super().judge_put(
            runtime_kind, existing, new, origin=origin, own_topics=own_topics, now_ms=now_ms
        )
        if decision.reason == "precedence" and isinstance(new.address, MqttAddress):
            return Decision("replaced", "broken", new)
        return decision


def violations(spark, tmp_path: Path, run_dirs: list[str]) -> dict[str, dict[str, list]]:
    """check name -> run id -> its violations."""
    stage = tmp_path / "stage"
    stage.mkdir()
    outcome = check_runs(spark, find_runs(run_dirs), stage, CHECKS)
    ids = [json.loads((Path(d) / "run.json").read_text())["run_id"] for d in run_dirs]
    return {r.name: {i: [v for v in r.violations if v.run == i] for i in ids} for r in outcome.results}


async def test_last_writer_wins_loops_and_overwrites_where_precedence_is_clean(spark, tmp_path):
    scenario = load_scenario(LIBRARY / "inprocess-provider-stale-global-entry.yaml")
    lww = await run_scenario(scenario, tmp_path / "lww", policy="last-writer-wins", broker="mosquitto")
    clean = await run_scenario(scenario, tmp_path / "precedence", broker="mosquitto")
    assert not lww.passed and clean.passed
    found = violations(spark, tmp_path, [lww.run_dir, clean.run_dir])

    # cc1 took the stale GCD entry of its own provider: a route to its own topic, a loop
    # through the broker until the hop limit, and an overwrite precedence forbids.
    loops = {v.details["to"]: v for v in found["routing-loop"][lww.run_id]}
    assert "cc1-echo" in loops and loops["cc1-echo"].details["cycle"] == ["cc1"]
    overwrites = found["overwrite-violation"][lww.run_id]
    assert "cc1-echo" in {v.details["participant"] for v in overwrites}
    for check in CHECKS:
        assert found[check][clean.run_id] == [], (check, found[check][clean.run_id])


async def test_broken_policy_overwrite_and_its_loop_are_found_naming_the_participant(spark, tmp_path):
    run_dirs = []
    for policy in (BrokenPrecedence(), PrecedencePolicy()):
        run_dir = tmp_path / policy.name
        # A policy object of the test's own: the runtimes stay in this process.
        async with Simulation(run_dir, gbids=["gbid1"], broker="amqtt", policy=policy,
                              run_id=policy.name, processes=False) as sim:
            cc1 = await sim.cluster_controller("cc1")
            await sim.cluster_controller("cc2")
            app1 = await sim.libjoynr("app1", cc1)
            consumer = await sim.libjoynr("consumer", cc1)
            await app1.register_provider("d", "joynrsim/Echo", EchoProvider(), participant_id="p")
            # A global entry for the local provider reaches cc1 (a stale GCD answer naming
            # cc2): precedence keeps the WebSocketClient entry, the broken rule takes it.
            stale = RoutingEntry(MqttAddress("gbid1", "cc2"), True, sim.clock.now_ms() + 60_000)
            result = cc1.table.put("p", stale, "gcd")
            proxy = await consumer.create_proxy("joynrsim/Echo", "p")
            if policy.name == "broken-wsc-guard":
                assert result.outcome == "replaced"
                # cc1 sends to cc2; cc2 asks the GCD, which says cc1; round they go.
                with pytest.raises(JoynrTimeoutException):
                    await proxy.call("echo", "x", ttl_ms=2_000)
            else:
                assert result.outcome == "refused"
                assert await proxy.call("echo", "x") == "x"
        (run_dir / "run.json").write_text(json.dumps({"policy": policy.name, "run_id": policy.name}))
        run_dirs.append(str(run_dir))
    found = violations(spark, tmp_path, run_dirs)
    overwrites = found["overwrite-violation"]["broken-wsc-guard"]
    assert overwrites and {v.details["participant"] for v in overwrites} == {"p"}
    loops = found["routing-loop"]["broken-wsc-guard"]
    assert loops and {v.details["to"] for v in loops} == {"p"}
    assert {rt for v in loops for rt in v.details["cycle"]} == {"cc1", "cc2"}
    for check in CHECKS:
        assert found[check]["precedence"] == [], (check, found[check]["precedence"])


def _edited(run_dir: Path, dest: Path, run_id: str, drop: set[tuple[str, int]],
            change: dict[tuple[str, int], dict] | None = None) -> str:
    """A copy of a run under its own run id, without the events ``drop`` names (rt, seq)
    and with the fields ``change`` gives an event set to its values."""
    shutil.copytree(run_dir, dest)
    for path in (dest / "trace").glob("*.ndjson"):
        kept = []
        for line in path.read_text().splitlines():
            event = json.loads(line)
            if (event["rt"], event["seq"]) not in drop:
                kept.append(json.dumps({**event, **(change or {}).get((event["rt"], event["seq"]), {}),
                                        "run": run_id}))
        path.write_text("".join(line + "\n" for line in kept))
    return str(dest)


def _a_reply_at_its_last_hop(events: list[dict]) -> tuple[dict, dict, set[tuple[str, int]]]:
    """The first reply that crossed the broker: its request, its last send, and its events
    at the runtime it was delivered in (its receipt there and what followed)."""
    reply = next(e for e in events if e["ev"] == "msg.out" and e["type"] == "rp" and e["via"] == "mqtt")
    mine = [e for e in events if e["ev"].startswith("msg.") and e["msg"] == reply["msg"]]
    last_rt = next(e["rt"] for e in mine if e["ev"] == "msg.deliver")
    last_send = max((e for e in mine if e["ev"] == "msg.out" and e["rt"] != last_rt), key=lambda e: e["hops"])
    request = next(e for e in events if e["ev"] == "msg.out" and e["type"] == "rq"
                   and e.get("corr") == reply["corr"])
    return request, last_send, {(e["rt"], e["seq"]) for e in mine if e["rt"] == last_rt}


def _a_hop_seen_further_on(events: list[dict]) -> tuple[dict, tuple[str, int]]:
    """A request's receipt over MQTT at a runtime that routed it on: (the send, the receipt)."""
    for e in events:
        if e["ev"] == "msg.in" and e["via"] == "mqtt" and e["type"] == "rq" and any(
            x["ev"] == "msg.out" and x["msg"] == e["msg"] and x["hops"] > e["hops"] for x in events
        ):
            send = next(x for x in events if x["ev"] == "msg.out" and x["msg"] == e["msg"]
                        and x["hops"] == e["hops"])
            return send, (e["rt"], e["seq"])
    raise AssertionError("no request crossed the broker and went on")


def _a_put_whose_loss_shows(events: list[dict]) -> tuple[tuple[str, int], tuple[str, int]]:
    """An rt.* event whose deletion leaves the next event of its participant with an ``old``
    the table no longer held: (the deleted event, the next one)."""
    chains: dict[tuple[str, str], list[dict]] = {}
    for e in sorted(events, key=lambda e: (e["rt"], e["seq"])):
        if e["ev"].startswith("rt."):
            chains.setdefault((e["rt"], e["participant"]), []).append(e)
    for chain in chains.values():
        for before, gone, after in zip(chain, chain[1:], chain[2:]):
            if gone["ev"] == "rt.put" and after["old"] != before["entry"]:
                return (gone["rt"], gone["seq"]), (after["rt"], after["seq"])
    raise AssertionError("no routing entry changed twice")


async def test_a_deleted_hop_reply_or_routing_put_is_found_on_a_real_run(spark, tmp_path):
    result = await run_scenario(load_scenario(LIBRARY / "proxy-for-global-provider.yaml"), tmp_path / "run")
    assert result.passed
    events = read_run(result.run_dir)
    request, last_send, reply_events = _a_reply_at_its_last_hop(events)
    send, receipt = _a_hop_seen_further_on(events)
    put, next_put = _a_put_whose_loss_shows(events)
    runs = {
        name: _edited(Path(result.run_dir), tmp_path / name, name, drop)
        for name, drop in (("untouched", set()), ("no-reply", reply_events), ("no-hop", {receipt}),
                           ("no-put", {put}))
    }
    stage = tmp_path / "stage"
    stage.mkdir()
    outcome = check_runs(spark, find_runs(list(runs.values())), stage)
    found = {(v.run, r.name, v.key) for r in outcome.results for v in r.violations}
    rt, seq = next_put
    assert found == {
        ("no-reply", "lost-message", f"no-reply/lost-request/{request['msg']}"),
        ("no-reply", "lost-message", "no-reply/vanished-hop/{msg}/{hops}/{rt}".format(**last_send)),
        ("no-hop", "lost-message", f"no-hop/vanished-hop/{send['msg']}/{send['hops']}/{send['rt']}"),
        ("no-put", "overwrite-violation", f"no-put/{rt}/{seq}"),
    }, found
    kinds = {r.name: {v.kind for v in r.violations} for r in outcome.results}
    assert kinds["overwrite-violation"] == {"old-not-held"}


async def test_the_scenario_library_is_clean(spark, tmp_path):
    """Every scenario of the library, run under its policy on the memory network, passes
    every check: the graceful stops that end each run explain nothing that was lost before
    (make demo checks the library's runs on amqtt)."""
    run_dirs = []
    for path in sorted(LIBRARY.glob("*.yaml")):
        result = await run_scenario(load_scenario(path), tmp_path / "runs", network="memory", seed=2)
        assert result.passed, (path.name, result.error, result.failed_step)
        run_dirs.append(result.run_dir)
    stage = tmp_path / "stage"
    stage.mkdir()
    outcome = check_runs(spark, find_runs(run_dirs), stage)
    assert outcome.stats.events > 1000
    assert {r.name: [v.summary for v in r.violations] for r in outcome.results if r.count} == {}


async def test_a_skewed_clock_judges_expiry_by_its_own_now(spark, tmp_path):
    """A cluster controller 30 s ahead purges routes the run's time says are not expired
    yet: its rt.* events carry its own now, by which the check judges them. Without that
    field the same purges are violations: the check reads it."""
    scenario = load_scenario(LIBRARY / "clock-skew-expires-requests.yaml")
    result = await run_scenario(scenario, tmp_path / "skew", network="memory", seed=2)
    assert result.passed, result.failed_step
    trace = Path(result.run_dir) / "trace" / "cc1.ndjson"
    lines = trace.read_text().splitlines()
    purges = [json.loads(x) for x in lines if '"rt.purge"' in x]
    assert purges and all(e["now"] - e["ts"] == 30_000 for e in purges)
    (tmp_path / "with").mkdir()
    (tmp_path / "without").mkdir()
    assert violations(spark, tmp_path / "with", [result.run_dir])["overwrite-violation"][result.run_id] == []
    stripped = [json.dumps({k: v for k, v in json.loads(x).items() if k != "now"}) if '"rt.' in x else x
                for x in lines]
    trace.write_text("\n".join(stripped) + "\n")
    found = violations(spark, tmp_path / "without", [result.run_dir])["overwrite-violation"][result.run_id]
    assert found and all(any(e["participant"] in v.summary for v in found) for e in purges), found


async def _a_request_the_broker_dropped(run_dir: Path) -> None:
    """A real run on amqtt: cc2 (the provider's) is cut off its broker, the broker crashes
    and comes back without sessions, cc1 reconnects first and publishes a request for cc2,
    which the broker drops (nobody subscribed to cc2's topic); after cc2 is back a second
    request is answered."""
    async with Simulation(run_dir, gbids=["gbid1"], broker="amqtt", run_id="held") as sim:
        cc1 = await sim.cluster_controller(
            "cc1", ["gbid1"], provisioned=[("echo-provider", MqttAddress("gbid1", "cc2"), True)])
        cc2 = await sim.cluster_controller("cc2", ["gbid1"])
        consumer = await sim.libjoynr("consumer", cc1)
        provider_app = await sim.libjoynr("provider-app", cc2)
        await provider_app.register_provider("dom", "joynrsim/Echo", EchoProvider(), participant_id="echo-provider")
        proxy = await consumer.create_proxy("joynrsim/Echo", "echo-provider")
        assert await proxy.call("echo", "before", ttl_ms=10_000) == "before"
        await sim.faults.partition("cc2", "gbid1")  # holds cc2's reconnect until healed
        await until(lambda: not cc2.mqtt["gbid1"].connected.is_set())
        await sim.brokers.crash_broker("gbid1")
        await sim.brokers.restart_broker("gbid1")
        await until(lambda: cc1.mqtt["gbid1"].connected.is_set())
        with pytest.raises(JoynrTimeoutException):
            await proxy.call("echo", "unheard", ttl_ms=1_000)
        await sim.faults.heal("cc2", "gbid1")
        await until(lambda: cc2.mqtt["gbid1"].connected.is_set())
        assert await proxy.call("echo", "heard", ttl_ms=10_000) == "heard"
    (run_dir / "run.json").write_text(json.dumps({"policy": "precedence", "run_id": "held"}))


async def test_a_broker_that_lost_the_session_explains_only_what_came_before_the_resubscription(spark, tmp_path):
    """The request the broker dropped is explained by the crash that lost cc2's session,
    because cc1 sent it before cc2's attach (session present false). The same trace with
    cc2's attach moved before the send, or saying the broker kept the session, reports it."""
    run_dir = tmp_path / "held"
    await _a_request_the_broker_dropped(run_dir)
    events = read_run(run_dir)
    crash = next(e for e in events if e["ev"] == "life.crash")
    attach = next(e for e in events if e["ev"] == "link.attach" and e["rt"] == "cc2" and e["ts"] >= crash["ts"])
    received = {e["msg"] for e in events if e["ev"] == "msg.in" and e["rt"] == "cc2"}
    send = next(e for e in events if e["ev"] == "msg.out" and e["rt"] == "cc1" and e["type"] == "rq"
                and e["target"] == "gbid1/cc2" and e["msg"] not in received)
    assert crash["ts"] < send["ts"] < attach["ts"] and attach["session_present"] is False
    where = (attach["rt"], attach["seq"])
    runs = [str(run_dir)] + [
        _edited(run_dir, tmp_path / name, name, set(), {where: change})
        for name, change in (("resubscribed", {"ts": send["ts"] - 1}), ("kept", {"session_present": True}))
    ]
    stage = tmp_path / "stage"
    stage.mkdir()
    outcome = check_runs(spark, find_runs(runs), stage, CHECKS)
    found = {(v.run, r.name, v.key) for r in outcome.results for v in r.violations}
    msg, hops, rt = send["msg"], send["hops"], send["rt"]
    assert found == {(run, "lost-message", key) for run in ("resubscribed", "kept")
                     for key in (f"{run}/lost-request/{msg}", f"{run}/vanished-hop/{msg}/{hops}/{rt}")}, found
