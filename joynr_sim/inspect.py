"""Reading a run's trace for people: ``joynr-sim trace RUN [--msg ID | --participant ID |
--runtime ID]``.

Runtimes share a millisecond clock, so events of different runtimes within one millisecond
cannot be ordered by time. A message's own events are ordered by its hop counter first:
a runtime records ``msg.in`` with the counter as received and everything after it with the
counter plus one, so the counter orders the hops even where the clock cannot.

Longer than 400 lines because its four views of one run (a message, a participant, a
runtime, the summary) share the loading, the hop ordering and the formatting helpers;
each view is one section below.
"""

from __future__ import annotations

import difflib
import os
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from .trace import read_run

Event = dict[str, Any]

MSG_EVENTS = ("msg.out", "msg.in", "msg.deliver", "msg.queue", "msg.drop")
RT_EVENTS = ("rt.put", "rt.remove", "rt.purge")


class InspectError(Exception):
    """Bad input to ``joynr-sim trace``: the command prints it and exits with code 2."""


@dataclass(frozen=True)
class Run:
    path: Path
    events: list[Event]  # ordered by simulated time, then runtime, then sequence

    @property
    def start(self) -> int:
        return min((e.get("ts", 0) for e in self.events), default=0)

    def rel(self, event: Event) -> str:
        return f"+{event.get('ts', 0) - self.start}ms"

    def runtimes(self) -> list[str]:
        """Runtime ids in the order they first wrote an event."""
        return list(dict.fromkeys(e.get("rt", "?") for e in self.events))


def load_run(run: str | os.PathLike[str]) -> Run:
    """A run directory (``runs/<run-id>``), its ``trace`` folder, or a run id under ``runs/``."""
    path = Path(run)
    if not path.exists() and not path.is_absolute() and (Path("runs") / path).is_dir():
        path = Path("runs") / path
    if not path.is_dir():
        raise InspectError(f"{run}: no such run directory")
    if path.name == "trace" and not (path / "trace").is_dir():
        path = path.parent
    if not any((path / "trace").glob("*.ndjson")):
        raise InspectError(f"{path}: no trace files (expected {path / 'trace'}/*.ndjson)")
    return Run(path, read_run(path))


# -- small formatting helpers -----------------------------------------------------------

def short(msg_id: str | None, n: int = 8) -> str:
    return "-" if msg_id is None else msg_id[:n]


def entry_text(entry: dict[str, Any] | None) -> str:
    if not entry:
        return "∅"
    flags = [f for f, on in (("sticky", entry.get("sticky")), ("visible", entry.get("visible"))) if on]
    return f"{entry.get('type')} {entry.get('addr')}" + (f" [{', '.join(flags)}]" if flags else "")


def hop_label(out: Event) -> str:
    label = str(out.get("via") or "?")
    if out.get("gbid"):
        label += f" {out['gbid']}"
    if out.get("resent"):
        label += " resent"
    return label


# -- one message -------------------------------------------------------------------------

def find_message(run: Run, prefix: str) -> str:
    """The message id that ``prefix`` starts, or InspectError naming the candidates."""
    ids = list(dict.fromkeys(e["msg"] for e in run.events if e.get("ev") in MSG_EVENTS and e.get("msg")))
    if prefix in ids:
        return prefix
    matches = [i for i in ids if i.startswith(prefix)]
    if len(matches) == 1:
        return matches[0]
    if matches:
        listed = ", ".join(matches[:10]) + (" …" if len(matches) > 10 else "")
        raise InspectError(f"message id {prefix!r} is ambiguous: {len(matches)} messages start "
                           f"with it ({listed})")
    close = difflib.get_close_matches(prefix, ids, n=5, cutoff=0.5)
    close += [i for i in ids if prefix[:4] and i.startswith(prefix[:4]) and i not in close][:5]
    hint = f"; did you mean {', '.join(close)}?" if close else ""
    raise InspectError(f"no message with id {prefix!r} in {run.path}{hint}")


