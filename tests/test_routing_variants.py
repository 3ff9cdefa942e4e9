"""The routing variants: each against the policy it wraps, on the rule it breaks, and on one
it leaves alone. A variant that changed nothing, or everything, fails here."""

from __future__ import annotations

import pytest

from joynr_sim.core.address import InProcessAddress, MqttAddress, WebSocketAddress, WebSocketClientAddress
from joynr_sim.core.policies import POLICIES, Policy, get_policy
from joynr_sim.core.router import SUBSCRIBER_ROUTE_EXPIRY_MS
from joynr_sim.core.routing import RoutingEntry, RoutingTable
from joynr_sim.core.routing_variants import (
    IGNORES_STICKY,
    MERGE_IGNORES_VISIBILITY,
    MERGE_TAKES_NEWER,
    ROUTING_VARIANTS,
    RUNTIME_KINDS_SWAPPED,
    SEED_CREATE_OWN_TOPIC,
    SEED_SUBSCRIBER_ROUTE_EXPIRY,
    SUBSCRIPTION_REQUEST_TTL_MS,
    apply,
)
from joynr_sim.core.variants import VARIANTS, parse_rule_set
from joynr_sim.runtime.subscriptions import SUBSCRIBE_TTL_MS

CC = "cluster-controller"
LJ = "libjoynr"
NOW = 1_000
OWN = MqttAddress("gbid1", "cc1")
IP = InProcessAddress(object())
WS = WebSocketAddress("WS", "cc1", 4242)
WSC = WebSocketClientAddress("app1")
MQ, MQ2 = MqttAddress("gbid1", "cc2"), MqttAddress("gbid2", "cc2")


def E(address, expiry=5_000, sticky=False, visible=False):
    return RoutingEntry(address, visible, expiry, sticky)


def table(rules: str, kind: str = CC) -> RoutingTable:
    return RoutingTable(kind, policy=rules, own_addresses=[OWN], clock=lambda: NOW)


def put(rules, kind, existing, new, origin="local"):
    t = table(rules, kind)
    if existing is not None:
        assert t.put("p", existing, origin="provisioned").outcome == "created"
    result = t.put("p", new, origin=origin)
    return result.outcome, t.lookup("p")


# -- the registry ------------------------------------------------------------------------


def test_every_routing_variant_is_registered_named_and_applies_to_every_policy():
    names = [name for name, _, _ in ROUTING_VARIANTS]
    assert names == [IGNORES_STICKY, MERGE_TAKES_NEWER, MERGE_IGNORES_VISIBILITY, RUNTIME_KINDS_SWAPPED,
                     SEED_CREATE_OWN_TOPIC, SEED_SUBSCRIBER_ROUTE_EXPIRY]
    for name, seed, summary in ROUTING_VARIANTS:
        assert VARIANTS[name].part == "routing" and seed.startswith("000_65e83c7f1cb84fd7.txt: ") and summary
        for policy in POLICIES:
            wrapped = get_policy(f"{policy}+{name}")
            # The trace records the table's policy; the run's rule set names the variant.
            assert isinstance(wrapped, Policy) and wrapped.name == policy and name in repr(wrapped)
            assert parse_rule_set(f"{policy}+{name}")[1].name == name
    with pytest.raises(ValueError, match="no routing variant 'routing:nope'"):
        apply(get_policy("precedence"), "routing:nope")


def test_a_table_under_a_variant_reports_its_policy_in_every_decision():
    t = table(f"precedence+{IGNORES_STICKY}")
    seen = []
    t.add_listener(seen.append)
    t.put("p", E(MQ, sticky=True), "provisioned")
    t.remove("p")
    assert [(d.op, d.policy, d.outcome) for d in seen] == [("put", "precedence", "created"),
                                                          ("remove", "precedence", "removed")]


# -- routing:ignores-sticky --------------------------------------------------------------


