"""``joynr-sim run``: check every input before anything starts, run the scenarios one
after another with a live progress display, then a summary table (scenario, steps,
outcome, duration).

Exit status: 0 every scenario passed, 1 a step failed, 2 a scenario file or an option is
unusable (nothing runs, nothing is written), 3 a run could not be carried out (a broker,
the GCD store or a port could not be reached; the scenarios after it are not run).
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from brokers import BrokerSpecError, parse_broker, redact

from .loader import ScenarioError, load_scenarios
from .model import Scenario
from .rundir import RunDirError, check_run_dir
from .runner import RunResult, StepOutcome, run_scenario

EXIT_PASSED, EXIT_STEP_FAILED, EXIT_BAD_INPUT, EXIT_SETUP = 0, 1, 2, 3
GCD_STORE_SCHEMES = ("postgresql://", "postgres://")

REPORT_DIR = "report"  # --report writes OUT/report/
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
    report: bool = False,
) -> int:
    """Run the scenarios under ``paths``; returns the exit status (see the module). With
    ``report``, the HTML report of the runs goes to ``out/report/`` and its index is printed,
    also when a step failed."""
    err = Console(stderr=True)

    def refuse(message: str) -> int:
        # redact: a message may quote a scenario's broker URL, password and all
        err.print(f"[red]joynr-sim run: {escape(redact(message))}[/]", soft_wrap=True, highlight=False)
        return EXIT_BAD_INPUT

    try:
        scenarios = load_scenarios(paths)
    except ScenarioError as exc:
        return refuse(str(exc))
    if not scenarios:
        return refuse(f"no scenario files in {', '.join(map(str, paths))}")
    problem = check_inputs(scenarios, out=out, broker=broker, gcd_store=gcd_store) or (
        check_report_target(scenarios, out) if report else None)
    if problem:
        return refuse(problem)
    results: list[RunResult] = []
    for scenario in scenarios:
        try:
            result = _run_one(scenario, out, broker, policy, seed, gcd_store, console)
        except RunDirError as exc:  # the folder changed since it was checked
            return refuse(str(exc))
        results.append(result)
        if result.outcome == "error":
            err.print(f"[red]joynr-sim run: {escape(scenario.name)}: {escape(_first_line(result.error))} "
                      f"(run directory {escape(result.run_dir)}"
                      f"{', marked incomplete' if not result.complete else ''})[/]",
                      soft_wrap=True, highlight=False)
            break
    console.print(_summary(results))
    if any(r.outcome == "error" for r in results):
        status = EXIT_SETUP
    else:
        status = EXIT_PASSED if all(r.passed for r in results) else EXIT_STEP_FAILED
    if report and results:
        status = _write_report(results, out, console, err, status)
    return status


def check_report_target(scenarios: list[Scenario], out: Path) -> str | None:
    """Whether ``out/report/`` can take the pages of these runs, before anything runs."""
    from ..report import ReportError, check_out

    if any(s.name == REPORT_DIR for s in scenarios):
        return (f"a scenario named {REPORT_DIR!r} would share its folder with --report's pages "
                f"({out / REPORT_DIR}); rename the scenario or run without --report")
    try:
        check_out(out / REPORT_DIR, [s.name for s in scenarios])
    except ReportError as exc:
        return f"--report: {exc}"
    return None


def _write_report(results: list[RunResult], out: Path, console: Console, err: Console, status: int) -> int:
    from ..report import ReportError, write_report

    try:
        written = write_report([Path(r.run_dir) for r in results], out=out / REPORT_DIR)
    except ReportError as exc:
        err.print(f"[red]joynr-sim run: --report: {escape(redact(str(exc)))}[/]", soft_wrap=True, highlight=False)
        return status or EXIT_SETUP
    console.print(f"report: {escape(str(written.index))}", soft_wrap=True, highlight=False)
    return status


def check_inputs(scenarios: list[Scenario], *, out: Path, broker: str | None, gcd_store: str | None) -> str | None:
    """The first problem with the options or the scenarios' broker choices, as one line."""
    names = [s.name for s in scenarios]
    if len(set(names)) != len(names):
        dup = sorted({n for n in names if names.count(n) > 1})
        return f"two scenarios are named {', '.join(dup)}; each needs its own run directory"
    if gcd_store is not None and not gcd_store.startswith(GCD_STORE_SCHEMES):
        return f"--gcd-store: expected a postgresql:// URL, got {redact(gcd_store)!r}"
    if broker is not None:
        try:
            parse_broker(broker)
        except BrokerSpecError as exc:
            return f"--{exc}"
    for s in scenarios:
        try:
            parse_broker(broker or s.broker, s.backends)
        except BrokerSpecError as exc:
            where = "--broker" if broker else "broker"
            return f"{s.path or s.name}: {where}: {str(exc).removeprefix('broker: ')}"
    try:
        for s in scenarios:
            check_run_dir(out, s.name)
    except RunDirError as exc:
        return str(exc)
    return None


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


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else ""


def _report(result: RunResult, console: Console) -> None:
    mark = _OUTCOME[result.outcome]
    console.print(f"{mark} {escape(result.scenario)} ({result.policy}, {escape(result.broker)}) → "
                  f"{escape(result.run_dir)}", soft_wrap=True)
    failed = result.failed_step
    if failed is not None:
        where = f"{result.path}:{failed.line}" if result.path else f"step {failed.index}"
        console.print(f"  [red]step {failed.index} '{escape(failed.title)}' ({escape(where)}): "
                      f"{escape(failed.detail)}[/]", soft_wrap=True)
        if failed.context:
            console.print(escape(failed.context), soft_wrap=True, highlight=False)
        if failed.traceback:
            console.print(f"  the traceback is in {escape(result.run_dir)}/run.json", soft_wrap=True)


def _summary(results: list[RunResult]) -> Table:
    table = Table(title="scenario runs")
    for col in ("scenario", "policy", "broker", "steps", "outcome", "duration"):
        table.add_column(col, justify="right" if col in ("steps", "duration") else "left")
    for r in results:
        ok = sum(s.outcome == "ok" for s in r.steps)
        table.add_row(escape(r.scenario), r.policy, escape(r.broker), f"{ok}/{len(r.steps)}",
                      _OUTCOME[r.outcome], f"{r.duration_s:.1f}s")
    return table