def position(e: Event) -> tuple[float, int, int]:
    """msg.in sits between the msg.out that sent it and what its receiver did next."""
    hops = e.get("hops")
    hops = 0 if hops is None else hops
    return (hops + 0.5 if e.get("ev") == "msg.in" else hops, e.get("ts", 0), e.get("seq", 0))


def message_events(run: Run, msg_id: str) -> list[Event]:
    return sorted((e for e in run.events if e.get("ev") in MSG_EVENTS and e.get("msg") == msg_id),
                  key=position)


def conversation(run: Run, msg_id: str) -> list[str]:
    """The message and its request or reply (same ``corr``), request first."""
    corr = next((e.get("corr") for e in run.events if e.get("msg") == msg_id and e.get("corr")), None)
    if corr is None:
        return [msg_id]
    first_seen: dict[str, tuple[int, int, int]] = {}
    for e in run.events:
        if e.get("ev") in MSG_EVENTS and e.get("corr") == corr and e.get("msg"):
            key = (0 if e.get("type") == "rq" else 1, e.get("ts", 0), e.get("seq", 0))
            first_seen[e["msg"]] = min(first_seen.get(e["msg"], key), key)
    return sorted(first_seen, key=first_seen.__getitem__)


def pair_hops(events: list[Event]) -> dict[int, int]:
    """msg.in index -> index of the msg.out that sent it (earliest unmatched, same transport)."""
    pending: list[int] = []
    pairs: dict[int, int] = {}
    for i, e in enumerate(events):
        if e["ev"] == "msg.out" and e.get("via") != "inprocess":
            pending.append(i)
        elif e["ev"] == "msg.in" and pending:
            same = [j for j in pending if events[j].get("via") == e.get("via")]
            j = (same or pending)[0]
            pending.remove(j)
            pairs[i] = j
    return pairs


class _Diagram:
    """A text sequence diagram: one lifeline per runtime, one row per hop or local event;
    what happened at a lifeline is marked on it and told on the right."""

    GUTTER = 14

    def __init__(self, columns: list[str], labels: Iterable[str]) -> None:
        self.columns = columns
        self.width = max([12, *(len(c) + 4 for c in columns), *(len(t) + 6 for t in labels)])
        self.rows: list[Text] = []

    def center(self, col: int) -> int:
        return self.GUTTER + col * self.width + self.width // 2

    def _base(self, gutter: str) -> list[str]:
        chars = list(gutter[: self.GUTTER - 1].ljust(self.GUTTER) + " " * self.width * len(self.columns))
        for c in range(len(self.columns)):
            chars[self.center(c)] = "│"
        return chars

    def _row(self, chars: list[str], note: str, style: str) -> None:
        line = "".join(chars).rstrip()
        if note:
            line = f"{line.ljust(self.GUTTER + self.width * len(self.columns))}  {note}"
        self.rows.append(Text(line, style=style))

    def header(self) -> Text:
        chars = list(" " * (self.GUTTER + self.width * len(self.columns)))
        for c, name in enumerate(self.columns):
            start = self.center(c) - len(name) // 2
            chars[start:start + len(name)] = name
        return Text("".join(chars).rstrip(), style="bold")

    def arrow(self, gutter: str, src: int | None, dst: int | None, label: str, note: str = "",
              style: str = "") -> None:
        chars = self._base(gutter)
        if src is not None and dst is not None and src != dst:
            a, b = sorted((self.center(src), self.center(dst)))
            span = list("─" * (b - a - 1))
            text = f" {label} "
            at = (len(span) - len(text)) // 2
            span[at:at + len(text)] = text
            if dst > src:
                span[-1] = "▶"
            else:
                span[0] = "◀"
            chars[a + 1:b] = span
        else:
            # to its own topic, or a hop whose other end left no trace
            c = self.center(src if src is not None else dst or 0)
            chars[c] = "↺" if src == dst else "▷" if dst is None else "▶"
            note = f"{label}: {note}" if note else label
        self._row(chars, note, style)

    def mark(self, gutter: str, col: int, symbol: str, note: str, style: str = "") -> None:
        chars = self._base(gutter)
        chars[self.center(col)] = symbol
        self._row(chars, note, style)


