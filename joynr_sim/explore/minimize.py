"""From a failure of a run to a finding: shrink it, replay it, confirm it, write it.

Under precedence (the reference policy) a failure shrinks while it still fails. Under
another policy a finding is worth most as a guard the library can take: a scenario that
holds under precedence (every step, every check) and fails under the explored policy. So
it shrinks while it keeps both sides of that difference: each candidate runs under the
explored policy and under precedence, and both are judged in the same batch (the
precedence side by the signature's check and any that faulted a shrunk scenario of this
finding under precedence; the minimal scenario by every check). A schedule whose
precedence run failed only steps (a call that timed out while its broker was down)
is first repaired: those steps go, and the difference is looked for again; one that
checks nothing gets a call of a provider it leaves registered. One whose
precedence run the checker faults, or that cannot be repaired, shows no difference to
guard: it shrinks while it fails under the explored policy and is written under it.
"""

from __future__ import annotations

import tempfile
import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core.policies import DEFAULT_POLICY
from .findings import NOT_CONFIRMED, Finding, claim_path, same_scenario, scenario_text
from .fit import checks_something, consistent, with_a_check
from .judge import Judgement, Signature, checks_for, holds, problems
from .shrink import shrink
from .trials import ShrinkStats

if TYPE_CHECKING:  # pragma: no cover
    from .runner import Explorer, Job

Doc = dict[str, Any]
REPAIRS = 3  # rounds of taking out the steps that failed under precedence
LEARN_ROUNDS = 2  # shrinks again with the checks that faulted the minimal scenario under precedence
MIN_SHARE_S = 60.0  # a finding's share of the shrink budget, unless less is left


Sigs = tuple[Signature, ...]  # the failures a candidate must show, all of them


def _shows(found: set[Signature], sigs: Sigs) -> bool:
    return all(s in found for s in sigs)


def _checks(sigs: Sigs) -> list[str]:
    """The Spark checks to ask to see every one of ``sigs`` again."""
    return sorted({c for s in sigs for c in checks_for(s)})


def guard_pairs(ex: Explorer, job: Job, sig: Sigs, docs: list[Doc], *, ref_checks: list[str] | None = None,
                repair: bool = False, known_to_fail: bool = False) -> list[tuple[bool, tuple | None]]:
    """Per candidate: whether it still fails under the explored policy with all of ``sig``, and
    its precedence run and judgement by ``ref_checks`` (None: every check), or None when
    that run failed a step: its explored run is then not needed, nor judged. The precedence
    runs go first, so a candidate that already fails there costs one run; every run is
    judged in one Spark job. ``repair``: the precedence runs keep going past a failed step,
    to name every step that failed. ``known_to_fail``: the candidates are runs that showed
    ``sig``; not run again."""
    with tempfile.TemporaryDirectory(dir=ex.out) as tmp:
        named = [ex.candidate(replace(job, doc=d)).doc for d in docs]
        refs = [replace(job, doc=d, where=Path(tmp) / "ref", policy=DEFAULT_POLICY, checks=ref_checks,
                        keep_going=repair) for d in named]
        ref_results = [ex.execute(j) for j in refs]
        judged = [n for n, r in enumerate(ref_results) if r.outcome == "passed" or (repair and r.outcome == "failed")]
        runs = [replace(job, doc=named[n], where=Path(tmp) / "run", policy=ex.policy, checks=_checks(sig))
                for n in ([] if known_to_fail else judged)]
        run_results = [ex.execute(j) for j in runs]
        verdicts = ex.judge_runs([refs[n] for n in judged] + runs, [ref_results[n] for n in judged] + run_results)
    out: list[tuple[bool, tuple | None]] = [(False, None)] * len(docs)
    for k, n in enumerate(judged):
        fails = known_to_fail or _shows(verdicts[len(judged) + k].signatures, sig)
        out[n] = (fails, (ref_results[n], verdicts[k]))
    return out


def fails_only(ex: Explorer, job: Job, sig: Sigs, docs: list[Doc]) -> list[bool]:
    """Per candidate: whether it still fails with all of ``sig`` under the explored policy
    (their checks asked alone)."""
    with tempfile.TemporaryDirectory(dir=ex.out) as tmp:
        jobs = [ex.candidate(replace(job, doc=d, where=Path(tmp), checks=_checks(sig))) for d in docs]
        return [_shows(v.signatures, sig) for _, v in ex.run_jobs(jobs)]


