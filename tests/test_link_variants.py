"""The link registry's variants (core.links.variants): each breaks one sentence of seed 004,
shown here as the seed's behaviour next to the variant's on the same input; and how the
cluster controller's broker sessions recover, reject and resume under the seed's rules,
on the memory network."""

from __future__ import annotations

import re
import threading
from pathlib import Path

import pytest

from joynr_sim.core.links import (
    ERR_INTERNAL,
    ERR_NOT_FOUND,
    ERR_RESOURCE_LOCKED,
    LINK_VARIANT_NAMES,
    LINK_VARIANTS,
    Delivery,
    LinkAttached,
    LinkError,
    LinkEvent,
    LinkRegistry,
    LinkResumed,
    LinkStoreError,
    StoredLink,
    Terminus,
    validate_mqtt_client_id,
)
from joynr_sim.core.links.variants import (
    NO_DETACHED_TIMEOUT,
    NO_RECOVER,
    NO_REJECT,
    NO_THIEF_QUEUE,
    RESUME_BY_UNSETTLED,
    STEAL_REFUSED,
    UNCAPPED_DURABILITY,
)
from joynr_sim.core.variants import VARIANTS, variant_of
from joynr_sim.network import virtual_loop
from joynr_sim.runtime.sessions import open_link_registry
from joynr_sim.scenario import parse_scenario
from joynr_sim.scenario.runner import run_scenario
from joynr_sim.simulation import Simulation
from joynr_sim.store.link_store import JsonLinkStore, MemoryLinkStore, SqliteLinkStore
from joynr_sim.trace import read_run
from test_links import JOIN_S, GatedStore

SEED_TEXT = (Path(__file__).resolve().parent.parent.parent / "shared" / "seeds" / "004_b96328aa0d55de66.txt")


class Clock:
    def __init__(self, now: int = 1_000) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def registry(variant: str | None, **kwargs) -> tuple[LinkRegistry, list[LinkEvent]]:
    events: list[LinkEvent] = []
    kwargs.setdefault("clock", Clock())
    reg = LinkRegistry(variant=variant, listeners=[events.append], **kwargs)
    return reg, events


def durable_store() -> SqliteLinkStore:
    return SqliteLinkStore(":memory:")


def src(address: str = "cc1/topic", durability: int = 0) -> Terminus:
    return Terminus(address, durability)


# -- the registry of variants ---------------------------------------------------------------


def test_every_link_variant_is_registered_and_quotes_its_seed():
    assert len(LINK_VARIANTS) == len(set(LINK_VARIANT_NAMES)) == 7
    for name, sentence, behaviour in LINK_VARIANTS:
        assert VARIANTS[name].part == "links" and behaviour
        assert sentence.startswith("004_b96328aa0d55de66.txt: '")
    assert variant_of(f"precedence+{NO_RECOVER}", "links") == NO_RECOVER
    assert variant_of(f"precedence+{NO_RECOVER}", "gcd") is None


@pytest.mark.skipif(not SEED_TEXT.exists(), reason="the seeds are beside the project checkout (../shared/seeds), "
                    "not in a clone of it: the quotes are checked where they are")
def test_every_link_variant_quotes_the_seed_word_for_word():
    seed = " ".join(SEED_TEXT.read_text(encoding="utf-8").split())
    for name, sentence, _ in LINK_VARIANTS:
        for quoted in re.findall(r"'(.+?)'(?:, |$)", sentence.split(": ", 1)[1]):
            assert " ".join(quoted.split()) in seed, (name, quoted)


def test_an_unknown_variant_is_refused_and_reopen_keeps_the_variant(tmp_path):
    with pytest.raises(LinkError, match="variant: expected None or one of links:"):
        LinkRegistry(variant="links:bogus")
    with pytest.raises(LinkError, match="variant"):
        LinkRegistry(variant="gcd:ignores-gbids")
    reg, _ = registry(STEAL_REFUSED, store=durable_store())
    assert reg.reopen(holder="p2").variant == STEAL_REFUSED
    opened = open_link_registry(tmp_path, "cc1", Clock(), variant=NO_RECOVER)
    try:
        assert opened.variant == NO_RECOVER and opened.reopen().variant == NO_RECOVER
        assert open_link_registry(tmp_path, "cc2", Clock()).variant is None
    finally:
        opened.store.close()


