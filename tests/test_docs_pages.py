"""The manual's generated pages say what their sources say, and the site builds strictly.

docs/hooks.py writes the reference pages (from the command's parser, the scenario schema and
the trace catalogue) and the benchmark table (from bench/results/*.json) at every build;
none of them is in git, so none can be stale.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from joynr_sim.cli import build_parser

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
MKDOCS = Path(sys.executable).parent / "mkdocs"


def load_hooks():
    spec = importlib.util.spec_from_file_location("docs_hooks", DOCS / "hooks.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


hooks = load_hooks()


def test_generated_pages_are_not_committed():
    for uri in hooks.pages():
        assert not (DOCS / uri).exists(), f"docs/{uri} is generated at build time; delete the copy"


def test_the_cli_page_has_the_help_of_every_command():
    page = hooks.cli_page()
    parser = build_parser()
    commands = next(a for a in parser._actions if a.dest == "command").choices
    assert len(commands) >= 10
    for name, sub in commands.items():
        assert f"## `joynr-sim {name}`" in page, name
        for action in sub._actions:
            for flag in action.option_strings:
                assert flag in page, f"{name} {flag}"
    assert "## `joynr-sim brokers check`" in page


def test_the_schema_page_has_every_field_and_step():
    schema = json.loads(hooks.SCHEMA.read_text())
    page = hooks.schema_page()
    for name in schema["properties"]:
        assert f"| `{name}` |" in page, name
    for kind in schema["properties"]["steps"]["items"]["properties"]:
        assert f"### `{kind}`" in page, kind
    for name in schema["required"]:
        assert f"| `{name}` | yes |" in page, name
    assert "| `seed` | yes |" in page and "| `scenario` | yes |" in page
    assert "With `fleet`: `fleet` required; without it: `runtimes`, `steps` required." in page


def test_the_trace_page_has_every_event_and_field():
    catalogue = json.loads((hooks.TRACE_SCHEMA / "events.json").read_text())
    page = hooks.trace_page()
    for name, event in catalogue["events"].items():
        assert f"## `{name}`" in page, name
        for field in event.get("fields", {}):
            assert f"| `{field}` |" in page, f"{name}.{field}"
    for field in catalogue["common"]:
        assert f"| `{field}` |" in page


def test_without_results_the_benchmark_page_says_how_to_make_them(tmp_path: Path):
    (tmp_path / "bench_fast.py").write_text('"""How fast it is.\n\nMore."""\n')
    text = hooks.benchmark_results(tmp_path / "results")
    assert "| `fast` | How fast it is. |" in text
    assert "make bench" in text and "No results here" in text


def test_the_benchmark_page_shows_each_figure_with_its_machine(tmp_path: Path):
    results = tmp_path / "results"
    results.mkdir()
    rows = [{"bench": "e2e", "group": "amqtt", "name": "request/reply", "value": 0.512, "unit": "x raw",
             "baseline": 1234.5}]
    (results / "e2e.json").write_text(json.dumps(rows))
    (results / "all.json").write_text(json.dumps({"python": "3.11.9", "machine": "x86_64", "quick": False,
                                                  "rows": rows}))
    (results / "routing.json").write_text(json.dumps({"machine": "aarch64", "cores": 8, "rows": [
        {"group": "put", "name": "ops/s", "value": 98765.4, "unit": "1/s"}]}))
    (results / "mutation.json").write_text(json.dumps({"python": "3.11.9", "date": "2026-01-02",
                                                      "modules": {"router": {"killed": 90, "score": 0.97}}}))
    (results / "subscriptions.json").write_text(json.dumps([{"name": "alone", "value": 1.5, "unit": "ms"}]))
    (results / "broken.json").write_text("{not json")
    text = hooks.benchmark_results(results)
    assert "### `e2e.json`" in text and "| amqtt | request/reply | 0.512 | x raw | 1,234 |" in text
    assert "Ran on: machine x86_64, python 3.11.9, quick False (from `all.json`" in text
    assert "Ran on: machine aarch64, cores 8." in text and "98,765" in text
    assert "Ran on: python 3.11.9, date 2026-01-02." in text and "| router | 90 | 0.970 |" in text
    sub = text[text.index("### `subscriptions.json`"):]
    assert sub.splitlines()[2] == "Ran on: not recorded in the file."
    assert "No rows this page can read." in text[text.index("### `broken.json`"):]
    assert "### `all.json`" not in text


def test_the_benchmark_table_goes_where_its_marker_stands():
    page = SimpleNamespace(file=SimpleNamespace(src_uri=hooks.BENCH_PAGE))
    source = (DOCS / hooks.BENCH_PAGE).read_text()
    built = hooks.on_page_markdown(source, page, None, None)
    assert hooks.BENCH_MARKER not in built and "| `e2e` |" in built
    with pytest.raises(ValueError, match="marker"):
        hooks.on_page_markdown("# Benchmarks\n", page, None, None)
    other = SimpleNamespace(file=SimpleNamespace(src_uri="index.md"))
    assert hooks.on_page_markdown(hooks.BENCH_MARKER, other, None, None) == hooks.BENCH_MARKER


def build(root: Path, site: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(MKDOCS), "build", "--strict", "-f", str(root / "mkdocs.yml"),
                           "-d", str(site)], cwd=root, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "NO_MKDOCS_2_WARNING": "1"})


def test_the_site_builds_strictly_with_every_generated_page(tmp_path: Path):
    done = build(ROOT, tmp_path / "site")
    assert done.returncode == 0, done.stdout + done.stderr
    for uri in [*hooks.pages(), hooks.BENCH_PAGE]:
        assert (tmp_path / "site" / uri.removesuffix(".md") / "index.html").exists(), uri
    assert not (tmp_path / "site" / "hooks.py").exists()


def test_a_broken_link_fails_the_build(tmp_path: Path):
    root = tmp_path / "copy"
    shutil.copytree(DOCS, root / "docs", ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "mkdocs.yml", root / "mkdocs.yml")
    # The hooks read the project's sources next to them.
    for name in ("joynr_sim", "trace_schema", "bench"):
        (root / name).symlink_to(ROOT / name)
    with (root / "docs" / "tutorial.md").open("a") as page:
        page.write("\nSee [nowhere](no-such-page.md).\n")
    done = build(root, tmp_path / "site")
    assert done.returncode != 0
    assert "no-such-page.md" in done.stdout + done.stderr
