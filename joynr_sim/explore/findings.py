"""What explore found and writes: a finding per distinct failure, its scenario file, and
the summary (``explore.json``).

A finding's scenario file is written once: its name is claimed (created exclusively) before
anything is run under it, so two findings never share a file, and a finding whose shrunk
scenario is one written already is recorded with that file instead of a second copy.
"""

from __future__ import annotations

import json
import os
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ..core.policies import DEFAULT_POLICY
from .judge import Signature

NAME_MAX = 64  # the scenario format's longest name
NOT_CONFIRMED = "not confirmed"


@dataclass
class Finding:
    signature: Signature
    seed: int  # the exploration's
    run_index: int
    found_after_s: float  # from the start of the exploration to the judgement of the run that showed it
    steps_before: int
    steps_after: int
    scenario_file: str
    run_dir: str
    details: list[str]
    shrink_runs: int  # runs spent shrinking (a guard's candidate costs two: its policy and precedence)
    shrink_seconds: float
    replayed: str  # the minimal scenario run again from its seed: "fails" (the same way), "held" or "not run"
    reference: str  # the same under precedence: "held", "failed: ..." or "" (explored precedence)
    network: str = ""  # where it was found and replayed: memory, amqtt or mosquitto
    run_seed: int = 0  # the seed of its runs: on memory, the same seed replays the same run
    guard: bool = False  # written as the library's guard: holds under precedence, fails under the policy
    confirmed: str = NOT_CONFIRMED  # on the --confirm broker: "reproduced", "held" or "not confirmed"
    confirm_broker: str = ""
    confirm_reference: str = ""  # a guard's precedence side on the --confirm broker
    also: list[str] = field(default_factory=list)  # other failures of its run the minimal scenario shows too
    shrink_batches: int = 0  # judgements (Spark jobs) the shrink asked for


@dataclass
class Summary:
    seed: int
    policy: str
    broker: str
    network: str = ""
    runs: int = 0
    seconds: float = 0.0
    first_finding_s: float | None = None  # when the first failure was seen
    findings: list[Finding] = field(default_factory=list)
    seen: dict[str, int] = field(default_factory=dict)  # signature -> runs that showed it
    batches: int = 0  # judgements of the exploring runs (one Spark job each)
    shrink_budget_s: float | None = None

    def write(self, out: Path) -> None:
        data = asdict(self)
        data["findings"] = [{**f, "signature": "/".join(f["signature"])} for f in data["findings"]]
        (out / "explore.json").write_text(json.dumps(data, indent=2))


def label(sig: Signature, room: int) -> str:
    text = re.sub(r"[^a-z0-9]+", "-", "-".join(sig).lower()).strip("-")
    if len(text) > room:  # cut at a word, not inside one
        text = text[:room].rsplit("-", 1)[0]
    return text


def claim_path(found_dir: Path, prefix: str, sig: Signature) -> Path:
    """A new file ``<prefix><label>.yaml`` (``-2``, ``-3``, ... when taken), created empty
    and exclusively: no other finding can be written there."""
    room = NAME_MAX - len(prefix) - 3  # a scenario name has 64 characters at most; "-NN" for a twin
    base = f"{prefix}{label(sig, room)}"
    found_dir.mkdir(exist_ok=True)
    n = 1
    while True:
        path = found_dir / (f"{base}.yaml" if n == 1 else f"{base}-{n}.yaml")
        # its run directory's name too: a run directory of an earlier finding is never replaced
        if not (found_dir / path.stem).exists():
            try:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            except FileExistsError:
                pass
            else:
                os.close(fd)
                return path
        n += 1


def same_scenario(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Whether two scenarios differ by their names only."""
    return {**a, "name": ""} == {**b, "name": ""}


def scenario_text(small: dict[str, Any], f: Finding, policy: str, broker: str) -> str:
    """The minimal scenario in the library's format, with a comment saying what breaks and
    how to replay it. A guard is written the library's way: its own policy precedence, the
    explored one guarded; otherwise its policy is the explored one."""
    path = Path(f.scenario_file)
    doc = {k: v for k, v in small.items() if k not in ("policy", "guards")}
    doc["name"] = path.stem
    if f.guard:
        doc["policy"], doc["guards"] = DEFAULT_POLICY, [policy]
    else:
        doc["policy"] = policy
    network = f.network or broker
    sig = "/".join(f.signature)
    replay = {"fails": "fails the same way", "held": "held this time (the failure depends on timing)",
              "not run": "not run: the shrink budget was spent on earlier findings"}
    shrunk = (f"shrunk from {f.steps_before} to {f.steps_after} steps" if f.replayed != "not run"
              else f"{f.steps_before} steps, not shrunk")
    how = f"--network {network} --seed {f.run_seed}"
    lines = [
        f"joynr-sim explore --seed {f.seed} --policy {policy} --network {network}, run {f.run_index}",
        f"What breaks: {sig}; {shrunk}" + (f"; also {', '.join(f.also)}" if f.also else ""),
        f"Replayed under {policy} on {network} from seed {f.run_seed}: {replay[f.replayed]}",
    ]
    if f.reference:
        lines.append(f"Under {DEFAULT_POLICY}: {f.reference}")
    if f.confirmed == NOT_CONFIRMED:
        lines.append(f"Confirmed on a real broker: {NOT_CONFIRMED}" +
                     (" (not replayed)" if f.replayed == "not run" else " (no --confirm)"))
    else:
        ref = f" (under {DEFAULT_POLICY}: {f.confirm_reference})" if f.confirm_reference else ""
        lines.append(f"Confirmed on {f.confirm_broker}: {f.confirmed}{ref}")
    lines.append(f"Replay: joynr-sim run {path} --policy {policy} {how} --check")
    if f.guard:
        lines.append(f"        joynr-sim run {path} {how} --check  (its own policy, {DEFAULT_POLICY}: holds)")
    elif f.reference:
        lines.append(f"        joynr-sim run {path} --policy {DEFAULT_POLICY} {how} --check")
    lines += [f"  {d}" for d in f.details[:10]]
    header = "".join(f"# {' '.join(line.splitlines())}\n" for line in lines)  # a comment is one line
    return header + yaml.safe_dump(doc, sort_keys=False)
