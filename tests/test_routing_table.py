"""The routing table under the default policy ``precedence`` (seed 000).

Expected results are written out as data from the seed text, not computed by the code's
own helpers: the replace grids below are the seed's "it can be replaced only if" clause.
"""

from __future__ import annotations

import itertools

import pytest
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from joynr_sim.core.address import (
    ChannelAddress,
    InProcessAddress,
    MqttAddress,
    WebSocketAddress,
    WebSocketClientAddress,
)
from joynr_sim.core.routing import (
    Origin,
    PutResult,
    RoutingDecision,
    RoutingEntry,
    RoutingTable,
)

CC = "cluster-controller"
LJ = "libjoynr"
TYPES = ("InProcess", "WebSocket", "WebSocketClient", "Mqtt", "Channel")
OWN_TOPIC = "cc-own/topic"

# Two distinct addresses of every type; variant 0 is "the existing one".
SKELETONS = (object(), object())
ADDRESSES = {
    "InProcess": (InProcessAddress(SKELETONS[0]), InProcessAddress(SKELETONS[1])),
    "WebSocket": (WebSocketAddress("WS", "cc-a", 4242, "/"), WebSocketAddress("WSS", "cc-b", 443)),
    "WebSocketClient": (WebSocketClientAddress("client-a"), WebSocketClientAddress("client-b")),
    "Mqtt": (MqttAddress("gbid1", "cc-a/topic"), MqttAddress("gbid2", "cc-b/topic")),
    "Channel": (ChannelAddress("http://bp/a", "ch-a"), ChannelAddress("http://bp/b", "ch-b")),
}

# Seed 000, "a Routing Entry ... can be replaced only if": rows are the existing entry's
# type, columns the new one's; a cell names the clause that allows it, "-" means refused.
#   same  = same address type             ip   = the new entry is InProcess
#   r>r   = remote and remote             ws   = libjoynr: WS/WSC/remote -> WebSocket
#   r>wsc = libjoynr: remote -> WSC       >wsc = CC: WebSocket/remote -> WebSocketClient
#   ws>r  = CC: WebSocket -> remote
GRID = {
    CC: """
                  InProcess  WebSocket  WebSocketClient  Mqtt   Channel
    InProcess     same       -          -                -      -
    WebSocket     ip         same       >wsc             ws>r   ws>r
    WebSocketClient ip       -          same             -      -
    Mqtt          ip         -          >wsc             same   r>r
    Channel       ip         -          >wsc             r>r    same
    """,
    LJ: """
                  InProcess  WebSocket  WebSocketClient  Mqtt   Channel
    InProcess     same       -          -                -      -
    WebSocket     ip         same       -                -      -
    WebSocketClient ip       ws         same             -      -
    Mqtt          ip         ws         r>wsc            same   r>r
    Channel       ip         ws         r>wsc            r>r    same
    """,
}
# The reason the table gives for each clause.
CLAUSE_REASON = {
    "same": "same-type",
    "ip": "new-inprocess",
    "r>r": "remote-to-remote",
    "ws": "libjoynr-to-websocket",
    "r>wsc": "libjoynr-remote-to-websocketclient",
    ">wsc": "cc-to-websocketclient",
    "ws>r": "cc-websocket-to-remote",
}
REFUSED_REASONS = {"own-address", "sticky", "precedence"}


def _parse(grid: str) -> dict[tuple[str, str], str | None]:
    lines = [ln.split() for ln in grid.strip().splitlines()]
    header, rows = lines[0], lines[1:]
    assert tuple(header) == TYPES
    out = {}
    for row in rows:
        old, cells = row[0], row[1:]
        assert len(cells) == len(TYPES), row
        for new, cell in zip(TYPES, cells):
            out[(old, new)] = None if cell == "-" else CLAUSE_REASON[cell]
    return out


REPLACE = {kind: _parse(grid) for kind, grid in GRID.items()}


def make_table(kind: str, now: int = 0, **kw) -> RoutingTable:
    own = [MqttAddress("gbid1", OWN_TOPIC)] if kind == CC else []
    return RoutingTable(kind, own_addresses=own, clock=lambda: now, **kw)


def _cases():
    for kind, old_t, new_t in itertools.product((CC, LJ), TYPES, TYPES):
        for same_address in ((True, False) if old_t == new_t else (False,)):
            for old_sticky, new_sticky, vis_changed, expiry_up in itertools.product(
                (False, True), repeat=4
            ):
                yield pytest.param(
                    kind, old_t, new_t, same_address, old_sticky, new_sticky, vis_changed,
                    expiry_up,
                    id=f"{kind}-{old_t}>{new_t}-{'same' if same_address else 'diff'}"
                    f"-{'S' if old_sticky else 's'}{'S' if new_sticky else 's'}"
                    f"-{'vis' if vis_changed else 'novis'}-{'up' if expiry_up else 'down'}",
                )


