"""Brokers let in only who belongs: every client logs in as itself with its own password,
reads only its own prefix and publishes only to unicast topics (``brokers.access``), on
amqtt and on Mosquitto. The model itself first, then both brokers with real clients and
real cluster controllers."""

from __future__ import annotations

from pathlib import Path

import pytest
from amqtt.session import Session
from hypothesis import given
from hypothesis import strategies as st
from paho.mqtt.client import topic_matches_sub

from broker_helpers import BrokerFactory
from brokers import BrokerError, BrokerSet, access
from brokers.amqtt_broker import refusal
from brokers.mosquitto import acl_section
from joynr_sim.simulation import Simulation
from joynr_sim.transport.mqtt import unicast_topic
from test_brokers import KINDS, Client, in_thread, unique
from test_runtime_e2e import events, until

GCD_UNICAST = "discoverydirectory_channelid/low"
GARBAGE = b"\x00\xffnot msgpack"

# -- the model -------------------------------------------------------------------------

levels = st.sampled_from(["a", "b", "cc1", "low", "", "$x"])
filter_levels = st.one_of(levels, st.just("+"))


@st.composite
def topic_filters(draw: st.DrawFn) -> str:
    parts = draw(st.lists(filter_levels, min_size=1, max_size=4))
    if draw(st.booleans()):
        parts.append("#")
    return "/".join(parts)


topics = st.lists(levels, min_size=1, max_size=5).map("/".join)


@given(topic_filters(), topics)
def test_covers_a_topic_exactly_when_paho_matches_it(allowed: str, topic: str) -> None:
    assert access.covers(allowed, topic) == topic_matches_sub(allowed, topic)


@given(topic_filters(), topic_filters(), topics)
def test_a_covered_filter_matches_no_topic_the_covering_one_misses(allowed: str, requested: str, topic: str) -> None:
    if access.covers(allowed, requested) and topic_matches_sub(requested, topic):
        assert topic_matches_sub(allowed, topic)


def test_a_client_reads_its_own_prefix_and_writes_unicast_topics_only() -> None:
    for own in ("outsider/#", "outsider/low", "outsider", "outsider/+"):
        assert access.may_subscribe("outsider", own), own
    for other in ("#", "+/#", "+/low", "cc1/#", "cc1/low", "outsider2/#", "$SYS/#"):
        assert not access.may_subscribe("outsider", other), other
    for unicast in ("cc1/low", GCD_UNICAST, "outsider/low"):
        assert access.may_publish("outsider", unicast), unicast
    for other in ("cc1", "cc1/high", "cc1/low/x", "a/b/low"):
        assert not access.may_publish("outsider", other), other
    assert access.may_receive("cc1", "cc1/low") and not access.may_receive("outsider", "cc1/low")
    admin = access.ADMIN_USERNAME
    assert access.may_subscribe(admin, "#") and access.may_publish(admin, "cc1/high")
    assert unicast_topic("cc1") == f"cc1/{access.UNICAST_LEVEL}"  # the runtimes' own unicast topic


def test_only_the_owner_of_a_client_id_logs_in_with_it() -> None:
    secret = "s3cret"
    cc1 = access.password(secret, "cc1")
    assert access.admitted(secret, "cc1", cc1, "cc1") is None
    assert access.admitted(secret, "cc1", access.password(secret, "outsider"), "cc1") == "wrong password"
    assert "not the username" in access.admitted(secret, "outsider", access.password(secret, "outsider"), "cc1")
    assert access.admitted(secret, "", cc1, "cc1") == "no username"
    assert access.admitted(secret, "a/b", access.password(secret, "a/b"), "a/b") == "the username cannot be a client id"
    admin = access.ADMIN_USERNAME
    assert access.admitted(secret, admin, access.password(secret, admin), "any-client-id") is None
    assert access.password(secret, "cc1") != access.password("other-secret", "cc1")


def test_amqtt_refuses_a_will_the_user_may_not_publish() -> None:
    secret = "s3cret"
    session = Session()
    session.client_id = session.username = "outsider"
    session.password = access.password(secret, "outsider")
    session.will_flag, session.will_topic = True, "cc1/low"
    assert refusal(secret, session) is None
    session.will_topic = "cc1/high"
    assert refusal(secret, session) == "the will's topic 'cc1/high' is not one the user may publish to"


