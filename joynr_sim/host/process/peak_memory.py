"""Peak memory of a process, as a fleet run's ``run.json`` and the benchmarks report it."""

from __future__ import annotations

from pathlib import Path


def peak_mib(pid: int | None) -> float:
    """Peak resident memory of a process (VmHWM), from /proc; 0 when unknown."""
    if pid is None:
        return 0.0
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0
