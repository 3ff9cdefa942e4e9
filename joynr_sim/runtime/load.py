"""Calls driven inside a runtime: a fleet benchmark's load, generated where the proxies
live so that the runner does not carry every call over a control channel."""

from __future__ import annotations

import asyncio
import itertools
import time
from typing import Any

from ..core.errors import JoynrRuntimeException
from .base import Runtime

MAX_CALLS = 10_000_000
MAX_CONCURRENCY = 10_000


async def drive_calls(runtime: Runtime, sender: str, recipient: str, method: str, params: list[Any], *,
                      calls: int, concurrency: int, ttl_ms: int) -> dict[str, Any]:
    """``calls`` requests from proxy ``sender`` to ``recipient``, ``concurrency`` at a time;
    what came back: ok and failed counts (by error type) and the seconds it took."""
    if type(calls) is not int or not 1 <= calls <= MAX_CALLS:
        raise ValueError(f"calls: expected 1 to {MAX_CALLS}, got {calls!r}")
    if type(concurrency) is not int or not 1 <= concurrency <= MAX_CONCURRENCY:
        raise ValueError(f"concurrency: expected 1 to {MAX_CONCURRENCY}, got {concurrency!r}")
    tickets = itertools.count()
    ok = 0
    failed: dict[str, int] = {}

    async def worker() -> None:
        nonlocal ok
        while next(tickets) < calls:
            try:
                await runtime.request(sender, recipient, method, params, ttl_ms)
                ok += 1
            except JoynrRuntimeException as exc:
                failed[type(exc).__name__] = failed.get(type(exc).__name__, 0) + 1

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(min(concurrency, calls))))
    return {"ok": ok, "failed": failed, "seconds": time.perf_counter() - started}
