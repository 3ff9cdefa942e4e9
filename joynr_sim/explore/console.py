"""Run random schedules of steps and faults, judge the runs in batches with the Spark checks
and shrink each run's new failures, together, to the smallest scenario that still fails the
same way (under a policy other than precedence: that still holds under precedence, a guard).

Exit status: 0 nothing found; 1 failures found (each shrunk, its scenario written); 2 bad
input (an option, or an --out that holds something explore did not write or that cannot be
created or written); 3 Spark or a broker could not be started, Spark could not judge the
runs (its JVM's log is kept as spark-jvm.log), or a write failed while exploring
(``cannot write <path>: <reason>``); 130 interrupted.
"""

from __future__ import annotations

import argparse
import re
import shutil
import tempfile
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from ..core.policies import POLICIES
from ..write_failure import OutDirError, WriteFailure, prepare_out_dir

_BUDGET = re.compile(r"^(\d{1,6})(s|m|h)?$")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, None: 1}
MARKER = "explore.json"
SHRINK_TRIES = 100
SHRINK_BUDGET_S = 15 * 60  # the most a default shrink budget grows to
SHRINK_PER_RUN_S = 30  # with --runs N: half a minute of shrinking per run, up to SHRINK_BUDGET_S
NETWORKS = ("memory", "amqtt", "mosquitto")
BROKERS = ("amqtt", "mosquitto")
# What the announced bound adds to exploring and shrinking, measured on 2 cores: Spark's
# start, one judgement of a batch (a Spark job of every check), a run on a real broker
# (on memory a fraction of a second), a batch of two runs (a real network's first batch).
SPARK_START_S = 60
JUDGE_S = 40
RUN_S = 5
BATCH = 2


def shrink_budget(runs: int | None, budget_s: float | None) -> float:
    """The default time for shrinking, in proportion to the exploration: half of --budget,
    or half a minute per run of --runs (at most ``SHRINK_BUDGET_S``)."""
    if runs is None:
        return (budget_s or 600) / 2
    return float(min(SHRINK_BUDGET_S, SHRINK_PER_RUN_S * runs))


