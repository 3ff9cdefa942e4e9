"""Host processes on a Ray cluster (``Simulation(hosts="ray")``, ``joynr-sim run --hosts ray``):
one host per CPU, each started by an actor on the node Ray placed it on, the runtimes'
requests on the host's own sockets; a host that dies is traced as the crash of every
runtime it held; closing, or a Ctrl-C, leaves no actor, host or broker behind.

The cluster is Ray's own multi-node test cluster: two nodes of one CPU each, on loopback."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from e2e_helpers import events, process_exists, until
from joynr_sim.host.ray.actor import HostActor
from joynr_sim.host.ray.ray_hosts import SINGLE_MACHINE, RayUnavailable, connect
from joynr_sim.runtime.participants import EchoProvider
from joynr_sim.scenario.fleet import fleet_hosts
from joynr_sim.simulation import Simulation

pytest.importorskip("ray", reason="Ray is installed by make setup (the ray extra)")

ROOT = Path(__file__).resolve().parent.parent
SMALL_FLEET = ROOT / "scenarios" / "fleet" / "restart-wave-small.yaml"
SMALL_RUN = "fleet-restart-wave-small"  # its run directory: the scenario's name
BIG_FLEET = ROOT / "scenarios" / "fleet" / "restart-wave-1000x10000.yaml"


@pytest.fixture(scope="module")
def ray_cluster():
    """Two Ray nodes with one CPU each, joined by this process."""
    os.environ.setdefault(SINGLE_MACHINE, "0")  # read as Ray is imported: its nodes stay on loopback
    import ray
    from ray.cluster_utils import Cluster

    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "include_dashboard": False})
    try:
        cluster.add_node(num_cpus=1)
        cluster.wait_for_nodes()
        assert connect(cluster.address) == 2
        yield cluster
    finally:
        ray.shutdown()
        cluster.shutdown()


def _parent(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def _cmdline(pid: int) -> str:
    return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()


@pytest.mark.e2e
async def test_hosts_are_actors_spread_over_the_nodes_and_a_host_ray_saw_die_crashes_its_runtimes(
        tmp_path, ray_cluster):
    async with Simulation(tmp_path, gbids=["gbid1"], hosts="ray", ray_address=ray_cluster.address,
                          faults=False) as sim:
        assert sim.hosts == 2  # one per CPU of the cluster
        cc1 = await sim.cluster_controller("cc1")
        cc2 = await sim.cluster_controller("cc2")
        app1 = await sim.libjoynr("app1", cc1)
        app2 = await sim.libjoynr("app2", cc2)
        assert cc1.pid == app1.pid != cc2.pid == app2.pid
        hosts = [cc1.process, cc2.process]
        assert hosts[0].node != hosts[1].node  # the placement group spread them
        for host in hosts:
            assert _parent(host.pid) == host.actor_pid
            assert _cmdline(host.actor_pid).startswith("ray::HostActor")
        await app2.register_provider("d", "joynrsim/Echo", EchoProvider(), participant_id="echo")
        proxy = await app1.discover_proxy("joynrsim/Echo", "d")
        assert await proxy.call("echo", "before") == "before"

        # The Ray worker the first host's actor runs in dies: the host with it.
        lost, actor = cc1.pid, hosts[0].actor_pid
        os.kill(actor, signal.SIGKILL)
        await until(lambda: not cc1.running and not app1.running)
        assert cc2.running and app2.running
        assert {e["rt"]: e["pid"] for e in events(tmp_path, "life.crash")} == {"cc1": lost, "app1": lost}
        await until(lambda: not process_exists(lost))

        await cc1.restart()  # a new actor, in the bundle of the group the host held
        await app1.restart()
        assert cc1.pid == app1.pid != lost and cc1.process.node == hosts[0].node
        proxy = await app1.discover_proxy("joynrsim/Echo", "d")
        assert await proxy.call("echo", "after") == "after"
        hosts.append(cc1.process)
    for host in hosts:  # closed: every actor killed, every host gone
        await until(lambda h=host: not process_exists(h.pid) and not process_exists(h.actor_pid))


def test_the_actor_starts_its_host_only_on_connections_that_bring_the_runs_token(tmp_path, ray_cluster):
    actor = HostActor()
    place = actor.listen()
    token = os.urandom(16)
    started: list = []
    thread = threading.Thread(target=lambda: started.append(actor.start(token, str(tmp_path), "asyncio")))
    thread.start()
    intruder = socket.create_connection((place["address"], place["ports"][0]), 5)
    intruder.sendall(b"x" * 16)
    assert intruder.recv(1) == b""  # closed by the actor: not the runner
    channels = [socket.create_connection((place["address"], port), 5) for port in place["ports"]]
    for channel in channels:
        channel.sendall(token)
    thread.join(10)
    try:
        assert started and process_exists(started[0])
        assert _parent(started[0]) == os.getpid()  # the actor's process: here, this one
    finally:
        assert actor.kill() == started[0]
        for channel in channels + [intruder]:
            channel.close()
    assert not process_exists(started[0])


def test_a_fleet_that_needs_more_hosts_than_the_cluster_has_cpus_is_refused_with_the_numbers(ray_cluster):
    from joynr_sim.scenario.loader import load_scenario

    with pytest.raises(RayUnavailable, match="fleet of 1000 cluster controllers, at most 80 in a host, needs 13 host "
                                            "processes, one per CPU, and the Ray cluster has 2 CPUs"):
        fleet_hosts(load_scenario(BIG_FLEET).fleet, "ray")
    assert fleet_hosts(load_scenario(SMALL_FLEET).fleet, "ray") == "ray"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _joynr(*args: str, cwd: Path, **kw) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "joynr_sim.cli", *args], cwd=cwd, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=_env(), **kw)


def _env() -> dict[str, str]:
    """This process's environment without the module's cluster (ray.init names it in RAY_ADDRESS)."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("RAY_ADDRESS", None)
    return env


