"""A run with ``gcd="external"`` (``run --gcd external``) starts no GCD: its cluster controllers
register and look up through the discovery service already serving the external brokers'
GCD topic. Here that service is another simulation's GCD on the same two Mosquittos, the
place a joynr discovery service (JDS) would have; on both wires, as joynr's JDS would be
called on the joynr wire."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest

from joynr_sim.runtime.participants import EchoProvider
from joynr_sim.simulation import Simulation
from joynr_sim.wire.codecs import DEFAULT_WIRE, JOYNR
from test_host_join import brokers  # noqa: F401  (the fixture: two Mosquittos with one login)

pytestmark = pytest.mark.e2e
ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("wire", [DEFAULT_WIRE, JOYNR])
async def test_a_run_with_an_external_gcd_registers_and_looks_up_through_the_one_serving(
        tmp_path: Path, brokers: str, wire: str) -> None:  # noqa: F811
    gbids = ["gbid1", "gbid2"]
    async with Simulation(tmp_path / "discovery", gbids=gbids, broker=brokers, faults=False, wire=wire) as service:
        async with Simulation(tmp_path / "run", gbids=gbids, broker=brokers, faults=False, wire=wire,
                              gcd="external") as sim:
            assert sim.gcds == {} and not any(r.kind == "gcd" for r in sim.runtimes.values())
            cc1 = await sim.cluster_controller("ext-cc1", gbids)
            cc2 = await sim.cluster_controller("ext-cc2", gbids)
            provider_app = await sim.libjoynr("ext-provider-app", cc2)
            await provider_app.register_provider("ext-dom", "joynrsim/Echo", EchoProvider(),
                                                 participant_id="ext-echo", gbids=["gbid2"])
            app = await sim.libjoynr("ext-consumer-app", cc1)
            proxy = await app.discover_proxy("joynrsim/Echo", "ext-dom", scope="GLOBAL_ONLY")
            assert await proxy.call("echo", "through the other GCD") == "through the other GCD"
            # The registration is the serving GCD's: in its store, in the backend it was made for.
            rows = await service.gcds["gbid1"].run(
                lambda g: {(r.entry.participant_id, r.gbid) for r in g.store.all_rows()})
            assert ("ext-echo", "gbid2") in rows
        # A graceful stop unregisters there too.
        rows = await service.gcds["gbid1"].run(lambda g: {r.entry.participant_id for r in g.store.all_rows()})
        assert "ext-echo" not in rows


def test_run_refuses_an_external_gcd_on_the_runs_own_brokers(tmp_path: Path) -> None:
    scenario = ROOT / "scenarios" / "proxy-for-global-provider.yaml"
    result = subprocess.run([sys.executable, "-m", "joynr_sim.cli", "run", str(scenario), "--gcd", "external",
                             "--out", str(tmp_path / "runs")], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert result.returncode == 2, result.stdout + result.stderr
    assert "--gcd: gcd: 'external' needs external brokers" in result.stderr
    assert not (tmp_path / "runs").exists()


async def test_a_scenario_run_against_an_external_gcd_checks_clean_with_the_gcd_traced_as_outside(
        tmp_path: Path, brokers: str) -> None:  # noqa: F811
    """run --gcd external --check: the hops to the serving GCD arrive in no trace of the run;
    the run says who serves them (life.outside), and the checks judge them by it: with those
    lines deleted, the same trace has hops that never arrived."""
    scenario = ROOT / "scenarios" / "local-remote-global-provider-is-discovered.yaml"
    out = tmp_path / "runs"
    async with Simulation(tmp_path / "discovery", gbids=["gbid1", "gbid2"], broker=brokers, faults=False,
                          wire=JOYNR):
        run = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "joynr_sim.cli", "run", str(scenario), "--broker", brokers, "--gcd", "external",
            "--wire", JOYNR, "--out", str(out), "--check", cwd=ROOT,
            stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
        output = (await asyncio.wait_for(run.communicate(), 300))[0].decode()
    assert run.returncode == 0, output
    run_dir = out / scenario.stem
    manifest = json.loads((run_dir / "run.json").read_text())
    assert (manifest["outcome"], manifest["wire"], manifest["gcd"]) == ("passed", JOYNR, "external")
    brokers_trace = run_dir / "trace" / "brokers.ndjson"
    lines = brokers_trace.read_text().splitlines()
    outside = [json.loads(line) for line in lines if '"life.outside"' in line]
    assert {(e["target"], tuple(e["own_topics"])) for e in outside} == {
        ("gcd-gbid1", ("discoverydirectory_channelid",)), ("gcd-gbid2", ("discoverydirectory_channelid",))}
    brokers_trace.write_text("".join(f"{line}\n" for line in lines if '"life.outside"' not in line))
    check = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "joynr_sim.cli", "check", str(run_dir), cwd=ROOT,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT)
    output = (await asyncio.wait_for(check.communicate(), 300))[0].decode()
    assert check.returncode == 1, output
    assert "gbid1/discoverydirectory_channelid" in output and "never arrived" in output
