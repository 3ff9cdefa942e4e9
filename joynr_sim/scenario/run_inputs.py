"""What ``joynr-sim run`` checks before anything starts: the options against the scenarios
(names, broker choices, the network, run directories free) and where its outputs go."""

from __future__ import annotations

from pathlib import Path

from brokers import BrokerSpecError, parse_broker, redact

from ..network import DEFAULT_BROKER, choose_network
from .model import Scenario
from .rundir import RunDirError, check_run_dir

GCD_STORE_SCHEMES = ("postgresql://", "postgres://")


def run_folder(column: str) -> str:
    """The folder of a matrix column's runs: the policy's or variant's name, ``gcd:ignores-gbids``
    as ``gcd-ignores-gbids`` (a colon in a path is a URI scheme to Spark's readers)."""
    return column.replace(":", "-")


def check_inputs(scenarios: list[Scenario], *, out: Path, broker: str | None, gcd_store: str | None,
                 folders: list[str] | None = None, network: str | None = None) -> str | None:
    """The first problem with the options or the scenarios' broker choices, as one line;
    ``folders``: the run directories go to ``out/<folder>/`` (the matrix's policies)."""
    from .model import MEMORY_ONLY_STEPS
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
            spec = parse_broker(broker or s.broker, s.backends)
        except BrokerSpecError as exc:
            where = "--broker" if broker else "broker"
            return f"{s.path or s.name}: {where}: {str(exc).removeprefix('broker: ')}"
        if network is not None:
            try:  # a scenario's own broker choice is the default --network overrides, unless external
                choose_network(network, broker or (s.broker if spec.kind == "external" else DEFAULT_BROKER))
            except ValueError as exc:
                return f"{s.path or s.name}: --{exc}"
        # TCP delivers once and in order: refused here, not at the step after the set-up
        memory_only = next((st for st in s.steps if st.kind in MEMORY_ONLY_STEPS), None)
        if memory_only is not None and network != "memory":
            return f"{s.path or s.name}: step {memory_only.index} {memory_only.kind} needs --network memory"
    try:
        for folder in folders or [None]:
            for s in scenarios:
                check_run_dir(out / folder if folder else out, s.name)
    except RunDirError as exc:
        return str(exc)
    return None



def check_junit_target(junit: Path) -> str | None:
    if junit.is_dir():
        return f"--junit {junit} is a folder; give a file name"
    if not junit.parent.is_dir():
        return f"--junit {junit}: no such folder {junit.parent}"
    return None
