"""Synthetic traces at scale, with planted violations and their answer key.

Each run directory gets cluster controllers (``cc-0``..), libjoynr runtimes, GCD instances,
brokers and a runner, and a realistic mix: request/reply exchanges over WebSocket and MQTT
with their reply-to routing entries, GCD registrations and lookups, link reattaches and
steals, queued and expired requests, purges, self-hairpins (a proxy reaching a provider
of its own runtime through the cluster controller), sends the transport refuses at the
sender, duplicate copies; every run ends with graceful stops, as real runs do. Every event
advances the simulated clock by one millisecond (and a lull by more), so the order of
events is unambiguous. At known places each run gets the planted violations of every
check and a few look-alikes that are not violations; the answer key lists the violation
keys the checker must report, and nothing else.

Runs are written in parallel processes with plain string building (no JSON encoder on
the hot path).

    python -m analytics.synthetic OUT_DIR --events 1000000 --runs 2
"""

from __future__ import annotations

import argparse
import json
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from .plants import PLANTS
from .run import Run
from .writer import CHECK_NAMES, Writer

__all__ = ["CHECK_NAMES", "generate", "main"]

_EVENTS_PER_EXCHANGE = 15.6  # measured mix; only places the planted violations


@dataclass(frozen=True)
class _Job:
    run_dir: str
    run_id: str
    events: int


def _write_run(job: _Job) -> tuple[int, dict[str, list[str]]]:
    run_dir = Path(job.run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    (run_dir / "run.json").write_text(json.dumps({"run": job.run_id, "policy": "precedence",
                                                  "synthetic": True}))
    w = Writer(run_dir, job.run_id)
    run = Run(w)
    run.start()
    expected = max(int(job.events / _EVENTS_PER_EXCHANGE), len(PLANTS) * 2)
    at = {int(expected * (k + 1) / (len(PLANTS) + 1)): name for k, name in enumerate(PLANTS)}
    i = 0
    done: set[str] = set()
    while w.count < job.events or len(done) < len(PLANTS):
        run.exchange(i)
        name = at.get(i)
        if name is not None or (w.count >= job.events and len(done) < len(PLANTS)):
            name = name or next(p for p in PLANTS if p not in done)
            if name not in done:
                getattr(run, name)(len(done))
                done.add(name)
        i += 1
    run.end()
    w.close()
    return w.count, w.planted


def generate(root: Path, events: int, runs: int = 2, workers: int | None = None) -> dict:
    """Writes ``runs`` run directories under ``root`` (about ``events`` events in all) and
    ``root/answer_key.json``; returns the answer key."""
    root.mkdir(parents=True, exist_ok=True)
    jobs = [_Job(str(root / f"syn-{k}"), f"syn-{k}", max(events // runs, 1)) for k in range(runs)]
    if runs == 1 or workers == 1:
        results = [_write_run(j) for j in jobs]
    else:
        with ProcessPoolExecutor(max_workers=min(runs, workers or 2)) as pool:
            results = list(pool.map(_write_run, jobs))
    planted: dict[str, list[str]] = {name: [] for name in CHECK_NAMES}
    for _, keys in results:
        for name, found in keys.items():
            planted[name].extend(found)
    key = {
        "events": sum(n for n, _ in results),
        "runs": [j.run_dir for j in jobs],
        "planted": {name: sorted(v) for name, v in planted.items()},
    }
    (root / "answer_key.json").write_text(json.dumps(key, indent=2))
    return key


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m analytics.synthetic",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path, help="folder for the run directories")
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=2)
    args = parser.parse_args(argv)
    key = generate(args.out, args.events, args.runs)
    print(f"{key['events']:,} events in {len(key['runs'])} run(s); "
          f"{sum(map(len, key['planted'].values()))} planted violations; "
          f"answer key {args.out / 'answer_key.json'}")
    return 0
