"""The ``joynr-sim`` command: every exit status of run, check, list, trace and policies,
each error one line on stderr and never a traceback; ``--out`` never deletes what
joynr-sim did not write; a password never reaches the terminal or a run directory."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from analytics_helpers import RunBuilder, wire
from joynr_sim.cli import main

ROOT = Path(__file__).resolve().parent.parent
LIBRARY = ROOT / "scenarios"
SECRET = "s3cret-pw"

TINY = """\
name: {name}
reproduces: {{seed: 000_65e83c7f1cb84fd7.txt, scenario: "A provider registers locally"}}
backends: [gbid1]
runtimes:
  - {{id: cc1, kind: cluster-controller}}
steps:
  - register: {{runtime: cc1, provider: p, domain: d, interface: joynrsim/Echo, scope: LOCAL}}
  - expect_route: {{runtime: cc1, participant: "@p", type: {route}}}
"""


@dataclass
class Result:
    code: int
    out: str
    err: str


def cli(*args: str | Path, cwd: Path) -> Result:
    """``python -m joynr_sim.cli ARGS`` in ``cwd``, as a user runs it."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])))
    proc = subprocess.run([sys.executable, "-m", "joynr_sim.cli", *map(str, args)], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=600)
    return Result(proc.returncode, proc.stdout, proc.stderr)


def one_line(err: str) -> str:
    """The error as the user sees it: exactly one line, no traceback."""
    assert "Traceback" not in err, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    return lines[0]


def scenario(folder: Path, name: str = "tiny", route: str = "InProcess") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.yaml"
    path.write_text(TINY.format(name=name, route=route))
    return path


