"""What explains a request without a reply: the harness's implementation of
``trace_schema/loss.json``.

``loss.json`` is the one specification; the Spark ``lost-message`` check (``analytics``)
implements it too, in its own terms, and a differential test feeds both the same traces.
Each explanation of the file is one function here (``EXPLANATIONS``); the module refuses
to load when the ids differ from the file's, so neither side can learn a new excuse alone.

Plain functions over a run's events (``joynr_sim.trace.read_run``): no I/O, no clock.
``Exchanges(events).verdict(request_id)`` judges one request; ``verdicts()`` every one.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from trace_schema import loss_explanations, loss_spec

Event = dict[str, Any]

_SPEC = loss_spec()
ENDS = frozenset(_SPEC["ends"])
STARTS = frozenset(_SPEC["starts"])
UNACCOUNTED_DROPS = frozenset(_SPEC["unaccounted_drop_reasons"])
NETWORK = frozenset(_SPEC["network_vias"])
OUTSIDE = "life.outside"  # a party outside the run and the topics it serves
_RANK = _SPEC["order"]["rank"]
NEVER = 2**62

ANSWERED, EXPLAINED, UNEXPLAINED = "answered", "explained", "unexplained"


@dataclass(frozen=True)
class Verdict:
    request: str
    outcome: str  # answered, explained, unexplained
    why: str | None = None  # the explanation's id when explained
    last: Event | None = None  # where the exchange was last seen

    def __str__(self) -> str:
        return self.outcome if self.why is None else f"{self.outcome} ({self.why})"


@dataclass(frozen=True)
class End:
    who: str  # the runtime or broker id (life.* target)
    kind: str | None
    gbid: str | None
    ts: int
    up_ts: int | None  # when it started again, None: never


@dataclass(frozen=True)
class Hop:
    msg: str
    hops: int
    sender: str
    seq: int
    sent_ts: int
    via: str
    gbid: str | None
    target: str | None
    exp: int | None
    until: int | None  # first arrival of a later send on the same way
    receivers: frozenset[str]


def _order(e: Event) -> tuple[int, int, int, int]:
    return (e["ts"], e.get("hops") or 0, _RANK.get(e["ev"], _RANK["other"]), e["seq"])


def _accounting_drop(e: Event) -> bool:
    return e["ev"] == "msg.drop" and (e.get("reason") or "") not in UNACCOUNTED_DROPS


def _decision(e: Event) -> bool:
    return e["ev"] == "msg.out" and e.get("via") in NETWORK and not e.get("resent")


def _topic(target: str | None) -> str:
    return (target or "").partition("/")[2]


class Exchanges:
    """A run's events indexed for judging requests."""

    def __init__(self, events: Iterable[Event]) -> None:
        self.by_msg: dict[str, list[Event]] = defaultdict(list)
        self.replies: dict[str, list[str]] = defaultdict(list)  # corr -> reply message ids
        self.requests: dict[str, Event] = {}  # the first msg.out of each request
        self.ends: list[End] = []
        self.attaches: list[Event] = []
        self.topic_owners: dict[str, set[str]] = defaultdict(set)
        self.started: set[str] = set()  # every runtime or broker id that ever started
        self.outside: set[str] = set()  # parties the run uses and does not run (life.outside)
        arrivals: list[Event] = []
        starts: dict[str, list[int]] = defaultdict(list)
        downs: list[Event] = []
        for e in events:
            ev = e["ev"]
            if ev.startswith("msg.") and e.get("msg") is not None:
                bucket = self.by_msg[e["msg"]]
                if not bucket and e.get("type") == "rp" and e.get("corr") is not None:
                    self.replies[e["corr"]].append(e["msg"])
                bucket.append(e)
                if ev == "msg.out" and e.get("type") == "rq":
                    self.requests.setdefault(e["msg"], e)
                if ev == "msg.in":
                    arrivals.append(e)
            elif ev in ENDS:
                downs.append(e)
            elif ev in STARTS:
                starts[e.get("target")].append(e["ts"])
                self.started.add(e.get("target"))
                for topic in e.get("own_topics") or ():
                    self.topic_owners[topic].add(e.get("target"))
            elif ev == OUTSIDE:
                self.outside.add(e.get("target"))
                for topic in e.get("own_topics") or ():
                    self.topic_owners[topic].add(e.get("target"))
            elif ev == "link.attach" and e.get("session_present") is not None:
                self.attaches.append(e)
        for e in downs:
            later = [t for t in starts.get(e.get("target"), ()) if t >= e["ts"]]
            self.ends.append(End(e.get("target"), e.get("target_kind"), e.get("gbid"), e["ts"],
                                 min(later) if later else None))
        self._hops = self._index_hops(arrivals)

    # -- hops --------------------------------------------------------------------------
    def _index_hops(self, arrivals: list[Event]) -> dict[tuple[str, int], dict[str, Any]]:
        """Per (msg, hops) with a network decision: its latest send and whether it arrived;
        per target: who received hops sent to it and when each send first arrived."""
        self._learned: dict[str, set[str]] = defaultdict(set)
        self._arrived_sends: dict[tuple[str, str], list[tuple[int, int]]] = defaultdict(list)
        first_in: dict[tuple[str, int], Event] = {}
        for e in sorted(arrivals, key=lambda e: (e["ts"], e["seq"])):
            first_in.setdefault((e["msg"], e.get("hops") or 0), e)
        hops: dict[tuple[str, int], dict[str, Any]] = {}
        for msg, events in self.by_msg.items():
            for e in events:
                key = (msg, e.get("hops") or 0)
                if _decision(e):
                    slot = hops.setdefault(key, {"out": None, "arrived": False})
                    if slot["out"] is None or e["seq"] > slot["out"]["seq"]:
                        slot["out"] = e
            for e in events:
                key = (msg, e.get("hops") or 0)
                if key in hops and (e["ev"] == "msg.in" or _accounting_drop(e)):
                    hops[key]["arrived"] = True
        for key, slot in hops.items():
            out, got = slot["out"], first_in.get(key)
            if got is not None:
                self._learned[out.get("target")].add(got["rt"])
                self._arrived_sends[(out["rt"], out.get("target"))].append((out["seq"], got["ts"]))
        return hops

    def hop(self, msg: str, hops: int) -> Hop | None:
        slot = self._hops.get((msg, hops))
        if slot is None:
            return None
        out = slot["out"]
        target = out.get("target")
        receivers = set(self._learned.get(target, ()))
        if out.get("via") == "mqtt":
            receivers |= self.topic_owners.get(_topic(target), set())
        elif target in self.started:
            receivers.add(target)
        later = [ts for seq, ts in self._arrived_sends.get((out["rt"], target), ()) if seq > out["seq"]]
        exp = next((e.get("exp") for e in self.by_msg[msg] if e.get("exp") is not None), None)
        return Hop(msg, hops, out["rt"], out["seq"], out["ts"], out["via"], out.get("gbid"), target, exp,
                   min(later) if later else None, frozenset(receivers))

    # -- requests ----------------------------------------------------------------------
    def exchange(self, request: str) -> tuple[list[Event], list[list[Event]]]:
        """The request's events and, per reply, the reply's events."""
        own = self.by_msg.get(request, [])
        first = self.requests.get(request)
        corr = first.get("corr") if first is not None else None
        replies = [self.by_msg[r] for r in self.replies.get(corr, ())] if corr is not None else []
        return own, replies

    def last_seen(self, request: str) -> Event | None:
        own, replies = self.exchange(request)
        last = max(own, key=_order, default=None)
        reply_lasts = [max(r, key=_order) for r in replies if r]
        reply_last = max(reply_lasts, key=lambda e: (e["ts"], e.get("hops") or 0, e["seq"]), default=None)
        delivered = any(e["ev"] == "msg.deliver" for e in own)
        if reply_last is not None and (last is None or delivered or reply_last["ts"] >= last["ts"]):
            return reply_last
        return last

    def verdict(self, request: str) -> Verdict:
        own, replies = self.exchange(request)
        if any(e["ev"] == "msg.deliver" for r in replies for e in r):
            return Verdict(request, ANSWERED)
        last = self.last_seen(request)
        for name, explains in EXPLANATIONS.items():
            if explains(self, request, last):
                return Verdict(request, EXPLAINED, name, last)
        return Verdict(request, UNEXPLAINED, None, last)

    def verdicts(self) -> dict[str, Verdict]:
        return {r: self.verdict(r) for r in self.requests}

    # -- ends --------------------------------------------------------------------------
    def ends_of(self, who: Iterable[str]) -> list[End]:
        names = set(who)
        return [e for e in self.ends if e.who in names]

    def broker_ends(self, gbid: str | None) -> list[End]:
        return [e for e in self.ends if e.kind == "broker" and gbid is not None and e.gbid == gbid]


