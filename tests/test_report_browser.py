"""The report of a real run, opened in headless Chromium: a scenario that loops under
last-writer-wins is run with ``--report``, checked by the Spark checker, reported again
with the checker's verdicts, and the pages are driven as a person would use them.

Chromium is Debian's ``chromium`` (``make setup`` installs it), driven by Playwright; when
it is missing these tests fail, they never skip.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from playwright.sync_api import Browser, ConsoleMessage, Page, sync_playwright

pytestmark = [pytest.mark.e2e, pytest.mark.spark]  # the run starts brokers, the check Spark

ROOT = Path(__file__).resolve().parent.parent
CHROMIUM = Path("/usr/bin/chromium")
SCENARIO = "inprocess-provider-stale-global-entry"


def joynr_sim(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-m", "joynr_sim.cli", *args], cwd=ROOT, env=env, text=True,
                          capture_output=True, timeout=1800)


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> dict:
    runs = tmp_path_factory.mktemp("runs")
    ran = joynr_sim("run", f"scenarios/{SCENARIO}.yaml", "--policy", "last-writer-wins", "--out", str(runs),
                    "--report")
    assert ran.returncode == 1, ran.stderr  # the loop breaks the scenario's steps
    assert f"report: {runs / 'report' / 'index.html'}" in ran.stdout.replace("\n", "")
    checked = joynr_sim("check", str(runs / SCENARIO), "--check", "routing-loop")
    assert checked.returncode == 1, checked.stdout + checked.stderr
    reported = joynr_sim("report", str(runs))
    assert reported.returncode == 0, reported.stderr
    index = runs / "report" / "index.html"
    assert str(index) in reported.stdout.replace("\n", "")
    check = json.loads((runs / SCENARIO / "check" / "report.json").read_text())
    loop = next(c for c in check["checks"] if c["name"] == "routing-loop")["details"][0]
    return {"index": index, "page": runs / "report" / f"{SCENARIO}.html", "loop": loop}


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if not CHROMIUM.exists():
        pytest.fail(f"{CHROMIUM} is missing: run `make setup` (it runs apt-get install -y chromium)", pytrace=False)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=str(CHROMIUM))
        yield browser
        browser.close()


class Opened:
    def __init__(self, page: Page) -> None:
        self.page = page
        self.errors: list[str] = []
        page.on("console", self._console)
        page.on("pageerror", lambda exc: self.errors.append(f"page error: {exc}"))

    def _console(self, message: ConsoleMessage) -> None:
        if message.type in ("error", "warning"):
            self.errors.append(f"console {message.type}: {message.text}")

    def open(self, path: Path, fragment: str = "") -> Page:
        self.page.goto(path.as_uri() + fragment)
        if path.name != "index.html":
            self.page.wait_for_selector("body[data-plots]")  # every plot embedded, or failed
        return self.page


@pytest.fixture
def opened(browser: Browser) -> Iterator[Opened]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    yield Opened(context.new_page())
    context.close()


def test_the_index_leads_to_the_run_page_and_neither_logs_an_error(report, opened):
    page = opened.open(report["index"])
    row = page.locator("#runs tbody tr")
    assert row.count() == 1
    assert row.locator("td").nth(1).inner_text() == "failed"
    assert row.locator("td").nth(5).inner_text() == "1 violation"
    row.locator("a").first.click()
    page.wait_for_selector("body[data-plots]")
    assert page.evaluate("document.body.dataset.plots") == "ready"
    assert page.title().startswith(SCENARIO)
    assert opened.errors == []


def test_diagrams_and_plots_render_as_svg(report, opened):
    page = opened.open(report["page"])
    for name in ("activity", "latency", "drops", "links", "timeline"):
        marks = page.locator(f"#plot-{name} svg .mark-rect, #plot-{name} svg .mark-symbol")
        assert marks.count() > 0, name
        box = page.locator(f"#plot-{name} svg").first.bounding_box()
        assert box and box["width"] > 100 and box["height"] > 50, name
    diagram = page.locator("#failing-diagrams svg.seq").first
    assert diagram.locator("line.hop, path.hop").count() >= 32  # the loop up to the hop limit
    assert "dropped: hop-limit" in diagram.text_content()
    assert opened.errors == []


def test_the_search_finds_a_message_and_draws_it(report, opened):
    page = opened.open(report["page"])
    rows = page.locator("#msg-table tbody tr")
    total = rows.count()
    delivered = page.locator("#msg-table tbody tr", has_text="delivered").first.get_attribute("data-msg")
    page.fill("#msg-search", delivered[:13])
    visible = page.locator("#msg-table tbody tr:visible")
    assert 1 <= visible.count() < total
    assert all(delivered[:13] in r.get_attribute("data-msg") for r in visible.all())
    assert page.inner_text("#msg-count") == f"{visible.count()} of {total}"
    visible.first.click()
    viewer = page.locator("#viewer")
    viewer.locator("svg.seq").wait_for()
    assert delivered in viewer.locator("svg.seq title").first.text_content()
    assert "delivered to" in viewer.text_content()
    assert opened.errors == []


def test_a_violation_links_to_its_message_diagram_and_trace_slice(report, opened):
    msg = report["loop"]["details"]["msg"]
    page = opened.open(report["page"])
    violation = page.locator("article.violation")
    assert violation.count() == 1 and msg in violation.text_content()
    viewer = page.locator("#viewer")
    assert viewer.is_hidden()
    violation.locator("a.diagram-link").click()
    viewer.locator("svg.seq").wait_for()
    assert msg in viewer.locator("svg.seq title").text_content()
    assert "dropped: hop-limit" in viewer.text_content()
    violation.locator("a.slice-link").click()
    slice_rows = violation.locator("details.slice tbody tr")
    slice_rows.first.wait_for()
    assert slice_rows.count() == len(report["loop"]["events"])
    assert opened.errors == []


def test_a_violation_links_to_its_participants_routing_entries(report, opened):
    participant = report["loop"]["details"]["to"]
    page = opened.open(report["page"])
    page.locator("article.violation a.timeline-link").click()
    page.wait_for_function("p => document.getElementById('participant').value === p", arg=participant)
    changes = page.locator("#rt-changes tbody tr")
    assert changes.count() > 1
    # last-writer-wins took the GCD's entry naming cc1's own topic: the loop's cause
    assert page.locator("#rt-changes tbody tr", has_text="Mqtt gbid1/cc1").count() > 0
    assert page.locator("#plot-timeline svg .mark-rect path, #plot-timeline svg .mark-rect rect").count() > 0
    assert opened.errors == []