@pytest.fixture
def refused_port() -> Iterator[int]:
    """A port on which a connection is refused at once: bound, never listening."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        yield s.getsockname()[1]


def manifest(run_dir: Path) -> dict:
    return json.loads((run_dir / "run.json").read_text())


def everything_written(folder: Path) -> str:
    return "".join(p.read_text(errors="replace") for p in folder.rglob("*") if p.is_file())


# -- run: 2, bad input; nothing starts and nothing is written -------------------------


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["--broker", "BAD"], "--broker: expected 'amqtt', 'mosquitto' or 'gbid=mqtt://host:port,...', got 'BAD'"),
        (["--broker", f"gbid1=mqtt://u:{SECRET}@h:port"], "bad URL 'mqtt://u:***@h:port'"),
        (["--broker", "gbid2=mqtt://h:1883"], "--broker: no URL for backend(s) gbid1"),
        (["--seed", "x"], "argument --seed: invalid int value: 'x'"),
        (["--policy", "nope"], "--policy 'nope' is unknown"),
        (["--gcd-store", "mysql://db"], "--gcd-store: expected a postgresql:// URL, got 'mysql://db'"),
    ],
)
def test_run_bad_option_is_one_line_and_exit_2(tmp_path: Path, args: list[str], named: str) -> None:
    path = scenario(tmp_path / "scenarios")
    result = cli("run", path, "--out", tmp_path / "runs", *args, cwd=tmp_path)
    assert result.code == 2
    line = one_line(result.err)
    assert line.startswith("joynr-sim run: ") and named in line
    assert SECRET not in result.out + result.err
    assert not (tmp_path / "runs").exists()


def test_run_bad_scenario_file_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "broken.yaml"
    path.write_text("name: broken\nsteps: [\n")
    result = cli("run", path, cwd=tmp_path)
    assert result.code == 2
    assert f"{path}:" in one_line(result.err)
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize(
    ("broker", "shown"),
    [(f"gbid1=mqtt://u:{SECRET}@h:port", "mqtt://u:***@h:port"),  # the broker parser refuses it
     (f"gbid1=http://u:{SECRET}@h:1", "http://u:***@h:1")],  # the scenario loader refuses it
)
def test_run_refuses_a_scenario_whose_own_broker_choice_is_unusable(tmp_path: Path, broker: str, shown: str) -> None:
    path = scenario(tmp_path)
    path.write_text(path.read_text().replace("backends:", f"broker: '{broker}'\nbackends:"))
    result = cli("run", path, cwd=tmp_path)
    assert result.code == 2
    line = one_line(result.err)
    assert str(path) in line and shown in line and SECRET not in line
    listed = cli("list", path, cwd=tmp_path)
    assert SECRET not in listed.out + listed.err


# -- run: --out never deletes what joynr-sim did not write ----------------------------


def test_run_leaves_a_users_folder_alone(tmp_path: Path) -> None:
    path = scenario(tmp_path)
    users = tmp_path / "runs" / "tiny"
    users.mkdir(parents=True)
    (users / "thesis.tex").write_text("years of work")
    result = cli("run", path, "--out", tmp_path / "runs", cwd=tmp_path)
    assert result.code == 2
    line = one_line(result.err)
    assert str(users) in line and "not a joynr-sim run directory (no run.json)" in line
    assert [p.name for p in users.iterdir()] == ["thesis.tex"]
    assert (users / "thesis.tex").read_text() == "years of work"


@pytest.mark.parametrize(
    ("make", "why"),
    [
        (lambda p: p.write_text("a file"), "is not a folder"),
        (lambda p: (p.mkdir(), (p / "run.json").write_text('{"policy": "precedence", "run_id": "x"}')),
         "not written by joynr-sim"),
        (lambda p: (p.mkdir(), (p / "run.json").write_text("{not json")), "not readable JSON"),
        (lambda p: p.symlink_to(p.parent.parent / "elsewhere", target_is_directory=True), "symbolic link"),
    ],
    ids=["file", "foreign-run-json", "unreadable-run-json", "symlink"],
)
def test_run_refuses_what_it_did_not_write(tmp_path: Path, make, why: str) -> None:
    path = scenario(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "keep.txt").write_text("keep")
    (tmp_path / "runs").mkdir()
    target = tmp_path / "runs" / "tiny"
    make(target)
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file() and not p.is_symlink()}
    result = cli("run", path, "--out", tmp_path / "runs", cwd=tmp_path)
    assert result.code == 2
    line = one_line(result.err)
    assert str(target) in line and why in line
    assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file() and not p.is_symlink()} == before


def test_run_out_that_is_a_file_is_refused(tmp_path: Path) -> None:
    path = scenario(tmp_path)
    (tmp_path / "runs").write_text("not a folder")
    result = cli("run", path, "--out", tmp_path / "runs", cwd=tmp_path)
    assert result.code == 2
    assert "--out" in one_line(result.err) and "is not a folder" in result.err
    assert (tmp_path / "runs").read_text() == "not a folder"


# -- run: 3, set-up errors named at once ----------------------------------------------


def test_run_unreachable_external_broker_is_exit_3_and_replaces_its_own_run_directory(
    tmp_path: Path, refused_port: int
) -> None:
    folder = tmp_path / "scenarios"
    scenario(folder, "first")
    scenario(folder, "second")
    out = tmp_path / "runs"
    own = out / "first"
    own.mkdir(parents=True)  # a previous run directory of joynr-sim: it may be replaced
    (own / "run.json").write_text(json.dumps({"generator": "joynr-sim", "run_id": "first-old"}))
    (own / "trace").mkdir()
    (own / "trace" / "old.ndjson").write_text("{}\n")
    broker = f"gbid1=mqtt://cc:{SECRET}@127.0.0.1:{refused_port}"
    result = cli("run", folder, "--out", out, "--broker", broker, cwd=tmp_path)
    assert result.code == 3
    line = one_line(result.err)
    assert "first" in line and f"127.0.0.1:{refused_port}" in line and "cannot be reached" in line
    assert "marked incomplete" in line
    data = manifest(own)
    assert data["generator"] == "joynr-sim" and data["run_id"] != "first-old"
    assert data["outcome"] == "error" and data["complete"] is False
    assert f"127.0.0.1:{refused_port}" in data["error"]
    assert data["broker"] == f"gbid1=mqtt://cc:***@127.0.0.1:{refused_port}"
    assert not (own / "trace" / "old.ndjson").exists()
    assert own.stat().st_mode & 0o777 == 0o700
    assert not (out / "second").exists()  # a set-up error stops the run: the rest would fail alike
    assert SECRET not in result.out + result.err + everything_written(out)


@pytest.mark.e2e
def test_run_unreachable_gcd_store_is_exit_3(tmp_path: Path, refused_port: int) -> None:
    path = scenario(tmp_path)
    result = cli("run", path, "--out", tmp_path / "runs", "--gcd-store",
                 f"postgresql://joynr:{SECRET}@127.0.0.1:{refused_port}/sim", cwd=tmp_path)
    assert result.code == 3
    line = one_line(result.err)
    assert f"postgresql://joynr:***@127.0.0.1:{refused_port}/sim" in line and "Connection refused" in line
    data = manifest(tmp_path / "runs" / "tiny")
    assert data["complete"] is False and "GCD store" in data["error"]
    assert SECRET not in result.out + result.err + everything_written(tmp_path / "runs")


# -- run: 0 and 1, on a real broker ---------------------------------------------------


@pytest.mark.e2e
def test_run_passes_then_replaces_its_run_directory_and_fails_a_step(tmp_path: Path) -> None:
    out = tmp_path / "runs"
    path = scenario(tmp_path)
    passed = cli("run", path, "--out", out, "--seed", "7", cwd=tmp_path)
    assert passed.code == 0, passed.out + passed.err
    assert passed.err == ""
    data = manifest(out / "tiny")
    assert data["outcome"] == "passed" and data["complete"] is True and data["seed"] == 7
    assert (out / "tiny").stat().st_mode & 0o777 == 0o700

    path.write_text(TINY.format(name="tiny", route="Mqtt"))
    failed = cli("run", path, "--out", out, cwd=tmp_path)
    assert failed.code == 1, failed.out + failed.err
    assert "step 1 'expect route" in failed.out and "type InProcess, expected Mqtt" in failed.out
    again = manifest(out / "tiny")
    assert again["run_id"] != data["run_id"] and again["outcome"] == "failed" and again["complete"] is True


@pytest.mark.e2e
async def test_run_with_an_external_broker_keeps_its_password_out_of_everything(
    tmp_path: Path, joynr_brokers
) -> None:
    # An embedded broker stands in for a user's own: joynr-sim only gets its URL.
    brokers = await joynr_brokers(["gbid1"])
    host, port = brokers.endpoint("gbid1")
    user, password = brokers.admin_credentials()  # the one login every runtime of the run can share
    path = scenario(tmp_path)
    result = await asyncio.to_thread(cli, "run", path, "--out", tmp_path / "runs", "--broker",
                                     f"gbid1=mqtt://{user}:{password}@{host}:{port}", cwd=tmp_path)
    assert result.code == 0, result.out + result.err
    data = manifest(tmp_path / "runs" / "tiny")
    assert data["broker"] == f"gbid1=mqtt://{user}:***@{host}:{port}"
    assert data["brokers"] == {"gbid1": f"mqtt://{host}:{port}"}
    assert f"{user}:***@{host}" in result.out
    assert password not in result.out + result.err + everything_written(tmp_path / "runs")


# -- list ---------------------------------------------------------------------------


def test_list_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["list", str(LIBRARY)]) == 0
    assert "inprocess-provider" in capsys.readouterr().out
    folder = tmp_path / "mixed"
    scenario(folder, "good")
    (folder / "bad.yaml").write_text("name: bad\n")
    assert main(["list", str(folder)]) == 2  # a broken file is bad input, named on stderr
    captured = capsys.readouterr()
    assert "good" in captured.out and "bad.yaml" in captured.out and "bad.yaml:1" in captured.err
    (tmp_path / "empty").mkdir()
    for args, named in ((["nowhere"], "no such file or folder: nowhere"),
                        ([str(tmp_path / "empty")], "no scenario files in")):
        result = cli("list", *args, cwd=tmp_path)
        assert result.code == 2 and named in one_line(result.err)


# -- trace --------------------------------------------------------------------------


def test_trace_exit_codes(tmp_path: Path) -> None:
    b = RunBuilder("run-1")
    wire(b, "q1", [("lib-1", "ws"), ("cc-1", "mqtt"), ("cc-2", "ws"), ("lib-2", "ws")], 10, corr="c1")
    run_dir = b.write(tmp_path)
    shown = cli("trace", run_dir, cwd=tmp_path)
    assert shown.code == 0 and shown.err == "" and "cc-1" in shown.out
    hops = cli("trace", run_dir, "--msg", "q1", cwd=tmp_path)
    assert hops.code == 0 and "lib-2" in hops.out
    for args, named in (([tmp_path / "nope"], "no such run directory"),
                        ([run_dir, "--msg", "zz"], "no message with id 'zz'"),
                        ([run_dir, "--msg", "q1", "--runtime", "cc-1"], "not allowed with argument")):
        result = cli("trace", *args, cwd=tmp_path)
        assert result.code == 2 and named in one_line(result.err)


# -- policies -----------------------------------------------------------------------


def test_policies_exit_codes(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["policies", "--policy", "gcd-trust"]) == 0
    out = capsys.readouterr().out
    assert "gcd-trust" in out and "precedence" not in out
    result = cli("policies", "--policy", "nope", cwd=tmp_path)
    assert result.code == 2
    assert "invalid choice: 'nope'" in one_line(result.err)


def test_usage_errors_are_one_line(tmp_path: Path) -> None:
    for args in (["frobnicate"], [], ["run"], ["check"], ["run", "x.yaml", "--bogus"]):
        result = cli(*args, cwd=tmp_path)
        assert result.code == 2, args
        assert one_line(result.err).startswith("joynr-sim"), args


# -- check ----------------------------------------------------------------------------


def test_check_unusable_input_is_exit_2(tmp_path: Path) -> None:
    result = cli("check", tmp_path / "nope", cwd=tmp_path)
    assert result.code == 2
    assert "no such run directory" in one_line(result.err)


@pytest.mark.spark
def test_check_clean_is_0_and_a_loop_is_1(tmp_path: Path, spark, capsys) -> None:  # noqa: F811
    path = [("lib-1", "ws"), ("cc-1", "mqtt"), ("cc-2", "ws"), ("lib-2", "ws")]
    clean = RunBuilder("clean")
    t = wire(clean, "q1", path, 10, corr="c1")
    wire(clean, "r1", list(reversed(path)), t, type_="rp", corr="c1")
    looping = RunBuilder("looping")
    looping.msg("cc-1", "msg.drop", 10, "q2", hops=33, reason="hop-limit")
    assert main(["check", str(clean.write(tmp_path / "a")), "--check", "routing-loop",
                 "--out", str(tmp_path / "report-a")]) == 0
    assert main(["check", str(looping.write(tmp_path / "b")), "--check", "routing-loop",
                 "--out", str(tmp_path / "report-b")]) == 1
    assert "Traceback" not in capsys.readouterr().err
