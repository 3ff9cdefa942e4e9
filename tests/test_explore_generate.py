"""The explore generator and shrinker, without running anything."""

from __future__ import annotations

import random

import yaml
from hypothesis import given, settings

from joynr_sim.explore.generate import Generator, StepKind, scenarios
from joynr_sim.explore.kinds import schema_knows
from joynr_sim.explore.shrink import consistent, shrink
from joynr_sim.scenario.loader import parse_scenario


def loads(doc: dict) -> bool:
    parse_scenario(yaml.safe_dump(doc, sort_keys=False))  # raises ScenarioError with the step named
    return True


def test_the_same_seed_gives_the_same_scenario_and_another_seed_another() -> None:
    gen = Generator()
    assert gen.scenario(random.Random(7), "a") == gen.scenario(random.Random(7), "a")
    assert gen.scenario(random.Random(7), "a") != gen.scenario(random.Random(8), "a")


@settings(max_examples=150, deadline=None)
@given(scenarios())
def test_every_generated_scenario_loads(doc) -> None:
    assert loads(doc)
    assert 6 <= len(doc["steps"]) <= 24


def test_generated_schedules_use_every_kind_of_step() -> None:
    seen, subscriptions, partitions = set(), set(), set()
    for seed in range(200):
        for step in Generator().scenario(random.Random(seed), "s")["steps"]:
            seen |= set(step)
            if "subscribe" in step:
                args = step["subscribe"]
                subscriptions.add(args.get("attribute") or args["broadcast"])
                partitions.add(tuple(args.get("partitions", ())))
    assert seen >= {"register", "unregister", "proxy", "call", "one_way", "crash", "stop", "start",
                    "restart", "crash_broker", "restart_broker", "advance",
                    "subscribe", "unsubscribe", "publish", "expect_publications",
                    "partition", "blackhole", "delay", "heal"}
    # attribute and selective broadcast subscriptions, multicast receivers with and without partitions
    assert subscriptions == {"value", "incremented", "reachedMultiple"} and len(partitions) > 2
    assert ("clock_skew" in seen) == schema_knows("clock_skew")


def test_a_step_kind_switches_on_when_the_scenario_format_has_it(monkeypatch) -> None:
    from joynr_sim.explore import kinds

    steps = kinds.schema()["properties"]["steps"]["items"]["properties"]
    assert schema_knows("register") and not schema_knows("teleport")
    monkeypatch.setitem(steps, "teleport", {"type": "object"})
    assert schema_knows("teleport")


def test_a_team_adds_its_own_step_kind() -> None:
    mine = StepKind("mine", 50, lambda rng, w: {"advance": 1})
    doc = Generator(extra_kinds=[mine]).scenario(random.Random(1), "s")
    assert sum(step == {"advance": 1} for step in doc["steps"]) > len(doc["steps"]) // 3
    assert loads(doc)


def _conflict(doc: dict) -> bool:
    """A stand-in for a checker: 'fails' when a fixed id was registered twice and then called."""
    regs = [s["register"] for s in doc["steps"] if "register" in s and "participant_id" in s["register"]]
    ids = [r["participant_id"] for r in regs]
    called = any("call" in s for s in doc["steps"])
    return called and any(ids.count(i) > 1 for i in ids)


def test_a_failing_schedule_shrinks_to_what_matters_and_still_loads() -> None:
    gen = Generator(min_steps=20, max_steps=24)
    doc = next(d for d in (gen.scenario(random.Random(s), "s") for s in range(2000)) if _conflict(d))
    tried = []

    def still_fails(candidate: dict) -> bool:
        tried.append(candidate)
        return loads(candidate) and _conflict(candidate)

    small, stats = shrink(doc, still_fails)
    assert _conflict(small) and loads(small)
    # two registers of one id, a proxy, a call: nothing else is needed
    assert len(small["steps"]) <= 4, small["steps"]
    assert len(small["runtimes"]) <= len(doc["runtimes"])
    assert stats.kept >= 1 and stats.history[-1] == len(small["steps"])


def test_a_schedule_that_does_not_fail_is_left_as_it_was() -> None:
    doc = Generator().scenario(random.Random(3), "s")
    small, stats = shrink(doc, lambda d: False)
    assert small == doc and stats.kept == 0


def test_dropping_a_step_drops_the_steps_that_named_what_it_made() -> None:
    doc = {"name": "s", "reproduces": {"seed": "explore", "scenario": "x"}, "backends": ["gbid1"],
           "runtimes": [{"kind": "cluster-controller", "id": "cc1"}],
           "steps": [{"proxy": {"runtime": "cc1", "name": "px1", "domain": "d", "interface": "joynrsim/Echo"}},
                     {"call": {"proxy": "px1", "method": "echo"}}, {"advance": 5}]}
    assert consistent({**doc, "steps": doc["steps"][1:]})["steps"] == [{"advance": 5}]


