"""``joynr-sim host --join`` and ``run --join`` refuse what cannot work: one line, exit 2 (bad
input, nothing starts) or 3 (the broker cannot be reached)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCENARIO = ROOT / "scenarios" / "proxy-for-global-provider.yaml"


def _cli(*args: object, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p)}
    return subprocess.run([sys.executable, "-m", "joynr_sim.cli", *map(str, args)], capture_output=True, text=True,
                          env=env, timeout=60, cwd=cwd)


def _refused_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed again: nothing listens there


@pytest.mark.parametrize("args, named, code", [
    (["--join", "a/b"], "--join: expected 1 to 64 letters", 2),
    (["--name", "x" * 65], "--name: expected 1 to 64 letters", 2),
    (["--broker", "amqtt"], "--broker: expected the run's brokers as gbid1=mqtt://host:port", 2),
    (["--broker", "gbid1=mqtt://u:s3cret@h:port"], "bad URL 'mqtt://u:***@h:port'", 2),
    (["--address", "example.org"], "does not appear to be an IPv4 or IPv6 address", 2),
    (["--address", "192.0.2.1"], "--address: cannot listen on 192.0.2.1", 2),
    (["--cores", "0"], "--cores: expected 1 to 4096, got 0", 2),
    ([], "control channel: cannot reach the broker at 127.0.0.1:", 3),
])
def test_host_refuses_bad_input_in_one_line(tmp_path: Path, args: list[str], named: str, code: int) -> None:
    base = {"--join": "r1", "--broker": f"gbid1=mqtt://127.0.0.1:{_refused_port()}", "--address": "127.0.0.2",
            "--trace-dir": tmp_path / "traces"}
    base.update(dict(zip(args[::2], args[1::2])))
    result = _cli("host", *(x for kv in base.items() for x in kv), cwd=tmp_path)
    assert result.returncode == code, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("joynr-sim host: ") and named in lines[0], lines
    assert "s3cret" not in result.stderr


@pytest.mark.parametrize("args, named", [
    (["--broker", "amqtt"], "--join: the hosts meet on the run's brokers"),
    (["--broker", "gbid1=mqtt://h:1,gbid2=mqtt://h:2", "--join-hosts", "0"], "--join-hosts: expected 1 to 4096"),
    (["--broker", "gbid1=mqtt://h:1,gbid2=mqtt://h:2", "--join-timeout", "0"], "--join-timeout: expected more"),
    (["--broker", "gbid1=mqtt://h:1,gbid2=mqtt://h:2", "--policy", "all"], "--join goes with one policy"),
])
def test_run_join_refuses_bad_input_in_one_line(tmp_path: Path, args: list[str], named: str) -> None:
    result = _cli("run", SCENARIO, "--out", tmp_path / "runs", "--join", "r1", *args, cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert named in result.stderr.strip() and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert not (tmp_path / "runs").exists()
