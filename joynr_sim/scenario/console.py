"""``joynr-sim run``: check every input before anything starts, run the scenarios one
after another with a live progress display, then a summary table (scenario, steps,
outcome, duration). With ``--policy all``, every scenario runs under every policy
(``OUT/<policy>/<scenario>/``, ``--jobs`` at a time) and the policy matrix is printed and
written to ``OUT/matrix.json`` (see ``matrix``). ``--check`` then runs the Spark checks over
the runs and keeps each run's verdicts in ``<run>/check/report.json`` (as ``joynr-sim check``
would), ``--junit FILE`` writes one test case per run, ``--report`` the HTML report to
``OUT/report/`` (of a matrix: its grid of expected and actual outcomes too).

Exit status: 0 every scenario passed (with ``--policy all``: held under its own policy and
failed under each it guards against; with ``--check``: and no violation where it must hold),
1 otherwise, 2 a scenario file or an option is unusable (nothing runs, nothing is written),
3 a run could not be carried out (a broker, the GCD store or a port could not be reached, or
a write to its run directory failed: ``cannot write <path>: <reason>``; without ``--policy
all`` the scenarios after it are not run), the checks could not run, or their report.json,
``matrix.json``, ``--junit`` or ``--report`` could not be written.
"""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from brokers import BrokerSpecError, parse_broker, redact

from ..core.variants import RULE_SET_NAMES
from ..runtime.gcd_service import gcd_place
from ..write_failure import WriteFailure
from .loader import ScenarioError, load_scenarios
from .matrix import (
    MATRIX_FILE,
    Cell,
    all_ok,
    cell_of,
    check_matrix_target,
    junit_xml,
    matrix_document,
    write_json,
)
from .model import Scenario
from .run_inputs import check_inputs, check_junit_target, run_folder
from .rundir import RunDirError
from .runner import RunResult, StepOutcome, run_scenario

EXIT_PASSED, EXIT_STEP_FAILED, EXIT_BAD_INPUT, EXIT_SETUP = 0, 1, 2, 3

