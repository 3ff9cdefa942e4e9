"""A full disk is not silent: a write to the run directory that fails (a trace, an outbox,
a routing-table store, a link store, run.json) is recorded as the run's write failure, never
raised into a runtime, ends the run with one line naming the file, and every command that
writes output says in one line which path it could not write, without a traceback.

A full file system is a small tmpfs (the tests run as root; without permission to mount,
they are skipped); one file that fails every write is a link to /dev/full (ENOSPC).
"""

from __future__ import annotations

import asyncio
import errno
import json
import os
import subprocess
import sys
from pathlib import Path

import msgpack
import pytest

from analytics_helpers import RunBuilder
from joynr_sim.cli import main
from joynr_sim.clock import SimClock
from joynr_sim.core.links import LinkStoreError, StoredLink, Terminus
from joynr_sim.host.rpc.dispatch import Host
from joynr_sim.host.rpc.framing import HEADER, ProtocolError, validate_response
from joynr_sim.host.rpc.ops import OPS, QUERY_OPS, validate_request
from joynr_sim.host.rpc.server import Server
from joynr_sim.runtime.participants import EchoProvider
from joynr_sim.simulation import Simulation
from joynr_sim.store.link_store import JsonLinkStore, SqliteLinkStore
from joynr_sim.store.outbox import OUTGOING, Outbox
from joynr_sim.store.route_store import RouteStore
from joynr_sim.trace import TraceWriter, read_events
from joynr_sim.write_failure import WriteFailure, unwatch, watch

NO_SPACE = os.strerror(errno.ENOSPC)  # "No space left on device"
SCENARIO = """\
name: {name}
description: Two runtimes, a provider, a restart and a call; small enough to run in seconds.
reproduces: {{seed: none, scenario: a run whose files cannot be written}}
backends: [gbid1]
runtimes:
  - {{kind: cluster-controller, id: cc1}}
  - {{kind: libjoynr, id: app1, cc: cc1}}
steps:
  - register: {{runtime: app1, provider: echo, domain: dom, interface: joynrsim/Echo, scope: LOCAL}}
  - restart: app1
  - proxy: {{runtime: app1, name: px, domain: dom, interface: joynrsim/Echo}}
  - call: {{proxy: px, method: echo, args: [hi], expect: {{result: hi}}}}
"""


# -- a full file system ----------------------------------------------------------------------

@pytest.fixture
def tmpfs(tmp_path):
    """mount(size, *options) -> a fresh tmpfs of that size; all are unmounted at the end."""
    mounted: list[Path] = []

    def mount(size: str = "1m", *options: str) -> Path:
        where = tmp_path / f"tmpfs-{len(mounted)}"
        where.mkdir()
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", ",".join((f"size={size}", *options)), "tmpfs",
                               str(where)], capture_output=True, text=True)
        if done.returncode != 0:
            pytest.skip(f"a full file system is a small tmpfs, and mount is not permitted here: "
                        f"{done.stderr.strip() or done.returncode}")
        mounted.append(where)
        return where

    yield mount
    for where in reversed(mounted):
        subprocess.run(["umount", "-l", str(where)], capture_output=True)  # lazy: a broker may hold a file


def fill(folder: Path, leave: int = 0) -> Path:
    """Fill the file system of ``folder`` until it refuses, then free ``leave`` bytes."""
    filler = folder / "filler"
    with open(filler, "wb", buffering=0) as f:
        try:
            while True:
                f.write(b"\0" * 65536)
        except OSError as exc:
            assert exc.errno == errno.ENOSPC
    if leave:
        os.truncate(filler, max(0, filler.stat().st_size - leave))
    return filler


@pytest.fixture
def dev_full():
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full on this machine")
    return Path("/dev/full")


