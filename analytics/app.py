"""``joynr-sim check PATH...``: check traces with Spark, report, and exit 0, 1 or 2.

Exit status: 0 every check passed, 1 a check found violations, 2 the input is unusable
(no such run directory, no trace files, a trace schema version other than 1, an
unreadable manifest, an ``--out`` or ``--junit`` that cannot be written) or Spark could not
run, 3 the report could not be written (e.g. a full file system: ``cannot write <path>:
<reason>``).

Spark: a local session by default (``--master``), a standalone cluster
(``--master spark://host:port``) or a running Spark Connect server (``--connect
sc://host:port``, e.g. the one ``joynr-sim spark start`` keeps warm). Parsed traces are
cached (see ``analytics.cache``) unless ``--no-cache``.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from trace_schema.run_location import run_location_arg

EXIT_CLEAN, EXIT_VIOLATIONS, EXIT_UNUSABLE, EXIT_UNWRITTEN = 0, 1, 2, 3

# The registry's names, here so the parser needs no Spark import (a test keeps them equal).
CHECK_NAMES = (
    "routing-loop", "overwrite-violation", "lost-message",
    "gcd-consistency", "link-uniqueness", "takeover-storm", "multicast",
)


def build_parser(add_help: bool = True) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="joynr-sim check",
        description="Check run traces with Spark: routing loops, overwrite violations, lost "
        "messages, GCD consistency, link uniqueness, takeover storms.",
        epilog="exit status: 0 clean, 1 violations found, 2 input unusable, 3 the report could not be written",
        add_help=add_help,
    )
    parser.add_argument("paths", nargs="+", metavar="PATH",
                        help="run directory, folder of run directories, or a glob of either; each a path or "
                        "a file:// URL")
    spark = parser.add_mutually_exclusive_group()
    spark.add_argument("--master", default="local[*]",
                       help="Spark master: local[N], local[*] (default) or spark://host:port")
    spark.add_argument("--connect", metavar="URL",
                       help="use the Spark Connect server at sc://host:port (see joynr-sim spark start)")
    parser.add_argument("--no-cache", action="store_true",
                        help="parse the traces even when the trace cache has them, and cache nothing")
    parser.add_argument("--out", type=run_location_arg, metavar="DIR",
                        help="report.json and slices/ (default: check/ in the first run directory)")
    parser.add_argument("--junit", type=Path, metavar="FILE", help="also write JUnit XML here")
    parser.add_argument("--check", dest="checks", action="append", choices=CHECK_NAMES,
                        metavar="NAME", help=f"run only this check (repeatable): {', '.join(CHECK_NAMES)}")
    parser.add_argument("--storm-steals", type=int, default=5, metavar="N",
                        help="takeover-storm: steals of one session within the window (default 5)")
    parser.add_argument("--storm-window-ms", type=int, default=10_000, metavar="MS",
                        help="takeover-storm: the window (default 10000)")
    parser.add_argument("--max-details", type=int, default=1000, metavar="N",
                        help="violations listed and sliced per check; all are counted (default 1000)")
    parser.add_argument("--driver-memory", metavar="SIZE", help="Spark driver memory, e.g. 2g")
    parser.add_argument("--work-dir", type=Path, metavar="DIR",
                        help="scratch space for Spark's log (default: a temporary directory)")
    parser.add_argument("--quiet", action="store_true", help="no table, only errors")
    parser.add_argument("--debug", action="store_true", help="show tracebacks of internal errors")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return run(args)


def run(args: argparse.Namespace, console: Console | None = None) -> int:
    console = console or Console()
    err = Console(stderr=True)
    from .inputs import InputError, find_runs, trace_bytes

    try:
        runs = find_runs(args.paths)
    except InputError as exc:
        _error(err, str(exc))
        return EXIT_UNUSABLE
    if args.storm_steals < 1 or args.storm_window_ms < 0 or args.max_details < 0:
        _error(err, "--storm-steals must be >= 1, --storm-window-ms and --max-details >= 0")
        return EXIT_UNUSABLE
    from .atomic import unwritable

    out_dir = args.out or runs[0].dir / "check"
    problem = unwritable(out_dir, "--out")
    if problem is None and args.junit is not None:
        problem = (f"--junit {args.junit} is a folder; give a file name" if args.junit.is_dir()
                   else unwritable(args.junit.parent, "--junit"))
    if problem:
        _error(err, problem)
        return EXIT_UNUSABLE

    from .cache import CacheError, TraceCache
    from .interrupt import held_sigint, noted_sigint
    from .report import print_table, write_outputs
    from .runner import check_runs
    from .session import SMALL_TRACE_BYTES, SparkStartError, connect, connect_address, start

    if args.connect is not None:
        try:
            connect_address(args.connect)
        except ValueError as exc:
            _error(err, str(exc))
            return EXIT_UNUSABLE
    cache = None
    if not args.no_cache:
        try:
            cache = TraceCache()
        except CacheError as exc:  # checking still works, only slower next time
            err.print(f"note: {escape(str(exc))}; checking without the trace cache", highlight=False,
                      soft_wrap=True)

    try:
        if args.work_dir is not None:
            args.work_dir.mkdir(parents=True, exist_ok=True)
        scratch = Path(tempfile.mkdtemp(prefix="joynr-check-", dir=args.work_dir))
    except OSError as exc:
        _error(err, f"--work-dir {args.work_dir}: {exc.strerror or exc}")
        return EXIT_UNUSABLE
    handle = None
    interrupted = False
    try:
        if args.connect is not None:
            handle = connect(args.connect)
        else:
            size = trace_bytes([p for run in runs for p in run.trace_files])
            with held_sigint() as came:  # a Ctrl-C as start returns: the handle is kept, then it is raised
                handle = start(args.master, work_dir=scratch, driver_memory=args.driver_memory,
                               short_run=size < SMALL_TRACE_BYTES)
            if came:
                raise KeyboardInterrupt
        with noted_sigint() as sigints:
            try:
                outcome = check_runs(
                    handle.spark, runs, scratch, args.checks,
                    storm_steals=args.storm_steals, storm_window_ms=args.storm_window_ms,
                    max_details=args.max_details, cache=cache,
                )
            except Exception:
                if sigints:  # the Ctrl-C surfaced as the error of the call it cut short
                    raise KeyboardInterrupt from None
                raise
        status = EXIT_VIOLATIONS if outcome.violations else EXIT_CLEAN
        try:
            report = write_outputs(out_dir, args.junit, outcome, status)
        except OSError as exc:  # e.g. a full file system: the checks ran, their report is lost
            _error(err, f"cannot write {exc.filename or out_dir}: {exc.strerror or exc}")
            return EXIT_UNWRITTEN
        if not args.quiet:
            print_table(console, outcome)
            console.print(f"report: {report}", highlight=False, soft_wrap=True)
        return status
    except KeyboardInterrupt:
        interrupted = True
        raise
    except InputError as exc:
        _error(err, str(exc))
        return EXIT_UNUSABLE
    except SparkStartError as exc:
        _error(err, str(exc))
        return EXIT_UNUSABLE
    except Exception as exc:  # a Spark/JVM failure: one clear line, never a Java stack trace
        if args.debug:
            raise
        _error(err, f"checking failed: {type(exc).__name__}: {_first_line(exc)} "
               "(rerun with --debug for the traceback)")
        return EXIT_UNUSABLE
    finally:
        if handle is not None:
            try:
                if handle.archive is not None and not args.quiet and not interrupted:
                    err.print("note: Spark's JVM saves its classes for quicker starts as this process ends "
                              "(the first short local check only)", highlight=False, soft_wrap=True)
            finally:  # a Ctrl-C in the note still stops the session
                handle.stop(interrupted=interrupted)
        shutil.rmtree(scratch, ignore_errors=True)


def _error(err: Console, message: str) -> None:
    err.print(f"[red]error:[/] {escape(message)}", highlight=False, soft_wrap=True)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return (text.splitlines()[0] if text else "")[:300]


if __name__ == "__main__":
    sys.exit(main())
