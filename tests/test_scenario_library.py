"""The scenario library: every file in scenarios/ reproduces a scenario of the seeds and
passes under its own policy on the memory network, and a fixed sample of it on both real
brokers (the whole library on all three networks: ``make test-networks``). The stale-global-entry restart scenarios fail
under last-writer-wins where the precedence rules prevent the loop, and the WebSocket /
WebSocketClient pair shows where the precedence and local/remote rules part ways."""

from __future__ import annotations

from pathlib import Path

import pytest

from joynr_sim.cli import main
from joynr_sim.scenario import load_scenario
from joynr_sim.scenario.runner import RunResult, run_scenario
from joynr_sim.trace import read_run

e2e = pytest.mark.e2e  # on real brokers; the rest runs on the memory network

LIBRARY = Path(__file__).resolve().parent.parent / "scenarios"
SEEDS = (
    "000_65e83c7f1cb84fd7.txt", "001_2030eddcb973837f.txt", "002_ed27daa13e583359.txt",
    "003_6b6ea9fcba272a2c.txt", "004_b96328aa0d55de66.txt",
)
BROKERS = ("amqtt", "mosquitto")
NETWORKS = ("memory", *BROKERS)

FILES = sorted(p.name for p in LIBRARY.glob("*.yaml"))
# The library on each real broker: a fixed sample, different for each (test_memory_library
# compares another sample on all three networks).
REAL_SAMPLE = [(f, "amqtt") for f in FILES[1::7]] + [(f, "mosquitto") for f in FILES[4::7]]

# Where last-writer-wins breaks the stale-global-entry scenarios: the cluster controller
# takes the GCD's route to its own topic, so "expect route ... absent" fails there.
LWW_FAILS_AT = {
    "inprocess-provider-stale-global-entry.yaml": (6, "expect route cc1-echo on cc1 = absent"),
    "websocket-provider-stale-global-entry.yaml": (10, "expect route ws-counter on cc1 = absent"),
}


def explain(result: RunResult) -> str:
    """The failed step (or the run's error) with its detail and context, for the assertion."""
    step = result.failed_step
    if step is None:
        return f"{result.scenario} ({result.policy}, {result.broker}): {result.outcome} {result.error}"
    return (f"{result.scenario} ({result.policy}, {result.broker}) step {step.index} "
            f"'{step.title}' (line {step.line}): {step.detail}\n{step.context}")


async def run(file: str, tmp_path: Path, **kwargs) -> tuple[RunResult, list[dict]]:
    scenario = load_scenario(LIBRARY / file)
    result = await run_scenario(scenario, tmp_path, **kwargs)
    return result, read_run(result.run_dir)


def own_topic_routes(events: list[dict], cc: str) -> list[dict]:
    """Routes the cluster controller ``cc`` took (not refused) to its own MQTT topic."""
    return [
        e for e in events
        if e["ev"] == "rt.put" and e["rt"] == cc and e["outcome"] != "refused"
        and e["entry"] and e["entry"]["type"] == "Mqtt" and e["entry"]["addr"].endswith(f"/{cc}")
    ]


def test_library_covers_the_seeds_and_lists_cleanly(capsys):
    assert len(FILES) >= 20
    for file in FILES:
        scenario = load_scenario(LIBRARY / file)
        assert scenario.name == file.removesuffix(".yaml")
        assert scenario.reproduces.seed in SEEDS, file
        assert scenario.reproduces.scenario.strip(), file
        assert scenario.checks, f"{file} checks nothing"
    assert {load_scenario(LIBRARY / f).reproduces.seed for f in FILES} == set(SEEDS)
    assert set(LWW_FAILS_AT) <= set(FILES)
    assert main(["list", str(LIBRARY)]) == 0
    out = capsys.readouterr().out
    assert "inprocess-provider" in out and "local-remote" in out


def full_library(network: str) -> list:
    """Every file on memory; on a real broker its sample, and the rest under the
    ``networks`` mark (``make test-networks``)."""
    if network == "memory":
        return [pytest.param(f, network, id=f"{f}-memory") for f in FILES]
    sample = {f for f, b in REAL_SAMPLE if b == network}
    return [pytest.param(f, network, id=f"{f}-{network}",
                         marks=[e2e] if f in sample else [e2e, pytest.mark.networks]) for f in FILES]


@pytest.mark.parametrize("file, network", [p for n in NETWORKS for p in full_library(n)])
async def test_scenario_passes(file, network, tmp_path):
    result, events = await run(file, tmp_path, network=network)
    assert result.outcome == "passed", explain(result)
    assert all(s.outcome == "ok" for s in result.steps)
    # Under its own rules no library scenario sends a message in a circle.
    loops = [e for e in events if e["ev"] == "msg.drop" and e["reason"] == "hop-limit"]
    assert not loops, f"{file}: {loops[:3]}"


