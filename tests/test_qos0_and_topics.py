"""A delivery is acknowledged as the QoS it arrived at asks (a QoS 0 one never), and a topic
taken from the wire is one a cluster controller may publish to: the unicast grammar of
``joynr_sim.core.limits`` and the brokers' grants of ``brokers.access`` agree."""

from __future__ import annotations

import asyncio
import json
import socket

import msgpack
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from brokers import access
from joynr_sim.core.limits import InvalidField, check_unicast_topic
from joynr_sim.core.message import REQUEST, InvalidMessage, JoynrMessage, MessageDecodeError, decode
from joynr_sim.fuzz.frames import MULTILEVEL_TOPICS, reply_topic
from joynr_sim.fuzz.harness import TARGETS, draw_frames, qos_of
from joynr_sim.runtime.mqtt_endpoint import MqttEndpoint
from joynr_sim.transport.mqtt import MqttConnection
from joynr_sim.transport.mqtt_topics import (
    MULTICAST_TOPIC_PREFIX,
    check_publish_topic,
    multicast_topic,
    unicast_topic,
)
from joynr_sim.transport.paho_client import Delivery

MQTT = "joynr.system.RoutingTypes.MqttAddress"
CLIENT = "some-client"  # any client's grants: the same for every client id but its own prefix


# -- acknowledging as received ------------------------------------------------------------


def test_only_a_qos_1_or_2_delivery_is_acknowledged():
    assert [Delivery(0, qos).acknowledged for qos in (0, 1, 2)] == [False, True, True]


def _packet(first: int, body: bytes) -> bytes:
    assert len(body) < 128
    return bytes([first, len(body)]) + body


def _publish(topic: str, payload: bytes, qos: int, mid: int = 0) -> bytes:
    body = len(topic).to_bytes(2, "big") + topic.encode() + (mid.to_bytes(2, "big") if qos else b"") + payload
    return _packet(0x30 | qos << 1, body)


def _packets(data: bytes) -> list[bytes]:
    out = []
    while data:
        size = 2 + data[1]
        out.append(data[:size])
        data = data[size:]
    return out


async def _acknowledgements_of_a_stand_in_broker() -> tuple[list[Delivery], list[bytes]]:
    """A broker stand-in delivers one PUBLISH at each QoS (0, 1 with id 7, 2 with id 9);
    the connection's owner acknowledges each as soon as it has it. What the owner was handed,
    and every packet the client sent after its SUBSCRIBE."""
    loop = asyncio.get_running_loop()
    listener = socket.create_server(("127.0.0.1", 0))
    listener.setblocking(False)
    handed: list[Delivery] = []

    def on_message(conn: MqttConnection, payload: bytes, delivery: Delivery) -> None:
        handed.append(delivery)
        conn.ack(delivery)

    conn = MqttConnection(
        gbid="gbid1", host="127.0.0.1", port=listener.getsockname()[1], client_id="cc-qos", topic="cc-qos",
        credentials=None, loop=loop, on_message=on_message,
    )
    conn.start()
    sent = b""

    async def read_until(wanted: bytes) -> None:
        """Read what the client sends until ``wanted`` is among it, or for 2 s."""
        nonlocal sent
        deadline = loop.time() + 2
        while wanted not in sent and loop.time() < deadline:
            try:
                sent += await asyncio.wait_for(loop.sock_recv(peer, 4096), deadline - loop.time())
            except TimeoutError:
                break

    try:
        peer, _ = await asyncio.wait_for(loop.sock_accept(listener), 5)
        assert (await asyncio.wait_for(loop.sock_recv(peer, 4096), 5))[0] == 0x10  # CONNECT
        await loop.sock_sendall(peer, b"\x20\x02\x00\x00")  # CONNACK
        subscribe = await asyncio.wait_for(loop.sock_recv(peer, 4096), 5)
        await loop.sock_sendall(peer, b"\x90\x03" + subscribe[2:4] + b"\x01")  # SUBACK, QoS 1
        await conn.wait_connected(5)
        await loop.sock_sendall(peer, _publish("cc-qos/low", b"q0", 0) + _publish("cc-qos/low", b"q1", 1, 7)
                                + _publish("cc-qos/low", b"q2", 2, 9))
        # A PUBACK for the QoS 0 delivery would go before the QoS 1 one's: both are in by then.
        await read_until(_packet(0x40, b"\x00\x07"))
        await read_until(_packet(0x50, b"\x00\x09"))  # PUBREC: paho's own, at once
        await loop.sock_sendall(peer, _packet(0x62, b"\x00\x09"))  # PUBREL
        await read_until(_packet(0x70, b"\x00\x09"))
        return handed, _packets(sent)
    finally:
        await conn.crash()
        listener.close()