def _network_hop(x: Exchanges, last: Event | None) -> Hop | None:
    """The hop the exchange was last seen on, when it was last seen on the way."""
    if last is None or last["ev"] != "msg.out" or last.get("via") not in NETWORK:
        return None
    return x.hop(last["msg"], last.get("hops") or 0)


def _in_flight(end: End, hop: Hop) -> bool:
    return hop.sent_ts <= end.ts <= (hop.exp if hop.exp is not None else NEVER) \
        and end.ts < (hop.until if hop.until is not None else NEVER)


def _down_when_sent(end: End, hop: Hop) -> bool:
    return end.ts < hop.sent_ts < (end.up_ts if end.up_ts is not None else NEVER)


# -- the explanations of loss.json, one function each ------------------------------------
def drop_recorded(x: Exchanges, request: str, last: Event | None) -> bool:
    own, replies = x.exchange(request)
    return any(_accounting_drop(e) for events in (own, *replies) for e in events)


def holder_ended(x: Exchanges, request: str, last: Event | None) -> bool:
    if last is None or (last["ev"] == "msg.out" and last.get("via") in NETWORK):
        return False  # on the way: explained, if at all, as its hop is
    exp = last.get("exp")
    return any(last["ts"] <= e.ts <= (exp if exp is not None else NEVER) for e in x.ends_of([last["rt"]]))


