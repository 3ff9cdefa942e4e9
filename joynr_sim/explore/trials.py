"""Trying a shrink pass's candidates: the first one, in order, that still fails.

A pass is a list of candidates made from the same scenario; the shrinker keeps the first
that still fails. Tried one at a time, each candidate costs a judgement; a judgement by
Spark costs about the same for one run as for a few dozen. So the candidates ahead of the
one tried next are judged together, up to ``batch`` at a time, and the pass is then walked
in order as if each had been tried alone: the first that fails is kept, a verdict judged
ahead but not reached yet is remembered (a later pass may reach it), and every count
(``tried``, ``skipped``, the ``max_tries`` bound) is the one-at-a-time count. With a
judgement that gives the same verdict for the same candidate, the shrink's result does not
depend on ``batch``; only the runs spent ahead (``ShrinkStats.runs``) do.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

Doc = dict[str, Any]
FailsMany = Callable[[list[Doc]], list[bool]]


@dataclass
class ShrinkStats:
    tried: int = 0  # candidates tried, counted as one at a time would
    kept: int = 0  # candidates that still failed
    skipped: int = 0  # candidates seen before, not tried again
    runs: int = 0  # candidates judged, including those judged ahead and never reached
    batches: int = 0  # judgements asked for (a Spark job each)
    history: list[int] = field(default_factory=list)  # step count after each kept candidate


def key(doc: Doc) -> str:
    return json.dumps(doc, sort_keys=True)


class Trials:
    def __init__(self, fails_many: FailsMany, *, batch: int = 1, max_tries: int = 200,
                 out_of_time: Callable[[], bool] = lambda: False,
                 admissible: Callable[[Doc], bool] = lambda doc: True, stats: ShrinkStats | None = None) -> None:
        self.fails_many = fails_many
        self.batch = max(1, batch)
        self.max_tries = max_tries
        self.out_of_time = out_of_time
        self.admissible = admissible
        self.stats = stats or ShrinkStats()
        self.seen: set[str] = set()
        self.known: dict[str, bool] = {}  # verdicts judged ahead, not reached yet

    def budget_left(self) -> bool:
        return self.stats.tried < self.max_tries and not self.out_of_time()

    def mark_seen(self, doc: Doc) -> None:
        self.seen.add(key(doc))

    def first(self, candidates: Sequence[Doc | None]) -> int | None:
        """The position of the first candidate that still fails, as trying them one at a
        time, in order, finds it; None when none does or the budget ran out first. A
        candidate that is None, not admissible or seen before is passed over without a run."""
        keys = [None if c is None or not self.admissible(c) else key(c) for c in candidates]
        for i, k in enumerate(keys):
            if k is None:
                continue
            if not self.budget_left():
                return None
            if k in self.seen:
                self.stats.skipped += 1
                continue
            if k not in self.known:
                self._judge_ahead(candidates, keys, i)
            self.seen.add(k)
            self.stats.tried += 1
            if self.known.pop(k):
                self.stats.kept += 1
                return i
        return None

    def _judge_ahead(self, candidates: Sequence[Doc | None], keys: list[str | None], at: int) -> None:
        """Judge the candidate at ``at`` and, with it, the next ones a one-at-a-time walk
        could reach within the tries left, up to ``batch`` in all."""
        room = min(self.batch, self.max_tries - self.stats.tried)
        picked: list[int] = []
        chosen: set[str] = set()
        for j in range(at, len(keys)):
            k = keys[j]
            if k is None or k in self.seen or k in self.known or k in chosen:
                continue
            picked.append(j)
            chosen.add(k)
            if len(picked) >= room:
                break
        verdicts = self.fails_many([candidates[j] for j in picked])  # type: ignore[misc]
        if len(verdicts) != len(picked):
            raise ValueError(f"fails_many: {len(verdicts)} verdicts for {len(picked)} candidates")
        self.stats.runs += len(picked)
        self.stats.batches += 1
        for j, failed in zip(picked, verdicts):
            self.known[keys[j]] = bool(failed)  # type: ignore[index]