def render_message(run: Run, prefix: str) -> Group:
    msg_id = find_message(run, prefix)
    ids = conversation(run, msg_id)
    per_msg = {m: message_events(run, m) for m in ids}
    columns = list(dict.fromkeys(e.get("rt", "?") for m in ids for e in per_msg[m]))
    col = {rt: i for i, rt in enumerate(columns)}
    diagram = _Diagram(columns, (hop_label(e) for m in ids for e in per_msg[m]
                                 if e["ev"] in ("msg.out", "msg.in")))
    table = Table(title="events", show_lines=False)
    for name in ("msg", "hops", "time", "runtime", "event", "detail"):
        table.add_column(name, no_wrap=name != "detail")
    parts: list[Any] = []
    for m in ids:
        events = per_msg[m]
        first = events[0]
        diagram.rows.append(Text(
            f"{first.get('type')} {m}  {first.get('from')} → {first.get('to')}"
            + (f"  corr {first['corr']}" if first.get("corr") else ""), style="bold cyan"))
        pairs = pair_hops(events)
        received = set(pairs.values())
        for i, e in enumerate(events):
            ev = e["ev"]
            gutter = f"h{e.get('hops')} {run.rel(e)}"
            rt = e.get("rt", "?")
            if ev == "msg.in":
                if i in pairs:
                    diagram.arrow(gutter, col[events[pairs[i]]["rt"]], col[rt], hop_label(events[pairs[i]]))
                else:
                    diagram.arrow(gutter, None, col[rt], hop_label(e), note=f"received at {rt}, "
                                  "sender left no msg.out", style="yellow")
            elif ev == "msg.out" and e.get("via") != "inprocess" and i not in received:
                diagram.arrow(gutter, col[rt], None, hop_label(e),
                              note=f"sent by {rt} to {e.get('target')}, never received",
                              style="yellow")
            elif ev == "msg.deliver":
                diagram.mark(gutter, col[rt], "●", f"deliver at {rt} to {e.get('to')}")
            elif ev == "msg.queue":
                diagram.mark(gutter, col[rt], "◌", f"queue at {rt}: {e.get('reason')}",
                             style="yellow")
            elif ev == "msg.drop":
                diagram.mark(gutter, col[rt], "✗", f"drop at {rt}: {e.get('reason')}",
                             style="bold red")
            table.add_row(short(m), str(e.get("hops")), run.rel(e), e.get("rt", "?"), ev,
                          _msg_detail(e))
        diagram.rows.append(Text(""))
    if len(ids) == 1 and per_msg[msg_id][0].get("type") == "rq":
        diagram.rows.append(Text("no reply in the trace", style="yellow"))
    parts.append(diagram.header())
    parts.extend(diagram.rows)
    parts.append(table)
    return Group(*parts)


def _msg_detail(e: Event) -> str:
    ev = e["ev"]
    if ev == "msg.out":
        bits = [f"{e.get('via')} →", *(str(e[k]) for k in ("addr_type", "target") if e.get(k))]
        if e.get("gbid"):
            bits.append(f"gbid {e['gbid']}")
        if e.get("resent"):
            bits.append("resent")
        return " ".join(bits)
    if ev == "msg.in":
        return f"{e.get('via')}" + (f" gbid {e['gbid']}" if e.get("gbid") else "")
    if ev in ("msg.queue", "msg.drop"):
        return f"reason {e.get('reason')}"
    return f"to {e.get('to')}"


# -- one participant -----------------------------------------------------------------------

def fate(run: Run, events: list[Event]) -> tuple[str, str]:
    """What became of one message: (outcome, where)."""
    last = events[-1]
    for e in events:
        if e["ev"] == "msg.deliver":
            return "delivered", e.get("rt", "?")
    drops = [e for e in events if e["ev"] == "msg.drop"]
    if drops:
        return f"dropped: {drops[-1].get('reason')}", drops[-1].get("rt", "?")
    if last["ev"] == "msg.queue":
        return "queued", last.get("rt", "?")
    if last["ev"] == "msg.out":
        return "sent, not received", f"{last.get('rt')} → {last.get('target')}"
    return "received, not routed", last.get("rt", "?")


