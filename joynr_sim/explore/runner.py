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

from ..scenario.loader import parse_scenario
from ..scenario.runner import RunResult, run_scenario
from .generate import Generator
from .shrink import shrink

Signature = tuple[str, str]


@dataclass
class Judgement:
    signatures: set[Signature]
    details: list[str]  # one line each, for the report


@dataclass
class Finding:
    signature: Signature
    seed: int
    run_index: int
    steps_before: int
    steps_after: int
    scenario_file: str
    run_dir: str
    details: list[str]
    shrink_runs: int


@dataclass
class Summary:
    seed: int
    policy: str
    broker: str
    runs: int = 0
    seconds: float = 0.0
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

    def violations(self, run_dir: Path) -> list[tuple[str, str, str]]:
        """(check, kind, summary) of every violation in one run."""
        from analytics.inputs import find_runs
        from analytics.runner import check_runs

        self._n += 1
        stage = self._scratch / f"stage-{self._n}"
        stage.mkdir()
        try:
            outcome = check_runs(self._handle.spark, find_runs([str(run_dir)]), stage, max_details=20)
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
                 generator: Generator | None = None, shrink_tries: int = 40,
                 on_event: Callable[[str, dict], None] = lambda kind, info: None) -> None:
        self.out = out
        self.policy = policy
        self.broker = broker
        self.seed = seed
        self.checker = checker
        self.generator = generator or Generator()
        self.shrink_tries = shrink_tries
        self.on_event = on_event
        self.summary = Summary(seed, policy, broker)
        self._scratch = out / "runs"

    def run_doc(self, doc: dict[str, Any], where: Path) -> tuple[RunResult, Judgement]:
        scenario = parse_scenario(yaml.safe_dump(doc, sort_keys=False), f"<{doc['name']}>")
        result = asyncio.run(run_scenario(scenario, where, policy=self.policy, broker=self.broker,
                                          seed=self.seed, keep_going=True))
        found = self.checker.violations(Path(result.run_dir)) if result.outcome != "error" else []
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
            new = sorted(s for s in verdict.signatures if "/".join(s) not in self.summary.seen)
            for sig in verdict.signatures:
                self.summary.seen["/".join(sig)] = self.summary.seen.get("/".join(sig), 0) + 1
            self.on_event("run", {"index": index, "failures": sorted("/".join(s) for s in verdict.signatures)})
            for sig in new:
                self.summary.findings.append(self._shrink(doc, sig, index))
            shutil.rmtree(result.run_dir, ignore_errors=True)  # a run directory this loop wrote
            index += 1
        self.summary.seconds = time.monotonic() - started
        self._write_summary()
        return self.summary

    def _shrink(self, doc: dict[str, Any], sig: Signature, index: int) -> Finding:
        label = re.sub(r"[^a-z0-9]+", "-", "-".join(sig).lower()).strip("-")[:40]
        tries = 0

        def still_fails(candidate: dict[str, Any]) -> bool:
            nonlocal tries
            tries += 1
            with tempfile.TemporaryDirectory(dir=self.out) as tmp:
                _, verdict = self.run_doc(candidate, Path(tmp))
            self.on_event("shrink", {"signature": "/".join(sig), "steps": len(candidate["steps"]), "try": tries})
            return sig in verdict.signatures

        small, _ = shrink(doc, still_fails, max_tries=self.shrink_tries)
        small = {**small, "name": f"explore-{self.seed}-{label}"}
        found_dir = self.out / "findings"
        found_dir.mkdir(exist_ok=True)
        result, verdict = self.run_doc(small, found_dir)  # the minimal run, kept with its report
        (Path(result.run_dir) / "checker.txt").write_text("\n".join(verdict.details) + "\n")
        path = found_dir / f"{small['name']}.yaml"
        held = "still fails" if sig in verdict.signatures else "did not fail again when replayed (timing)"
        header = (
            f"# Found by: joynr-sim explore --seed {self.seed} --policy {self.policy} --broker {self.broker}\n"
            f"# What breaks: {'/'.join(sig)} (run {index}; shrunk from {len(doc['steps'])} to "
            f"{len(small['steps'])} steps; {held})\n"
            + "".join(f"#   {line}\n" for line in verdict.details[:10])
        )
        path.write_text(header + yaml.safe_dump(small, sort_keys=False))
        return Finding(sig, self.seed, index, len(doc["steps"]), len(small["steps"]), str(path), result.run_dir,
                       verdict.details[:50], tries)

    def _write_summary(self) -> None:
        data = asdict(self.summary)
        data["findings"] = [{**f, "signature": "/".join(f["signature"])} for f in data["findings"]]
        (self.out / "explore.json").write_text(json.dumps(data, indent=2))
