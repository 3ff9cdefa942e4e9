"""``joynr-sim brokers check [--broker amqtt|mosquitto|memory|gbid=mqtt://...] [--json FILE]``:
the MQTT semantics joynr relies on (``brokers.promises``), measured on real brokers
(``brokers.semantics``), one line per property as it goes, then a table broker by property.

Without ``--broker`` both amqtt and Mosquitto are checked (Mosquitto when its binary is
there; else it is named as not checked). Each is started as a run starts it
(``brokers.BrokerSet``, in a temporary folder) and stopped at the end, however the command
ends. An external broker is checked as it is, without restarting it: ``persistence`` and
the two ``acl-*`` properties (its own grants apply, not joynr-sim's) are not tested.

``--broker memory`` checks the memory network's broker (``joynr_sim.network.mqtt_broker``)
with the same suite and the same paho clients: it is served on a loopback TCP port
(``joynr_sim.network.mqtt_listener``), logins and grants as ``brokers.access`` says, and
a restart is a crash of the broker and a start, its sessions kept (as Mosquitto's are).

Exit status: 0 every property joynr relies on is kept by every broker checked (a property
not tested does not count); 1 a broker does not keep one (named, with why); 2 a usage
error; 3 a broker could not be started or reached.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import secrets
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from brokers import BrokerError, BrokerSet, BrokerSpecError, MosquittoNotFound, mosquitto, parse_broker, redact
from brokers.promises import DECLARED, PROPERTIES, Outcome

if TYPE_CHECKING:
    from brokers.semantics import Target

SCHEMA = "joynr-sim-brokers-check/1"
GBID = "check"  # the one GBID of the brokers this command starts
MEMORY = "memory"  # the memory network's broker, served on a loopback port


def add_parser(sub) -> None:
    p = sub.add_parser("brokers", help="what joynr relies on an MQTT broker for, measured: `brokers check`",
                       description="MQTT brokers as joynr uses them.")
    actions = p.add_subparsers(dest="brokers_command", required=True)
    c = actions.add_parser("check", help="measure the MQTT properties joynr relies on (exit 0 kept, 1 not kept, "
                           "3 no broker)", description="Measure, on real brokers, the MQTT semantics joynr relies on; "
                           "one line per property as it goes, then a table broker by property.",
                           epilog=__doc__.split("\n\n", 1)[1].strip(),
                           formatter_class=argparse.RawDescriptionHelpFormatter)
    c.add_argument("--broker", metavar="BROKER", help="amqtt, mosquitto, memory (the memory network's broker), or "
                   "gbid1=mqtt://[user:pw@]host:port,... (default: amqtt and mosquitto)")
    c.add_argument("--json", type=Path, metavar="FILE", help="also write the results as JSON to FILE")
    c.set_defaults(func=cmd_check)


@dataclass
class Checked:
    """One broker's results."""

    name: str  # amqtt, mosquitto, memory, or the GBID of an external broker
    kind: str
    url: str  # redacted
    outcomes: dict[str, Outcome] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    total_s: float = 0.0


class _Unreachable(Exception):
    """A broker could not be started or reached; the message is one line."""


def _fail(text: str, code: int) -> int:
    Console(stderr=True).print(f"[red]joynr-sim brokers check: {escape(redact(text))}[/]", soft_wrap=True,
                               highlight=False)
    return code