# -- links:resume-by-unsettled ----------------------------------------------------------------


@pytest.mark.parametrize("variant, mode", [(None, "resume"), (RESUME_BY_UNSETTLED, "reattach")])
def test_a_suspended_link_with_nothing_unsettled(variant, mode):
    # Terminus exists, LinkEndpoint does not exist: the seed's resume, whatever is unsettled.
    reg, events = registry(variant)
    link = reg.get_sending_link("gbid1", "cc1")
    link.attach("conn1", src(), None)
    link.detach("conn1", error="connection-lost")
    out = link.attach("conn2", src(), None)
    assert (out.mode, out.resumed) == (mode, mode == "resume")
    assert len([e for e in events if isinstance(e, LinkResumed)]) == (mode == "resume")


@pytest.mark.parametrize("variant, mode", [(None, "reattach"), (RESUME_BY_UNSETTLED, "resume")])
def test_an_attached_link_with_deliveries_in_flight(variant, mode):
    # Terminus exists, LinkEndpoint exists (its connection comes back before the loss was
    # noticed): the seed's reattach, though deliveries are unsettled.
    reg, _ = registry(variant)
    link = reg.get_sending_link("gbid1", "cc1")
    link.attach("conn1", src(), None)
    link.add_unsettled("m1")
    out = link.attach("conn1", src(), None)
    assert (out.mode, out.resumed) == (mode, mode == "resume")
    assert link.unsettled == {"m1": None}


# -- links:no-recover -------------------------------------------------------------------------


@pytest.mark.parametrize("variant", [None, NO_RECOVER])
def test_an_attach_with_a_null_source_and_a_stored_terminus(variant):
    store = durable_store()
    reg, _ = registry(variant, store=store, holder="p")
    reg.get_sending_link("gbid1", "cc1").attach("p1", src("kept", 2), None)
    reg.get_sending_link("gbid1", "cc1").add_unsettled("m1")
    link = reg.reopen().get_sending_link("gbid1", "cc1")  # a restarted process knows the name only
    out = link.attach("p2", None, Terminus("gbid1"))
    if variant is None:
        assert (out.mode, out.recovered, out.terminus, link.owner) == ("recover", True, src("kept", 2), "p2")
        assert out.resumed and out.resend == (Delivery("m1", None),)
    else:
        assert (out.mode, out.error.condition, link.owner) == ("reject", ERR_NOT_FOUND, None)
        assert link.terminus == src("kept", 2) and link.unsettled == {"m1": None}  # kept, not used
    store.close()


# -- links:no-reject --------------------------------------------------------------------------


@pytest.mark.parametrize("variant", [None, NO_REJECT])
def test_an_attach_whose_terminus_is_not_found(variant):
    reg, events = registry(variant, store=durable_store())
    link = reg.get_sending_link("gbid1", "cc1")
    out = link.attach("conn1", None, Terminus("gbid1"))
    if variant is None:
        assert (out.mode, out.ok, out.error.condition, link.owner) == ("reject", False, ERR_NOT_FOUND, None)
        assert link.terminus is None
    else:  # attached to nothing, and nothing of it is kept
        assert (out.mode, out.ok, link.owner, link.terminus) == ("establish", True, "conn1", Terminus())
        assert reg.store.load() == []
    assert [e.mode for e in events if isinstance(e, LinkAttached)] == [out.mode]


class UnwritableStore(SqliteLinkStore):
    def __init__(self) -> None:
        super().__init__(":memory:")

    def save(self, record: StoredLink) -> None:
        raise LinkStoreError("disk full")


@pytest.mark.parametrize("variant", [None, NO_REJECT])
def test_an_attach_whose_terminus_cannot_be_created(variant):
    reg, _ = registry(variant, store=UnwritableStore())
    link = reg.get_sending_link("gbid1", "cc1")
    out = link.attach("conn1", src("t", 2), None)
    if variant is None:
        assert (out.mode, out.error.condition, link.owner, link.terminus) == ("reject", ERR_INTERNAL, None, None)
    else:  # attached from memory: a restart would know nothing of it
        assert (out.mode, out.error, link.owner, link.terminus) == ("establish", None, "conn1", src("t", 2))
        assert reg.store.load() == []


