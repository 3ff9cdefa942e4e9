"""Every ```bash and ```python block of the docs runs as written, and a block that fails fails
the test.

A page's blocks run in order in one empty folder of their own, beside a link to the scenario
library (as in a checkout's root), with the venv's bin first on the PATH: a shell block with
``bash -euo pipefail``, a Python block with the venv's interpreter. A block with a title
(```yaml title="first.yaml"```) is a file: it is written into the folder under that name for
the blocks after it, whatever its language. Blocks that cannot run here (another machine, a
broker of one's own) are ```text, and every fence names its language, so nothing that looks
like code is left unrun without saying so.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
BIN = Path(sys.executable).parent
FENCE = re.compile(r"^```([\w-]*)([^\n]*)\n(.*?)^```[ \t]*$", re.M | re.S)
TITLE = re.compile(r'title="([^"/]+)"')
RUNNABLE = {"bash", "python"}
# Data and output are shown, never run: a scenario or a config is run by the blocks after it.
SHOWN = {"text", "yaml", "json", "ini"}
# A page whose blocks start Spark belongs to the spark tier; one that starts brokers (a run off
# the memory network, a brokers check) to the e2e tier.
SPARK = re.compile(r"joynr-sim (explore|check)\b|--check\b")
RUN = re.compile(r"joynr-sim run\b[^\n]*")
BROKERS = re.compile(r"joynr-sim brokers check\b")
BLOCK_TIMEOUT_S = 240


@dataclass(frozen=True)
class Block:
    page: str
    line: int
    lang: str
    title: str | None
    code: str

    def where(self) -> str:
        return f"{self.page}:{self.line}"


def blocks_of(path: Path, name: str | None = None) -> list[Block]:
    text = path.read_text(encoding="utf-8")
    found = []
    for m in FENCE.finditer(text):
        title = TITLE.search(m.group(2))
        found.append(Block(name or path.name, text.count("\n", 0, m.start()) + 1, m.group(1),
                           title.group(1) if title else None, m.group(3)))
    return found


def run_blocks(blocks: list[Block], folder: Path) -> list[str]:
    """Run a page's blocks in order in ``folder`` up to the first that fails (the blocks after it
    build on it); what failed."""
    (folder / "scenarios").symlink_to(ROOT / "scenarios")
    env = {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}", "VIRTUAL_ENV": str(BIN.parent),
           "COLUMNS": "120", "NO_COLOR": "1"}
    env.pop("PYTEST_ADDOPTS", None)
    for block in blocks:
        if block.title:
            (folder / block.title).write_text(block.code, encoding="utf-8")
            continue
        if block.lang not in RUNNABLE:
            continue
        args = (["bash", "-euo", "pipefail", "-c", block.code] if block.lang == "bash"
                else [sys.executable, "-c", block.code])
        try:
            done = subprocess.run(args, cwd=folder, env=env, capture_output=True, text=True,
                                  timeout=BLOCK_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            return [f"{block.where()}: {block.lang} block ran over {BLOCK_TIMEOUT_S} s"]
        if done.returncode != 0:
            return [f"{block.where()}: {block.lang} block exited {done.returncode}\n"
                    f"--- block\n{block.code}--- stdout\n{done.stdout[-3000:]}--- stderr\n{done.stderr[-3000:]}"]
    return []


def pages() -> list[Path]:
    return sorted(DOCS.rglob("*.md"))


def page_params() -> list:
    params = []
    for path in pages():
        blocks = blocks_of(path)
        if not any(b.lang in RUNNABLE and not b.title for b in blocks):
            continue
        code = [b.code.replace("\\\n", " ") for b in blocks if b.lang in RUNNABLE and not b.title]
        marks = [pytest.mark.spark] if any(SPARK.search(c) for c in code) else []
        if any(BROKERS.search(c) or any("--network memory" not in run for run in RUN.findall(c)) for c in code):
            marks.append(pytest.mark.e2e)
        params.append(pytest.param(path, id=str(path.relative_to(DOCS)), marks=marks))
    return params


@pytest.mark.parametrize("path", page_params())
def test_the_examples_of_a_page_run(path: Path, tmp_path: Path):
    failures = run_blocks(blocks_of(path, str(path.relative_to(DOCS))), tmp_path)
    assert not failures, "\n\n".join(failures)


def test_every_fence_says_what_it_is():
    """A fence without a language, or with one this test does not know, would be code nobody
    runs: name it bash or python (run), or text (shown)."""
    unknown = [f"{b.where()}: ```{b.lang}" for p in pages() for b in blocks_of(p, str(p.relative_to(DOCS)))
               if b.lang not in RUNNABLE | SHOWN]
    assert not unknown, "\n".join(unknown)


def test_the_docs_have_examples_that_run():
    runnable = [b for p in pages() for b in blocks_of(p) if b.lang in RUNNABLE and not b.title]
    assert len(runnable) >= 8
    assert {"tutorial.md", "pytest.md"} <= {b.page for b in runnable}


def test_a_block_that_fails_fails_the_page(tmp_path: Path):
    page = tmp_path / "page.md"
    page.write_text("# A page\n\n```bash\necho fine\n```\n\n```text\nnot run: exit 1\n```\n\n"
                    "```python title=\"helper.py\"\nVALUE = 41\n```\n\n"
                    "```python\nimport helper\nassert helper.VALUE == 42, helper.VALUE\n```\n\n"
                    "```bash\ntouch not-reached\n```\n")
    folder = tmp_path / "run"
    folder.mkdir()
    failures = run_blocks(blocks_of(page), folder)
    assert [f.split("\n")[0] for f in failures] == ["page.md:15: python block exited 1"]
    assert "AssertionError: 41" in failures[0]
    assert (folder / "helper.py").read_text() == "VALUE = 41\n"
    assert not (folder / "not-reached").exists()


def test_a_command_that_fails_fails_its_block(tmp_path: Path):
    page = tmp_path / "page.md"
    page.write_text("```bash\njoynr-sim list no-such-folder/\n```\n")
    failures = run_blocks(blocks_of(page), tmp_path)
    assert [f.split("\n")[0] for f in failures] == ["page.md:1: bash block exited 2"]
    assert "no-such-folder" in failures[0]


def test_a_shell_block_stops_at_its_first_failing_command(tmp_path: Path):
    page = tmp_path / "page.md"
    page.write_text("```bash\nfalse\ntouch reached\n```\n")
    failures = run_blocks(blocks_of(page), tmp_path)
    assert len(failures) == 1 and not (tmp_path / "reached").exists()


def test_the_readme_is_short_and_keeps_the_commands():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 250
    assert "make demo" in readme and "make test" in readme and "## Tests" in readme
