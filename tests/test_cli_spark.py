"""``joynr-sim spark`` and ``check --connect``: the refusals that need no JVM."""

from __future__ import annotations

import socket

import pytest

from joynr_sim.cli import main


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_stop_and_status_without_a_server_exit_1(capsys):
    assert main(["spark", "stop"]) == 1
    assert "no Spark Connect server is running" in capsys.readouterr().err
    assert main(["spark", "status"]) == 1


def test_start_refuses_a_bad_or_busy_port(capsys):
    assert main(["spark", "start", "--port", "0"]) == 2
    assert "--port 0" in capsys.readouterr().err
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        assert main(["spark", "start", "--port", str(busy.getsockname()[1])]) == 3
    assert "in use" in capsys.readouterr().err


def test_check_connect_refuses_a_bad_url_or_no_server(tmp_path, capsys):
    from analytics_helpers import RunBuilder

    b = RunBuilder()
    b.add("runner", "step", 1, index=0, name="x")
    run_dir = b.write(tmp_path / "runs")
    assert main(["check", str(run_dir), "--connect", "http://x"]) == 2
    assert "expected sc://host:port" in capsys.readouterr().err
    assert main(["check", str(run_dir), "--connect", f"sc://127.0.0.1:{_closed_port()}"]) == 2
    err = capsys.readouterr().err
    assert "no Spark Connect server" in err and "Traceback" not in err
    with pytest.raises(SystemExit) as exit_:
        main(["check", str(run_dir), "--connect", "sc://h:1", "--master", "local[1]"])
    assert exit_.value.code == 2


def test_start_runs_the_server_on_the_quick_jit_unless_asked_not_to(tmp_path, monkeypatch):
    """The server's JVM options, as handed to start-connect-server.sh (not run here)."""
    import subprocess

    from analytics import server
    from analytics.session import SHORT_RUN_JVM

    calls = []

    def fake_run(args, **kwargs):
        calls.append(args)
        return subprocess.CompletedProcess(args, 1, "", "not started")

    monkeypatch.setattr(server.subprocess, "run", fake_run)
    for quick in (True, False):
        with pytest.raises(server.ServerError):
            server.start(_closed_port(), master="local[1]", state=tmp_path / str(quick), quick_jit=quick)
    key = "spark.driver.extraJavaOptions="
    opts = [next(a for a in args if a.startswith(key)).removeprefix(key) for args in calls]
    assert all(flag in opts[0].split() for flag in SHORT_RUN_JVM)
    assert not any(flag in opts[1].split() for flag in SHORT_RUN_JVM)
    assert "-Dlog4j2.configurationFile=" in opts[0] and "-Dlog4j2.configurationFile=" in opts[1]


def test_a_local_check_jvm_is_tuned_by_its_run_and_a_cluster_is_left_alone():
    """A short local run compiles quickly; a long one keeps the optimising compiler and
    collects with the parallel collector; another master's JVM is not this process's."""
    from analytics.session import LONG_RUN_JVM, SHORT_RUN_JVM, jvm_options

    assert jvm_options("local[2]", short_run=True) == list(SHORT_RUN_JVM)
    long_run = jvm_options("local[*]", short_run=False)
    assert long_run == list(LONG_RUN_JVM) and "-XX:+UseParallelGC" in long_run
    assert not any("TieredStopAtLevel" in flag for flag in long_run)
    assert jvm_options("spark://127.0.0.1:7077", short_run=True) == []
    assert jvm_options("spark://127.0.0.1:7077", short_run=False) == []
