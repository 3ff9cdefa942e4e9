"""``joynr-sim explore``: run generated schedules on real brokers, judge each run with the
Spark checks in one long-lived Spark session, and shrink every new kind of failure.

What counts as a failure (its *signature*):
- a violation of a Spark check, by check and kind (``routing-loop/loop``, ...);
- a step that raised something other than a joynr error (a defect of the simulator: its
  traceback is in ``run.json``);
- a run that could not be set up or ended in an error of the runner.
A step that fails with a joynr error (a call timing out while its broker is down, a lookup
that finds nothing) is an outcome of the schedule, not a failure: explore runs with
``keep_going`` and lets the checks judge the trace.

A failure is shrunk while the shrunk schedule still shows the same signature; the minimal
scenario is written in the library's format with a comment saying what breaks and which
seed found it, next to its run directory and the checker's report.
"""

from __future__ import annotations

import asyncio
import json
import random
import re
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ..core.policies import DEFAULT_POLICY
from ..scenario.loader import parse_scenario
from ..scenario.runner import RunResult, run_scenario
from .generate import Generator
from .shrink import ShrinkStats, checks_something, shrink

Signature = tuple[str, str]
NAME_MAX = 64  # the scenario format's longest name


@dataclass
class Judgement:
    signatures: set[Signature]
    details: list[str]  # one line each, for the report


@dataclass
class Finding:
    signature: Signature
    seed: int
    run_index: int
    found_after_s: float  # from the start of the exploration to the end of the run that showed it
    steps_before: int
    steps_after: int
    scenario_file: str
    run_dir: str
    details: list[str]
    shrink_runs: int
    shrink_seconds: float
    replayed: str  # the minimal scenario run again: "fails" (the same way) or "held" (timing)
    reference: str  # the same under precedence: "held", "failed: ..." or "" (explored precedence)


@dataclass
class Summary:
    seed: int
    policy: str
    broker: str
    runs: int = 0
    seconds: float = 0.0
    first_finding_s: float | None = None  # when the first failure was seen
    findings: list[Finding] = field(default_factory=list)
    seen: dict[str, int] = field(default_factory=dict)  # signature -> runs that showed it


class Checker:
    """The Spark checks in one session for every run of the exploration."""

    def __init__(self, scratch: Path) -> None:
        from analytics.session import start

        scratch.mkdir(parents=True, exist_ok=True)
        self._scratch = scratch
        self._handle = start(work_dir=scratch)
        self._n = 0

    def violations(self, run_dir: Path, names: list[str] | None = None) -> list[tuple[str, str, str]]:
        """(check, kind, summary) of every violation in one run, by every check or by those
        ``names`` (a shrink asks only the check whose violation it keeps)."""
        from analytics.inputs import find_runs
        from analytics.runner import check_runs

        self._n += 1
        stage = self._scratch / f"stage-{self._n}"
        stage.mkdir()
        try:
            outcome = check_runs(self._handle.spark, find_runs([str(run_dir)]), stage, names, max_details=20)
        finally:
            shutil.rmtree(stage, ignore_errors=True)  # made here, a few lines above
        return [(r.name, v.kind, " ".join(v.summary.split())) for r in outcome.results for v in r.violations]

    def close(self) -> None:
        self._handle.stop()


def judge(result: RunResult, violations: list[tuple[str, str, str]]) -> Judgement:
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


