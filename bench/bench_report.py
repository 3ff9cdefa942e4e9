"""Run reports of the scenario library: page size and the time a page takes to render in
headless Chromium (Debian's, as the report tests use it), from navigation until every plot
is drawn; also the time to write the pages. Quick: three scenarios instead of the library."""

from __future__ import annotations

import io
import statistics
import tempfile
import time
from pathlib import Path

from rich.console import Console

from joynr_sim.report import write_report
from joynr_sim.scenario.console import run_scenarios

LIBRARY = Path(__file__).resolve().parent.parent / "scenarios"
QUICK = ["cc-crash-with-requests-in-flight", "gcd-lc-provider-in-all-backends", "websocket-provider-stale-global-entry"]
CHROMIUM = "/usr/bin/chromium"


def render_seconds(pages: list[Path]) -> list[float]:
    from playwright.sync_api import sync_playwright

    seconds = []
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM)
        for page_path in pages:
            page = browser.new_page(viewport={"width": 1280, "height": 900})
            started = time.perf_counter()
            page.goto(page_path.as_uri())
            page.wait_for_selector("body[data-plots=ready]")
            seconds.append(time.perf_counter() - started)
            page.close()
        browser.close()
    return seconds


def run(quick: bool) -> list[dict]:
    paths = [LIBRARY / f"{name}.yaml" for name in QUICK] if quick else [LIBRARY]
    with tempfile.TemporaryDirectory(prefix="bench-report-") as tmp:
        out = Path(tmp) / "runs"
        status = run_scenarios(paths, out=out, broker=None, policy=None, seed=1, gcd_store=None,
                               console=Console(file=io.StringIO()))
        if status not in (0, 1):
            raise RuntimeError(f"the scenario runs could not be carried out (exit {status})")
        started = time.perf_counter()
        written = write_report([out], out=out / "report")
        write_s = time.perf_counter() - started
        sizes = [p.stat().st_size / 1e6 for p in written.pages]
        renders = render_seconds(written.pages)
    n = len(written.pages)
    group = "report (quick)" if quick else "report (scenario library)"
    return [
        {"group": group, "name": "pages", "value": n, "unit": "runs"},
        {"group": group, "name": "page size, largest", "value": max(sizes), "unit": "MB", "limit": 5},
        {"group": group, "name": "page size, median", "value": statistics.median(sizes), "unit": "MB"},
        {"group": group, "name": "render in Chromium, slowest", "value": max(renders), "unit": "s", "limit": 2},
        {"group": group, "name": "render in Chromium, median", "value": statistics.median(renders), "unit": "s"},
        {"group": group, "name": "write, per run (vega bundle built once)", "value": write_s / n, "unit": "s"},
    ]
