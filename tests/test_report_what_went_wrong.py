"""The report answers "what went wrong", on real runs opened in headless Chromium: a run
whose checker found a violation (``run --check --report``: no second check), a policy
matrix's folder (``run --policy all --report`` and ``report OUT``), and a passed run whose
broker crashed with calls to make (every loss explained by the crash).

Chromium is Debian's ``chromium``, driven by Playwright, as in test_report_browser.py; when
it is missing these tests fail, they never skip.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
from playwright.sync_api import Browser, Page

import test_report_browser
from joynr_sim.report.plots import ENTRY_TYPES, OUTCOMES
from test_report_browser import Opened, joynr_sim

pytestmark = [pytest.mark.e2e]  # real runs of joynr runtimes

STALE = "inprocess-provider-stale-global-entry"  # guards last-writer-wins, among others
CRASH = "broker-outage-with-calls"


browser = test_report_browser.browser  # one headless Chromium per module, as there


def open_page(browser: Browser, width: int = 1280) -> Iterator[Opened]:
    context = browser.new_context(viewport={"width": width, "height": 900})
    yield Opened(context.new_page())
    context.close()


@pytest.fixture
def opened(browser: Browser) -> Iterator[Opened]:
    yield from open_page(browser)


@pytest.fixture
def narrow(browser: Browser) -> Iterator[Opened]:
    yield from open_page(browser, 800)


@pytest.fixture(scope="module")
def violated(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """last-writer-wins takes the GCD's entry over the provider's own: the checker's
    overwrite-violation, reported by the same command that ran and checked it."""
    out = tmp_path_factory.mktemp("violated")
    ran = joynr_sim("run", f"scenarios/{STALE}.yaml", "--policy", "last-writer-wins", "--network", "memory",
                    "--out", str(out), "--check", "--report")
    assert ran.returncode == 1, ran.stdout + ran.stderr
    assert "overwrite-violation" in ran.stdout
    report = json.loads((out / STALE / "check" / "report.json").read_text())
    details = [d for c in report["checks"] for d in c["details"]]
    return {"page": out / "report" / f"{STALE}.html", "details": details, "report": report}


@pytest.fixture(scope="module")
def matrix(tmp_path_factory: pytest.TempPathFactory) -> dict:
    out = tmp_path_factory.mktemp("matrix")
    ran = joynr_sim("run", f"scenarios/{STALE}.yaml", "--policy", "all", "--network", "memory", "--out", str(out),
                    "--report")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    again = joynr_sim("report", str(out), "--out", str(out / "again"))
    assert again.returncode == 0, again.stderr
    return {"out": out, "matrix": json.loads((out / "matrix.json").read_text())}


# The library's broker-crash-with-calls-in-flight loses calls only when the restarted broker
# and the sends race one way: here the broker stays down while the calls are sent, so each
# is lost, and the trace explains each by the outage, on every run.
OUTAGE = f"""name: {CRASH}
description: The broker of gbid1 crashes and stays down while the consumer calls the provider.
reproduces:
  seed: 004_b96328aa0d55de66.txt
  scenario: >-
    Link recovery: after a connection loss the endpoints re-establish their links and the
    unsettled deliveries are resumed or accounted for
backends: [gbid1]
runtimes:
  - {{kind: cluster-controller, id: cc1}}
  - {{kind: libjoynr, id: app1, cc: cc1}}
  - {{kind: cluster-controller, id: cc2}}
  - {{kind: libjoynr, id: consumer, cc: cc2}}
steps:
  - register: {{runtime: app1, provider: echo, domain: dom, interface: joynrsim/Echo,
               participant_id: crash-echo, scope: GLOBAL}}
  - proxy: {{runtime: consumer, name: px, domain: dom, interface: joynrsim/Echo, scope: GLOBAL_ONLY}}
  - call: {{proxy: px, method: echo, args: [before], expect: {{result: before}}}}
  - crash_broker: gbid1
  - start_calls: {{name: outage, proxy: px, method: echo, args: [lost], count: 3, interval_ms: 20, ttl_ms: 500}}
  - await_calls: {{name: outage, expect: {{result: lost}}, drops: recorded}}
"""


@pytest.fixture(scope="module")
def crashed(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """A passed run whose losses the broker's crash explains."""
    out = tmp_path_factory.mktemp("crashed")
    scenario = out / f"{CRASH}.yaml"
    scenario.write_text(OUTAGE)
    ran = joynr_sim("run", str(scenario), "--network", "memory", "--out", str(out / "runs"), "--report")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    return {"page": out / "runs" / "report" / f"{CRASH}.html", "run": out / "runs" / CRASH}


def report_data(page: Page) -> dict:
    return json.loads(page.locator("#report-data").text_content())


# -- a run with a violation ---------------------------------------------------------------

@pytest.mark.spark  # run --check
def test_run_check_keeps_the_verdicts_the_report_shows(violated, opened):
    assert violated["details"], "the checker found the violation"
    page = opened.open(violated["page"])
    assert "Not checked" not in page.locator("#checks").inner_text()
    articles = page.locator("article.violation")
    assert articles.count() == len(violated["details"])
    assert violated["details"][0]["summary"] in articles.first.inner_text()
    assert opened.errors == []


