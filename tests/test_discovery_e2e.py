"""Global discovery end to end: GCD instances per GBID on real brokers, one shared store."""

from __future__ import annotations

import pytest

from e2e_helpers import events, until
from joynr_sim.core.address import MqttAddress
from joynr_sim.core.discovery import DiscoveryError, DiscoveryErrorException
from joynr_sim.core.errors import DiscoveryException, ProviderRuntimeException
from joynr_sim.core.gcd import GCD_PARTICIPANT_ID
from joynr_sim.runtime.participants import EchoProvider
from joynr_sim.simulation import Simulation

pytestmark = pytest.mark.e2e  # every test runs brokers and runtimes

GBIDS = ["gbid1", "gbid2"]


async def gcd_rows(sim: Simulation, participant_id: str) -> set[str]:
    """The GBIDs the shared store holds a registration of the participant in."""
    def rows(gcd):
        return {r.gbid for r in gcd.store.all_rows() if r.entry.participant_id == participant_id}
    return await sim.gcds["gbid1"].run(rows)


@pytest.mark.parametrize("broker", ["amqtt", "mosquitto"])
async def test_provider_in_both_backends_is_found_through_the_reachable_one(tmp_path, broker):
    async with Simulation(tmp_path, gbids=GBIDS, broker=broker) as sim:
        ccp = await sim.cluster_controller("ccp", GBIDS)
        provider_app = await sim.libjoynr("provider-app", ccp)
        await provider_app.register_provider(
            "dom", "joynrsim/Echo", EchoProvider(), participant_id="lc-provider", gbids=GBIDS
        )
        assert await gcd_rows(sim, "lc-provider") == {"gbid1", "gbid2"}

        for cc_id, gbids in (("cc-both", GBIDS), ("cc-one", ["gbid2"])):
            cc = await sim.cluster_controller(cc_id, gbids)
            app = await sim.libjoynr(f"app-{cc_id}", cc)
            proxy = await app.discover_proxy("joynrsim/Echo", "dom", scope="GLOBAL_ONLY")
            assert proxy.provider_participant_id == "lc-provider"
            assert await proxy.call("echo", cc_id, ttl_ms=10_000) == cc_id
            # The lookup result became a routing entry through the backend the CC can reach.
            entry = cc.table.lookup("lc-provider")
            assert entry.address == MqttAddress(gbids[0], "ccp") and entry.is_globally_visible
            # The libjoynr runtime reaches it through its cluster controller.
            assert app.table.lookup("lc-provider").address == app.cc_address

    lookups = events(tmp_path, "gcd.lookup", op="lookup_domains")
    assert {e["rt"]: e["result"] for e in lookups} == {
        "gcd-gbid1": [{"participant": "lc-provider", "gbid": "gbid1"}],
        "gcd-gbid2": [{"participant": "lc-provider", "gbid": "gbid2"}],
    }


