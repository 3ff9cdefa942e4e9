"""The older rule sets as policies: ``local-remote`` (seed 002), ``gcd-trust`` (seed 003) and
the naive ``last-writer-wins``. Each case is one rule of its seed, written out as data."""

from __future__ import annotations

import pytest

from joynr_sim.core.address import (
    ChannelAddress,
    InProcessAddress,
    MqttAddress,
    WebSocketAddress,
    WebSocketClientAddress,
)
from joynr_sim.core.policies import (
    DEFAULT_POLICY,
    POLICIES,
    POLICY_NAMES,
    Origin,
    Policy,
    get_policy,
)
from joynr_sim.core.routing import RoutingEntry, RoutingTable

CC = "cluster-controller"
LJ = "libjoynr"
NOW = 1_000
OWN_TOPIC = "cc-own/topic"

IP1, IP2 = InProcessAddress(object()), InProcessAddress(object())
WS1, WS2 = WebSocketAddress("WS", "cc-a", 4242), WebSocketAddress("WS", "cc-b", 4242)
WSC1, WSC2 = WebSocketClientAddress("client-a"), WebSocketClientAddress("client-b")
MQ1, MQ2 = MqttAddress("gbid1", "a/topic"), MqttAddress("gbid2", "b/topic")
CH1, CH2 = ChannelAddress("http://bp/a", "a"), ChannelAddress("http://bp/b", "b")
OWN = MqttAddress("gbid1", OWN_TOPIC)


def E(address, expiry=5_000, sticky=False, visible=False):
    return RoutingEntry(address, visible, expiry, sticky)


def table(policy: str, kind: str = CC) -> RoutingTable:
    return RoutingTable(kind, policy=policy, own_addresses=[OWN], clock=lambda: NOW)


def run_put(policy, kind, existing, new, origin):
    t = table(policy, kind)
    if existing is not None:
        assert t.put("p", existing, origin="provisioned").outcome == "created"
    result = t.put("p", new, origin=origin)
    return t, result


# Each case: (id, kind, existing entry or None, new entry, origin, outcome(s), entry after).
# An outcome written as a set means the seed does not name which of them.

LOCAL_REMOTE = [
    ("4: create InProcess", CC, None, E(IP1), "local", "created", E(IP1)),
    ("4: create Mqtt", LJ, None, E(MQ1, sticky=True), "reply-to", "created",
     E(MQ1, sticky=True)),
    ("2a local WebSocket -> InProcess", LJ, E(WS1), E(IP1), "registration", "replaced", E(IP1)),
    ("2a local InProcess -> WebSocketClient", CC, E(IP1), E(WSC1), "registration", "replaced",
     E(WSC1)),
    ("2a local WebSocketClient -> WebSocket", CC, E(WSC1), E(WS1), "local", "replaced", E(WS1)),
    ("2a local InProcess -> InProcess", CC, E(IP1), E(IP2), "registration", "replaced", E(IP2)),
    ("2b remote Mqtt -> WebSocketClient", CC, E(MQ1), E(WSC1), "registration", "replaced",
     E(WSC1)),
    ("2b remote Channel -> InProcess", LJ, E(CH1), E(IP1), "registration", "replaced", E(IP1)),
    ("2c remote Mqtt -> Channel", CC, E(MQ1), E(CH1), "gcd", "replaced", E(CH1)),
    ("2c remote Mqtt -> Mqtt", CC, E(MQ1), E(MQ2), "reply-to", "replaced", E(MQ2)),
    ("not 2a-2c: local InProcess -> Mqtt", CC, E(IP1), E(MQ1), "gcd", "refused", E(IP1)),
    ("not 2a-2c: local WebSocketClient -> Channel", CC, E(WSC1), E(CH1), "gcd", "refused",
     E(WSC1)),
    ("not 2a-2c: local WebSocket -> Mqtt", LJ, E(WS1), E(MQ1), "gcd", "refused", E(WS1)),
    ("3: replace keeps the longer old expiry", CC, E(MQ1, 9_000), E(WSC1, 2_000), "local",
     "replaced", E(WSC1, 9_000)),
    ("3: replace takes the longer new expiry", CC, E(MQ1, 2_000), E(MQ2, 9_000), "reply-to",
     "replaced", E(MQ2, 9_000)),
    ("4: replace keeps the old sticky flag", CC, E(WSC1, sticky=True), E(IP1), "local",
     "replaced", E(IP1, sticky=True)),
    ("4: replace takes the new sticky flag", CC, E(MQ1), E(MQ2, sticky=True), "local",
     "replaced", E(MQ2, sticky=True)),
    ("sticky does not protect from replacement", CC, E(MQ1, sticky=True), E(CH1), "reply-to",
     "replaced", E(CH1, sticky=True)),
    ("same address: expiry extended", CC, E(MQ1, 2_000), E(MQ1, 8_000), "reply-to",
     {"merged", "replaced"}, E(MQ1, 8_000)),
    ("same address: expiry kept, sticky merged", CC, E(MQ1, 8_000, sticky=True),
     E(MQ1, 2_000), "reply-to", {"merged", "replaced"}, E(MQ1, 8_000, sticky=True)),
    ("visibility comes from the replacing entry", CC, E(MQ1, visible=True),
     E(MQ2, visible=False), "reply-to", "replaced", E(MQ2, visible=False)),
]