@pytest.mark.parametrize("file", sorted(LWW_FAILS_AT))
async def test_stale_global_entry_loops_under_last_writer_wins(file, tmp_path):
    index, title = LWW_FAILS_AT[file]
    result, events = await run(file, tmp_path, network="memory", policy="last-writer-wins")
    failed = result.failed_step
    assert result.outcome == "failed" and failed is not None, explain(result)
    assert (failed.index, failed.title) == (index, title), explain(result)
    assert all(s.outcome == "ok" for s in result.steps[:index])
    assert all(s.outcome == "skipped" for s in result.steps[index + 1:])
    loops = [e for e in events if e["ev"] == "msg.drop" and e["reason"] == "hop-limit"]
    assert loops or own_topic_routes(events, "cc1"), "neither a loop nor a route to cc1's own topic"
    assert own_topic_routes(events, "cc1")
    if file == "inprocess-provider-stale-global-entry.yaml":
        # The call before the re-registration went round through the broker.
        assert loops and all(e["rt"] == "cc1" for e in loops)


@pytest.mark.parametrize("file", sorted(LWW_FAILS_AT))
async def test_stale_global_entry_is_refused_under_precedence(file, tmp_path):
    result, events = await run(file, tmp_path, network="memory", policy="precedence")
    assert result.outcome == "passed", explain(result)
    refused = [e for e in events if e["ev"] == "rt.put" and e["rt"] == "cc1"
               and e["outcome"] == "refused" and e["reason"] == "own-address"]
    assert refused and refused[0]["origin"] == "gcd"
    assert not own_topic_routes(events, "cc1")
    assert not [e for e in events if e["ev"] == "msg.drop" and e["reason"] == "hop-limit"]


@pytest.mark.parametrize("file, policy", [
    ("websocket-does-not-overwrite-websocketclient-in-cc.yaml", "local-remote"),
    ("local-remote-websocket-overwrites-websocketclient-in-cc.yaml", "precedence"),
])
async def test_websocket_over_websocketclient_differs_between_rule_sets(file, policy, tmp_path):
    """The same steps, the other policy: the route check after add_route fails."""
    result, events = await run(file, tmp_path, network="memory", policy=policy)
    failed = result.failed_step
    assert failed is not None and failed.index == 3, explain(result)
    puts = [e for e in events if e["ev"] == "rt.put" and e["rt"] == "cc1"
            and e["origin"] == "provisioned" and e["participant"] == "ws-client-echo"]
    assert [e["outcome"] for e in puts] == ["replaced" if policy == "local-remote" else "refused"]


@e2e
async def test_mosquitto_keeps_sessions_across_a_restart_amqtt_does_not(tmp_path):
    """scenarios/mosquitto/ holds what only Mosquitto does (it persists its sessions), kept
    out of the library so that make demo needs no Mosquitto."""
    file = "mosquitto/mosquitto-restart-keeps-queued-messages.yaml"
    result, _ = await run(file, tmp_path / "mosquitto")
    assert result.broker == "mosquitto" and result.passed, explain(result)
    result, _ = await run(file, tmp_path / "amqtt", broker="amqtt")
    failed = result.failed_step
    assert failed is not None and failed.title == "call px.get", explain(result)
    assert "expected result 3, got 0" in failed.detail


@e2e
async def test_duplicate_cc_id_storms_on_both_brokers(tmp_path):
    for broker in BROKERS:
        scenario = load_scenario(LIBRARY / "faults" / "duplicate-cc-id.yaml")
        result = await run_scenario(scenario, tmp_path / broker, broker=broker)
        assert result.passed, explain(result)
        storms = [e for e in read_run(result.run_dir) if e["ev"] == "link.takeover-storm"]
        assert storms and storms[0]["runtimes"] == ["twin-a", "twin-b"]


def test_brokers_die_and_links_break_with_calls_in_flight():
    """At least three scenarios kill a broker or break a link while background calls run and
    then say what must hold of them; test_scenario_passes runs them on every network."""
    faults = {"crash_broker", "stop_broker", "partition", "blackhole", "cut"}
    found = []
    for file in FILES:
        kinds = [s.kind for s in load_scenario(LIBRARY / file).steps]
        started = kinds.index("start_calls") if "start_calls" in kinds else None
        if started is None:
            continue
        awaited = kinds.index("await_calls", started)
        if faults & set(kinds[started:awaited]):
            found.append(file)
    assert len(found) >= 3, found
