"""The shrinker's passes judged in batches: the first candidate of a pass that still fails
is the one a one-at-a-time walk finds, whatever the batch size; and the generated step
kinds the shrinker must keep valid (subscriptions, link faults, clock skews)."""

from __future__ import annotations

import random

import pytest
import yaml

from joynr_sim.explore.fit import checks_something, consistent, with_a_check
from joynr_sim.explore.generate import Generator
from joynr_sim.explore.shrink import shrink
from joynr_sim.explore.trials import Trials
from joynr_sim.scenario.loader import parse_scenario


def loads(doc: dict) -> bool:
    parse_scenario(yaml.safe_dump(doc, sort_keys=False))
    return True


class Counted:
    """A deterministic judge that records every batch it was asked."""

    def __init__(self, predicate) -> None:
        self.predicate = predicate
        self.batches: list[int] = []
        self.judged: list[str] = []

    def __call__(self, docs: list[dict]) -> list[bool]:
        self.batches.append(len(docs))
        self.judged += [yaml.safe_dump(d) for d in docs]
        return [self.predicate(d) for d in docs]


def test_the_first_failing_candidate_is_the_one_a_walk_one_at_a_time_finds() -> None:
    docs = [{"n": n} for n in range(10)]
    fails = {3, 7}
    for batch in (1, 2, 4, 100):
        judge = Counted(lambda d: d["n"] in fails)
        trials = Trials(judge, batch=batch)
        assert trials.first(docs) == 3
        assert trials.stats.tried == 4  # as one at a time: 0, 1, 2, 3
        assert trials.stats.runs == sum(judge.batches) >= 4
        assert max(judge.batches) <= batch
    # a verdict judged ahead is remembered, not judged again, when a later pass reaches it
    judge = Counted(lambda d: d["n"] in fails)
    trials = Trials(judge, batch=100)
    assert trials.first(docs) == 3 and judge.batches == [10]
    assert trials.first(docs[4:]) == 3 and judge.batches == [10]  # {"n": 7}
    assert trials.stats.tried == 8 and trials.stats.skipped == 0


def test_seen_inadmissible_and_missing_candidates_cost_no_run() -> None:
    judge = Counted(lambda d: False)
    trials = Trials(judge, batch=8, admissible=lambda d: d["n"] != 2)
    trials.mark_seen({"n": 0})
    assert trials.first([{"n": 0}, None, {"n": 1}, {"n": 2}, {"n": 1}, {"n": 3}]) is None
    assert judge.batches == [2]  # n=1 and n=3; n=1 twice in a pass is one run
    assert (trials.stats.tried, trials.stats.skipped) == (2, 2)


def test_the_tries_left_bound_the_batch_and_the_walk() -> None:
    judge = Counted(lambda d: d["n"] == 5)
    trials = Trials(judge, batch=16, max_tries=3)
    assert trials.first([{"n": n} for n in range(10)]) is None  # 5 lies beyond three tries
    assert judge.batches == [3] and trials.stats.tried == 3


def _overwrite(doc: dict) -> bool:
    holders: dict[str, set] = {}
    for s in doc["steps"]:
        if "register" in s and "participant_id" in s["register"]:
            holders.setdefault(s["register"]["participant_id"], set()).add(s["register"]["runtime"])
    return any(len(h) > 1 for h in holders.values())


def _overwrite_and_call(doc: dict) -> bool:
    return _overwrite(doc) and any("call" in s for s in doc["steps"])


@pytest.mark.parametrize("predicate", [_overwrite, _overwrite_and_call])
def test_a_shrink_judged_in_batches_ends_where_one_at_a_time_ends(predicate) -> None:
    gen = Generator(min_steps=16, max_steps=24)
    docs = [d for d in (gen.scenario(random.Random(s), "s") for s in range(400)) if predicate(d)][:3]
    assert len(docs) == 3
    for doc in docs:
        results = []
        for batch in (1, 5, 64):
            judge = Counted(predicate)
            small, stats = shrink(doc, fails_many=judge, batch=batch, max_tries=60)
            results.append((yaml.safe_dump(small), stats.tried, stats.kept, stats.history))
            assert max(judge.batches) <= batch and stats.batches == len(judge.batches)
            assert len(set(judge.judged)) == len(judge.judged)  # no candidate is judged twice
        assert all(r == results[0] for r in results), doc["name"]