@pytest.mark.parametrize(
    "kind, old_t, new_t, same_address, old_sticky, new_sticky, vis_changed, expiry_up",
    list(_cases()),
)
def test_precedence_put_over_existing_entry(
    kind, old_t, new_t, same_address, old_sticky, new_sticky, vis_changed, expiry_up
):
    table = make_table(kind)
    old = RoutingEntry(ADDRESSES[old_t][0], True, 5000, old_sticky)
    new_address = ADDRESSES[new_t][0 if same_address else 1]
    new_expiry = 7000 if expiry_up else 3000
    new = RoutingEntry(new_address, not vis_changed, new_expiry, new_sticky)
    assert table.put("p", old).outcome == "created"

    result = table.put("p", new)

    merged = RoutingEntry(
        ADDRESSES[old_t][0], True, max(5000, new_expiry), old_sticky or new_sticky
    )
    replaced = RoutingEntry(
        new_address, not vis_changed, max(5000, new_expiry), old_sticky or new_sticky
    )
    if same_address and not vis_changed:
        expected = PutResult("merged", "same-address", merged)
    elif old_sticky:
        expected = PutResult("refused", "sticky", old)
    elif REPLACE[kind][(old_t, new_t)] is not None:
        expected = PutResult("replaced", REPLACE[kind][(old_t, new_t)], replaced)
    else:
        expected = PutResult("refused", "precedence", old)
    assert result == expected
    assert table.lookup("p") == expected.entry
    assert table.items() == [("p", expected.entry)]
    if expected.outcome == "replaced":
        assert table.lookup("p").address is new_address


@pytest.mark.parametrize("kind", (CC, LJ))
@pytest.mark.parametrize("new_t", TYPES)
@pytest.mark.parametrize("sticky", (False, True))
def test_precedence_creates_any_type_when_absent(kind, new_t, sticky):
    table = make_table(kind)
    entry = RoutingEntry(ADDRESSES[new_t][1], False, 10, sticky)
    assert table.put("p", entry) == PutResult("created", "new-participant", entry)
    assert table.lookup("p") == entry
    assert len(table) == 1 and "p" in table and list(table) == ["p"]


def test_the_grids_say_what_the_seeds_precedence_orders_say():
    # Seed 000: in a CC, InProcess > WebSocketClient > Mqtt/Channel > WebSocket;
    # in libjoynr, InProcess > WebSocket > WebSocketClient > Mqtt/Channel.
    # A higher type may replace a lower one and never the other way round.
    for kind, order in (
        (CC, [["InProcess"], ["WebSocketClient"], ["Mqtt", "Channel"], ["WebSocket"]]),
        (LJ, [["InProcess"], ["WebSocket"], ["WebSocketClient"], ["Mqtt", "Channel"]]),
    ):
        rank = {t: i for i, group in enumerate(order) for t in group}
        for (old, new), clause in REPLACE[kind].items():
            assert (clause is not None) == (rank[new] <= rank[old]), (kind, old, new)


# -- own address -------------------------------------------------------------------------


@pytest.mark.parametrize("broker", ["gbid1", "gbid2"])
def test_cc_refuses_a_route_to_its_own_topic_when_absent(broker):
    table = make_table(CC)
    result = table.put("p", RoutingEntry(MqttAddress(broker, OWN_TOPIC), False, 10))
    assert result == PutResult("refused", "own-address", None)
    assert "p" not in table and len(table) == 0


@pytest.mark.parametrize("old_t", TYPES)
@pytest.mark.parametrize("sticky", (False, True))
def test_cc_refuses_a_route_to_its_own_topic_over_any_entry(old_t, sticky):
    table = make_table(CC)
    old = RoutingEntry(ADDRESSES[old_t][0], False, 10, sticky)
    table.put("p", old)
    result = table.put("p", RoutingEntry(MqttAddress("gbid1", OWN_TOPIC), False, 99, True))
    assert result == PutResult("refused", "own-address", old)
    assert table.items() == [("p", old)]


def test_own_topic_refusal_uses_every_own_mqtt_address():
    table = RoutingTable(
        CC,
        own_addresses=[MqttAddress("gbid1", "t1"), MqttAddress("gbid2", "t2"),
                       WebSocketAddress("WS", "cc", 4242)],
        clock=lambda: 0,
    )
    for topic in ("t1", "t2"):
        assert table.put("p", RoutingEntry(MqttAddress("gbid3", topic), False, 1)).reason == (
            "own-address"
        )
    assert table.put("p", RoutingEntry(MqttAddress("gbid1", "t3"), False, 1)).outcome == "created"