async def test_a_qos_0_delivery_is_handed_over_and_never_acknowledged():
    handed, sent = await _acknowledgements_of_a_stand_in_broker()
    # PUBACK for 7, PUBREC and PUBCOMP for 9; nothing for the QoS 0 delivery.
    assert sorted(sent) == sorted([_packet(0x40, b"\x00\x07"), _packet(0x50, b"\x00\x09"), _packet(0x70, b"\x00\x09")])
    assert sorted(handed) == [Delivery(0, 0), Delivery(7, 1), Delivery(9, 2)]


class _Host:
    runtime_id = "cc1"
    running = True

    def __init__(self) -> None:
        self.handled: list[str] = []

    def receive_frame(self, payload: bytes, via: str, gbid: str | None = None) -> None:
        try:
            self.handled.append(decode(payload).id)
        except MessageDecodeError:
            pass  # the real runtime's node answers with the drop


class _Connection:
    gbid = "gbid1"

    def __init__(self) -> None:
        self.acks: list[Delivery] = []

    def ack(self, delivery: Delivery) -> None:
        self.acks.append(delivery)


class _Sessions:
    closed = False


def _endpoint() -> MqttEndpoint:
    """An endpoint with only what receiving and refusing a publish touch."""
    endpoint = object.__new__(MqttEndpoint)
    endpoint.host = _Host()
    endpoint._input_paused = False
    endpoint.sessions = _Sessions()
    endpoint.connections = {"gbid1": _Connection()}
    return endpoint


def _frame(mid: str, reply_topic_: str = "cc2") -> bytes:
    rt = json.dumps({"_typeName": MQTT, "brokerUri": "gbid1", "topic": reply_topic_})
    return msgpack.packb([1, "rq", mid, "cc2-app", "provider", rt, 2**41, "NORMAL", [], 0, b""], use_bin_type=True)


@pytest.mark.parametrize("qos, acked", [(0, False), (1, True), (2, True)])
def test_the_endpoint_handles_every_delivery_and_acknowledges_as_received(qos, acked):
    endpoint, conn = _endpoint(), _Connection()
    delivery = Delivery(0 if qos == 0 else 11, qos)
    endpoint._on_message(conn, _frame("m1"), delivery)  # no loop runs: "after the commit" is now
    endpoint._on_message(conn, b"not a joynr frame", delivery)  # dropped: acknowledged the same way
    assert endpoint.host.handled == ["m1"]
    assert conn.acks == ([delivery, delivery] if acked else [])


# -- the unicast topic grammar -------------------------------------------------------------


@pytest.mark.parametrize("topic", ["cc1", "discoverydirectory_channelid", "a b", "ünïcode", "x" * 1024, "low"])
def test_a_one_level_topic_is_a_unicast_target(topic):
    assert check_unicast_topic(topic, "rt.topic") == topic


@pytest.mark.parametrize("topic, why", [
    ("outsider/x", "'/'"), ("/", "'/'"), ("cc1/", "'/'"), ("cc1/low", "'/'"), ("joynr-sim-multicast/p/b", "'/'"),
    ("$SYS", "'\\$'"), ("#", "wildcard"), ("+", "wildcard"), ("a+b", "wildcard"), ("cc\x00x", "control"),
    ("", "empty"), ("x" * 1025, "at most"), (7, "expected a string"),
])
def test_a_topic_of_another_layout_is_refused_naming_the_field(topic, why):
    with pytest.raises(InvalidField, match=why) as refused:
        check_unicast_topic(topic, "rt.topic")
    assert refused.value.field == "rt.topic"


