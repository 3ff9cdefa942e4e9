"""A class data sharing archive of Spark's classes, for short local check runs.

A new JVM loads, parses and verifies some 20,000 classes, most of them Spark's, before and
while it checks anything (the JDK's own archive holds some 1,250 of them). The JVM can map
the classes an earlier run loaded from an archive instead (application class data
sharing, Java 13 and later): a short local check run with no archive starts its JVM with
``-XX:ArchiveClassesAtExit``, every later one maps the archive (``-XX:SharedArchiveFile``).

It lives in ``$XDG_CACHE_HOME/joynr-sim/jvm``, named by a key of the ``java`` Spark runs
(as ``bin/spark-class`` finds it) and Spark's jar folder, so another JVM or another Spark
gets an archive of its own instead of one the JVM would ignore. The JVM checks the rest
itself and ignores, with a warning, an archive made by another build or for other jars.

The JVM that writes the archive is left alone: pyspark's JVM exits when the Python process
that started it ends (EOF on its stdin), and dumps the archive then, under a temporary name.
Ending it early would leave pyspark's globals pointing at a dead JVM for every later
session in the process. Beside the temporary archive goes a record of its writer (pid and
start time, ``java`` and class path). A truncated archive is the one case the JVM does not
survive (Java 17 aborts at start), so a later run, before it starts Spark, commits a
temporary archive only once its writer is gone and a throwaway JVM maps it
(``-Xshare:on``): renamed into place with its size and modification time beside it. An
archive whose size or time differs from that record is deleted, not used.
``session.start`` starts Spark once more without the archive (and deletes it) if a JVM
given one does not come up.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from .atomic import write_atomic
from .cache import cache_root

FORMAT = "joynr-sim-class-archive/1"
_PREFIX = "spark-"
_WRITING = ".writing-"
_RECORDING = ".record-"
_CHECK_TIMEOUT_S = 30.0
_UNSAFE = " \t\n\"'\\"
_STALE_S = 24 * 3600  # a temporary file this old whose writer cannot be told belongs to no check


def archive_dir() -> Path:
    return cache_root() / "jvm"


def _java() -> Path | None:
    """The ``java`` that ``bin/spark-class`` runs: ``$JAVA_HOME/bin/java``, else the one on PATH."""
    home = os.environ.get("JAVA_HOME")
    found = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    if not found:
        return None
    path = Path(found).resolve()
    return path if path.is_file() else None


def _spark_jars() -> Path | None:
    from pyspark.find_spark_home import _find_spark_home

    try:
        jars = Path(_find_spark_home()) / "jars"
    except Exception:  # no Spark found: Spark's own start will say so
        return None
    return jars if jars.is_dir() else None


def _stat(path: Path) -> list:
    st = path.stat()
    return [str(path), st.st_size, st.st_mtime_ns]


def archive_key() -> str | None:
    """The key of this ``java`` and these Spark jars; None when either is not found."""
    java, jars = _java(), _spark_jars()
    if java is None or jars is None:
        return None
    try:
        parts = [FORMAT, _stat(java)]
        libjvm = java.parent.parent / "lib" / "server" / "libjvm.so"
        if libjvm.is_file():
            parts.append(_stat(libjvm))
        parts.append(sorted(_stat(p) for p in jars.iterdir() if p.suffix == ".jar"))
    except OSError:
        return None
    return hashlib.sha256(json.dumps(parts).encode("utf-8", "surrogateescape")).hexdigest()[:32]


def started(pid: int) -> int | None:
    """A live process's start time (clock ticks after boot, from /proc); None when it is gone
    or a zombie (its writing is over)."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    fields = text[text.rfind(")") + 2:].split()  # the name before ")" may hold blanks
    if len(fields) < 20 or fields[0] in ("Z", "X") or not fields[19].isdigit():
        return None
    return int(fields[19])