def expected_bound_s(runs: int | None, budget_s: float | None, shrink_s: float) -> float:
    """About how long the exploration takes at most: Spark's start, the runs (or --budget)
    and their judgements, the shrink budget, and the judgements that finish a finding under
    way when a budget ends (its replay and the precedence side)."""
    exploring = (budget_s or 0) + JUDGE_S if runs is None else runs * RUN_S + -(-runs // BATCH) * JUDGE_S
    return SPARK_START_S + exploring + shrink_s + 2 * JUDGE_S


def _minutes(seconds: float) -> str:
    return f"{max(1, -(-int(seconds) // 60))} min"


def budget_seconds(text: str) -> int:
    """``90``, ``90s``, ``10m`` or ``2h`` in seconds."""
    m = _BUDGET.match(text.strip())
    if not m or int(m.group(1)) == 0:
        raise argparse.ArgumentTypeError(f"{text!r}: a positive duration such as 90s, 10m or 2h")
    return int(m.group(1)) * _UNIT_S[m.group(2)]


def add_parser(sub) -> None:
    p = sub.add_parser("explore", help="run random fault schedules, check each with Spark, shrink what fails",
                       description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n")[1])
    p.add_argument("--policy", default="precedence", help="routing policy of every run (default: precedence)")
    p.add_argument("--broker", choices=BROKERS, help="broker of the real network (default: amqtt)")
    p.add_argument("--network", metavar="|".join(NETWORKS),
                   help="memory: in-memory brokers and WebSockets in virtual time, a run replayed byte for byte by "
                        "its seed; amqtt or mosquitto: that real broker (default: what --broker says)")
    p.add_argument("--confirm", metavar="|".join(BROKERS),
                   help="replay every finding once on this real broker and say whether it reproduced")
    p.add_argument("--batch", type=int,
                   help="runs judged together in one Spark job, and shrink candidates judged ahead (default: a batch "
                        "grows until running it takes as long as judging the last; 32 candidates on memory, 4 on a "
                        "real broker)")
    limit = p.add_mutually_exclusive_group()
    limit.add_argument("--budget", type=budget_seconds, help="time to explore, e.g. 10m (default: 10m)")
    limit.add_argument("--runs", type=int, help="number of schedules to run")
    p.add_argument("--seed", type=int, default=1, help="the same seed gives the same schedules (default: 1)")
    p.add_argument("--out", type=Path, default=Path("explore"), help="output folder (default: explore/)")
    p.add_argument("--shrink-tries", type=int, default=SHRINK_TRIES,
                   help=f"candidates tried per failure at most, counted one at a time (judging a pass's candidates "
                        f"together runs some ahead) (default: {SHRINK_TRIES})")
    p.add_argument("--shrink-budget", type=budget_seconds,
                   help="time spent shrinking, shared by every failure found, e.g. 15m (default: half of --budget, "
                        "or half a minute per run of --runs, at most 15m; the whole exploration's bound is said "
                        "before it starts); a failure found after it is spent is written as drawn")
    p.set_defaults(func=cmd_explore)


def _refusal(args: argparse.Namespace) -> str | None:
    if args.policy not in POLICIES:
        return f"--policy {args.policy!r} is unknown; choose one of {', '.join(POLICIES)}"
    if args.runs is not None and not 1 <= args.runs <= 100_000:
        return f"--runs {args.runs}: from 1 to 100000"
    if not 0 <= args.seed < 2**63:
        return f"--seed {args.seed}: from 0 to 2**63-1"
    if not 0 <= args.shrink_tries <= 1_000:
        return f"--shrink-tries {args.shrink_tries}: from 0 to 1000"
    if args.network is not None and args.network not in NETWORKS:
        return f"--network {args.network!r} is unknown; choose one of {', '.join(NETWORKS)}"
    if args.network in BROKERS and args.broker not in (None, args.network):
        return f"--network {args.network} and --broker {args.broker} disagree; name one of them"
    if args.network == "memory" and args.broker not in (None, "amqtt"):
        return f"--network memory has its own brokers; --broker {args.broker} needs a real network"
    if args.confirm is not None and args.confirm not in BROKERS:
        return f"--confirm {args.confirm!r} is unknown; choose one of {', '.join(BROKERS)}"
    if args.batch is not None and not 1 <= args.batch <= 256:
        return f"--batch {args.batch}: from 1 to 256"
    out: Path = args.out
    if out.is_symlink() or (out.exists() and not out.is_dir()):
        return f"--out {out}: not a folder"
    if out.is_dir() and any(out.iterdir()) and not (out / MARKER).is_file():
        return f"--out {out}: holds files joynr-sim explore did not write; choose an empty or new folder"
    return None


def _keep_jvm_log(log: Path | None, out: Path) -> str:
    """The JVM's own output, copied out of the scratch folder that goes with the session."""
    if log is None or not log.is_file():
        return ""
    try:
        shutil.copyfile(log, out / "spark-jvm.log")
    except OSError:
        return f" (the JVM's log {log} could not be kept)"
    return f" (the JVM's log: {out / 'spark-jvm.log'})"


def cmd_explore(args: argparse.Namespace, console: Console) -> int:
    err = Console(stderr=True)
    problem = _refusal(args)
    if problem:
        err.print(f"[red]joynr-sim explore: {escape(problem)}[/]", soft_wrap=True, highlight=False)
        return 2
    try:  # before Spark starts: a folder that cannot be written is a bad option
        prepare_out_dir(args.out)
    except OutDirError as exc:
        err.print(f"[red]joynr-sim explore: {escape(str(exc))}[/]", soft_wrap=True, highlight=False)
        return 2
    from analytics.session import SparkStartError

    from .judge import CheckerLost
    from .runner import Explorer

    budget = args.budget if args.runs is None and args.budget is not None else None
    if args.runs is None and budget is None:
        budget = 600
    broker = args.broker or "amqtt"
    network = args.network or broker
    shrink_s = args.shrink_budget if args.shrink_budget is not None else shrink_budget(args.runs, budget)
    what = f"{args.runs} run{'s' if args.runs != 1 else ''}" if args.runs is not None else f"{_minutes(budget)} of runs"
    console.print(f"exploring {what} (--policy {escape(args.policy)}, --network {network}); shrinking at most "
                  f"{_minutes(shrink_s)}; ends within about {_minutes(expected_bound_s(args.runs, budget, shrink_s))}",
                  highlight=False)
    with tempfile.TemporaryDirectory(prefix="joynr-explore-") as scratch:
        try:
            checker = _checker(Path(scratch))
        except SparkStartError as exc:
            err.print(f"[red]joynr-sim explore: {escape(str(exc))}[/]", soft_wrap=True, highlight=False)
            return 3

        def progress(kind: str, info: dict) -> None:
            if kind == "run":
                failures = ", ".join(info["failures"]) or "clean"
                console.print(f"run {info['index']:>4} ({info['seconds']:.0f} s): {escape(failures)}",
                              highlight=False)
            else:
                console.print(f"      shrinking {escape(info['signature'])}: try {info['try']} still fails "
                              f"with {info['steps']} steps", highlight=False)

        explorer = Explorer(args.out, policy=args.policy, broker=broker, network=network, seed=args.seed,
                            checker=checker, shrink_tries=args.shrink_tries, shrink_budget_s=shrink_s,
                            batch=args.batch, confirm=args.confirm, on_event=progress)
        interrupted = False
        try:
            summary = explorer.explore(runs=args.runs, budget_s=budget)
        except KeyboardInterrupt:  # the command says so in one line; the JVM goes now
            interrupted = True
            raise
        except CheckerLost as exc:  # no judge, no exploring; what was found so far is written
            kept = _keep_jvm_log(exc.jvm_log, args.out)
            err.print(f"[red]joynr-sim explore: {escape(str(exc))}{escape(kept)}[/]", soft_wrap=True,
                      highlight=False)
            return 3
        except (WriteFailure, OSError) as exc:  # a full disk is no finding: exploring ends
            failure = exc if isinstance(exc, WriteFailure) else WriteFailure.of(exc.filename or args.out, exc)
            err.print(f"[red]joynr-sim explore: {escape(str(failure))}[/]", soft_wrap=True, highlight=False)
            return 3
        finally:
            checker.close(interrupted)
    console.print(findings_table(summary, network))
    console.print(f"{args.out / MARKER}", highlight=False)
    return 1 if summary.findings else 0


def _checker(scratch: Path):
    from .runner import Checker

    return Checker(scratch)


def findings_table(summary, network: str) -> Table:
    """One row per finding in five columns that fit 80: what failed (and what else its
    scenario shows), when it was found, the shrink, the verdicts, and the scenario file (in
    findings/; every value in full is in explore.json)."""
    first = "" if summary.first_finding_s is None else f", first failure after {summary.first_finding_s:.0f} s"
    table = Table(title=f"explore --seed {summary.seed} --policy {summary.policy} --network {network}: "
                        f"{summary.runs} runs in {summary.batches} batches, {summary.seconds:.0f} s{first}",
                  caption="scenarios in findings/; every value in explore.json", show_lines=True)
    for col in ("failure (and its scenario)", "found", "shrunk", "verdict"):
        table.add_column(col, overflow="fold", ratio=1 if col.startswith("failure") else None,
                         max_width=16 if col == "verdict" else None)
    for f in summary.findings:
        sig = "/".join(f.signature)
        # a check and its kind on lines of their own: a narrow column breaks there, not inside a word
        also = "".join(f"\n+ {escape(a.replace('/', '/ ', 1))}" for a in f.also)
        confirmed = f.confirmed if not f.confirm_broker else f"{f.confirmed} on {f.confirm_broker}"
        reference = (f.reference.split(":")[0] or "-") + (" (guard)" if f.guard else "")
        table.add_row(f"{escape(sig.replace('/', '/ ', 1))}{also}\n[dim]{escape(Path(f.scenario_file).name)}[/]",
                      f"run {f.run_index}\n{f.found_after_s:.0f} s\nseen {summary.seen.get(sig, 0)}x",
                      f"{f.steps_before} → {f.steps_after} steps\n{f.shrink_runs} runs\n{f.shrink_seconds:.0f} s",
                      escape(f"replay {f.replayed}\nprecedence {reference}\n{confirmed}"))
    return table
