"""Shrinking a failing scenario: the smallest one that still fails the same way.

Each round tries, cheapest idea first: the schedule without the steps that only wait,
without the proxies nothing calls, without the runtimes and backends no step names (all at
once, then each alone); without whole groups of steps (registrations, proxies and calls,
calls, the runtimes' lifecycle, broker faults); then delta debugging over the steps (drop
halves, quarters, ... single steps); then pairs of steps (those naming the same runtime,
provider, proxy or GBID first); then whole runtimes and backends one by one; then simpler
arguments (all at once, then one by one: fewer GBIDs, a shorter advance, a generated
participant id for a fixed one, a shorter TTL). Rounds repeat while one of them made the scenario smaller.

A candidate is kept only when ``still_fails`` says it fails in the same way. Before it
costs a run, a candidate is made valid (``consistent``): a step that names what a dropped
step made, or that no longer fits the runtimes' states (a start of a runtime that runs, a
call on a proxy whose runtime went down since it was built), goes with it; a candidate
seen before is not run again. ``still_fails`` is the only thing that runs anything, so the
shrinker itself is pure.
"""

from __future__ import annotations

import copy
import itertools
import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from ..scenario.model import CHECKING_STEPS

Doc = dict[str, Any]

CLUSTER_CONTROLLER = "cluster-controller"
RUNTIME_STEPS = ("crash", "stop", "start", "restart")
WAIT_STEPS = ("advance", "wait")
MAX_PAIR_STEPS = 16  # above this, delta debugging has more to do than pairs would
SHORT_TTL_MS = 1_000
# Kinds of steps dropped all together, one candidate per group.
STEP_GROUPS = {"registrations": ("register", "unregister"), "proxies and calls": ("proxy", "call", "one_way"),
               "calls": ("call", "one_way"), "runtime lifecycle": RUNTIME_STEPS,
               "broker faults": ("crash_broker", "restart_broker", "stop_broker", "start_broker")}


@dataclass
class ShrinkStats:
    tried: int = 0  # candidates run
    kept: int = 0  # candidates that still failed
    skipped: int = 0  # candidates seen before, not run again
    history: list[int] = field(default_factory=list)  # step count after each kept candidate


def _kind_args(step: dict) -> tuple[str, Any]:
    ((kind, args),) = step.items()
    return kind, args


def _target(args: Any, key: str) -> str | None:
    """The runtime or GBID a lifecycle step names (``crash: cc1`` or ``crash: {runtime: cc1}``)."""
    if isinstance(args, str):
        return args
    if isinstance(args, dict):
        return args.get(key)
    return None


class _State:
    """The runtimes', brokers', providers' and proxies' states along a schedule, the rules
    the generator draws steps by (``generate.World``)."""

    def __init__(self, doc: Doc) -> None:
        self.kind = {r["id"]: r["kind"] for r in doc["runtimes"]}
        self.cc = {r["id"]: r["cc"] for r in doc["runtimes"] if r["kind"] != CLUSTER_CONTROLLER}
        self.backends = set(doc["backends"])
        self.up = dict.fromkeys(self.kind, True)
        self.epoch = dict.fromkeys(self.kind, 0)
        self.brokers_up = dict.fromkeys(doc["backends"], True)
        self.providers: dict[str, tuple[str, int]] = {}  # name -> (runtime, epoch registered in)
        self.proxies: dict[str, tuple[str, int]] = {}  # name -> (runtime, epoch built in)

    def usable(self, rt: str) -> bool:
        cc = self.cc.get(rt)
        return rt in self.kind and self.up[rt] and (cc is None or self.up[cc])

    def startable(self, rt: str) -> bool:
        cc = self.cc.get(rt)
        return self.up[cc] if cc is not None else all(self.brokers_up.values())

    def live(self, table: dict[str, tuple[str, int]], name: str) -> bool:
        if name not in table:
            return False
        rt, epoch = table[name]
        return self.usable(rt) and self.epoch[rt] == epoch

    def lifecycle(self, kind: str, rt: str | None) -> bool:
        """Apply a runtime step; False when it does not fit (and nothing changed)."""
        if rt not in self.kind:
            return False
        if kind == "start":
            if self.up[rt] or not self.startable(rt):
                return False
        elif not self.up[rt] or (kind == "restart" and not self.startable(rt)):
            return False
        self.epoch[rt] += 1
        self.up[rt] = kind in ("start", "restart")
        return True

    def broker(self, kind: str, gbid: str | None) -> bool:
        if gbid not in self.backends:
            return False
        down = kind in ("crash_broker", "stop_broker")
        if self.brokers_up[gbid] != down:  # crash only what runs, restart only what is down
            return False
        self.brokers_up[gbid] = not down
        return True

    def step(self, kind: str, args: Any) -> Any | None:
        """The step's arguments as they fit here (GBIDs of dropped backends left out), or
        None when the step does not fit."""
        if kind in RUNTIME_STEPS:
            return args if self.lifecycle(kind, _target(args, "runtime")) else None
        if kind.endswith("_broker"):
            return args if self.broker(kind, _target(args, "gbid")) else None
        if not isinstance(args, dict):
            return args
        if "runtime" in args and args["runtime"] not in self.kind:
            return None
        if "gbids" in args and not set(args["gbids"]) <= self.backends:
            kept = [g for g in args["gbids"] if g in self.backends]
            args = {k: v for k, v in args.items() if k != "gbids"}
            if kept:
                args["gbids"] = kept
        if kind == "register":
            if not self.usable(args["runtime"]):
                return None
            self.providers[args["provider"]] = (args["runtime"], self.epoch[args["runtime"]])
        elif kind == "unregister":
            live = self.live(self.providers, args["provider"])
            if not live or self.providers[args["provider"]][0] != args["runtime"]:
                return None
            del self.providers[args["provider"]]
        elif kind == "proxy":
            if not self.usable(args["runtime"]):
                return None
            self.proxies[args["name"]] = (args["runtime"], self.epoch[args["runtime"]])
        elif kind in ("call", "one_way") and not self.live(self.proxies, args["proxy"]):
            return None
        return args


