"""What a run's report shows, computed from its events: the message list and the sequence
diagram of each conversation (what explains a request left without a reply: ``explain``),
the series the plots draw and the violations with what they link to; the routing-entry
history of every participant is ``routing``'s.

Everything here is plain data for the page (the templates lay it out, ``report.js`` draws
the diagrams and timelines from it); no file or clock is touched. A message's hops and fate
come from ``joynr_sim.message_path``, as ``joynr-sim trace --msg`` shows them.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from typing import Any

from ..inspect import Run, misc_detail
from ..message_path import Conversation, Hop, conversations, message_paths
from .explain import loss_verdicts
from .inputs import RunInput, Violation
from .names import Named, label

Event = dict[str, Any]

MAX_CONVERSATIONS = 2000  # diagrams carried by one page; failing ones first
ACTIVITY_BINS = 60


def rel(run: Run, ts: int) -> int:
    return ts - run.start


# -- messages and their diagrams ----------------------------------------------------------------

@dataclass(frozen=True)
class Messages:
    listed: list[dict[str, Any]]  # one row per message, in order of first appearance
    conversations: list[dict[str, Any]]  # diagram models, referenced by index from rows
    failing: list[int]  # conversations with a message that was not delivered, or no reply
    not_listed: int  # messages left out past MAX_CONVERSATIONS


def diagram(run: Run, conv: Conversation, names: dict[str, Named] | None = None,
            losses: dict[str, dict[str, Any]] | None = None) -> dict[str, Any]:
    """A sequence diagram: lifelines per runtime, a row per hop (an arrow labelled with its
    transport, GBID and ``resent``) or per local event (deliver, queue, drop with its reason).
    A request without a reply says why when the trace explains it (``losses``); a hop lost
    to an explained end is drawn as a warning, not as a loss."""
    names = names or {}
    col = {rt: i for i, rt in enumerate(conv.runtimes)}
    verdicts = [(losses or {}).get(m) for m in conv.ids]
    explained = [v for v in verdicts if v is not None and v["explained"]]
    lost = any(v is not None and not v["explained"] for v in verdicts)
    rows: list[dict[str, Any]] = []
    for path in conv.paths:
        head = path.head
        rows.append({"k": "head", "msg": path.msg,
                     "text": f"{head.get('type')} {path.msg}  {label(names, head.get('from'))} → "
                     f"{label(names, head.get('to'))}" + (f"  corr {head['corr']}" if head.get("corr") else "")})
        for step in path.steps:
            e = step.at
            g = f"h{e.get('hops')} +{rel(run, e['ts'])}ms"
            if isinstance(step, Hop):
                rows.append(_hop_row(step, col, g, excused=bool(explained) and not lost))
            elif step.kind == "deliver":
                rows.append({"k": "mark", "c": col[e["rt"]], "sym": "●", "g": g, "s": "ok",
                             "note": f"delivered to {label(names, e.get('to'))}"})
            elif step.kind == "queue":
                rows.append({"k": "mark", "c": col[e["rt"]], "sym": "◌", "g": g, "s": "warn",
                             "note": f"queued: {e.get('reason')}"})
            else:
                detail = f" ({e['detail']})" if e.get("detail") else ""
                rows.append({"k": "mark", "c": col[e["rt"]], "sym": "✗", "g": g, "s": "bad",
                             "note": f"dropped: {e.get('reason')}{detail}"})
    if conv.unanswered:
        rows.append({"k": "note", "text": "no reply in the trace", "s": "warn"})
    for v in verdicts:
        if v is not None:
            rows.append({"k": "note", "text": v["text"], "s": "warn" if v["explained"] else "bad",
                         "explained": v["explained"]})
    return {"columns": conv.runtimes, "rows": rows, "ids": conv.ids,
            "explained": explained[0]["text"] if explained and not lost else ""}


def _hop_row(hop: Hop, col: dict[str, int], g: str, excused: bool = False) -> dict[str, Any]:
    if hop.sent is None:
        return {"k": "hop", "a": None, "b": col[hop.at["rt"]], "label": hop.label, "g": g, "s": "warn",
                "note": f"received at {hop.receiver}; the sender left no msg.out"}
    if hop.received is None:
        return {"k": "hop", "a": col[hop.at["rt"]], "b": None, "label": hop.label, "g": g,
                "s": "warn" if excused else "bad",
                "note": f"sent by {hop.sender} to {hop.sent.get('target')}, never received"}
    return {"k": "hop", "a": col[hop.sent["rt"]], "b": col[hop.received["rt"]], "label": hop.label, "g": g,
            "s": "warn" if hop.sent.get("resent") else ""}


def messages(run: Run, names: dict[str, Named] | None = None) -> Messages:
    names = names or {}
    paths = message_paths(run.events)
    convs = conversations(paths)
    losses = loss_verdicts(run)
    bad = [c for c in convs if c.failing]
    chosen = (bad + [c for c in convs if not c.failing])[:MAX_CONVERSATIONS]
    chosen_set = {id(c) for c in chosen}
    kept = [c for c in convs if id(c) in chosen_set]  # back in order of appearance
    models = [diagram(run, c, names, losses) for c in kept]
    rows = []
    for index, conv in enumerate(kept):
        for path in conv.paths:
            first = path.first
            rows.append({"id": path.msg, "type": str(first.get("type")), "from": label(names, first.get("from")),
                         "to": label(names, first.get("to")), "t": rel(run, first["ts"]), "hops": path.hops,
                         "outcome": path.fate.outcome, "where": path.fate.where, "conv": index,
                         "ids": f"{first.get('from')} {first.get('to')}",
                         "explained": models[index]["explained"]})
    rows.sort(key=lambda r: (r["t"], r["id"]))
    failing_idx = [i for i, c in enumerate(kept) if c.failing]
    return Messages(rows, models, failing_idx, sum(len(c.paths) for c in convs) - sum(len(c.paths) for c in kept))


# -- series for the plots ------------------------------------------------------------------

def bin_width(duration_ms: int, bins: int = ACTIVITY_BINS) -> int:
    """The smallest of 1, 2, 5 × 10^k ms that cuts ``duration_ms`` into at most ``bins``."""
    target = max(1, math.ceil(duration_ms / bins))
    k = 10 ** max(0, len(str(target)) - 1)
    for step in (1, 2, 5, 10):
        if step * k >= target:
            return step * k
    return 10 * k  # pragma: no cover - the loop ends at 10 k >= target


def activity(run: Run) -> dict[str, list[dict[str, Any]]]:
    end = rel(run, max((e["ts"] for e in run.events), default=run.start))
    width = bin_width(end + 1)
    events: Counter[tuple[str, int]] = Counter()
    sent: Counter[tuple[str, int]] = Counter()
    for e in run.events:
        b = rel(run, e["ts"]) // width * width
        events[(e["rt"], b)] += 1
        if e["ev"] == "msg.out":
            sent[(e["rt"], b)] += 1

    def rows(c: Counter[tuple[str, int]]) -> list[dict[str, Any]]:
        return [{"rt": rt, "t0": b, "t1": b + width, "n": n} for (rt, b), n in sorted(c.items())]

    return {"events": rows(events), "sent": rows(sent)}


def latencies(run: Run) -> list[dict[str, Any]]:
    """Request to reply: the request's first msg.out to the delivery of its reply (same corr)."""
    asked: dict[str, Event] = {}
    answered: dict[str, Event] = {}
    for e in run.events:
        corr = e.get("corr")
        if not isinstance(corr, str):
            continue
        if e["ev"] == "msg.out" and e.get("type") == "rq" and corr not in asked:
            asked[corr] = e
        elif e["ev"] == "msg.deliver" and e.get("type") == "rp" and corr not in answered:
            answered[corr] = e
    return [{"corr": c, "ms": answered[c]["ts"] - q["ts"], "to": str(q.get("to")), "from": str(q.get("from"))}
            for c, q in asked.items() if c in answered]


