"""A host process's entry: ``python -m joynr_sim.host --control-fd N --query-fd M``, or
forked by the runner's fork server (``host_main``).

Its runtimes are driven by the process that started it over two sockets speaking the
control protocol (``rpc.server``). The process dies with its parent: end of file on the
control channel, or the kernel's parent-death signal (SIGKILL), so no host outlives the
runner even after a SIGKILL of it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import ctypes
import gc
import os
import signal
import sys
from typing import NoReturn

from ..rpc.server import serve
from .event_loop import CHOICES, EVENT_LOOP_ENV, event_loop_choice, event_loop_factory

PR_SET_PDEATHSIG = 1
# The cyclic garbage collector's thresholds in a host. At Python's (700, 10, 10) it took a
# quarter of a fleet host's CPU (perf, 100 / 1,000 fleet under load: gc_collect_main 17% of
# the samples, visit_decref and visit_reachable 6% more): with thousands of calls in flight,
# a young collection came every 700 objects allocated and not yet freed, found each call's
# objects still alive and moved them to an older generation, where they died and were found
# only by collections of the whole heap (200,000 objects per host). At 50,000 most of a
# call's objects are freed by their reference counts before a collection sees them (the
# collector then about 2% of the samples): CPU per call 0.41-0.42 ms
# against 0.56-0.58, calls/s 4,100-4,300 against 3,000 (``bench fleet``), the hosts' peak
# memory the same (270-300 MiB). Cycles that do become garbage are still collected.
GC_THRESHOLDS = (50_000, 50, 50)


def run(control_fd: int, query_fd: int, event_loop: str) -> NoReturn:
    """Serve until the runner says exit or goes; then end at once."""
    # Die with the parent (the runner, or the fork server that forked this host).
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    # Ctrl-C at the terminal reaches the whole process group: the runner stops its hosts itself.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    gc.set_threshold(*GC_THRESHOLDS)
    with asyncio.Runner(loop_factory=event_loop_factory(event_loop)) as runner:
        code = runner.run(serve(control_fd, query_fd))
    sys.stderr.flush()
    # Not a normal exit: what the runtimes hold (sockets, files) is the kernel's to close, and
    # no interpreter shutdown may run code of a runtime that was not stopped.
    os._exit(code)


def host_main(control, query, log_dir: str, event_loop: str) -> NoReturn:
    """The entry of a host forked by the runner's fork server: standard output and error
    go to ``<log_dir>/host-<pid>.log``. The loop is the runner's choice, passed along: the
    fork server's environment is the one it started with."""
    log = os.open(os.path.join(log_dir, f"host-{os.getpid()}.log"), os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(log)
    run(control.detach(), query.detach(), event_loop)


def main(argv: list[str] | None = None) -> NoReturn:
    parser = argparse.ArgumentParser(prog="python -m joynr_sim.host", description=__doc__.splitlines()[0])
    parser.add_argument("--control-fd", type=int, required=True, help="the control channel's socket")
    parser.add_argument("--query-fd", type=int, required=True, help="the query channel's socket")
    parser.add_argument("--event-loop", choices=CHOICES, default=None,
                        help=f"the event loop (default: {EVENT_LOOP_ENV}, else uvloop)")
    args = parser.parse_args(argv)
    try:
        event_loop = args.event_loop or event_loop_choice()
    except ValueError as exc:
        parser.error(str(exc))
    run(args.control_fd, args.query_fd, event_loop)
