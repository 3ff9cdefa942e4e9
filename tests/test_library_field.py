"""The field scenario of the libjoynr restart with messages in flight: the fixed runtime
(the library's) is clean under the checker; the unfixed one (``route_back_to_parent``, as
libjoynr before joynr 1.17.3 / 1.18.1) sends what came from its cluster controller back to
it, and the checker reports the loop cc1 -> app1 -> cc1."""

from __future__ import annotations

from pathlib import Path

import pytest

from joynr_sim.scenario import load_scenario
from joynr_sim.scenario.checking import violations_by_run
from joynr_sim.scenario.runner import run_scenario

pytestmark = pytest.mark.e2e  # simulated runs, then the checker (spark: by its fixture)

LIBRARY = Path(__file__).resolve().parent.parent / "scenarios"
FIELD = "libjoynr-restart-with-messages-in-flight.yaml"


async def test_unfixed_libjoynr_loops_and_the_checker_finds_it(spark, tmp_path):
    text = (LIBRARY / FIELD).read_text()
    fixed_app = "  - {kind: libjoynr, id: app1, cc: cc1}\n"
    assert fixed_app in text
    unfixed = tmp_path / "unfixed.yaml"
    unfixed.write_text(text.replace(fixed_app, "  - {kind: libjoynr, id: app1, cc: cc1, route_back_to_parent: true}\n"))
    fixed = await run_scenario(load_scenario(LIBRARY / FIELD), tmp_path / "fixed")
    looped = await run_scenario(load_scenario(unfixed), tmp_path / "unfixed")
    assert fixed.passed, fixed.failed_step
    found = violations_by_run([fixed.run_dir, looped.run_dir])
    assert found.get(fixed.run_id, []) == []
    loops = [v for v in found.get(looped.run_id, []) if v.startswith("routing-loop:")]
    assert loops and all("cc1 -> app1 -> cc1" in v for v in loops), found