class Explorer:
    def __init__(self, out: Path, *, policy: str, broker: str, seed: int, checker: Checker,
                 generator: Generator | None = None, shrink_tries: int = 100, shrink_budget_s: float | None = None,
                 on_event: Callable[[str, dict], None] = lambda kind, info: None) -> None:
        self.out = out
        self.policy = policy
        self.broker = broker
        self.seed = seed
        self.checker = checker
        self.generator = generator or Generator()
        self.shrink_tries = shrink_tries
        self.shrink_budget_s = shrink_budget_s  # shared by every finding's shrink; None: tries only
        self._shrink_spent = 0.0
        self.on_event = on_event
        self.summary = Summary(seed, policy, broker)
        self._scratch = out / "runs"

    def run_doc(self, doc: dict[str, Any], where: Path, *, policy: str | None = None,
                checks: list[str] | None = None, keep_going: bool = True) -> tuple[RunResult, Judgement]:
        """Run one scenario and judge it; ``checks`` the Spark checks to ask (None: all; a
        shrink of a step error asks none)."""
        scenario = parse_scenario(yaml.safe_dump(doc, sort_keys=False), f"<{doc['name']}>")
        result = asyncio.run(run_scenario(scenario, where, policy=policy or self.policy, broker=self.broker,
                                          seed=self.seed, keep_going=keep_going))
        if result.write_failed is not None:  # the disk's failure, not the schedule's: no finding
            raise result.write_failed
        asked = result.outcome != "error" and checks != []
        found = self.checker.violations(Path(result.run_dir), checks) if asked else []
        return result, judge(result, found)

    def explore(self, *, runs: int | None = None, budget_s: float | None = None) -> Summary:
        rng = random.Random(self.seed)
        started = time.monotonic()
        self.out.mkdir(parents=True, exist_ok=True, mode=0o700)
        self._write_summary()  # marks the folder as explore's from the start
        index = 0
        while (runs is None or index < runs) and (budget_s is None or time.monotonic() - started < budget_s):
            doc = self.generator.scenario(random.Random(rng.getrandbits(64)), f"explore-{self.seed}-{index}",
                                          self.policy)
            result, verdict = self.run_doc(doc, self._scratch)
            self.summary.runs += 1
            at = time.monotonic() - started
            if verdict.signatures and self.summary.first_finding_s is None:
                self.summary.first_finding_s = at
            new = sorted(s for s in verdict.signatures if "/".join(s) not in self.summary.seen)
            for sig in verdict.signatures:
                self.summary.seen["/".join(sig)] = self.summary.seen.get("/".join(sig), 0) + 1
            self.on_event("run", {"index": index, "seconds": at,
                                  "failures": sorted("/".join(s) for s in verdict.signatures)})
            for sig in new:
                self.summary.findings.append(self._shrink(doc, sig, index, at, verdict))
                self._write_summary()
            shutil.rmtree(result.run_dir, ignore_errors=True)  # a run directory this loop wrote
            index += 1
        self.summary.seconds = time.monotonic() - started
        self._write_summary()
        return self.summary

    def _shrink_time_left(self, began: float) -> bool:
        return self.shrink_budget_s is None or self._shrink_spent + time.monotonic() - began < self.shrink_budget_s

    def _shrink(self, doc: dict[str, Any], sig: Signature, index: int, found_after_s: float,
                seen: Judgement) -> Finding:
        prefix = f"explore-{self.seed}-"
        room = NAME_MAX - len(prefix) - 3  # a scenario name has 64 characters at most; "-NN" for a twin
        label = re.sub(r"[^a-z0-9]+", "-", "-".join(sig).lower()).strip("-")
        if len(label) > room:  # cut at a word, not inside one
            label = label[:room].rsplit("-", 1)[0]
        found_dir = self.out / "findings"
        found_dir.mkdir(exist_ok=True)
        path = found_dir / f"{prefix}{label}.yaml"
        n = 1
        while path.exists():  # another kind of the same check, cut to the same name
            n += 1
            path = found_dir / f"{prefix}{label}-{n}.yaml"
        began = time.monotonic()
        if not self._shrink_time_left(began):
            # The shrink budget went to earlier findings: the schedule as it was drawn, judged
            # by the run that showed it, neither shrunk nor replayed.
            path.write_text(self._finding_text(doc, path, sig, index, len(doc["steps"]), "not run", "not run",
                                               seen.details))
            return Finding(sig, self.seed, index, round(found_after_s, 1), len(doc["steps"]), len(doc["steps"]),
                           str(path), "", seen.details[:50], 0, 0.0, "not run", "not run")
        # Only the check whose violation is kept is asked; a step or run error needs none.
        checks = [sig[0]] if sig[0] not in ("step-error", "run-error") else []

        def still_fails(candidate: dict[str, Any]) -> bool:
            with tempfile.TemporaryDirectory(dir=self.out) as tmp:
                _, verdict = self.run_doc(candidate, Path(tmp), checks=checks)
            return sig in verdict.signatures

        def progress(stats: ShrinkStats, best: dict[str, Any]) -> None:
            self.on_event("shrink", {"signature": "/".join(sig), "steps": len(best["steps"]), "try": stats.tried})

        # A schedule that checks something keeps doing so: the minimal scenario must be able
        # to hold under precedence, and one without a checking step never does.
        must_check = checks_something(doc)
        small, stats = shrink(doc, still_fails, max_tries=self.shrink_tries, progress=progress,
                              out_of_time=lambda: not self._shrink_time_left(began),
                              admissible=lambda c: checks_something(c) or not must_check)
        name = path.stem
        # The minimal run, kept with its report: as the shrink ran it, with every check.
        result, verdict = self.run_doc({**small, "name": name}, found_dir)
        (Path(result.run_dir) / "checker.txt").write_text("\n".join(verdict.details) + "\n")
        replayed = "fails" if sig in verdict.signatures else "held"
        reference = ""
        if self.policy != DEFAULT_POLICY:
            # As ``joynr-sim run FILE --check`` would: stop at a failed step, every check.
            with tempfile.TemporaryDirectory(dir=self.out) as tmp:
                ref, ref_verdict = self.run_doc({**small, "name": name}, Path(tmp), policy=DEFAULT_POLICY,
                                                keep_going=False)
            problems = [f"step {s.index} ({s.title}): {s.detail}" for s in ref.steps if s.outcome == "failed"]
            problems += [d for d in ref_verdict.details if not d.startswith("step ")]
            if not checks_something(small):
                problems.append("no step checks anything")
            reference = "held" if ref.outcome == "passed" and not problems else "failed: " + "; ".join(problems)
        self._shrink_spent += time.monotonic() - began
        path.write_text(self._finding_text(small, path, sig, index, len(doc["steps"]), replayed, reference,
                                           verdict.details))
        return Finding(sig, self.seed, index, round(found_after_s, 1), len(doc["steps"]), len(small["steps"]),
                       str(path), result.run_dir, verdict.details[:50], stats.tried,
                       round(time.monotonic() - began, 1), replayed, reference)

    def _finding_text(self, small: dict[str, Any], path: Path, sig: Signature, index: int, before: int,
                      replayed: str, reference: str, details: list[str]) -> str:
        """The minimal scenario in the library's format. When it held under precedence it
        says so the library's way: its own policy precedence, the explored one guarded."""
        doc = {k: v for k, v in small.items() if k not in ("policy", "guards")}
        doc["name"] = path.stem
        if reference == "held":
            doc["policy"], doc["guards"] = DEFAULT_POLICY, [self.policy]
        else:
            doc["policy"] = self.policy
        file = str(path)
        replay = {"fails": "fails the same way", "held": "held this time (the failure depends on timing)",
                  "not run": "not run: the shrink budget was spent on earlier findings"}
        shrunk = (f"shrunk from {before} to {len(small['steps'])} steps" if replayed != "not run"
                  else f"{before} steps, not shrunk")
        lines = [
            f"joynr-sim explore --seed {self.seed} --policy {self.policy} --broker {self.broker}, run {index}",
            f"What breaks: {'/'.join(sig)}; {shrunk}",
            f"Replayed under {self.policy}: {replay[replayed]}",
        ]
        if reference:
            lines.append(f"Under {DEFAULT_POLICY}: {reference}")
        lines.append(f"Replay: joynr-sim run {file} --policy {self.policy} --check")
        if reference == "held":
            lines.append(f"        joynr-sim run {file} --check  (its own policy, {DEFAULT_POLICY}: holds)")
        elif reference:
            lines.append(f"        joynr-sim run {file} --policy {DEFAULT_POLICY} --check")
        lines += [f"  {d}" for d in details[:10]]
        header = "".join(f"# {line}\n" for line in lines)
        return header + yaml.safe_dump(doc, sort_keys=False)

    def _write_summary(self) -> None:
        data = asdict(self.summary)
        data["findings"] = [{**f, "signature": "/".join(f["signature"])} for f in data["findings"]]
        (self.out / "explore.json").write_text(json.dumps(data, indent=2))
