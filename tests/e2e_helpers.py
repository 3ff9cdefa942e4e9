"""Helpers of the end-to-end tests: the events of a run, and waiting for what a system
reaches on its own, with a bound."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from joynr_sim.trace import read_run


def events(run_dir: Path, ev: str | None = None, **match):
    return [
        e for e in read_run(run_dir)
        if (ev is None or e["ev"] == ev) and all(e.get(k) == v for k, v in match.items())
    ]


async def until(predicate, timeout_s: float = 10.0) -> None:
    """Wait for a condition the system reaches on its own, with a bound."""
    deadline = asyncio.get_running_loop().time() + timeout_s
    while not predicate():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not reached within the bound")
        await asyncio.sleep(0.02)


def process_exists(pid: int) -> bool:
    """Whether a process with this pid is still there (a SIGKILLed one is not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
