"""``joynr-sim explore``: run generated schedules, judge them in batches with the Spark
checks in one long-lived Spark session, and shrink every new kind of failure.

What counts as a failure is ``judge``'s to say. Schedules run with ``keep_going`` (a step
that fails with a joynr error is an outcome the checks judge in the trace) on the network
chosen (``memory``: in-memory brokers and WebSockets in virtual time, a run reproduced by
its seed; ``amqtt`` or ``mosquitto``: real brokers). A batch of schedules is run, then
judged in one Spark job; each new failure of a run is shrunk (``minimize``) while the
shrunk schedule still shows it, the candidates of each shrink pass judged together, and
written in the library's format with a comment saying what breaks and which seed found it,
next to its run directory and the checker's report.
"""

from __future__ import annotations

import asyncio
import random
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import yaml

from ..scenario.loader import parse_scenario
from ..scenario.runner import RunResult, run_scenario
from . import minimize
from .findings import Finding, Summary
from .generate import Generator
from .judge import Checker, Judge, Judgement, judge
from .worker import Hung, Worker, hung_result

__all__ = ["Checker", "Explorer", "Finding", "Job", "Judgement", "Summary", "judge"]

MEMORY = "memory"
# A Spark job of every check costs about the same for 2 runs as for 16 (26 s on a 2-core
# machine, warm) and not twice as much for 64 (40 s); a run on memory costs a fraction of
# a second, on a real broker seconds. So by default a batch grows until running it took as
# long as judging the one before (FIRST_BATCH runs first, at most MAX_BATCH).
FIRST_BATCH = {MEMORY: 8, None: 2}
MAX_BATCH = 128
# The candidates of a shrink pass judged together by default (a guard's candidate is two runs).
LOOKAHEAD = {MEMORY: 32, None: 4}


@dataclass
class Job:
    """One run to carry out and judge."""

    doc: dict[str, Any]
    where: Path
    policy: str
    checks: list[str] | None = None  # the Spark checks to ask: None every check, [] none
    keep_going: bool = True
    seed: int = 0
    network: str | None = None  # None: the explorer's


