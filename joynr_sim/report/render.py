"""Writing the pages: one self-contained HTML file per run and an index over them, from
the Jinja2 templates and the static script and style next to this module.

A page carries its scripts, styles and data inline, so it opens from the file system with
no server and no network. Pages are written under a temporary name and renamed into place;
a file there that joynr-sim did not write (its generator mark is missing), a link or a
folder is refused and left as it is. A folder that cannot be created or written is refused
before anything is written (``ReportError``); a page the disk refuses later (a full file
system) raises ``WriteFailure`` naming it, its temporary removed.
"""

from __future__ import annotations

import os
import re
import tempfile
from dataclasses import dataclass
from importlib import resources
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import jinja2

from brokers import redact
from brokers.promises import BY_ID as BROKER_PROPERTIES

from ..write_failure import OutDirError, WriteFailure, prepare_out_dir
from . import model, plots
from .inputs import ReportError, RunInput, Step
from .matrix import matrix_view, read_matrix
from .names import described, participant_names
from .routing import routing as routing_model

GENERATOR = "joynr-sim report"
MARK = f'<meta name="generator" content="{GENERATOR}">'
INDEX = "index.html"


def _environment() -> jinja2.Environment:
    env = jinja2.Environment(
        loader=jinja2.PackageLoader("joynr_sim.report", "templates"),
        autoescape=jinja2.select_autoescape(["html", "j2"]),
        undefined=jinja2.StrictUndefined, trim_blocks=True, lstrip_blocks=True,
    )
    env.filters["anchor"] = anchor
    return env


def _static(name: str) -> str:
    return resources.files("joynr_sim.report").joinpath("static", name).read_text(encoding="utf-8")


def anchor(kind: str, value: str) -> str:
    """The fragment naming a message or participant in a page (``#msg-<id>``)."""
    from urllib.parse import quote

    return f"{kind}-{quote(value, safe='')}"


def _joynr_sim_version() -> str:
    try:
        return version("joynr-sim")
    except PackageNotFoundError:  # pragma: no cover - run from a source tree without install
        return "?"


# -- the output folder ----------------------------------------------------------------------

def _ours(path: Path) -> bool:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return MARK in f.read(2048)
    except OSError:
        return False


def check_target(path: Path) -> None:
    if not os.path.lexists(path):
        return
    if path.is_symlink():
        raise ReportError(f"{path} is a symbolic link; joynr-sim replaces only pages it wrote (choose another --out)")
    if not path.is_file() or not _ours(path):
        raise ReportError(f"{path} exists and was not written by joynr-sim report; it is left as it is "
                          "(move it away or choose another --out)")


def prepare_out(out: Path) -> None:
    try:
        prepare_out_dir(out)
    except OutDirError as exc:
        raise ReportError(str(exc)) from None


def write_page(path: Path, text: str) -> None:
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise WriteFailure.of(path, exc) from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:  # mkstemp: readable by the owner only
            f.write(text)
        os.replace(tmp, path)
    except BaseException as exc:
        try:
            Path(tmp).unlink(missing_ok=True)
        except OSError:
            pass  # the failure below is what the user must see
        if isinstance(exc, OSError):
            raise WriteFailure.of(path, exc) from None
        raise


def page_label(run_dir: Path, *, matrix: bool = False) -> str:
    """What a run's page is named after: its folder, and in a matrix its rule set's too
    (``<rule set>/<scenario>``: every rule set has a run of each scenario)."""
    return f"{run_dir.parent.name}/{run_dir.name}" if matrix else run_dir.name


def page_names(run_names: list[str]) -> list[str]:
    """``<run folder>.html``, unique, never the index's name."""
    names: list[str] = []
    for run_name in run_names:
        base = re.sub(r"[^A-Za-z0-9._-]+", "_", run_name).lstrip(".") or "run"
        if base == "index":
            base = "index-run"
        name, n = f"{base}.html", 2
        while name in names:
            name, n = f"{base}-{n}.html", n + 1
        names.append(name)
    return names


# -- the pages ------------------------------------------------------------------------------

@dataclass(frozen=True)
class Written:
    index: Path
    pages: list[Path]


