"""``joynr-sim host --join RUN --broker gbid1=mqtt://... --address A --trace-dir DIR``: a
host on this machine that joins a run (``supervisor``) until SIGTERM or Ctrl-C.

Exit status: 0 stopped; 2 bad input (nothing starts); 3 the broker could not be reached or
refused the control topics. Every error is one line on stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import os
import re
import socket
import sys
from pathlib import Path

from brokers import BrokerSpecError, parse_broker, redact


def add_parser(sub) -> None:
    p = sub.add_parser("host", help="join a run from this machine: its runtimes' processes start here",
                       description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n")[1])
    p.add_argument("--join", required=True, metavar="RUN", help="the run's name (the runner's `run --join RUN`)")
    p.add_argument("--broker", required=True, metavar="GBID=URL,...",
                   help="the run's brokers, gbid1=mqtt://[user:pw@]host:port,...: the control topics are on the first")
    p.add_argument("--address", default="127.0.0.1",
                   help="the IP address of this machine its cluster controllers listen on (default 127.0.0.1)")
    p.add_argument("--trace-dir", type=Path, required=True, metavar="DIR",
                   help="where traces, state and logs go: the shared directory the checks read")
    p.add_argument("--name", help="this host's name in the run (default: the machine's name and the address)")
    p.add_argument("--cores", type=int, default=os.cpu_count() or 1, help="cores to announce (default: all)")
    p.set_defaults(func=cmd_host)


def _default_name(address: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "-", f"{socket.gethostname()[:40]}-{address}")


def _problem(args: argparse.Namespace) -> str | None:
    """Why the arguments cannot work, or None; the checks a host makes before it starts."""
    from ..process.event_loop import event_loop_choice
    from .mqtt_channel import check_name

    try:
        event_loop_choice()  # the workers' loop: wrong, it would end every worker at its start
        check_name("--join", args.join)
        args.name = check_name("--name", args.name or _default_name(args.address))
        args.address = str(ipaddress.ip_address(args.address))
        spec = parse_broker(args.broker)
    except (ValueError, BrokerSpecError) as exc:
        return redact(str(exc))
    if spec.kind != "external":
        return f"--broker: expected the run's brokers as gbid1=mqtt://host:port,..., got {spec.kind!r}"
    args.spec = next(iter(spec.external.values()))
    if not 1 <= args.cores <= 4096:
        return f"--cores: expected 1 to 4096, got {args.cores}"
    try:
        with socket.socket(socket.AF_INET6 if ":" in args.address else socket.AF_INET) as probe:
            probe.bind((args.address, 0))
    except OSError as exc:
        return f"--address: cannot listen on {args.address}: {exc.strerror or exc}"
    try:
        args.trace_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        return f"--trace-dir: cannot use {args.trace_dir}: {exc.strerror or exc}"
    if not os.access(args.trace_dir, os.W_OK):
        return f"--trace-dir: {args.trace_dir} is not writable"
    return None


def cmd_host(args: argparse.Namespace, console) -> int:
    from .supervisor import Supervisor

    problem = _problem(args)
    if problem is not None:
        print(f"joynr-sim host: {problem}", file=sys.stderr)
        return 2
    b = args.spec
    credentials = (b.username, b.password or "") if b.username is not None else None
    supervisor = Supervisor(args.join, args.name, args.address, args.trace_dir.resolve(), (b.host, b.port),
                            credentials, args.cores)
    try:
        return asyncio.run(supervisor.serve())
    except ConnectionError as exc:
        print(f"joynr-sim host: {redact(str(exc))}", file=sys.stderr)
        return 3
