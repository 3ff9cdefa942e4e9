"""Runs across machines: what the control channel over MQTT costs next to a local host's socket.

One Mosquitto, one ``joynr-sim host --join`` on 127.0.0.2; the same steps in a simulation
whose host processes are local (the baseline) and in one whose are on the joined host:
a query (``queued``, an op the host answers at once), a call through the runtimes (the
request's control round trip plus the joynr messages, which do not cross the control
channel), and a cluster controller's start. The ratio is joined ÷ local, same run.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

from joynr_sim.runtime.participants import EchoProvider
from joynr_sim.simulation import Simulation

ROOT = Path(__file__).resolve().parent.parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait_port(port: int, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)  # polling a port, bounded
    raise RuntimeError(f"mosquitto did not listen on {port} within {timeout} s")


async def _measure(sim_kwargs: dict, run_dir: Path, n: int) -> dict[str, list[float]]:
    samples: dict[str, list[float]] = {"query": [], "call": [], "start": []}
    async with Simulation(run_dir, gbids=["gbid1"], faults=False, **sim_kwargs) as sim:
        t = time.perf_counter()
        cc = await sim.cluster_controller("cc1")
        samples["start"].append(time.perf_counter() - t)
        app = await sim.libjoynr("app1", cc)
        await app.register_provider("d", "joynrsim/Echo", EchoProvider(), participant_id="echo")
        proxy = await app.discover_proxy("joynrsim/Echo", "d")
        for _ in range(n):
            t = time.perf_counter()
            await cc.queued()
            samples["query"].append(time.perf_counter() - t)
            t = time.perf_counter()
            await proxy.call("echo", "x")
            samples["call"].append(time.perf_counter() - t)
        for i in range(2, 2 + max(2, n // 20)):
            t = time.perf_counter()
            await sim.cluster_controller(f"cc{i}")
            samples["start"].append(time.perf_counter() - t)
    return samples


def run(quick: bool) -> list[dict]:
    if shutil.which("mosquitto") is None:
        return [{"group": "join", "name": "skipped: no mosquitto binary", "value": 0, "unit": ""}]
    n = 50 if quick else 500
    with tempfile.TemporaryDirectory() as tmp:
        tmp_path = Path(tmp)
        port = _free_port()
        conf = tmp_path / "mosquitto.conf"
        conf.write_text(f"listener {port} 127.0.0.1\nallow_anonymous true\nmax_queued_messages 0\n"
                        "persistence false\nset_tcp_nodelay true\n")
        broker = subprocess.Popen(["mosquitto", "-c", str(conf)], stdout=subprocess.DEVNULL,
                                  stderr=subprocess.DEVNULL)
        run_name = f"bench{uuid.uuid4().hex[:8]}"
        url = f"gbid1=mqtt://127.0.0.1:{port}"
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)}
        host = None
        try:
            _wait_port(port)
            host = subprocess.Popen(
                [sys.executable, "-m", "joynr_sim.cli", "host", "--join", run_name, "--broker", url,
                 "--address", "127.0.0.2", "--trace-dir", str(tmp_path / "runs")],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
            local = asyncio.run(_measure({"broker": url}, tmp_path / "runs" / "local", n))
            joined = asyncio.run(_measure({"broker": url, "join": run_name}, tmp_path / "runs" / "joined", n))
        finally:
            for process in (host, broker):
                if process is not None and process.poll() is None:
                    process.send_signal(signal.SIGTERM)
                    try:
                        process.wait(20)
                    except subprocess.TimeoutExpired:
                        process.kill()
                        process.wait(20)
    rows = []
    for key, label in (("query", "query (queued)"), ("call", "call echo"), ("start", "cluster controller start")):
        base, value = statistics.median(local[key]), statistics.median(joined[key])
        rows.append({"group": "join", "name": f"{label}, joined host (p50)", "value": value * 1e3, "unit": "ms",
                     "baseline_ms": base * 1e3, "ratio": value / base, "n": len(joined[key])})
    return rows
