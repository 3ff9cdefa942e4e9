"""The ``joynr-sim`` command."""

from __future__ import annotations

import argparse
import sys

from rich.console import Console
from rich.table import Table

from .core.address import ADDRESS_TYPES
from .core.policies import POLICIES, RUNTIME_KINDS
from .core.routing import policy_matrix

_CELL = {"replaced": "[green]replace[/]", "refused": "[red]refuse[/]", "merged": "merge"}


def cmd_policies(args: argparse.Namespace, console: Console) -> int:
    names = [args.policy] if args.policy else list(POLICIES)
    for name in names:
        policy = POLICIES[name]()
        for kind in RUNTIME_KINDS:
            matrix = policy_matrix(policy, kind)
            table = Table(
                title=f"{name} — {kind}",
                caption=f"rows: existing entry, columns: new entry (non-sticky, other address); "
                f"seed: {policy.seed}",
            )
            table.add_column("existing \\ new")
            for new_type in ADDRESS_TYPES:
                table.add_column(new_type, justify="center")
            for old_type in ADDRESS_TYPES:
                table.add_row(
                    old_type,
                    *(
                        _CELL.get(matrix[(old_type, t)].outcome, matrix[(old_type, t)].outcome)
                        for t in ADDRESS_TYPES
                    ),
                )
            console.print(table)
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="joynr-sim", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("policies", help="print the replace matrix of each routing policy")
    p.add_argument("--policy", choices=list(POLICIES), help="only this policy")
    p.set_defaults(func=cmd_policies)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args, Console())


if __name__ == "__main__":
    sys.exit(main())