# -- links:uncapped-durability ----------------------------------------------------------------


@pytest.mark.parametrize("variant, granted", [(None, 1), (UNCAPPED_DURABILITY, 2)])
def test_durability_asked_beyond_a_json_store(tmp_path, variant, granted):
    store = JsonLinkStore(tmp_path / "links.json")  # keeps the configuration, not the unsettled state
    reg, _ = registry(variant, store=store, holder="p")
    link = reg.get_sending_link("gbid1", "cc1")
    out = link.attach("p1", src("t", 2), None)
    assert out.terminus.durability == granted and link.terminus.durability == granted
    link.add_unsettled("m1")
    # The variant promised the unsettled state: the restarted process finds it gone.
    again = reg.reopen().get_sending_link("gbid1", "cc1")
    assert again.terminus == src("t", 1) and again.unsettled == {}


@pytest.mark.parametrize("variant, granted", [(None, 0), (UNCAPPED_DURABILITY, 2)])
def test_durability_asked_of_a_memory_store(variant, granted):
    reg, _ = registry(variant, store=MemoryLinkStore())
    out = reg.get_sending_link("gbid1", "cc1").attach("conn1", src("t", 2), None)
    assert out.terminus.durability == granted
    assert reg.reopen().find_link("sending", "gbid1", "cc1") is None  # kept nothing either way


# -- links:no-thief-queue ---------------------------------------------------------------------


@pytest.mark.parametrize("variant, served", [(None, [2, 3, 4, 5]), (NO_THIEF_QUEUE, [5, 4, 3, 2])])
def test_thieves_waiting_for_a_link(variant, served):
    store = GatedStore()
    reg, events = registry(variant, store=store)
    link = reg.get_sending_link("gbid1", "cc1")
    link.attach("c0", src("t0", 1), None)
    store.armed = True

    def thief(n: int) -> threading.Thread:
        t = threading.Thread(target=lambda: link.attach(f"c{n}", src(f"t{n}", 1), None), daemon=True)
        t.start()
        return t

    threads = [thief(1)]
    assert store.entered.wait(JOIN_S)  # c1 holds the link's turn, blocked in the store
    for n in range(2, 6):
        threads.append(thief(n))
        assert link.wait_pending(n, JOIN_S)  # c<n> waits behind the others
    store.gate.set()
    for t in threads:
        t.join(JOIN_S)
    assert not any(t.is_alive() for t in threads) and link.pending() == 0
    order = [int(e.connection_id[1:]) for e in events if isinstance(e, LinkAttached)]
    assert order == [0, 1, *served]
    assert link.owner == f"c{served[-1]}"


# -- links:steal-refused ----------------------------------------------------------------------


@pytest.mark.parametrize("variant", [None, STEAL_REFUSED])
def test_a_second_attach_while_attached(variant):
    reg, _ = registry(variant)
    link = reg.get_sending_link("gbid1", "cc1")
    told: list[object] = []
    link.attach("conn1", src("a"), None, on_stolen=told.append)
    out = link.attach("conn2", src("b"), None)
    if variant is None:
        assert (out.mode, out.stolen_from, link.owner, len(told)) == ("steal", "conn1", "conn2", 1)
    else:
        assert (out.mode, out.error.condition, link.owner, told) == ("reject", ERR_RESOURCE_LOCKED, "conn1", [])
        assert link.terminus == src("a")


@pytest.mark.parametrize("variant", [None, STEAL_REFUSED])
def test_a_second_attach_from_another_process_sharing_the_store(variant):
    store = durable_store()
    a, _ = registry(variant, store=store, holder="a")
    b, _ = registry(variant, store=store, holder="b")
    a.get_sending_link("gbid1", "twin").attach("a1", src("t", 1), None)
    out = b.get_sending_link("gbid1", "twin").attach("b1", src("t", 1), None)
    assert out.mode == ("steal" if variant is None else "reject")
    assert store.find("sending", "gbid1", "twin").owner == ("b1" if variant is None else "a1")


