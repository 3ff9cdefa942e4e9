"""Calls that run in the background while later steps happen (``start_calls``), and what
must hold when they are awaited (``await_calls``): every call answered, or each one left
unanswered accounted for by the trace: a ``msg.drop`` of its request or reply, a hop of
either to the broker of a GBID that was killed (``life.crash``) and not yet started again
when the hop was sent, so the message died with the broker, or sent after it came back
but before its receiver had subscribed again, or a hop to a libjoynr
runtime's connection that the runtime's crash cut before it read the message.

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
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core.errors import JoynrRuntimeException, JoynrTimeoutException
from ..runtime.base import Proxy
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


async def _one(proxy: Proxy, index: int, method: str, args: tuple, ttl_ms: int) -> CallOutcome:
    try:
        return CallOutcome(index, result=await proxy.call(method, *args, ttl_ms=ttl_ms))
    except JoynrTimeoutException as exc:
        if str(exc) == CALLER_GONE:  # the trace records the crash (life.crash)
            return CallOutcome(index, error="caller-gone")
        found = _MESSAGE_ID.search(str(exc))
        return CallOutcome(index, error="timeout", message_id=found.group(1) if found else None)
    except JoynrRuntimeException as exc:
        return CallOutcome(index, error=getattr(exc, "error", None) or type(exc).__name__)


async def start(proxy: Proxy, a: Mapping[str, Any]) -> Batch:
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
    recorded`` it is accepted like a call whose request or reply the trace says was dropped,
    within ``grace_s`` of now."""
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
            found.append(f"{len(silent)} of {len(outcomes)} calls unanswered with no recorded drop of their "
                         f"request or reply (calls {', '.join(str(o.index) for o in silent[:10])})")
    return found


async def _unaccounted(calls: list[CallOutcome], run_dir: Path, grace_s: float) -> list[CallOutcome]:
    """The calls the trace does not account for once each is, or ``grace_s`` has passed. A
    call without a message id can never be: it is not waited for."""
    nameless = [o for o in calls if o.message_id is None]
    waiting = [o for o in calls if o.message_id is not None]
    deadline = time.monotonic() + grace_s

    def still_silent() -> list[CallOutcome]:
        events = read_run(run_dir)
        return [o for o in waiting if not _drop_recorded(o.message_id, events)]

    while waiting:
        # Off the loop: the runtimes that write the late drops may run on it.
        waiting = await asyncio.to_thread(still_silent)
        if not waiting or time.monotonic() >= deadline:
            break
        await asyncio.sleep(DROP_POLL_S)
    return sorted(nameless + waiting, key=lambda o: o.index)


def _drop_recorded(message_id: str | None, events: list[dict[str, Any]]) -> bool:
    if message_id is None:
        return False
    corr = next((e.get("corr") for e in events if e["ev"] == "msg.out" and e.get("msg") == message_id), None)

    def ours(e: dict[str, Any]) -> bool:
        return e.get("msg") == message_id or (corr is not None and e.get("corr") == corr)

    if any(e["ev"] == "msg.drop" and ours(e) for e in events):
        return True
    hops = [e for e in events if e["ev"] == "msg.out" and e.get("via") == "mqtt" and ours(e)]
    if any(_broker_down(e.get("gbid"), e["ts"], events) or _not_resubscribed(e, events) for e in hops):
        return True
    # Handed to a libjoynr runtime's connection that its crash (SIGKILL) cut before it read it.
    to_clients = [e for e in events if e["ev"] == "msg.out" and e.get("addr_type") == "WebSocketClient" and ours(e)]
    return any(_died_with(e, events, ours) for e in to_clients)


def _died_with(hop: dict[str, Any], events: list[dict[str, Any]], ours) -> bool:
    """Whether the runtime a hop went to crashed at or after the hop without receiving it."""
    receiver, ts = hop.get("target"), hop["ts"]
    if any(e["ev"] == "msg.in" and e["rt"] == receiver and e["ts"] >= ts and ours(e) for e in events):
        return False
    return any(e["ev"] == "life.crash" and e.get("target") == receiver and e["ts"] >= ts for e in events)


def _not_resubscribed(hop: dict[str, Any], events: list[dict[str, Any]]) -> bool:
    """Whether a hop went to a broker that had come back from a crash before its receiver
    had subscribed again: a broker that comes back keeps no sessions (amqtt), so until the
    receiver's subscription is back a publish reaches nobody. The receiver is the runtime
    whose client id is the hop's topic; its subscription is back, at the latest, when it
    first received something over that GBID after the restart."""
    gbid, ts = hop.get("gbid"), hop["ts"]
    topic = str(hop.get("target") or "").partition("/")[2]
    kinds = ("life.crash", "life.start", "life.restart")
    life = [(e["ts"], e["ev"]) for e in events if e["rt"] == "brokers" and e.get("gbid") == gbid and e["ev"] in kinds]
    restarts = [t for n, (t, ev) in enumerate(life)
                if ev != "life.crash" and t <= ts and n > 0 and life[n - 1][1] == "life.crash"]
    if not restarts or not topic:
        return False
    back = restarts[-1]
    receivers = {e["rt"] for e in events if e["ev"] == "link.attach" and e.get("gbid") == gbid
                 and e.get("client_id") == topic}
    heard = [e["ts"] for e in events if e["ev"] == "msg.in" and e.get("via") == "mqtt" and e.get("gbid") == gbid
             and e["rt"] in receivers and e["ts"] >= back]
    return bool(receivers) and (not heard or min(heard) > ts)


def _broker_down(gbid: str | None, ts: int, events: list[dict[str, Any]]) -> bool:
    """Whether the broker of ``gbid`` was killed before ``ts`` and not started again by then,
    or killed later with nothing started in between: what was handed to it then died with it."""
    kinds = ("life.crash", "life.start", "life.restart")
    life = [(e["ts"], e["ev"]) for e in events if e["rt"] == "brokers" and e.get("gbid") == gbid and e["ev"] in kinds]
    before = [ev for t, ev in life if t <= ts]
    after = [ev for t, ev in life if t > ts]
    down_then = bool(before) and before[-1] == "life.crash"
    crashed_next = bool(after) and after[0] == "life.crash"
    return down_then or crashed_next
