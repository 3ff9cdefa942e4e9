"""``joynr-sim run``: run scenarios one after another with a live progress display, then a
summary table (scenario, steps, outcome, duration)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from .loader import ScenarioError, load_scenarios
from .model import Scenario
from .runner import RunResult, StepOutcome, run_scenario

_OUTCOME = {"passed": "[green]passed[/]", "failed": "[red]failed[/]", "error": "[red]error[/]"}


def run_scenarios(
    paths: list[Path],
    *,
    out: Path,
    broker: str | None,
    policy: str | None,
    seed: int | None,
    gcd_store: str | None,
    console: Console,
) -> int:
    """0 when every scenario passed, 1 when a step failed, 2 when nothing could run."""
    err = Console(stderr=True)
    try:
        scenarios = load_scenarios(paths)
    except ScenarioError as exc:
        err.print(f"[red]joynr-sim run: {escape(str(exc))}[/]", soft_wrap=True)
        return 2
    if not scenarios:
        err.print(f"[red]joynr-sim run: no scenario files in {', '.join(map(str, paths))}[/]")
        return 2
    names = [s.name for s in scenarios]
    if len(set(names)) != len(names):
        dup = sorted({n for n in names if names.count(n) > 1})
        err.print(f"[red]joynr-sim run: two scenarios are named {', '.join(dup)}; each needs its own run directory[/]")
        return 2
    results = [_run_one(s, out, broker, policy, seed, gcd_store, console) for s in scenarios]
    console.print(_summary(results))
    return 0 if all(r.passed for r in results) else 1


def _run_one(scenario: Scenario, out: Path, broker, policy, seed, gcd_store, console: Console) -> RunResult:
    progress = Progress(
        TextColumn("[bold]{task.fields[name]}"), BarColumn(), MofNCompleteColumn(),
        TextColumn("{task.description}"), TimeElapsedColumn(), console=console, transient=True,
    )
    with progress:
        task = progress.add_task("starting brokers", total=len(scenario.steps), name=scenario.name)

        def on_step(outcome: StepOutcome) -> None:
            progress.update(task, advance=1, description=escape(outcome.title))

        result = asyncio.run(run_scenario(
            scenario, out, policy=policy, broker=broker, seed=seed, gcd_store=gcd_store, on_step=on_step,
        ))
    _report(result, console)
    return result


def _report(result: RunResult, console: Console) -> None:
    mark = _OUTCOME[result.outcome]
    console.print(f"{mark} {result.scenario} ({result.policy}, {result.broker}) → {result.run_dir}")
    if result.error:
        console.print(f"  [red]{escape(result.error)}[/]")
    failed = result.failed_step
    if failed is not None:
        where = f"{result.path}:{failed.line}" if result.path else f"step {failed.index}"
        console.print(f"  [red]step {failed.index} '{escape(failed.title)}' ({where}): {escape(failed.detail)}[/]")
        if failed.context:
            console.print(escape(failed.context), soft_wrap=True, highlight=False)


def _summary(results: list[RunResult]) -> Table:
    table = Table(title="scenario runs")
    for col in ("scenario", "policy", "broker", "steps", "outcome", "duration"):
        table.add_column(col, justify="right" if col in ("steps", "duration") else "left")
    for r in results:
        ok = sum(s.outcome == "ok" for s in r.steps)
        table.add_row(r.scenario, r.policy, r.broker, f"{ok}/{len(r.steps)}", _OUTCOME[r.outcome],
                      f"{r.duration_s:.1f}s")
    return table
