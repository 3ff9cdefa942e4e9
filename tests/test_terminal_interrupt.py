"""Ctrl-C during a Spark check: the command ends with one line and exit 130, no py4j or
pyspark traceback, and the Spark JVM it started is gone. A real process, sent SIGINT the
way a terminal sends it (to the whole foreground process group) while its JVM runs."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from joynr_sim.cli import main

pytestmark = [pytest.mark.spark,
              pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads processes from /proc")]

ROOT = Path(__file__).resolve().parent.parent
SCENARIO = ROOT / "scenarios" / "cc-refuses-route-to-own-topic.yaml"
JOYNR_SIM = Path(sys.executable).parent / "joynr-sim"
TICKS = os.sysconf("SC_CLK_TCK")


def _stat(pid: int) -> list[str] | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return text[text.rindex(")") + 2:].split()  # after "pid (comm) ": state, ppid, ...


def _alive(pid: int) -> bool:
    fields = _stat(pid)
    return fields is not None and fields[0] != "Z"


def _jvm_of(root: int) -> int | None:
    """The Spark driver JVM among ``root``'s descendants (not the short-lived java that
    ``spark-class`` runs first to build its command line)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and (fields := _stat(int(entry.name))) is not None:
            children.setdefault(int(fields[1]), []).append(int(entry.name))
    todo = list(children.get(root, []))
    while todo:
        pid = todo.pop()
        try:
            if b"org.apache.spark.deploy.SparkSubmit" in Path(f"/proc/{pid}/cmdline").read_bytes():
                return pid
        except OSError:
            continue
        todo += children.get(pid, [])
    return None


def _cpu_s(pid: int) -> float:
    fields = _stat(pid)
    return 0.0 if fields is None else (int(fields[11]) + int(fields[12])) / TICKS  # utime, stime


def _until(what, deadline_s: float):
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        found = what()
        if found:
            return found
        time.sleep(0.05)
    return what()