def test_an_unreachable_ray_address_is_one_line_and_exit_3_with_nothing_started(tmp_path):
    port = _free_port()
    begun = time.monotonic()
    done = _joynr("run", str(SMALL_FLEET), "--hosts", "ray", "--ray", f"127.0.0.1:{port}", "--out",
                  str(tmp_path / "out"), cwd=tmp_path)
    try:
        out, err = done.communicate(timeout=60)
    finally:
        done.kill()
    assert done.returncode == 3, err
    assert err.strip().splitlines() == [f"joynr-sim run: --ray 127.0.0.1:{port}: no Ray cluster answers there "
                                        "(Connection refused)"]
    assert not (tmp_path / "out").exists()
    assert time.monotonic() - begun < 30  # refused at once, not after Ray's own minutes of retries


def _ours() -> set[int]:
    """Processes a run on Ray leaves if its teardown fails: actors, hosts, Ray's own, brokers."""
    found = set()
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                line = _cmdline(int(entry.name))
            except OSError:
                continue
            if any(p in line for p in ("ray::", "joynr_sim.host", "gcs_server", "raylet", "mosquitto -c")):
                found.add(int(entry.name))
    return found


@pytest.mark.e2e
def test_ctrl_c_during_a_fleet_on_ray_ends_it_with_130_and_leaves_no_actor_host_or_broker(tmp_path):
    before = _ours()
    run = _joynr("run", str(SMALL_FLEET), "--hosts", "ray", "--out", str(tmp_path / "out"), cwd=tmp_path,
                 start_new_session=True)
    try:
        trace = tmp_path / "out" / SMALL_RUN / "trace"
        deadline = time.monotonic() + 120
        while not (trace.is_dir() and any(trace.glob("cc*.ndjson"))):  # controllers started on the hosts
            assert run.poll() is None and time.monotonic() < deadline, run.stderr.read() if run.poll() else "timeout"
            time.sleep(0.2)
        started = _ours() - before
        assert any("ray::HostActor" in _cmdline(p) for p in started if process_exists(p))
        os.killpg(run.pid, signal.SIGINT)  # the terminal's Ctrl-C reaches the whole group
        out, err = run.communicate(timeout=60)
    finally:
        if run.poll() is None:
            os.killpg(run.pid, signal.SIGKILL)
    assert run.returncode == 130, out[-3000:] + err
    assert err.strip().splitlines()[-1] == "joynr-sim run: interrupted"
    deadline = time.monotonic() + 30
    while _ours() - before and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not {p: _cmdline(p) for p in _ours() - before if process_exists(p)}


@pytest.mark.e2e
@pytest.mark.spark
def test_a_run_on_ray_written_to_a_file_url_is_checked_there_on_a_standalone_spark_of_two_workers(
        tmp_path, ray_cluster):
    """The hosts Ray placed write the traces under a file:// URL (a shared mount's, on more
    machines); joynr-sim check reads the same URL on a Spark cluster of two workers."""
    import json

    from spark_cluster import standalone_cluster

    shared = tmp_path / "shared runs"  # a space: the URL's path is percent-encoded
    url = shared.as_uri()
    run = _joynr("run", str(SMALL_FLEET), "--hosts", "ray", "--ray", ray_cluster.address, "--out", url, cwd=tmp_path)
    try:
        out, err = run.communicate(timeout=300)
    finally:
        run.kill()
    assert run.returncode == 0, out[-3000:] + err
    lines = sum(len(f.read_bytes().splitlines()) for f in (shared / SMALL_RUN / "trace").glob("*.ndjson"))
    assert lines > 1000  # four controllers, eight libjoynr runtimes, twelve seconds of calls

    env = dict(_env(), XDG_CACHE_HOME=str(tmp_path / "xdg"), SPARK_LOCAL_IP="127.0.0.1")
    with standalone_cluster(tmp_path, env, workers=2) as master:
        check = subprocess.run(
            [sys.executable, "-m", "joynr_sim.cli", "check", f"{url}/{SMALL_RUN}", "--master", master,
             "--no-cache", "--quiet", "--out", (tmp_path / "check").as_uri()],
            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600)
    assert check.returncode == 0, check.stdout[-3000:] + check.stderr
    report = json.loads((tmp_path / "check" / "report.json").read_text())
    assert [r["dir"] for r in report["runs"]] == [str(shared / SMALL_RUN)]
    assert report["input"]["lines"] == lines
    assert report["checks"] and all(c["status"] == "pass" for c in report["checks"])