@pytest.mark.parametrize(
    ("client_id", "named"),
    [
        ("", "expected a non-empty string"),
        ("a/b", "contains '/'"),
        ("a+", "contains '+'"),
        ("#", "contains '#'"),
        ("a:b", "contains ':'"),
        ("$SYS", "starts with '$'"),
        ("a b", "white space"),
        ("a\nb", "white space"),
        ("joynr-sim-admin", "reserved"),
        ("x" * 70000, "longer than"),
    ],
)
def test_credentials_refuse_a_client_id_the_model_cannot_confine(tmp_path: Path, client_id: str, named: str) -> None:
    brokers = BrokerSet(["gbid1"], broker="amqtt", run_dir=tmp_path)
    with pytest.raises(ValueError, match="^client_id: ") as err:
        brokers.credentials(client_id)
    message = str(err.value)
    assert named in message and "\n" not in message and len(message) < 200


def test_mosquitto_acl_section_is_the_models_grants() -> None:
    assert acl_section("cc1") == ("user cc1\ntopic read cc1/#\ntopic write +/low\n"
                                  "topic readwrite joynr-sim-multicast/+/+/#\n")
    assert acl_section(access.ADMIN_USERNAME) == "user joynr-sim-admin\ntopic readwrite #\n"


def test_external_brokers_have_no_admin_login(tmp_path: Path) -> None:
    brokers = BrokerSet(["gbid1"], broker="gbid1=mqtt://u:s3cret@h:1", run_dir=tmp_path)
    with pytest.raises(BrokerError, match="external") as err:
        brokers.admin_credentials()
    assert "s3cret" not in str(err.value)


# -- both brokers, real clients ----------------------------------------------------------


@pytest.fixture
def factories(amqtt_brokers: BrokerFactory, mosquitto_brokers: BrokerFactory) -> dict[str, BrokerFactory]:
    return {"amqtt": amqtt_brokers, "mosquitto": mosquitto_brokers}


@pytest.mark.e2e
@pytest.mark.parametrize("kind", KINDS)
async def test_an_outsider_reads_nothing_of_another_clients_traffic(
    kind: str, factories: dict[str, BrokerFactory]
) -> None:
    brokers = await factories[kind](["gbid1"])

    def scenario() -> dict[str, bool]:
        cc1 = Client(brokers, "gbid1", "cc1").connect()
        assert cc1.subscribe("cc1/#")
        admin = Client(brokers, "gbid1", unique("admin"), credentials=brokers.admin_credentials()).connect()
        assert admin.subscribe("#")
        outsider_id = unique("outsider")
        outsider = Client(brokers, "gbid1", outsider_id).connect()
        granted = {f: outsider.subscribe(f) for f in ("#", "+/#", "cc1/#", "+/low")}
        assert outsider.subscribe(f"{outsider_id}/#")

        sender = Client(brokers, "gbid1", unique("sender")).connect()
        sender.publish("cc1/low", b"for cc1")
        assert cc1.receive().payload == b"for cc1"
        assert admin.receive().payload == b"for cc1"  # the simulator's own login sees everything
        # The outsider's own message comes after cc1's on every path: if cc1's had reached
        # the outsider, it would be there first.
        sender.publish(f"{outsider_id}/low", b"for the outsider")
        got = outsider.receive()
        assert (got.topic, got.payload) == (f"{outsider_id}/low", b"for the outsider")
        assert outsider.messages.empty()
        for c in (cc1, admin, outsider, sender):
            c.disconnect()
        return granted

    granted = await in_thread(scenario)
    # amqtt refuses the SUBSCRIBE (return code 0x80); Mosquitto 2.0.11 grants it and
    # never delivers what the user may not read.
    assert granted == dict.fromkeys(granted, kind == "mosquitto")


@pytest.mark.e2e
@pytest.mark.parametrize("kind", KINDS)
async def test_a_client_publishes_to_unicast_topics_only(kind: str, factories: dict[str, BrokerFactory]) -> None:
    brokers = await factories[kind](["gbid1"])

    def scenario() -> None:
        cc1 = Client(brokers, "gbid1", "cc1").connect()
        assert cc1.subscribe("cc1/#")
        outsider = Client(brokers, "gbid1", unique("outsider")).connect()
        # The broker drops the first: it acknowledges it, or (Mosquitto, at times) ends the
        # outsider's connection for it. Either way it is handled before the unicast is sent,
        # so had it been delivered, it would arrive first.
        try:
            outsider.publish("cc1/high", b"not unicast")
        except (RuntimeError, AssertionError):
            pass
        outsider = Client(brokers, "gbid1", unique("outsider")).connect()
        outsider.publish("cc1/low", b"unicast")
        got = cc1.receive()
        assert (got.topic, got.payload) == ("cc1/low", b"unicast")
        assert cc1.messages.empty()
        for c in (cc1, outsider):
            c.disconnect()

    await in_thread(scenario)