def cmd_check(args: argparse.Namespace, console: Console) -> int:
    """0 kept, 1 a relied-on property not kept, 2 usage, 3 a broker not started or reached."""
    not_checked: dict[str, str] = {}
    if args.broker is None:
        choices = ["amqtt"]
        try:
            mosquitto.find_binary()
            choices.append("mosquitto")
        except MosquittoNotFound as exc:
            not_checked["mosquitto"] = str(exc)
            console.print(f"mosquitto: not checked: {escape(str(exc))}", soft_wrap=True, highlight=False)
    elif args.broker.strip() == MEMORY:  # not a broker choice of a BrokerSet: no process to start
        choices = [MEMORY]
    else:
        try:
            parse_broker(args.broker)
        except BrokerSpecError as exc:
            return _fail(str(exc), 2)
        choices = [args.broker]
    if args.json is not None:
        problem = _json_problem(args.json)
        if problem:
            return _fail(problem, 2)
    try:
        checked = asyncio.run(_check_all(choices, console))
    except _Unreachable as exc:
        return _fail(str(exc), 3)
    failures = [(c, p, c.outcomes[p.id]) for c in checked for p in PROPERTIES
                if p.relied_on and c.outcomes[p.id].kept is False]
    console.print(_table(checked))
    for note in _drift(checked):
        console.print(f"[yellow]{escape(note)}[/]", soft_wrap=True, highlight=False)
    for c, p, outcome in failures:
        console.print(f"[red]{escape(c.name)} does not keep {p.id} (relied on: {escape(p.relies)}): "
                      f"{escape(outcome.how)}[/]", soft_wrap=True, highlight=False)
    if not failures:
        console.print(f"every property joynr relies on is kept by {', '.join(c.name for c in checked)}",
                      highlight=False)
    code = 1 if failures else 0
    if args.json is not None:
        try:
            _write_json(args.json, checked, not_checked, code)
        except OSError as exc:
            return _fail(f"--json {args.json}: cannot write: {exc.strerror or exc}", 2)
        console.print(f"written to {escape(str(args.json))}", highlight=False)
    return code


async def _check_all(choices: list[str], console: Console) -> list[Checked]:
    checked: list[Checked] = []
    for choice in choices:
        if choice == MEMORY:
            checked.append(await _check_memory(console))
            continue
        with tempfile.TemporaryDirectory(prefix="joynr-sim-brokers-check-") as run_dir:
            checked.extend(await _check_one(choice, Path(run_dir), console))
    return checked


async def _check_one(choice: str, run_dir: Path, console: Console) -> list[Checked]:
    spec = parse_broker(choice)
    gbids = list(spec.external) if spec.kind == "external" else [GBID]
    try:
        brokers = BrokerSet(gbids, broker=choice, run_dir=run_dir)
    except MosquittoNotFound as exc:
        raise _Unreachable(str(exc)) from None
    started = time.monotonic()
    try:
        try:
            await brokers.start()
        except (BrokerError, OSError) as exc:
            raise _Unreachable(str(exc).splitlines()[0]) from None
        if spec.kind == "external":
            console.print(f"{escape(spec.redacted())}: reached", soft_wrap=True, highlight=False)
        else:
            host, port = brokers.endpoint(GBID)
            console.print(f"{spec.kind}: started on {host}:{port} in {time.monotonic() - started:.1f} s",
                          highlight=False)
        from brokers.semantics import broker_set_target  # paho: only when a check runs

        external = spec.kind == "external"
        results = []
        for gbid in gbids:
            target = broker_set_target(brokers, gbid, asyncio.get_running_loop())
            url = brokers.spec.external[gbid].url() if external else f"mqtt://{target.host}:{target.port}"
            results.append(await _run_suite(target, gbid if external else spec.kind, spec.kind, url, console))
        return results
    finally:
        await brokers.stop()


@contextlib.contextmanager
def memory_target(gbid: str = GBID) -> Iterator[Target]:
    """The memory network's broker of ``gbid`` on a loopback port, started, as the suite's
    ``Target``: clients log in as ``MemoryBrokers.credentials`` says, the grants of
    ``brokers.access`` apply, and ``restart`` crashes the broker and starts it again (what
    it persisted kept). Blocking; everything is closed when the block ends."""
    from brokers.semantics import Target
    from joynr_sim.network.memory import MemoryBrokers
    from joynr_sim.network.mqtt_listener import MqttListener

    brokers = MemoryBrokers([gbid], secrets.token_hex(8))

    async def crash_and_start() -> None:
        await brokers.crash_broker(gbid)
        await brokers.start_broker(gbid)

    with MqttListener(brokers.broker(gbid)) as listener:
        listener.run(brokers.start())
        yield Target(listener.host, listener.port, login=lambda client_id: brokers.credentials(client_id, gbid),
                     restart=lambda: listener.run(crash_and_start()))