@pytest.mark.parametrize("jvm_cpu_s", [3.0, 10.0], ids=["as-spark-starts", "while-it-checks"])
def test_ctrl_c_during_a_spark_check_is_one_line_exit_130_and_the_jvm_goes(tmp_path, jvm_cpu_s) -> None:
    runs = tmp_path / "runs"
    assert main(["run", str(SCENARIO), "--network", "memory", "--seed", "1", "--out", str(runs)]) == 0
    env = {**os.environ, "COLUMNS": "80", "XDG_CACHE_HOME": str(tmp_path / "xdg")}
    proc = subprocess.Popen([str(JOYNR_SIM), "check", "--no-cache", "--out", str(tmp_path / "check"), str(runs)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, start_new_session=True)
    try:
        jvm = _until(lambda: _jvm_of(proc.pid), 120)
        assert jvm, "no Spark JVM started"
        # the JVM at work, the check not yet done: a cold check costs its JVM some 30 s of CPU
        assert _until(lambda: _cpu_s(jvm) > jvm_cpu_s or proc.poll() is not None, 180)
        assert proc.poll() is None, "the check ended before it could be interrupted"
        os.killpg(proc.pid, signal.SIGINT)  # as a terminal's Ctrl-C: the whole process group
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130
    assert err.decode().strip().splitlines() == ["joynr-sim check: interrupted"]
    assert "Traceback" not in out.decode() + err.decode()
    assert not _alive(jvm), "the Spark JVM outlived the command"


def test_ctrl_c_while_a_connect_server_starts_ends_the_half_started_server(tmp_path) -> None:
    import socket

    from analytics.server import SERVER_CLASS, _pid_file

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    xdg = tmp_path / "xdg"
    env = {**os.environ, "XDG_CACHE_HOME": str(xdg)}
    pid_file = _pid_file(xdg / "joynr-sim" / "spark")
    proc = subprocess.Popen([str(JOYNR_SIM), "spark", "start", "--port", str(port)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, start_new_session=True)

    def server() -> int | None:
        try:
            pid = int(pid_file.read_text().strip())
            return pid if SERVER_CLASS.encode() in Path(f"/proc/{pid}/cmdline").read_bytes() else None
        except (OSError, ValueError):
            return None

    try:
        pid = _until(server, 120)
        assert pid, "no Connect server was started"
        assert proc.poll() is None, "the server came up before it could be interrupted"
        os.kill(proc.pid, signal.SIGINT)  # the command only: the server must be ended by it
        out, err = proc.communicate(timeout=120)
        gone = _until(lambda: not _alive(pid), 30)
    finally:
        if proc.poll() is None:
            proc.kill()
        if (left := server()) is not None:  # what a failed test leaves is not left running
            os.kill(left, signal.SIGKILL)
    assert proc.returncode == 130
    assert err.decode().strip().splitlines()[-1] == "joynr-sim spark: interrupted"
    assert "Traceback" not in out.decode() + err.decode()
    assert gone, "the half-started server outlived the command"


def test_a_ctrl_c_that_surfaces_as_a_py4j_error_is_still_the_interrupt(tmp_path, monkeypatch) -> None:
    """The call a Ctrl-C cuts short may lose its connection before the KeyboardInterrupt
    surfaces, and fail with a py4j error instead (once, in a fresh clone's test run: exit 2,
    "checking failed: Py4JNetworkError: Answer from Java side is empty"). The command still
    ends as interrupted."""
    from py4j.protocol import Py4JNetworkError

    import analytics.runner
    import analytics.session
    from analytics import app

    class Handle:
        spark, archive, stopped = None, None, []

        def stop(self, interrupted: bool = False) -> None:
            self.stopped.append(interrupted)

    def check_runs(*args, **kwargs):
        try:
            signal.raise_signal(signal.SIGINT)  # handled before the call returns
        except KeyboardInterrupt:
            pass  # swallowed, as a py4j read cut short may leave it
        raise Py4JNetworkError("Answer from Java side is empty")

    run = tmp_path / "runs" / "r1"
    (run / "trace").mkdir(parents=True)
    (run / "trace" / "cc-1.ndjson").write_text("")
    monkeypatch.setattr(analytics.session, "start", lambda *a, **k: Handle())
    monkeypatch.setattr(analytics.runner, "check_runs", check_runs)
    with pytest.raises(KeyboardInterrupt):
        app.main([str(run), "--no-cache", "--out", str(tmp_path / "out")])
    assert Handle.stopped == [True]  # its JVM is ended, not asked to stop


_SESSION_INTERRUPTED = """
import os, signal, sys
from analytics import session

jvm = []

class Interrupted(session.SparkSession):
    def __init__(self, sc, *args, **kwargs):
        jvm.append(sc._gateway.proc.pid)
        signal.raise_signal(signal.SIGINT)  # a Ctrl-C while the session is made
        super().__init__(sc, *args, **kwargs)

session.SparkSession = Interrupted
try:
    session.start("local[1]")
except KeyboardInterrupt:
    # looked at before this process ends: a JVM left to it exits seconds after, as its
    # standard input closes; one ended and waited for by start is gone already
    print("interrupted", "alive" if os.path.exists(f"/proc/{jvm[0]}") else "gone", flush=True)
"""


def test_a_ctrl_c_while_the_session_is_made_ends_the_jvm_it_started(tmp_path) -> None:
    """Making the SparkSession after the SparkContext loads Spark SQL, seconds on a loaded
    machine; a Ctrl-C there must end the JVM, not leave it to exit with the process (a
    fresh clone's run found the JVM alive after an interrupted check)."""
    proc = subprocess.run([sys.executable, "-c", _SESSION_INTERRUPTED], cwd=ROOT, capture_output=True,
                          timeout=300, env={**os.environ, "XDG_CACHE_HOME": str(tmp_path / "xdg")})
    assert proc.stdout.decode().split() == ["interrupted", "gone"], proc.stderr.decode()[-2000:]


def test_a_ctrl_c_as_the_spark_session_is_handed_over_still_ends_it(tmp_path, monkeypatch) -> None:
    """A Ctrl-C between start's return and the command holding its handle: the command
    still ends the JVM, as for one during the check."""
    import analytics.session
    from analytics import app

    class Handle:
        spark, archive, stopped = None, None, []

        def stop(self, interrupted: bool = False) -> None:
            self.stopped.append(interrupted)

    def start(*args, **kwargs):
        signal.raise_signal(signal.SIGINT)  # as start returns, its own hold over
        return Handle()

    run = tmp_path / "runs" / "r1"
    (run / "trace").mkdir(parents=True)
    (run / "trace" / "cc-1.ndjson").write_text("")
    monkeypatch.setattr(analytics.session, "start", start)
    with pytest.raises(KeyboardInterrupt):
        app.main([str(run), "--no-cache", "--out", str(tmp_path / "out")])
    assert Handle.stopped == [True]
