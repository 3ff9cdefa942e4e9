"""Reading a run's trace for people: ``joynr-sim trace RUN [--msg ID | --participant ID |
--runtime ID]``.

Four views of one run (a message, a participant, a runtime, the summary), one section each
below, sharing the loading and the formatting helpers. A message's path and fate are
``joynr_sim.message_path``'s, its text diagram ``joynr_sim.inspect_diagram``'s.
"""

from __future__ import annotations

import difflib
import json
import os
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console, Group
from rich.table import Table
from rich.text import Text

from .inspect_diagram import sequence_diagram
from .message_path import Event, MessagePath, conversation_of, is_message_event, message_paths
from .participant_names import NAME_PREFIX, ids_by_name, scenario_names
from .trace import read_run

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


# -- one message -------------------------------------------------------------------------

def find_message(run: Run, paths: dict[str, MessagePath], prefix: str) -> str:
    """The message id that ``prefix`` starts, or InspectError naming the candidates."""
    ids = list(paths)
    if prefix in paths:
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


def render_message(run: Run, prefix: str) -> Group:
    paths = message_paths(run.events)
    conv = conversation_of(paths, find_message(run, paths, prefix))
    table = Table(title="events", show_lines=False)
    for name in ("msg", "hops", "time", "runtime", "event", "detail"):
        table.add_column(name, no_wrap=name != "detail")
    for path in conv.paths:
        for e in path.events:
            table.add_row(short(path.msg), str(e.get("hops")), run.rel(e), e.get("rt", "?"), e["ev"],
                          _msg_detail(e))
    return Group(*sequence_diagram(conv, run.rel), table)


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

_UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


def participant_names(run: Run) -> dict[str, list[str]]:
    """The scenario's provider and proxy names, each with the participant ids it stood for
    (``joynr_sim.participant_names``)."""
    return ids_by_name(scenario_names(run.events))


def resolve_participant(run: Run, participant: str) -> str:
    """A participant id, or ``@name``: the id of the scenario's provider or proxy of that name."""
    if not participant.startswith(NAME_PREFIX):
        return participant
    names = participant_names(run)
    ids = names.get(participant[len(NAME_PREFIX):], [])
    if len(ids) == 1:
        return ids[0]
    if ids:
        raise InspectError(f"{participant} stood for {len(ids)} participants in {run.path}: {', '.join(ids)}; "
                           "give one of them")
    known = ", ".join(NAME_PREFIX + n for n in sorted(names)) or "none"
    raise InspectError(f"no provider or proxy named {participant[len(NAME_PREFIX):]!r} in {run.path} "
                       f"(names: {known})")


def labeller(run: Run) -> Any:
    """Participant ids as people read them: ``@name`` for a scenario's provider or proxy, a
    generated id cut to its first 8 characters and "…", any other id as it is."""
    by_id = {pid: NAME_PREFIX + name for name, ids in participant_names(run).items() for pid in ids}

    def label(pid: Any) -> str:
        text = str(pid)
        return by_id.get(text) or (text[:8] + "…" if _UUID.match(text) else text)
    return label


def _messages_table(run: Run, paths: Iterable[MessagePath], title: str) -> Table:
    label = labeller(run)
    table = Table(title=title)
    for name in ("msg", "type", "time", "from → to", "hops", "outcome", "where"):
        table.add_column(name, no_wrap=name in ("msg", "type", "time", "hops"), overflow="fold")
    for path in paths:
        first, fate = path.first, path.fate
        style = "" if fate.kind == "delivered" else "red" if fate.kind == "dropped" else "yellow"
        table.add_row(short(path.msg), str(first.get("type")), run.rel(first),
                      f"{label(first.get('from'))} → {label(first.get('to'))}", str(path.hops),
                      Text(fate.outcome, style=style), fate.where)
    return table


def _participant_events(run: Run, participant: str) -> tuple[list[Event], list[str]]:
    rt_events = [e for e in run.events if e.get("ev") in RT_EVENTS and e.get("participant") == participant]
    msg_ids = list(dict.fromkeys(
        e["msg"] for e in run.events if is_message_event(e) and participant in (e.get("from"), e.get("to"))))
    if not rt_events and not msg_ids:
        known = sorted({e["participant"] for e in run.events
                        if e.get("ev") in RT_EVENTS and e.get("participant")})
        close = difflib.get_close_matches(participant, known, n=5, cutoff=0.5)
        close += [p for p in known if p.startswith(participant) and p not in close][:5]
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise InspectError(f"participant {participant!r} appears nowhere in {run.path}{hint}")
    return rt_events, msg_ids


