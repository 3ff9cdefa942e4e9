"""Loading scenario files: YAML with line numbers, the shipped JSON Schema, the cross-references,
the model.

The JSON Schema ``scenario.schema.json`` next to this module is the one description of the
format; editors check files against it and the loader validates with it (``schema.py``).
What a schema cannot say (that a runtime named in a step exists and is of the right kind,
that a GBID is one of the backends, that ``@name`` was defined by an earlier step) is
checked afterwards (``references.py``).

A scenario file is untrusted input and is read defensively: at most ``MAX_FILE_BYTES``,
UTF-8, one YAML document whose top is a mapping, nested at most ``MAX_DEPTH`` deep (read
without recursion), no anchors or aliases (a scenario never needs them, and refusing them
rules out alias bombs), only plain YAML values (strings, integers of 64 bits, floats,
booleans, null). Bad input raises ``ScenarioError`` naming the file, the line and the
field; the first error stops the load.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

from .fleet_model import fleet_from
from .model import (
    BROKER_STEPS,
    RUNTIME_STEPS,
    Reproduces,
    RuntimeSpec,
    Scenario,
    Step,
    freeze,
)
from .references import References
from .schema import SCHEMA_PATH, At, first_problem, with_defaults

__all__ = ["SCHEMA_PATH", "BrokenScenarios", "ScenarioError", "load_scenario", "load_scenarios", "parse_scenario",
           "scenario_files"]

# The largest scenario in the library is under 10 kB; reading 256 KiB of YAML takes a second
# or two, a hostile file of 1 MiB ten.
MAX_FILE_BYTES = 256 * 1024
MAX_DEPTH = 32  # mappings and lists inside each other; a scenario needs about 6
INT_LIMIT = 1 << 63  # integers must fit 64 bits signed, as msgpack and JSON readers expect

_TAG = "tag:yaml.org,2002:"
_SCALAR_TAGS = {f"{_TAG}{t}" for t in ("str", "int", "float", "bool", "null")}
_COLLECTION_TAGS = {None, "!", f"{_TAG}seq", f"{_TAG}map"}
_UNREADABLE = object()
_TOO_LARGE = f"larger than {MAX_FILE_BYTES // 1024} KiB, the most a scenario file may have"


class ScenarioError(ValueError):
    """``path:line: field: what is wrong``; line 0 when the file could not be read at all."""

    def __init__(self, path: str | os.PathLike[str], line: int, field: str, message: str) -> None:
        self.path = Path(path)
        self.line = line
        self.field = field
        self.message = " ".join(message.split())  # one line, whatever a parser said
        where = f"{self.path}:{line}" if line else f"{self.path}"
        super().__init__(f"{where}: {field}: {self.message}")


# -- YAML with line numbers ------------------------------------------------------------

class _Doc:
    """The parsed file: plain values plus the line of every value, keyed by its path."""

    def __init__(self, path: Path, text: str) -> None:
        self.path = path
        self.lines: dict[At, int] = {}
        if len(text) > MAX_FILE_BYTES:
            raise ScenarioError(path, 0, "(file)", _TOO_LARGE)
        try:
            loader = yaml.SafeLoader(text)  # checks every character of the text first
        except yaml.reader.ReaderError as exc:
            raise ScenarioError(path, text.count("\n", 0, exc.position) + 1, "(yaml)",
                                f"character U+{exc.character:04X} is not allowed in YAML "
                                f"text (write it escaped in a double-quoted string)") from None
        try:
            self.data = self._document(loader)
        except yaml.MarkedYAMLError as exc:
            mark = exc.problem_mark or exc.context_mark
            line = mark.line + 1 if mark else 1
            raise ScenarioError(path, line, "(yaml)", ": ".join(
                p for p in (exc.context, exc.problem) if p) or "not YAML") from None
        except yaml.YAMLError as exc:  # pragma: no cover - the parser raises marked errors
            raise ScenarioError(path, 1, "(yaml)", str(exc)) from None
        finally:
            loader.dispose()

    def _document(self, loader: yaml.SafeLoader) -> Any:
        loader.get_event()  # stream start
        if loader.check_event(yaml.StreamEndEvent):
            raise ScenarioError(self.path, 1, "(file)", "empty file; expected a mapping")
        loader.get_event()  # document start
        data = self._value(loader)
        loader.get_event()  # document end
        if not loader.check_event(yaml.StreamEndEvent):
            line = loader.peek_event().start_mark.line + 1
            raise ScenarioError(self.path, line, "(yaml)", "a second YAML document; a scenario "
                                                           "file holds one")
        return data

    def _value(self, loader: yaml.SafeLoader) -> Any:
        """One value from the event stream, built with an explicit stack instead of recursion,
        so a file nested 10,000 deep gets an error, not a RecursionError."""
        # Each open collection: [its value, its path, the key waiting for its value or None].
        stack: list[list[Any]] = []
        while True:
            event = loader.get_event()
            line = event.start_mark.line + 1
            parent = stack[-1] if stack else None
            if isinstance(event, (yaml.SequenceEndEvent, yaml.MappingEndEvent)):
                value = stack.pop()[0]
            else:
                at: At = self._place(loader, event, parent, line)
                if at is None:  # a mapping key, now waiting for its value
                    continue
                self.lines.setdefault(at, line)
                self._refuse_anchor(event, at, line)
                if isinstance(event, (yaml.SequenceStartEvent, yaml.MappingStartEvent)):
                    if len(stack) >= MAX_DEPTH:
                        raise ScenarioError(self.path, line, _field(at), f"nested deeper than "
                                                                         f"{MAX_DEPTH} levels")
                    if event.tag not in _COLLECTION_TAGS:
                        raise ScenarioError(self.path, line, _field(at),
                                            f"YAML tag {event.tag!r} is not supported")
                    seq = isinstance(event, yaml.SequenceStartEvent)
                    stack.append([[] if seq else {}, at, None])
                    continue
                value = self._scalar(loader, event, at, line)
            if not stack:
                return value
            top = stack[-1]
            if isinstance(top[0], list):
                top[0].append(value)
            else:
                top[0][top[2]] = value
                top[2] = None

    def _place(self, loader: yaml.SafeLoader, event: yaml.Event, parent: list[Any] | None,
               line: int) -> Any:
        """The path of the value ``event`` starts; None when it is a key (then kept in
        ``parent``)."""
        if parent is None:
            return ()
        container, at, key = parent
        if isinstance(container, list):
            return (*at, len(container))
        if key is not None:
            return (*at, key)
        where = _field(at)
        self._refuse_anchor(event, at, line)
        if not isinstance(event, yaml.ScalarEvent):
            raise ScenarioError(self.path, line, where, "keys must be strings, got a "
                                                        "list or mapping")
        tag = self._tag(loader, event)
        if tag == f"{_TAG}merge":
            raise ScenarioError(self.path, line, where, "merge keys (<<) are not supported; "
                                                        "write the keys out")
        key = self._scalar(loader, event, at, line)
        if not isinstance(key, str):
            raise ScenarioError(self.path, line, where, f"keys must be strings, got {key!r}")
        if key in container:
            raise ScenarioError(self.path, line, _field((*at, key)), "duplicate key")
        # A key's line is where a reader looks for it, also for a block value below it.
        self.lines[(*at, key)] = line
        parent[2] = key
        return None

    def _refuse_anchor(self, event: yaml.Event, at: At, line: int) -> None:
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None) is not None:
            raise ScenarioError(self.path, line, _field(at),
                                "YAML anchors and aliases (&name, *name) are not supported; "
                                "write the value out")

    @staticmethod
    def _tag(loader: yaml.SafeLoader, event: yaml.ScalarEvent) -> str:
        if event.tag is None or event.tag == "!":
            return loader.resolve(yaml.ScalarNode, event.value, event.implicit)
        return event.tag

    def _scalar(self, loader: yaml.SafeLoader, event: yaml.ScalarEvent, at: At, line: int) -> Any:
        tag = self._tag(loader, event)
        where = _field(at)
        if tag not in _SCALAR_TAGS:
            raise ScenarioError(self.path, line, where,
                                f"a YAML {tag.removeprefix(_TAG)} is not supported here; write "
                                f"a string (quote it), a number, true, false or null")
        node = yaml.ScalarNode(tag, event.value, event.start_mark, event.end_mark, event.style)
        try:
            value = loader.construct_object(node)
        except (ValueError, KeyError):  # more digits than int() converts; "!!bool maybe"
            value = _UNREADABLE
        finally:
            loader.constructed_objects.clear()
        if value is _UNREADABLE or (type(value) is int and not -INT_LIMIT <= value < INT_LIMIT):
            limit = " (integers have at most 64 bits)" if tag == f"{_TAG}int" else ""
            raise ScenarioError(self.path, line, where, f"cannot read {_clip(event.value)} as "
                                                        f"{tag.removeprefix(_TAG)}{limit}")
        return value

    def line(self, at: At) -> int:
        while at not in self.lines and at:
            at = at[:-1]
        return self.lines.get(at, 1)

    def error(self, at: At, message: str) -> ScenarioError:
        return ScenarioError(self.path, self.line(at), _field(at), message)


def _clip(text: str) -> str:
    """A scalar's text for a message: quoted, one line, short."""
    shown = repr(text)
    return shown if len(shown) <= 26 else f"{shown[:12]}...{shown[-6:]} ({len(text)} characters)"