def guard_start(ex: Explorer, job: Job, sig: Sigs, out_of_time=lambda: False) -> Doc | None:
    """The schedule, or one repaired from it, that holds under precedence (every check
    asked) and still fails under the explored policy; None when there is no such
    difference to guard."""
    doc = job.doc
    for round_ in range(REPAIRS + 1):
        if round_ and out_of_time():  # a repair costs a judgement: not past the finding's share
            return None
        ((fails, ref),) = guard_pairs(ex, job, sig, [doc], repair=True, known_to_fail=round_ == 0)
        if round_ and not fails:
            return None  # the repair took the failure with it
        if ref is None:  # the precedence run ended in an error
            return None
        result, verdict = ref
        if holds(result, verdict) and checks_something(doc):
            return doc
        if verdict.signatures or round_ == REPAIRS:  # a failure under precedence too: nothing to guard
            return None
        if holds(result, verdict):  # it holds, but checks nothing: a library scenario must check
            repaired = with_a_check(doc)
            if repaired is None:
                return None
            doc = repaired
            continue
        failed = {s.index for s in result.steps if s.outcome == "failed"}
        repaired = consistent({**doc, "steps": [s for i, s in enumerate(doc["steps"]) if i not in failed]})
        if repaired is None or not checks_something(repaired):
            return None
        doc = repaired
    return None


def finding(ex: Explorer, job: Job, sig: Signature, index: int, found_after_s: float, seen: Judgement,
            pending: list[Signature], waiting: int) -> Finding | None:
    """Shrink ``sig`` of run ``index`` together with the run's other new failures in
    ``pending`` (one shrink per run: a candidate is kept while it shows them all) and write it;
    None when its minimal scenario is one written already (``sig`` is then added to that
    finding). The others the minimal scenario shows are taken out of ``pending``: they are
    this finding's as well (``also``)."""
    every: Sigs = (sig, *pending)
    began = time.monotonic()
    left = ex.shrink_left()
    # A share of what is left for each failure still waiting, so the first does not take all.
    share = None if left is None else min(left, max(left / max(1, waiting), MIN_SHARE_S))
    doc = job.doc
    f = Finding(sig, ex.seed, index, round(found_after_s, 1), len(doc["steps"]), len(doc["steps"]), "", "",
                seen.details[:50], 0, 0.0, "not run", "not run", network=ex.network or ex.broker, run_seed=job.seed)
    if share is not None and share <= 0:
        # The shrink budget went to earlier findings: the schedule as it was drawn, judged
        # by the run that showed it, neither shrunk nor replayed; every failure it showed.
        f.also = sorted("/".join(s) for s in pending)
        pending.clear()
        return _write(ex, doc, f)

    def out_of_time() -> bool:
        return share is not None and time.monotonic() - began >= share

    def progress(stats: ShrinkStats, best: Doc) -> None:
        ex.on_event("shrink", {"signature": "/".join(sig), "steps": len(best["steps"]), "try": stats.tried})

    try:
        start = guard_start(ex, job, every, out_of_time) if ex.policy != DEFAULT_POLICY else None
        if start is None:
            # A schedule that checks something keeps doing so: ``joynr-sim run`` fails one that checks nothing.
            must_check = checks_something(doc)
            # Judged ahead only when Spark judges: a step or run error is seen without it, and
            # a candidate that hangs costs its bound of wall time each.
            ahead = ex.lookahead if _checks(every) else 1
            small, stats = shrink(doc, fails_many=lambda docs: fails_only(ex, job, every, docs), batch=ahead,
                                  max_tries=ex.shrink_tries, progress=progress, out_of_time=out_of_time,
                                  admissible=lambda c: checks_something(c) or not must_check)
            _count(f, small, stats)
            return _replay_and_write(ex, job, small, f, pending)
        # The precedence side of a candidate is judged by the checks that have mattered so
        # far (the signature's, then any that faulted the minimal scenario under precedence):
        # one check costs a fifth of every check. The minimal scenario is judged by all.
        learned: list[str] = []
        for round_ in range(LEARN_ROUNDS + 1):
            asked = sorted({*_checks(every), *learned})

            def fails_many(docs: list[Doc], asked: list[str] = asked) -> list[bool]:
                return [fails and ref is not None and holds(*ref)
                        for fails, ref in guard_pairs(ex, job, every, docs, ref_checks=asked)]

            small, stats = shrink(start, fails_many=fails_many, batch=ex.lookahead, max_tries=ex.shrink_tries,
                                  progress=progress, out_of_time=out_of_time, admissible=checks_something)
            _count(f, small, stats)
            missed = _replay(ex, job, small, f, pending)
            if missed is None:
                return None
            if not missed or f.guard or round_ == LEARN_ROUNDS or out_of_time():
                return _confirm_and_write(ex, job, small, f)
            learned += missed
        return None  # pragma: no cover - the loop returns
    finally:
        ex.shrink_spent += time.monotonic() - began
        f.shrink_seconds = round(time.monotonic() - began, 1)


def _count(f: Finding, small: Doc, stats: ShrinkStats) -> None:
    f.steps_after = len(small["steps"])
    f.shrink_runs += stats.runs
    f.shrink_batches += stats.batches


