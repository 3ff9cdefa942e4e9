"""The routing entries of each participant over time, as the page's timeline draws them:
the entry every runtime held between changes (bars), every put, remove and purge with its
outcome (points), the steps and faults of the run (rules on the time axis) and the change a
violation names (ringed).

The page opens on what went wrong: the participant of the first violation, else of the
first failed step, else the one whose entry changed most. Each participant's time axis is
zoomed to its own changes, so an action of 40 ms is not a sliver of the whole run.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from typing import Any

from ..inspect import RT_EVENTS, Run, entry_text
from .inputs import Step
from .names import Named, described

Event = dict[str, Any]

NEVER_MS = 2**62  # joynr's "no expiry" (Long.MAX_VALUE / 2 in the trace)
FAULT_EVENTS = ("life.crash", "life.restart")  # plus every fault.*
MIN_SPAN_MS = 20  # the narrowest zoom: a single change still has room either side


def rel(run: Run, ts: int) -> int:
    return ts - run.start


def expiry_text(run: Run, expiry: Any) -> str:
    if not isinstance(expiry, int):
        return "?"
    if expiry >= NEVER_MS:
        return "never"
    return f"+{rel(run, expiry)}ms"


def _entry_fields(run: Run, entry: dict[str, Any] | None) -> dict[str, Any]:
    if not isinstance(entry, dict):
        return {"type": "none", "addr": "", "sticky": False, "visible": False, "expiry": ""}
    return {"type": str(entry.get("type")), "addr": str(entry.get("addr")), "sticky": bool(entry.get("sticky")),
            "visible": bool(entry.get("visible")), "expiry": expiry_text(run, entry.get("expiry"))}


def marks(run: Run) -> list[dict[str, Any]]:
    """The steps (when each ended) and the faults (crashes, restarts, fault.*) of the run."""
    found = []
    for e in run.events:
        if e["ev"] == "step":
            found.append({"t": rel(run, e["ts"]), "kind": "step", "short": f"#{e.get('index')}",
                          "text": f"step {e.get('index')}: {e.get('name')} ({e.get('outcome')})",
                          "failed": e.get("outcome") == "failed"})
        elif e["ev"] in FAULT_EVENTS or e["ev"].startswith("fault."):
            what = e["ev"].removeprefix("life.").removeprefix("fault.")
            who = e.get("target") or e.get("runtime") or e["rt"]
            found.append({"t": rel(run, e["ts"]), "kind": "fault", "short": what,
                          "text": f"{what} {who}" + (f" ({e['gbid']})" if e.get("gbid") else ""), "failed": False})
    return found


def zoom(times: list[int], end: int) -> list[int]:
    """The time axis for these changes: from a little before the first to a little after the
    last, never narrower than MIN_SPAN_MS, within the run."""
    lo, hi = min(times), max(times)
    pad = max((hi - lo) // 10, (MIN_SPAN_MS - (hi - lo)) // 2, 2)
    return [max(0, lo - pad), min(max(end, hi), hi + pad)]


def mentioned(text: str, participants: list[str], names: dict[str, Named]) -> str | None:
    """The first participant a step's text names, by id or by its scenario name."""
    best: tuple[int, str] | None = None
    for p in participants:
        words = [p] + ([names[p].name] if p in names else [])
        for w in words:
            m = re.search(rf"(?<![\w-]){re.escape(w)}(?![\w-])", text)
            if m and (best is None or m.start() < best[0]):
                best = (m.start(), p)
    return best[1] if best else None


def opening(participants: list[str], changes: list[dict[str, Any]], violated: list[str | None],
            steps: list[Step], names: dict[str, Named]) -> tuple[str, str]:
    """The participant the view opens on, and why."""
    known = set(participants)
    for p in violated:
        if p in known:
            return p, "the first violation's"
    failed = next((s for s in steps if s.outcome != "ok"), None)
    if failed is not None:
        for text in (failed.title, failed.detail, failed.context):
            p = mentioned(text, participants, names)
            if p is not None:
                return p, f"step {failed.index}'s, which failed"
    busy = Counter(c["p"] for c in changes if c["outcome"] not in ("created",))
    if busy:
        return busy.most_common(1)[0][0], "the one whose entry changed most"
    return (participants[0], "") if participants else ("", "")


def routing(run: Run, *, violated: list[str | None] = (), violating: set[tuple[str, int]] = frozenset(),
            steps: list[Step] = (), names: dict[str, Named] | None = None) -> dict[str, Any]:
    """Per participant and runtime: the entry held between changes (``entries``: bars) and
    every put, remove and purge with its outcome (``changes``: points, refusals marked, the
    ones a violation refers to (``violating``: (runtime, seq)) flagged); ``violated``: the
    participants the violations name, in order."""
    names = names or {}
    end = rel(run, max((e["ts"] for e in run.events), default=run.start))
    lanes: dict[tuple[str, str], list[Event]] = defaultdict(list)
    for e in run.events:
        if e["ev"] in RT_EVENTS and isinstance(e.get("participant"), str):
            lanes[(e["participant"], e["rt"])].append(e)
    entries, changes = [], []
    for (p, rt), events in lanes.items():
        for i, e in enumerate(events):
            t = rel(run, e["ts"])
            op = e["ev"].removeprefix("rt.")
            outcome = str(e.get("outcome") or "")
            held = None if e["ev"] == "rt.purge" else e.get("entry")
            changes.append({"p": p, "rt": rt, "t": t, "seq": e["seq"], "op": op, "outcome": outcome,
                            "reason": str(e.get("reason") or ""), "origin": str(e.get("origin") or ""),
                            "policy": str(e.get("policy") or ""), "old": entry_text(e.get("old")),
                            "offered": entry_text(e.get("new")) if op == "put" else "",
                            "held": entry_text(held), "refused": outcome.startswith("refused"),
                            "violating": (rt, e["seq"]) in violating,
                            "mark": f"{op} {outcome}".strip()})
            if isinstance(held, dict):
                t1 = rel(run, events[i + 1]["ts"]) if i + 1 < len(events) else end
                entries.append({"p": p, "rt": rt, "t0": t, "t1": max(t1, t + 1), **_entry_fields(run, held)})
    changes.sort(key=lambda c: (c["t"], c["rt"]))  # the table reads in time order, across runtimes
    participants = sorted({p for p, _ in lanes})
    first, why = opening(participants, changes, list(violated), list(steps), names)
    times: dict[str, list[int]] = defaultdict(list)
    for c in changes:
        times[c["p"]].append(c["t"])
    return {"participants": participants, "entries": entries, "changes": changes, "first": first, "why": why,
            "end": end, "zooms": {p: zoom(ts, end) for p, ts in times.items()}, "marks": marks(run),
            "labels": {p: described(names, p) for p in participants if p in names}}
