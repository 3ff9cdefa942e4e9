"""Several runtimes in one host process (``Simulation(hosts=N)``): a cluster controller and
its libjoynr runtimes share a process; a crash kills the process and every runtime in it;
a stop leaves the others running."""

from __future__ import annotations

import asyncio
import os
import signal
from types import SimpleNamespace

import pytest

from e2e_helpers import events, process_exists, until
from joynr_sim.clock import SimClock
from joynr_sim.host.rpc import ops
from joynr_sim.host.rpc.dispatch import Host
from joynr_sim.runtime.participants import EchoProvider
from joynr_sim.simulation import Simulation
from joynr_sim.trace import TraceWriter


def test_hosts_must_be_a_whole_number_and_need_processes(tmp_path):
    for bad in (0, -1, 1.5, True, "2"):
        with pytest.raises(ValueError, match="^hosts: expected a whole number"):
            Simulation(tmp_path, gbids=["gbid1"], hosts=bad)
    with pytest.raises(ValueError, match="^hosts: .*only with processes=True"):
        Simulation(tmp_path, gbids=["gbid1"], hosts=2, processes=False)
    assert Simulation(tmp_path, gbids=["gbid1"], hosts="cores").hosts == os.cpu_count()


@pytest.mark.e2e
async def test_a_cc_and_its_apps_share_a_host_which_a_crash_kills_with_all_in_it(tmp_path):
    async with Simulation(tmp_path, gbids=["gbid1"], hosts=2, faults=False) as sim:
        cc1 = await sim.cluster_controller("cc1")
        cc2 = await sim.cluster_controller("cc2")
        cc3 = await sim.cluster_controller("cc3")  # the third goes to the first host again
        app1 = await sim.libjoynr("app1", cc1)
        app2 = await sim.libjoynr("app2", cc2)
        assert cc1.pid == app1.pid == cc3.pid and cc2.pid == app2.pid and cc1.pid != cc2.pid
        assert os.getpid() not in (cc1.pid, cc2.pid)
        await app2.register_provider("d", "joynrsim/Echo", EchoProvider(), participant_id="echo")
        proxy = await app1.discover_proxy("joynrsim/Echo", "d")
        assert await proxy.call("echo", "before") == "before"

        killed = cc1.pid
        await cc1.crash()
        assert not process_exists(killed)
        assert not (cc1.running or app1.running or cc3.running) and cc2.running and app2.running
        crashes = {e["rt"]: e["pid"] for e in events(tmp_path, "life.crash")}
        assert crashes == {"cc1": killed, "app1": killed, "cc3": killed}

        await cc1.restart()
        await app1.restart()
        assert cc1.pid == app1.pid != killed and process_exists(cc1.pid)
        proxy = await app1.discover_proxy("joynrsim/Echo", "d")
        assert await proxy.call("echo", "after") == "after"

        # A graceful stop leaves the others in the host running; the last one out ends it.
        shared = app2.pid
        await app2.stop()
        assert cc2.running and cc2.pid == shared and process_exists(shared)
        assert cc2.mqtt["gbid1"].connected.is_set()  # the host still answers for it
        await app2.start()
        assert app2.pid == shared
        await app2.stop()
        await cc2.stop()
        assert not process_exists(shared)
        pids = {cc1.pid}
    assert not [pid for pid in pids if process_exists(pid)]


@pytest.mark.e2e
@pytest.mark.parametrize("hosts", [2, None], ids=["grouped", "a-process-each"])
async def test_a_host_killed_from_outside_is_traced_as_the_crash_of_every_runtime_in_it(tmp_path, hosts):
    # Not the runner's crash: the kernel's SIGKILL (an OOM kill, say). The runner sees the
    # host's channel end and traces each runtime it held, as its own crash would.
    async with Simulation(tmp_path, gbids=["gbid1"], hosts=hosts, faults=False) as sim:
        cc1 = await sim.cluster_controller("cc1")
        cc2 = await sim.cluster_controller("cc2")
        app1 = await sim.libjoynr("app1", cc1)
        killed = app1.pid
        os.kill(killed, signal.SIGKILL)
        await until(lambda: not app1.running)
        held = {"cc1", "app1"} if hosts else {"app1"}
        assert {e["rt"]: e["pid"] for e in events(tmp_path, "life.crash")} == dict.fromkeys(held, killed)
        assert cc2.running and cc1.running == ("cc1" not in held)
        if "cc1" in held:
            await cc1.restart()
        await app1.restart()
        assert app1.running and app1.pid != killed


