"""A Spark standalone cluster on loopback for a test: a master and N workers of one core
each, started with Spark's own daemons, up once the master lists N workers alive, each
ended (asked, then killed after 30 s) when the test is done."""

from __future__ import annotations

import json
import socket
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def standalone_cluster(tmp_path: Path, env: dict[str, str], workers: int = 1,
                       timeout_s: float = 180) -> Iterator[str]:
    """The master's URL, spark://127.0.0.1:PORT, once ``workers`` workers have registered."""
    import pyspark

    spark_class = Path(pyspark.__file__).parent / "bin" / "spark-class"
    port, ui = free_port(), free_port()
    log = open(tmp_path / "cluster.log", "wb")
    daemons = [subprocess.Popen(
        [str(spark_class), "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port", str(port),
         "--webui-port", str(ui)], env=env, stdout=log, stderr=log)]
    try:
        for i in range(workers):
            daemons.append(subprocess.Popen(
                [str(spark_class), "org.apache.spark.deploy.worker.Worker", f"spark://127.0.0.1:{port}",
                 "--host", "127.0.0.1", "--cores", "1", "--memory", "1g", "--webui-port", str(free_port()),
                 "--work-dir", str(tmp_path / f"work-{i}")], env=env, stdout=log, stderr=log))
        _until_workers(ui, workers, daemons, timeout_s, tmp_path / "cluster.log")
        yield f"spark://127.0.0.1:{port}"
    finally:
        for proc in reversed(daemons):
            stop_daemon(proc)
        log.close()


def _until_workers(ui: int, workers: int, daemons: list[subprocess.Popen], timeout_s: float, log: Path) -> None:
    """The master's status page (its /json) lists ``workers`` workers ALIVE."""
    deadline = time.monotonic() + timeout_s
    alive = 0
    while time.monotonic() < deadline:
        if any(d.poll() is not None for d in daemons):
            raise AssertionError(f"a Spark daemon exited while the cluster started: {log.read_text()[-2000:]}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{ui}/json/", timeout=2) as page:
                status = json.load(page)
            alive = sum(w.get("state") == "ALIVE" for w in status.get("workers", []))
            if alive >= workers:
                return
        except OSError:
            pass
        time.sleep(0.5)
    raise AssertionError(f"{alive} of {workers} Spark workers registered after {timeout_s} s")


def stop_daemon(proc: subprocess.Popen | None) -> None:
    """A Spark daemon ended: asked first, killed after 30 s."""
    if proc is None or proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
