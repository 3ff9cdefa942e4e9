"""The Spark checker at scale: events per second on ``local[2]``, growth, memory, and
whether every planted violation of the synthetic traces is found and nothing else.

Sizes: 1M and 10M events (quick: 100k and 1M), two run directories each, after a small
warm-up run that is not reported. Generated data lives in a temporary directory that is
removed afterwards.
"""

from __future__ import annotations

import resource
import tempfile
import time
from pathlib import Path

from analytics.inputs import find_runs
from analytics.runner import check_runs
from analytics.session import start
from analytics.synthetic import CHECK_NAMES, generate


def _label(n: int) -> str:
    return f"{n // 1_000_000}M" if n >= 1_000_000 else f"{n // 1000}k"


def _jvm_peak_mib(pid: int | None) -> float:
    """Peak resident memory of the JVM (VmHWM), from /proc; 0 when unknown."""
    if pid is None:
        return 0.0
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def run(quick: bool) -> list[dict]:
    sizes = (100_000, 1_000_000) if quick else (1_000_000, 10_000_000)
    rows: list[dict] = []
    seconds: dict[int, float] = {}
    with tempfile.TemporaryDirectory(prefix="bench-analytics-") as tmp:
        scratch = Path(tmp) / "spark"
        scratch.mkdir()
        handle = start("local[2]", work_dir=scratch)
        try:
            # A first small run pays the JVM's warm-up, so the sizes below compare scaling.
            warm = Path(tmp) / "warm-up"
            generate(warm / "runs", 20_000, runs=2)
            (warm / "stage").mkdir()
            check_runs(handle.spark, find_runs([str(warm / "runs")]), warm / "stage")
            for n in sizes:
                data = Path(tmp) / f"runs-{n}"
                started = time.perf_counter()
                key = generate(data, n, runs=2)
                gen_s = time.perf_counter() - started
                rows.append({"group": "generate", "name": f"synthetic {_label(n)}",
                             "value": key["events"] / gen_s, "unit": "events/s",
                             "seconds": round(gen_s, 2)})
                stage = Path(tmp) / f"stage-{n}"
                stage.mkdir()
                started = time.perf_counter()
                outcome = check_runs(handle.spark, find_runs([str(data)]), stage)
                took = time.perf_counter() - started
                seconds[n] = took
                rows.append({"group": "check local[2]", "name": f"all checks {_label(n)}",
                             "value": outcome.stats.events / took, "unit": "events/s",
                             "seconds": round(took, 2), "events": outcome.stats.events})
                for r in outcome.results:
                    found = sorted(v.key for v in r.violations)
                    exact = found == key["planted"][r.name] and r.count == len(found)
                    rows.append({"group": f"planted {_label(n)}", "name": r.name,
                                 "value": exact, "unit": "found all, nothing else",
                                 "seconds": round(r.seconds, 2)})
                missing = set(CHECK_NAMES) - {r.name for r in outcome.results}
                assert not missing, missing
        finally:
            jvm = _jvm_peak_mib(handle.jvm_pid)
            handle.stop()
    small, large = sizes
    rows.append({"group": "scale", "name": f"time {_label(large)} / time {_label(small)}",
                 "value": seconds[large] / seconds[small], "unit": "ratio (10 = linear)"})
    driver = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    rows.append({"group": "memory", "name": "peak driver RSS + JVM RSS", "value": driver + jvm,
                 "unit": "MiB", "driver": round(driver), "jvm": round(jvm)})
    return rows
