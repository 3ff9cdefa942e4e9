"""One contract for three networks: a scenario run on the memory network and on the real
brokers must end the same way. When it does not, that is a finding about the simulated
network (the real brokers are the reference), shown with the first difference of the two
runs' traces.

Two traces of one scenario never agree byte for byte across networks: times, message ids
and ports differ. What must agree is what each runtime decided, in its own order: the
routing-table changes (``rt.put`` and its outcome, ``rt.remove``, ``rt.purge``), the drops
and their reasons, the steps' outcomes. ``decisions`` reads those, one line per event of
each runtime, and ``first_difference`` names the first runtime and line where two runs part.
"""

from __future__ import annotations

from itertools import zip_longest
from pathlib import Path
from typing import Any

from ..trace import read_run

DECIDING = ("rt.put", "rt.remove", "rt.purge", "msg.drop", "step", "life.crash", "life.restart")


def _line(event: dict[str, Any]) -> str:
    ev = event["ev"]
    if ev == "step":
        return f"step {event.get('index')} {event.get('name')}: {event.get('outcome')}"
    if ev == "msg.drop":
        return f"drop {event.get('reason')} ({event.get('type', '')})"
    if ev.startswith("life."):
        return f"{ev} {event.get('target')}"
    entry = event.get("entry") or event.get("new") or {}
    what = entry.get("type") if isinstance(entry, dict) else None
    return f"{ev} {event.get('participant')} {event.get('outcome', '')} {event.get('reason', '')} {what or ''}".strip()


def decisions(run_dir: str | Path) -> dict[str, list[str]]:
    """Per runtime, in its own order, the lines of what it decided."""
    out: dict[str, list[str]] = {}
    for event in sorted(read_run(run_dir), key=lambda e: (e["rt"], e["seq"])):
        if event["ev"] in DECIDING:
            out.setdefault(event["rt"], []).append(_line(event))
    return out


def first_difference(run_a: str | Path, run_b: str | Path) -> str | None:
    """Where the decisions of two runs of one scenario first differ, or None."""
    a, b = decisions(run_a), decisions(run_b)
    for runtime in sorted(set(a) | set(b)):
        for index, (left, right) in enumerate(zip_longest(a.get(runtime, []), b.get(runtime, []))):
            if left != right:
                return f"{runtime}, decision {index}: {left or '(nothing)'} | {right or '(nothing)'}"
    return None
