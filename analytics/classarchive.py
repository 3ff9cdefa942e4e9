"""A class data sharing archive of Spark's classes, for short local check runs.

A new JVM loads, parses and verifies some 20,000 classes, most of them Spark's, before and
while it checks anything (the JDK's own archive holds some 1,250 of them). The JVM can map
the classes an earlier run loaded from an archive instead (application class data
sharing, Java 13 and later): the first short local check run writes one as its JVM exits
(``-XX:ArchiveClassesAtExit``), every later one maps it (``-XX:SharedArchiveFile``). Demo
library, cold, 2 cores at load 4-7: Spark's start 8-9.5 -> 4-5 s, the reading pass 20.5 ->
15.5 s, the JVM's CPU 55-57 -> 44-45 s.

It lives in ``$XDG_CACHE_HOME/joynr-sim/jvm``, named by a key of the ``java`` Spark runs
(as ``bin/spark-class`` finds it) and Spark's jar folder, so another JVM or another Spark
gets an archive of its own instead of one the JVM would ignore. The JVM checks the rest
itself and ignores, with a warning, an archive made by another build or for other jars.

A truncated archive is the one case the JVM does not survive (Java 17 aborts at start),
so an archive is used only as committed: written under a temporary name by a JVM that
exited with status 0, mapped by a second JVM that must accept it (``-Xshare:on``), then
renamed into place with its size and modification time beside it; an archive whose size
or time differs from that record is deleted, not used. ``session.start`` starts Spark once
more without the archive (and deletes it) if a JVM given one does not come up.
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

from .cache import cache_root

FORMAT = "joynr-sim-class-archive/1"
_PREFIX = "spark-"
_WRITING = ".writing-"
_CHECK_TIMEOUT_S = 30.0
_UNSAFE = " \t\n\"'\\"
_STALE_S = 24 * 3600  # a temporary archive this old belongs to no running check


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

    def discard(self) -> None:
        """Forgets this archive (a JVM given it did not start): the next run writes a new one."""
        for p in (self.record, self.path, self.writing):
            if p is not None:
                p.unlink(missing_ok=True)

    def commit(self, returncode: int | None, java: str | None, classpath: str | None) -> bool:
        """Renames the archive the JVM wrote into place, if that JVM exited with 0 and a
        second JVM maps it; otherwise deletes it. True when committed."""
        tmp, self.writing = self.writing, None
        if tmp is None:
            return False
        try:
            if returncode != 0 or not java or not classpath or not tmp.is_file() or not _maps(java, classpath, tmp):
                return False
            st = tmp.stat()
            record = {"format": FORMAT, "size": st.st_size, "mtime_ns": st.st_mtime_ns}
            _write_atomic(self.record, json.dumps(record))
            os.replace(tmp, self.path)
            _evict(self.path)
            return True
        except OSError:
            return False
        finally:
            tmp.unlink(missing_ok=True)


def _maps(java: str, classpath: str, archive: Path) -> bool:
    """Whether a JVM with ``classpath`` maps ``archive`` (``-Xshare:on`` fails otherwise)."""
    try:
        done = subprocess.run(
            [java, f"-XX:SharedArchiveFile={archive}", "-Xshare:on", "-Xlog:disable", "-cp", classpath, "-version"],
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


def _write_atomic(path: Path, text: str) -> None:
    fd, tmp = tempfile.mkstemp(prefix=".record-", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _evict(keep: Path) -> None:
    """Deletes the archives of other keys (another JVM or Spark, since replaced) and
    temporary ones a crash left behind: files this module names only."""
    now = time.time()
    for child in keep.parent.iterdir():
        try:
            if child.name.startswith(_PREFIX) and child.suffix in (".jsa", ".json") and child.stem != keep.stem:
                child.unlink(missing_ok=True)
            elif child.name.startswith(_WRITING) and now - child.stat().st_mtime > _STALE_S:
                child.unlink(missing_ok=True)
        except OSError:
            continue


def class_archive(root: Path | None = None) -> ClassArchive | None:
    """The archive a short local run maps, or writes when there is none; None when the
    cache folder cannot be used or the JVM or Spark's jars are not found."""
    key = archive_key()
    folder = root if root is not None else archive_dir()
    # Spark splits its JVM options at blanks and quotes; the class path of the JVM that
    # wrote an archive, which the check before committing needs, is read from /proc.
    if key is None or any(ch in str(folder) for ch in _UNSAFE) or not Path("/proc/self/cmdline").is_file():
        return None
    try:
        folder.mkdir(parents=True, exist_ok=True)
        archive = ClassArchive(folder / f"{_PREFIX}{key}.jsa")
        if _committed(archive.path, archive.record):
            return archive
        archive.discard()  # absent, or not as committed: never mapped
        fd, tmp = tempfile.mkstemp(prefix=_WRITING, suffix=".jsa", dir=folder)
        os.close(fd)
        os.unlink(tmp)  # the JVM creates it at exit; the unique name is what is kept
    except OSError:
        return None
    archive.writing = Path(tmp)
    return archive