def _field(at: At) -> str:
    """``steps[3].call.ttl_ms``, ``(top)`` for the whole file; a key that is no plain name
    shows quoted, on one line."""
    if not at:
        return "(top)"
    out = ""
    for part in at:
        if isinstance(part, int):
            out += f"[{part}]"
        elif part.isascii() and part.replace("_", "a").replace("-", "a").isalnum() and len(part) <= 64:
            out += f".{part}" if out else part
        else:
            text = repr(part)
            out += f"[{text if len(text) <= 40 else text[:37] + '...'}]"
    return out if len(out) <= 100 else out[:97] + "..."


# -- loading -------------------------------------------------------------------------------

def _normalise(kind: str, args: Any) -> dict[str, Any]:
    if kind in RUNTIME_STEPS:
        return {"runtime": args}
    if kind in BROKER_STEPS:
        return {"gbid": args}
    if kind == "advance":
        return {"ms": args}
    return args


def parse_scenario(text: str, path: str | os.PathLike[str] = "<string>") -> Scenario:
    """A scenario from YAML text; ``path`` names it in errors."""
    doc = _Doc(Path(path), text)
    problem = first_problem(doc.data, doc.line)
    if problem is not None:
        raise doc.error(*problem)
    data = with_defaults(doc.data)
    if data["fleet"] is not None:
        return _fleet_scenario(data, doc, path)
    References(data, doc.error).check(data)
    steps = []
    for i, item in enumerate(data["steps"]):
        (kind, raw), = item.items()
        steps.append(Step(index=i, kind=kind, args=freeze(_normalise(kind, raw)),
                          line=doc.line(("steps", i))))
    return Scenario(
        name=data["name"],
        description=data["description"],
        reproduces=Reproduces(**data["reproduces"]),
        policy=data["policy"],
        guards=tuple(data["guards"] or ()),
        smoke=data["smoke"],
        gcd_last_seen_timeout_ms=data.get("gcd_last_seen_timeout_ms"),
        broker=data["broker"],
        backends=tuple(data["backends"]),
        runtimes=tuple(
            RuntimeSpec(
                id=rt["id"],
                kind=rt["kind"],
                gbids=tuple(rt.get("gbids") or ()),
                cc_id=rt.get("cc_id"),
                cc=rt.get("cc"),
                old_joynr=bool(rt.get("old_joynr", False)),
                detached_timeout_ms=rt.get("detached_timeout_ms"),
                on_client_disconnect=rt.get("on_client_disconnect") or "keep",
                route_back_to_parent=bool(rt.get("route_back_to_parent", False)),
                remove_stale_delay_ms=rt.get("remove_stale_delay_ms") or 0,
                republish_received_multicasts=bool(rt.get("republish_received_multicasts", False)),
                persist_routing_table=bool(rt.get("persist_routing_table", False)),
            )
            for rt in data["runtimes"]
        ),
        steps=tuple(steps),
        path=Path(path) if path != "<string>" else None,
    )


