"""Shrinking a failing scenario: the smallest one that still fails the same way.

Each round tries, cheapest idea first: the schedule without the steps that only wait,
without the proxies nothing uses, without the runtimes and backends no step names (all at
once, then each alone); without whole groups of steps (registrations, proxies and calls,
calls, subscriptions, the runtimes' lifecycle, broker faults, link faults, clock skews);
then delta debugging over the steps (drop halves, quarters, ... single steps); then pairs
of steps (those naming the same runtime, provider, proxy, subscription or GBID first); then
whole runtimes and backends one by one; then simpler arguments (all at once, then one by
one: fewer GBIDs, a shorter advance or delay, a generated participant id for a fixed one, a
shorter TTL, a subscription without its quality of service or partitions, one publication).
Rounds repeat while one of them made the scenario smaller.

Every idea is a *pass*: candidates made from the scenario as it is, of which the first that
still fails is kept (``trials.Trials``: the candidates of a pass may be judged together,
``batch`` at a time, with the same result as one at a time). A candidate is made valid
before it costs a run (``fit.consistent``): a step that names what a dropped step made, or
that no longer fits the runtimes' states, goes with it; a candidate seen before is not run
again. ``fails_many`` (or ``still_fails``, one candidate at a time) is the only thing that
runs anything, so the shrinker itself is pure.
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Callable, Iterator
from typing import Any

from .fit import CLUSTER_CONTROLLER, LINK_FAULTS, RUNTIME_STEPS, checks_something, consistent, kind_args, names
from .trials import FailsMany, ShrinkStats, Trials

__all__ = ["ShrinkStats", "checks_something", "consistent", "shrink"]

Doc = dict[str, Any]

WAIT_STEPS = ("advance", "wait")
MAX_PAIR_STEPS = 16  # above this, delta debugging has more to do than pairs would
SHORT_TTL_MS = 1_000
SHORT_DELAY_MS = 50
# Kinds of steps dropped all together, one candidate per group.
STEP_GROUPS = {"registrations": ("register", "unregister"), "proxies and calls": ("proxy", "call", "one_way"),
               "calls": ("call", "one_way"),
               "subscriptions": ("subscribe", "unsubscribe", "publish", "expect_publications"),
               "runtime lifecycle": RUNTIME_STEPS,
               "broker faults": ("crash_broker", "restart_broker", "stop_broker", "start_broker"),
               "link faults": (*LINK_FAULTS, "heal", "cut"), "clock skews": ("clock_skew",)}


def _named_runtimes(doc: Doc) -> set[str]:
    named = set().union(*(names(s) for s in doc["steps"])) if doc["steps"] else set()
    runtimes = {r["id"]: r for r in doc["runtimes"]}
    named &= set(runtimes)
    return named | {runtimes[rt]["cc"] for rt in named if runtimes[rt]["kind"] != CLUSTER_CONTROLLER}


def _keep_runtimes(doc: Doc, keep: set[str]) -> Doc | None:
    kept = [r for r in doc["runtimes"] if r["id"] in keep and r.get("cc", r["id"]) in keep]
    if len(kept) == len(doc["runtimes"]) or not any(r["kind"] == CLUSTER_CONTROLLER for r in kept):
        return None
    return consistent({**doc, "runtimes": kept})


def _keep_backends(doc: Doc, keep: list[str]) -> Doc | None:
    if not keep or len(keep) == len(doc["backends"]):
        return None
    return consistent({**doc, "backends": keep})


def without_waits(doc: Doc) -> Doc | None:
    """The schedule without the steps that only wait."""
    return consistent({**doc, "steps": [s for s in doc["steps"] if kind_args(s)[0] not in WAIT_STEPS]})


def without_uncalled_proxies(doc: Doc) -> Doc | None:
    """Without the proxies no call or subscription uses."""
    used = {kind_args(s)[1].get("proxy") for s in doc["steps"] if isinstance(kind_args(s)[1], dict)}
    return consistent({**doc, "steps": [s for s in doc["steps"]
                                        if kind_args(s)[0] != "proxy" or kind_args(s)[1]["name"] in used]})


def without_unnamed_runtimes(doc: Doc) -> Doc | None:
    """Only the runtimes some step names (and their cluster controllers)."""
    return _keep_runtimes(doc, _named_runtimes(doc))


def without_unnamed_backends(doc: Doc) -> Doc | None:
    """Only the backends some step names, or the first when none is named."""
    named = set().union(*(names(s) for s in doc["steps"])) if doc["steps"] else set()
    keep = [g for g in doc["backends"] if g in named] or doc["backends"][:1]
    return _keep_backends(doc, keep)


TIDIES = (without_waits, without_uncalled_proxies, without_unnamed_runtimes, without_unnamed_backends)


def without_anything_unneeded(doc: Doc) -> Doc | None:
    """Every tidying at once: no waits, no unused proxies, no unnamed runtimes or backends."""
    best = doc
    for tidy in TIDIES:
        best = tidy(best) or best
    return None if best == doc else best


def without_group(doc: Doc, kinds: tuple[str, ...]) -> Doc | None:
    if not any(kind_args(s)[0] in kinds for s in doc["steps"]):
        return None
    return consistent({**doc, "steps": [s for s in doc["steps"] if kind_args(s)[0] not in kinds]})


def _without_runtime(doc: Doc, runtime: str) -> Doc | None:
    return _keep_runtimes(doc, {r["id"] for r in doc["runtimes"]} - {runtime})


def _without_backend(doc: Doc, gbid: str) -> Doc | None:
    return _keep_backends(doc, [g for g in doc["backends"] if g != gbid])


def _simpler(kind: str, args: Any) -> list[Any]:
    """Simpler arguments for one step, one candidate each."""
    simpler: list[Any] = []
    if kind == "advance" and isinstance(args, int) and args > 500:
        simpler.append(args // 10 if args >= 5_000 else 500)
    if not isinstance(args, dict):
        return simpler
    if "gbids" in args and len(args["gbids"]) > 1:
        simpler.append({**args, "gbids": args["gbids"][:1]})
    if "gbids" in args:
        simpler.append({k: v for k, v in args.items() if k != "gbids"})
    if kind == "register" and "participant_id" in args:
        simpler.append({k: v for k, v in args.items() if k != "participant_id"})
    if kind in ("call", "one_way") and args.get("ttl_ms", 10_000) > SHORT_TTL_MS:
        # shorter, not absent (10 s): a call that is not answered costs a shrink its TTL
        simpler.append({**args, "ttl_ms": SHORT_TTL_MS})
    if kind == "delay" and (args.get("ms", 0) > SHORT_DELAY_MS or args.get("jitter_ms")):
        simpler.append({"runtime": args["runtime"], **({"gbid": args["gbid"]} if "gbid" in args else {}),
                        "ms": min(args.get("ms", 0), SHORT_DELAY_MS)})
    for extra in ("qos", "partitions", "filter"):
        if kind == "subscribe" and extra in args:
            simpler.append({k: v for k, v in args.items() if k != extra})
    if kind == "publish" and args.get("count", 1) > 1:
        simpler.append({**args, "count": 1})
    return simpler


def _simpler_arguments(doc: Doc) -> list[Doc]:
    """All steps' first simplifications at once, then one candidate per simplification."""
    out = []
    at_once = copy.deepcopy(doc)
    for n, step in enumerate(doc["steps"]):
        kind, args = kind_args(step)
        # at once: the simplification that keeps the most (fewer GBIDs before none)
        firsts = [s for s in _simpler(kind, args)
                  if not (isinstance(args, dict) and "participant_id" in args and "participant_id" not in s)]
        if firsts:
            at_once["steps"][n] = {kind: firsts[0]}
    if at_once != doc:
        out.append(at_once)
    for n, step in enumerate(doc["steps"]):
        kind, args = kind_args(step)
        for s in _simpler(kind, args):
            candidate = copy.deepcopy(doc)
            candidate["steps"][n] = {kind: s}
            out.append(candidate)
    return out


