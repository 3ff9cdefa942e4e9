"""The scenario library on the memory network: one seed replays every run byte for byte,
and the library keeps one contract on three networks (memory, amqtt, mosquitto).

The whole library runs on memory here; on the real brokers a fixed sample of it (every
scenario's memory run is compared with its real runs in ``test_scenario_library``'s
sample and with the whole library under ``make test-networks``)."""

from __future__ import annotations

import asyncio
import hashlib
from dataclasses import replace
from pathlib import Path

import pytest

from joynr_sim.scenario import load_scenario, load_scenarios
from joynr_sim.scenario.loader import parse_scenario
from joynr_sim.scenario.networks import first_difference
from joynr_sim.scenario.runner import run_scenario
from joynr_sim.trace import read_run

LIBRARY = Path(__file__).resolve().parent.parent / "scenarios"
FILES = sorted(p.name for p in LIBRARY.glob("*.yaml"))


def traces(run_dir: str) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((Path(run_dir) / "trace").glob("*.ndjson"))}


async def run_library(out: Path, seed: int) -> dict[str, dict[str, bytes]]:
    runs = {}
    for scenario in load_scenarios(LIBRARY):
        result = await run_scenario(scenario, out, seed=seed, network="memory")
        assert result.passed, f"{scenario.name}: {result.error or result.failed_step}"
        runs[scenario.name] = traces(result.run_dir)
    return runs


async def test_the_same_seed_replays_every_trace_byte_for_byte(tmp_path):
    first = await run_library(tmp_path / "first", seed=4)
    again = await run_library(tmp_path / "again", seed=4)
    assert set(first) == {f.removesuffix(".yaml") for f in FILES}
    for name in first:
        assert first[name].keys() == again[name].keys(), name
        for file, data in first[name].items():
            assert data, f"{name}/{file} is empty"
            assert data == again[name][file], f"{name}/trace/{file} differs between two runs of seed 4"


async def test_another_seed_draws_other_ids_and_timings(tmp_path):
    """The check above can fail: a different seed changes the trace of every scenario."""
    scenario = load_scenario(LIBRARY / "proxy-for-global-provider.yaml")
    one = await run_scenario(scenario, tmp_path / "one", seed=4, network="memory")
    two = await run_scenario(scenario, tmp_path / "two", seed=5, network="memory")
    assert one.passed and two.passed
    assert traces(one.run_dir) != traces(two.run_dir)
    # What happened is the same: only the drawn ids and latencies differ.
    assert [(s.index, s.outcome) for s in one.steps] == [(s.index, s.outcome) for s in two.steps]


UNANSWERED = """
name: unanswered-minute
reproduces: {seed: 004_b96328aa0d55de66.txt, scenario: "a call nobody answers waits out its TTL"}
smoke: virtual time
backends: [gbid1]
runtimes:
  - {kind: cluster-controller, id: cc1}
  - {kind: libjoynr, id: app1, cc: cc1}
  - {kind: cluster-controller, id: cc2}
  - {kind: libjoynr, id: consumer, cc: cc2}
steps:
  - register: {runtime: app1, provider: echo, domain: dom, interface: joynrsim/Echo, scope: GLOBAL}
  - proxy: {runtime: consumer, name: px, domain: dom, interface: joynrsim/Echo, scope: GLOBAL_ONLY}
  - blackhole: {runtime: cc1, gbid: gbid1}
  - call: {proxy: px, method: echo, args: [lost], ttl_ms: 60000, expect: {timeout: true}}
  - heal: {runtime: cc1, gbid: gbid1}
  - call: {proxy: px, method: echo, args: [back], expect: {result: back}}
"""


async def test_a_call_nobody_answers_waits_out_its_ttl_in_virtual_time(tmp_path):
    """The minute passes on the run's clock (the steps' trace times say so); how little wall
    clock it costs is the benchmark's business (bench networks)."""
    result = await run_scenario(parse_scenario(UNANSWERED), tmp_path, seed=1, network="memory")
    assert result.passed, result.failed_step
    steps = {e["index"]: e["ts"] for e in read_run(result.run_dir) if e["ev"] == "step"}
    assert steps[3] - steps[2] >= 60_000


def digest(run_dir: str) -> str:
    h = hashlib.sha256()
    for name, data in traces(run_dir).items():
        h.update(name.encode() + data)
    return h.hexdigest()


@pytest.mark.e2e
@pytest.mark.parametrize("file", FILES[::9])
async def test_one_contract_on_three_networks(file, tmp_path):
    """A sample of the library: the same outcome, step by step, on memory, amqtt and
    Mosquitto; a difference is printed with the first decision where the traces part."""
    scenario = load_scenario(LIBRARY / file)
    results = {}
    for network in ("memory", "amqtt", "mosquitto"):
        results[network] = await run_scenario(scenario, tmp_path / network, seed=3, network=network)
    memory = results["memory"]
    for network in ("amqtt", "mosquitto"):
        real = results[network]
        steps = [(s.index, s.outcome) for s in real.steps]
        assert (real.outcome, steps) == (memory.outcome, [(s.index, s.outcome) for s in memory.steps]), (
            f"{scenario.name}: {network} {real.outcome}, memory {memory.outcome}; first difference: "
            f"{first_difference(real.run_dir, memory.run_dir)}")


async def test_runs_side_by_side_keep_their_own_virtual_time(tmp_path):
    """Two runs on memory at once, each on its own loop: each still replays its seed."""
    scenario = load_scenario(LIBRARY / "routing-entry-expires.yaml")
    alone = await run_scenario(scenario, tmp_path / "alone", seed=8, network="memory")
    together = await asyncio.gather(*(run_scenario(scenario, tmp_path / f"t{i}", seed=8, network="memory")
                                      for i in range(2)))
    assert {digest(r.run_dir) for r in together} == {digest(alone.run_dir)}


async def test_the_joynr_wire_gives_every_trace_byte_for_byte_as_the_default_wire(tmp_path):
    """The wire is bytes between runtimes, not routing: the whole library on joynr's wire
    (SMRF frames, joynr's JSON payloads) passes and traces exactly what the default wire does."""
    default = await run_library(tmp_path / "default", seed=4)
    on_joynr = {}
    for scenario in load_scenarios(LIBRARY):
        result = await run_scenario(replace(scenario, wire="joynr"), tmp_path / "joynr", seed=4, network="memory")
        assert result.passed, f"{scenario.name} on the joynr wire: {result.error or result.failed_step}"
        on_joynr[scenario.name] = traces(result.run_dir)
    assert on_joynr == default