def _fleet_scenario(data: dict[str, Any], doc: _Doc, path: str | os.PathLike[str]) -> Scenario:
    """A fleet scenario: its runtimes come from the population, its checks from ``expect``."""
    for key in ("runtimes", "steps"):
        if data[key] is not None:
            raise doc.error((key,), "a fleet scenario declares its runtimes and load in fleet:; "
                                    "remove runtimes and steps")
    refs = References(data, doc.error)
    refs.guards(data)
    if data["guards"] is None and data["smoke"] is None:
        raise doc.error((), "a fleet scenario says what it guards: give guards (the policies it must fail "
                            "under) or smoke (why no rule set can break it)")
    refs.broker(data["broker"])
    return Scenario(
        name=data["name"], description=data["description"], reproduces=Reproduces(**data["reproduces"]),
        policy=data["policy"], guards=tuple(data["guards"] or ()), smoke=data["smoke"], broker=data["broker"],
        backends=tuple(data["backends"]), runtimes=(), steps=(),
        path=Path(path) if path != "<string>" else None,
        fleet=fleet_from(data["fleet"], tuple(data["backends"]), doc.line, doc.error),
    )


def load_scenario(path: str | os.PathLike[str]) -> Scenario:
    try:
        # A FIFO or a device would block or never end: only a regular file is read.
        if not stat.S_ISREG(os.stat(path).st_mode):
            raise ScenarioError(path, 0, "(file)", "cannot read: not a regular file")
        with open(path, "rb") as f:
            raw = f.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise ScenarioError(path, 0, "(file)", f"cannot read: {exc.strerror or exc}") from None
    if len(raw) > MAX_FILE_BYTES:
        raise ScenarioError(path, 0, "(file)", _TOO_LARGE)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ScenarioError(path, raw.count(b"\n", 0, exc.start) + 1, "(file)",
                            f"not UTF-8: byte {raw[exc.start]:#04x} at offset {exc.start}") from None
    return parse_scenario(text, path)