def _pairs(n: int, steps: list[dict]) -> Iterator[tuple[int, int]]:
    """Pairs of step positions: those naming something in common first, then the rest."""
    named = [names(s) for s in steps]
    pairs = list(itertools.combinations(range(n), 2))
    related = [(i, j) for i, j in pairs if named[i] & named[j]]
    yield from related
    yield from (p for p in pairs if p not in set(related))


def shrink(doc: Doc, still_fails: Callable[[Doc], bool] | None = None, *, fails_many: FailsMany | None = None,
           batch: int = 1, max_tries: int = 200, progress: Callable[[ShrinkStats, Doc], None] | None = None,
           out_of_time: Callable[[], bool] = lambda: False,
           admissible: Callable[[Doc], bool] = lambda doc: True) -> tuple[Doc, ShrinkStats]:
    """The smallest scenario found that still fails within ``max_tries`` tries (and before
    ``out_of_time``); ``doc`` itself must fail. ``fails_many`` judges several candidates
    at once (up to ``batch``), ``still_fails`` one. A candidate that is not ``admissible``
    is passed over without a run."""
    if fails_many is None:
        if still_fails is None:
            raise TypeError("shrink: give still_fails or fails_many")
        one = still_fails
        fails_many = lambda docs: [one(d) for d in docs]  # noqa: E731
    stats = ShrinkStats(history=[len(doc["steps"])])
    trials = Trials(fails_many, batch=batch, max_tries=max_tries, out_of_time=out_of_time,
                    admissible=admissible, stats=stats)
    trials.mark_seen(doc)
    best = doc

    def keep(candidate: Doc) -> None:
        nonlocal best
        best = candidate
        stats.history.append(len(best["steps"]))
        if progress:
            progress(stats, best)

    def first(candidates: list[Doc | None]) -> int | None:
        found = trials.first(candidates)
        if found is not None:
            keep(candidates[found])  # type: ignore[arg-type]
        return found

    def sweep(items: list[Any], make: Callable[[Doc, Any], Doc | None]) -> bool:
        """Each item once, in order, on the scenario as the items before it left it."""
        changed, at = False, 0
        while at < len(items) and trials.budget_left():
            found = first([make(best, item) for item in items[at:]])
            if found is None:
                break
            changed, at = True, at + found + 1
        return changed

    def without(positions: range | set[int]) -> Doc | None:
        return consistent({**best, "steps": [s for i, s in enumerate(best["steps"]) if i not in positions]})

    changed = True
    while changed and trials.budget_left():
        changed = sweep([without_anything_unneeded], lambda d, tidy: tidy(d))
        if not changed:
            changed = sweep(list(TIDIES), lambda d, tidy: tidy(d))
        changed |= sweep(list(STEP_GROUPS.values()), without_group)
        # Steps: chunks from half the schedule down to single steps.
        size = max(1, len(best["steps"]) // 2)
        while size >= 1 and trials.budget_left():
            start = 0
            while start < len(best["steps"]) and trials.budget_left():
                starts = list(range(start, len(best["steps"]), size))
                found = first([without(range(s, s + size)) for s in starts])
                if found is None:
                    break
                changed, start = True, starts[found]
            size //= 2
        if not changed and len(best["steps"]) <= MAX_PAIR_STEPS:
            changed = first([without({i, j}) for i, j in _pairs(len(best["steps"]), best["steps"])]) is not None
        changed |= sweep([r["id"] for r in best["runtimes"]], _without_runtime)
        changed |= sweep(list(best["backends"]), _without_backend)
        changed |= first(list(_simpler_arguments(best))) is not None
    return best, stats