@pytest.fixture
def watched(tmp_path):
    """A run directory whose write failures are recorded, as a runner watches its own."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    failures = watch(run_dir)
    yield run_dir, failures
    unwatch(run_dir)


def one_line(text: str) -> str:
    lines = text.strip().splitlines()
    assert len(lines) == 1, text
    assert "Traceback" not in text
    return lines[0]


def scenario_file(folder: Path, name: str = "disk") -> Path:
    path = folder / f"{name}.yaml"
    path.write_text(SCENARIO.format(name=name))
    return path


# -- the writers -------------------------------------------------------------------------------

def test_a_trace_on_a_full_disk_ends_on_its_last_whole_line_and_records_why(tmpfs):
    disk = tmpfs("256k")
    failures = watch(disk)
    try:
        writer = TraceWriter(disk, "run", "cc1", "cluster-controller", lambda: 0)
        writer.emit("life.start", target="cc1", target_kind="cluster-controller")
        filler = fill(disk, leave=4096)  # one page more: a long line fits in part only
        writer.emit("step", index=0, name="x" * 20_000, outcome="ok", detail="", line=1)  # does not raise
        path = disk / "trace" / "cc1.ndjson"
        assert path.read_bytes().endswith(b"\n") and [e["ev"] for e in read_events(path)] == ["life.start"]
        assert str(writer.failure) == f"cannot write {path}: {NO_SPACE}" and failures.failure == writer.failure
        filler.unlink()  # room again: the trace still writes nothing (no gap in the middle of it)
        writer.emit("life.stop", target="cc1", target_kind="cluster-controller")
        writer.close()
        assert [e["ev"] for e in read_events(path)] == ["life.start"]
    finally:
        unwatch(disk)


async def test_a_runtimes_batched_trace_that_cannot_be_written_never_raises_on_the_loop(watched, dev_full):
    run_dir, failures = watched
    (run_dir / "trace").mkdir()
    (run_dir / "trace" / "cc1.ndjson").symlink_to(dev_full)
    raised: list[dict] = []
    asyncio.get_running_loop().set_exception_handler(lambda loop, context: raised.append(context))
    writer = TraceWriter(run_dir, "run", "cc1", "cluster-controller", lambda: 0, batched=True)
    for _ in range(3):
        writer.emit("life.start", target="cc1", target_kind="cluster-controller")
    await asyncio.sleep(0)  # the turn's one write, at its end
    writer.close()
    assert raised == []
    assert failures.failure == WriteFailure(run_dir / "trace" / "cc1.ndjson", NO_SPACE)


@pytest.mark.parametrize("kind", ["outbox", "routes"])
def test_an_outbox_or_a_routing_table_store_on_a_full_disk_records_the_failure_and_goes_on(tmpfs, kind):
    disk = tmpfs("512k")
    failures = watch(disk)
    told: list[BaseException] = []
    try:
        path = disk / "state" / f"cc1.{kind}.sqlite"
        store = Outbox(path) if kind == "outbox" else RouteStore(path, group_commit=False, on_error=told.append)
        fill(disk)
        for n in range(2):  # not raised, the first time or after
            if kind == "outbox":
                store.put(OUTGOING, "gbid1", f"m{n}", "cc2", b"\1" * 200_000)
            else:
                from joynr_sim.core.address import MqttAddress
                from joynr_sim.core.routing import RoutingEntry

                store.put(f"p{n}-" + "x" * 100_000, RoutingEntry(MqttAddress("gbid1", "cc2"), True, 2**40), "gcd")
        assert failures.failure == WriteFailure(path, NO_SPACE) == store.failure
        assert kind == "outbox" or len(told) == 1  # the runtime still logs it (on_error)
        store.close()
    finally:
        unwatch(disk)


async def test_a_link_store_on_a_full_disk_records_the_failure_and_no_delivery_fails_for_it(tmpfs):
    disk = tmpfs("512k")
    failures = watch(disk)
    try:
        path = disk / "state" / "cc1.links.sqlite"
        path.parent.mkdir()
        store = SqliteLinkStore(path, synchronous="OFF", group_commit=True)
        store.save(StoredLink("sending", "gbid1", "cc1", Terminus("t", 2), (), "c1", "cc1"))
        fill(disk)
        for n in range(300):  # the unsettled deliveries of one turn, committed at its end
            store.put_unsettled("sending", "gbid1", "cc1", f"m{n}", "s" * 1000)
        await asyncio.sleep(0)
        store.put_unsettled("sending", "gbid1", "cc1", "next", None)  # the next delivery: not raised
        assert failures.failure == WriteFailure(path, NO_SPACE)
        # Saving a link still raises for the registry to make an event of it, with SQLite's
        # own reason (not a failed ROLLBACK of a transaction SQLite had already ended).
        with pytest.raises(LinkStoreError, match="database or disk is full"):
            store.save(StoredLink("sending", "gbid2", "cc1", Terminus("t" * 60_000, 2), (), "c1", "cc1"))
        store.close()
        json_path = disk / "state" / "cc1.links.json"
        with pytest.raises(LinkStoreError):
            JsonLinkStore(json_path)
    finally:
        unwatch(disk)


# -- the control protocol ------------------------------------------------------------------------

def test_a_hosts_write_failure_travels_in_its_answers_and_is_checked():
    assert OPS["write_failure"].__struct_fields__ == () and "write_failure" in QUERY_OPS  # no arguments
    from joynr_sim.host.rpc.framing import write_failure_of

    assert validate_request({"v": 1, "id": 1, "op": "write_failure", "args": {}})[1] == "write_failure"
    with pytest.raises(ProtocolError):
        validate_request({"v": 1, "id": 1, "op": "write_failure", "args": {"runtime": "cc1"}})
    answer = {"v": 1, "id": 3, "ok": True, "result": None,
              "write_failure": {"path": "/r/trace/cc1.ndjson", "reason": NO_SPACE}}
    assert validate_response(answer) == (3, True, None)
    assert str(write_failure_of(answer)) == f"cannot write /r/trace/cc1.ndjson: {NO_SPACE}"
    for bad in (None, {"path": "/r"}, {"path": 1, "reason": "x"}, {"path": "", "reason": "x"},
                {"path": "/r", "reason": "x", "more": 1}, {"path": "/r", "reason": "x" * 5000}):
        with pytest.raises(ProtocolError, match="write_failure"):
            validate_response({**answer, "write_failure": bad})


class _Frames:
    """What a host writes back, decoded."""

    def __init__(self) -> None:
        self.answers: list[dict] = []

    def write(self, data: bytes) -> None:
        self.answers.append(msgpack.unpackb(data[HEADER.size:], raw=False))

    async def drain(self) -> None:
        pass


async def test_a_host_whose_runtime_cannot_write_its_trace_says_so_in_every_answer(tmp_path, dev_full):
    run_dir = tmp_path / "run"
    (run_dir / "trace").mkdir(parents=True)
    (run_dir / "trace" / "app1.ndjson").symlink_to(dev_full)
    host = Host(SimClock())
    server = Server(host)
    frames = _Frames()
    spec = {"run_dir": str(run_dir), "run_id": "r", "policy": "precedence", "max_hops": 32, "seed": None,
            "incarnation": 0, "options": {}, "cc_id": "cc1", "token": None,
            "cc_address": {"_typeName": "joynr.system.RoutingTypes.WebSocketAddress", "protocol": "WS",
                           "host": "127.0.0.1", "port": 1, "path": "/"}}
    try:
        await server.answer(frames, {"v": 1, "id": 1, "op": "create", "args": {
            "runtime": "app1", "kind": "libjoynr", "spec": spec}}, query=False)
        assert "write_failure" not in frames.answers[-1]  # nothing written yet
        host.runtimes["app1"].emit("life.start", target="app1", target_kind="libjoynr")  # a turn's line
        await server.answer(frames, {"v": 1, "id": 2, "op": "advance", "args": {"offset_ms": 0}}, query=True)
        await server.answer(frames, {"v": 1, "id": 3, "op": "write_failure", "args": {}}, query=True)
        told = {"path": str(run_dir / "trace" / "app1.ndjson"), "reason": NO_SPACE}
        assert [a.get("write_failure") for a in frames.answers[1:]] == [told, told]
        assert frames.answers[-1]["result"] == told
    finally:
        for runtime in host.runtimes.values():
            host.close(runtime)
        unwatch(run_dir)


# -- a run ends on it ----------------------------------------------------------------------------

@pytest.mark.e2e
async def test_simulation_close_records_a_write_failure_and_does_not_raise(tmp_path, dev_full):
    sim = Simulation(tmp_path, gbids=["gbid1"], processes=False)
    try:
        await sim.start()
        cc1 = await sim.cluster_controller("cc1", ["gbid1"])
        app = await sim.libjoynr("app1", cc1)
        await app.register_provider("dom", "joynrsim/Echo", EchoProvider(), participant_id="echo")
        proxy = await app.create_proxy("joynrsim/Echo", "echo")
        # The disk fills up under the running controller: its trace's next write fails.
        cc1.trace._file = open(dev_full, "ab", buffering=0)
        assert await proxy.call("echo", "hi") == "hi"  # the message path goes on
    finally:
        await sim.close()  # stops, unregisters and closes with the failing trace: no OSError
    assert sim.write_failure == WriteFailure(tmp_path / "trace" / "cc1.ndjson", NO_SPACE)


@pytest.mark.e2e
async def test_a_write_failure_during_a_step_ends_the_run_after_that_step(tmp_path, dev_full):
    from joynr_sim.scenario import load_scenario
    from joynr_sim.scenario.runner import run_scenario

    scenario = load_scenario(scenario_file(tmp_path))
    run_dir = tmp_path / "runs" / scenario.name
    trace = run_dir / "trace" / "app1.ndjson"

    def on_step(outcome) -> None:
        if outcome.index == 0:  # app1's trace cannot be written from here on
            trace.unlink()
            trace.symlink_to(dev_full)

    result = await run_scenario(scenario, tmp_path / "runs", on_step=on_step)
    assert [s.outcome for s in result.steps] == ["ok", "ok", "skipped", "skipped"]
    assert (result.outcome, result.complete) == ("error", False)
    assert result.error == f"cannot write {trace}: {NO_SPACE}"
    manifest = json.loads((run_dir / "run.json").read_text())
    assert manifest["complete"] is False and manifest["outcome"] == "error"
    assert manifest["write_failure"] == {"path": str(trace), "reason": NO_SPACE}


@pytest.mark.e2e
def test_a_trace_that_fails_in_a_host_process_ends_joynr_sim_run_with_exit_3(tmp_path, dev_full, monkeypatch,
                                                                              capsys):
    import joynr_sim.scenario.runner as runner

    claim = runner.claim_run_dir

    def claim_with_a_full_trace(out_dir, name):  # cc1's trace, written only in its host, fails
        run_dir = claim(out_dir, name)
        (run_dir / "trace").mkdir()
        (run_dir / "trace" / "cc1.ndjson").symlink_to(dev_full)
        return run_dir

    monkeypatch.setattr(runner, "claim_run_dir", claim_with_a_full_trace)
    path = scenario_file(tmp_path)
    assert main(["run", str(path), "--out", str(tmp_path / "runs")]) == 3
    run_dir = tmp_path / "runs" / "disk"
    trace = run_dir / "trace" / "cc1.ndjson"
    line = one_line(capsys.readouterr().err)
    assert line.startswith("joynr-sim run: disk: ") and f"cannot write {trace}: {NO_SPACE}" in line
    manifest = json.loads((run_dir / "run.json").read_text())
    assert (manifest["complete"], manifest["outcome"]) == (False, "error")
    assert manifest["error"] == f"cannot write {trace}: {NO_SPACE}"
    assert [s["outcome"] for s in manifest["steps"]] == ["skipped"] * 4


def _run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "joynr_sim.cli", *args], capture_output=True, text=True,
                          timeout=300, cwd=Path(__file__).resolve().parent.parent)


@pytest.mark.e2e
@pytest.mark.parametrize("free", [0, 128 * 1024], ids=["full", "nearly-full"])
def test_joynr_sim_run_on_a_full_file_system_says_which_file_in_one_line(tmp_path, tmpfs, free):
    disk = tmpfs("1m")
    fill(disk, leave=free)
    done = _run_cli("run", str(scenario_file(tmp_path)), "--out", str(disk / "runs"))
    line = one_line(done.stderr)
    assert done.returncode == 3, done.stderr
    assert line.startswith("joynr-sim run: disk: cannot write ") and NO_SPACE in line
    if not free:  # not even run.json: nothing ran
        assert f"cannot write {disk / 'runs' / 'disk' / 'run.json'}: {NO_SPACE}" in line


# -- every command that writes output ---------------------------------------------------------------

@pytest.fixture
def unwritable(tmp_path, tmpfs):
    """Folders no command can create or write in: one under a file, one to be made on a
    read-only file system, and a read-only file system's own folder, which exists."""
    (tmp_path / "a-file").write_text("")
    read_only = tmpfs("64k", "ro")
    return {"under-a-file": tmp_path / "a-file" / "out", "read-only": read_only / "out",
            "read-only-folder": read_only}