REPORT_DIR = "report"  # --report writes OUT/report/
ALL_POLICIES = "all"
MAX_JOBS = 16
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
    check: bool = False,
    junit: Path | None = None,
    jobs: int = 1,
    join: tuple[str, int, float] | None = None,
    hosts: int | str | None = None,
    network: str | None = None,
    gcd_last_seen_timeout_ms: int | None = None,
    wire: str | None = None,
    gcd: str | None = None,
) -> int:
    """Run the scenarios under ``paths``; returns the exit status (see the module). With
    ``report``, the HTML report of the runs goes to ``out/report/`` and its index is printed,
    also when a step failed (with the checker's verdicts when ``check``). ``policy`` ``"all"``
    runs the policy matrix. ``join``: (run name,
    hosts, seconds to wait for them): the runtimes run on hosts that joined (``host.join``).
    ``hosts`` and ``network``: see ``run_scenario``. ``gcd_last_seen_timeout_ms`` switches the
    GCD's last-seen sweep on in every scenario, over what a scenario says. ``wire``: the bytes
    every run's messages travel in (``joynr_sim.wire.codecs``; None: the default wire). ``gcd``:
    ``external`` starts no GCD, one serves the external brokers already (``core.gcd``)."""
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
    if gcd_last_seen_timeout_ms is not None:
        scenarios = [replace(s, gcd_last_seen_timeout_ms=gcd_last_seen_timeout_ms) for s in scenarios]
    if wire is not None:
        scenarios = [replace(s, wire=wire) for s in scenarios]
    if gcd is not None:
        scenarios = [replace(s, gcd=gcd) for s in scenarios]
    matrix = policy == ALL_POLICIES
    policies = list(RULE_SET_NAMES) if matrix else [policy]
    problem = (check_inputs(scenarios, out=out, broker=broker, gcd_store=gcd_store,
                            folders=[run_folder(p) for p in policies] if matrix else None, network=network)
               or (check_report_target(scenarios, out, policies if matrix else None) if report else None)
               or (check_matrix_target(out) if matrix else None)
               or (check_junit_target(junit) if junit else None)
               or (None if 1 <= jobs <= MAX_JOBS else f"--jobs must be 1 to {MAX_JOBS}, got {jobs}")
               or (_join_problem(join, broker, matrix) if join else None)
               or (_gcd_problem(gcd, broker, scenarios) if gcd else None))
    if problem:
        return refuse(problem)
    if matrix:
        try:
            results = _run_matrix(scenarios, policies, out, broker, seed, gcd_store, console, jobs, hosts,
                                  network)
        except RunDirError as exc:
            return refuse(str(exc))
    else:
        results = _run_each(scenarios, out, broker, policy, seed, gcd_store, console, err, join, hosts,
                            network)
        if results is None:
            return EXIT_BAD_INPUT
    by_name = {s.name: s for s in scenarios}
    cells = [cell_of(by_name[r.scenario], r, matrix=matrix) for r in results]
    status = EXIT_PASSED
    if check and results:
        status = _check(cells, err)
    unwritten = False  # an output the disk refused: exit 3, whatever the runs did

    def write(path: Path, writer) -> None:
        nonlocal unwritten
        try:
            writer(path)
        except OSError as exc:
            unwritten = True
            err.print(f"[red]joynr-sim run: {escape(str(WriteFailure.of(path, exc)))}[/]", soft_wrap=True,
                      highlight=False)

    if matrix:
        console.print(_matrix_table(scenarios, policies, cells))
        write(out / MATRIX_FILE, lambda path: write_json(path, matrix_document(scenarios, policies, cells, check)))
        console.print(f"matrix: {escape(str(out / MATRIX_FILE))}", soft_wrap=True, highlight=False)
    else:
        console.print(_summary(results))
        for c in cells:
            if c.checks_nothing:
                err.print(f"[yellow]joynr-sim run: {escape(c.scenario)} checks nothing (waiting is not a check)[/]")
            for v in c.violations:
                console.print(f"[red]{escape(c.scenario)}: {escape(v)}[/]", soft_wrap=True, highlight=False)
    if junit is not None:
        write(junit, lambda path: path.write_bytes(junit_xml(cells, "joynr-sim matrix" if matrix else "joynr-sim run")))
    if unwritten:
        status = EXIT_SETUP
    if status == EXIT_PASSED:
        if any(r.outcome == "error" for r in results):
            status = EXIT_SETUP
        else:
            status = EXIT_PASSED if all_ok(cells) else EXIT_STEP_FAILED
    if report and results:
        status = _write_report(results, out, console, err, status, matrix)
    return status


def _gcd_problem(gcd: str, broker: str | None, scenarios: list) -> str | None:
    """--gcd external: every scenario's brokers external, as the simulation requires."""
    try:
        for scenario in scenarios:
            gcd_place(gcd, parse_broker(broker or scenario.broker).kind)
    except (ValueError, BrokerSpecError) as exc:
        return f"--gcd: {exc}"
    return None


def _join_problem(join: tuple[str, int, float], broker: str | None, matrix: bool) -> str | None:

    from ..host.join.mqtt_channel import check_name

    try:
        check_name("--join", join[0])
        external = broker is not None and parse_broker(broker).kind == "external"
    except (ValueError, BrokerSpecError) as exc:
        return str(exc)
    if not external:
        return "--join: the hosts meet on the run's brokers: give them as --broker gbid1=mqtt://host:port,..."
    if not 1 <= join[1] <= 4096:
        return f"--join-hosts: expected 1 to 4096, got {join[1]}"
    if not 0 < join[2] <= 3600:
        return f"--join-timeout: expected more than 0 and at most 3600 seconds, got {join[2]:g}"
    return "--join goes with one policy" if matrix else None


def _run_each(scenarios, out, broker, policy, seed, gcd_store, console, err, join=None,
              hosts=None, network=None) -> list[RunResult] | None:
    """One after another, each with its progress display; stops after a run that errs."""
    results: list[RunResult] = []
    for scenario in scenarios:
        try:
            result = _run_one(scenario, out, broker, policy, seed, gcd_store, console, join, hosts, network)
        except RunDirError as exc:  # the folder changed since it was checked
            err.print(f"[red]joynr-sim run: {escape(redact(str(exc)))}[/]", soft_wrap=True, highlight=False)
            return None
        results.append(result)
        if result.outcome == "error":
            _print_error(err, result)
            break
    return results


