"""Fleet scenarios end to end: the small restart wave of ``scenarios/fleet/`` (4 cluster
controllers with 2 libjoynr runtimes each, in 2 host processes, on Mosquitto) passes and
its traces are clean under the Spark checks; two controllers restarted one after the
other lose no call, because their graceful stops drain and the providers register again,
and do lose calls with ``register_providers: false``; the same fleet with a wave that duplicates CC
ids is reported by the checks, and with a broker crashed for good its ``expect: {lost: 0}``
fails. ``--hosts`` places the runtimes of an ordinary scenario in shared hosts."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from joynr_sim.scenario import load_scenario
from joynr_sim.scenario.checking import violations_by_run
from joynr_sim.scenario.loader import parse_scenario
from joynr_sim.scenario.runner import run_scenario
from joynr_sim.trace import read_events

pytestmark = pytest.mark.e2e  # simulated runs, then the checker (spark: by its fixture)

ROOT = Path(__file__).resolve().parent.parent
SMALL = ROOT / "scenarios" / "fleet" / "restart-wave-small.yaml"
WAVE = "    - {at_s: 3, restart: {fraction: 0.5, over_s: 3}}\n"


def _variant(wave: str, expect: str, tmp_path: Path, name: str):
    text = SMALL.read_text()
    assert WAVE in text and "  expect:\n" in text
    head = text.split("  expect:\n")[0].replace(WAVE, wave)
    path = tmp_path / f"{name}.yaml"
    path.write_text(head.replace("name: fleet-restart-wave-small", f"name: {name}") + f"  expect: {expect}\n")
    return load_scenario(path)


async def test_a_restart_wave_passes_clean_and_duplicate_cc_ids_are_reported(spark, tmp_path: Path) -> None:
    progress: list[str] = []
    wave = await run_scenario(load_scenario(SMALL), tmp_path, hosts=2, seed=7, on_progress=progress.append)
    assert wave.passed, (wave.failed_step, wave.error)
    manifest = json.loads((Path(wave.run_dir) / "run.json").read_text())
    fleet = manifest["fleet"]
    assert fleet["hosts"] == 2 and fleet["host_processes"] == 2
    assert fleet["host_peak_mib"] > 0 and fleet["runner_peak_mib"] > 0 and fleet["broker_peak_mib"] > 0
    before, during = fleet["windows"]
    assert (before["name"], during["name"]) == ("before waves", "wave 0")
    assert before["started"] > 0 and during["started"] > 0
    assert before["answered"] == before["started"]  # nothing happened yet
    assert fleet["totals"]["started"] == sum(w["started"] for w in fleet["windows"])
    assert [s["outcome"] for s in manifest["steps"]] == ["ok"] * 6
    assert "controllers started: 4/4" in progress and "wave 0: controllers restarted: 2/2" in progress
    # The restarted controllers really stopped and started again, next to their applications.
    starts = [(Path(wave.run_dir) / "trace" / f"cc{k}.ndjson").read_text().count('"life.start"') for k in range(4)]
    assert sorted(starts) == [1, 1, 2, 2]

    twins = _variant("    - {at_s: 2, duplicate_cc_ids: 2}\n", "{answered_fraction: 0}", tmp_path, "fleet-twins")
    duplicated = await run_scenario(twins, tmp_path, hosts=2, seed=7)
    assert duplicated.passed, (duplicated.failed_step, duplicated.error)

    found = violations_by_run([wave.run_dir, duplicated.run_dir])
    assert found.get(wave.run_id, []) == []
    storms = [v for v in found.get(duplicated.run_id, []) if v.startswith(("takeover-storm:", "link-uniqueness:"))]
    assert storms, found


def _pair(tmp_path: Path, restart: str):
    """Two cluster controllers, each consumer calling the other's provider, both restarted
    one after the other: whichever restarts second has forgotten its routes and asks the
    GCD again for the provider behind the first."""
    text = SMALL.read_text().replace("cluster_controllers: 4", "cluster_controllers: 2")
    path = tmp_path / "pair.yaml"
    path.write_text(text.replace(WAVE, f"    - {{at_s: 3, restart: {restart}}}\n"))
    return load_scenario(path)


def _gcd_adds(result) -> list[str]:
    """The participants the GCD added, one per add."""
    return [e["participant"] for e in read_events(Path(result.run_dir) / "trace" / "gcd-gbid1.ndjson")
            if e["ev"] == "gcd.add" and e["error"] is None]


async def test_a_consumer_restarted_after_its_providers_controller_still_reaches_it(tmp_path: Path) -> None:
    scenario = _pair(tmp_path, "{fraction: 1, over_s: 3}")
    result = await run_scenario(scenario, tmp_path, hosts=1, seed=7)
    assert result.passed, (result.failed_step, result.fleet["windows"])
    # A graceful stop drains: what was on a controller's WebSockets is routed on, and what
    # the broker delivers meanwhile waits there for its next start.
    assert result.fleet["totals"]["lost"] == 0, result.fleet["windows"]
    # The GCD added each provider twice under its participant id: the population's add,
    # and the one after its controller's removeStale removed it.
    assert sorted(_gcd_adds(result)) == ["echo-0-0", "echo-0-0", "echo-1-0", "echo-1-0"]


async def test_without_registering_again_the_calls_of_the_later_restart_are_lost(tmp_path: Path) -> None:
    scenario = _pair(tmp_path, "{fraction: 1, over_s: 3, register_providers: false}")
    result = await run_scenario(scenario, tmp_path, hosts=1, seed=7)
    assert result.outcome == "failed" and result.complete
    assert result.steps[2].title.endswith("over 3 s (providers not registered again)")
    # The second controller's consumer finds the first's provider no more until the end.
    assert result.fleet["totals"]["lost"] > 0, result.fleet["windows"]
    assert sorted(_gcd_adds(result)) == ["echo-0-0", "echo-1-0"]  # the population's only


async def test_expect_lost_zero_fails_when_a_broker_crashes_for_good(tmp_path: Path) -> None:
    crashed = _variant("    - {at_s: 3, crash_broker: {gbid: gbid1}}\n", "{lost: 0}", tmp_path, "fleet-broker-gone")
    result = await run_scenario(crashed, tmp_path, hosts=2, seed=7)
    assert result.outcome == "failed" and result.complete
    failed = result.failed_step
    assert failed.title == "expect lost at most 0" and failed.detail.endswith("calls lost, expected at most 0")
    before, during = result.fleet["windows"]
    assert before["lost"] == 0 and during["lost"] > 0
    assert result.steps[2].title == "at 3 s: crash broker gbid1 (not restarted)" and result.steps[2].outcome == "ok"


async def test_a_fleet_runs_on_a_broker_with_the_save_interval_it_chose(tmp_path: Path) -> None:
    text = SMALL.read_text().replace("name: fleet-restart-wave-small", "name: fleet-autosave")
    assert "  duration_s: 12\n" in text
    path = tmp_path / "fleet-autosave.yaml"
    path.write_text(text.replace("  duration_s: 12\n", "  broker_autosave: 1000\n  duration_s: 12\n"))
    result = await run_scenario(load_scenario(path), tmp_path, hosts=2, seed=7)
    assert result.passed, (result.failed_step, result.error)
    assert "autosave_interval 1000\n" in (Path(result.run_dir) / "brokers" / "gbid1.conf").read_text()


async def test_an_ordinary_scenario_runs_in_shared_hosts(tmp_path: Path) -> None:
    scenario = load_scenario(ROOT / "scenarios" / "proxy-for-local-provider.yaml")
    shared = await run_scenario(scenario, tmp_path / "shared", hosts=1)
    apart = await run_scenario(scenario, tmp_path / "apart")
    assert shared.passed and apart.passed, (shared.failed_step, apart.failed_step)
    # A host process logs to log/host-<pid>.log: one for the three runtimes, against one each.
    assert len(list((Path(shared.run_dir) / "log").glob("host-*.log"))) == 1
    assert len(list((Path(apart.run_dir) / "log").glob("host-*.log"))) == 3


def test_a_fleet_has_no_steps_to_parse() -> None:
    assert parse_scenario(SMALL.read_text(), SMALL).steps == ()
