"""The class archive of short local check runs: written once, used only as committed, and
never able to break a check (a truncated archive aborts Java 17 at start)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from analytics import classarchive
from analytics_helpers import RunBuilder, wire

ROOT = Path(__file__).resolve().parent.parent
PATH = [("lib-1", "ws"), ("cc-1", "mqtt"), ("cc-2", "ws"), ("lib-2", "ws")]


@pytest.fixture
def install(tmp_path, monkeypatch) -> Path:
    """A stand-in ``java`` and Spark jar folder: the key is made of their files."""
    java = tmp_path / "jdk" / "bin" / "java"
    java.parent.mkdir(parents=True)
    java.write_text("#!/bin/sh\n")
    jars = tmp_path / "jars"
    jars.mkdir()
    (jars / "spark-core.jar").write_bytes(b"classes")
    monkeypatch.setattr(classarchive, "_java", lambda: java)
    monkeypatch.setattr(classarchive, "_spark_jars", lambda: jars)
    return jars


def _committed(folder: Path, maps: bool = True, monkeypatch=None) -> classarchive.ClassArchive:
    archive = classarchive.class_archive(folder)
    assert archive is not None and archive.writing is not None
    archive.writing.write_bytes(b"archive" * 100)  # what the JVM dumps as it exits
    monkeypatch.setattr(classarchive, "_maps", lambda java, cp, path: maps)
    return archive


def test_the_first_run_writes_the_archive_the_next_maps(tmp_path, install, monkeypatch):
    folder = tmp_path / "cache"
    archive = _committed(folder, monkeypatch=monkeypatch)
    (writing,) = archive.java_options()
    assert writing == f"-XX:ArchiveClassesAtExit={archive.writing}"
    assert archive.writing.parent == folder and archive.writing != archive.path
    assert archive.commit(0, "java", "cp")
    again = classarchive.class_archive(folder)
    assert again.writing is None
    assert again.java_options() == [f"-XX:SharedArchiveFile={archive.path}"]
    assert sorted(p.name for p in folder.iterdir()) == sorted([archive.path.name, archive.record.name])


@pytest.mark.parametrize("returncode, maps", [(1, True), (None, True), (0, False)])
def test_an_archive_is_not_committed_unless_its_jvm_exited_0_and_another_maps_it(
        tmp_path, install, monkeypatch, returncode, maps):
    folder = tmp_path / "cache"
    archive = _committed(folder, maps=maps, monkeypatch=monkeypatch)
    assert not archive.commit(returncode, "java", "cp")
    assert list(folder.iterdir()) == []  # the temporary file is gone too
    assert classarchive.class_archive(folder).writing is not None


def test_an_archive_that_is_not_as_committed_is_deleted_not_mapped(tmp_path, install, monkeypatch):
    folder = tmp_path / "cache"
    archive = _committed(folder, monkeypatch=monkeypatch)
    assert archive.commit(0, "java", "cp")
    with open(archive.path, "r+b") as f:
        f.truncate(100)  # a truncated archive aborts Java 17 at start: never handed to it
    again = classarchive.class_archive(folder)
    assert again.writing is not None
    assert not archive.path.exists() and not archive.record.exists()


def test_another_spark_gets_an_archive_of_its_own_and_the_old_one_goes(tmp_path, install, monkeypatch):
    folder = tmp_path / "cache"
    old = _committed(folder, monkeypatch=monkeypatch)
    assert old.commit(0, "java", "cp")
    (install / "spark-core.jar").write_bytes(b"other classes")
    new = _committed(folder, monkeypatch=monkeypatch)
    assert new.path != old.path
    assert new.commit(0, "java", "cp")
    assert sorted(p.name for p in folder.iterdir()) == sorted([new.path.name, new.record.name])


def test_an_unusable_cache_folder_means_no_archive(tmp_path, install):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    assert classarchive.class_archive(blocker / "jvm") is None


def test_a_jvm_refuses_to_map_what_is_no_archive(tmp_path):
    java = shutil.which("java")
    assert java, "Spark needs java on PATH"
    junk = tmp_path / "junk.jsa"
    junk.write_bytes(os.urandom(4096))
    assert not classarchive._maps(java, str(tmp_path), junk)
    assert not classarchive._maps(java, str(tmp_path), tmp_path / "missing.jsa")


@pytest.mark.parametrize("keep", [True, False])
def test_a_jvm_writing_the_archive_is_asked_to_exit_unless_the_check_was_interrupted(
        tmp_path, install, monkeypatch, keep):
    """Asked: its stdin closes and it exits as it writes the archive. Interrupted: it is
    killed rather than waited for, and what it wrote is deleted."""
    from pyspark import SparkContext

    from analytics import session

    archive = classarchive.class_archive(tmp_path / "cache")
    archive.writing.write_bytes(b"partial")
    proc = subprocess.Popen(["cat"], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL)

    class Gateway:
        def close(self) -> None:
            pass

    gateway = Gateway()
    gateway.proc = proc
    monkeypatch.setattr(SparkContext, "_gateway", gateway)
    monkeypatch.setattr(classarchive, "_maps", lambda java, cp, path: False)  # cat is no JVM
    session._end_jvm_writing(archive, keep)
    assert proc.returncode == (0 if keep else -signal.SIGKILL)
    assert SparkContext._gateway is None
    assert list((tmp_path / "cache").iterdir()) == []


def _run(root: Path) -> Path:
    b = RunBuilder("clean")
    t = wire(b, "q1", PATH, 10, corr="c1")
    wire(b, "r1", list(reversed(PATH)), t, type_="rp", corr="c1")
    return b.write(root)


def _check(env: dict, run_dir: Path, out: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "joynr_sim.cli", "check", str(run_dir), "--no-cache",
                           "--out", str(out)], env=env, capture_output=True, text=True, timeout=600, cwd=ROOT)


@pytest.mark.spark
def test_a_check_writes_the_archive_once_and_survives_a_broken_one(tmp_path):
    env = dict(os.environ, XDG_CACHE_HOME=str(tmp_path / "xdg"), PYTHONPATH=str(ROOT),
               SPARK_LOCAL_IP="127.0.0.1")
    run_dir = _run(tmp_path / "runs")
    first = _check(env, run_dir, tmp_path / "out-1")
    assert first.returncode == 0, first.stderr
    assert "saving Spark's classes" in first.stderr
    folder = tmp_path / "xdg" / "joynr-sim" / "jvm"
    (archive,) = folder.glob("spark-*.jsa")
    record = archive.with_suffix(".json")
    assert json.loads(record.read_text())["size"] == archive.stat().st_size
    # A truncated archive its record vouches for: the JVM given it aborts; the check starts
    # Spark again without it, passes, and the archive is gone.
    archive.chmod(0o600)
    with open(archive, "r+b") as f:
        f.truncate(archive.stat().st_size // 2)
    st = archive.stat()
    record.write_text(json.dumps({"format": classarchive.FORMAT, "size": st.st_size, "mtime_ns": st.st_mtime_ns}))
    second = _check(env, run_dir, tmp_path / "out-2")
    assert second.returncode == 0, second.stderr
    assert "saving Spark's classes" not in second.stderr
    assert list(folder.iterdir()) == []
    report = json.loads((tmp_path / "out-2" / "report.json").read_text())
    assert report["violations"] == 0 and report["input"]["events"] > 0


def test_a_cache_folder_with_a_blank_in_its_path_means_no_archive(tmp_path, install):
    """Spark splits the JVM's options at blanks: the option would name another file."""
    assert classarchive.class_archive(tmp_path / "my cache" / "jvm") is None
    assert classarchive.class_archive(tmp_path / "cache" / "jvm") is not None