def ws_end(x: Exchanges, request: str, last: Event | None) -> bool:
    hop = _network_hop(x, last)
    return hop is not None and hop.via == "ws" and \
        any(_in_flight(e, hop) for e in x.ends_of({hop.sender, *hop.receivers}))


def ws_receiver_down(x: Exchanges, request: str, last: Event | None) -> bool:
    hop = _network_hop(x, last)
    return hop is not None and hop.via == "ws" and \
        any(_down_when_sent(e, hop) for e in x.ends_of({hop.sender, *hop.receivers}))


def broker_ended(x: Exchanges, request: str, last: Event | None) -> bool:
    hop = _network_hop(x, last)
    return hop is not None and hop.via == "mqtt" and any(_in_flight(e, hop) for e in x.broker_ends(hop.gbid))


def broker_down(x: Exchanges, request: str, last: Event | None) -> bool:
    hop = _network_hop(x, last)
    return hop is not None and hop.via == "mqtt" and any(_down_when_sent(e, hop) for e in x.broker_ends(hop.gbid))


def session_lost(x: Exchanges, request: str, last: Event | None) -> bool:
    hop = _network_hop(x, last)
    if hop is None or hop.via != "mqtt":
        return False
    for end in x.broker_ends(hop.gbid):
        if end.ts > hop.sent_ts:
            continue
        for who in hop.receivers:
            mine = [a for a in x.attaches if a["rt"] == who and a.get("gbid") == hop.gbid]
            if not any(a["ts"] < end.ts for a in mine):
                continue  # it had no session at that broker to lose
            after = [a for a in mine if a["ts"] >= end.ts]
            if not after:
                continue
            first = min(after, key=lambda a: (a["ts"], a["seq"]))
            if first.get("session_present") is False and hop.sent_ts < first["ts"]:
                return True
    return False


def receiver_gone(x: Exchanges, request: str, last: Event | None) -> bool:
    hop = _network_hop(x, last)
    return hop is not None and hop.via == "mqtt" and \
        any(e.up_ts is None and _in_flight(e, hop) for e in x.ends_of(hop.receivers))


def receiver_outside(x: Exchanges, request: str, last: Event | None) -> bool:
    hop = _network_hop(x, last)
    return hop is not None and hop.via == "mqtt" and bool(x.outside & set(hop.receivers))


def explaining_ends(x: Exchanges, verdict: Verdict) -> list[End]:
    """The crashes and stops behind an explained verdict, as its explanation saw them, for a
    reader to be told which end it was; none for a recorded drop, nor for a verdict that is
    not explained."""
    last, why = verdict.last, verdict.why
    if verdict.outcome != EXPLAINED or last is None:
        return []
    if why == "holder-ended":
        exp = last.get("exp")
        return [e for e in x.ends_of([last["rt"]]) if last["ts"] <= e.ts <= (exp if exp is not None else NEVER)]
    hop = _network_hop(x, last)
    if hop is None:
        return []
    if why == "ws-end":
        return [e for e in x.ends_of({hop.sender, *hop.receivers}) if _in_flight(e, hop)]
    if why == "ws-receiver-down":
        return [e for e in x.ends_of({hop.sender, *hop.receivers}) if _down_when_sent(e, hop)]
    if why == "broker-ended":
        return [e for e in x.broker_ends(hop.gbid) if _in_flight(e, hop)]
    if why == "broker-down":
        return [e for e in x.broker_ends(hop.gbid) if _down_when_sent(e, hop)]
    if why == "session-lost":
        return [e for e in x.broker_ends(hop.gbid) if e.ts <= hop.sent_ts]
    if why == "receiver-gone":
        return [e for e in x.ends_of(hop.receivers) if e.up_ts is None and _in_flight(e, hop)]
    return []


Explanation = Callable[[Exchanges, str, Event | None], bool]
EXPLANATIONS: dict[str, Explanation] = {
    "drop-recorded": drop_recorded,
    "holder-ended": holder_ended,
    "ws-end": ws_end,
    "ws-receiver-down": ws_receiver_down,
    "broker-ended": broker_ended,
    "broker-down": broker_down,
    "session-lost": session_lost,
    "receiver-gone": receiver_gone,
    "receiver-outside": receiver_outside,
}

if tuple(EXPLANATIONS) != loss_explanations():
    raise ImportError(f"joynr_sim.loss implements {list(EXPLANATIONS)}, trace_schema/loss.json specifies "
                      f"{list(loss_explanations())}: the two must name the same explanations in the same order")