# -- GCD lookup per GBID -----------------------------------------------------------------

GCD_ADDRESS = MqttAddress("gbid1", "global/capabilities/directory")


def gcd_table(kind: str = CC) -> RoutingTable:
    table = make_table(kind, known_gbids=("gbid1", "gbid2", "gbid3"), gcd_participant_id="gcd")
    table.put("gcd", RoutingEntry(GCD_ADDRESS, True, 10**15, True))
    table.put("other", RoutingEntry(MqttAddress("gbid2", "prov/topic"), True, 77))
    return table


@pytest.mark.parametrize("kind", (CC, LJ))
@pytest.mark.parametrize("gbid", ["gbid1", "gbid2", "gbid3"])
def test_gcd_lookup_rewrites_the_broker_to_a_known_gbid(kind, gbid):
    table = gcd_table(kind)
    assert table.lookup("gcd", gbid) == RoutingEntry(
        MqttAddress(gbid, "global/capabilities/directory"), True, 10**15, True
    )
    # The stored entry is not changed by a lookup.
    assert dict(table.items())["gcd"] == RoutingEntry(GCD_ADDRESS, True, 10**15, True)


@pytest.mark.parametrize("gbid", ["gbid4", "", "GBID1"])
def test_gcd_lookup_for_an_unknown_gbid_is_none(gbid):
    assert gcd_table().lookup("gcd", gbid) is None


@pytest.mark.parametrize("gbid", [None, "gbid1", "gbid3", "unknown"])
def test_lookup_of_other_participants_is_the_stored_entry(gbid):
    table = gcd_table()
    assert table.lookup("other", gbid) == RoutingEntry(MqttAddress("gbid2", "prov/topic"), True, 77)
    assert table.lookup("nobody", gbid) is None


def test_gcd_lookup_of_a_non_mqtt_gcd_entry_is_the_stored_entry():
    table = make_table(CC, known_gbids=("gbid1",), gcd_participant_id="gcd")
    entry = RoutingEntry(ADDRESSES["InProcess"][0], True, 5, True)
    table.put("gcd", entry)
    assert table.lookup("gcd", "gbid1") == entry


# -- remove and purge --------------------------------------------------------------------


@pytest.mark.parametrize("kind", (CC, LJ))
def test_remove(kind):
    table = make_table(kind)
    table.put("sticky", RoutingEntry(ADDRESSES["InProcess"][0], False, 0, True))
    table.put("plain", RoutingEntry(ADDRESSES["Mqtt"][0], False, 10**12))
    assert table.remove("sticky") == "refused-sticky"
    assert "sticky" in table
    assert table.remove("plain") == "removed"
    assert "plain" not in table and table.lookup("plain") is None
    assert table.remove("plain") == "absent"
    assert table.remove("never") == "absent"
    assert list(table) == ["sticky"]


@pytest.mark.parametrize("kind", (CC, LJ))
def test_purge_expired_removes_expired_non_sticky_entries(kind):
    table = make_table(kind)
    table.put("expired", RoutingEntry(ADDRESSES["Mqtt"][0], False, 99))
    table.put("expired-sticky", RoutingEntry(ADDRESSES["WebSocket"][0], False, 10, True))
    # Seed: "once this date has passed, the entry can be garbage collected".
    table.put("expires-now", RoutingEntry(ADDRESSES["Channel"][0], False, 100))
    table.put("alive", RoutingEntry(ADDRESSES["WebSocketClient"][0], False, 101))
    assert table.purge_expired(100) == ["expired"]
    assert sorted(table) == ["alive", "expired-sticky", "expires-now"]
    assert sorted(table.purge_expired(1000)) == ["alive", "expires-now"]
    assert list(table) == ["expired-sticky"]
    assert table.purge_expired(10**15) == []


# -- listener ----------------------------------------------------------------------------