GCD_TRUST = [
    ("CREATE: absent, not expired", CC, None, E(MQ1), "reply-to", "created", E(MQ1)),
    ("CREATE: expiry now is not in the past", CC, None, E(MQ1, NOW), "reply-to", "created",
     E(MQ1, NOW)),
    ("CREATE: expiry in the past refused", CC, None, E(MQ1, NOW - 1), "gcd", "refused", None),
    ("CREATE: expired sticky refused", CC, None, E(IP1, NOW - 1, sticky=True), "provisioned",
     "refused", None),
    ("CREATE: expired refused over an entry", CC, E(MQ1), E(MQ2, NOW - 1), "gcd", "refused",
     E(MQ1)),
    ("CREATE: new sticky replaces a different address", CC, E(WSC1),
     E(MQ1, 2_000, sticky=True), "provisioned", "replaced", E(MQ1, 2_000, sticky=True)),
    ("CREATE: new sticky replaces a sticky entry", CC, E(IP1, sticky=True),
     E(IP2, sticky=True), "provisioned", "replaced", E(IP2, sticky=True)),
    ("UPDATE: same address, entry as given", CC, E(MQ1, 9_000), E(MQ1, 2_000, visible=True),
     "reply-to", {"merged", "replaced"}, E(MQ1, 2_000, visible=True)),
    ("UPDATE: same address, a sticky entry stays sticky", LJ, E(WS1, sticky=True), E(WS1, 7_000),
     "local", {"merged", "replaced"}, E(WS1, 7_000, sticky=True)),
    ("UPDATE: same address, the offer's expiry, sticky if either", CC, E(MQ1, 9_000, sticky=True),
     E(MQ1, 2_000, visible=True), "reply-to", {"merged", "replaced"}, E(MQ1, 2_000, sticky=True, visible=True)),
    ("UPDATE: different address from the GCD", CC, E(MQ1, 9_000), E(MQ2, 2_000), "gcd",
     "replaced", E(MQ2, 2_000)),
    ("UPDATE: GCD overrides a local address", CC, E(IP1), E(MQ1), "gcd", "replaced", E(MQ1)),
    ("UPDATE: GCD overrides a sticky entry", CC, E(WSC1, sticky=True), E(CH1), "gcd",
     "replaced", E(CH1)),
    ("UPDATE: different address from a reply-to refused", CC, E(MQ1), E(MQ2), "reply-to",
     "refused", E(MQ1)),
    ("UPDATE: different address from a registration refused", CC, E(MQ1), E(IP1),
     "registration", "refused", E(MQ1)),
    ("UPDATE: different address, local origin refused", LJ, E(WS1), E(WS2), "local",
     "refused", E(WS1)),
]

LAST_WRITER_WINS = [
    ("create", CC, None, E(CH1), "local", "created", E(CH1)),
    ("replace InProcess with Mqtt", CC, E(IP1), E(MQ1), "reply-to", "replaced", E(MQ1)),
    ("replace a sticky entry, sticky and expiry as given", CC, E(IP1, 9_000, sticky=True),
     E(WS1, 2_000), "local", "replaced", E(WS1, 2_000)),
    ("same address: entry as given", LJ, E(WSC1, 9_000, sticky=True),
     E(WSC1, 100, visible=True), "local", "replaced", E(WSC1, 100, visible=True)),
    ("even an expired entry", CC, E(MQ1), E(MQ2, 1), "gcd", "replaced", E(MQ2, 1)),
    ("even a route to the own topic", CC, E(WSC1), E(OWN), "reply-to", "replaced", E(OWN)),
]

CASES = (
    [("local-remote",) + c for c in LOCAL_REMOTE]
    + [("gcd-trust",) + c for c in GCD_TRUST]
    + [("last-writer-wins",) + c for c in LAST_WRITER_WINS]
)


@pytest.mark.parametrize(
    "policy, kind, existing, new, origin, outcome, after",
    [c[:1] + c[2:] for c in CASES],
    ids=[f"{c[0]}: {c[1]}" for c in CASES],
)
def test_put(policy, kind, existing, new, origin, outcome, after):
    t, result = run_put(policy, kind, existing, new, origin)
    outcomes = outcome if isinstance(outcome, set) else {outcome}
    assert result.outcome in outcomes
    assert isinstance(result.reason, str) and result.reason
    assert result.entry == after
    assert t.lookup("p") == after
    assert t.items() == ([] if after is None else [("p", after)])


