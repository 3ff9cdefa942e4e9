"""Why a request got no reply, in words for its diagram: the harness's reading of
``trace_schema/loss.json`` (``joynr_sim.loss``), which ``await_calls ... drops: recorded``
and the Spark ``lost-message`` check apply too. A request a crash or a broker outage
explains is no loss: its diagram says which end explains it, and the page tells the
explained exchanges from the unexplained ones.
"""

from __future__ import annotations

from typing import Any

from ..inspect import Run
from ..loss import EXPLAINED, UNEXPLAINED, End, Exchanges, explaining_ends

Event = dict[str, Any]

_WHAT = {
    "drop-recorded": "the runtime that dropped it recorded the drop",
    "holder-ended": "the runtime holding it ended",
    "ws-end": "its WebSocket closed with an end while it was in flight",
    "ws-receiver-down": "it was sent to a runtime that was down",
    "broker-ended": "its broker ended while it was in flight",
    "broker-down": "its broker was down when it was sent",
    "session-lost": "its broker lost the receiver's session",
    "receiver-gone": "its receiver ended for good while it was in flight",
}


def _end_text(run: Run, end: End, crashes: set[tuple[Any, int]]) -> str:
    who = f"broker of {end.gbid}" if end.kind == "broker" and end.gbid else end.who
    verb = "crashed" if (end.who, end.ts) in crashes else "stopped"
    back = f", up again at +{end.up_ts - run.start}ms" if end.up_ts is not None else ""
    return f"{who} {verb} at +{end.ts - run.start}ms{back}"


def loss_verdicts(run: Run) -> dict[str, dict[str, Any]]:
    """Per request without a reply: ``explained`` (bool), ``why`` (the explanation's id or
    None) and ``text``, one line a reader can take in."""
    judge = Exchanges(run.events)
    crashes = {(e.get("target"), e["ts"]) for e in run.events if e["ev"] == "life.crash"}
    found: dict[str, dict[str, Any]] = {}
    for request, verdict in judge.verdicts().items():
        if verdict.outcome == EXPLAINED:
            ends = explaining_ends(judge, verdict)
            text = _WHAT.get(verdict.why or "", verdict.why or "")
            if ends:
                text = f"{text}: {'; '.join(_end_text(run, e, crashes) for e in ends[:3])}"
            found[request] = {"explained": True, "why": verdict.why, "crash": bool(ends),
                              "text": f"explained ({verdict.why}): {text}"}
        elif verdict.outcome == UNEXPLAINED:
            found[request] = {"explained": False, "why": None, "crash": False,
                              "text": "not explained by the trace: a lost message"}
    return found