def test_listener_receives_every_decision():
    table = make_table(CC, now=50)
    seen: list[RoutingDecision] = []
    table.add_listener(seen.append)
    mqtt, wsc = ADDRESSES["Mqtt"][0], ADDRESSES["WebSocketClient"][0]
    e1 = RoutingEntry(mqtt, True, 100)
    e2 = RoutingEntry(mqtt, True, 200)
    e3 = RoutingEntry(wsc, False, 150)
    e4 = RoutingEntry(ADDRESSES["Mqtt"][1], True, 300)
    own = RoutingEntry(MqttAddress("gbid1", OWN_TOPIC), False, 1)
    sticky = RoutingEntry(ADDRESSES["InProcess"][0], False, 10, True)

    table.put("p", e1, origin="reply-to")
    table.put("p", e2, origin="reply-to")
    table.put("p", e3, origin="registration")
    table.put("p", e4, origin="gcd")
    table.put("q", own)
    table.put("s", sticky, origin="provisioned")
    table.remove("s")
    table.remove("p")
    table.remove("p")
    table.put("x", RoutingEntry(mqtt, False, 20))
    table.purge_expired(60)

    merged = RoutingEntry(mqtt, True, 200)
    replaced = RoutingEntry(wsc, False, 200)
    expected = [
        RoutingDecision("put", "p", "precedence", "created", "new-participant", None, e1, e1,
                        "reply-to"),
        RoutingDecision("put", "p", "precedence", "merged", "same-address", e1, e2, merged,
                        "reply-to"),
        RoutingDecision("put", "p", "precedence", "replaced", "cc-to-websocketclient", merged,
                        e3, replaced, "registration"),
        RoutingDecision("put", "p", "precedence", "refused", "precedence", replaced, e4,
                        replaced, "gcd"),
        RoutingDecision("put", "q", "precedence", "refused", "own-address", None, own, None,
                        "local"),
        RoutingDecision("put", "s", "precedence", "created", "new-participant", None, sticky,
                        sticky, "provisioned"),
        RoutingDecision("remove", "s", "precedence", "refused-sticky", "refused-sticky", sticky,
                        None, sticky),
        RoutingDecision("remove", "p", "precedence", "removed", "removed", replaced, None, None),
        RoutingDecision("remove", "p", "precedence", "absent", "absent", None, None, None),
        RoutingDecision("put", "x", "precedence", "created", "new-participant", None,
                        RoutingEntry(mqtt, False, 20), RoutingEntry(mqtt, False, 20), "local"),
        RoutingDecision("purge", "x", "precedence", "removed", "expired",
                        RoutingEntry(mqtt, False, 20), None, None),
    ]
    assert seen == expected


def test_every_listener_is_called():
    table = make_table(LJ)
    first, second = [], []
    table.add_listener(first.append)
    table.add_listener(second.append)
    table.put("p", RoutingEntry(ADDRESSES["WebSocket"][0], False, 1))
    assert len(first) == len(second) == 1 and first == second


# -- bad input ---------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["browser", "", None, "CLUSTER-CONTROLLER"])
def test_unknown_runtime_kind(kind):
    with pytest.raises(ValueError, match="runtime_kind"):
        RoutingTable(kind)


@pytest.mark.parametrize("policy", ["first-writer-wins", "", None, 3])
def test_unknown_policy(policy):
    with pytest.raises(ValueError, match="policy"):
        RoutingTable(CC, policy=policy)


def _bad_puts():
    good = RoutingEntry(ADDRESSES["Mqtt"][0], False, 10)
    yield "empty participant", ("", good), "participant_id"
    yield "participant not a string", (7, good), "participant_id"
    yield "participant None", (None, good), "participant_id"
    yield "address a string", ("p", RoutingEntry("gbid1/topic", False, 10)), "address"
    yield "address None", ("p", RoutingEntry(None, False, 10)), "address"
    yield "address a dict", ("p", RoutingEntry({"topic": "t"}, False, 10)), "address"
    yield "entry a bare address", ("p", ADDRESSES["Mqtt"][0]), "entry"
    yield "entry None", ("p", None), "entry"
    # A misspelt origin would silently change what gcd-trust decides.
    yield "origin misspelt", ("p", good, "gdc"), "origin: unknown routing-entry origin 'gdc'"
    yield "origin in capitals", ("p", good, "GCD"), "origin: .*'GCD'"
    yield "origin None", ("p", good, None), "origin: .*None"


@pytest.mark.parametrize("args, field", [c[1:] for c in _bad_puts()],
                         ids=[c[0] for c in _bad_puts()])
def test_bad_put_raises_value_error_naming_the_field_and_changes_nothing(args, field):
    table = make_table(CC)
    existing = RoutingEntry(ADDRESSES["WebSocket"][0], False, 10)
    table.put("p", existing)
    seen = []
    table.add_listener(seen.append)
    with pytest.raises(ValueError, match=field):
        table.put(*args)
    assert table.items() == [("p", existing)]
    assert seen == []