@pytest.mark.parametrize("policy", ["local-remote", "gcd-trust", "last-writer-wins"])
@pytest.mark.parametrize("kind", [CC, LJ])
def test_the_same_rules_hold_in_both_runtime_kinds(policy, kind):
    # None of the older seeds distinguishes runtime kinds.
    other = LJ if kind == CC else CC
    for case in CASES:
        if case[0] != policy:
            continue
        _, _, _, existing, new, origin, _, after = case
        if new.address == OWN:
            continue
        results = [run_put(policy, k, existing, new, origin)[1] for k in (kind, other)]
        assert results[0] == results[1]


# -- remove and purge --------------------------------------------------------------------

# (policy, entry, remove outcome at NOW)
REMOVE = [
    ("local-remote", E(MQ1), "removed"),
    ("local-remote", E(IP1, sticky=True), "removed"),  # 002: a provider unregisters
    ("gcd-trust", E(MQ1), "removed"),  # not sticky
    ("gcd-trust", E(IP1, NOW - 1, sticky=True), "removed"),  # expired
    ("gcd-trust", E(IP1, NOW + 1, sticky=True), "refused-sticky"),  # neither
    ("last-writer-wins", E(MQ1), "removed"),
    ("last-writer-wins", E(IP1, NOW + 1, sticky=True), "removed"),
]


@pytest.mark.parametrize("policy, entry, outcome", REMOVE)
def test_remove(policy, entry, outcome):
    now = [0]  # the entry is created at time 0 and removed at NOW
    t = RoutingTable(CC, policy=policy, clock=lambda: now[0])
    assert t.put("p", entry, origin="provisioned").outcome == "created"
    now[0] = NOW
    assert t.remove("p") == outcome
    assert ("p" in t) is (outcome == "refused-sticky")
    assert t.remove("nobody") == "absent"


# policy -> participants purge_expired(NOW) takes from the same set of entries.
PURGE_ENTRIES = {
    "expired": E(MQ1, NOW - 1),
    "expired-sticky": E(IP1, NOW - 1, sticky=True),
    "alive": E(WSC1, NOW + 1),
    "alive-sticky": E(WS1, NOW + 1, sticky=True),
}
PURGE = [
    ("local-remote", {"expired"}),  # 002: sticky protects from garbage collection
    ("gcd-trust", {"expired", "expired-sticky"}),  # 003: delete if the entry expired
    ("last-writer-wins", {"expired", "expired-sticky"}),
]


@pytest.mark.parametrize("policy, purged", PURGE)
def test_purge_expired(policy, purged):
    t = RoutingTable(CC, policy=policy, clock=lambda: 0)  # entries are created at time 0
    for pid, entry in PURGE_ENTRIES.items():
        assert t.put(pid, entry, origin="provisioned").outcome == "created"
    assert set(t.purge_expired(NOW)) == purged
    assert set(t) == set(PURGE_ENTRIES) - purged


def test_listener_sees_the_policy_name():
    for name in ("precedence", "local-remote", "gcd-trust", "last-writer-wins"):
        t = RoutingTable(CC, policy=name, clock=lambda: 0)
        seen = []
        t.add_listener(seen.append)
        t.put("p", E(MQ1))
        t.remove("p")
        t.put("q", E(MQ1, 1))
        t.purge_expired(NOW)
        assert [(d.op, d.policy) for d in seen] == [
            ("put", name), ("remove", name), ("put", name), ("purge", name)
        ]


# -- choosing a policy -------------------------------------------------------------------


def test_policy_names():
    assert set(POLICIES) == {"precedence", "local-remote", "gcd-trust", "last-writer-wins"}
    assert RoutingTable(CC).policy.name == "precedence"
    for name in POLICIES:
        policy = get_policy(name)
        assert isinstance(policy, Policy) and policy.name == name
        assert RoutingTable(LJ, policy=name).policy.name == name
        # A policy object is used as given.
        assert RoutingTable(LJ, policy=policy).policy is policy


def test_gcd_trust_trusts_the_gcd_origin_as_enum_or_plain_value():
    for origin in (Origin.GCD, "gcd"):
        _, result = run_put("gcd-trust", CC, E(MQ1, 9_000), E(MQ2, 2_000), origin)
        assert result.outcome == "replaced" and result.reason == "from-gcd"
    with pytest.raises(ValueError, match="origin: unknown routing-entry origin 'GCD '"):
        run_put("gcd-trust", CC, E(MQ1, 9_000), E(MQ2, 2_000), "GCD ")


def test_policy_names_and_default_are_the_policies_own():
    assert POLICY_NAMES == tuple(POLICIES) and DEFAULT_POLICY == "precedence"
    assert RoutingTable(CC).policy.name == DEFAULT_POLICY


@pytest.mark.parametrize("name", ["Precedence", "lww", "", None, ["precedence"]])
def test_unknown_policy_names_the_field(name):
    with pytest.raises(ValueError, match="policy") as info:
        get_policy(name)
    assert "precedence" in str(info.value)  # the message lists the choices