async def test_selected_backend_without_the_provider_and_old_joynr(tmp_path):
    async with Simulation(tmp_path, gbids=GBIDS, broker="mosquitto") as sim:
        ccp = await sim.cluster_controller("ccp", GBIDS)
        await ccp.register_provider("dom", "joynrsim/Echo", EchoProvider(), participant_id="lu", gbids=["gbid2"])
        consumer_cc = await sim.cluster_controller("consumer", GBIDS)
        app = await sim.libjoynr("app", consumer_cc)

        with pytest.raises(DiscoveryErrorException) as err:
            await app.discover_proxy("joynrsim/Echo", participant_id="lu", gbids=["gbid1"], scope="GLOBAL_ONLY")
        assert err.value.error is DiscoveryError.NO_ENTRY_FOR_SELECTED_BACKENDS
        with pytest.raises(DiscoveryErrorException) as err:
            await app.discover_proxy("joynrsim/Echo", "dom", gbids=["gbid1"], scope="GLOBAL_ONLY")
        assert err.value.error is DiscoveryError.NO_ENTRY_FOR_SELECTED_BACKENDS
        # Selecting gbid2 finds it.
        proxy = await app.discover_proxy("joynrsim/Echo", "dom", gbids=["gbid2"], scope="GLOBAL_ONLY")
        assert await proxy.call("echo", "via gbid2") == "via gbid2"

        # An old cluster controller on gbid1 uses the old methods: only its own backend.
        old = await sim.cluster_controller("old-cc", ["gbid1"], old_joynr=True)
        with pytest.raises(DiscoveryException):
            await old.discover_proxy("joynrsim/Echo", "dom", scope="GLOBAL_ONLY")
        await old.register_provider("dom", "joynrsim/Echo", EchoProvider(), participant_id="old-provider")
        assert await gcd_rows(sim, "old-provider") == {"gbid1"}
        # ... and a new CC that selects gbid2 does not see the old CC's provider.
        with pytest.raises(DiscoveryErrorException) as err:
            await app.discover_proxy("joynrsim/Echo", participant_id="old-provider", gbids=["gbid2"],
                                     scope="GLOBAL_ONLY")
        assert err.value.error is DiscoveryError.NO_ENTRY_FOR_SELECTED_BACKENDS

    ops = {(e["rt"], e["op"]) for e in events(tmp_path) if e["ev"].startswith("gcd.")}
    assert ("gcd-gbid1", "add_old") in ops and ("gcd-gbid1", "lookup_domains_old") in ops


async def test_restart_with_remove_stale_drops_the_previous_lifecycle(tmp_path):
    async with Simulation(tmp_path, gbids=GBIDS, broker="amqtt") as sim:
        cc = await sim.cluster_controller("cc1", GBIDS)
        await cc.register_provider("dom", "joynrsim/Echo", EchoProvider(), participant_id="old-one", gbids=GBIDS)
        assert await gcd_rows(sim, "old-one") == {"gbid1", "gbid2"}

        await cc.crash()
        sim.clock.advance(1_000)  # the next lifecycle starts strictly later
        await cc.restart()
        await cc.register_provider("dom", "joynrsim/Echo", EchoProvider(), participant_id="new-one", gbids=GBIDS)
        # One removeStale per GBID after each start: the second lifecycle makes it four. Counted
        # where they arrive: a crash may kill the first lifecycle before it traced the last reply.
        await until(lambda: len(events(tmp_path, "gcd.remove_stale", cc="cc1")) == 4)
        assert await gcd_rows(sim, "old-one") == set()
        assert await gcd_rows(sim, "new-one") == {"gbid1", "gbid2"}

    stale = events(tmp_path, "gcd.remove_stale", cc="cc1")
    removed = sorted(tuple(r) for e in stale for r in e["removed"])
    assert removed == [("old-one", "gbid1"), ("old-one", "gbid2")]


async def test_touch_at_the_freshness_interval(tmp_path):
    async with Simulation(tmp_path, gbids=GBIDS, broker="amqtt") as sim:
        cc = await sim.cluster_controller("cc1", GBIDS, freshness_interval_ms=60_000)
        await cc.register_provider("dom", "joynrsim/Echo", EchoProvider(), participant_id="p", gbids=GBIDS)
        before = await sim.gcds["gbid1"].run(lambda g: g.lookup_participant("p", ["gbid1"]).last_seen_date_ms)
        sim.clock.advance(60_000)
        await until(lambda: len(events(tmp_path, "gcd.touch", cc="cc1")) == 2)
        after = await sim.gcds["gbid1"].run(lambda g: g.lookup_participant("p", ["gbid1"]).last_seen_date_ms)
        assert after >= before + 60_000
        assert events(tmp_path, "gcd.touch", cc="cc1")[0]["participants"] == ["p"]