def _print_error(err: Console, result: RunResult) -> None:
    err.print(f"[red]joynr-sim run: {escape(result.scenario)}: {escape(_first_line(result.error))} "
              f"(run directory {escape(result.run_dir)}"
              f"{', marked incomplete' if not result.complete else ''})[/]",
              soft_wrap=True, highlight=False)


def _run_matrix(scenarios: list[Scenario], policies: list[str], out: Path, broker, seed, gcd_store,
                console: Console, jobs: int, hosts: int | str | None, network: str | None = None
                ) -> list[RunResult]:
    """Every scenario under every policy and variant, ``jobs`` runs at a time, into
    OUT/<policy or variant>/ (``run_folder``)."""
    progress = Progress(TextColumn("[bold]policy matrix"), BarColumn(), MofNCompleteColumn(),
                        TextColumn("{task.description}"), TimeElapsedColumn(), console=console, transient=True)
    pairs = [(s, p) for p in policies for s in scenarios]

    async def all_runs() -> list[RunResult]:
        gate = asyncio.Semaphore(jobs)
        task = progress.add_task("", total=len(pairs))

        async def one(scenario: Scenario, policy: str) -> RunResult:
            async with gate:
                result = await run_scenario(scenario, out / run_folder(policy), policy=policy, broker=broker, seed=seed,
                                            gcd_store=gcd_store, hosts=hosts, network=network)
            progress.update(task, advance=1, description=escape(f"{scenario.name} ({policy})"))
            return result

        return list(await asyncio.gather(*(one(s, p) for s, p in pairs)))

    with progress:
        results = asyncio.run(all_runs())
    err = Console(stderr=True)
    for r in results:
        if r.outcome == "error":
            _print_error(err, r)
    return results


def _check(cells: list[Cell], err: Console) -> int:
    """Attach the checker's violations to the cells; EXIT_SETUP when the checks could not run."""
    from .checking import CheckError, check_and_keep

    try:
        found, unwritten = check_and_keep({c.run_dir: c.run_id for c in cells if c.outcome != "error"})
    except CheckError as exc:
        err.print(f"[red]joynr-sim run: --check: {escape(str(exc))}[/]", soft_wrap=True, highlight=False)
        return EXIT_SETUP
    for c in cells:
        c.add_violations(found.get(c.run_id, []))
    if unwritten is not None:  # the verdicts stand; the report would call the runs not checked
        failure = WriteFailure.of(Path(unwritten.filename or "."), unwritten)
        err.print(f"[red]joynr-sim run: --check: {escape(str(failure))}[/]", soft_wrap=True, highlight=False)
        return EXIT_SETUP
    return EXIT_PASSED




def _matrix_table(scenarios: list[Scenario], policies: list[str], cells: list[Cell]) -> Table:
    """A row per scenario: its own policy's cell, each guarded policy's or variant's cell, and
    the other columns counted (any of them that went wrong is named). Green: ended as it must;
    red: did not. matrix.json has every cell."""
    by_key = {(c.scenario, c.policy): c for c in cells}
    table = Table(title="policy matrix (own: must hold; guards: must fail)", show_lines=True)
    table.add_column("scenario", overflow="fold")
    table.add_column("own policy", overflow="fold", max_width=40)
    table.add_column("guards", overflow="fold", max_width=60)
    table.add_column("other columns", overflow="fold", max_width=40)

    def shown(c: Cell, whole: bool = False) -> str:
        colour = "red" if not c.ok else ("green" if c.expected != "any" else "default")
        text = c.text()
        if not whole and c.ok and text.startswith("step "):  # failed as it must: where is enough
            text = text.split(" '", 1)[0]
        return f"[{colour}]{escape(c.policy)}: {escape(_clip(text))}[/]"

    for s in scenarios:
        row = [escape(s.name) + ("\n[dim]smoke[/]" if s.smoke else "")]
        mine = [by_key[(s.name, p)] for p in policies if (s.name, p) in by_key]
        own = [c for c in mine if c.expected == "hold"]
        guarded = [c for c in mine if c.expected == "fail"]
        others = [c for c in mine if c.expected == "any"]
        row.append("\n".join(shown(c, True) for c in own))
        row.append("\n".join(shown(c) for c in guarded))
        held = sum(c.outcome == "held" for c in others)
        summary = f"{held} held, {len(others) - held} failed" if others else ""
        row.append("\n".join([summary, *(shown(c, True) for c in others if not c.ok)]))
        table.add_row(*row)
    return table