def test_origin_is_accepted_as_the_enum_or_its_plain_value_and_reported_as_the_enum():
    table = make_table(CC)
    seen: list[RoutingDecision] = []
    table.add_listener(seen.append)
    table.put("p", RoutingEntry(ADDRESSES["Mqtt"][0], False, 10), origin="routing-provider")
    table.put("q", RoutingEntry(ADDRESSES["Mqtt"][1], False, 10), origin=Origin.REPLY_TO)
    table.put("r", RoutingEntry(ADDRESSES["Channel"][0], False, 10))
    assert [d.origin for d in seen] == [Origin.ROUTING_PROVIDER, Origin.REPLY_TO, Origin.LOCAL]
    assert all(type(d.origin) is Origin for d in seen)


# -- properties: random operation sequences under precedence -----------------------------

POOL = [a for pair in ADDRESSES.values() for a in pair] + [MqttAddress("gbid2", OWN_TOPIC)]
PIDS = ("p0", "p1", "p2", "gcd")


class PrecedenceMachine(RuleBasedStateMachine):
    kind = CC

    @initialize()
    def setup(self):
        self.now = 0
        self.table = make_table(self.kind, known_gbids=("gbid1", "gbid2"),
                                gcd_participant_id="gcd")
        self.table.clock = lambda: self.now
        self.decisions: list[RoutingDecision] = []
        self.table.add_listener(self.decisions.append)

    def snapshot(self):
        return self.table.items()

    @rule(
        pid=st.sampled_from(PIDS),
        address=st.sampled_from(POOL),
        visible=st.booleans(),
        expiry=st.integers(0, 200),
        sticky=st.booleans(),
        origin=st.sampled_from(list(Origin)),
    )
    def put(self, pid, address, visible, expiry, sticky, origin):
        before = dict(self.snapshot())
        before_items = self.snapshot()
        old = before.get(pid)
        new = RoutingEntry(address, visible, expiry, sticky)
        result = self.table.put(pid, new, origin=origin)
        after = dict(self.snapshot())
        assert self.decisions[-1].op == "put" and self.decisions[-1].old == old
        if result.outcome == "refused":
            assert result.reason in REFUSED_REASONS
            assert self.snapshot() == before_items
            assert result.entry == old
        else:
            assert result.entry == after[pid]
            # Other participants are untouched.
            assert {k: v for k, v in after.items() if k != pid} == {
                k: v for k, v in before.items() if k != pid
            }
        if old is None:
            own = self.kind == CC and isinstance(address, MqttAddress) and (
                address.topic == OWN_TOPIC
            )
            assert result.outcome == ("refused" if own else "created")
        else:
            now_entry = after[pid]
            assert now_entry.expiry_date_ms >= old.expiry_date_ms
            if old.is_sticky:
                assert now_entry.address == old.address
                assert now_entry.is_sticky

    @rule(pid=st.sampled_from(PIDS))
    def remove(self, pid):
        old = dict(self.snapshot()).get(pid)
        outcome = self.table.remove(pid)
        if old is None:
            assert outcome == "absent"
        elif old.is_sticky:
            assert outcome == "refused-sticky"
            assert dict(self.snapshot())[pid] == old
        else:
            assert outcome == "removed"
            assert pid not in self.table

    @rule(step=st.integers(0, 80))
    def advance_and_purge(self, step):
        self.now += step
        before = dict(self.snapshot())
        purged = self.table.purge_expired(self.now)
        expected = {p for p, e in before.items() if e.expiry_date_ms < self.now and not e.is_sticky}
        assert set(purged) == expected
        assert dict(self.snapshot()) == {p: e for p, e in before.items() if p not in expected}

    @precondition(lambda self: "gcd" in self.table)
    @rule(gbid=st.sampled_from(["gbid1", "gbid2", "gbid9"]))
    def lookup_gcd(self, gbid):
        stored = dict(self.snapshot())["gcd"]
        found = self.table.lookup("gcd", gbid)
        if isinstance(stored.address, MqttAddress):
            if gbid == "gbid9":
                assert found is None
            else:
                assert found.address == MqttAddress(gbid, stored.address.topic)
        else:
            assert found == stored
        assert dict(self.snapshot())["gcd"] == stored

    @invariant()
    def one_entry_per_participant(self):
        pids = [p for p, _ in self.table.items()]
        assert len(pids) == len(set(pids)) == len(self.table)
        assert set(pids) <= set(PIDS)


class LibjoynrPrecedenceMachine(PrecedenceMachine):
    kind = LJ


TestPrecedenceClusterController = PrecedenceMachine.TestCase
TestPrecedenceLibjoynr = LibjoynrPrecedenceMachine.TestCase
