"""A relay on the joynr wire forwards a call's body unread, as joynr's cluster controller does:
``decode_for_routing`` reads the SMRF header and leaves the JSON body of a request or reply in
the joynr wire's form, ``encode`` writes it back byte for byte, and the body is read
(``read_payload``) only where the message is delivered, where one that may not be used is
dropped naming its field."""

from __future__ import annotations

import json

import pytest

from joynr_sim.core.actions import Deliver, Drop, LearnRoute, Received, Send, unreadable
from joynr_sim.core.address import InProcessAddress, MqttAddress
from joynr_sim.core.limits import DEFAULT_LIMITS
from joynr_sim.core.message import (
    MULTICAST,
    ONE_WAY,
    PUBLICATION,
    REPLY,
    REQUEST,
    REQUEST_REPLY_ID,
    InvalidMessage,
    JoynrMessage,
    encode,
)
from joynr_sim.core.multicast import parse
from joynr_sim.core.routing import RoutingEntry
from joynr_sim.core.subscription_wire import encode_publication
from joynr_sim.runtime.participants import encode_reply, encode_request
from joynr_sim.wire.codecs import DEFAULT_WIRE, JOYNR, WireEncodeError, codec
from joynr_sim.wire.joynr import encode_joynr
from joynr_sim.wire.smrf import decode_smrf
from test_router import FOREVER, NOW, cc_router, in_process, lib_router

WIRE = codec(JOYNR)
# A Request as another serialiser may write it: its keys in another order, with spaces. Valid
# joynr JSON that the simulator's own encoder would never write, so a relay that read and
# wrote the body again would be seen.
FOREIGN_BODY = (b'{ "params": ["m"], "requestReplyId": "rr-1", "methodName": "echo",'
                b' "paramDatatypes": ["String"], "_typeName": "joynr.Request" }')


def request(*, rrid: str | None = "rr-1", to: str = "provider", mid: str = "m-1") -> JoynrMessage:
    headers = () if rrid is None else ((REQUEST_REPLY_ID, rrid),)
    return JoynrMessage(REQUEST, "proxy", to, NOW + 60_000, encode_request("echo", ["m"]), id=mid,
                        reply_to=MqttAddress("gbid1", "cc9"), custom_headers=headers, hops=1)


def frame_of(msg: JoynrMessage, body: bytes | None = None) -> bytes:
    return encode_joynr(msg, body=body) if body is not None else WIRE.encode(msg)


def test_a_request_is_routed_with_its_body_unread_and_sent_on_byte_for_byte() -> None:
    frame = frame_of(request(), FOREIGN_BODY)
    msg = WIRE.decode_for_routing(frame, DEFAULT_LIMITS)
    assert (msg.payload_form, msg.payload) == (JOYNR, FOREIGN_BODY)
    assert (msg.id, msg.header(REQUEST_REPLY_ID), msg.hops) == ("m-1", "rr-1", 1)
    assert WIRE.encode(msg) == frame
    relayed = decode_smrf(WIRE.encode(msg.with_hop()))
    assert relayed.body == FOREIGN_BODY
    assert dict(relayed.headers)["c-joynr-sim-hops"] == "2"


def test_the_body_read_at_delivery_is_the_payload_decode_gives() -> None:
    for msg in (request(), JoynrMessage(REPLY, "provider", "proxy", NOW, encode_reply("m"), id="r-1",
                                        custom_headers=((REQUEST_REPLY_ID, "rr-1"),))):
        frame = WIRE.encode(msg)
        unread = WIRE.decode_for_routing(frame, DEFAULT_LIMITS)
        assert unread.payload_form == JOYNR
        assert WIRE.read_payload(unread, DEFAULT_LIMITS) == WIRE.decode(frame, DEFAULT_LIMITS) == msg
        read = WIRE.read_payload(unread, DEFAULT_LIMITS)
        assert WIRE.read_payload(read, DEFAULT_LIMITS) is read  # read once, not again


def test_a_foreign_body_is_read_as_joynr_writes_it() -> None:
    unread = WIRE.decode_for_routing(frame_of(request(), FOREIGN_BODY), DEFAULT_LIMITS)
    assert WIRE.read_payload(unread, DEFAULT_LIMITS) == request()


@pytest.mark.parametrize("frame", [
    # joynr's payload names the request-reply id the trace needs at every hop
    frame_of(request(rrid=None), FOREIGN_BODY),
    frame_of(JoynrMessage(ONE_WAY, "proxy", "provider", NOW, encode_request("fire", []), id="o-1")),
    frame_of(JoynrMessage(PUBLICATION, "provider", "proxy", NOW, encode_publication("sub-1", 7), id="p-1")),
], ids=["request-without-z4", "one-way", "publication"])
def test_other_messages_are_read_at_once(frame) -> None:
    assert WIRE.decode_for_routing(frame, DEFAULT_LIMITS) == WIRE.decode(frame, DEFAULT_LIMITS)
    assert WIRE.decode_for_routing(frame, DEFAULT_LIMITS).payload_form == ""


