"""Calls that run in the background while later steps happen (``start_calls``), and what
must hold when they are awaited (``await_calls``): every call answered, or (``drops:
recorded``) each one left unanswered explained by the trace as ``trace_schema/loss.json``
says (``joynr_sim.loss``, the same specification the Spark ``lost-message`` check
implements): a recorded drop of its request or reply, the end of the runtime that held it,
a WebSocket end, a broker that ended or was down, a lost session, a receiver gone for good.

A call that timed out names its request's message id in the timeout; the trace's
``msg.out`` of that id gives the correlation id, which its reply carries too.

A call can time out at its proxy while its request or reply is still on the way: held by
the broker for a cluster controller that reconnects with its session, or queued behind a
busy loop. Where it arrives it is dropped as expired, and that ``msg.drop`` is written
after the call ended. So the trace is read again until every unanswered call is accounted
for or ``DROP_GRACE_S`` has passed since the calls were awaited.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core.errors import JoynrRuntimeException, JoynrTimeoutException
from ..loss import UNEXPLAINED, Exchanges, Verdict
from ..runtime.handle import ProxyHandle
from ..trace import read_run
from .model import thaw

DROP_GRACE_S = 5.0  # after the calls ended, how long a late drop of theirs may take to be written
DROP_POLL_S = 0.1  # how often the trace is read again meanwhile
CALLER_GONE = "runtime went down"  # what a pending call of a crashed or stopped runtime ends with
_MESSAGE_ID = re.compile(r"\(message ([^\s)]+)\)")


@dataclass
class CallOutcome:
    index: int
    result: Any = None
    error: str | None = None  # an error name, "timeout", or "caller-gone" (its runtime went down)
    message_id: str | None = None  # the request's id, when the timeout names it


@dataclass
class Batch:
    name: str
    proxy: str  # the proxy's name in the scenario
    tasks: list[asyncio.Task[CallOutcome]] = field(default_factory=list)
    pacer: asyncio.Task[None] | None = None


async def _one(proxy: ProxyHandle, index: int, method: str, args: tuple, ttl_ms: int) -> CallOutcome:
    try:
        return CallOutcome(index, result=await proxy.call(method, *args, ttl_ms=ttl_ms))
    except JoynrTimeoutException as exc:
        if str(exc) == CALLER_GONE:  # the trace records the crash (life.crash)
            return CallOutcome(index, error="caller-gone")
        found = _MESSAGE_ID.search(str(exc))
        return CallOutcome(index, error="timeout", message_id=found.group(1) if found else None)
    except JoynrRuntimeException as exc:
        return CallOutcome(index, error=getattr(exc, "error", None) or type(exc).__name__)


async def start(proxy: ProxyHandle, a: Mapping[str, Any]) -> Batch:
    """Send ``count`` calls, ``interval_ms`` apart, without waiting for their replies. With
    no interval every call has been handed to the runtime when this returns."""
    batch = Batch(a["name"], a["proxy"])
    args = tuple(thaw(a.get("args") or ()))
    ttl = a.get("ttl_ms") or 10_000

    def call(i: int) -> asyncio.Task[CallOutcome]:
        return asyncio.create_task(_one(proxy, i, a["method"], args, ttl))

    if not a.get("interval_ms"):
        batch.tasks.extend(call(i) for i in range(a["count"]))
        await asyncio.sleep(0)  # each call runs up to its wait for the reply: it is sent
        return batch

    async def pace() -> None:
        for i in range(a["count"]):
            batch.tasks.append(call(i))
            await asyncio.sleep(a["interval_ms"] / 1000)

    batch.pacer = asyncio.create_task(pace())
    return batch


async def finish(batch: Batch) -> list[CallOutcome]:
    if batch.pacer is not None:
        await batch.pacer
    return list(await asyncio.gather(*batch.tasks))


async def cancel(batch: Batch) -> None:
    """Stop what is still running (the scenario ended early)."""
    pending = [t for t in (batch.pacer, *batch.tasks) if t is not None and not t.done()]
    for task in pending:
        task.cancel()
    await asyncio.gather(*pending, return_exceptions=True)


async def problems(
    outcomes: list[CallOutcome], a: Mapping[str, Any], run_dir: Path, grace_s: float = DROP_GRACE_S
) -> list[str]:
    """What did not hold; empty when the calls ended as ``a`` (await_calls) asks. A call
    whose own runtime went down is recorded by that runtime's crash or stop; with ``drops:
    recorded`` it is accepted like a call the trace explains (``joynr_sim.loss``) within
    ``grace_s`` of now."""
    expect = dict(a.get("expect") or {})
    recorded_ok = a.get("drops") == "recorded"
    found: list[str] = []
    unanswered: list[CallOutcome] = []
    answered = 0
    for o in outcomes:
        if o.error == "caller-gone":
            unanswered.append(o)
        elif o.error == "timeout" and not expect.get("timeout"):
            unanswered.append(o)
        elif o.error not in (None, "timeout") and expect.get("error") != o.error:
            found.append(f"call {o.index} failed with {o.error}")
        elif "result" in expect and o.error is None and thaw(expect["result"]) != o.result:
            found.append(f"call {o.index}: expected result {thaw(expect['result'])!r}, got {o.result!r}")
        else:
            answered += 1
    if answered < (a.get("min_answered") or 0):
        found.append(f"{answered} of {len(outcomes)} calls answered, expected at least {a['min_answered']}")
    if unanswered and not recorded_ok:
        found.append(f"{len(unanswered)} of {len(outcomes)} calls unanswered (calls "
                     f"{', '.join(str(o.index) for o in unanswered[:10])})")
    elif unanswered:
        silent = await _unaccounted([o for o in unanswered if o.error != "caller-gone"], run_dir, grace_s)
        if silent:
            found.append(f"{len(silent)} of {len(outcomes)} calls unanswered and not explained by the trace "
                         f"(calls {', '.join(_where(o, v) for o, v in silent[:10])})")
    return found


def _where(o: CallOutcome, v: Verdict | None) -> str:
    """A call and where its exchange was last seen."""
    last = v.last if v is not None else None
    if last is None:
        return f"{o.index}" if o.message_id is None else f"{o.index}: no trace of {o.message_id}"
    hop = f" via {last['via']} to {last.get('target')}" if last["ev"] == "msg.out" else ""
    return f"{o.index}: last seen {last['ev']} at {last['rt']}{hop}"


async def _unaccounted(calls: list[CallOutcome], run_dir: Path, grace_s: float
                       ) -> list[tuple[CallOutcome, Verdict | None]]:
    """The calls the trace does not explain, with their verdicts, once each is explained or
    ``grace_s`` has passed. A call without a message id can never be: it is not waited for."""
    nameless: list[tuple[CallOutcome, Verdict | None]] = [(o, None) for o in calls if o.message_id is None]
    waiting = [o for o in calls if o.message_id is not None]
    silent: list[tuple[CallOutcome, Verdict | None]] = []
    # The loop's clock, not the machine's: on a virtual-time loop the grace is virtual too
    # (on asyncio's own loop the two are the same clock).
    loop = asyncio.get_running_loop()
    deadline = loop.time() + grace_s

    def still_silent() -> list[tuple[CallOutcome, Verdict | None]]:
        judge = Exchanges(read_run(run_dir))
        verdicts = [(o, judge.verdict(o.message_id)) for o in waiting]
        return [(o, v) for o, v in verdicts if v.outcome == UNEXPLAINED]

    while waiting:
        # Off the loop: the runtimes that write the late drops may run on it.
        silent = await asyncio.to_thread(still_silent)
        waiting = [o for o, _ in silent]
        if not waiting or loop.time() >= deadline:
            break
        await asyncio.sleep(DROP_POLL_S)
    return sorted(nameless + silent, key=lambda ov: ov[0].index)