def render_participant(run: Run, participant: str) -> Group:
    """Its routing entries and messages, in columns that fit 80 (cells wrap at their spaces,
    a long address folds), the policy in the title when every event has the same one."""
    participant = resolve_participant(run, participant)
    rt_events, msg_ids = _participant_events(run, participant)
    policies = {str(e.get("policy") or "") for e in rt_events}
    one_policy = len(policies) == 1
    title = f"routing entries of {participant}" + (f" (policy {policies.pop()})" if one_policy and rt_events else "")
    history = Table(title=title)
    for name in ("time", "runtime", "event", "why", "old → entry"):
        history.add_column(name, no_wrap=name == "time", overflow="fold")
    for e in rt_events:
        change = f"{entry_text(e.get('old'))} → {entry_text(e.get('entry'))}"
        if e.get("ev") == "rt.put" and e.get("outcome") == "refused":
            change += f" (offered {entry_text(e.get('new'))})"
        outcome = e.get("outcome") or ""
        why = " ".join(str(x) for x in (e.get("reason"), e.get("origin") and f"via {e['origin']}",
                                            None if one_policy else e.get("policy")) if x)
        history.add_row(run.rel(e), e.get("rt", "?"),
                        Text(f"{e['ev']} {outcome}".strip(),
                             style="red" if outcome.startswith("refused") else ""), why, change)
    paths = message_paths(run.events)
    return Group(history, _messages_table(run, (paths[m] for m in msg_ids), f"messages from or to {participant}"))


def participant_json(run: Run, participant: str) -> dict[str, Any]:
    participant = resolve_participant(run, participant)
    rt_events, msg_ids = _participant_events(run, participant)
    paths = message_paths(run.events)
    names = [NAME_PREFIX + n for n, ids in participant_names(run).items() if participant in ids]
    return {"run": str(run.path), "participant": participant, "names": names, "routing": rt_events,
            "messages": [{"msg": m, "type": paths[m].first.get("type"), "ts": paths[m].first.get("ts"),
                          "from": paths[m].first.get("from"), "to": paths[m].first.get("to"),
                          "hops": paths[m].hops, "outcome": paths[m].fate.outcome, "where": paths[m].fate.where}
                         for m in msg_ids]}


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
    paths = message_paths(run.events)
    # in the order they first passed this runtime
    lost = [paths[m] for m in dict.fromkeys(e["msg"] for e in events if is_message_event(e))
            if not paths[m].delivered]
    if lost:
        title = f"messages through {runtime} that did not reach their target"
        parts.append(_messages_table(run, lost, title))
    return Group(*parts)


def misc_detail(e: Event) -> str:
    skip = {"v", "ts", "seq", "run", "rt", "kind", "ev"}
    return ", ".join(f"{k}={v}" for k, v in e.items() if k not in skip and v not in (None, [], {}))


# -- the run ---------------------------------------------------------------------------------

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
    lost = [p for p in message_paths(events).values() if not p.delivered]
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


def trace_json(run_dir: str | os.PathLike[str], *, msg: str | None = None,
               participant: str | None = None, runtime: str | None = None) -> dict[str, Any]:
    """The view's full values, for ``--json``: the events behind it, ids uncut."""
    run = load_run(run_dir)
    if participant is not None:
        return participant_json(run, participant)
    if msg is not None:
        paths = message_paths(run.events)
        conv = conversation_of(paths, find_message(run, paths, msg))
        return {"run": str(run.path), "messages": [{"msg": p.msg, "events": p.events} for p in conv.paths]}
    if runtime is not None:
        render_runtime(run, runtime)  # the same refusal for a runtime that wrote nothing
        return {"run": str(run.path), "runtime": runtime, "events": [e for e in run.events if e.get("rt") == runtime]}
    runtimes = []
    for rt in run.runtimes():
        mine = [e for e in run.events if e.get("rt") == rt]
        c = Counter(e["ev"] for e in mine)
        runtimes.append({"runtime": rt, "kind": mine[0].get("kind"), "events": len(mine), "msg_in": c["msg.in"],
                         "msg_out": c["msg.out"], "drops": c["msg.drop"], "first_ts": mine[0].get("ts"),
                         "last_ts": mine[-1].get("ts")})
    return {"run": str(run.path), "events": len(run.events), "runtimes": runtimes,
            "events_by_kind": dict(sorted(Counter(e["ev"] for e in run.events).items())),
            "participants": {NAME_PREFIX + n: ids for n, ids in participant_names(run).items()}}


def print_trace_json(run_dir: str | os.PathLike[str], **options: str | None) -> None:
    print(json.dumps(trace_json(run_dir, **options), indent=2, default=str))


def print_trace(console: Console, run_dir: str | os.PathLike[str], **options: str | None) -> None:
    # soft_wrap: a wrapped sequence diagram is unreadable; let the terminal cut it instead
    console.print(render(run_dir, **options), soft_wrap=True)