# -- links:no-detached-timeout ----------------------------------------------------------------


@pytest.mark.parametrize("variant", [None, NO_DETACHED_TIMEOUT])
def test_a_link_detached_past_the_timeout(variant):
    store = durable_store()
    reg, _ = registry(variant, store=store, clock=Clock(1_000), detached_timeout_ms=100)
    link = reg.get_sending_link("gbid1", "cc1")
    link.attach("conn1", src("t", 1), None)
    link.detach("conn1", error="connection-lost")
    purged = reg.purge_expired(1_101)
    if variant is None:
        assert purged == [link] and store.load() == [] and reg.find_link("sending", "gbid1", "cc1") is None
    else:
        assert purged == [] and len(store.load()) == 1 and reg.find_link("sending", "gbid1", "cc1") is link


# -- the broker sessions of a cluster controller, on the memory network ------------------------

RESTARTS = """\
name: restarts
reproduces: {seed: 004_b96328aa0d55de66.txt, scenario: a cluster controller's restarts}
smoke: a test's
backends: [gbid1]
runtimes:
  - {kind: cluster-controller, id: cc1}
steps:
  - crash: cc1
  - restart: cc1
  - stop: cc1
  - start: cc1
  - cut: {runtime: cc1, gbid: gbid1}
  - heal: {runtime: cc1, gbid: gbid1}
"""


@pytest.mark.parametrize("variant, modes", [
    # A crash: the terminus recovered by name. A clean stop closed the links: the recover
    # finds nothing and is rejected, the link established. A cut: resumed, not recovered.
    (None, ["establish", "recover", "reject", "establish", "resume"]),
    (NO_RECOVER, ["establish", "reject", "resume", "reject", "establish", "resume"]),
    (NO_REJECT, ["establish", "recover", "establish", "resume"]),  # the stop: attached to nothing
    (RESUME_BY_UNSETTLED, ["establish", "recover", "reject", "establish", "reattach"]),
])
async def test_a_restarted_cluster_controller_recovers_its_sessions_by_link_name(tmp_path, variant, modes):
    scenario = parse_scenario(RESTARTS)
    result = await run_scenario(scenario, tmp_path, network="memory", seed=3, policy=variant)
    assert result.passed, result.error or result.failed_step
    attaches = [e for e in read_run(result.run_dir) if e["ev"] == "link.attach" and e["rt"] == "cc1"]
    assert [e["mode"] for e in attaches] == modes
    recovered = [e for e in read_run(result.run_dir) if e["ev"] == "link.recover" and e["rt"] == "cc1"]
    assert len(recovered) == modes.count("recover")


@pytest.mark.parametrize("variant, granted", [(None, 1), (UNCAPPED_DURABILITY, 2)])
def test_a_cluster_controller_over_a_json_link_store(tmp_path, variant, granted):
    # No scenario reaches this: every runtime's link store is SQLite, which keeps all three
    # durabilities. Here a cluster controller's store keeps the configuration only: the seed
    # grants durability 1; the variant grants the 2 asked for, and after a crash the
    # recovered terminus shows what the store really kept.
    async def main() -> None:
        rules = "precedence" if variant is None else f"precedence+{variant}"
        async with Simulation(tmp_path, gbids=["gbid1"], network="memory", policy=rules, seed=5) as sim:
            sim._link_registries["cc1"] = LinkRegistry(
                store=JsonLinkStore(tmp_path / "cc1.links.json"), clock=sim.clock.now_ms,
                link_name_validator=validate_mqtt_client_id, variant=variant_of(rules, "links"))
            cc = await sim.cluster_controller("cc1", ["gbid1"])
            await cc.crash()
            await cc.restart()

    virtual_loop.run(main())
    attaches = [(e["mode"], e["durability"]) for e in read_run(tmp_path) if e["ev"] == "link.attach"
                and e["rt"] == "cc1"]
    assert attaches == [("establish", granted), ("recover", 1)]