def _replay_and_write(ex: Explorer, job: Job, small: Doc, f: Finding, pending: list[Signature]) -> Finding | None:
    if _replay(ex, job, small, f, pending) is None:
        return None
    return _confirm_and_write(ex, job, small, f)


def _replay(ex: Explorer, job: Job, small: Doc, f: Finding, pending: list[Signature]) -> list[str] | None:
    """Replay the minimal scenario from its seed, every check asked, and (under a policy
    other than precedence) run it under precedence as ``joynr-sim run FILE --check`` would,
    in one judgement: a guard when it failed the same way and held under precedence. None
    when it is a scenario written already; else the checks that faulted the precedence run
    where no step failed."""
    if _same_as_written(ex, small, f.signature, *pending):
        if f.scenario_file:  # claimed in an earlier round: given back
            Path(f.scenario_file).unlink(missing_ok=True)
        return None
    if not f.scenario_file:
        f.scenario_file = str(claim_path(ex.out / "findings", f"explore-{ex.seed}-", f.signature))
    path = Path(f.scenario_file)
    named = {**small, "name": path.stem}
    reference = DEFAULT_POLICY if ex.policy != DEFAULT_POLICY else None
    replay, ref = _both(ex, replace(job, doc=named, where=path.parent, checks=None), reference, None)
    f.run_dir = replay[0].run_dir
    _report(replay)
    f.details = replay[1].details[:50]
    f.replayed = "fails" if f.signature in replay[1].signatures else "held"
    also = [s for s in pending if s in replay[1].signatures]
    f.also = sorted({*f.also, *("/".join(s) for s in also)})
    pending[:] = [s for s in pending if s not in also]
    f.reference, missed = "", []
    if ref is not None:
        found = problems(*ref) + ([] if checks_something(small) else ["no step checks anything"])
        f.reference = "held" if holds(*ref) and not found else "failed: " + "; ".join(found)
        if ref[0].outcome == "passed":
            asked = {*checks_for(f.signature), *(a.split("/", 1)[0] for a in f.also)}
            missed = sorted({s[0] for s in ref[1].signatures} - asked)
    f.guard = f.replayed == "fails" and f.reference == "held"
    return missed


def _confirm_and_write(ex: Explorer, job: Job, small: Doc, f: Finding) -> Finding | None:
    """Replay the minimal scenario once on the --confirm broker (a guard both ways), then
    write it."""
    if ex.confirm:
        path = Path(f.scenario_file)
        named = {**small, "name": path.stem}
        run, cref = _both(ex, replace(job, doc=named, where=path.parent / "confirmed", checks=None,
                                      network=ex.confirm), DEFAULT_POLICY if f.guard else None, ex.confirm)
        _report(run)
        f.confirm_broker = ex.confirm
        f.confirmed = "reproduced" if f.signature in run[1].signatures else "held"
        if cref is not None:
            f.confirm_reference = "held" if holds(*cref) else "failed: " + "; ".join(problems(*cref))
    return _write(ex, small, f)


def _both(ex: Explorer, job: Job, reference: str | None, network: str | None) -> tuple[tuple, tuple | None]:
    """The job's run and, when ``reference`` names a policy, the same under it as
    ``joynr-sim run FILE --check`` would run it (stop at a failed step), in one judgement."""
    if reference is None:
        return ex.run_jobs([job])[0], None
    with tempfile.TemporaryDirectory(dir=ex.out) as tmp:
        ref = replace(job, where=Path(tmp), policy=reference, keep_going=False, network=network)
        run, ref_run = ex.run_jobs([job, ref])
    return run, ref_run


def _report(run: tuple) -> None:
    result, verdict = run
    (Path(result.run_dir) / "checker.txt").write_text("\n".join(verdict.details) + "\n")


def _same_as_written(ex: Explorer, small: Doc, *sigs: Signature) -> bool:
    """Whether ``small`` was written for an earlier finding; if so ``sigs`` are added to it."""
    for earlier, doc in ex.written:
        if same_scenario(doc, small):
            for sig in sigs:
                if "/".join(sig) not in earlier.also and sig != earlier.signature:
                    earlier.also.append("/".join(sig))
            return True
    return False


def _write(ex: Explorer, doc: Doc, f: Finding) -> Finding | None:
    if not f.scenario_file:
        if _same_as_written(ex, doc, f.signature, *(tuple(a.split("/", 1)) for a in f.also)):
            return None
        f.scenario_file = str(claim_path(ex.out / "findings", f"explore-{ex.seed}-", f.signature))
    if f.replayed == "not run":
        f.confirmed = NOT_CONFIRMED
    Path(f.scenario_file).write_text(scenario_text(doc, f, ex.policy, ex.broker))
    ex.written.append((f, doc))
    return f