def run_context(inp: RunInput, out: Path, page: str) -> dict[str, Any]:
    run = inp.run
    runtimes = run.runtimes()
    names = participant_names(run.events)
    msgs = model.messages(run, names)
    violations = []
    for verdict in inp.verdicts:
        for v in verdict.violations:
            href = os.path.relpath(v.slice_file, out) if v.slice_file else None
            violations.append(model.violation_view(run, v, len(violations), href))
    steps = list(inp.manifest.steps) if inp.manifest else _trace_steps(run.events)
    violating = {ref for verdict in inp.verdicts for v in verdict.violations for ref in v.refs}
    routing = routing_model(run, violated=[v.participant for v in violations], violating=violating, steps=steps,
                            names=names)
    listed = {m["id"] for m in msgs.listed}
    lat = model.latencies(run)
    ms = sorted(r["ms"] for r in lat)
    series = model.activity(run)
    data = {
        "messages": msgs.listed, "conversations": msgs.conversations, "failing": msgs.failing,
        "routing": {"participants": routing["participants"], "changes": routing["changes"],
                    "first": routing["first"], "why": routing["why"], "labels": routing["labels"]},
        "plots": {k: v for k, v in {
            "activity": plots.activity(series, runtimes),
            "sent": plots.activity(series, runtimes, "sent"),
            "latency": plots.latency(lat),
            "drops": plots.drops(model.drops(run), runtimes),
            "links": plots.links(model.links(run), runtimes),
            "timeline": plots.routing_timeline(routing, runtimes),
        }.items() if v is not None},
    }
    manifest = inp.manifest
    failing = [msgs.conversations[i] for i in msgs.failing]
    return {
        "page": page, "inp": inp, "m": manifest, "outcome": model.run_outcome(inp), "run_id": inp.run_id,
        "expectation": inp.expectation,
        "broker": redact(manifest.broker) if manifest else "", "summary": model.summary(run),
        "steps": steps, "verdicts": inp.verdicts, "violations": violations, "listed": listed,
        "check_report": os.path.relpath(inp.check_report, out) if inp.check_report else None,
        "messages_total": len(msgs.listed) + msgs.not_listed, "not_listed": msgs.not_listed,
        "failing_count": len(msgs.failing), "explained_count": sum(bool(c["explained"]) for c in failing),
        "latency": _percentiles(ms), "data": data, "run_path": str(inp.path),
        "participant_names": {p: described(names, p) for p in names},
        "broker_property_titles": {p.id: f"{p.title}: {p.description} ({p.section})"
                                   for p in BROKER_PROPERTIES.values()},
    }


def _trace_steps(events: list[dict[str, Any]]) -> list[Step]:
    """Without run.json, the steps the runner recorded in the trace."""
    return [Step(index=e.get("index") if isinstance(e.get("index"), int) else i, title=str(e.get("name")),
                       outcome=str(e.get("outcome")), detail=str(e.get("detail") or ""), context="",
                       line=e.get("line") if isinstance(e.get("line"), int) else None, duration_ms=None)
            for i, e in enumerate(x for x in events if x["ev"] == "step")]


def _percentiles(ms: list[int]) -> dict[str, int] | None:
    if not ms:
        return None
    pick = lambda q: ms[min(len(ms) - 1, int(q * len(ms)))]  # noqa: E731 - nearest rank, as people read it
    return {"n": len(ms), "p50": pick(0.5), "p95": pick(0.95), "max": ms[-1]}


def index_row(inp: RunInput, page: str, ctx: dict[str, Any]) -> dict[str, Any]:
    steps = ctx["steps"]
    cell = inp.expectation
    return {
        "page": page, "name": inp.manifest.scenario if inp.manifest else inp.path.name,
        "outcome": ctx["outcome"], "policy": inp.manifest.policy if inp.manifest else "",
        "expected": cell.expected if cell else "", "as_expected": bool(cell and cell.as_expected),
        "ok": cell.ok if cell else ctx["outcome"] == "passed",
        "key": (cell.scenario, cell.column) if cell else None,
        "broker": ctx["broker"], "steps_ok": sum(s.outcome == "ok" for s in steps), "steps": len(steps),
        "checked": bool(inp.verdicts), "violations": len(ctx["violations"]),
        "not_listed": any(v.status == "not listed" for v in inp.verdicts),
        "messages": ctx["messages_total"], "failing": ctx["failing_count"],
        "drops": sum(r["drops"] for r in ctx["summary"]["runtimes"]),
        "duration": inp.manifest.duration_s if inp.manifest else None,
    }


def check_out(out: Path, run_names: list[str]) -> list[str]:
    """The page names for these runs; raises ReportError, writing nothing, when ``out`` or
    a page there is not joynr-sim's to write."""
    if out.is_symlink():
        raise ReportError(f"--out {out} is a symbolic link; give the folder it points to")
    if os.path.lexists(out) and not out.is_dir():
        raise ReportError(f"--out {out} exists and is not a folder")
    names = page_names(run_names)
    for name in [INDEX, *names]:
        check_target(out / name)
    return names


def write_reports(runs: list[RunInput], out: Path) -> Written:
    names = check_out(out, [page_label(r.path, matrix=r.in_matrix) for r in runs])  # before anything is written
    prepare_out(out)
    env = _environment()
    common = {"css": _static("report.css"), "generator": GENERATOR, "version": _joynr_sim_version()}
    run_page = env.get_template("run.html.j2")
    pages, rows = [], []
    for inp, name in zip(runs, names):
        ctx = run_context(inp, out, name)
        text = run_page.render(**common, **ctx, js=_static("report.js"), vega=plots.vega_script())
        write_page(out / name, text)
        pages.append(out / name)
        rows.append(index_row(inp, name, ctx))
    matrices = {r.path.resolve().parent.parent for r in runs if r.in_matrix}
    grids = [matrix_view(read_matrix(folder), {row["key"]: row for row in rows if row["key"]})
             for folder in sorted(matrices)]
    index = out / INDEX
    write_page(index, env.get_template("index.html.j2").render(**common, rows=rows, grids=grids))
    return Written(index, pages)
