"""A fuzz frame's fate in the trace of the runtime it was sent to, and how the harness
reads traces as they grow."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .frames import frame_key


class TraceTail:
    """The events a runtime appended since the last read (a trace only grows)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._offset = 0

    def read(self) -> list[dict[str, Any]]:
        if not self.path.exists():
            return []
        with open(self.path, "rb") as f:
            f.seek(self._offset)
            data = f.read()
        end = data.rfind(b"\n") + 1
        self._offset += end
        return [json.loads(line) for line in data[:end].splitlines() if line.strip()]


COUNTED = "sender-limit (counted)"


class Expected:
    """The frames of one batch and the fates found for them so far. A frame's fate is a
    ``msg.in`` of its id at the runtime it was sent to, over the transport it was sent on,
    or a drop there before it was a message (no id: it did not decode; ``duplicate``: its
    id and hop count were seen; ``sender-limit``: its sender held its share). The same id
    arriving later elsewhere is routing, not a fate.

    A muted sender's messages have no line each: one ``sender-limit`` line with ``msg: null``
    and ``count: N`` stands for N of them, without saying which or over which transport. So
    the N are taken from the frames of that runtime that have no fate otherwise, once every
    other fate is in (``settle``); what is left of N was not one of this batch's frames (a
    message routed on from another runtime, a frame of an earlier batch)."""

    def __init__(self, key: Callable[[bytes], tuple[str, int] | None] = frame_key) -> None:
        # The id and hop count a frame carries, read as the run's wire writes them.
        self._key = key
        self.sent: Counter = Counter()  # (rt, via) -> frames
        self.fates: Counter = Counter()  # (rt, via) -> frames with a fate
        self._ids: Counter = Counter()  # (rt, via, id, hops) -> frames not yet seen arriving
        self.counted: Counter = Counter()  # rt -> messages counting lines stand for
        self.surplus = 0  # events that matched a frame already accounted for

    def add(self, rt: str, via: str, frame: bytes) -> None:
        self.sent[(rt, via)] += 1
        key = self._key(frame)
        if key is not None:
            self._ids[(rt, via, *key)] += 1

    def fate(self, rt: str, event: dict[str, Any]) -> str | None:
        via, mid = event.get("via"), event.get("msg")
        reason = event.get("reason") if event["ev"] == "msg.drop" else None
        if reason == "sender-limit" and mid is None:
            # Whose frames these were is decided in settle, when all other fates are in.
            self.counted[rt] += int(event.get("count") or 0)
            return None
        if event["ev"] == "msg.in" or reason in ("duplicate", "sender-limit"):
            # By id and hop count as received: a fuzz message another runtime routed on
            # arrives with a higher count, so it is not taken for a frame sent here.
            key = (rt, via, mid, event.get("hops"))
            if self._ids[key] <= 0:
                return None  # the simulation's own traffic, or a fuzz message routed on
            self._ids[key] -= 1
        elif not (event["ev"] == "msg.drop" and mid is None and via is not None):
            return None
        if self.fates[(rt, via)] >= self.sent[(rt, via)]:
            # Hostile ids collide (two frames "0"): an event of the one is taken for the
            # other. Every frame already has its fate; this one is counted apart.
            self.surplus += 1
            return None
        self.fates[(rt, via)] += 1
        return "msg.in" if event["ev"] == "msg.in" else str(event.get("reason"))

    def _missing_at(self, rt: str) -> int:
        return sum(n - self.fates[key] for key, n in self.sent.items() if key[0] == rt and self.fates[key] < n)

    def complete(self) -> bool:
        return all(self._missing_at(rt) <= self.counted[rt] for rt in {key[0] for key in self.sent})

    def settle(self) -> int:
        """Give the frames still without a fate theirs in the counting lines of their
        runtime; returns how many got one. The rest of the lines' counts is surplus."""
        settled = 0
        for key, n in sorted(self.sent.items()):
            take = min(n - self.fates[key], self.counted[key[0]])
            if take > 0:
                self.fates[key] += take
                self.counted[key[0]] -= take
                settled += take
        self.surplus += sum(self.counted.values())
        self.counted.clear()
        return settled

    def missing(self) -> dict[str, int]:
        return {f"{rt}/{via}": n - self.fates[(rt, via)] for (rt, via), n in self.sent.items()
                if self.fates[(rt, via)] < n}

