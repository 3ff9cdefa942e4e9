"""The checker can fail: real runs under a rule set that loops or overwrites what it must
not are flagged, naming the participant; the same runs under precedence are clean."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from analytics.inputs import find_runs
from analytics.runner import check_runs
from joynr_sim.core.address import MqttAddress
from joynr_sim.core.errors import JoynrTimeoutException
from joynr_sim.core.policies import Decision, PrecedencePolicy
from joynr_sim.core.routing import RoutingEntry
from joynr_sim.runtime.participants import EchoProvider
from joynr_sim.scenario import load_scenario
from joynr_sim.scenario.runner import run_scenario
from joynr_sim.simulation import Simulation

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
