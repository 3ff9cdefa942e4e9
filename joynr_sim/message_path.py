"""A message's path through the runtimes, as its trace events tell it: which runtime sent it
to which over what transport and GBID, and what became of it in the end.

Every runtime writes its own trace, so no single event says where a message went: its
path is put together from the ``msg.*`` events that carry its id, across all runtimes.
``joynr-sim trace`` and ``joynr-sim report`` both show paths and must agree on them, so
this module is the one place that gathers, orders and pairs those events; it only reads
events (as ``joynr_sim.trace.read_run`` returns them) and leaves drawing to its callers.

Runtimes share a millisecond clock, so events of different runtimes within one millisecond
cannot be ordered by time. A message's own events are ordered by its hop counter first:
a runtime records ``msg.in`` with the counter as received and everything after it with the
counter plus one, so the counter orders the hops even where the clock cannot.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

Event = dict[str, Any]

MSG_EVENTS = ("msg.out", "msg.in", "msg.deliver", "msg.queue", "msg.drop")

FateKind = Literal["delivered", "dropped", "queued", "not-received", "not-routed"]


def is_message_event(e: Event) -> bool:
    """A ``msg.*`` event of a message with an id: a drop of bytes that could not be decoded
    has none, and belongs to no path."""
    return e.get("ev") in MSG_EVENTS and isinstance(e.get("msg"), str) and bool(e["msg"])


def position(e: Event) -> tuple[float, int, int]:
    """Where an event sits on its message's path: by hop counter, then time, then sequence.

    ``msg.in`` sits between the ``msg.out`` that sent it (same counter) and what its
    receiver did next (counter plus one). A drop may carry no counter (the message could
    not be read that far); it sorts as hop 0."""
    hops = e.get("hops")
    hops = hops if isinstance(hops, int) else 0
    return (hops + 0.5 if e.get("ev") == "msg.in" else hops, e.get("ts", 0), e.get("seq", 0))


def earliest(e: Event) -> tuple[int, int]:
    """Order by time alone: what the trace saw first, whatever its hop counter."""
    return (e.get("ts", 0), e.get("seq", 0))


def hop_label(e: Event) -> str:
    """A hop as the diagrams label it: its transport, GBID and whether it was re-sent from
    the outbox after a link resumed rather than routed anew."""
    label = str(e.get("via") or "?")
    if e.get("gbid"):
        label += f" {e['gbid']}"
    if e.get("resent"):
        label += " resent"
    return label


@dataclass(frozen=True)
class Hop:
    """The message going from one runtime to the next. Either end may be missing from the
    trace: ``received`` is None when the ``msg.out`` was never received (lost on the way,
    or its receiver left no trace), ``sent`` is None when a ``msg.in`` has no ``msg.out``."""

    sent: Event | None
    received: Event | None

    def __post_init__(self) -> None:
        if self.sent is None and self.received is None:
            raise ValueError("a hop needs its msg.out or its msg.in")

    @property
    def at(self) -> Event:
        """The event whose hop counter and time the hop is shown with: its receipt, if any."""
        at = self.received if self.received is not None else self.sent
        assert at is not None  # __post_init__ refuses a hop without either
        return at

    @property
    def sender(self) -> str | None:
        return None if self.sent is None else self.sent["rt"]

    @property
    def receiver(self) -> str | None:
        return None if self.received is None else self.received["rt"]

    @property
    def label(self) -> str:
        """Labelled as sent (the sender's transport, GBID and ``resent``), else as received."""
        return hop_label(self.sent if self.sent is not None else self.at)


@dataclass(frozen=True)
class Decision:
    """What a runtime's message router did with the message where it was: deliver it to a
    provider or proxy, queue it until a route appears, or drop it (with the reason)."""

    event: Event

    @property
    def at(self) -> Event:
        return self.event

    @property
    def kind(self) -> str:
        """``deliver``, ``queue`` or ``drop``."""
        return self.event["ev"].removeprefix("msg.")


@dataclass(frozen=True)
class Fate:
    """What became of a message in the end.

    ``delivered`` wins over everything (a delivered message may still have a duplicate
    dropped elsewhere); else the last drop; else how its path ends: waiting in a queue,
    ``not-received`` (its last hop was sent and never received) or ``not-routed`` (received,
    and nothing written about it after)."""

    kind: FateKind
    runtime: str  # where it ended: delivered, dropped, queued or last received; sent, for one not received
    reason: str | None = None  # why it was dropped
    target: str | None = None  # the next hop a message not received was sent to

    @property
    def outcome(self) -> str:
        return {"delivered": "delivered", "dropped": f"dropped: {self.reason}", "queued": "queued",
                "not-received": "sent, not received", "not-routed": "received, not routed"}[self.kind]

    @property
    def where(self) -> str:
        return f"{self.runtime} → {self.target}" if self.kind == "not-received" else self.runtime


def pair_hops(events: list[Event]) -> dict[int, int]:
    """``msg.in`` index -> index of the ``msg.out`` that sent it, over events in path order.

    A receipt is paired with the earliest send not yet received, preferring one over the
    same transport: a runtime that sends one message over MQTT and over a WebSocket (a
    multicast to a remote and a local receiver) must not have the two receipts swapped.
    In-process hand-overs are no hops and are never paired."""
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


def _steps(events: list[Event]) -> tuple[Hop | Decision, ...]:
    """Hops and decisions in path order. A hop is placed at its receipt, a send nobody
    received at the send; a received send and an in-process hand-over have no place of
    their own."""
    pairs = pair_hops(events)
    received = set(pairs.values())
    steps: list[Hop | Decision] = []
    for i, e in enumerate(events):
        ev = e["ev"]
        if ev == "msg.in":
            steps.append(Hop(events[pairs[i]] if i in pairs else None, e))
        elif ev == "msg.out":
            if e.get("via") != "inprocess" and i not in received:
                steps.append(Hop(e, None))
        else:
            steps.append(Decision(e))
    return tuple(steps)


def _fate(events: list[Event]) -> Fate:
    for e in events:
        if e["ev"] == "msg.deliver":
            return Fate("delivered", e["rt"])
    drops = [e for e in events if e["ev"] == "msg.drop"]
    if drops:
        return Fate("dropped", drops[-1]["rt"], reason=drops[-1].get("reason"))
    last = events[-1]
    if last["ev"] == "msg.queue":
        return Fate("queued", last["rt"])
    if last["ev"] == "msg.out":
        return Fate("not-received", last["rt"], target=last.get("target"))
    return Fate("not-routed", last["rt"])


@dataclass(frozen=True)
class MessagePath:
    """One message's events across all runtimes, in path order, with the hops and
    decisions they make up and its fate."""

    msg: str
    events: tuple[Event, ...]  # ordered by ``position``
    steps: tuple[Hop | Decision, ...]
    fate: Fate

    @property
    def head(self) -> Event:
        """The first event on the path: the one that names the message in a diagram."""
        return self.events[0]

    @property
    def first(self) -> Event:
        """The event the trace saw first: when the message is listed as sent."""
        return min(self.events, key=earliest)

    @property
    def type(self) -> Any:
        return self.head.get("type")

    @property
    def corr(self) -> str | None:
        """The request/reply correlation id: the first one its events carry."""
        return next((e["corr"] for e in self.events if isinstance(e.get("corr"), str) and e["corr"]), None)

    @property
    def hops(self) -> int:
        """The highest hop counter it reached."""
        return max((e["hops"] for e in self.events if isinstance(e.get("hops"), int)), default=0)

    @property
    def delivered(self) -> bool:
        return self.fate.kind == "delivered"


def message_paths(events: Iterable[Event]) -> dict[str, MessagePath]:
    """Every message's path, by id, in the order the messages first appear in ``events``."""
    by_msg: dict[str, list[Event]] = {}
    for e in events:
        if is_message_event(e):
            by_msg.setdefault(e["msg"], []).append(e)
    paths = {}
    for m, mine in by_msg.items():
        mine.sort(key=position)
        paths[m] = MessagePath(m, tuple(mine), _steps(mine), _fate(mine))
    return paths


@dataclass(frozen=True)
class Conversation:
    """A request with its reply (the messages sharing a correlation id), request first; any
    other message is a conversation of its own."""

    paths: tuple[MessagePath, ...]

    @property
    def ids(self) -> list[str]:
        return [p.msg for p in self.paths]

    @property
    def runtimes(self) -> list[str]:
        """Every runtime on the way, in the order the paths reach them: a diagram's lifelines."""
        return list(dict.fromkeys(e["rt"] for p in self.paths for e in p.events))

    @property
    def unanswered(self) -> bool:
        """A request with no reply in the trace."""
        return self.paths[0].type == "rq" and not any(p.type == "rp" for p in self.paths)

    @property
    def failing(self) -> bool:
        """A message of it was not delivered, or a request went unanswered."""
        return self.unanswered or not all(p.delivered for p in self.paths)


def conversations(paths: dict[str, MessagePath]) -> list[Conversation]:
    """The conversations of ``paths``, in the order their first message appears."""
    groups: dict[str, list[MessagePath]] = {}
    for m, p in paths.items():
        corr = p.corr
        groups.setdefault(f"corr:{corr}" if corr else f"msg:{m}", []).append(p)

    def request_first(p: MessagePath) -> tuple[int, int, int]:
        first = p.first
        return (0 if first.get("type") == "rq" else 1, *earliest(first))

    return [Conversation(tuple(sorted(group, key=request_first))) for group in groups.values()]


def conversation_of(paths: dict[str, MessagePath], msg: str) -> Conversation:
    """The conversation ``msg`` takes part in."""
    corr = paths[msg].corr
    if corr is None:
        return Conversation((paths[msg],))
    return next(c for c in conversations(paths) if msg in c.ids)