def test_ignores_sticky_lets_an_offer_replace_a_sticky_entry():
    sticky = E(MQ, sticky=True)
    assert put("precedence", CC, sticky, E(WSC), "routing-provider") == ("refused", sticky)
    outcome, after = put(f"precedence+{IGNORES_STICKY}", CC, sticky, E(WSC), "routing-provider")
    assert (outcome, after.address, after.is_sticky) == ("replaced", WSC, True)  # the merge carries the flag
    # what precedence refuses for another reason stays refused
    assert put(f"precedence+{IGNORES_STICKY}", CC, E(WSC, sticky=True), E(MQ))[0] == "refused"
    # a same-address merge is the policy's own
    assert put(f"precedence+{IGNORES_STICKY}", CC, sticky, E(MQ, 9_000)) == ("merged", E(MQ, 9_000, sticky=True))


@pytest.mark.parametrize("policy", ["precedence", "gcd-trust"])
def test_ignores_sticky_removes_and_purges_sticky_entries(policy):
    for rules, kept in ((policy, True), (f"{policy}+{IGNORES_STICKY}", False)):
        t = RoutingTable(CC, policy=rules, clock=lambda: 0)
        t.put("p", E(MQ, NOW + 1, sticky=True), "provisioned")
        assert (t.remove("p") == "refused-sticky") is kept
    now = [0]
    purged = {}
    for rules in ("precedence", f"precedence+{IGNORES_STICKY}"):
        t = RoutingTable(CC, policy=rules, clock=lambda: now[0])
        t.put("p", E(MQ, NOW - 1, sticky=True), "provisioned")
        t.put("q", E(MQ2, NOW - 1), "provisioned")
        purged[rules] = set(t.purge_expired(NOW))
    assert purged == {"precedence": {"q"}, f"precedence+{IGNORES_STICKY}": {"p", "q"}}


# -- routing:merge-takes-newer -----------------------------------------------------------


@pytest.mark.parametrize("policy", ["precedence", "local-remote"])
def test_merge_takes_newer_drops_the_longer_expiry_and_the_sticky_flag(policy):
    rules = f"{policy}+{MERGE_TAKES_NEWER}"
    # the same address offered again for less long (000's merge, 002's scenario 6b)
    assert put(policy, CC, E(MQ, 9_000), E(MQ, 2_000), "reply-to") == ("merged", E(MQ, 9_000))
    assert put(rules, CC, E(MQ, 9_000), E(MQ, 2_000), "reply-to") == ("merged", E(MQ, 2_000))
    # a sticky entry met by its own address, not sticky
    assert put(policy, CC, E(MQ, 9_000, sticky=True), E(MQ, 2_000), "reply-to")[1] == E(MQ, 9_000, sticky=True)
    assert put(rules, CC, E(MQ, 9_000, sticky=True), E(MQ, 2_000), "reply-to")[1] == E(MQ, 2_000)
    # a replacement by another address (002 constraints 3 and 4)
    assert put(policy, CC, E(MQ, 9_000), E(MQ2, 2_000), "reply-to") == ("replaced", E(MQ2, 9_000))
    assert put(rules, CC, E(MQ, 9_000), E(MQ2, 2_000), "reply-to") == ("replaced", E(MQ2, 2_000))
    if policy == "local-remote":  # precedence refuses to replace a sticky entry at all
        assert put(policy, CC, E(MQ, sticky=True), E(WSC)) == ("replaced", E(WSC, sticky=True))
        assert put(rules, CC, E(MQ, sticky=True), E(WSC)) == ("replaced", E(WSC))
    # what is refused stays refused
    assert put(rules, CC, E(WSC), E(MQ))[0] == "refused"


# -- routing:merge-ignores-visibility ---------------------------------------------------


@pytest.mark.parametrize("policy", ["precedence", "local-remote", "gcd-trust", "last-writer-wins"])
def test_merge_ignores_visibility_keeps_the_old_flag_for_the_same_address(policy):
    hidden = E(WSC, visible=False)
    shown = E(WSC, visible=True)
    # a provider registered locally, then globally: its entry becomes globally visible
    assert put(policy, CC, hidden, shown, "routing-provider")[1] == shown
    assert put(f"{policy}+{MERGE_IGNORES_VISIBILITY}", CC, hidden, shown, "routing-provider")[1] == hidden
    # another address is judged as the policy judges it
    assert put(f"{policy}+{MERGE_IGNORES_VISIBILITY}", CC, E(MQ), E(MQ2, visible=True), "gcd") == \
        put(policy, CC, E(MQ), E(MQ2, visible=True), "gcd")