async def _check_memory(console: Console) -> Checked:
    started = time.monotonic()
    stack = contextlib.ExitStack()
    try:
        try:  # the listener's start and close block on its thread: off this loop
            target = await asyncio.to_thread(stack.enter_context, memory_target())
        except OSError as exc:
            raise _Unreachable(f"memory: cannot listen on a loopback port: {exc.strerror or exc}") from None
        console.print(f"{MEMORY}: started on {target.host}:{target.port} in {time.monotonic() - started:.1f} s",
                      highlight=False)
        return await _run_suite(target, MEMORY, MEMORY, f"mqtt://{target.host}:{target.port}", console)
    finally:
        await asyncio.to_thread(stack.close)


async def _run_suite(target: Target, name: str, kind: str, url: str, console: Console) -> Checked:
    from brokers.semantics import run_property  # paho: only when a check runs

    checked = Checked(name, kind, url)
    began = time.monotonic()
    for prop in PROPERTIES:
        t = time.monotonic()
        outcome = await asyncio.to_thread(run_property, prop.id, target)
        checked.outcomes[prop.id], checked.seconds[prop.id] = outcome, time.monotonic() - t
        console.print(f"  {escape(name)} {prop.id}: {_cell(outcome, prop.relied_on)} "
                      f"[dim]({checked.seconds[prop.id]:.1f} s)[/]", soft_wrap=True, highlight=False)
    checked.total_s = time.monotonic() - began
    return checked


def _cell(outcome: Outcome, relied_on: bool) -> str:
    text = escape(outcome.text())
    if outcome.kept is None:
        return f"[dim]{text}[/]"
    if outcome.kept:
        return f"[green]{text}[/]"
    return f"[bold red]{text}[/]" if relied_on else f"[yellow]{text}[/]"


def _table(checked: list[Checked]) -> Table:
    table = Table(title="broker properties (relied on: what joynr needs kept)")
    table.add_column("property", no_wrap=True)
    table.add_column("relied on", justify="center", no_wrap=True)
    for c in checked:
        table.add_column(f"{c.name}\n{c.total_s:.1f} s" if c.kind != "external" else f"{c.name}\n{c.url}",
                         overflow="fold")
    for p in PROPERTIES:
        table.add_row(p.id, "yes" if p.relied_on else "no", *(_cell(c.outcomes[p.id], p.relied_on) for c in checked))
    return table


def _drift(checked: list[Checked]) -> list[str]:
    """Where a managed broker did otherwise than ``brokers.promises`` declares for its kind."""
    notes = []
    for c in checked:
        declared = DECLARED.get(c.kind, {})
        for p in PROPERTIES:
            want, got = declared.get(p.id), c.outcomes[p.id]
            if want is None or want.kept is None or got.kept is None or want == got:
                continue
            notes.append(f"{c.name} {p.id}: measured {got.text()!r}, declared {want.text()!r} (brokers/promises.py)")
    return notes


def _json_problem(path: Path) -> str | None:
    if path.is_dir():
        return f"--json {path}: is a folder; give a file name"
    if not path.parent.is_dir():
        return f"--json {path}: no such folder {path.parent}"
    return None


def report(checked: list[Checked], not_checked: dict[str, str], code: int) -> dict[str, Any]:
    """The JSON document of a check (no password: URLs are redacted)."""
    return {
        "schema": SCHEMA,
        "exit": code,
        "brokers": [{
            "name": c.name, "kind": c.kind, "url": c.url, "seconds": round(c.total_s, 3),
            "properties": {p.id: {
                "kept": c.outcomes[p.id].kept, "how": c.outcomes[p.id].how, "text": c.outcomes[p.id].text(),
                "relied_on": p.relied_on, "seconds": round(c.seconds[p.id], 3),
                "declared": ({"kept": d.kept, "how": d.how} if (d := DECLARED.get(c.kind, {}).get(p.id)) else None),
            } for p in PROPERTIES},
        } for c in checked],
        "not_checked": [{"name": name, "why": why} for name, why in not_checked.items()],
        "properties": [{"id": p.id, "title": p.title, "description": p.description, "relied_on": p.relied_on,
                        "relies": p.relies, "section": p.section} for p in PROPERTIES],
    }


def _write_json(path: Path, checked: list[Checked], not_checked: dict[str, str], code: int) -> None:
    text = redact(json.dumps(report(checked, not_checked, code), indent=2))
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text + "\n", encoding="utf-8")
    os.replace(tmp, path)
