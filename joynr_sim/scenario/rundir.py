"""Which folder a run may write into, and which it may replace.

``joynr-sim run --out DIR`` writes ``DIR/<scenario name>/``. Such a folder is replaced only
when it is a run directory joynr-sim wrote: a real folder (not a symbolic link) holding a
``run.json`` that says ``"generator": "joynr-sim"`` and names its run. Anything else there
(a user's folder, a file, a link, someone else's ``run.json``) is refused with one line
saying which folder and why, and left as it was. So is a run directory that holds anything
joynr-sim does not write there (a user's notes, an analysis folder): replacing the run
would delete it.

A new run directory is readable by its owner only: it holds the brokers' password and,
with external brokers, traces of what went over them.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

MANIFEST = "run.json"
GENERATOR = "joynr-sim"
MAX_MANIFEST_BYTES = 16 * 1024 * 1024  # a run.json is a few kB; never read a huge foreign file
# What joynr-sim writes at the top of a run directory: the manifest, the traces, the
# runtimes' state, the hosts' and brokers' logs and secret, the GCD's SQLite store (with
# its journal files), the checker's and the report's output, explore's verdict.
OWN_ENTRIES = frozenset({
    MANIFEST, "trace", "state", "log", "brokers", "check", "report", "checker.txt",
    "gcd.sqlite", "gcd.sqlite-wal", "gcd.sqlite-shm", "gcd.sqlite-journal",
})


class RunDirError(ValueError):
    """A folder a run may not use; the message names it and says why."""


def check_run_dir(out_dir: str | Path, name: str) -> Path:
    """``<out_dir>/<name>``; raises RunDirError unless ``out_dir`` is a folder (or absent)
    and ``<out_dir>/<name>`` is absent or a run directory joynr-sim wrote."""
    if not name or name in (".", "..") or "/" in name or os.sep in name:
        raise RunDirError(f"scenario name {name!r} cannot name a run directory")
    out = Path(out_dir)
    if os.path.lexists(out) and not out.is_dir():
        raise RunDirError(f"--out {out} exists and is not a folder")
    run_dir = out / name
    if not os.path.lexists(run_dir):
        return run_dir
    if run_dir.is_symlink():
        raise RunDirError(f"{run_dir} is a symbolic link; joynr-sim replaces only run directories it "
                          "wrote itself (remove the link or choose another --out)")
    if not run_dir.is_dir():
        raise RunDirError(f"{run_dir} exists and is not a folder (move it away or choose another --out)")
    manifest = run_dir / MANIFEST
    why = _not_ours(manifest)
    if why:
        raise RunDirError(f"{run_dir} exists and is not a joynr-sim run directory ({why}); it is left "
                          "as it is (move it away or choose another --out)")
    foreign = _foreign_entries(run_dir)
    if foreign:
        more = f" and {len(foreign) - 3} more" if len(foreign) > 3 else ""
        shown = ", ".join(repr(name) for name in foreign[:3]) + more
        raise RunDirError(f"{run_dir} is a joynr-sim run directory that also holds what joynr-sim did not "
                          f"write ({shown}); replacing the run would delete it, so it is left as it is "
                          "(move those away or choose another --out)")
    return run_dir


def _foreign_entries(run_dir: Path) -> list[str]:
    try:
        names = sorted(entry.name for entry in os.scandir(run_dir))
    except OSError as exc:
        raise RunDirError(f"cannot read run directory {run_dir}: {exc.strerror or exc}") from None
    return [name for name in names if name not in OWN_ENTRIES]


def _not_ours(manifest: Path) -> str | None:
    if manifest.is_symlink() or not manifest.is_file():
        return f"no {MANIFEST}"
    try:
        if manifest.stat().st_size > MAX_MANIFEST_BYTES:
            return f"its {MANIFEST} is too large"
        data = json.loads(manifest.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return f"its {MANIFEST} is not readable JSON: {type(exc).__name__}"
    if not isinstance(data, dict) or data.get("generator") != GENERATOR:
        return f"its {MANIFEST} was not written by joynr-sim"
    if not isinstance(data.get("run_id"), str) or not data["run_id"]:
        return f"its {MANIFEST} names no run"
    return None


def claim_run_dir(out_dir: str | Path, name: str) -> Path:
    """``<out_dir>/<name>``, empty and private: an earlier run directory of joynr-sim is
    removed first, anything else is refused (RunDirError) and left untouched."""
    run_dir = check_run_dir(out_dir, name)
    try:
        if os.path.lexists(run_dir):
            # rmtree never follows a symbolic link found inside: it removes the link itself.
            shutil.rmtree(run_dir)
        run_dir.parent.mkdir(parents=True, exist_ok=True)
        run_dir.mkdir(mode=0o700)
        os.chmod(run_dir, 0o700)  # the umask may only take bits away; make it exact
    except OSError as exc:
        raise RunDirError(f"cannot create run directory {run_dir}: {exc.strerror or exc}") from None
    return run_dir
