"""Ray inside the Spark cluster the checks use, on Spark 4.3: a local Spark standalone
master with two workers of two cores each; Ray's worker nodes started in its tasks, one
core of each worker (the other is the checks')
(``ray.util.spark.setup_ray_cluster``, ``tests/ray_on_spark.py``); a fleet run with its hosts
as Ray actors there (``joynr-sim run --hosts ray --ray ADDRESS``); its traces checked by
``joynr-sim check`` on the same standalone cluster."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from test_analytics_spark_modes import _env, _free_port, _joynr, _stop, _wait_for_port

pytest.importorskip("ray", reason="Ray is installed by make setup (the ray extra)")

ROOT = Path(__file__).resolve().parent.parent
SMALL_FLEET = ROOT / "scenarios" / "fleet" / "restart-wave-small.yaml"
SETUP_TIMEOUT_S = 300  # Ray's nodes in Spark tasks took 86 s on two loaded cores


def _wait_for_workers(ui: int, n: int, master: subprocess.Popen, timeout_s: float = 120.0) -> None:
    """Until the master's status page lists ``n`` alive workers."""
    deadline = time.monotonic() + timeout_s
    alive = None
    while time.monotonic() < deadline:
        assert master.poll() is None, "the master exited"
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{ui}/json/", timeout=2) as page:
                alive = json.load(page).get("aliveworkers")
        except OSError:
            pass
        if alive == n:
            return
        time.sleep(0.25)
    raise AssertionError(f"{alive} of {n} Spark workers registered after {timeout_s:g} s")


def _address(ray: subprocess.Popen) -> str:
    """The Ray address the helper prints, past what Ray and Spark print before it."""
    for line in ray.stdout:  # each read bounded by Ray's own start-up timeout
        if line.startswith('{"address":'):
            return json.loads(line)["address"]
    raise AssertionError(f"Ray on Spark did not start (exit {ray.wait()}): see cluster.log")


@pytest.mark.e2e
@pytest.mark.spark
def test_a_fleet_on_ray_inside_the_spark_cluster_then_checked_on_that_cluster(tmp_path):
    import pyspark

    spark_class = Path(pyspark.__file__).parent / "bin" / "spark-class"
    # As the how-to says: the executors' Python, and Ray's token authentication for everyone
    # (the helper, its executors, and joynr-sim, which joins the cluster).
    env = dict(_env(tmp_path), PYSPARK_PYTHON=sys.executable, RAY_AUTH_MODE="token")
    env.pop("RAY_ADDRESS", None)
    port = _free_port()
    master_url = f"spark://127.0.0.1:{port}"
    log = open(tmp_path / "cluster.log", "wb")
    procs: list[subprocess.Popen] = []
    ray = None
    try:
        ui = _free_port()
        procs.append(subprocess.Popen(
            [str(spark_class), "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
             "--webui-port", str(ui)], env=env, stdout=log, stderr=log))
        _wait_for_port(port, procs[0])
        for i in range(2):
            procs.append(subprocess.Popen(
                [str(spark_class), "org.apache.spark.deploy.worker.Worker", master_url, "--host", "127.0.0.1",
                 "--cores", "2", "--memory", "2g", "--webui-port", str(_free_port()),
                 "--work-dir", str(tmp_path / f"work-{i}")], env=env, stdout=log, stderr=log))
        _wait_for_workers(ui, 2, procs[0])  # Ray on Spark sizes itself by the workers registered
        ray = subprocess.Popen([sys.executable, str(ROOT / "tests" / "ray_on_spark.py"), master_url, "2"],
                               env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log, text=True)
        address = _address(ray)
        assert address.startswith("127.0.0.1:")

        run = _joynr(env, "run", str(SMALL_FLEET), "--hosts", "ray", "--ray", address, "--out",
                     str(tmp_path / "runs"), timeout=SETUP_TIMEOUT_S)
        assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
        assert "passed fleet-restart-wave-small" in run.stdout

        check = _joynr(env, "check", str(tmp_path / "runs"), "--master", master_url, "--out", str(tmp_path / "out"),
                       "--quiet", timeout=SETUP_TIMEOUT_S)
        assert check.returncode == 0, check.stderr
        report = json.loads((tmp_path / "out" / "report.json").read_text())
        assert report["input"]["events"] > 1000 and all(c["violations"] == 0 for c in report["checks"])
    finally:
        if ray is not None:
            try:
                ray.communicate("", timeout=120)
            except subprocess.TimeoutExpired:
                ray.kill()
        for proc in reversed(procs):
            _stop(proc)
        log.close()
