"""The synthetic generator's planted violations are exactly what the checker reports."""

from __future__ import annotations

import json

from analytics.inputs import find_runs
from analytics.runner import check_runs
from analytics.synthetic import CHECK_NAMES, generate


def test_planted_violations_are_found_and_nothing_else(spark, tmp_path):
    key = generate(tmp_path / "runs", events=4000, runs=2, workers=1)
    assert key["events"] >= 4000
    assert all(key["planted"][name] for name in CHECK_NAMES)
    assert json.loads((tmp_path / "runs" / "answer_key.json").read_text()) == key
    # what real runs have and the checks must not mistake for a violation
    text = "".join(p.read_text() for p in (tmp_path / "runs").glob("*/trace/*.ndjson"))
    # every runtime and broker at the end, and the broker stop that kept the sessions, per run
    assert text.count('"ev":"life.stop"') == 2 * (16 + 1)
    assert '"msg":"unsub' in text  # sent before its receiver subscribed again: explained
    assert '"reason":"no-connection"' in text and '"reason":"duplicate"' in text
    assert '"via":"inprocess"' in text  # the self-hairpins' last step
    stage = tmp_path / "stage"
    stage.mkdir()
    outcome = check_runs(spark, find_runs([str(tmp_path / "runs")]), stage)
    assert outcome.stats.events == key["events"]
    found = {r.name: sorted(v.key for v in r.violations) for r in outcome.results}
    assert found == key["planted"]