@settings(max_examples=100, deadline=None)
@given(scenarios())
def test_a_generated_schedule_already_fits_so_consistent_keeps_every_step(doc) -> None:
    assert consistent(doc) == doc


def _topology(*steps: dict) -> dict:
    return {"name": "s", "reproduces": {"seed": "explore", "scenario": "x"}, "backends": ["gbid1", "gbid2"],
            "runtimes": [{"kind": "cluster-controller", "id": "cc1"}, {"kind": "cluster-controller", "id": "cc2"},
                         {"kind": "libjoynr", "id": "app1a", "cc": "cc1"}],
            "steps": list(steps)}


def _reg(runtime: str, name: str, **more) -> dict:
    return {"register": {"runtime": runtime, "provider": name, "domain": "dom", "interface": "joynrsim/Echo",
                         **more}}


def test_steps_that_no_longer_fit_the_runtimes_states_go() -> None:
    doc = _topology({"crash": "cc1"}, {"start": "cc1"}, _reg("app1a", "p1"), {"crash_broker": "gbid1"},
                    {"restart_broker": "gbid1"})
    # without the crash, cc1 runs: its start goes; without the broker's crash, its restart goes
    assert consistent({**doc, "steps": [doc["steps"][n] for n in (1, 2, 4)]})["steps"] == [_reg("app1a", "p1")]
    # while cc1 is down, nothing registers in the libjoynr runtime behind it
    assert consistent({**doc, "steps": [doc["steps"][0], doc["steps"][2]]})["steps"] == [{"crash": "cc1"}]
    # a call on a proxy built before its runtime restarted does not fit either
    px = {"proxy": {"runtime": "cc2", "name": "px", "domain": "dom", "interface": "joynrsim/Echo"}}
    call = {"call": {"proxy": "px", "method": "echo", "args": ["a"]}}
    assert consistent(_topology(px, {"restart": "cc2"}, call, {"advance": 5}))["steps"] == [
        px, {"restart": "cc2"}, {"advance": 5}]


def _overwrite(doc: dict) -> bool:
    """A stand-in for last-writer-wins judged by the overwrite check: one fixed id registered
    in two runtimes."""
    holders: dict[str, set] = {}
    for s in doc["steps"]:
        if "register" in s and "participant_id" in s["register"]:
            holders.setdefault(s["register"]["participant_id"], set()).add(s["register"]["runtime"])
    return any(len(h) > 1 for h in holders.values())


def test_a_failing_schedule_loses_waits_unused_runtimes_and_backends_and_no_candidate_runs_twice() -> None:
    gen = Generator(min_steps=20, max_steps=24)
    doc = next(d for d in (gen.scenario(random.Random(s), "s") for s in range(2000))
               if _overwrite(d) and len(d["backends"]) == 3 and len(d["runtimes"]) >= 5
               and any("advance" in s for s in d["steps"]))
    tried: list[str] = []

    def still_fails(candidate: dict) -> bool:
        tried.append(yaml.safe_dump(candidate))
        return loads(candidate) and _overwrite(candidate)

    small, stats = shrink(doc, still_fails, max_tries=100)
    assert len(small["steps"]) == 2 and _overwrite(small), small["steps"]
    named = {s["register"]["runtime"] for s in small["steps"]}
    ccs = {r.get("cc", r["id"]) for r in doc["runtimes"] if r["id"] in named}
    assert {r["id"] for r in small["runtimes"]} == named | ccs  # the holders and their controllers
    assert len(small["backends"]) == 1
    assert len(tried) == len(set(tried)) == stats.tried <= 100


def test_pairs_go_when_neither_step_alone_may() -> None:
    """Two registrations that only together make a difference: each alone keeps the failure
    away, so only a pair removal finds the smaller schedule."""
    doc = _topology(_reg("cc1", "p1", participant_id="f"), _reg("cc2", "p2"), _reg("cc2", "p3", participant_id="f"),
                    _reg("cc1", "p4"))

    def still_fails(candidate: dict) -> bool:
        generated = sum("participant_id" not in s["register"] for s in candidate["steps"])
        return _overwrite(candidate) and generated != 1

    small, _ = shrink(doc, still_fails, max_tries=60)
    assert [s["register"]["provider"] for s in small["steps"]] == ["p1", "p3"]
