"""MkDocs hooks: the pages made from the project's own sources, written at every build.

The reference pages come from what the code reads (the scenario schema, the trace catalogue,
the command's argument parser) and the benchmarks page from ``bench/results/*.json``, so none
of them is committed and none can fall behind what it describes.
"""

from __future__ import annotations

import argparse
import ast
import json
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
SCHEMA = ROOT / "joynr_sim" / "scenario" / "scenario.schema.json"
TRACE_SCHEMA = ROOT / "trace_schema"
RESULTS = ROOT / "bench" / "results"
# The fields of a result file that say where and how it was measured, not what.
MACHINE_KEYS = ("machine", "platform", "cpu", "cores", "python", "quick", "date")
BENCH_PAGE = "benchmarks.md"
BENCH_MARKER = "<!-- bench-results -->"


def on_files(files: Any, config: Any) -> Any:
    from mkdocs.structure.files import File

    for uri, make in pages().items():
        files.append(File.generated(config, uri, content=make()))
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """The benchmarks page is prose around one generated part, put where its marker stands."""
    if page.file.src_uri == BENCH_PAGE:
        if BENCH_MARKER not in markdown:
            raise ValueError(f"{BENCH_PAGE} lost its marker {BENCH_MARKER}")
        markdown = markdown.replace(BENCH_MARKER, benchmark_results(RESULTS))
    return markdown


def pages() -> dict[str, Callable[[], str]]:
    return {
        "reference/cli.md": cli_page,
        "reference/scenario-schema.md": schema_page,
        "reference/trace-events.md": trace_page,
    }


# --- the command's --help -------------------------------------------------------------------


@contextmanager
def _columns(width: int) -> Iterator[None]:
    """argparse wraps help to the terminal's width: a fixed one keeps the page the same."""
    old = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = str(width)
    try:
        yield
    finally:
        if old is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = old


def _commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
              ) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    yield path, parser
    # argparse keeps its subcommands only in this private action; the parser is the source of
    # truth for --help, so the page walks it rather than a list of names that could drift.
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _commands(sub, (*path, name))


def cli_page() -> str:
    from joynr_sim.cli import build_parser

    out = ["# Command line", "",
           "The output of `--help` of `joynr-sim` and each of its commands, as this version prints it.", ""]
    with _columns(100):
        for path, parser in _commands(build_parser()):
            name = " ".join(("joynr-sim", *path))
            out += [f"## `{name}`", "", "```text", parser.format_help().rstrip(), "```", ""]
    return "\n".join(out)


# --- the scenario schema --------------------------------------------------------------------


def _cell(text: Any) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def _text(text: Any) -> str:
    """Prose from a schema in a table cell: `<id>` is a placeholder there, not an HTML tag."""
    return _cell(text).replace("<", "&lt;").replace(">", "&gt;")


def _resolve(schema: dict, node: dict) -> dict:
    """A node with its $ref's fields beneath its own (the node's description wins)."""
    ref = node.get("$ref")
    if not ref:
        return node
    target = schema
    for part in ref.removeprefix("#/").split("/"):
        target = target[part]
    return {**_resolve(schema, target), **{k: v for k, v in node.items() if k != "$ref"}}


def _type_of(node: dict) -> str:
    if "const" in node:
        return f"`{json.dumps(node['const'])}`"
    if "enum" in node:
        return ", ".join(f"`{json.dumps(v)}`" for v in node["enum"])
    kind = node.get("type")
    if isinstance(kind, list):
        kind = " or ".join(kind)
    if kind == "array" and isinstance(node.get("items"), dict):
        return f"array of {node['items'].get('type', 'values')}"
    return kind or ("one of" if "oneOf" in node or "anyOf" in node else "any")


def _limits(node: dict) -> str:
    said = []
    for key in ("default", "minimum", "maximum", "minLength", "maxLength", "minItems", "maxItems", "pattern"):
        if key in node:
            value = node[key] if key == "pattern" else json.dumps(node[key])
            said.append(f"{key} `{value}`")
    return ", ".join(said)