def _messages_table(run: Run, msg_ids: Iterable[str], title: str) -> Table:
    table = Table(title=title)
    for name in ("msg", "type", "time", "from", "to", "hops", "outcome", "where"):
        table.add_column(name, no_wrap=name in ("msg", "type", "time", "hops"))
    for m in msg_ids:
        events = message_events(run, m)
        first = min(events, key=lambda e: (e.get("ts", 0), e.get("seq", 0)))
        outcome, where = fate(run, events)
        style = "" if outcome == "delivered" else "red" if outcome.startswith("dropped") else "yellow"
        table.add_row(short(m), str(first.get("type")), run.rel(first), str(first.get("from")),
                      str(first.get("to")), str(max((e.get("hops") or 0) for e in events)),
                      Text(outcome, style=style), where)
    return table


def render_participant(run: Run, participant: str) -> Group:
    rt_events = [e for e in run.events if e.get("ev") in RT_EVENTS and e.get("participant") == participant]
    msg_ids = list(dict.fromkeys(
        e["msg"] for e in run.events
        if e.get("ev") in MSG_EVENTS and e.get("msg") and participant in (e.get("from"), e.get("to"))))
    if not rt_events and not msg_ids:
        known = sorted({e["participant"] for e in run.events
                        if e.get("ev") in RT_EVENTS and e.get("participant")})
        close = difflib.get_close_matches(participant, known, n=5, cutoff=0.5)
        close += [p for p in known if p.startswith(participant) and p not in close][:5]
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise InspectError(f"participant {participant!r} appears nowhere in {run.path}{hint}")
    history = Table(title=f"routing entries of {participant}")
    for name in ("time", "runtime", "event", "outcome", "reason", "origin", "old → entry", "policy"):
        history.add_column(name, no_wrap=name in ("time", "event"))
    for e in rt_events:
        change = f"{entry_text(e.get('old'))} → {entry_text(e.get('entry'))}"
        if e.get("ev") == "rt.put" and e.get("outcome") == "refused":
            change += f" (offered {entry_text(e.get('new'))})"
        outcome = e.get("outcome") or ""
        history.add_row(run.rel(e), e.get("rt", "?"), e["ev"],
                        Text(outcome, style="red" if outcome.startswith("refused") else ""),
                        str(e.get("reason") or ""), str(e.get("origin") or ""), change,
                        str(e.get("policy") or ""))
    return Group(history, _messages_table(run, msg_ids, f"messages from or to {participant}"))


# -- one runtime -----------------------------------------------------------------------------

def render_runtime(run: Run, runtime: str) -> Group:
    events = [e for e in run.events if e.get("rt") == runtime]
    if not events:
        runtimes = run.runtimes()
        close = difflib.get_close_matches(runtime, runtimes, n=3, cutoff=0.5)
        hint = f"; did you mean {', '.join(close)}?" if close else f"; runtimes: {', '.join(runtimes)}"
        raise InspectError(f"runtime {runtime!r} wrote no events in {run.path}{hint}")
    kind = events[0].get("kind", "?")
    head = Text(f"{runtime} ({kind}): {len(events)} events, {run.rel(events[0])} to "
                f"{run.rel(events[-1])}", style="bold")
    counts = Table(title="events by kind")
    counts.add_column("event")
    counts.add_column("count", justify="right")
    counts.add_column("outcomes / reasons")
    by_ev: dict[str, Counter[str]] = {}
    for e in events:
        detail = e.get("outcome") or e.get("reason") or e.get("mode") or e.get("error") or ""
        by_ev.setdefault(e["ev"], Counter())[str(detail)] += 1
    for ev in sorted(by_ev):
        c = by_ev[ev]
        counts.add_row(ev, str(sum(c.values())),
                       ", ".join(f"{k} {n}" for k, n in c.most_common() if k))
    timeline = Table(title="life, links and steps")
    for name in ("time", "event", "detail"):
        timeline.add_column(name)
    for e in events:
        if e["ev"].startswith(("life.", "link.", "step")):
            timeline.add_row(run.rel(e), e["ev"], misc_detail(e))
    parts: list[Any] = [head, counts]
    if timeline.row_count:
        parts.append(timeline)
    lost = [m for m in _message_ids(e for e in events) if not _reached(run, m)]
    if lost:
        title = f"messages through {runtime} that did not reach their target"
        parts.append(_messages_table(run, lost, title))
    return Group(*parts)


