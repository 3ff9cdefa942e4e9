"""The class archive of short local check runs: written by a JVM left alone until its
process ends, committed by a later run once its writer is gone and a throwaway JVM maps
it, and never able to break a check or a later session (a truncated archive aborts Java 17
at start; ending pyspark's JVM early broke every later session in the process)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from analytics import classarchive
from analytics_helpers import RunBuilder, wire

ROOT = Path(__file__).resolve().parent.parent
PATH = [("lib-1", "ws"), ("cc-1", "mqtt"), ("cc-2", "ws"), ("lib-2", "ws")]
DAY_AGO = time.time() - 2 * 24 * 3600


@pytest.fixture
def install(tmp_path, monkeypatch) -> Path:
    """A stand-in Spark jar folder (the key is made of its files) and this ``sh`` as the
    ``java`` whose writer records are believed."""
    jars = tmp_path / "jars"
    jars.mkdir()
    (jars / "spark-core.jar").write_bytes(b"classes")
    monkeypatch.setattr(classarchive, "_java", lambda: Path(shutil.which("sh")).resolve())
    monkeypatch.setattr(classarchive, "_spark_jars", lambda: jars)
    return jars


@pytest.fixture
def maps(monkeypatch) -> list:
    """Stands in for the throwaway JVM: records what it was asked to map, and accepts it."""
    asked: list = []

    def fake(java, classpath, archive):
        asked.append((java, classpath, archive))
        return archive.read_bytes().startswith(b"archive")

    monkeypatch.setattr(classarchive, "_maps", fake)
    return asked


def _writer() -> subprocess.Popen:
    """A process whose command line reads like the JVM's (java, -cp, class path); it lives
    until its stdin closes, as pyspark's JVM does."""
    proc = subprocess.Popen([shutil.which("sh"), "-c", "echo up; read line", "sh", "-cp", "the-classpath"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert proc.stdout.readline() == b"up\n"  # its command line is sh's now, no longer Python's
    return proc


def _end(proc: subprocess.Popen) -> None:
    proc.stdin.close()
    proc.wait()
    if proc.stdout is not None:
        proc.stdout.close()


def _names(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


def test_an_archive_is_committed_once_its_writer_is_gone_and_mapped_then(tmp_path, install, maps):
    folder = tmp_path / "cache"
    archive = classarchive.class_archive(folder)
    assert archive.java_options() == [f"-XX:ArchiveClassesAtExit={archive.writing}"]
    assert archive.writing.parent == folder and archive.writing != archive.path
    proc = _writer()
    try:
        archive.writer_started(proc.pid)
        archive.writing.write_bytes(b"archive" * 100)  # what the JVM dumps as it exits
        # Its writer is alive: left alone, and no second writer of the same key meanwhile.
        assert classarchive.class_archive(folder) is None
        assert archive.writing.is_file() and maps == []
        assert classarchive.writers(folder) == [(proc.pid, classarchive.started(proc.pid))]
    finally:
        _end(proc)
    again = classarchive.class_archive(folder)
    assert again.writing is None
    assert again.java_options() == [f"-XX:SharedArchiveFile={archive.path}"]
    assert maps == [(str(Path(shutil.which("sh")).resolve()), "the-classpath",
                     archive.writing)]
    assert _names(folder) == sorted([archive.path.name, archive.record.name])


def test_a_reused_pid_is_no_writer(tmp_path, install, maps):
    folder = tmp_path / "cache"
    archive = classarchive.class_archive(folder)
    archive.writer_started(os.getpid())
    record = archive.writing.with_suffix(".json")
    meta = json.loads(record.read_text())
    meta.update(start=meta["start"] - 1, java=str(Path(shutil.which("sh")).resolve()), classpath="cp")
    record.write_text(json.dumps(meta))
    archive.writing.write_bytes(b"archive")
    assert classarchive.class_archive(folder).writing is None  # committed: this pid started later


def test_a_truncated_temporary_archive_is_deleted_never_mapped(tmp_path, install, maps):
    folder = tmp_path / "cache"
    archive = classarchive.class_archive(folder)
    proc = _writer()
    archive.writer_started(proc.pid)
    _end(proc)
    archive.writing.write_bytes(b"trunc")  # the throwaway JVM refuses it
    again = classarchive.class_archive(folder)
    assert again.writing is not None and again.writing != archive.writing
    assert len(maps) == 1
    assert not archive.writing.exists() and not archive.writing.with_suffix(".json").exists()
    assert not archive.path.exists()


def test_a_record_naming_another_java_is_not_run(tmp_path, install, maps):
    folder = tmp_path / "cache"
    archive = classarchive.class_archive(folder)
    proc = _writer()
    archive.writer_started(proc.pid)
    _end(proc)
    record = archive.writing.with_suffix(".json")
    record.write_text(json.dumps(dict(json.loads(record.read_text()), java=shutil.which("cat"))))
    archive.writing.write_bytes(b"archive")
    assert classarchive.class_archive(folder).writing is not None
    assert maps == [] and not archive.writing.exists()


def test_files_the_module_did_not_name_are_never_deleted(tmp_path, install, maps):
    folder = tmp_path / "cache"
    folder.mkdir()
    foreign = ["notes.txt", "other.jsa", "spark-notes.txt", ".writing-x.txt", ".record-x.json", "spark"]
    for name in foreign:
        (folder / name).write_text("mine")
        os.utime(folder / name, (DAY_AGO, DAY_AGO))
    stale = [".writing-old.json", ".writing-old.jsa", ".writing-lone.jsa", ".record-old.tmp"]
    for name in stale:  # what a crash a day ago left: no record that tells a writer
        (folder / name).write_text("")
        os.utime(folder / name, (DAY_AGO, DAY_AGO))
    (folder / ".writing-new.json").write_text("")  # being recorded right now: left alone
    archive = classarchive.class_archive(folder)
    archive.writing.write_bytes(b"archive")
    assert _names(folder) == sorted(foreign + [".writing-new.json", archive.writing.name,
                                               archive.writing.with_suffix(".json").name])


def test_another_keys_archives_go_once_their_writer_is_gone(tmp_path, install, maps):
    folder = tmp_path / "cache"
    old = classarchive.class_archive(folder)
    proc = _writer()
    old.writer_started(proc.pid)
    old.writing.write_bytes(b"archive")
    (install / "spark-core.jar").write_bytes(b"other classes")
    new = classarchive.class_archive(folder)  # another key: its own writer, the old one kept
    assert new.writing is not None and new.path != old.path and old.writing.is_file()
    _end(proc)
    new.discard()
    newer = classarchive.class_archive(folder)
    assert not old.writing.exists() and maps == []
    assert _names(folder) == sorted([newer.writing.with_suffix(".json").name])


def test_an_archive_that_is_not_as_committed_is_deleted_not_mapped(tmp_path, install, maps):
    folder = tmp_path / "cache"
    archive = classarchive.class_archive(folder)
    proc = _writer()
    archive.writer_started(proc.pid)
    _end(proc)
    archive.writing.write_bytes(b"archive" * 100)
    assert classarchive.class_archive(folder).writing is None
    with open(archive.path, "r+b") as f:
        f.truncate(100)  # a truncated archive aborts Java 17 at start: never handed to it
    again = classarchive.class_archive(folder)
    assert again.writing is not None
    assert not archive.path.exists() and not archive.record.exists()


def test_an_unusable_cache_folder_means_no_archive(tmp_path, install):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    assert classarchive.class_archive(blocker / "jvm") is None


def test_a_cache_folder_with_a_blank_in_its_path_means_no_archive(tmp_path, install):
    """Spark splits the JVM's options at blanks: the option would name another file."""
    assert classarchive.class_archive(tmp_path / "my cache" / "jvm") is None
    assert classarchive.class_archive(tmp_path / "cache" / "jvm") is not None


def test_a_jvm_refuses_to_map_what_is_no_archive(tmp_path):
    java = shutil.which("java")
    assert java, "Spark needs java on PATH"
    junk = tmp_path / "junk.jsa"
    junk.write_bytes(os.urandom(4096))
    assert not classarchive._maps(java, str(tmp_path), junk)
    assert not classarchive._maps(java, str(tmp_path), tmp_path / "missing.jsa")


def _run(root: Path) -> Path:
    b = RunBuilder("clean")
    t = wire(b, "q1", PATH, 10, corr="c1")
    wire(b, "r1", list(reversed(PATH)), t, type_="rp", corr="c1")
    return b.write(root)


# Two checks in one process, the first writing the archive, then a session of its own.
TWO_CHECKS = """
import sys
from pyspark.sql import SparkSession
from joynr_sim.cli import main
run, out = sys.argv[1], sys.argv[2]
codes = [main(["check", run, "--no-cache", "--out", f"{out}-{i}"]) for i in (1, 2)]
spark = SparkSession.builder.master("local[1]").getOrCreate()
print(*codes, spark.range(3).count())
"""

# A short local session: its JVM's command line, and whether it writes an archive.
SESSION = """
import json, sys
from pathlib import Path
from analytics.classarchive import cmdline
from analytics.session import start
h = start("local[1]", work_dir=Path(sys.argv[1]), short_run=True)
print(json.dumps({"pid": h.jvm_pid, "args": cmdline(h.jvm_pid), "writing": h.archive is not None,
                  "count": h.spark.range(3).count()}))
"""


def _python(env: dict, *args: str) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, *args], env=env, capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    return done


def _wait_gone(pid: int, start: int, deadline_s: float = 300.0) -> None:
    """Waits for a JVM this test cannot reap (its parent has exited) to finish exiting."""
    end = time.monotonic() + deadline_s
    while classarchive.started(pid) == start:
        assert time.monotonic() < end, f"JVM {pid} still running after {deadline_s} s"
        time.sleep(0.2)


@pytest.mark.spark
def test_a_check_writing_the_archive_leaves_its_process_working_and_the_next_maps_it(tmp_path):
    env = dict(os.environ, XDG_CACHE_HOME=str(tmp_path / "xdg"), PYTHONPATH=str(ROOT),
               SPARK_LOCAL_IP="127.0.0.1")
    env.pop("JDK_JAVA_OPTIONS", None)
    folder = tmp_path / "xdg" / "joynr-sim" / "jvm"
    run_dir = _run(tmp_path / "runs")

    # The check that writes the archive leaves its JVM to the later sessions of its process
    # (ending it early, to commit the archive at once, broke them in the test suite).
    done = _python(env, "-c", TWO_CHECKS, str(run_dir), str(tmp_path / "out"))
    assert done.stdout.split()[-3:] == ["0", "0", "3"], done.stderr
    assert done.stderr.count("saves its classes") == 1
    (record,) = folder.glob(".writing-*.json")
    writer = json.loads(record.read_text())
    _wait_gone(writer["pid"], writer["start"])  # it dumps the archive as its process ends
    assert record.with_suffix(".jsa").stat().st_size > 0

    # The next run commits it, and its JVM maps Spark's classes from it.
    work = tmp_path / "work"
    work.mkdir()
    env_log = dict(env, JDK_JAVA_OPTIONS=f"-Xlog:class+load=info:file={tmp_path}/load-%p.txt")
    seen = json.loads(_python(env_log, "-c", SESSION, str(work)).stdout.splitlines()[-1])
    (archive,) = folder.glob("spark-*.jsa")
    assert seen["count"] == 3 and not seen["writing"]
    assert f"-XX:SharedArchiveFile={archive}" in seen["args"]
    loaded = (tmp_path / f"load-{seen['pid']}.txt").read_text()
    assert "org.apache.spark.SparkContext source: shared objects file (top)" in loaded
    assert _names(folder) == sorted([archive.name, archive.with_suffix(".json").name])

    # A truncated temporary archive whose writer is gone is deleted, never mapped.
    tmp = folder / ".writing-cut.jsa"
    with open(archive, "rb") as src, open(tmp, "wb") as dst:
        dst.write(src.read(archive.stat().st_size // 2))
    tmp.with_suffix(".json").write_text(json.dumps(writer))
    archive.unlink()
    archive.with_suffix(".json").unlink()
    crashes = set(Path.cwd().glob("hs_err_pid*.log"))
    fresh = classarchive.class_archive(folder)  # this java, these jars: the same key
    assert fresh is not None and fresh.writing is not None
    assert set(Path.cwd().glob("hs_err_pid*.log")) == crashes  # the check's JVM leaves no report here
    assert not tmp.exists() and not tmp.with_suffix(".json").exists() and not archive.exists()
    fresh.discard()
