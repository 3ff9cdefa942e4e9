"""The same checks on a warm Spark Connect server and on a standalone cluster (master and
one worker on loopback, ``spark_cluster``), each through the ``joynr-sim`` command: a run
with an overwrite precedence forbids is reported, a clean run passes. The classic local session is the
``spark`` fixture of every other analytics test. Each Spark here runs in its own
processes, started and stopped by the test, with bounded waits."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from analytics_helpers import RunBuilder, entry, wire
from spark_cluster import free_port, standalone_cluster

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parent.parent
PATH = [("lib-1", "ws"), ("cc-1", "mqtt"), ("cc-2", "ws"), ("lib-2", "ws")]


def _runs(root: Path) -> tuple[Path, Path]:
    bad = RunBuilder("bad")
    bad.put("cc-1", 1, "p", entry("WebSocketClient", "lib-1"), entry("Mqtt", "g1/cc-2"), "replaced")
    good = RunBuilder("good")
    for b in (bad, good):
        t = wire(b, "q1", PATH, 10, corr="c1")
        wire(b, "r1", list(reversed(PATH)), t, type_="rp", corr="c1")
    return bad.write(root), good.write(root)


def _env(tmp_path: Path) -> dict:
    return dict(os.environ, XDG_CACHE_HOME=str(tmp_path / "xdg"), PYTHONPATH=str(ROOT),
                SPARK_LOCAL_IP="127.0.0.1")


def _joynr(env: dict, *args: str, timeout: float = 300) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "joynr_sim.cli", *args], env=env, capture_output=True,
                          text=True, timeout=timeout, cwd=ROOT)


def _check_both(env: dict, tmp_path: Path, *spark: str) -> None:
    bad, good = _runs(tmp_path / "runs")
    done = _joynr(env, "check", str(bad), "--out", str(tmp_path / "out-bad"), "--quiet", *spark)
    assert done.returncode == 1, done.stderr
    report = json.loads((tmp_path / "out-bad" / "report.json").read_text())
    overwrite = next(c for c in report["checks"] if c["name"] == "overwrite-violation")
    assert [d["key"] for d in overwrite["details"]] == ["bad/cc-1/0"]
    sliced = (tmp_path / "out-bad" / overwrite["details"][0]["slice"]).read_text().splitlines()
    assert [json.loads(line)["ev"] for line in sliced] == ["rt.put"]
    done = _joynr(env, "check", str(good), "--out", str(tmp_path / "out-good"), "--quiet", *spark)
    assert done.returncode == 0, done.stderr


def test_checks_on_a_warm_spark_connect_server(tmp_path):
    env = _env(tmp_path)
    port = str(free_port())
    started = _joynr(env, "spark", "start", "--port", port, "--master", "local[2]", timeout=200)
    try:
        assert started.returncode == 0, started.stderr
        assert f"sc://127.0.0.1:{port}" in started.stdout
        again = _joynr(env, "spark", "start", "--port", port)
        assert again.returncode == 1 and "already running" in again.stderr
        assert _joynr(env, "spark", "status").returncode == 0
        _check_both(env, tmp_path, "--connect", f"sc://127.0.0.1:{port}")
    finally:
        stopped = _joynr(env, "spark", "stop", timeout=60)
    assert stopped.returncode == 0, stopped.stderr
    assert _joynr(env, "spark", "stop").returncode == 1


def test_checks_on_a_standalone_master_and_worker(tmp_path):
    env = _env(tmp_path)
    with standalone_cluster(tmp_path, env, workers=1) as master:
        _check_both(env, tmp_path, "--master", master)