def _clip(text: str, limit: int = 120) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def check_report_target(scenarios: list[Scenario], out: Path, policies: list[str] | None = None) -> str | None:
    """Whether ``out/report/`` can take the pages of these runs, before anything runs;
    ``policies``: the matrix's, whose runs lie in ``out/<rule set>/``."""
    from ..report import ReportError, check_out, page_label

    taken = [s.name for s in scenarios] if policies is None else [run_folder(p) for p in policies]
    if REPORT_DIR in taken:
        return (f"a scenario named {REPORT_DIR!r} would share its folder with --report's pages "
                f"({out / REPORT_DIR}); rename the scenario or run without --report")
    if policies is None:
        labels = [s.name for s in scenarios]
    else:
        labels = [page_label(out / run_folder(p) / s.name, matrix=True) for p in policies for s in scenarios]
    try:
        check_out(out / REPORT_DIR, labels)
    except ReportError as exc:
        return f"--report: {exc}"
    return None


def _write_report(results: list[RunResult], out: Path, console: Console, err: Console, status: int,
                  matrix: bool = False) -> int:
    from ..report import ReportError, write_report

    try:
        # a matrix: OUT itself, which the report reads with its matrix.json
        paths = [out] if matrix else [Path(r.run_dir) for r in results]
        written = write_report(paths, out=out / REPORT_DIR)
    except (ReportError, WriteFailure) as exc:
        err.print(f"[red]joynr-sim run: --report: {escape(redact(str(exc)))}[/]", soft_wrap=True, highlight=False)
        return EXIT_SETUP if isinstance(exc, WriteFailure) else status or EXIT_SETUP
    console.print(f"report: {escape(str(written.index))}", soft_wrap=True, highlight=False)
    return status


def _run_one(scenario: Scenario, out: Path, broker, policy, seed, gcd_store, console: Console,
             join: tuple[str, int, float] | None = None, hosts: int | str | None = None,
             network: str | None = None) -> RunResult:
    progress = Progress(
        TextColumn("[bold]{task.fields[name]}"), BarColumn(), MofNCompleteColumn(),
        TextColumn("{task.description}"), TimeElapsedColumn(), console=console, transient=True,
    )
    with progress:
        task = progress.add_task("starting brokers", total=len(scenario.steps) or None, name=scenario.name)

        def on_step(outcome: StepOutcome) -> None:
            progress.update(task, advance=1, description=escape(outcome.title))

        def on_progress(text: str) -> None:  # a fleet's: "controllers started: 400/1000"
            progress.update(task, description=escape(text))
            if not console.is_terminal:  # a log keeps each line
                console.print(f"{escape(scenario.name)}: {escape(text)}", highlight=False)

        result = asyncio.run(run_scenario(
            scenario, out, policy=policy, broker=broker, seed=seed, gcd_store=gcd_store, on_step=on_step,
            join=join, hosts=hosts, on_progress=on_progress, network=network,
        ))
    _report(result, console)
    return result


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0] if text.strip() else ""


def _report(result: RunResult, console: Console) -> None:
    mark = _OUTCOME[result.outcome]
    console.print(f"{mark} {escape(result.scenario)} ({escape(result.column)}, {escape(result.broker)}) → "
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
        table.add_row(escape(r.scenario), escape(r.column), escape(r.broker), f"{ok}/{len(r.steps)}",
                      _OUTCOME[r.outcome], f"{r.duration_s:.1f}s")
    return table