def consistent(doc: Doc) -> Doc | None:
    """The scenario with the steps that no longer fit removed (a call whose proxy step went,
    an unregister whose register went, a start of a runtime that runs, a register in a
    runtime that is down), or None when no step is left."""
    state = _State(doc)
    steps = []
    for step in doc["steps"]:
        kind, args = _kind_args(step)
        fitted = state.step(kind, args)
        if fitted is not None:
            steps.append({kind: fitted})
    if not steps:
        return None
    return {**doc, "steps": steps}


def checks_something(doc: Doc) -> bool:
    """Whether a step checks something (a call, an expectation): a scenario that only acts
    and waits proves nothing when it holds, and ``joynr-sim run`` says so and fails it."""
    return any(_kind_args(s)[0] in CHECKING_STEPS
               or (isinstance(_kind_args(s)[1], dict) and _kind_args(s)[1].get("expect_error") is not None)
               for s in doc["steps"])


def _names(step: dict) -> set[str]:
    """Every runtime, provider, proxy and GBID a step names."""
    _, args = _kind_args(step)
    if isinstance(args, str):
        return {args}
    if not isinstance(args, dict):
        return set()
    out = {args[k] for k in ("runtime", "provider", "name", "proxy", "gbid", "participant_id") if k in args}
    return out | set(args.get("gbids", []))


def _named_runtimes(doc: Doc) -> set[str]:
    named = set().union(*(_names(s) for s in doc["steps"])) if doc["steps"] else set()
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
    return consistent({**doc, "steps": [s for s in doc["steps"] if _kind_args(s)[0] not in WAIT_STEPS]})


def without_uncalled_proxies(doc: Doc) -> Doc | None:
    called = {_kind_args(s)[1].get("proxy") for s in doc["steps"] if isinstance(_kind_args(s)[1], dict)}
    return consistent({**doc, "steps": [s for s in doc["steps"]
                                        if _kind_args(s)[0] != "proxy" or _kind_args(s)[1]["name"] in called]})


def without_anything_unneeded(doc: Doc) -> Doc | None:
    """Every tidying at once: no waits, no uncalled proxies, no unnamed runtimes or backends."""
    best = doc
    for tidy in (without_waits, without_uncalled_proxies, without_unnamed_runtimes, without_unnamed_backends):
        best = tidy(best) or best
    return None if best == doc else best


def without_group(doc: Doc, kinds: tuple[str, ...]) -> Doc | None:
    if not any(_kind_args(s)[0] in kinds for s in doc["steps"]):
        return None
    return consistent({**doc, "steps": [s for s in doc["steps"] if _kind_args(s)[0] not in kinds]})


def without_unnamed_runtimes(doc: Doc) -> Doc | None:
    """Only the runtimes some step names (and their cluster controllers)."""
    return _keep_runtimes(doc, _named_runtimes(doc))


def without_unnamed_backends(doc: Doc) -> Doc | None:
    """Only the backends some step names, or the first when none is named."""
    named = set().union(*(_names(s) for s in doc["steps"])) if doc["steps"] else set()
    keep = [g for g in doc["backends"] if g in named] or doc["backends"][:1]
    return _keep_backends(doc, keep)