class Explorer:
    def __init__(self, out: Path, *, policy: str, seed: int, checker: Judge | None, broker: str = "amqtt",
                 network: str | None = None, generator: Generator | None = None, shrink_tries: int = 100,
                 shrink_budget_s: float | None = None, batch: int | None = None, confirm: str | None = None,
                 on_event: Callable[[str, dict], None] = lambda kind, info: None) -> None:
        self.out = out
        self.policy = policy
        self.broker = broker
        self.network = network  # None: the broker decides, as ``joynr-sim run`` without --network
        self.seed = seed
        self.checker = checker
        self.generator = generator or Generator()
        self.shrink_tries = shrink_tries
        self.shrink_budget_s = shrink_budget_s  # shared by every finding's shrink; None: tries only
        self.batch = batch  # runs judged together; None: grown by the time they take
        self.lookahead = batch or LOOKAHEAD[MEMORY if network == MEMORY else None]
        self.confirm = confirm  # a real broker each finding is replayed on once
        self.on_event = on_event
        self.summary = Summary(seed, policy, broker, network or "", shrink_budget_s=shrink_budget_s)
        self.shrink_spent = 0.0
        self.written: list[tuple[Finding, dict[str, Any]]] = []  # each finding file and its scenario
        self._scratch = out / "runs"
        self._names = 0
        self._worker: Worker | None = None

    # -- running and judging -----------------------------------------------------------------
    def execute(self, job: Job) -> RunResult:
        """Carry out one run (judged by ``judge_runs``); one on the memory network in the
        worker process, where a run that hangs can be ended."""
        text = yaml.safe_dump(job.doc, sort_keys=False)
        scenario = parse_scenario(text, f"<{job.doc['name']}>")
        network = job.network or self.network
        # A real network is its broker; the memory network has its own.
        broker = self.broker if network is None else None if network == MEMORY else network
        kw: dict[str, Any] = {"policy": job.policy, "broker": broker, "seed": job.seed, "keep_going": job.keep_going}
        if network is not None:
            kw["network"] = network
        if network == MEMORY:
            if self._worker is None:
                self._worker = Worker()
            try:
                result = self._worker.run(text, scenario.name, job.where, **kw)
            except Hung as exc:
                result = hung_result(scenario, job.where, job.policy, job.seed, str(exc))
        else:
            result = asyncio.run(run_scenario(scenario, job.where, **kw))
        if result.write_failed is not None:  # the disk's failure, not the schedule's: no finding
            raise result.write_failed
        return result

    def close(self) -> None:
        """End the worker process, if one was started (a later run starts another)."""
        if self._worker is not None:
            self._worker.close()
            self._worker = None

    def judge_runs(self, jobs: list[Job], results: list[RunResult]) -> list[Judgement]:
        """Every run's judgement, from one Spark job over the runs that ask a check (not a
        run that ended in an error: its trace is not whole). Each run is judged by the
        checks its job asks only, as if they had been asked alone."""
        asked = [n for n, (job, r) in enumerate(zip(jobs, results)) if job.checks != [] and r.outcome != "error"]
        found: dict[int, list] = {}
        if asked and self.checker is not None:
            wanted = [jobs[n].checks for n in asked]
            names = None if any(w is None for w in wanted) else sorted({c for w in wanted for c in w or []})
            per_run = self.checker.violations_many([(Path(results[n].run_dir), results[n].run_id) for n in asked],
                                                   names)
            for n, violations in zip(asked, per_run):
                mine = jobs[n].checks
                found[n] = [v for v in violations if mine is None or v[0] in mine]
        return [judge(r, found.get(n, [])) for n, r in enumerate(results)]

    def run_jobs(self, jobs: list[Job]) -> list[tuple[RunResult, Judgement]]:
        """Run each job, then judge them all in one Spark job."""
        results = [self.execute(job) for job in jobs]
        return list(zip(results, self.judge_runs(jobs, results)))

    def run_doc(self, doc: dict[str, Any], where: Path, *, policy: str | None = None,
                checks: list[str] | None = None, keep_going: bool = True, seed: int | None = None
                ) -> tuple[RunResult, Judgement]:
        """Run one scenario and judge it."""
        job = Job(doc, where, policy or self.policy, checks, keep_going, self.seed if seed is None else seed)
        return self.run_jobs([job])[0]

    def candidate(self, job: Job) -> Job:
        """The job under a name no other run of its batch has: the checker tells runs apart
        by their run id, which on the memory network is the name and the seed's."""
        self._names += 1
        name = f"{job.doc['name'][:48]}-c{self._names}"
        return replace(job, doc={**job.doc, "name": name})

    # -- exploring ---------------------------------------------------------------------------
    def shrink_left(self) -> float | None:
        return None if self.shrink_budget_s is None else max(0.0, self.shrink_budget_s - self.shrink_spent)

    def explore(self, *, runs: int | None = None, budget_s: float | None = None) -> Summary:
        try:
            return self._explore(runs, budget_s)
        finally:
            self.close()

    def _explore(self, runs: int | None, budget_s: float | None) -> Summary:
        rng = random.Random(self.seed)
        started = time.monotonic()
        self.out.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.summary.write(self.out)  # marks the folder as explore's from the start
        index = 0

        def more() -> bool:
            return (runs is None or index < runs) and (budget_s is None or time.monotonic() - started < budget_s)

        judging_s = 0.0  # how long the last judgement took
        while more():
            drawn: list[tuple[int, Job, RunResult]] = []
            began = time.monotonic()
            while more() and self._room(len(drawn), time.monotonic() - began, judging_s):
                schedule = random.Random(rng.getrandbits(64))
                doc = self.generator.scenario(schedule, f"explore-{self.seed}-{index}", self.policy)
                job = Job(doc, self._scratch, self.policy, seed=schedule.getrandbits(31))
                drawn.append((index, job, self.execute(job)))
                index += 1
            judged = time.monotonic()
            verdicts = self.judge_runs([j for _, j, _ in drawn], [r for *_, r in drawn])
            judging_s = time.monotonic() - judged
            self.summary.batches += 1
            at = time.monotonic() - started
            news = [self._count(i, verdict, at) for (i, _, _), verdict in zip(drawn, verdicts)]
            for k, ((i, job, result), verdict) in enumerate(zip(drawn, verdicts)):
                if news[k]:  # one shrink per run, of every new failure it showed together: one file
                    sig, *others = news[k]
                    waiting = 1 + sum(1 for n in news[k + 1:] if n)  # the runs that share the budget
                    finding = minimize.finding(self, job, sig, i, at, verdict, others, waiting)
                    if finding is not None:
                        self.summary.findings.append(finding)
                    self.summary.write(self.out)
                shutil.rmtree(result.run_dir, ignore_errors=True)  # a run directory this loop wrote
        self.summary.seconds = round(time.monotonic() - started, 1)
        self.summary.write(self.out)
        return self.summary

    def _room(self, drawn: int, running_s: float, judging_s: float) -> bool:
        """Whether the batch takes another run: up to ``batch``, or, grown by time, while
        running it took less than judging the last one."""
        if self.batch is not None or not drawn:
            return drawn < (self.batch or 1)
        if not judging_s:
            return drawn < FIRST_BATCH[MEMORY if self.network == MEMORY else None]
        return drawn < MAX_BATCH and running_s < judging_s

    def _count(self, index: int, verdict: Judgement, at: float) -> list:
        """Count the run's failures; the new ones (never seen in an earlier run), in order."""
        self.summary.runs += 1
        if verdict.signatures and self.summary.first_finding_s is None:
            self.summary.first_finding_s = round(at, 1)
        new = sorted(s for s in verdict.signatures if "/".join(s) not in self.summary.seen)
        for sig in verdict.signatures:
            self.summary.seen["/".join(sig)] = self.summary.seen.get("/".join(sig), 0) + 1
        self.on_event("run", {"index": index, "seconds": at,
                              "failures": sorted("/".join(s) for s in verdict.signatures)})
        return new
