"""Where a run directory is: a path, or a filesystem URL that names one.

The simulator and the checker both take a run directory as a plain path or as a ``file:``
URL (``file:///shared/runs``, ``file://localhost/shared/runs``); the hosts of a run spread
over machines write their traces there, and ``joynr-sim check`` reads the same URL.

What a run directory needs decides which URLs name one: every runtime appends its trace a
line at a time as it goes (a killed host loses at most its last unflushed line), so the
file system must append; and the checks read the traces with Spark's own readers on every
executor, so every host and every executor must see it at the same path. A local disk, or a
shared mount (NFS, a bucket mounted with mountpoint-s3 or s3fs-fuse) does both. An object
store named directly (``s3://``, ``gs://``, ...) does neither: an object is written whole,
never appended to, and the Spark here has no reader for it (pyspark's jars hold no
hadoop-aws). Such a URL is refused with that reason, not half supported.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from urllib.parse import SplitResult, unquote, urlsplit

_LOCAL_HOSTS = ("", "localhost")
# what a user gives for an object store: refused with the reason (a mount works instead)
_OBJECT_STORES = ("s3", "s3a", "s3n", "gs", "gcs", "az", "abfs", "abfss", "wasb", "wasbs", "hdfs", "http", "https")


class RunLocationError(ValueError):
    """The text names no run directory this machine can write and Spark can read."""


def run_location(text: str | os.PathLike[str]) -> Path:
    """The run directory ``text`` names: a path as given, or the path of a ``file:`` URL."""
    if isinstance(text, os.PathLike):
        return Path(text)
    if "\0" in text:
        raise RunLocationError(f"{text!r}: a run directory's name holds no NUL character")
    try:
        parts = urlsplit(text)
    except ValueError as exc:  # e.g. an unclosed "[" in a URL's host
        raise RunLocationError(f"{text}: not a path nor a file URL ({exc})") from None
    scheme = parts.scheme.lower()
    if len(scheme) < 2:  # no scheme, or a drive letter: a path
        return Path(text)
    if scheme == "file":
        return _file_url(text, parts)
    if scheme in _OBJECT_STORES:
        raise RunLocationError(
            f"{text}: traces are appended a line at a time and read by Spark's own readers, which an "
            "object store named by URL does not allow here; mount it (mountpoint-s3, s3fs-fuse, NFS) "
            "and give the mount's path or file:// URL")
    if text[len(scheme) + 1:].startswith("//"):
        raise RunLocationError(f"{text}: not a file system a run can use (a path or a file:// URL)")
    return Path(text)  # "name:with-a-colon" is a path


def _file_url(text: str, parts: SplitResult) -> Path:
    if parts.query or parts.fragment:
        raise RunLocationError(f"{text}: a file URL of a run directory has no query or fragment")
    if parts.netloc.lower() not in _LOCAL_HOSTS:
        raise RunLocationError(
            f"{text}: names host {parts.netloc!r}; a file URL names this machine's file system "
            "(file:///path): mount the other machine's folder and give the mount's path")
    path = unquote(parts.path)
    if not path.startswith("/"):
        raise RunLocationError(f"{text}: a file URL's path is absolute (file:///path)")
    if "\0" in path:
        raise RunLocationError(f"{text}: a run directory's name holds no NUL character")
    return Path(path)


def run_location_arg(text: str) -> Path:
    """``run_location`` as an argparse type: a refused URL is the option's error, with why."""
    try:
        return run_location(text)
    except RunLocationError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