def _without_runtime(doc: Doc, runtime: str) -> Doc | None:
    return _keep_runtimes(doc, {r["id"] for r in doc["runtimes"]} - {runtime})


def _without_backend(doc: Doc, gbid: str) -> Doc | None:
    return _keep_backends(doc, [g for g in doc["backends"] if g != gbid])


def _simpler(kind: str, args: Any) -> list[Any]:
    """Simpler arguments for one step, one candidate each."""
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
        if kind in ("call", "one_way") and args.get("ttl_ms", 10_000) > SHORT_TTL_MS:
            # shorter, not absent (10 s): a call that is not answered costs a shrink its TTL
            simpler.append({**args, "ttl_ms": SHORT_TTL_MS})
    return simpler


def _simpler_arguments(doc: Doc) -> list[Doc]:
    """All steps' first simplifications at once, then one candidate per simplification."""
    out = []
    at_once = copy.deepcopy(doc)
    for n, step in enumerate(doc["steps"]):
        kind, args = _kind_args(step)
        # at once: the simplification that keeps the most (fewer GBIDs before none)
        firsts = [s for s in _simpler(kind, args)
                  if not (isinstance(args, dict) and "participant_id" in args and "participant_id" not in s)]
        if firsts:
            at_once["steps"][n] = {kind: firsts[0]}
    if at_once != doc:
        out.append(at_once)
    for n, step in enumerate(doc["steps"]):
        kind, args = _kind_args(step)
        for s in _simpler(kind, args):
            candidate = copy.deepcopy(doc)
            candidate["steps"][n] = {kind: s}
            out.append(candidate)
    return out


def _pairs(n: int, steps: list[dict]) -> Iterator[tuple[int, int]]:
    """Pairs of step positions: those naming something in common first, then the rest."""
    names = [_names(s) for s in steps]
    pairs = list(itertools.combinations(range(n), 2))
    related = [(i, j) for i, j in pairs if names[i] & names[j]]
    yield from related
    yield from (p for p in pairs if p not in set(related))


def shrink(doc: Doc, still_fails: Callable[[Doc], bool], *, max_tries: int = 200,
           progress: Callable[[ShrinkStats, Doc], None] | None = None,
           out_of_time: Callable[[], bool] = lambda: False,
           admissible: Callable[[Doc], bool] = lambda doc: True) -> tuple[Doc, ShrinkStats]:
    """The smallest scenario found that ``still_fails`` within ``max_tries`` runs (and
    before ``out_of_time``); ``doc`` itself must fail. A candidate that is not
    ``admissible`` is passed over without a run."""
    stats = ShrinkStats(history=[len(doc["steps"])])
    best = doc
    seen = {json.dumps(doc, sort_keys=True)}

    def budget_left() -> bool:
        return stats.tried < max_tries and not out_of_time()

    def attempt(candidate: Doc | None) -> bool:
        nonlocal best
        if candidate is None or not budget_left() or not admissible(candidate):
            return False
        key = json.dumps(candidate, sort_keys=True)
        if key in seen:
            stats.skipped += 1
            return False
        seen.add(key)
        stats.tried += 1
        if still_fails(candidate):
            best = candidate
            stats.kept += 1
            stats.history.append(len(best["steps"]))
            if progress:
                progress(stats, best)
            return True
        return False

    def without(positions: set[int]) -> Doc | None:
        return consistent({**best, "steps": [s for i, s in enumerate(best["steps"]) if i not in positions]})

    changed = True
    while changed and budget_left():
        changed = attempt(without_anything_unneeded(best))
        if not changed:
            for tidy in (without_waits, without_uncalled_proxies, without_unnamed_runtimes, without_unnamed_backends):
                changed |= attempt(tidy(best))
        for kinds in STEP_GROUPS.values():
            changed |= attempt(without_group(best, kinds))
        # Steps: chunks from half the schedule down to single steps.
        size = max(1, len(best["steps"]) // 2)
        while size >= 1 and budget_left():
            start = 0
            while start < len(best["steps"]) and budget_left():
                if attempt(without(set(range(start, start + size)))):
                    changed = True
                else:
                    start += size
            size //= 2
        if not changed and len(best["steps"]) <= MAX_PAIR_STEPS:
            for i, j in _pairs(len(best["steps"]), best["steps"]):
                if attempt(without({i, j})):
                    changed = True
                    break
        for runtime in [r["id"] for r in best["runtimes"]]:
            changed |= attempt(_without_runtime(best, runtime))
        for gbid in list(best["backends"]):
            changed |= attempt(_without_backend(best, gbid))
        for candidate in _simpler_arguments(best):
            if attempt(candidate):
                changed = True
                break
    return best, stats
