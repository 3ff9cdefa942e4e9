"""A run across hosts on loopback: two ``joynr-sim host --join`` processes on 127.0.0.2 and
127.0.0.3, a Mosquitto per GBID, the GCD store on PostgreSQL, and ``joynr-sim run --join``
placing the cluster controllers on different hosts."""

from __future__ import annotations

import json
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import msgpack
import pytest

from e2e_helpers import process_exists
from gcd_helpers import POSTGRES_URL
from joynr_sim.host.join.mqtt_channel import Channel, Topics
from joynr_sim.inspect import load_run
from joynr_sim.runtime.participants import EchoProvider
from joynr_sim.simulation import Simulation

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.postgres,
    pytest.mark.skipif(shutil.which("mosquitto") is None, reason="needs the mosquitto binary"),
]
ROOT = Path(__file__).resolve().parent.parent
SCENARIO = ROOT / "scenarios" / "proxy-for-global-provider.yaml"
CRASH_SCENARIO = ROOT / "scenarios" / "gcd-trust-provider-moves-after-crash.yaml"
STOP_TIMEOUT_S = 20.0
LOGIN = ("sim", "s3cret-of-the-run")


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)}


def _cli(*args: object, timeout: float = 240.0) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "joynr_sim.cli", *map(str, args)], capture_output=True, text=True,
                          env=_env(), timeout=timeout, cwd=ROOT)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_port(port: int, process: subprocess.Popen, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        assert process.poll() is None, f"mosquitto on {port} exited {process.returncode}"
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)  # polling a port with a bound
    pytest.fail(f"mosquitto did not listen on {port} within {timeout} s")


def _stop(process: subprocess.Popen) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(STOP_TIMEOUT_S)


@pytest.fixture
def brokers(tmp_path: Path) -> Iterator[str]:
    """A Mosquitto per GBID on loopback with one login, whose ACL grants the control topics
    with the rest: ``--broker``'s value."""
    passwords, acl = tmp_path / "mosquitto.passwd", tmp_path / "mosquitto.acl"
    subprocess.run(["mosquitto_passwd", "-b", "-c", str(passwords), LOGIN[0], LOGIN[1]], check=True, timeout=30)
    acl.write_text(f"user {LOGIN[0]}\ntopic readwrite joynr-sim-control/#\ntopic readwrite #\n")
    made, urls = [], []
    for gbid in ("gbid1", "gbid2"):
        port = _free_port()
        conf = tmp_path / f"mosquitto-{gbid}.conf"
        conf.write_text(f"user {pwd.getpwuid(os.getuid()).pw_name}\n"  # as root it would become mosquitto
                        f"listener {port} 127.0.0.1\nallow_anonymous false\npassword_file {passwords}\n"
                        f"acl_file {acl}\nmax_queued_messages 0\npersistence false\nset_tcp_nodelay true\n")
        process = subprocess.Popen(["mosquitto", "-c", str(conf)], stdout=subprocess.DEVNULL,
                                   stderr=open(tmp_path / f"mosquitto-{gbid}.log", "wb"))
        made.append(process)
        _wait_port(port, process)
        urls.append(f"{gbid}=mqtt://{LOGIN[0]}:{LOGIN[1]}@127.0.0.1:{port}")
    yield ",".join(urls)
    for process in made:
        _stop(process)


class Hosts:
    def __init__(self, tmp_path: Path, broker: str) -> None:
        self.tmp_path, self.broker = tmp_path, broker
        self.run = f"r{uuid.uuid4().hex[:8]}"
        self.out = tmp_path / "runs"
        self.processes: list[subprocess.Popen] = []

    def start(self, address: str) -> subprocess.Popen:
        log = open(self.tmp_path / f"host-{address}.log", "wb")
        process = subprocess.Popen(
            [sys.executable, "-m", "joynr_sim.cli", "host", "--join", self.run, "--broker", self.broker,
             "--address", address, "--trace-dir", str(self.out), "--name", f"h-{address}"],
            stdout=log, stderr=log, env=_env(), cwd=ROOT)
        self.processes.append(process)
        return process

    def log(self, address: str) -> str:
        return (self.tmp_path / f"host-{address}.log").read_text()


@pytest.fixture
def hosts(tmp_path: Path, brokers: str) -> Iterator[Hosts]:
    made = Hosts(tmp_path, brokers)
    yield made
    for process in made.processes:
        _stop(process)