def test_a_body_that_may_not_be_used_is_refused_where_it_is_read() -> None:
    body = json.loads(FOREIGN_BODY)
    body["params"] = "not a list"
    frame = frame_of(request(), json.dumps(body).encode())
    with pytest.raises(InvalidMessage) as decoded:
        WIRE.decode(frame, DEFAULT_LIMITS)
    unread = WIRE.decode_for_routing(frame, DEFAULT_LIMITS)  # its header is good: it may be routed
    with pytest.raises(InvalidMessage) as read:
        WIRE.read_payload(unread, DEFAULT_LIMITS)
    assert read.value.field == decoded.value.field
    assert read.value.field.startswith("pl.")


def test_a_header_naming_another_request_reply_id_is_refused_where_the_body_is_read() -> None:
    frame = frame_of(request(rrid="rr-2"), FOREIGN_BODY)  # the body says rr-1
    unread = WIRE.decode_for_routing(frame, DEFAULT_LIMITS)
    with pytest.raises(InvalidMessage, match="rr-2") as read:
        WIRE.read_payload(unread, DEFAULT_LIMITS)
    assert read.value.field == "pl.requestReplyId"


def test_a_payload_is_written_only_in_its_own_wires_form() -> None:
    unread = WIRE.decode_for_routing(WIRE.encode(request()), DEFAULT_LIMITS)
    with pytest.raises(ValueError, match="joynr wire's form"):
        encode(unread)  # the default wire's frame cannot carry joynr's JSON as its payload
    with pytest.raises(InvalidMessage, match="joynr wire's form"):
        codec(DEFAULT_WIRE).read_payload(unread, DEFAULT_LIMITS)
    other = JoynrMessage(**{**request().__dict__, "payload_form": "elsewhere"})
    with pytest.raises(WireEncodeError, match="elsewhere"):
        WIRE.encode(other)
    with pytest.raises(InvalidMessage, match="elsewhere"):
        WIRE.read_payload(other, DEFAULT_LIMITS)
    with pytest.raises(InvalidMessage, match="cannot read"):
        unreadable(unread, DEFAULT_LIMITS)


def _router():
    router = cc_router(decode=WIRE.decode_for_routing, read_payload=WIRE.read_payload)
    router.table.put("far", RoutingEntry(MqttAddress("gbid1", "cc2"), True, FOREVER), "provisioned")
    router.table.put("provider", RoutingEntry(InProcessAddress("skeleton"), True, FOREVER), "provisioned")
    return router


def _receive(router, frame: bytes) -> list:
    """What the router does with the message of ``frame`` (the reply-to route it learns aside)."""
    msg = router.decode_frame(frame, "mqtt", "gbid1")
    return [a for a in router.receive(msg, "mqtt", "gbid1") if not isinstance(a, LearnRoute)]


def test_a_cluster_controller_relays_a_call_unread_and_reads_the_one_it_delivers() -> None:
    router = _router()
    relayed = _receive(router, frame_of(request(to="far"), FOREIGN_BODY))
    assert [type(a) for a in relayed] == [Received, Send]
    assert (relayed[1].msg.payload_form, relayed[1].msg.payload) == (JOYNR, FOREIGN_BODY)

    delivered = _receive(router, frame_of(request(mid="m-2"), FOREIGN_BODY))
    assert [type(a) for a in delivered] == [Received, Send, Deliver]
    assert delivered[2].msg.payload_form == ""
    assert delivered[2].msg.payload == request().payload


def test_a_body_that_may_not_be_used_is_relayed_and_dropped_where_it_would_be_delivered() -> None:
    body = json.loads(FOREIGN_BODY)
    body["params"] = "not a list"
    bad = json.dumps(body).encode()
    router = _router()
    relayed = _receive(router, frame_of(request(to="far"), bad))
    assert [type(a) for a in relayed] == [Received, Send]  # as joynr's cluster controller: unread

    dropped = _receive(router, frame_of(request(mid="m-2"), bad))
    assert [type(a) for a in dropped] == [Received, Send, Drop]
    drop = dropped[2]
    assert (drop.reason, drop.msg.id) == ("invalid-message", "m-2")
    assert drop.field.startswith("pl.")


def test_a_multicast_left_unread_is_read_where_each_receiver_gets_it() -> None:
    """The joynr wire reads multicasts as they arrive; delivery would still read one left
    unread, as it reads a call's, for every receiver in the runtime."""
    read: list[str] = []

    def read_payload(msg: JoynrMessage, limits) -> JoynrMessage:
        read.append(msg.id)
        return JoynrMessage(**{**msg.__dict__, "payload": b"read", "payload_form": ""})

    router = lib_router(read_payload=read_payload)
    in_process(router, "prov")
    in_process(router, "proxy1")
    router.multicast.add_receiver(parse("prov/incremented"), "proxy1")
    unread = JoynrMessage(MULTICAST, "prov", "prov/incremented", NOW + 60_000, b"{}", id="mc-1", payload_form=JOYNR)
    [delivered] = [a for a in router.route(unread) if isinstance(a, Deliver)]
    assert (delivered.msg.payload, delivered.msg.payload_form, read) == (b"read", "", ["mc-1"])