async def test_bad_input_is_refused_and_changes_nothing(tmp_path):
    async with Simulation(tmp_path, gbids=GBIDS, broker="amqtt", processes=False) as sim:
        cc = await sim.cluster_controller("cc1", GBIDS)
        app = await sim.libjoynr("app", cc)
        for gbids, error in (
            (["gbid1", "gbid1"], DiscoveryError.INVALID_GBID),
            ([""], DiscoveryError.INVALID_GBID),
            (["nowhere"], DiscoveryError.UNKNOWN_GBID),
        ):
            with pytest.raises(DiscoveryErrorException) as err:
                await app.register_provider("dom", "joynrsim/Echo", EchoProvider(), participant_id="p", gbids=gbids)
            assert err.value.error is error
            assert "p" not in app.table and "p" not in cc.table
            assert await gcd_rows(sim, "p") == set()
        # Nobody provides this interface.
        with pytest.raises(DiscoveryException):
            await app.discover_proxy("joynrsim/Counter", "dom")
        # A malformed entry and a non-MQTT address sent to the GCD itself.
        entry = {"participantId": "x", "domain": "d"}
        with pytest.raises(ProviderRuntimeException, match="discovery entry field"):
            await cc.request(cc.discovery.participant_id, GCD_PARTICIPANT_ID, "add", [entry, ["gbid1"]], gbid="gbid1")
        await cc.register_provider("dom", "joynrsim/Echo", EchoProvider(), participant_id="good", gbids=["gbid1"])
        wire = cc.discovery.lcd.global_entry("good").to_wire()
        wire["address"] = '{"_typeName":"joynr.system.RoutingTypes.WebSocketClientAddress","id":"c"}'
        wire["participantId"] = "ws-addressed"
        with pytest.raises(ProviderRuntimeException, match="address"):
            await cc.request(cc.discovery.participant_id, GCD_PARTICIPANT_ID, "add", [wire, ["gbid1"]], gbid="gbid1")
        assert await gcd_rows(sim, "ws-addressed") == set()
        assert await gcd_rows(sim, "x") == set()


@pytest.mark.postgres
async def test_gcd_instances_share_a_postgresql_store(tmp_path):
    """The GCD service on PostgreSQL: the run's own table, shared by both instances."""
    import hashlib
    import os

    import psycopg

    url = os.environ.get("JOYNR_SIM_TEST_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test")
    async with Simulation(tmp_path, gbids=GBIDS, broker="amqtt", gcd_store=url) as sim:
        cc = await sim.cluster_controller("cc1", ["gbid1"])
        await cc.register_provider("dom", "joynrsim/Echo", EchoProvider(), participant_id="pg-p",
                                   gbids=["gbid1"])
        other = await sim.cluster_controller("cc2", ["gbid1"])
        proxy = await other.discover_proxy("joynrsim/Echo", "dom", scope="GLOBAL_ONLY")
        assert await proxy.call("echo", "on postgres") == "on postgres"
        # Registered through gbid1's instance, visible through gbid2's.
        found = await sim.gcds["gbid2"].run(lambda g: g.lookup_participant("pg-p", ["gbid1"]))
        assert found.participant_id == "pg-p"
        table = f"gcd_{hashlib.sha1(sim.run_id.encode()).hexdigest()[:16]}_entries"
        with psycopg.connect(url, autocommit=True) as conn:
            assert conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0] == 1
    # A graceful stop unregisters: the provider leaves the GCD.
    with psycopg.connect(url, autocommit=True) as conn:
        assert conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0] == 0
        conn.execute(f"DROP TABLE {table}")