def misc_detail(e: Event) -> str:
    skip = {"v", "ts", "seq", "run", "rt", "kind", "ev"}
    return ", ".join(f"{k}={v}" for k, v in e.items() if k not in skip and v not in (None, [], {}))


# -- the run ---------------------------------------------------------------------------------

def _message_ids(events: Iterable[Event]) -> list[str]:
    return list(dict.fromkeys(e["msg"] for e in events if e.get("ev") in MSG_EVENTS and e.get("msg")))


def _reached(run: Run, msg_id: str) -> bool:
    return any(e.get("ev") == "msg.deliver" for e in message_events(run, msg_id))


def render_summary(run: Run) -> Group:
    events = run.events
    runs = sorted({str(e.get("run")) for e in events})
    head = Text(f"run {', '.join(runs)} in {run.path}: {len(events)} events, "
                f"{len(run.runtimes())} runtimes, {run.rel(events[-1]) if events else '+0ms'}",
                style="bold")
    runtimes = Table(title="runtimes")
    for name in ("runtime", "kind", "events", "messages in/out", "drops", "first", "last"):
        runtimes.add_column(name)
    for rt in run.runtimes():
        mine = [e for e in events if e.get("rt") == rt]
        c = Counter(e["ev"] for e in mine)
        runtimes.add_row(rt, str(mine[0].get("kind")), str(len(mine)),
                         f"{c['msg.in']}/{c['msg.out']}", str(c["msg.drop"]),
                         run.rel(mine[0]), run.rel(mine[-1]))
    counts = Table(title="events by kind")
    counts.add_column("event")
    counts.add_column("count", justify="right")
    for ev, n in sorted(Counter(e["ev"] for e in events).items()):
        counts.add_row(ev, str(n))
    parts: list[Any] = [head, runtimes, counts]
    drops = [e for e in events if e.get("ev") == "msg.drop"]
    if drops:
        table = Table(title="drops by reason")
        for name in ("reason", "count", "runtimes"):
            table.add_column(name)
        by_reason: dict[str, list[Event]] = {}
        for e in drops:
            by_reason.setdefault(str(e.get("reason")), []).append(e)
        for reason, es in sorted(by_reason.items(), key=lambda kv: -len(kv[1])):
            table.add_row(Text(reason, style="red"), str(len(es)),
                          ", ".join(dict.fromkeys(e.get("rt", "?") for e in es)))
        parts.append(table)
    steps = [e for e in events if e.get("ev") == "step"]
    failed = [e for e in steps if e.get("outcome") == "failed"]
    if steps:
        parts.append(Text(f"steps: {len(steps) - len(failed)} ok, {len(failed)} failed",
                          style="red" if failed else "green"))
        for e in failed:
            parts.append(Text(f"  step {e.get('index')} {e.get('name')}: {e.get('detail')}", style="red"))
    lost = [m for m in _message_ids(events) if not _reached(run, m)]
    if lost:
        parts.append(_messages_table(run, lost, "messages that did not reach their target"))
    else:
        parts.append(Text("every message reached its target", style="green"))
    return Group(*parts)


def render(run_dir: str | os.PathLike[str], *, msg: str | None = None,
           participant: str | None = None, runtime: str | None = None) -> Group:
    run = load_run(run_dir)
    if msg is not None:
        return render_message(run, msg)
    if participant is not None:
        return render_participant(run, participant)
    if runtime is not None:
        return render_runtime(run, runtime)
    return render_summary(run)


def print_trace(console: Console, run_dir: str | os.PathLike[str], **options: str | None) -> None:
    # soft_wrap: a wrapped sequence diagram is unreadable; let the terminal cut it instead
    console.print(render(run_dir, **options), soft_wrap=True)