@pytest.mark.parametrize("where", ["under-a-file", "read-only"])
def test_explore_with_an_out_it_cannot_write_says_so_in_one_line_before_anything_starts(unwritable, where,
                                                                                         capsys):
    out = unwritable[where]
    assert main(["explore", "--runs", "1", "--out", str(out)]) == 2
    line = one_line(capsys.readouterr().err)
    assert line.startswith(f"joynr-sim explore: --out {out}: cannot ")


@pytest.mark.parametrize("where", ["under-a-file", "read-only-folder"])
def test_check_with_an_out_it_cannot_write_says_so_before_spark_starts(tmp_path, unwritable, where, capsys):
    b = RunBuilder()
    b.add("runner", "step", 0, index=0, name="s", outcome="ok", detail="", line=1)
    run_dir = b.write(tmp_path / "runs")
    out = unwritable[where]
    assert main(["check", str(run_dir), "--out", str(out)]) == 2
    line = one_line(capsys.readouterr().err)
    assert line.startswith(f"error: --out {out}: ")


def _report_input(tmp_path: Path) -> Path:
    b = RunBuilder()
    b.add("runner", "step", 0, index=0, name="s", outcome="ok", detail="", line=1)
    return b.write(tmp_path / "runs")


def test_report_with_an_out_it_cannot_write_says_so_in_one_line(tmp_path, unwritable, capsys):
    out = unwritable["read-only-folder"]  # exists: only writing in it fails
    assert main(["report", str(_report_input(tmp_path)), "--out", str(out)]) == 2
    assert one_line(capsys.readouterr().err).startswith(f"joynr-sim report: --out {out}: cannot ")


def test_report_on_a_full_file_system_names_the_page_and_exits_3(tmp_path, tmpfs, capsys):
    disk = tmpfs("256k")
    out = disk / "report"
    out.mkdir()
    fill(disk)
    assert main(["report", str(_report_input(tmp_path)), "--out", str(out)]) == 3
    line = one_line(capsys.readouterr().err)
    assert line.startswith(f"joynr-sim report: cannot write {out}/") and line.endswith(NO_SPACE)
