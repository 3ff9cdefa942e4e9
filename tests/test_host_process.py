"""Host processes: started, asked, killed, never left behind, and never hanging on what a
host sends; runtimes in them crash as processes and restart knowing only what was persisted."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
from pathlib import Path

import jsonschema
import pytest

import trace_schema
from joynr_sim.core.discovery import DEFAULT_EXPIRY_MS
from joynr_sim.core.errors import JoynrTimeoutException
from joynr_sim.core.policies import PrecedencePolicy
from joynr_sim.host.process.entry import GC_THRESHOLDS
from joynr_sim.host.process.host_process import HostProcess
from joynr_sim.host.rpc import ops
from joynr_sim.host.rpc.errors import HostGone, raise_remote
from joynr_sim.host.rpc.framing import ProtocolError
from joynr_sim.runtime.participants import EchoProvider
from joynr_sim.scenario.loader import load_scenario
from joynr_sim.scenario.runner import run_scenario
from joynr_sim.simulation import Simulation
from joynr_sim.trace import read_events, read_run

pytestmark = pytest.mark.e2e

ROOT = Path(__file__).resolve().parent.parent


def exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return not _zombie(pid)


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] == "Z"
    except OSError:
        return False


async def gone_within(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while exists(pid):
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(0.05)
    return True


async def ask(host: HostProcess, op: str, args: dict):
    """A request as a stranger might send it: by name, the arguments unchecked here."""
    ok, value = await host.exchange(op, args)
    return value if ok else raise_remote(value)


def ask_now(host: HostProcess, op: str, args: dict):
    ok, value = host.query_exchange(op, args)
    return value if ok else raise_remote(value)


async def test_a_host_greets_and_is_gone_after_close(tmp_path):
    host = HostProcess("h", tmp_path)
    pid = await host.spawn()
    assert exists(pid)
    assert host.advance(5) == 5  # the query channel answers at once
    await host.close()
    assert not exists(pid)


@pytest.mark.parametrize("executed", [False, True], ids=["forked", "executed"])
async def test_a_host_collects_cyclic_garbage_at_its_own_thresholds(tmp_path, monkeypatch, executed):
    """Forked from the fork server or started as a program (a joined host's workers), a
    host runs the collector at GC_THRESHOLDS, not at Python's defaults, which made the
    collector a quarter of a fleet host's CPU."""
    if executed:
        monkeypatch.setattr(HostProcess, "command", lambda self: [sys.executable, "-m", "joynr_sim.host"])
    host = HostProcess("h", tmp_path)
    await host.spawn()
    try:
        hello = await host.hello()
        assert hello["gc_thresholds"] == list(GC_THRESHOLDS) != [700, 10, 10]
    finally:
        await host.close()


async def test_a_killed_host_is_gone_and_what_asks_it_is_told(tmp_path):
    host = HostProcess("h", tmp_path)
    pid = await host.spawn()
    assert await host.kill() == pid
    assert not exists(pid) and host.exitcode == -9
    with pytest.raises(HostGone, match=f"host process {pid} has ended"):
        await host.hello()
    with pytest.raises(HostGone):
        host.advance(1)


async def test_a_bad_request_is_answered_and_the_host_keeps_serving(tmp_path):
    host = HostProcess("h", tmp_path)
    await host.spawn()
    try:
        with pytest.raises(ProtocolError, match="unknown operation 'nope'"):
            await ask(host, "nope", {})
        with pytest.raises(ProtocolError, match="not asked on the query channel"):
            ask_now(host, "start", {"runtime": "cc1", "restart": False})
        with pytest.raises(ProtocolError, match="not asked on the query channel"):
            host.query(ops.Start(runtime="cc1", restart=False))  # refused before it is sent
        with pytest.raises(ProtocolError, match="no runtime 'cc1' in this host"):
            host.query(ops.LookupRoute(runtime="cc1", participant_id="p", gbid=None))
        with pytest.raises(ProtocolError, match="^advance.offset_ms: expected int, got str$"):
            ask_now(host, "advance", {"offset_ms": "soon"})
        assert (await host.hello())["pid"] == host.pid
    finally:
        await host.close()


async def test_garbage_on_the_control_channel_ends_the_host_with_a_clear_error(tmp_path):
    host = HostProcess("h", tmp_path)
    pid = await host.spawn()
    host._writer.write(b"\xff\xff\xff\xff")  # a frame longer than any allowed
    await asyncio.wait_for(host._child.wait(), 10)
    assert host.exitcode == 2
    with pytest.raises(ProtocolError, match="refused the channel: frame: length"):
        await host.hello()
    await host.close()
    assert not exists(pid)


class Program(HostProcess):
    """The host started as a program of its own, as on a machine without a runner."""

    def command(self) -> list[str]:
        return [sys.executable, "-m", "joynr_sim.host"]


async def test_the_host_program_speaks_the_same_protocol(tmp_path):
    host = Program("program", tmp_path)
    pid = await host.spawn()
    assert host.advance(7) == 7
    with pytest.raises(ProtocolError, match="unknown operation"):
        await ask(host, "nope", {})
    await host.close()
    assert not exists(pid) and host.exitcode == 0


def loaded_libraries(pid: int) -> str:
    return Path(f"/proc/{pid}/maps").read_text()


@pytest.mark.parametrize("kind", [HostProcess, Program])
async def test_a_host_runs_on_uvloop_unless_the_runner_asks_for_asyncio(tmp_path, monkeypatch, kind):
    # The choice is read in the runner and passed along: the fork server started earlier in
    # this test session, with whatever environment it had then.
    default = kind("default", tmp_path)
    await default.spawn()
    monkeypatch.setenv("JOYNR_SIM_EVENT_LOOP", "asyncio")
    standard = kind("standard", tmp_path)
    await standard.spawn()
    try:
        assert (default.event_loop, standard.event_loop) == ("uvloop", "asyncio")  # and each host said so
        assert "uvloop" in loaded_libraries(default.pid)
        assert "uvloop" not in loaded_libraries(standard.pid)
        assert standard.advance(3) == 3
    finally:
        await default.close()
        await standard.close()


def test_an_unknown_event_loop_is_refused_before_any_host_starts(tmp_path, monkeypatch):
    monkeypatch.setenv("JOYNR_SIM_EVENT_LOOP", "trio")
    with pytest.raises(ValueError, match="JOYNR_SIM_EVENT_LOOP: expected uvloop or asyncio, got 'trio'"):
        Simulation(tmp_path / "run", gbids=["gbid1"], processes=True)


async def test_a_host_profiles_between_on_and_off_and_refuses_a_switch_out_of_turn(tmp_path):
    host = HostProcess("h", tmp_path)
    await host.spawn()
    try:
        with pytest.raises(ValueError, match="profile: not on"):
            await host.profile(False)
        assert await host.profile(True) is None
        with pytest.raises(ValueError, match="profile: already on"):
            await host.profile(True)
        for offset in range(1, 50):
            await host.request(ops.Advance(offset_ms=offset))
        found = await host.profile(False)
        assert found["function_calls"] > 0 and found["own_s"] > 0
        assert any(t["function"].startswith("advance_to (clock.py:") and t["calls"] == 49 for t in found["top"])
        with pytest.raises(ValueError, match="profile: not on"):
            await host.profile(False)
    finally:
        await host.close()


class Impostor(HostProcess):
    """A child that speaks something else than the control protocol."""

    def __init__(self, log: Path, script: str) -> None:
        super().__init__("impostor", log)
        self.script = script

    def command(self) -> list[str]:
        return [sys.executable, "-c", self.script]


async def test_a_child_answering_garbage_is_killed_and_the_caller_told(tmp_path):
    # argv: -c --control-fd N --query-fd M
    host = Impostor(tmp_path, "import os, sys, time; os.write(int(sys.argv[2]), b'\\0\\0\\0\\5hello');"
                              "time.sleep(60)")
    with pytest.raises(ProtocolError, match="broke the protocol: frame: not msgpack"):
        await host.spawn()
    assert not exists(host.pid)


async def test_a_child_that_never_answers_is_killed_not_waited_for(tmp_path, monkeypatch):
    monkeypatch.setattr(ops, "GREET_TIMEOUT_S", 1.0)
    host = Impostor(tmp_path, "import time; time.sleep(60)")
    with pytest.raises(TimeoutError, match="did not answer hello within 1 s"):
        await host.spawn()
    assert not exists(host.pid)


PARENT = """
import asyncio, sys
from pathlib import Path
from joynr_sim.host.process.host_process import HostProcess

async def main():
    host = HostProcess("orphan", Path(sys.argv[1]))
    print(await host.spawn(), flush=True)
    await asyncio.sleep(60)

asyncio.run(main())
"""


async def test_a_host_dies_with_its_parent_even_after_a_sigkill_of_it(tmp_path):
    parent = subprocess.Popen([sys.executable, "-c", PARENT, str(tmp_path)], stdout=subprocess.PIPE,
                              env={**os.environ, "PYTHONPATH": str(ROOT)}, text=True)
    try:
        pid = int(await asyncio.wait_for(asyncio.to_thread(parent.stdout.readline), 30))
        assert exists(pid)
    finally:
        parent.kill()
        parent.wait()
    assert await gone_within(pid, 10), f"host {pid} outlived its parent"


# -- runtimes in host processes ------------------------------------------------------------

async def test_a_crash_kills_the_process_and_a_restart_knows_only_what_was_persisted(tmp_path):
    async with Simulation(tmp_path, gbids=["gbid1"], seed=1) as sim:
        cc1 = await sim.cluster_controller("cc1")
        cc2 = await sim.cluster_controller("cc2")
        app = await sim.libjoynr("app", cc1)
        await cc2.register_provider("d", "joynrsim/Echo", EchoProvider(), participant_id="echo")
        proxy = await app.discover_proxy("joynrsim/Echo", "d")
        assert await proxy.call("echo", "before") == "before"
        # A call pending when its runtime's process dies ends as in one process.
        pending = asyncio.ensure_future(app.request(proxy.participant_id, "nobody", "echo", ["x"], 60_000))
        await asyncio.sleep(0.1)
        killed_app = app.pid
        await app.restart()
        with pytest.raises(JoynrTimeoutException, match="^runtime went down$"):
            await pending
        proxy = await app.discover_proxy("joynrsim/Echo", "d")
        assert cc1.table.lookup("echo").address.topic == "cc2"  # learned from the GCD, in memory only
        pids = {cc1.pid, cc2.pid, app.pid}
        assert len(pids) == 3 and os.getpid() not in pids
        pids.add(killed_app)

        killed = cc1.pid
        await cc1.crash()
        assert not exists(killed)
        crashes = [e for e in read_events(tmp_path / "trace" / "cc1.ndjson") if e["ev"] == "life.crash"]
        assert [e["pid"] for e in crashes] == [killed]
        jsonschema.validate(crashes[0], trace_schema.json_schema("life.crash"))

        await cc1.restart()
        assert cc1.pid != killed and exists(cc1.pid)
        assert cc1.table.lookup("echo") is None  # the routing table died with the process
        assert await proxy.call("echo", "after") == "after"  # found again through the GCD
        events = list(read_events(tmp_path / "trace" / "cc1.ndjson"))
        assert [e["ev"] for e in events if e["ev"].startswith("life.")] == [
            "life.start", "life.crash", "life.restart", "life.start"]
        assert [e["seq"] for e in events] == list(range(len(events)))  # one sequence across processes
        # The broker session was persisted: the new process finds it in its link store and
        # attaches to it again instead of establishing a new one.
        attaches = [e["mode"] for e in events if e["ev"] == "link.attach"]
        assert attaches[0] == "establish" and attaches[-1] in ("resume", "recover", "reattach"), attaches
        pids.add(cc1.pid)
    assert not [pid for pid in pids if exists(pid)]


async def test_the_scenario_clock_reaches_the_host_processes(tmp_path):
    async with Simulation(tmp_path, gbids=["gbid1"]) as sim:
        cc1 = await sim.cluster_controller("cc1")
        cc2 = await sim.cluster_controller("cc2")
        await cc2.register_provider("d", "joynrsim/Echo", EchoProvider(), participant_id="echo")
        await cc1.discover_proxy("joynrsim/Echo", "d", scope="GLOBAL_ONLY")
        assert cc1.table.lookup("echo") is not None
        sim.clock.advance(DEFAULT_EXPIRY_MS + 60_000)
        # The host purged at once: its clock moved before advance returned.
        assert cc1.table.lookup("echo") is None


async def test_a_provider_of_ones_own_needs_the_runtime_in_this_process(tmp_path):
    class Mine:
        interface_name = "joynrsim/Echo"

        def echo(self, text):
            return text.upper()

    async with Simulation(tmp_path, gbids=["gbid1"]) as sim:
        cc1 = await sim.cluster_controller("cc1")
        with pytest.raises(TypeError, match=r"only the built-in providers .* use Simulation\(processes=False\)"):
            await cc1.register_provider("d", "joynrsim/Echo", Mine())
    async with Simulation(tmp_path / "inproc", gbids=["gbid1"], processes=False) as sim:
        cc1 = await sim.cluster_controller("cc1")
        await cc1.register_provider("d", "joynrsim/Echo", Mine(), participant_id="mine", scope="LOCAL")
        proxy = await cc1.discover_proxy("joynrsim/Echo", "d", scope="LOCAL_ONLY")
        assert await proxy.call("echo", "x") == "X"


async def test_a_policy_object_needs_the_runtime_in_this_process(tmp_path):
    async with Simulation(tmp_path, gbids=["gbid1"], policy=PrecedencePolicy()) as sim:
        with pytest.raises(TypeError, match=r"policy object PrecedencePolicy, use Simulation\(processes=False\)"):
            await sim.cluster_controller("cc1")


async def test_a_crash_in_a_scenario_kills_a_real_process(tmp_path):
    scenario = load_scenario(ROOT / "scenarios" / "cc-crash-with-requests-in-flight.yaml")
    result = await run_scenario(scenario, tmp_path)
    assert result.passed, (result.error, result.failed_step)
    crashes = [e for e in read_run(result.run_dir) if e["ev"] == "life.crash" and e["kind"] != "broker"]
    assert crashes
    for event in crashes:
        jsonschema.validate(event, trace_schema.json_schema("life.crash"))
        assert isinstance(event["pid"], int) and event["pid"] != os.getpid()
        assert not exists(event["pid"]), event
    # Every process of the run is gone: the ones that were killed and the ones that stopped.
    starts = [int(p.stem.split("-")[1]) for p in (Path(result.run_dir) / "log").glob("host-*.log")]
    assert len(starts) > len(crashes) and not [pid for pid in starts if exists(pid)]