def _fields(schema: dict, node: dict) -> dict[str, dict]:
    """Every property the node may have, its conditional branches included."""
    fields = dict(node.get("properties", {}))
    for branch in (*node.get("allOf", ()), node.get("then", {}), node.get("else", {})):
        fields.update({k: v for k, v in branch.get("then", branch).get("properties", {}).items() if v})
    return fields


def _required(node: dict) -> set[str]:
    return set(node.get("required", ()))


def _conditions(node: dict) -> list[str]:
    """What the schema's if/then/else requires, said in words."""
    if "if" not in node:
        return []
    given = ", ".join(f"`{f}`" for f in node["if"].get("required", ()))
    then = ", ".join(f"`{f}`" for f in node.get("then", {}).get("required", ()))
    other = ", ".join(f"`{f}`" for f in node.get("else", {}).get("required", ()))
    return [f"With {given}: {then} required; without it: {other} required.", ""]


def _table(schema: dict, node: dict) -> list[str]:
    rows = ["| field | required | type | description | limits |", "|---|---|---|---|---|"]
    required = _required(node)
    for name, field in _fields(schema, node).items():
        if not field:
            continue
        field = _resolve(schema, field)
        rows.append(f"| `{name}` | {'yes' if name in required else ''} | {_cell(_type_of(field))} | "
                    f"{_text(field.get('description', ''))} | {_cell(_limits(field))} |")
    return rows


def schema_page() -> str:
    schema = json.loads(SCHEMA.read_text(encoding="utf-8"))
    props = schema["properties"]
    out = ["# Scenario file", "", _text(schema["description"]), "",
           f"From `{SCHEMA.relative_to(ROOT)}` (JSON Schema Draft 2020-12), which the loader checks; "
           "point an editor's YAML language server at it.", "",
           "## Top level", "", *_conditions(schema), *_table(schema, schema), ""]
    for name, part in props.items():
        part = _resolve(schema, part)
        if name != "fleet" and _fields(schema, part):
            out += [f"### `{name}`", "", *_table(schema, part), ""]
    runtimes = _resolve(schema, props["runtimes"]["items"])
    out += ["## A runtime (`runtimes[]`)", "", _text(props["runtimes"]["description"]), ""]
    for branch in runtimes.get("allOf", ()):
        then = branch.get("then", {})
        out += [f"### {then.get('title', 'a runtime')}", "", *_table(schema, then), ""]
    steps = props["steps"]
    out += ["## Steps (`steps[]`)", "", _text(steps["description"]), ""]
    for kind, step in steps["items"]["properties"].items():
        step = _resolve(schema, step)
        out += [f"### `{kind}`", "", _text(step.get("description", "")), ""]
        if _fields(schema, step):
            out += [*_table(schema, step), ""]
        else:
            out += [f"Value: {_cell(_type_of(step))}{', ' + _cell(_limits(step)) if _limits(step) else ''}.", ""]
    fleet = _resolve(schema, props["fleet"])
    out += ["## Fleet (`fleet`)", "", _text(fleet["description"]), "", *_table(schema, fleet), ""]
    for name, part in fleet["properties"].items():
        part = _resolve(schema, part)
        if _fields(schema, part):
            out += [f"### `fleet.{name}`", "", *_table(schema, part), ""]
    out += ["## Shared definitions", ""]
    for name, part in schema["$defs"].items():
        if _fields(schema, part):
            out += [f"### `{name}`", "", _text(part.get("description", "")), "", *_table(schema, part), ""]
    return "\n".join(out)


# --- the trace catalogue --------------------------------------------------------------------


