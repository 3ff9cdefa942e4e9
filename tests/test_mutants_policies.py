"""The rules of joynr_sim/core/policies.py its other unit tests left unchecked (make mutate):
the edge of expiry (an entry expiring at this millisecond is still alive, under every
policy), and the entry each decision leaves in the table."""

from __future__ import annotations

import pytest

from joynr_sim.core.policies import get_policy
from joynr_sim.core.routing import RoutingTable
from test_policies import CC, IP1, LJ, MQ1, MQ2, NOW, OWN, WS1, WSC1, E

POLICY_NAMES = ("precedence", "local-remote", "gcd-trust", "last-writer-wins")


@pytest.mark.parametrize("name", POLICY_NAMES)
def test_an_entry_expiring_now_is_not_purged(name) -> None:
    policy = get_policy(name)
    assert not policy.may_purge(E(MQ1, NOW), NOW)
    assert policy.may_purge(E(MQ1, NOW - 1), NOW)


@pytest.mark.parametrize("name, sticky_purged", [
    ("precedence", False), ("local-remote", False), ("gcd-trust", True), ("last-writer-wins", True),
])
def test_an_expired_sticky_entry_is_purged_only_where_the_seed_says(name, sticky_purged) -> None:
    policy = get_policy(name)
    assert policy.may_purge(E(IP1, NOW - 1, sticky=True), NOW) is sticky_purged
    assert not policy.may_purge(E(IP1, NOW + 1, sticky=False), NOW)


def test_gcd_trust_removes_a_sticky_entry_only_once_it_expired() -> None:
    policy = get_policy("gcd-trust")
    assert not policy.may_remove(E(IP1, NOW, sticky=True), NOW)
    assert policy.may_remove(E(IP1, NOW - 1, sticky=True), NOW)
    assert policy.may_remove(E(IP1, NOW + 1), NOW)


def test_precedence_removes_anything_but_a_sticky_entry() -> None:
    policy = get_policy("precedence")
    assert policy.may_remove(E(MQ1, NOW + 1), NOW)
    assert not policy.may_remove(E(MQ1, NOW - 1, sticky=True), NOW)


@pytest.mark.parametrize("name", ["local-remote", "last-writer-wins"])
def test_local_remote_and_last_writer_wins_remove_anything(name) -> None:
    assert get_policy(name).may_remove(E(IP1, NOW + 1, sticky=True), NOW)


def judge(name, kind, existing, new, origin="local", now=NOW):
    return get_policy(name).judge_put(kind, existing, new, origin=origin, own_topics=frozenset({OWN.topic}),
                                      now_ms=now)


def test_precedence_refuses_a_route_to_its_own_topic_only_in_a_cluster_controller() -> None:
    refused = judge("precedence", CC, E(WSC1), E(OWN))
    assert (refused.outcome, refused.entry) == ("refused", E(WSC1))
    assert judge("precedence", LJ, None, E(OWN)).outcome == "created"


def test_precedence_merges_the_same_routing_keeping_the_longer_expiry_and_stickiness() -> None:
    merged = judge("precedence", CC, E(MQ1, 9_000, sticky=True), E(MQ1, 2_000))
    assert (merged.outcome, merged.entry) == ("merged", E(MQ1, 9_000, sticky=True))
    other = judge("precedence", CC, E(MQ1, 2_000), E(MQ1, 9_000, visible=True))
    assert (other.outcome, other.entry) == ("replaced", E(MQ1, 9_000, visible=True))


def test_precedence_keeps_a_sticky_entry() -> None:
    kept = judge("precedence", CC, E(MQ1, sticky=True), E(IP1))
    assert (kept.outcome, kept.entry) == ("refused", E(MQ1, sticky=True))


@pytest.mark.parametrize("kind, old, new, outcome", [
    (LJ, WSC1, WS1, "replaced"),
    (LJ, MQ1, WS1, "replaced"),
    (LJ, MQ1, WSC1, "replaced"),
    (LJ, WS1, WSC1, "refused"),
    (LJ, WSC1, MQ1, "refused"),
    (CC, WS1, WSC1, "replaced"),
    (CC, MQ1, WSC1, "replaced"),
    (CC, WS1, MQ1, "replaced"),
    (CC, WSC1, WS1, "refused"),
    (CC, WSC1, MQ1, "refused"),
    (CC, MQ1, WS1, "refused"),
    (CC, MQ1, MQ2, "replaced"),
    (CC, WSC1, IP1, "replaced"),
])
def test_precedence_of_address_types(kind, old, new, outcome) -> None:
    decision = judge("precedence", kind, E(old), E(new))
    assert decision.outcome == outcome
    assert decision.entry == (E(new) if outcome == "replaced" else E(old))


def test_local_remote_keeps_the_longer_expiry_and_stickiness_on_replace() -> None:
    replaced = judge("local-remote", CC, E(MQ1, 9_000, sticky=True), E(WSC1, 2_000))
    assert (replaced.outcome, replaced.entry) == ("replaced", E(WSC1, 9_000, sticky=True))
    refused = judge("local-remote", CC, E(WSC1), E(MQ1))
    assert (refused.outcome, refused.entry) == ("refused", E(WSC1))


def test_gcd_trust_refuses_an_expired_entry_and_takes_one_expiring_now() -> None:
    assert judge("gcd-trust", CC, None, E(MQ1, NOW - 1)).outcome == "refused"
    assert judge("gcd-trust", CC, None, E(MQ1, NOW)).outcome == "created"


def test_gcd_trust_keeps_a_sticky_entry_sticky_on_update() -> None:
    merged = judge("gcd-trust", CC, E(MQ1, 2_000, sticky=True), E(MQ1, 9_000, visible=True))
    assert (merged.outcome, merged.entry) == ("merged", E(MQ1, 9_000, sticky=True, visible=True))
    provisioned = judge("gcd-trust", CC, E(MQ1), E(MQ2, sticky=True))
    assert (provisioned.outcome, provisioned.entry) == ("replaced", E(MQ2, sticky=True))


def test_last_writer_wins_takes_every_put() -> None:
    assert judge("last-writer-wins", CC, None, E(MQ1)).outcome == "created"
    replaced = judge("last-writer-wins", CC, E(IP1, sticky=True), E(MQ1))
    assert (replaced.outcome, replaced.entry) == ("replaced", E(MQ1))


def test_a_table_holds_what_the_decision_says() -> None:
    table = RoutingTable(CC, policy="precedence", own_addresses=[OWN], clock=lambda: NOW)
    assert table.put("p", E(MQ1, 2_000), origin="gcd").outcome == "created"
    assert table.put("p", E(MQ1, 9_000), origin="gcd").outcome == "merged"
    assert table.lookup("p") == E(MQ1, 9_000)


def test_a_rule_set_with_a_routing_variant_judges_by_the_variant() -> None:
    plain, variant = get_policy("precedence"), get_policy("precedence+routing:ignores-sticky")
    sticky, newer = E(MQ1, sticky=True), E(IP1)
    assert plain.judge_put(CC, sticky, newer, origin="local", own_topics=frozenset(), now_ms=NOW).outcome == "refused"
    assert variant.judge_put(CC, sticky, newer, origin="local", own_topics=frozenset(), now_ms=NOW).outcome == (
        "replaced")


def test_a_variant_of_another_part_leaves_the_policy_as_it_is() -> None:
    policy = get_policy("local-remote+gcd:ignores-gbids")
    assert type(policy) is type(get_policy("local-remote"))
