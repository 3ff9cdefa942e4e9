"""Where a simulation's runtimes run: which host pool (on this machine, on hosts that joined
the run, or on a Ray cluster) and how many host groups (``Simulation``'s ``hosts``)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ..write_failure import Failures
from .join.joined_hosts import JoinedHosts
from .process.pool import HostPool

RAY = "ray"


def host_pool(hosts: int | str | None, *, processes: bool, run_dir: Path, failures: Failures,
              join: str | None, join_hosts: int, join_timeout_s: float, faults: bool, brokers: Any,
              gbid: str, ray_address: str | None) -> tuple[Any, int | None]:
    """The pool the runtimes' host processes come from (None: every runtime in this
    process) and the number of host groups (None: a process per runtime)."""
    if hosts == "cores":
        hosts = os.cpu_count() or 1
    if hosts is not None and hosts != RAY and (type(hosts) is not int or hosts < 1):
        raise ValueError(f"hosts: expected a whole number from 1, 'cores' or 'ray', got {hosts!r}")
    if hosts is not None and not processes:
        raise ValueError("hosts: runtimes are placed in host processes only with processes=True")
    if ray_address is not None and hosts != RAY:
        raise ValueError("ray_address: the Ray cluster places the hosts only with hosts='ray'")
    if hosts == RAY:
        if join is not None:
            raise ValueError("hosts: 'ray' places the hosts itself; it does not take join")
        from .ray.ray_hosts import RayHosts

        pool = RayHosts(run_dir / "log", ray_address, failures=failures)
        if pool.elsewhere and (faults or brokers.kind != "external"):
            raise ValueError("hosts: the Ray cluster has nodes on other machines, which need faults=False (the fault "
                             "proxies are on this machine) and external brokers (gbid1=mqtt://host:port)")
        return pool, pool.cpus
    if join is not None:
        if not processes or faults or brokers.kind != "external":
            raise ValueError("join: hosts on other machines need processes=True, faults=False (the fault "
                             "proxies are on this machine) and external brokers (gbid1=mqtt://host:port)")
        return JoinedHosts(join, join_hosts, brokers, gbid, run_dir, join_timeout_s, failures=failures), hosts
    # Host processes started ahead: a runtime's start need not wait for Python to start.
    return (HostPool(run_dir / "log", failures=failures) if processes else None), hosts