def trace_page() -> str:
    events = json.loads((TRACE_SCHEMA / "events.json").read_text(encoding="utf-8"))
    loss = json.loads((TRACE_SCHEMA / "loss.json").read_text(encoding="utf-8"))
    out = ["# Trace events", "", _text(events["description"]), "",
           f"Schema version {events['version']}, from `trace_schema/events.json`; every event has the "
           "common fields, then its own.", "", "## Common fields", "", *_event_table(events, events["common"]), ""]
    for name, event in events["events"].items():
        out += [f"## `{name}`", "", _text(event.get("description", "")), ""]
        if event.get("fields"):
            out += [*_event_table(events, event["fields"]), ""]
    out += ["## What explains a lost request (`trace_schema/loss.json`)", "", _text(loss["description"]), "",
            "```json", json.dumps({k: v for k, v in loss.items() if k != "description"}, indent=2), "```", ""]
    return "\n".join(out)


def _event_table(catalogue: dict, fields: dict) -> list[str]:
    rows = ["| field | type | description |", "|---|---|---|"]
    for name, field in fields.items():
        field = _resolve(catalogue, field)
        rows.append(f"| `{name}` | {_cell(_type_of(field))} | {_text(field.get('description', ''))} |")
    return rows


# --- the benchmarks -------------------------------------------------------------------------


def _machine(data: Any) -> str:
    if isinstance(data, dict):
        said = [f"{k} {data[k]}" for k in MACHINE_KEYS if k in data]
        if said:
            return ", ".join(said)
    return "not recorded in the file"


def _rows(data: Any) -> list[dict]:
    if isinstance(data, list):
        return [r for r in data if isinstance(r, dict)]
    if isinstance(data, dict) and isinstance(data.get("rows"), list):
        return _rows(data["rows"])
    if isinstance(data, dict) and isinstance(data.get("modules"), dict):
        return [{"name": k, **v} for k, v in data["modules"].items() if isinstance(v, dict)]
    return []


def _value(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:,.3f}" if abs(value) < 100 else f"{value:,.0f}"
    if isinstance(value, dict | list):
        return f"`{_cell(json.dumps(value))[:80]}`"
    return _cell("" if value is None else value)


def benchmark_results(results: Path) -> str:
    """What each benchmark measures, then one table per results file with the machine it names
    (how to make them when there are none)."""
    out = ["| bench | what it measures |", "|---|---|"]
    for module in sorted(results.parent.glob("bench_*.py")):
        doc = ast.get_docstring(ast.parse(module.read_text(encoding="utf-8"))) or ""
        out.append(f"| `{module.stem.removeprefix('bench_')}` | {_text(doc.split(chr(10) * 2)[0])} |")
    out.append("")
    files = sorted(results.glob("*.json")) if results.is_dir() else []
    if not files:
        return "\n".join([*out, "!!! note \"No results here\"",
                          "    `bench/results/` is not in git and holds no JSON in this checkout. Produce it "
                          "with `make bench` (every benchmark), `make bench-quick` (smaller sizes) or "
                          "`.venv/bin/python -m bench NAME`, then build the docs again (`make docs`).", ""])
    summary = _load(results / "all.json")
    for path in files:
        if path.name == "all.json":
            continue
        data = _load(path)
        rows = _rows(data)
        machine = _machine(data)
        if machine == _machine(None) and rows and all(r in _rows(summary) for r in rows):
            machine = _machine(summary) + " (from `all.json`, which holds the same rows)"
        out += [f"### `{path.name}`", "", f"Ran on: {machine}.", ""]
        if not rows:
            out += ["No rows this page can read.", ""]
            continue
        columns = [c for c in ("group", "name", "value", "unit") if any(c in r for r in rows)]
        columns += sorted({k for r in rows for k in r} - {*columns, "bench", *MACHINE_KEYS})
        out += ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns)]
        out += ["| " + " | ".join(_value(r.get(c)) for c in columns) + " |" for r in rows]
        out.append("")
    return "\n".join(out)


def _load(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
