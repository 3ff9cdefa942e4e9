"""How a fleet's many start and wave actions run together: each bounded by its stage's
limit (``_bounded``), the first failure cancelling the rest and raised by name (``_all``),
or every one run and the first error told with how many failed (``_raise_first``)."""

from __future__ import annotations

import asyncio
from typing import Any


async def _bounded(limit: asyncio.Semaphore, coro: Any) -> Any:
    try:
        async with limit:
            return await coro
    finally:
        # Cancelled while waiting for the limit (another start failed): the coroutine never
        # ran; closing it says so, instead of a "never awaited" warning at teardown.
        coro.close()


class StrayCancellation(RuntimeError):
    """A start action ended cancelled although nothing cancelled it."""


async def _not_cancelled(coro: Any) -> Any:
    """``coro``'s result; a CancelledError that did not come from cancelling this task (the
    action awaited a future that something else cancelled) becomes an error. Python 3.11's
    TaskGroup ignores a child that ends cancelled, so such a child failed nothing: a
    provider's registration that ended so left every proxy waiting for it, and the whole
    start, waiting for ever, with no error anywhere."""
    try:
        return await coro
    except asyncio.CancelledError as exc:
        task = asyncio.current_task()
        if task is not None and task.cancelling():
            raise  # the group or the run cancelled it: a cancellation, as it should be
        raise StrayCancellation("a start action ended cancelled, though nothing cancelled it "
                                "(see this error's cause for where)") from exc


async def _all(coros: Any) -> list[Any]:
    """Like gather, but the first failure cancels the rest and is raised itself (a step's
    detail then names it, not "unhandled errors in a TaskGroup"); a child that ends
    cancelled without being cancelled counts as a failure (``_not_cancelled``)."""
    try:
        async with asyncio.TaskGroup() as group:
            tasks = [group.create_task(_not_cancelled(c)) for c in coros]
    except ExceptionGroup as failed:
        first = failed.exceptions[0]
        raise first from first.__cause__ or failed  # its own cause says more than the group
    return [t.result() for t in tasks]


class WaveError(Exception):
    """What a wave could not do, naming the runtime."""


def _raise_first(results: list[Any]) -> None:
    """The first error of a wave's actions, telling how many failed."""
    errors = [r for r in results if isinstance(r, BaseException)]
    if errors:
        more = f" (and {len(errors) - 1} more of {len(results)})" if len(errors) > 1 else ""
        raise WaveError(f"{errors[0]}{more}") from errors[0]