def drops(run: Run) -> list[dict[str, Any]]:
    c = Counter((str(e.get("reason")), e["rt"]) for e in run.events if e["ev"] == "msg.drop")
    return [{"reason": reason, "rt": rt, "n": n} for (reason, rt), n in sorted(c.items())]


def links(run: Run) -> list[dict[str, Any]]:
    rows = []
    for e in run.events:
        if not e["ev"].startswith("link."):
            continue
        what = e["ev"].removeprefix("link.")
        if what == "attach" and e.get("mode"):
            what = "steal" if e["mode"] == "steal" else f"attach: {e['mode']}"
        rows.append({"t": rel(run, e["ts"]), "rt": e["rt"], "what": what,
                     "session": f"{e.get('gbid')}/{e.get('client_id')}", "detail": misc_detail(e)})
    return rows


# -- summary and violations ------------------------------------------------------------------

def summary(run: Run) -> dict[str, Any]:
    events = run.events
    kinds = {}
    for e in events:
        kinds.setdefault(e["rt"], str(e.get("kind", "?")))
    per_rt = []
    for rt in run.runtimes():
        c = Counter(e["ev"] for e in events if e["rt"] == rt)
        per_rt.append({"rt": rt, "kind": kinds.get(rt, "?"), "events": sum(c.values()), "in": c["msg.in"],
                       "out": c["msg.out"], "drops": c["msg.drop"]})
    return {"events": len(events), "runtimes": per_rt,
            "span_ms": rel(run, max((e["ts"] for e in events), default=run.start))}


@dataclass(frozen=True)
class ViolationView:
    check: str
    kind: str
    key: str
    summary: str
    anchor: str  # the id of its trace slice in the page
    msg: str | None  # the message whose diagram it links to
    participant: str | None  # whose routing timeline it links to
    slice_rows: list[dict[str, str]]
    slice_total: int
    slice_href: str | None


def violation_view(run: Run, v: Violation, index: int, slice_href: str | None) -> ViolationView:
    by_ref = {(e["rt"], e["seq"]): e for e in run.events} if v.refs else {}
    referred = [by_ref[r] for r in v.refs if r in by_ref]
    msg = v.details.get("msg") if isinstance(v.details.get("msg"), str) else None
    if msg is None:
        msg = next((e["msg"] for e in referred if isinstance(e.get("msg"), str)), None)
    participant = v.details.get("participant") if isinstance(v.details.get("participant"), str) else None
    if participant is None:
        participant = next((e["participant"] for e in referred if isinstance(e.get("participant"), str)), None)
    rows = [{"t": f"+{rel(run, e['ts'])}ms", "rt": e["rt"], "seq": str(e["seq"]), "ev": e["ev"],
             "detail": misc_detail(e)} for e in v.slice_events]
    return ViolationView(v.check, v.kind, v.key, v.summary, f"violation-{index}", msg, participant, rows,
                         v.slice_total, slice_href)


def run_outcome(inp: RunInput) -> str:
    """passed / failed / error from run.json, else from the trace's steps."""
    if inp.manifest is not None and inp.manifest.outcome:
        return inp.manifest.outcome
    steps = [e for e in inp.run.events if e["ev"] == "step"]
    if not steps:
        return "unknown"
    return "failed" if any(e.get("outcome") == "failed" for e in steps) else "passed"
