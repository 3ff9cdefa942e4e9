"""The ``joynr-sim`` command.

Exit status: 0 success; 1 a scenario step failed (run), a scenario ended otherwise than the
policy matrix requires (run --policy all: it must hold under its own policy and fail under
each it guards against), a check found violations (check, run --check), explore found
failures, the Spark Connect server is already running (spark start) or not running (spark
stop, spark status), or a broker does not keep an MQTT property joynr relies on (brokers
check); 2 bad input (a usage error, an unusable file, folder or option, a broken scenario
file: run and list name every one, an output folder that cannot be created or written:
nothing runs); 3 a run could not be set up (run: a broker, the GCD store or a port could
not be reached), a write failed while running (run, explore, report, check: "cannot write
PATH: REASON", e.g. a full file system), the checks could not run, the Spark Connect
server did not come up (spark start), or a broker could not be started or reached
(brokers check); 130 interrupted ("joynr-sim COMMAND: interrupted", Spark's JVM ended).
Every error is one line on stderr.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from brokers import redact
from trace_schema.run_location import run_location_arg

from .brokers_console import add_parser as add_brokers_parser
from .core.address import ADDRESS_TYPES
from .core.gcd import GCD_PLACES
from .core.policies import POLICIES, RUNTIME_KINDS
from .core.routing import policy_matrix
from .core.variants import RULE_SET_NAMES, VARIANTS
from .explore.console import add_parser as add_explore_parser
from .host.join.console import add_parser as add_host_parser
from .host.process.event_loop import event_loop_choice
from .host.ray.ray_hosts import check_options, joined
from .network import MEMORY, NETWORKS, check_network
from .wire.codecs import WIRES

_CELL = {"replaced": "[green]replace[/]", "refused": "[red]refuse[/]", "merged": "merge"}


def cmd_policies(args: argparse.Namespace, console: Console) -> int:
    """The replace matrix of each policy, then the variants with the seed sentence each breaks."""
    names = [args.policy] if args.policy in POLICIES else [] if args.policy else list(POLICIES)
    variants = [VARIANTS[args.policy]] if args.policy in VARIANTS else [] if args.policy else list(VARIANTS.values())
    if args.json:
        print(json.dumps({
            "policies": {name: {"seed": POLICIES[name]().seed, "matrix": {kind: {
                old: {new: policy_matrix(POLICIES[name](), kind)[(old, new)].outcome for new in ADDRESS_TYPES}
                for old in ADDRESS_TYPES} for kind in RUNTIME_KINDS}} for name in names},
            "variants": [{"name": v.name, "behaviour": v.summary, "breaks": v.seed} for v in variants]}, indent=2))
        return 0
    for name in names:
        policy = POLICIES[name]()
        for kind in RUNTIME_KINDS:
            matrix = policy_matrix(policy, kind)
            table = Table(
                title=f"{name} — {kind}",
                caption=f"rows: existing entry, columns: new entry (non-sticky, other address); "
                f"seed: {_seed_number(policy.seed)}",
            )
            table.add_column("existing \\ new")
            for new_type in ADDRESS_TYPES:  # a long name breaks at its last capital, never cut
                head = re.sub(r"(?<=[a-z])(?=[A-Z][a-z]+$)", "\n", new_type) if len(new_type) > 9 else new_type
                table.add_column(head, justify="center")
            for old_type in ADDRESS_TYPES:
                table.add_row(
                    old_type,
                    *(
                        _CELL.get(matrix[(old_type, t)].outcome, matrix[(old_type, t)].outcome)
                        for t in ADDRESS_TYPES
                    ),
                )
            console.print(table)
    if variants:
        table = Table(title="variants (a scenario keeps its own policy; the variant changes one part)",
                      show_lines=True)
        table.add_column("variant", no_wrap=True)  # a name to copy into guards or --policy
        for column in ("behaviour", "breaks (seed)"):  # a long identifier folds, never cut
            table.add_column(column, overflow="fold")
        for v in variants:
            table.add_row(v.name, escape(v.summary), escape(_seed_number(v.seed)))
        console.print(table)
    return 0


def _seed_number(text: str) -> str:
    """A seed file named by its number (``000`` for 000_65e83c7f1cb84fd7.txt) inside prose a
    narrow column wraps: its hash would be cut there; --json keeps the file name."""
    return re.sub(r"\b(\d{3})_[0-9a-f]{16}\.txt\b", r"\1", text)


def cmd_list(args: argparse.Namespace, console: Console) -> int:
    """0 listed, 2 no such path, no scenario files, or a broken file (each named on stderr)."""
    from .scenario.loader import ScenarioError, load_scenario, scenario_files

    err = Console(stderr=True)
    paths = args.paths or [Path("scenarios")]
    missing = [p for p in paths if not Path(p).exists()]
    files = [] if missing else scenario_files(paths)
    if missing or not files:
        problem = (f"no such file or folder: {', '.join(map(str, missing))}" if missing
                   else f"no scenario files in {', '.join(map(str, paths))}")
        err.print(f"[red]joynr-sim list: {escape(problem)}[/]", soft_wrap=True)
        return 2
    rows: list[dict] = []
    broken: list[str] = []
    for path in files:
        try:
            s = load_scenario(path)
        except ScenarioError as exc:
            broken.append(redact(str(exc)))
            rows.append({"file": str(path), "broken": broken[-1]})
            continue
        f = s.fleet
        rows.append({"file": str(path), "name": s.name, "seed": s.reproduces.seed,
                     "reproduces": s.reproduces.scenario, "policy": s.policy, "guards": list(s.guards),
                     "steps": len(s.steps), "fleet": None if f is None else
                     {"cluster_controllers": f.cluster_controllers, "libjoynr_per_cc": f.libjoynr_per_cc}})
    if args.json:
        print(json.dumps(rows, indent=2))
    else:
        console.print(_list_table(rows, console.width))
    if broken:
        err.print(f"[red]joynr-sim list: {len(broken)} broken scenario "
                  f"file{'s' if len(broken) != 1 else ''}: {escape('; '.join(broken))}[/]",
                  soft_wrap=True, highlight=False)
        return 2
    return 0


def _list_table(rows: list[dict], width: int) -> Table:
    """One line per scenario, to fit any width: the name gets its room first (at least 16
    columns left for the seed sentence), a name or sentence too long for its column ends in
    "…" (the whole of it is in --json)."""
    name_w = max(len(r.get("name") or Path(r["file"]).name) for r in rows)
    policy_w = max(6, *(len(r.get("policy") or "") for r in rows))
    steps_w = max(5, *(len(_steps_text(r)) for r in rows))
    free = width - 13 - policy_w - steps_w  # four columns: five rules, a space either side of each cell
    name_w = max(12, min(name_w, free - 16))
    table = Table(title="scenarios")
    table.add_column("name", no_wrap=True, overflow="ellipsis", width=name_w)
    table.add_column("reproduces", no_wrap=True, overflow="ellipsis", width=max(12, free - name_w))
    table.add_column("policy", no_wrap=True, overflow="ellipsis", width=policy_w)
    table.add_column("steps", no_wrap=True, justify="right", width=steps_w)
    for row in rows:
        if "broken" in row:
            table.add_row(f"[red]{escape(Path(row['file']).name)}[/]", "[red]broken (see below)[/]", "", "")
            continue
        table.add_row(escape(row["name"]), escape(f"{row['seed']}: {row['reproduces']}"),
                      escape(row["policy"]), _steps_text(row))
    return table


def _steps_text(row: dict) -> str:
    f = row.get("fleet")
    if "broken" in row:
        return ""
    return str(row["steps"]) if f is None else f"fleet {f['cluster_controllers']}x{f['libjoynr_per_cc']}"


def cmd_trace(args: argparse.Namespace, console: Console) -> int:
    from .inspect import InspectError, print_trace, print_trace_json

    try:
        if args.json:
            print_trace_json(args.run, msg=args.msg, participant=args.participant, runtime=args.runtime)
        else:
            print_trace(console, args.run, msg=args.msg, participant=args.participant, runtime=args.runtime)
    except InspectError as exc:
        Console(stderr=True).print(f"[red]joynr-sim trace: {escape(str(exc))}[/]", soft_wrap=True)
        return 2
    return 0


def cmd_run(args: argparse.Namespace, console: Console) -> int:
    """0 passed, 1 a step failed (or the matrix does not hold), 2 bad input (nothing runs),
    3 a run could not be set up, a write to it failed, or the checks could not run."""
    from .scenario.console import ALL_POLICIES, run_scenarios

    if args.policy is not None and args.policy not in (*RULE_SET_NAMES, ALL_POLICIES):
        Console(stderr=True).print(
            f"[red]joynr-sim run: --policy {escape(args.policy)!r} is unknown; choose a policy "
            f"({', '.join(POLICIES)}), a variant (joynr-sim policies lists them) or {ALL_POLICIES}[/]",
            soft_wrap=True)
        return 2
    try:
        hosts = _hosts(args.hosts)
        if args.network is not None:
            check_network(args.network)
            if args.network == MEMORY and (hosts is not None or args.join):
                raise ValueError("--network memory: every runtime runs in this process (no --hosts, no --join)")
        check_options(hosts, args.ray, args.join, args.jobs)
        event_loop_choice()
    except ValueError as exc:
        Console(stderr=True).print(f"[red]joynr-sim run: {escape(str(exc))}[/]", soft_wrap=True, highlight=False)
        return 2
    ray_problem = joined(args.ray) if hosts == "ray" else None
    if ray_problem is not None:
        Console(stderr=True).print(f"[red]joynr-sim run: {escape(ray_problem)}[/]", soft_wrap=True, highlight=False)
        return 3
    if args.gcd_last_seen_timeout is not None and not 1 <= args.gcd_last_seen_timeout <= MAX_LAST_SEEN_MS:
        Console(stderr=True).print(f"[red]joynr-sim run: --gcd-last-seen-timeout: expected 1 to {MAX_LAST_SEEN_MS} "
                                   f"ms, got {args.gcd_last_seen_timeout}[/]", soft_wrap=True)
        return 2
    return run_scenarios(args.paths, out=args.out, broker=args.broker, policy=args.policy,
                         seed=args.seed, gcd_store=args.gcd_store, console=console, report=args.report,
                         check=args.check, junit=args.junit, jobs=args.jobs, hosts=hosts,
                         join=(args.join, args.join_hosts, args.join_timeout) if args.join else None,
                         network=args.network, gcd_last_seen_timeout_ms=args.gcd_last_seen_timeout, wire=args.wire,
                         gcd=args.gcd)


MAX_HOSTS = 1024
MAX_LAST_SEEN_MS = 31_536_000_000  # a year, as the scenario format's bound


def _hosts(text: str | None) -> int | str | None:
    """--hosts: None (not given), "cores", "ray" or a count of host processes."""
    if text is None or text in ("cores", "ray"):
        return text
    if text.isascii() and text.isdigit() and 1 <= int(text) <= MAX_HOSTS:
        return int(text)
    raise ValueError(f"--hosts: expected a number from 1 to {MAX_HOSTS}, 'cores' or 'ray', got {text[:40]!r}")


def cmd_report(args: argparse.Namespace, console: Console) -> int:
    """0 written, 2 unusable input or output folder (nothing written), 3 a page could not
    be written (a full file system)."""
    from .report import ReportError, write_report
    from .write_failure import WriteFailure

    try:
        written = write_report(args.runs, out=args.out, check_reports=args.check)
    except (ReportError, WriteFailure) as exc:
        Console(stderr=True).print(f"[red]joynr-sim report: {escape(redact(str(exc)))}[/]", soft_wrap=True,
                                   highlight=False)
        return 3 if isinstance(exc, WriteFailure) else 2
    console.print(f"{len(written.pages)} run report{'s' if len(written.pages) != 1 else ''}; open "
                  f"{escape(str(written.index))}", soft_wrap=True, highlight=False)
    return 0


def cmd_check(args: argparse.Namespace, console: Console) -> int:
    # The checker is an independent oracle: it lives apart and never imports the rules.
    from analytics.app import run as run_checks

    return run_checks(args, console)


def cmd_spark(args: argparse.Namespace, console: Console) -> int:
    """0 done, 1 already running (start) or not running (stop, status), 2 bad input, 3 no start."""
    from analytics import server

    err = Console(stderr=True)
    try:
        if args.action == "start":
            found = server.start(args.port, master=args.master, driver_memory=args.driver_memory)
            console.print(f"Spark Connect server on {found.url} (pid {found.pid}); check with "
                          f"`joynr-sim check --connect {found.url} RUN...`, stop with `joynr-sim spark stop`",
                          soft_wrap=True, highlight=False)
        elif args.action == "stop":
            found = server.stop()
            console.print(f"stopped the Spark Connect server on {found.url} (pid {found.pid})", highlight=False)
        else:
            found = server.running()
            if found is None:
                console.print("no Spark Connect server is running", highlight=False)
                return 1
            console.print(f"Spark Connect server on {found.url} (pid {found.pid})", highlight=False)
    except server.ServerError as exc:
        err.print(f"[red]joynr-sim spark {args.action}: {escape(str(exc))}[/]", soft_wrap=True, highlight=False)
        return exc.status
    return 0


class _Parser(argparse.ArgumentParser):
    """A usage error is one line naming the option and value, then exit 2."""

    def error(self, message: str):  # type: ignore[override]
        self.exit(2, f"{self.prog}: {message} (see {self.prog} --help)\n")


def build_parser() -> argparse.ArgumentParser:
    summary, exit_status = __doc__.split("\n\n", 1)
    parser = _Parser(prog="joynr-sim", description=summary, epilog=exit_status.strip(),
                     formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("policies", help="print the replace matrix of each routing policy and the variants")
    p.add_argument("--policy", choices=list(RULE_SET_NAMES), metavar="POLICY|VARIANT",
                   help="only this policy or variant")
    p.add_argument("--json", action="store_true", help="print the matrices and variants as JSON instead")
    p.set_defaults(func=cmd_policies)
    p = sub.add_parser("run", help="run scenarios: one run directory per scenario under --out")
    p.add_argument("paths", nargs="+", type=Path, metavar="PATH", help="scenario files or folders")
    p.add_argument("--broker", help="amqtt (default), mosquitto, or gbid1=mqtt://host:port,...")
    p.add_argument("--network", metavar="|".join(NETWORKS),
                   help="memory: in-memory brokers and WebSockets in virtual time, one seed replays a run byte "
                   "for byte; amqtt or mosquitto: that real broker (default: what --broker says)")
    p.add_argument("--policy", help=f"routing policy for every runtime: {', '.join(POLICIES)}; or a variant "
                   "(joynr-sim policies lists them), over each scenario's own policy; all: the policy matrix, "
                   "every scenario under every policy and variant into OUT/<policy>/ and OUT/matrix.json")
    p.add_argument("--gcd-last-seen-timeout", type=int, metavar="MS",
                   help="switch the GCD's last-seen sweep on for every scenario: entries not seen for MS ms are "
                   "removed and not returned by lookups (default: each scenario's gcd_last_seen_timeout_ms, else off)")
    p.add_argument("--out", type=run_location_arg, default=Path("runs"),
                   help="where run directories go: a path or a file:// URL (default: runs/)")
    p.add_argument("--seed", type=int, help="seed for generated participant ids (default: random, in run.json)")
    p.add_argument("--gcd-store", help="GCD store: a postgresql:// URL (default: SQLite in the run directory)")
    p.add_argument("--report", action="store_true",
                   help="then write the HTML report of the runs to OUT/report/ and print its index")
    p.add_argument("--check", action="store_true",
                   help="then run the Spark checks over the runs: a violation fails a run (one Spark session)")
    p.add_argument("--junit", type=Path, metavar="FILE", help="write JUnit XML: one test case per run")
    p.add_argument("--jobs", type=int, default=1, metavar="N",
                   help="with --policy all: runs at a time (default 1; each run starts its own brokers)")
    p.add_argument("--join", metavar="RUN", help="run the runtimes on hosts that joined RUN (`joynr-sim host "
                   "--join RUN`) over --broker's first broker; they connect directly, without fault proxies")
    p.add_argument("--join-hosts", type=int, default=1, metavar="N", help="with --join: wait for N hosts (default 1)")
    p.add_argument("--join-timeout", type=float, default=60.0, metavar="S",
                   help="with --join: how long to wait for them, in seconds (default 60)")
    p.add_argument("--hosts", metavar="N|cores|ray", help="runtimes in N host processes (a cluster controller and "
                   "its libjoynr runtimes share one), cores: one per core, ray: one per CPU of a Ray cluster, as "
                   "Ray actors (default: one process per runtime; for a fleet scenario: cores)")
    p.add_argument("--wire", choices=list(WIRES), help="the bytes messages travel in: joynr-sim (the default, "
                   "msgpack frames) or joynr (SMRF frames with joynr's headers and JSON payloads)")
    p.add_argument("--gcd", choices=list(GCD_PLACES), help="own (the default): a GCD instance per backend; "
                   "external: none, a discovery service serves the external brokers' GCD topic already (a joynr JDS)")
    p.add_argument("--ray", metavar="ADDRESS", help="with --hosts ray: the Ray cluster's head, HOST:PORT (default: a "
                   "Ray instance of this command's own, on loopback)")
    p.set_defaults(func=cmd_run)
    from analytics.app import build_parser as check_parser

    p = sub.add_parser("check", parents=[check_parser(add_help=False)],
                       help="check run traces with Spark (exit 0 clean, 1 violations, 2 bad input)",
                       description=check_parser().description, epilog=check_parser().epilog)
    p.set_defaults(func=cmd_check)
    p = sub.add_parser("spark", help="start, stop or show a warm Spark Connect server on 127.0.0.1 for "
                       "`check --connect` (exit 0 done, 1 already running / not running, 3 no start)",
                       description="A Spark Connect server on loopback that keeps Spark warm between checks; "
                       "its pid file and log are in $XDG_CACHE_HOME/joynr-sim/spark (default ~/.cache/...).",
                       epilog="exit status: 0 done; 1 start: already running, stop/status: not running; "
                       "2 bad input; 3 the server did not come up")
    p.add_argument("action", choices=["start", "stop", "status"])
    p.add_argument("--port", type=int, default=15002, help="start: the port on 127.0.0.1 (default 15002)")
    p.add_argument("--master", default="local[*]", help="start: the server's Spark master (default local[*])")
    p.add_argument("--driver-memory", metavar="SIZE", help="start: the server's driver memory, e.g. 2g")
    p.set_defaults(func=cmd_spark)
    p = sub.add_parser("list", help="list scenarios: name, seed scenario, policy, steps (exit 2: a broken file)")
    p.add_argument("paths", nargs="*", type=Path, metavar="PATH",
                   help="scenario files or folders (default: ./scenarios)")
    p.add_argument("--json", action="store_true", help="print every scenario's full values as JSON instead")
    p.set_defaults(func=cmd_list)
    p = sub.add_parser("trace", help="show a run's trace: a summary, one message, participant or runtime")
    p.add_argument("run", type=run_location_arg, metavar="RUN",
                   help="a run directory (runs/<run-id>) or its file:// URL")
    only = p.add_mutually_exclusive_group()
    only.add_argument("--msg", metavar="ID", help="the hops of one message and its reply (id or unique prefix)")
    only.add_argument("--participant", metavar="ID|@NAME", help="routing-table history and messages of a "
                      "participant: its id, or @name of a provider or proxy the scenario named")
    only.add_argument("--runtime", metavar="ID", help="a summary of one runtime's events")
    p.add_argument("--json", action="store_true", help="print the view's full values as JSON instead of tables")
    p.set_defaults(func=cmd_trace)
    p = sub.add_parser("report", help="write an HTML report per run and an index page (exit 0, 2 bad input)",
                       description="A static HTML page per run (summary, steps, checks, sequence diagrams, "
                       "routing entries, plots) and an index over them; opens from the file system.")
    p.add_argument("runs", nargs="+", type=run_location_arg, metavar="RUN", help="run directories or folders of them")
    p.add_argument("--out", type=run_location_arg, metavar="DIR",
                   help="where the pages go (default: report/ in the first RUN)")
    p.add_argument("--check", type=Path, action="append", default=[], metavar="FILE",
                   help="a report.json of joynr-sim check to take verdicts from (default: check/report.json "
                   "in the run directory or a sibling one)")
    p.set_defaults(func=cmd_report)
    add_explore_parser(sub)
    add_host_parser(sub)
    add_brokers_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args, Console())
    except KeyboardInterrupt:
        Console(stderr=True).print(f"[red]joynr-sim {args.command}: interrupted[/]", highlight=False)
        return 130


if __name__ == "__main__":
    sys.exit(main())
