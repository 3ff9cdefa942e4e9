"""The multicast check on hand-written traces (a run with each violation next to a clean
one), and on real runs of the library's multicast loop scenario: clean with joynr's cluster
controllers, the echo found under the re-publishing rule set."""

from __future__ import annotations

from pathlib import Path

import pytest

from analytics_helpers import RunBuilder, check, keys

LIBRARY = Path(__file__).resolve().parent.parent / "scenarios"
LOOP = "multicast-loop-under-republishing.yaml"


def multicast(b: RunBuilder, rt: str, ev: str, ts: int, msg: str, hops: int, via: str = "mqtt", **fields) -> dict:
    extra = {"gbid": "g1", "target": "g1/joynr-sim-multicast/prov/incremented"} if ev == "msg.out" else {}
    return b.msg(rt, ev, ts, msg, "m", hops=hops, via=via, to="prov/incremented", **{**extra, **fields})


def test_multicast_loops_duplicates_and_invisible_publications(spark, tmp_path):
    bad = RunBuilder("bad")
    # echoed: cc-2 publishes what it received, and gets it back
    bad.add("lib-1", "mc.fire", 5, multicast="prov/incremented", provider="prov", msg="m1", visible=True)
    multicast(bad, "cc-1", "msg.out", 10, "m1", 2)
    multicast(bad, "cc-2", "msg.in", 11, "m1", 2)
    multicast(bad, "cc-2", "msg.out", 12, "m1", 3)
    multicast(bad, "cc-2", "msg.in", 13, "m1", 3)
    # one publication handed twice to one subscription
    bad.add("lib-2", "sub.publication", 20, sid="s1", msg="p1", outcome="delivered")
    bad.add("lib-2", "sub.publication", 21, sid="s1", msg="p1", outcome="delivered")
    # a provider that is not globally visible, its multicast published all the same
    bad.add("lib-1", "mc.fire", 30, multicast="local/incremented", provider="local", msg="m2", visible=False)
    multicast(bad, "cc-1", "msg.out", 31, "m2", 2)

    clean = RunBuilder("clean")
    clean.add("lib-1", "mc.fire", 5, multicast="prov/incremented", provider="prov", msg="m1", visible=True)
    multicast(clean, "cc-1", "msg.out", 10, "m1", 2)
    multicast(clean, "cc-1", "msg.out", 10, "m1", 2, resent=True)  # a re-send after a resume
    multicast(clean, "cc-2", "msg.in", 11, "m1", 2)
    multicast(clean, "cc-3", "msg.in", 11, "m1", 2)
    multicast(clean, "cc-2", "msg.out", 12, "m1", 3, via="ws", target="lib-2", gbid=None)
    # the same multicast to two subscriptions, and a late copy after an unsubscribe
    clean.add("lib-2", "sub.publication", 20, sid="s1", msg="m1", outcome="delivered")
    clean.add("lib-2", "sub.publication", 20, sid="s2", msg="m1", outcome="delivered")
    clean.add("lib-2", "sub.publication", 22, sid="s1", msg="m1", outcome="late")
    # a local provider's multicast stays inside its cluster controller
    clean.add("lib-1", "mc.fire", 30, multicast="local/incremented", provider="local", msg="m2", visible=False)
    multicast(clean, "cc-1", "msg.out", 31, "m2", 2, via="ws", target="lib-2", gbid=None)

    result = check(spark, tmp_path, [bad, clean], "multicast")
    assert keys(result) == {"bad/m1/cc-2", "bad/lib-2/s1/p1", "bad/m2"}
    kinds = {v.key: v.kind for v in result.violations}
    assert kinds == {"bad/m1/cc-2": "multicast-loop", "bad/lib-2/s1/p1": "duplicate-publication",
                     "bad/m2": "invisible-global-multicast"}
    loop = next(v for v in result.violations if v.kind == "multicast-loop")
    assert loop.details["publisher"] == "cc-2" and loop.details["returns"] == 1
    assert "came back to it 1 times" in loop.summary


@pytest.mark.e2e
async def test_the_echo_of_republishing_cluster_controllers_is_found(spark, tmp_path):
    from joynr_sim.scenario import load_scenario
    from joynr_sim.scenario.checking import violations_by_run
    from joynr_sim.scenario.runner import run_scenario

    text = (LIBRARY / LOOP).read_text()
    guarded = [f"  - {{kind: cluster-controller, id: {cc}}}\n" for cc in ("cc2", "cc3")]
    assert all(line in text for line in guarded)
    for line in guarded:
        text = text.replace(line, line[:-2] + ", republish_received_multicasts: true}\n")
    echoing = tmp_path / "echoing.yaml"
    echoing.write_text(text)
    fixed = await run_scenario(load_scenario(LIBRARY / LOOP), tmp_path / "fixed")
    echoed = await run_scenario(load_scenario(echoing), tmp_path / "echoed")
    assert fixed.passed, fixed.failed_step
    found = violations_by_run([fixed.run_dir, echoed.run_dir])
    assert found.get(fixed.run_id, []) == []
    loops = [v for v in found.get(echoed.run_id, []) if v.startswith("multicast:")]
    assert loops and all("came back" in v for v in loops), found
