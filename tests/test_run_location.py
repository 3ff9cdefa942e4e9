"""A run directory named as a path or a file:// URL (``trace_schema.run_location``): what
names one, what is refused and why, and that run, check, trace and report all take it."""

from __future__ import annotations

from pathlib import Path

import pytest

from analytics.inputs import InputError, find_runs
from joynr_sim.cli import main
from joynr_sim.simulation import Simulation
from trace_schema.run_location import RunLocationError, run_location

ROOT = Path(__file__).resolve().parent.parent
SCENARIO = ROOT / "scenarios" / "cc-refuses-route-to-own-topic.yaml"


@pytest.mark.parametrize(("text", "path"), [
    ("runs", "runs"),
    ("/abs/runs", "/abs/runs"),
    ("file:///shared/runs", "/shared/runs"),
    ("file://localhost/shared/runs", "/shared/runs"),
    ("FILE:///shared/runs", "/shared/runs"),
    ("file:/shared/runs", "/shared/runs"),
    ("file:///shared/my%20runs/r%2A", "/shared/my runs/r*"),  # decoded, then a glob for check
    ("name:with-a-colon", "name:with-a-colon"),  # no "//": a relative path
    ("C:/runs", "C:/runs"),  # a drive letter is no scheme
])
def test_a_path_or_a_file_url_names_a_run_directory(text, path) -> None:
    assert run_location(text) == Path(path)


@pytest.mark.parametrize(("text", "why"), [
    ("s3://bucket/runs", "object store named by URL"),
    ("gs://bucket/runs", "object store named by URL"),
    ("hdfs://nn:8020/runs", "object store named by URL"),
    ("ftp://host/runs", "not a file system a run can use"),
    ("file://other-host/runs", "names host 'other-host'"),
    ("file:relative/runs", "absolute"),
    ("file:///runs?x=1", "no query or fragment"),
    ("file:///runs#top", "no query or fragment"),
    ("file:///runs%00x", "no NUL"),
    ("runs\0x", "no NUL"),
    ("file://[::1/runs", "not a path nor a file URL"),
])
def test_what_names_no_run_directory_is_refused_with_why(text, why) -> None:
    with pytest.raises(RunLocationError, match=why.replace("?", r"\?")):
        run_location(text)


def test_run_writes_under_a_file_url_and_check_finds_it_there(tmp_path, capsys) -> None:
    url = (tmp_path / "shared runs").as_uri()
    assert main(["run", str(SCENARIO), "--network", "memory", "--seed", "1", "--out", url]) == 0
    run = tmp_path / "shared runs" / SCENARIO.stem
    assert (run / "run.json").is_file() and any((run / "trace").glob("*.ndjson"))
    assert [r.dir for r in find_runs([f"{url}/{SCENARIO.stem}"])] == [run]
    assert [r.dir for r in find_runs([f"{url}/cc-*"])] == [run]  # a glob in a URL's path
    capsys.readouterr()
    assert main(["trace", f"{url}/{SCENARIO.stem}", "--json"]) == 0
    assert capsys.readouterr().out.startswith("{")
    assert main(["report", f"{url}/{SCENARIO.stem}", "--out", (tmp_path / "pages").as_uri()]) == 0
    assert (tmp_path / "pages" / "index.html").is_file()


def test_an_object_store_url_is_refused_by_every_command_before_anything_is_written(tmp_path, capsys,
                                                                                       monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)  # where a URL taken for a relative path would be made
    with pytest.raises(SystemExit) as exit_:
        main(["run", str(SCENARIO), "--network", "memory", "--out", "s3://bucket/runs"])
    assert exit_.value.code == 2
    assert "s3://bucket/runs: traces are appended a line at a time" in capsys.readouterr().err
    with pytest.raises(InputError, match="object store"):
        find_runs(["s3://bucket/runs"])
    assert main(["check", "s3://bucket/runs"]) == 2
    with pytest.raises(RunLocationError):
        Simulation("s3://bucket/runs", gbids=["gbid1"])
    assert list(tmp_path.iterdir()) == []