@pytest.mark.spark  # run --check
def test_the_routing_view_opens_on_the_violation_and_rings_its_put(violated, opened):
    page = opened.open(violated["page"])
    data = report_data(page)
    participant = data["routing"]["first"]
    assert page.locator("#participant").input_value() == participant
    assert "first violation" in page.locator("#participant-note").inner_text()
    referred = {(e["rt"], e["seq"]) for d in violated["details"] for e in d["events"]}
    violating = [c for c in data["routing"]["changes"] if c["violating"]]
    assert violating and all((c["rt"], c["seq"]) in referred for c in violating)
    assert participant in {c["p"] for c in violating}
    assert page.locator("#rt-changes tbody tr.violating").count() >= 1
    ring = page.locator('#plot-timeline svg path[stroke="#d50000"][stroke-width="3"]')
    assert ring.count() == sum(c["p"] == participant for c in violating)
    assert opened.errors == []


# -- the policy matrix --------------------------------------------------------------------

def test_the_matrix_index_shows_expected_and_actual_per_rule_set(matrix, opened):
    page = opened.open(matrix["out"] / "report" / "index.html")
    (scenario,) = matrix["matrix"]["scenarios"]
    cells = page.locator("#matrix tbody td.cell")
    assert cells.count() == len(scenario["cells"])
    for column, cell in scenario["cells"].items():
        shown = page.locator(f'#matrix td.cell[data-column="{column}"]')
        assert shown.get_attribute("data-expected") == cell["expected"], column
        assert shown.get_attribute("data-outcome") == cell["outcome"], column
    guarded = page.locator('#matrix td.cell[data-column="last-writer-wins"]')
    assert "as-expected" in guarded.get_attribute("class") and "bad" not in guarded.get_attribute("class")
    assert guarded.inner_text().split() == ["must", "fail", "failed:", "expected"]
    own = page.locator(f'#matrix td.cell[data-column="{scenario["policy"]}"]')
    assert own.inner_text().split() == ["must", "hold", "held"]
    assert page.locator("#runs tbody tr.expected").count() == sum(
        c["expected"] == "fail" and c["outcome"] == "failed" for c in scenario["cells"].values())
    assert opened.errors == []


def test_a_run_that_failed_as_its_guard_expects_is_marked_expected(matrix, opened):
    page = opened.open(matrix["out"] / "report" / "index.html")
    page.locator('#matrix td.cell[data-column="last-writer-wins"] a').click()
    page.wait_for_selector("body[data-plots]")
    assert page.locator("#outcome").inner_text() == "failed"
    assert page.locator("#expected").inner_text() == "expected"
    assert "guards against last-writer-wins" in page.locator("#expectation").inner_text()
    red = page.evaluate("getComputedStyle(document.getElementById('outcome')).backgroundColor")
    assert red != "rgb(198, 40, 40)"  # not the red of a run that went wrong
    assert opened.errors == []


def test_report_reads_a_matrix_folder(matrix):
    again = (matrix["out"] / "again" / "index.html").read_text()
    assert 'id="matrix"' in again and again.count('class="badge expected"') >= 2


# -- a passed run with a broker crash -----------------------------------------------------

def test_losses_the_broker_crash_explains_say_so(crashed, opened):
    page = opened.open(crashed["page"])
    data = report_data(page)
    assert data["failing"], "calls were sent while the broker was down"
    blocks = page.locator("#failing-diagrams .conversation")
    assert blocks.count() == len(data["failing"])
    for i in range(blocks.count()):
        text = blocks.nth(i).text_content()
        assert "explained (broker-" in text and "broker of gbid1 crashed at +" in text
        assert blocks.nth(i).locator(".hop.bad").count() == 0  # no red "never received"
    assert page.locator("#explained-count").inner_text().startswith(f"{len(data['failing'])} of ")
    assert opened.errors == []


def test_proxies_and_providers_go_by_their_scenario_names(crashed, opened):
    page = opened.open(crashed["page"])
    rows = page.evaluate("""() => [...document.querySelectorAll('#msg-table tbody tr')]
      .map((tr) => [...tr.querySelectorAll('td')].map((td) => td.textContent))""")
    # type, from, to: every call of px and every reply of echo, by name; no participant id
    exchanged = {(r[1], r[3], r[4]) for r in rows if "echo" in (r[3], r[4]) or "px" in (r[3], r[4])}
    assert exchanged == {("rq", "px", "echo"), ("rp", "echo", "px")}
    head = page.locator("#failing-diagrams svg.seq .msg-head").first.text_content()
    assert "px → echo" in head
    assert opened.errors == []


