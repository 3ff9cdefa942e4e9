"""``make fuzz``: the long fuzz run. Prints frames sent (at QoS 0, with a replyTo topic of
more than one level), drops by reason, crashes and reconnects, then the phases after the
hostile frames (a flood from one sender, CONNECTs under other identities, WebSocket
connections without a token), and writes the same as JSON; exits 1 when a runtime crashed
or reconnected, a frame has no fate, or a phase failed (``FuzzReport.failures``)."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import sys
import tempfile
import time
from pathlib import Path

from rich.console import Console
from rich.table import Table

from ..wire.codecs import DEFAULT_WIRE, WIRES
from .harness import FuzzReport, fuzz


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m joynr_sim.fuzz", description=__doc__)
    parser.add_argument("--frames", type=int, default=100_000, help="hostile frames to send (default 100000)")
    parser.add_argument("--batch", type=int, default=1_000, help="frames between two health calls")
    parser.add_argument("--broker", default="mosquitto", choices=["amqtt", "mosquitto"])
    parser.add_argument("--wire", default=DEFAULT_WIRE, choices=list(WIRES),
                        help=f"what every runtime speaks, and so the frames (default {DEFAULT_WIRE})")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--flood", type=int, default=5_000,
                        help="valid requests one sender floods cc2 with (default 5000; 0: no flood)")
    parser.add_argument("--connects", type=int, default=30,
                        help="CONNECTs of each kind without a valid login of their id (default 30; 0: none)")
    parser.add_argument("--ws-attempts", type=int, default=3,
                        help="WebSocket connections of each kind without a token (default 3; 0: none)")
    parser.add_argument("--json", type=Path, default=Path("fuzz-report.json"), help="where the report goes")
    parser.add_argument("--run-dir", type=Path, default=None,
                        help="keep the run's traces and logs here (default: a temporary directory, removed)")
    args = parser.parse_args(argv)
    if args.frames < 1 or args.batch < 1:
        parser.error("--frames and --batch must be at least 1")
    if min(args.flood, args.connects, args.ws_attempts) < 0:
        parser.error("--flood, --connects and --ws-attempts must not be negative")
    console = Console()
    started = time.perf_counter()

    def progress(report: FuzzReport) -> None:
        sent = sum(report.sent.values())
        console.print(f"  {sent:>7} frames  {sent / (time.perf_counter() - started):>6.0f}/s  "
                      f"crashes {report.crashes}  reconnects {report.reconnects}", highlight=False)

    with contextlib.ExitStack() as stack:
        if args.run_dir is None:
            run_dir = stack.enter_context(tempfile.TemporaryDirectory(prefix="joynr-sim-fuzz-"))
        else:
            args.run_dir.mkdir(parents=True, exist_ok=True)
            run_dir = str(args.run_dir)
        try:
            report = asyncio.run(fuzz(Path(run_dir), frames=args.frames, batch=args.batch, broker=args.broker,
                                      wire=args.wire, seed_value=args.seed, flood=args.flood, connects=args.connects,
                                      ws_attempts=args.ws_attempts, progress=progress,
                                      phase=lambda what: console.print(f"  {what}", highlight=False)))
            failure = None
        except AssertionError as exc:
            report, failure = None, str(exc)
    if report is None:
        console.print(f"[red]fuzz failed: {failure}[/]")
        return 1
    elapsed = time.perf_counter() - started
    table = Table(title=f"fuzz: {args.broker}, wire {args.wire}, seed {args.seed}, {elapsed:.0f} s")
    table.add_column("what")
    table.add_column("count", justify="right")
    for name, count in report.rows():
        table.add_row(name, str(count))
    console.print(table)
    args.json.write_text(json.dumps(report.as_dict(), indent=2) + "\n")
    console.print(f"report: {args.json}")
    # Every frame has its fate (a batch waits for that), nothing crashed or lost its
    # connection, and every phase held.
    failures = report.failures()
    for failure in failures:
        console.print(f"[red]fuzz failed: {failure}[/]", highlight=False)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