def _run(hosts: Hosts, *extra: object, scenarios: tuple[Path, ...] = (SCENARIO,)) -> subprocess.CompletedProcess:
    return _cli("run", *scenarios, "--out", hosts.out, "--broker", hosts.broker, "--gcd-store", POSTGRES_URL,
                "--join", hosts.run, *extra)


def _worker_hosts(hosts: Hosts, run_dir: Path) -> dict[str, str]:
    """runtime id -> the address of the host whose worker process held it: a worker's log
    names its runtime, its host's log names the worker's pid."""
    found = {}
    for log in (run_dir / "log").glob("host-*.log"):
        pid = log.stem.removeprefix("host-")
        runtime = log.read_text().split("'")[1]
        owners = [a for a in ("127.0.0.2", "127.0.0.3") if f"worker {pid} for session" in hosts.log(a)]
        assert len(owners) == 1, (runtime, pid, owners)
        found[runtime] = owners[0]
    return found


def _events(run_dir: Path, runtime: str) -> list[dict]:
    return [e for e in load_run(run_dir).events if e.get("rt") == runtime]


def test_scenarios_run_across_two_joined_hosts(hosts: Hosts) -> None:
    first, second = hosts.start("127.0.0.2"), hosts.start("127.0.0.3")
    result = _run(hosts, "--join-hosts", 2, scenarios=(SCENARIO, CRASH_SCENARIO))
    assert result.returncode == 0, result.stdout + result.stderr
    run_dir = hosts.out / "proxy-for-global-provider"
    assert json.loads((run_dir / "run.json").read_text())["outcome"] == "passed"
    # Each cluster controller on its own host, its libjoynr runtime with it.
    placed = _worker_hosts(hosts, run_dir)
    assert placed["cc1"] != placed["cc2"] and placed["app1"] == placed["cc1"] and placed["app2"] == placed["cc2"]
    # ... and each libjoynr runtime reached its cluster controller on that host's address.
    for app, cc in (("app1", "cc1"), ("app2", "cc2")):
        routes = [e["entry"]["addr"] for e in _events(run_dir, app)
                  if e.get("ev") == "rt.put" and e.get("participant") == f"{cc}-routingprovider"]
        assert routes and routes[0].startswith(f"ws://{placed[cc]}:"), routes
    # A crash on a joined host is a SIGKILL of the worker there: traced with its pid.
    crashed = hosts.out / "gcd-trust-provider-moves-after-crash"
    assert json.loads((crashed / "run.json").read_text())["outcome"] == "passed"
    crash = [e for e in _events(crashed, "app1") if e.get("ev") == "life.crash"]
    where = _worker_hosts(hosts, crashed)["app1"]
    assert len(crash) == 1 and f"worker {crash[0]['pid']} for session" in hosts.log(where)
    assert f"worker {crash[0]['pid']} ended, exit status -9" in hosts.log(where)  # SIGKILL, on its host
    assert first.poll() is None and second.poll() is None, "a host ended with the run"
    assert "control.drop" not in hosts.log("127.0.0.2") + hosts.log("127.0.0.3")
    # A host leaves on SIGTERM and clears its announcement: the next runner sees none.
    for process in (first, second):
        _stop(process)
        assert process.returncode == 0
    result = _run(hosts, "--join-hosts", 2, "--join-timeout", 1)
    assert result.returncode == 3 and "join: 0 of 2 hosts joined" in result.stderr, result.stderr
    assert LOGIN[1] not in result.stderr + hosts.log("127.0.0.2") + hosts.log("127.0.0.3")


def test_a_host_that_never_joins_times_out_with_a_clear_error(hosts: Hosts) -> None:
    hosts.start("127.0.0.2")
    result = _run(hosts, "--join-hosts", 2, "--join-timeout", 3)
    assert result.returncode == 3, result.stdout + result.stderr
    line = result.stderr.strip()
    assert f"join: 1 of 2 hosts joined run {hosts.run!r} within 3 s (h-127.0.0.2)" in line, line
    assert f"joynr-sim host --join {hosts.run}" in line