def cmdline(pid: int) -> list[str]:
    """A running process's arguments (the JVM's ``java`` and class path), [] if unknown."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return []
    return [part.decode("utf-8", "surrogateescape") for part in raw.split(b"\0") if part]


@dataclass
class ClassArchive:
    """The archive of one key: mapped if committed, else written by this run's JVM."""

    path: Path
    writing: Path | None = None  # the temporary file this run's JVM dumps to at exit

    @property
    def record(self) -> Path:
        return self.path.with_suffix(".json")

    def java_options(self) -> list[str]:
        if self.writing is not None:
            return [f"-XX:ArchiveClassesAtExit={self.writing}"]
        return [f"-XX:SharedArchiveFile={self.path}"]

    def writer_started(self, pid: int | None) -> None:
        """Records the JVM that dumps to ``writing`` as it exits, for the run that commits it."""
        if self.writing is None:
            return
        args = cmdline(pid) if pid else []
        record = {"format": FORMAT, "key": self.path.stem.removeprefix(_PREFIX),
                  "pid": pid, "start": started(pid) if pid else None, "java": args[0] if args else None,
                  "classpath": args[args.index("-cp") + 1] if "-cp" in args[:-1] else None}
        try:
            write_atomic(self.writing.with_suffix(".json"), json.dumps(record), prefix=_RECORDING)
        except OSError:  # unrecorded: its archive is never committed, and goes when stale
            pass

    def discard(self) -> None:
        """Forgets this archive (a JVM given it did not start): the next run writes a new one."""
        for p in (self.record, self.path):
            p.unlink(missing_ok=True)
        if self.writing is not None:
            self.writing.unlink(missing_ok=True)
            self.writing.with_suffix(".json").unlink(missing_ok=True)


