"""Shrinking a failing scenario: the smallest one that still fails the same way.

Delta debugging over the steps (drop halves, quarters, ... single steps), then whole
runtimes and backends nobody uses any more, then simpler arguments (fewer GBIDs, a shorter
advance, a generated participant id for a fixed one). A candidate is kept only when
``still_fails`` says it fails in the same way; candidates the loader would refuse (a step
that names a dropped provider, proxy or runtime) are repaired or skipped before they cost a
run. ``still_fails`` is the only thing that runs anything, so the shrinker itself is pure.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

Doc = dict[str, Any]


@dataclass
class ShrinkStats:
    tried: int = 0
    kept: int = 0
    history: list[int] = field(default_factory=list)  # step count after each kept candidate


def _kind_args(step: dict) -> tuple[str, Any]:
    ((kind, args),) = step.items()
    return kind, args


def _names(step: dict, key: str) -> set[str]:
    kind, args = _kind_args(step)
    return {args[key]} if isinstance(args, dict) and key in args else set()


def consistent(doc: Doc) -> Doc | None:
    """The scenario with the steps that lost what they refer to removed (a call whose proxy
    step went, an unregister whose register went), or None when nothing is left."""
    runtimes = {r["id"] for r in doc["runtimes"]}
    backends = set(doc["backends"])
    providers: set[str] = set()
    proxies: set[str] = set()
    steps = []
    for step in doc["steps"]:
        kind, args = _kind_args(step)
        if isinstance(args, str):  # a runtime or a GBID
            if args not in runtimes | backends:
                continue
        elif isinstance(args, dict):
            if "runtime" in args and args["runtime"] not in runtimes:
                continue
            if kind == "register":
                providers.add(args["provider"])
            elif kind == "unregister" and args["provider"] not in providers:
                continue
            elif kind == "proxy":
                proxies.add(args["name"])
            elif kind in ("call", "one_way") and args["proxy"] not in proxies:
                continue
            if "gbids" in args and not set(args["gbids"]) <= backends:
                args = {**args, "gbids": [g for g in args["gbids"] if g in backends]}
                if not args["gbids"]:
                    del args["gbids"]
                step = {kind: args}
        steps.append(step)
    if not steps:
        return None
    return {**doc, "steps": steps}


def _without_runtime(doc: Doc, runtime: str) -> Doc | None:
    kept = [r for r in doc["runtimes"] if r["id"] != runtime and r.get("cc") != runtime]
    if len(kept) == len(doc["runtimes"]) or not any(r["kind"] == "cluster-controller" for r in kept):
        return None
    return consistent({**doc, "runtimes": kept})


def _without_backend(doc: Doc, gbid: str) -> Doc | None:
    if len(doc["backends"]) < 2:
        return None
    return consistent({**doc, "backends": [g for g in doc["backends"] if g != gbid]})


def _simpler_arguments(doc: Doc) -> list[Doc]:
    """One candidate per simplification of one step."""
    out = []
    for n, step in enumerate(doc["steps"]):
        kind, args = _kind_args(step)
        simpler: list[Any] = []
        if kind == "advance" and isinstance(args, int) and args > 500:
            simpler.append(args // 10 if args >= 5_000 else 500)
        if isinstance(args, dict):
            if "gbids" in args and len(args["gbids"]) > 1:
                simpler.append({**args, "gbids": args["gbids"][:1]})
            if "gbids" in args:
                simpler.append({k: v for k, v in args.items() if k != "gbids"})
            if kind == "register" and "participant_id" in args:
                simpler.append({k: v for k, v in args.items() if k != "participant_id"})
        for s in simpler:
            candidate = copy.deepcopy(doc)
            candidate["steps"][n] = {kind: s}
            out.append(candidate)
    return out


def shrink(doc: Doc, still_fails: Callable[[Doc], bool], *, max_tries: int = 200,
           progress: Callable[[ShrinkStats, Doc], None] | None = None) -> tuple[Doc, ShrinkStats]:
    """The smallest scenario found that ``still_fails``; ``doc`` itself must fail."""
    stats = ShrinkStats(history=[len(doc["steps"])])
    best = doc

    def attempt(candidate: Doc | None) -> bool:
        nonlocal best
        if candidate is None or stats.tried >= max_tries or candidate == best:
            return False
        stats.tried += 1
        if still_fails(candidate):
            best = candidate
            stats.kept += 1
            stats.history.append(len(best["steps"]))
            if progress:
                progress(stats, best)
            return True
        return False

    changed = True
    while changed and stats.tried < max_tries:
        changed = False
        # Steps: chunks from half the schedule down to single steps.
        size = max(1, len(best["steps"]) // 2)
        while size >= 1 and stats.tried < max_tries:
            start = 0
            while start < len(best["steps"]) and stats.tried < max_tries:
                steps = best["steps"][:start] + best["steps"][start + size:]
                if attempt(consistent({**best, "steps": steps})):
                    changed = True
                else:
                    start += size
            size //= 2
        for runtime in [r["id"] for r in best["runtimes"]]:
            changed |= attempt(_without_runtime(best, runtime))
        for gbid in list(best["backends"]):
            changed |= attempt(_without_backend(best, gbid))
        for candidate in _simpler_arguments(best):
            if attempt(candidate):
                changed = True
                break
    return best, stats
