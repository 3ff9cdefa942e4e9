"""What counts as a failure of a run, and the Spark checks that judge many runs at once.

The checks cost a Spark job whose fixed part (planning, reading, the phase queries) is most
of its time: on a 2-core machine one run costs about as much as a few dozen. So explore
judges its runs in batches, in one job each, and keeps each run's violations apart by the
run id every trace line carries.

What counts as a failure (its *signature*):
- a violation of a Spark check, by check and kind (``routing-loop/loop``, ...);
- a step that raised something other than a joynr error (a defect of the simulator: its
  traceback is in ``run.json``);
- a run that could not be set up or ended in an error of the runner.
A step that fails with a joynr error (a call timing out while its broker is down, a lookup
that finds nothing) is an outcome of the schedule, not a failure.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from ..scenario.runner import RunResult

Signature = tuple[str, str]
Violation = tuple[str, str, str]  # (check, kind, summary on one line)
NO_CHECK = ("step-error", "run-error")  # signatures no Spark check finds
# Violations shown per check and run of a batch before the job's own cut-off can hide one
# run's behind another's; a check cut off is asked again run by run (``Checker``).
DETAILS_PER_RUN = 50


@dataclass
class Judgement:
    signatures: set[Signature]
    details: list[str]  # one line each, for the report

    @property
    def clean(self) -> bool:
        return not self.signatures


class Judge(Protocol):
    """What explore asks of the checks: per run (its directory and run id), the violations
    of the checks named (None: every check)."""

    def violations_many(self, runs: list[tuple[Path, str]],
                        names: list[str] | None = None) -> list[list[Violation]]: ...


def checks_for(sig: Signature) -> list[str]:
    """The Spark checks to ask to see ``sig`` again: its own, or none for a step or run error."""
    return [] if sig[0] in NO_CHECK else [sig[0]]


def judge(result: RunResult, violations: list[Violation]) -> Judgement:
    sigs: set[Signature] = set()
    details: list[str] = []
    if result.outcome == "error":
        sigs.add(("run-error", (result.error or "error").split(":")[0][:80]))
        details.append(f"run error: {result.error}")
    for step in result.steps:
        if step.traceback:
            names = (step.detail or "").split(": ")
            # An error raised in a runtime's process comes wrapped: name what was raised there.
            name = names[1] if names[0] == "RemoteError" and len(names) > 1 else names[0]
            sigs.add(("step-error", name[:80]))
            details.append(f"step {step.index} ({step.title}): {step.detail}")
    for check, kind, summary in violations:
        sigs.add((check, kind))
        details.append(f"{check}/{kind}: {summary}")
    return Judgement(sigs, details)


def holds(result: RunResult, verdict: Judgement) -> bool:
    """As ``joynr-sim run FILE --check`` passes it: every step held, the checker found nothing."""
    return result.outcome == "passed" and not verdict.signatures and not verdict.details


def problems(result: RunResult, verdict: Judgement) -> list[str]:
    """Why a run did not hold, one line each: its failed steps, its error, its violations."""
    found = [f"step {s.index} ({s.title}): {s.detail}" for s in result.steps if s.outcome == "failed"]
    if result.outcome == "error":
        found.append(f"run error: {result.error}")
    return found + [d for d in verdict.details if not d.startswith(("step ", "run error"))]


class CheckerLost(Exception):
    """The Spark session could not judge the runs (its JVM gone, a check that raised): the
    exploration cannot go on. The message is one line; ``jvm_log`` the JVM's own output."""

    def __init__(self, message: str, jvm_log: Path | None) -> None:
        super().__init__(message)
        self.jvm_log = jvm_log


class Checker:
    """The Spark checks in one session for every run of the exploration."""

    def __init__(self, scratch: Path) -> None:
        from analytics.session import start

        scratch.mkdir(parents=True, exist_ok=True)
        self._scratch = scratch
        self._handle = start(work_dir=scratch)
        self._n = 0
        self.jobs = 0  # Spark jobs asked for, for the measurements explore reports

    def violations(self, run_dir: Path, names: list[str] | None = None) -> list[Violation]:
        """(check, kind, summary) of every violation in one run."""
        found = self._check([run_dir], names, 1000)
        return [v for per_run in found.values() for v in per_run]

    def violations_many(self, runs: list[tuple[Path, str]],
                        names: list[str] | None = None) -> list[list[Violation]]:
        """Per run, in the order given, the violations of the checks ``names`` (None:
        every check), from one Spark job over all of them."""
        if not runs:
            return []
        limit = DETAILS_PER_RUN * len(runs)
        found = self._check([d for d, _ in runs], names, limit)
        cut = sorted(name for name, n in self._counts.items() if n > self._shown.get(name, 0))
        for name in cut:  # a check with more violations than shown: each run on its own
            for run_dir, run_id in runs:
                again = self._check([run_dir], [name], 1000)
                found[run_id] = [v for v in found.get(run_id, []) if v[0] != name]
                found[run_id] += [v for per_run in again.values() for v in per_run]
        return [found.get(run_id, []) for _, run_id in runs]

    def _check(self, run_dirs: list[Path], names: list[str] | None, max_details: int) -> dict[str, list[Violation]]:
        from analytics.inputs import find_runs
        from analytics.runner import check_runs

        self._n += 1
        self.jobs += 1
        stage = self._scratch / f"stage-{self._n}"
        stage.mkdir()
        try:
            outcome = check_runs(self._handle.spark, find_runs([str(d) for d in run_dirs]), stage, names,
                                 max_details=max_details)
        except Exception as exc:  # the JVM gone (py4j's connection errors), or a check that raised
            words = " ".join(str(exc).split())[:300]
            raise CheckerLost(f"Spark could not judge {len(run_dirs)} runs: {type(exc).__name__}: {words}",
                              self._handle.jvm_log) from exc
        finally:
            shutil.rmtree(stage, ignore_errors=True)  # made here, a few lines above
        self._counts = {r.name: r.count for r in outcome.results}
        self._shown = {r.name: len(r.violations) for r in outcome.results}
        by_run: dict[str, list[Violation]] = {}
        for r in outcome.results:
            for v in r.violations:
                by_run.setdefault(v.run, []).append((r.name, v.kind, " ".join(v.summary.split())))
        return by_run

    def close(self, interrupted: bool = False) -> None:
        try:
            self._handle.stop(interrupted=interrupted)
        except Exception:  # a session whose JVM is gone has nothing left to stop
            pass