@pytest.mark.parametrize("policy, outcome", [("precedence", "refused"), ("last-writer-wins", "replaced")])
async def test_a_global_lookup_offers_a_local_providers_entry_and_the_policy_decides(tmp_path, policy, outcome):
    """Seed 000: "If a RoutingEntry with local address already exists for a given provider
    participantId, it is being kept". The GCD still holds the provider's entry from where it
    was registered globally before (cc2); it is now registered locally at cc1. A lookup that
    consults the GCD offers that entry to cc1's routing table: precedence keeps the
    WebSocketClient entry, last-writer-wins replaces it."""
    async with Simulation(tmp_path, gbids=["gbid1"], policy=policy) as sim:
        cc1 = await sim.cluster_controller("cc1", ["gbid1"])
        cc2 = await sim.cluster_controller("cc2", ["gbid1"])
        old_home = await sim.libjoynr("old-home", cc2)
        await old_home.register_provider("dom", "joynrsim/Echo", EchoProvider(), participant_id="p", scope="GLOBAL")
        new_home = await sim.libjoynr("new-home", cc1)
        await new_home.register_provider("dom", "joynrsim/Echo", EchoProvider(), participant_id="p", scope="LOCAL")
        consumer = await sim.libjoynr("consumer", cc1)
        proxy = await consumer.discover_proxy("joynrsim/Echo", "dom", scope="LOCAL_AND_GLOBAL")
        assert proxy.provider_participant_id == "p"
        held = cc1.table.lookup("p").address
        assert type(held).__name__ == ("WebSocketClientAddress" if outcome == "refused" else "MqttAddress")
    (offer,) = events(tmp_path, "rt.put", rt="cc1", participant="p", origin="gcd")
    assert offer["outcome"] == outcome
    assert offer["old"]["type"] == "WebSocketClient" and offer["new"] == {**offer["new"], "type": "Mqtt",
                                                                        "addr": "gbid1/cc2"}


@pytest.mark.parametrize("scope, visible", [("LOCAL_ONLY", False), ("LOCAL_THEN_GLOBAL", False),
                                            ("LOCAL_AND_GLOBAL", False), ("GLOBAL_ONLY", True)])
async def test_a_proxy_of_a_local_provider_is_globally_visible_when_discovered_globally(tmp_path, scope, visible):
    """Seed 000: a proxy is globally visible when "it has discovered a local provider
    globally (DiscoveryScope: GLOBAL ...)"."""
    async with Simulation(tmp_path, gbids=["gbid1"]) as sim:
        cc = await sim.cluster_controller("cc1", ["gbid1"])
        provider_app = await sim.libjoynr("provider-app", cc)
        await provider_app.register_provider("dom", "joynrsim/Echo", EchoProvider(), participant_id="p", scope="GLOBAL")
        consumer = await sim.libjoynr("consumer", cc)
        proxy = await consumer.discover_proxy("joynrsim/Echo", "dom", scope=scope)
        assert consumer.table.lookup(proxy.participant_id).is_globally_visible is visible
        assert cc.table.lookup(proxy.participant_id).is_globally_visible is visible


async def test_the_gcd_removes_entries_their_cluster_controller_stopped_refreshing(tmp_path):
    """Seed 001: entries not seen for the GCD's last-seen timeout are removed; a cluster
    controller that runs touches its entries at the freshness interval and keeps them."""
    hour = 3_600_000
    async with Simulation(tmp_path, gbids=["gbid1"], gcd_last_seen_timeout_ms=2 * hour) as sim:
        alive = await sim.cluster_controller("alive", ["gbid1"])
        gone = await sim.cluster_controller("gone", ["gbid1"])
        await alive.register_provider("dom", "joynrsim/Echo", EchoProvider(), participant_id="kept")
        await gone.register_provider("dom", "joynrsim/Echo", EchoProvider(), participant_id="swept")
        await gone.crash()
        for n in range(1, 4):  # three hours, an hour at a time: "alive" touches every hour
            sim.clock.advance(hour)
            await until(lambda n=n: len(events(tmp_path, "gcd.touch", cc="alive")) >= n)
        await until(lambda: events(tmp_path, "gcd.remove_stale", op="sweep"))
        assert await gcd_rows(sim, "swept") == set()
        assert await gcd_rows(sim, "kept") == {"gbid1"}
    (sweep,) = events(tmp_path, "gcd.remove_stale", op="sweep")
    assert sweep["removed"] == [["swept", "gbid1"]] and sweep["cc"] is None