@pytest.mark.e2e
@pytest.mark.parametrize("kind", KINDS)
async def test_a_will_goes_only_where_its_client_may_publish(kind: str, factories: dict[str, BrokerFactory]) -> None:
    brokers = await factories[kind](["gbid1"])

    def scenario() -> bool:
        cc1 = Client(brokers, "gbid1", "cc1").connect()
        assert cc1.subscribe("cc1/#")
        outsider_id = unique("outsider")
        first = Client(brokers, "gbid1", outsider_id, will_topic="cc1/high").connect(expect_success=False)
        assert first.reason_code is not None
        refused = first.reason_code.is_failure
        if refused:
            first.disconnect()
        else:
            first.crash()  # gone without DISCONNECT: the broker publishes its will, if any
        # Taking the session over ends what is left of the first connection, will and all,
        # before this CONNACK; the marker is queued to cc1 after anything the will sent.
        again = Client(brokers, "gbid1", outsider_id).connect()
        again.publish("cc1/low", b"marker")
        assert cc1.receive().payload == b"marker"
        assert cc1.messages.empty()
        for c in (cc1, again):
            c.disconnect()
        return refused

    # amqtt would publish any will unchecked, so the CONNECT is refused; Mosquitto lets it
    # in and never publishes the will.
    assert await in_thread(scenario) == (kind == "amqtt")


# -- both brokers, a real cluster controller ----------------------------------------------


def refused(sim: Simulation, client_id: str, credentials: tuple[str, str]) -> bool:
    """Whether the broker refuses one CONNECT (clean session) of ``client_id``."""
    c = Client(sim.brokers, "gbid1", client_id, credentials=credentials)
    c.connect(expect_success=False)
    assert c.reason_code is not None
    c.disconnect()
    return c.reason_code.is_failure


@pytest.mark.e2e
@pytest.mark.parametrize("kind", KINDS)
async def test_an_outsider_cannot_take_a_cluster_controllers_client_id(tmp_path: Path, kind: str) -> None:
    async with Simulation(tmp_path, gbids=["gbid1"], broker=kind) as sim:
        cc1 = await sim.cluster_controller("cc1", ["gbid1"])
        outsider = unique("outsider")
        username, password = sim.brokers.credentials(outsider)
        # The controller's client id with its username needs its password.
        assert await in_thread(refused, sim, "cc1", ("cc1", password))
        # The controller's client id under the outsider's own login: both brokers bind a
        # login to its client id and refuse it.
        assert await in_thread(refused, sim, "cc1", (username, password))

        # cc1 kept its session and its subscription: a frame published to it arrives.
        sender = Client(sim.brokers, "gbid1", unique("sender")).connect()
        await in_thread(sender.publish, "cc1/low", GARBAGE)
        await until(lambda: events(tmp_path, "msg.drop", rt="cc1", reason="decode-error"))
        await in_thread(sender.disconnect)
        assert cc1.mqtt["gbid1"].connected.is_set()
    assert not events(tmp_path, "link.steal") and not events(tmp_path, "link.detach", rt="cc1", closed=False)
    assert len(events(tmp_path, "link.attach", rt="cc1")) == 1  # its session, attached once


@pytest.mark.e2e
@pytest.mark.parametrize("kind", KINDS)
async def test_passwords_stay_out_of_the_trace_and_the_logs(tmp_path: Path, kind: str) -> None:
    async with Simulation(tmp_path, gbids=["gbid1"], broker=kind) as sim:
        await sim.cluster_controller("cc1", ["gbid1"])
        password = sim.brokers.credentials("cc1")[1]
        admin_password = sim.brokers.admin_credentials()[1]
        # A refused login is logged by the broker without what it was given.
        assert await in_thread(refused, sim, "cc1", ("cc1", admin_password))
    suffixes = (".ndjson", ".json", ".log", ".conf", ".acl")
    written = [p for p in tmp_path.rglob("*") if p.is_file() and p.suffix in suffixes]
    assert any(p.suffix == ".ndjson" for p in written) and any(p.suffix == ".log" for p in written)
    for path in written:
        text = path.read_text(errors="replace")
        assert password not in text and admin_password not in text, path
