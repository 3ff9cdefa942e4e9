"""The registry of variants beside the policies: rule-set names, what each part reads, and
where a name enters (the command line, a scenario's guards) a bad one is refused clearly."""

from __future__ import annotations

import pytest

from joynr_sim.cli import main
from joynr_sim.core.policies import POLICIES, get_policy
from joynr_sim.core.variants import (
    PARTS,
    RULE_SET_NAMES,
    VARIANTS,
    parse_rule_set,
    rule_set,
    variant_of,
)


def test_every_part_has_variants_named_by_their_part_with_a_seed_sentence() -> None:
    assert {v.part for v in VARIANTS.values()} == set(PARTS)
    for v in VARIANTS.values():
        assert v.name.startswith(f"{v.part}:") and v.seed.strip() and v.summary.strip()
    assert RULE_SET_NAMES == (*POLICIES, *VARIANTS)


@pytest.mark.parametrize("name", list(VARIANTS))
def test_a_variant_keeps_the_scenario_policy_and_reaches_only_its_part(name: str) -> None:
    rules = rule_set("local-remote", name)
    assert rules == f"local-remote+{name}"
    assert parse_rule_set(rules) == ("local-remote", VARIANTS[name])
    for part in PARTS:
        assert variant_of(rules, part) == (name if part == VARIANTS[name].part else None)
    # a routing variant changes the policy's judgement, keeping its name (the checks judge by the seed's)
    assert get_policy(rules).name == "local-remote"
    assert (type(get_policy(rules)) is POLICIES["local-remote"]) == (VARIANTS[name].part != "routing")


def test_a_policy_column_is_that_policy_and_carries_no_variant() -> None:
    assert rule_set("precedence", "gcd-trust") == "gcd-trust"
    assert rule_set("precedence") == "precedence"
    assert all(variant_of("gcd-trust", part) is None for part in PARTS)
    assert variant_of(POLICIES["precedence"](), "gcd") is None


@pytest.mark.parametrize("name, words", [
    ("precedence+gcd:nothing-like-it", "unknown variant 'gcd:nothing-like-it'"),
    ("lww+gcd:ignores-gbids", "unknown routing policy 'lww'"),
    ("precedence+", "unknown variant ''"),
    (42, "expected a policy name"),
])
def test_a_bad_rule_set_name_is_refused_naming_the_choices(name: object, words: str) -> None:
    with pytest.raises(ValueError, match="policy") as info:
        parse_rule_set(name)
    assert words in str(info.value)
    with pytest.raises(ValueError, match="unknown policy or variant"):
        rule_set("precedence", "gcd:nothing-like-it")


def test_joynr_sim_policies_lists_every_variant_with_the_seed_it_breaks(capsys) -> None:
    assert main(["policies"]) == 0
    out = capsys.readouterr().out
    assert all(name in out for name in VARIANTS)
    name = next(iter(VARIANTS))
    assert main(["policies", "--policy", name]) == 0
    out = capsys.readouterr().out
    assert name in out and "precedence — " not in out


async def test_a_run_under_a_variant_keeps_the_scenario_policy_for_the_checks(tmp_path) -> None:
    """run.json declares the policy the checks judge by and, apart, the variant; the matrix's
    column is the variant. The variant reaches its part: sticky-entry-survives-purge fails
    under routing:ignores-sticky, and a GCD variant leaves its routing alone."""
    import json

    from joynr_sim.scenario import load_scenario
    from joynr_sim.scenario.matrix import cell_of
    from joynr_sim.scenario.runner import run_scenario

    scenario = load_scenario("scenarios/sticky-entry-survives-purge.yaml")
    broken = await run_scenario(scenario, tmp_path / "a", policy="routing:ignores-sticky", network="memory")
    kept = await run_scenario(scenario, tmp_path / "b", policy="gcd:ignores-gbids", network="memory")
    assert (broken.policy, broken.variant, broken.column, broken.passed) == (
        "precedence", "routing:ignores-sticky", "routing:ignores-sticky", False)
    assert (kept.policy, kept.variant, kept.passed) == ("precedence", "gcd:ignores-gbids", True)
    manifest = json.loads((tmp_path / "a" / scenario.name / "run.json").read_text())
    assert (manifest["policy"], manifest["variant"]) == ("precedence", "routing:ignores-sticky")
    assert cell_of(scenario, broken).policy == "routing:ignores-sticky" and cell_of(scenario, broken).ok


async def test_the_takeover_storm_scenario_fails_where_a_second_attach_is_refused(tmp_path) -> None:
    """faults/duplicate-cc-id is kept apart from the library (its storm is a checker finding),
    so the library matrix does not replay it: here it is, under its policy and its guard."""
    from joynr_sim.scenario import load_scenario
    from joynr_sim.scenario.runner import run_scenario

    scenario = load_scenario("scenarios/faults/duplicate-cc-id.yaml")
    assert scenario.guards == ("links:steal-refused",)
    held = await run_scenario(scenario, tmp_path / "a", network="memory")
    refused = await run_scenario(scenario, tmp_path / "b", policy="links:steal-refused", network="memory")
    assert (held.passed, refused.passed) == (True, False), (held.error, refused.failed_step)