def test_a_frame_whose_reply_topic_has_a_slash_is_an_invalid_message_naming_the_field():
    with pytest.raises(InvalidMessage) as refused:
        decode(_frame("m1", "outsider/x"))
    assert refused.value.reason == "invalid-message" and refused.value.field == "rt.topic"
    assert "outsider/x" in str(refused.value)
    assert decode(_frame("m2", "outsider")).reply_to.topic == "outsider"


# Topics built from the characters and levels that matter to the grants.
_levels = st.sampled_from(["a", "cc1", "low", "", "$SYS", "$x", "joynr-sim-multicast", "p", "b", "+", "#", "a+",
                           "x\x00", " "])
_topics = st.lists(_levels, min_size=1, max_size=5).map("/".join)


@settings(max_examples=500, deadline=None)
@given(_topics)
def test_the_unicast_grammar_and_the_brokers_grants_agree(topic):
    try:
        check_unicast_topic(topic, "rt.topic")
    except InvalidField:
        accepted = False
    else:
        accepted = True
    if accepted:  # what the grammar lets through, the grants let a client publish to
        assert access.may_publish(CLIENT, unicast_topic(topic))
    if "/" in topic:
        assert not accepted
        # Refused by the grants too, unless "<topic>/low" happens to be a multicast topic:
        # no reply may go there either.
        assert not access.may_publish(CLIENT, unicast_topic(topic)) or topic.startswith(access.MULTICAST_PREFIX)
    if not topic.startswith("$") and not {"+", "#", "\x00"} & set(topic):  # an MQTT topic name
        assert accepted == ("/" not in topic and topic != "")


@settings(max_examples=500, deadline=None)
@given(_topics)
def test_what_a_runtime_may_publish_is_what_the_grants_allow(topic):
    try:
        check_publish_topic(topic, "to.topic")
    except InvalidField:
        accepted = False
    else:
        accepted = True
    if accepted:
        assert access.may_publish(CLIENT, topic)
    elif not {"+", "#", "\x00"} & set(topic) and topic and topic != unicast_topic(""):
        # Of the topic names, the grammar refuses only what the grants refuse, and the
        # unicast topic of an empty target (no client id is empty; a "+" matches "").
        assert not access.may_publish(CLIENT, topic)


def test_the_transport_and_the_grants_name_the_same_layout():
    assert MULTICAST_TOPIC_PREFIX == access.MULTICAST_PREFIX
    assert unicast_topic("cc1") == f"cc1/{access.UNICAST_LEVEL}"
    assert access.may_publish(CLIENT, multicast_topic("provider/broadcast/part"))


@pytest.mark.parametrize("topic", ["cc2/deeper", "joynr-sim-multicast/p", "$SYS", "", "a\x00"])
def test_a_publish_the_grants_would_refuse_is_never_attempted(topic):
    endpoint = _endpoint()
    msg = JoynrMessage(REQUEST, "cc1-app", "provider", 2**41)
    reason, detail = endpoint.publish(msg, "gbid1", topic)
    assert reason == "invalid-message" and detail.startswith("to.topic:")


# -- the fuzzer sends both ----------------------------------------------------------------


def test_the_fuzzer_sends_qos_0_frames_and_reply_topics_with_a_slash():
    for target, (_, via, _) in enumerate(TARGETS):  # QoS 0 frames go to every MQTT target
        if via == "mqtt":
            assert {qos_of(n) for n in range(target, 200, len(TARGETS))} == {0, 1}
    topics = [reply_topic(frame) for frame in draw_frames(300, ["p"], 5)]
    assert len([t for t in topics if t in MULTILEVEL_TOPICS]) >= 10