@pytest.mark.e2e
async def test_the_clock_moves_while_a_neighbour_in_the_host_starts(tmp_path):
    # A clock advance purges every runtime in the host at once, also one still starting
    # (running, its broker connections not yet up).
    async with Simulation(tmp_path, gbids=["gbid1"], hosts=1, faults=False) as sim:
        first = await sim.cluster_controller("cc0")
        starting = asyncio.ensure_future(asyncio.gather(*(sim.cluster_controller(f"cc{i}") for i in range(1, 6))))
        while not starting.done():
            sim.clock.advance(1)  # asks the host through cc0, which runs
            await asyncio.sleep(0.001)
        ccs = [first, *await starting]
        assert len({cc.pid for cc in ccs}) == 1 and all(cc.running for cc in ccs)


@pytest.mark.e2e
async def test_a_clock_move_reaches_a_shared_host_once(tmp_path):
    # Each move purges every runtime in the host: once per move, not once per runtime.
    async with Simulation(tmp_path, gbids=["gbid1"], hosts=1, faults=False) as sim:
        ccs = [await sim.cluster_controller(f"cc{i}") for i in range(3)]
        process = ccs[0].process
        asked = []
        query = process.query
        process.query = lambda op: (asked.append(ops.name_of(op)), query(op))[1]
        sim.clock.advance(5)
        assert asked.count("advance") == 1
        await sim.cluster_controller("cc3")  # started at the offset the host has
        assert asked.count("advance") == 1


async def test_a_host_hands_every_pending_trace_line_to_the_os_before_it_answers(tmp_path):
    """The runner may read the trace of what it asked for as soon as the answer comes: the
    lines this turn collected (batched until its end) are written by then, by the flushes
    the traces queued, without the host asking each of its traces."""
    host = Host(SimClock())
    busy, idle = (TraceWriter(tmp_path, "run", rt, "libjoynr", lambda: 0, batched=True) for rt in ("busy", "idle"))
    host.runtimes = {"busy": SimpleNamespace(trace=busy), "idle": SimpleNamespace(trace=idle)}
    busy.emit("life.start", target="busy", target_kind="libjoynr")
    assert busy.pending and not idle.pending
    assert busy.path.read_bytes() == b""  # batched: not before the turn's end
    await host.flush_traces()  # as before an answer
    assert b'"life.start"' in busy.path.read_bytes()
    assert not busy.pending and idle.path.read_bytes() == b""


async def test_a_start_in_a_group_does_not_wait_for_another_runtimes_close():
    """A release asks the host to close its runtime outside the group's lock: a start in
    the same group goes on while that round trip is under way (a loaded host makes it
    long)."""
    from joynr_sim.host.process.groups import HostGroup

    asked, answer = asyncio.Event(), asyncio.Event()

    class Process:  # a host process whose answer to close is late
        alive = True

        async def request(self, op, timeout=None):
            assert op == ops.Close(runtime="r0")
            asked.set()
            await answer.wait()

        async def close(self):
            pass

    process = Process()

    class Pool:
        async def take(self, name):
            return process

    group = HostGroup("g", Pool())  # type: ignore[arg-type]
    first, second, third = (SimpleNamespace(runtime_id=f"r{n}") for n in range(3))
    for runtime in (first, second):
        assert await group.process_for(runtime) is process  # type: ignore[arg-type]
    releasing = asyncio.ensure_future(group.release(first, process))  # type: ignore[arg-type]
    await asyncio.wait_for(asked.wait(), 10)
    # Bounded, so that a start stuck behind the close fails here instead of hanging.
    assert await asyncio.wait_for(group.process_for(third), 10) is process  # type: ignore[arg-type]
    assert not releasing.done()
    answer.set()
    await releasing
    assert group.members == [second, third]