class Hostile:
    """A client on the run's broker that answers the runner's first request with garbage
    in the host's name, and sends the host garbage in the runner's."""

    def __init__(self, hosts: Hosts) -> None:
        topics = Topics(hosts.run)
        port = hosts.broker.split(",")[0].rsplit(":", 1)[1]
        self.sent: list[str] = []
        self.channel = Channel("hostile", "127.0.0.1", int(port), LOGIN, [f"{topics.root}/+/+/request"], self._seen)
        self.topics = topics

    def _seen(self, topic: str, payload: bytes) -> None:
        if self.sent:
            return
        host, session = self.topics.parts(topic)[:2]
        response = self.topics.responses(host, session)
        frames = [
            (response, b"\xc1 not msgpack"),
            (response, msgpack.packb({"v": 1, "id": 99_999, "ok": True, "result": None})),  # no such request
            (response, msgpack.packb({"v": 1, "id": 1, "ok": "yes"})),
            (self.topics.requests(host, session), msgpack.packb([1, 2, 3])),
            (self.topics.requests(host, "x" * 65), b"\x00"),
            (self.topics.requests(host, session), msgpack.packb({"v": 1, "worker": 0, "query": False, "message": {
                "v": 1, "id": 99_998, "op": "format-disk", "args": {}}})),
            (self.topics.host("intruder"), b"\xff"),  # an announcement that is none
        ]
        for where, frame in frames:
            self.channel.publish(where, frame)
            self.sent.append(where)


def test_malformed_control_frames_are_recorded_drops_and_the_run_passes(hosts: Hosts) -> None:
    hosts.start("127.0.0.2")
    hostile = Hostile(hosts)
    hostile.channel.connect()
    try:
        result = _run(hosts)
    finally:
        hostile.channel.close()
    assert result.returncode == 0, result.stdout + result.stderr
    assert len(hostile.sent) == 7
    run_dir = hosts.out / "proxy-for-global-provider"
    drops = [json.loads(line) for line in (run_dir / "log" / "control.log").read_text().splitlines()]
    assert [d["reason"] for d in drops] == ["malformed"] * 5, drops
    details = "\n".join(d["detail"] for d in drops)
    for named in ("not msgpack", "id: 99999 is no request of this session", "ok: expected true or false",
                  "frame: expected a map, got int", "id: 99998 is no request of this session"):
        assert named in details, details
    host_log = hosts.log("127.0.0.2")
    assert host_log.count("control.drop reason=malformed") == 2, host_log
    assert host_log.count("control.drop") == 2, host_log


@pytest.mark.spark
def test_the_traces_of_a_joined_run_pass_the_spark_checks(hosts: Hosts) -> None:
    hosts.start("127.0.0.2")
    hosts.start("127.0.0.3")
    result = _run(hosts, "--join-hosts", 2)
    assert result.returncode == 0, result.stdout + result.stderr
    checked = _cli("check", hosts.out / "proxy-for-global-provider", timeout=600)
    assert checked.returncode == 0, checked.stdout + checked.stderr


async def test_host_groups_go_to_joined_hosts_and_a_crash_kills_the_group_there(hosts: Hosts) -> None:
    hosts.start("127.0.0.2")
    hosts.start("127.0.0.3")
    run_dir = hosts.out / "groups"
    async with Simulation(run_dir, gbids=["gbid1", "gbid2"], broker=hosts.broker, join=hosts.run, join_hosts=2,
                          hosts=2, faults=False) as sim:
        cc1 = await sim.cluster_controller("cc1")
        cc2 = await sim.cluster_controller("cc2")
        app1 = await sim.libjoynr("app1", cc1)
        app2 = await sim.libjoynr("app2", cc2)
        assert cc1.pid == app1.pid != cc2.pid == app2.pid
        assert {cc1.ws_address.host, cc2.ws_address.host} == {"127.0.0.2", "127.0.0.3"}
        await app2.register_provider("d", "joynrsim/Echo", EchoProvider(), participant_id="echo")
        proxy = await app1.discover_proxy("joynrsim/Echo", "d")
        assert await proxy.call("echo", "across") == "across"

        killed = cc1.pid
        await cc1.crash()
        assert not process_exists(killed) and not (cc1.running or app1.running) and cc2.running and app2.running
        crashes = {e["rt"]: e["pid"] for e in load_run(run_dir).events if e.get("ev") == "life.crash"}
        assert crashes == {"cc1": killed, "app1": killed}
        await cc1.restart()
        await app1.restart()
        assert cc1.pid == app1.pid != killed
        proxy = await app1.discover_proxy("joynrsim/Echo", "d")
        assert await proxy.call("echo", "again") == "again"
        workers = [cc1.pid, cc2.pid]
    assert not [pid for pid in workers if process_exists(pid)]  # the session's workers end with it