def test_sequence_diagrams_hold_their_whole_header(crashed, opened):
    page = opened.open(crashed["page"])
    clipped = page.evaluate("""() => {
      const out = [];
      for (const svg of document.querySelectorAll('svg.seq')) {
        const box = svg.getBoundingClientRect();
        for (const t of svg.querySelectorAll('text')) {
          const r = t.getBoundingClientRect();
          if (r.left < box.left - 0.5 || r.right > box.right + 0.5 || r.top < box.top - 0.5) out.push(t.textContent);
        }
      }
      return out; }""")
    assert page.locator("svg.seq").count() > 0 and clipped == []


TICKS = """() => [...document.querySelectorAll('#plot-timeline svg .role-axis-label text')]
  .map((e) => e.textContent.trim()).filter((t) => /^[0-9]+$/.test(t)).map(Number)"""  # the time axis's


def test_the_timeline_zooms_to_the_changes_and_marks_steps_and_faults(crashed, opened):
    page = opened.open(crashed["page"])
    data = report_data(page)
    zooms = next(p["value"] for p in data["plots"]["timeline"]["params"] if p["name"] == "zooms")
    end = max(c["t"] for c in data["routing"]["changes"])
    for participant in (data["routing"]["first"], min(zooms, key=lambda p: zooms[p][1])):
        page.fill("#participant", participant)
        page.dispatch_event("#participant", "change")
        lo, hi = zooms[participant]
        times = [c["t"] for c in data["routing"]["changes"] if c["p"] == participant]
        assert lo <= min(times) and max(times) <= hi < end  # its own changes, not the whole run
        page.wait_for_function(f"([lo, hi]) => {{ const t = ({TICKS})(); "
                               "return t.length > 1 && Math.min(...t) >= lo && Math.max(...t) <= hi; }", arg=[lo, hi])
    steps = json.loads((crashed["run"] / "run.json").read_text())["steps"]
    files = (crashed["run"] / "trace").glob("*.ndjson")
    events = [json.loads(line) for f in files for line in f.read_text().splitlines()]
    faults = [e for e in events if e["ev"] in ("life.crash", "life.restart")]
    assert len(faults) == 1  # the broker's crash
    # the rules the data draws (role-mark), not the axes' ticks and grid
    assert page.locator("#plot-timeline svg .mark-rule.role-mark line").count() == len(steps) + len(faults)
    labels = page.locator("#plot-timeline svg .mark-text.role-mark text").all_text_contents()
    assert labels == ["crash"]  # the fault is named on the axis; the steps say theirs on hover
    assert opened.errors == []


def _lab(colour: str) -> tuple[float, float, float]:
    """CIE L*a*b* of a #rrggbb colour (D65), where a distance of about 2 is barely seen."""
    def linear(c: float) -> float:
        return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4

    r, g, b = (linear(int(colour[i:i + 2], 16) / 255) for i in (1, 3, 5))
    xyz = (0.4124 * r + 0.3576 * g + 0.1805 * b) / 0.95047, 0.2126 * r + 0.7152 * g + 0.0722 * b, \
        (0.0193 * r + 0.1192 * g + 0.9505 * b) / 1.08883
    f = [t ** (1 / 3) if t > 0.008856 else 7.787 * t + 16 / 116 for t in xyz]
    return 116 * f[1] - 16, 500 * (f[0] - f[1]), 200 * (f[1] - f[2])


def _apart(a: str, b: str) -> float:
    return sum((x - y) ** 2 for x, y in zip(_lab(a), _lab(b))) ** 0.5


def test_outcomes_and_address_types_never_share_a_colour(crashed, opened):
    # not only unequal: no outcome is a shade of an address type (removed was WebSocket's orange)
    assert min(_apart(o, t) for o in OUTCOMES.values() for t in ENTRY_TYPES.values()) > 25
    page = opened.open(crashed["page"])
    fills = page.evaluate("""() => {
      const get = (sel) => [...document.querySelectorAll(`#plot-timeline svg ${sel}`)]
        .map((e) => (e.getAttribute('fill') || '').toLowerCase());
      return {bars: get('.mark-rect.role-mark path'), points: get('.mark-symbol.role-mark path')}; }""")
    bars = {f for f in fills["bars"] if f}
    points = {f for f in fills["points"] if f and f not in ("none", "transparent")}
    assert bars and points and min(_apart(b, p) for b in bars for p in points if p.startswith("#")) > 25


def test_the_page_works_800_pixels_wide(crashed, narrow):
    page = narrow.open(crashed["page"])
    assert page.evaluate("document.body.dataset.plots") == "ready"
    assert page.evaluate("document.documentElement.scrollWidth") <= 800
    for plot in page.locator("[data-plot] svg.marks").all():
        box = plot.bounding_box()
        assert box and box["x"] >= 0 and box["x"] + box["width"] <= 800
    assert narrow.errors == []


def test_the_matrix_index_works_800_pixels_wide(matrix, narrow):
    page = narrow.open(matrix["out"] / "report" / "index.html")
    assert page.evaluate("document.documentElement.scrollWidth") <= 800  # the grid scrolls in its own box
    first = page.locator("#matrix tbody td").first.bounding_box()
    assert first and first["x"] >= 0 and first["x"] + first["width"] <= 800
    assert narrow.errors == []