def _maps(java: str, classpath: str, archive: Path) -> bool:
    """Whether a JVM with ``classpath`` maps ``archive`` (``-Xshare:on`` fails otherwise)."""
    try:
        done = subprocess.run(
            # A truncated archive aborts this JVM: its crash report and core go nowhere, not
            # into the caller's working folder.
            [java, f"-XX:SharedArchiveFile={archive}", "-Xshare:on", "-Xlog:disable", "-XX:ErrorFile=/dev/null",
             "-XX:-CreateCoredumpOnCrash", "-cp", classpath, "-version"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            timeout=_CHECK_TIMEOUT_S, check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return done.returncode == 0


def _committed(path: Path, record: Path) -> bool:
    """Whether ``path`` is the archive its record describes (same size and time)."""
    try:
        meta = json.loads(record.read_text(encoding="utf-8"))
        st = path.stat()
    except (OSError, ValueError):
        return False
    return (isinstance(meta, dict) and meta.get("format") == FORMAT
            and meta.get("size") == st.st_size and meta.get("mtime_ns") == st.st_mtime_ns)


def _writer(record: Path) -> dict | None:
    """A temporary archive's record of its writer, checked field by field; None if unusable."""
    try:
        meta = json.loads(record.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(meta, dict) or meta.get("format") != FORMAT or not isinstance(meta.get("key"), str):
        return None
    pid, start = meta.get("pid"), meta.get("start")
    if not (type(pid) is int and pid > 0 and type(start) is int):  # a writer that cannot be told
        return None
    for name in ("java", "classpath"):
        value = meta.get(name)
        if value is not None and not (isinstance(value, str) and value and "\0" not in value):
            return None
    return meta


def _writer_alive(meta: dict) -> bool:
    """Whether the JVM that dumps to a temporary archive may still be writing it: its pid is
    alive and started when the record says (a reused pid has another start time)."""
    return started(meta["pid"]) == meta["start"]


def writers(root: Path | None = None) -> list[tuple[int, int]]:
    """The JVMs (pid, start time) still to finish a temporary archive in the folder: a
    check's own JVM writes after its process has ended (the bench waits for it)."""
    folder = root if root is not None else archive_dir()
    metas = [_writer(record) for record in folder.glob(f"{_WRITING}*.json")]
    return [(m["pid"], m["start"]) for m in metas if m is not None and _writer_alive(m)]


def _verified(meta: dict, tmp: Path) -> bool:
    """Whether a finished temporary archive is whole: a throwaway JVM of the ``java`` the key
    names, with its writer's class path, maps it. Never the checking JVM: a truncated
    archive aborts Java 17."""
    java, classpath, ours = meta.get("java"), meta.get("classpath"), _java()
    if not java or not classpath or ours is None or not tmp.is_file():
        return False
    try:
        if Path(java).resolve() != ours:  # run only the java this key was made of
            return False
    except OSError:
        return False
    return _maps(str(ours), classpath, tmp)


def _settle(folder: Path, key: str) -> bool:
    """Commits the finished temporary archives of this key, deletes those that fail the
    check or belong to another key, leaves those still being written. True when a writer
    of this key is still alive."""
    path = folder / f"{_PREFIX}{key}.jsa"
    alive = False
    for record in sorted(folder.glob(f"{_WRITING}*.json")):
        tmp = record.with_suffix(".jsa")
        meta = _writer(record)
        if meta is None:  # unreadable, not yet written, or no writer known: judged by age only
            continue
        if _writer_alive(meta):
            alive = alive or meta["key"] == key
            continue
        try:
            if meta["key"] == key and not _committed(path, path.with_suffix(".json")) and _verified(meta, tmp):
                st = tmp.stat()
                write_atomic(path.with_suffix(".json"),
                             json.dumps({"format": FORMAT, "size": st.st_size, "mtime_ns": st.st_mtime_ns}),
                             prefix=_RECORDING)
                os.replace(tmp, path)
        except OSError:
            pass
        finally:  # committed, surplus, of another key, or not whole: its files go
            tmp.unlink(missing_ok=True)
            record.unlink(missing_ok=True)
    return alive


def _temporary(path: Path) -> bool:
    """A temporary archive or record of this module's naming."""
    return ((path.name.startswith(_WRITING) and path.suffix in (".jsa", ".json"))
            or (path.name.startswith(_RECORDING) and path.suffix == ".tmp"))


def _evict(keep: Path) -> None:
    """Deletes the archives of other keys (another JVM or Spark, since replaced) and
    temporary files a crash left behind: files this module names only."""
    now = time.time()
    for child in keep.parent.iterdir():
        try:
            if child.name.startswith(_PREFIX) and child.suffix in (".jsa", ".json") and child.stem != keep.stem:
                child.unlink(missing_ok=True)
            elif (_temporary(child) and now - child.stat().st_mtime > _STALE_S
                  and _writer(child.with_suffix(".json")) is None):
                child.unlink(missing_ok=True)  # one whose record reads is _settle's to judge
        except OSError:
            continue


def class_archive(root: Path | None = None) -> ClassArchive | None:
    """The archive a short local run maps, or writes when there is none; None when the
    cache folder cannot be used, the JVM or Spark's jars are not found, or another JVM is
    writing this key's archive (one writer at a time)."""
    key = archive_key()
    folder = root if root is not None else archive_dir()
    # Spark splits its JVM options at blanks and quotes; the writer's pid, start time and
    # class path, which the check before committing needs, are read from /proc.
    if key is None or any(ch in str(folder) for ch in _UNSAFE) or not Path("/proc/self/stat").is_file():
        return None
    try:
        folder.mkdir(parents=True, exist_ok=True)
        archive = ClassArchive(folder / f"{_PREFIX}{key}.jsa")
        writing = _settle(folder, key)
        _evict(archive.path)
        if _committed(archive.path, archive.record):
            return archive
        archive.discard()  # absent, or not as committed: never mapped
        if writing:
            return None
        # The record's name is the reservation; the JVM creates the archive beside it at exit.
        fd, record = tempfile.mkstemp(prefix=_WRITING, suffix=".json", dir=folder)
        os.close(fd)
    except OSError:
        return None
    archive.writing = Path(record).with_suffix(".jsa")
    return archive