def test_batches_ask_fewer_judgements_than_candidates() -> None:
    gen = Generator(min_steps=20, max_steps=24)
    doc = next(d for d in (gen.scenario(random.Random(s), "s") for s in range(400)) if _overwrite_and_call(d))
    one, many = Counted(_overwrite_and_call), Counted(_overwrite_and_call)
    shrink(doc, fails_many=one, batch=1)
    _, stats = shrink(doc, fails_many=many, batch=16)
    assert len(many.batches) < len(one.batches) / 2
    assert stats.runs >= stats.tried  # what was judged ahead and never reached costs runs


def _topology(*steps: dict) -> dict:
    return {"name": "s", "reproduces": {"seed": "explore", "scenario": "x"}, "backends": ["gbid1"],
            "runtimes": [{"kind": "cluster-controller", "id": "cc1"}, {"kind": "libjoynr", "id": "app1", "cc": "cc1"}],
            "steps": list(steps)}


def test_a_heal_goes_with_its_fault_and_a_blocked_runtime_does_not_start() -> None:
    part = {"partition": {"runtime": "app1"}}
    heal = {"heal": {"runtime": "app1"}}
    doc = _topology(part, {"crash": "app1"}, {"start": "app1"}, heal, {"start": "app1"})
    # app1 cannot start while its link is partitioned: the start before the heal goes
    assert consistent(doc)["steps"] == [part, {"crash": "app1"}, heal, {"start": "app1"}]
    assert consistent({**doc, "steps": [heal, {"advance": 5}]})["steps"] == [{"advance": 5}]
    on_dropped_backend = _topology({"delay": {"runtime": "cc1", "gbid": "gbid2", "ms": 5}}, {"advance": 5})
    assert consistent(on_dropped_backend)["steps"] == [{"advance": 5}]


def test_subscription_steps_go_with_their_subscription_and_its_proxy() -> None:
    reg = {"register": {"runtime": "app1", "provider": "c", "domain": "dom", "interface": "joynrsim/Counter"}}
    px = {"proxy": {"runtime": "cc1", "name": "px", "domain": "dom", "interface": "joynrsim/Counter"}}
    sub = {"subscribe": {"proxy": "px", "name": "v", "attribute": "value"}}
    expect = {"expect_publications": {"subscription": "v", "at_least": 1}}
    publish = {"publish": {"provider": "c", "method": "increment"}}
    doc = _topology(reg, px, sub, publish, expect, {"unsubscribe": {"subscription": "v"}})
    assert consistent(doc) == doc and loads(doc)
    assert consistent({**doc, "steps": [reg, sub, publish, expect]})["steps"] == [reg, publish]
    # after its runtime restarted, the proxy's subscription is gone with it; the provider in
    # app1 lives on, its runtime still the same process
    restarted = consistent(_topology(reg, px, sub, {"restart": "cc1"}, expect, publish))
    assert restarted["steps"] == [reg, px, sub, {"restart": "cc1"}, publish]
    assert consistent(_topology({"crash": "app1"}, {"clock_skew": {"runtime": "app1", "ms": 5}}))["steps"] == [
        {"crash": "app1"}]


def test_a_schedule_that_checks_nothing_gets_a_call_of_a_provider_it_leaves_registered() -> None:
    reg = lambda name, **more: {"register": {"runtime": "app1", "provider": name, "domain": "dom",  # noqa: E731
                                             "interface": "joynrsim/Echo", **more}}
    doc = _topology(reg("p1"), reg("p2", participant_id="f"), {"unregister": {"runtime": "app1", "provider": "p2"}})
    checked = with_a_check(doc)
    assert not checks_something(doc) and checks_something(checked) and loads(checked)
    assert checked["steps"][-2:] == [
        {"proxy": {"runtime": "app1", "name": "check1", "domain": "dom", "interface": "joynrsim/Echo",
                   "scope": "LOCAL_ONLY"}},
        {"call": {"proxy": "check1", "method": "echo", "args": ["check"]}}]
    assert with_a_check(_topology(reg("p1"), {"crash": "app1"})) is None  # nothing left to call
