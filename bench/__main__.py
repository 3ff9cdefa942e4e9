"""``make bench``: run every ``bench/bench_*.py`` (or those named), print one table, write JSON.

Each benchmark module defines ``run(quick: bool) -> list[dict]``; a row has ``group``,
``name``, ``value`` and ``unit`` and may carry more keys (a baseline, a ratio, ...).
Speeds are reported next to a baseline measured in the same process run.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import platform
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

from rich.console import Console
from rich.table import Table

HERE = Path(__file__).parent
RESULTS = HERE / "results"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench")
    parser.add_argument("names", nargs="*", help="benchmark modules without the bench_ prefix")
    parser.add_argument("--quick", action="store_true", help="smaller sizes, for a smoke run")
    args = parser.parse_args(argv)
    available = sorted(p.stem[len("bench_"):] for p in HERE.glob("bench_*.py"))
    names = args.names or available
    unknown = sorted(set(names) - set(available))
    if unknown:
        parser.error(f"unknown benchmark(s) {', '.join(unknown)}; available: {', '.join(available)}")
    console = Console()
    RESULTS.mkdir(exist_ok=True)
    all_rows = []
    for name in names:
        console.print(f"[bold]bench {name}[/] …")
        started = time.perf_counter()
        rows = importlib.import_module(f"bench.bench_{name}").run(args.quick)
        for row in rows:
            row.setdefault("bench", name)
        # Each file names the machine it ran on: a page that shows one benchmark's figures
        # must not borrow the machine of another run's all.json.
        (RESULTS / f"{name}.json").write_text(json.dumps({**machine(args.quick), "rows": rows}, indent=2))
        console.print(f"  done in {time.perf_counter() - started:.1f}s")
        all_rows.extend(rows)
    table = Table(title="joynr-sim benchmarks")
    extra = sorted({k for r in all_rows for k in r} - {"bench", "group", "name", "value", "unit"})
    for col in ("bench", "group", "name", "value", "unit", *extra):
        table.add_column(col, justify="right" if col in ("value",) else "left")
    for row in all_rows:
        table.add_row(*(_fmt(row.get(c)) for c in ("bench", "group", "name", "value", "unit", *extra)))
    console.print(table)
    summary = {**machine(args.quick), "rows": all_rows}
    (RESULTS / "all.json").write_text(json.dumps(summary, indent=2))
    console.print(f"results written to {RESULTS}/")
    return 0


def machine(quick: bool) -> dict:
    """What a result was measured on: figures of another machine are not comparable."""
    cpu = ""
    try:
        cpu = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                    if line.startswith("model name")), "")
    except OSError:
        pass
    return {
        "machine": platform.machine(),
        "platform": platform.platform(terse=True),
        "cpu": cpu or platform.processor() or "unknown",
        "cores": os.cpu_count(),
        "python": sys.version.split()[0],
        "quick": quick,
        "date": datetime.now(UTC).isoformat(timespec="seconds"),
    }


def _fmt(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:,.3f}" if abs(value) < 100 else f"{value:,.0f}"
    return str(value)


if __name__ == "__main__":
    sys.exit(main())