# -- routing:runtime-kinds-swapped -------------------------------------------------------

SWAPPED = [
    # kind, old, new, precedence, swapped
    (LJ, WSC, WS, "replaced", "refused"),  # libjoynr: WebSocket replaces WebSocketClient
    (LJ, MQ, WS, "replaced", "refused"),  # libjoynr: WebSocket replaces a remote entry
    (CC, WS, WSC, "replaced", "refused"),  # cluster controller: WebSocketClient replaces WebSocket
    (CC, WS, MQ, "replaced", "refused"),  # cluster controller: a remote entry replaces WebSocket
    (CC, MQ, WS, "refused", "replaced"),  # cluster controller: WebSocket refused over Mqtt
    (LJ, MQ, WSC, "replaced", "replaced"),  # both kinds: WebSocketClient replaces a remote entry
    (CC, WSC, IP, "replaced", "replaced"),  # InProcess replaces anything, in both
]


@pytest.mark.parametrize("kind, old, new, own, swapped", SWAPPED)
def test_runtime_kinds_swapped_judges_by_the_other_kinds_order(kind, old, new, own, swapped):
    assert put("precedence", kind, E(old), E(new))[0] == own
    assert put(f"precedence+{RUNTIME_KINDS_SWAPPED}", kind, E(old), E(new))[0] == swapped


def test_runtime_kinds_swapped_keeps_the_own_topic_and_the_older_seeds():
    assert put(f"precedence+{RUNTIME_KINDS_SWAPPED}", CC, None, E(OWN), "gcd")[0] == "refused"
    for policy in ("local-remote", "gcd-trust", "last-writer-wins"):
        for kind, old, new, _, _ in SWAPPED:
            assert put(f"{policy}+{RUNTIME_KINDS_SWAPPED}", kind, E(old), E(new)) == put(policy, kind, E(old), E(new))


# -- routing:seed-create-own-topic -------------------------------------------------------


def test_seed_create_own_topic_creates_what_joynr_refuses():
    assert put("precedence", CC, None, E(OWN), "gcd") == ("refused", None)
    assert put(f"precedence+{SEED_CREATE_OWN_TOPIC}", CC, None, E(OWN), "gcd") == ("created", E(OWN))
    # over an entry, and another topic, and in libjoynr, the rules are precedence's
    assert put(f"precedence+{SEED_CREATE_OWN_TOPIC}", CC, E(MQ), E(OWN), "gcd")[0] == "refused"
    assert put(f"precedence+{SEED_CREATE_OWN_TOPIC}", CC, None, E(MQ), "gcd")[0] == "created"


# -- routing:seed-subscriber-route-expiry ------------------------------------------------


def test_seed_subscriber_route_expiry_lets_a_subscribers_route_expire_with_its_request():
    route = E(MQ, SUBSCRIBER_ROUTE_EXPIRY_MS, visible=True)
    assert put("precedence", CC, None, route, "reply-to") == ("created", route)
    outcome, after = put(f"precedence+{SEED_SUBSCRIBER_ROUTE_EXPIRY}", CC, None, route, "reply-to")
    assert (outcome, after.expiry_date_ms) == ("created", NOW + SUBSCRIPTION_REQUEST_TTL_MS)
    t = table(f"precedence+{SEED_SUBSCRIBER_ROUTE_EXPIRY}")
    t.put("p", route, "reply-to")
    assert t.purge_expired(NOW + SUBSCRIPTION_REQUEST_TTL_MS + 1) == ["p"]
    # a request's route, and a route that is not learned, are as offered
    for entry, origin in ((E(MQ, 7_000), "reply-to"), (E(MQ, SUBSCRIBER_ROUTE_EXPIRY_MS), "provisioned")):
        assert put(f"precedence+{SEED_SUBSCRIBER_ROUTE_EXPIRY}", CC, None, entry, origin) == ("created", entry)


def test_the_subscription_request_ttl_is_the_runtimes():
    assert SUBSCRIPTION_REQUEST_TTL_MS == SUBSCRIBE_TTL_MS