def scenario_files(paths: Iterable[str | os.PathLike[str]]) -> list[Path]:
    """Files as given, and every ``*.yaml`` of a folder (sorted), in the order given."""
    files: list[Path] = []
    for p in map(Path, paths):
        files.extend(sorted(p.glob("*.yaml")) if p.is_dir() else [p])
    return files


class BrokenScenarios(ScenarioError):
    """Every broken file of a load, in one line: ``N broken scenario files: <each error>; ...``.
    ``errors`` holds each file's ScenarioError; ``path``, ``line`` and ``field`` are the first's."""

    def __init__(self, errors: list[ScenarioError]) -> None:
        first = errors[0]
        self.errors = errors
        self.path, self.line, self.field, self.message = first.path, first.line, first.field, first.message
        ValueError.__init__(self, f"{len(errors)} broken scenario files: " + "; ".join(map(str, errors)))


def load_scenarios(paths: str | os.PathLike[str] | Iterable[str | os.PathLike[str]]) -> list[Scenario]:
    """Scenarios from files and folders. Every file is read: one bad file raises its
    ScenarioError, several raise ``BrokenScenarios`` naming each."""
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    scenarios, errors = [], []
    for f in scenario_files(paths):
        try:
            scenarios.append(load_scenario(f))
        except ScenarioError as exc:
            errors.append(exc)
    if len(errors) == 1:
        raise errors[0]
    if errors:
        raise BrokenScenarios(errors)
    return scenarios
