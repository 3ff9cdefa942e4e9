"""A simulation on the joynr wire (``Simulation(wire="joynr")``): every runtime sends SMRF
frames with joynr's headers and JSON payloads, over the real broker and WebSockets. An
outside MQTT client that speaks only joynr's wire calls a provider through a cluster
controller and gets joynr's Reply back; a frame of the simulator's own wire is dropped as
undecodable there, and the trace holds the same routing decisions as on the default wire."""

from __future__ import annotations

import json

import pytest

from e2e_helpers import PROVIDER, BrokerClient, events, topology, until
from joynr_sim.core.address import MqttAddress
from joynr_sim.core.limits import DEFAULT_LIMITS
from joynr_sim.core.message import REPLY, REQUEST, REQUEST_REPLY_ID, JoynrMessage, encode
from joynr_sim.runtime.participants import decode_reply, encode_request
from joynr_sim.simulation import Simulation
from joynr_sim.wire.codecs import codec
from joynr_sim.wire.smrf import decode_smrf

pytestmark = pytest.mark.e2e


def _request(sim: Simulation, mid: str) -> JoynrMessage:
    return JoynrMessage(REQUEST, "outsider", PROVIDER, sim.clock.now_ms() + 10_000, encode_request("echo", [mid]),
                        id=mid, reply_to=MqttAddress("gbid1", "outsider"), custom_headers=((REQUEST_REPLY_ID, mid),))


@pytest.mark.parametrize("processes", [False, True], ids=["in-process", "host-processes"])
async def test_runtimes_on_the_joynr_wire_speak_smrf_with_joynrs_json(tmp_path, processes) -> None:
    joynr = codec("joynr")
    async with Simulation(tmp_path, gbids=["gbid1"], wire="joynr", processes=processes, faults=False) as sim:
        _, cc2, _, proxy = await topology(sim)
        assert await proxy.call("echo", "inside") == "inside"  # libjoynr -> cc1 -> broker -> cc2 -> libjoynr

        outsider = BrokerClient(sim, "outsider", subscribe=True)
        try:
            outsider.publish("cc2/low", joynr.encode(_request(sim, "smrf-1")))
            await until(lambda: len(outsider.replies) == 1)
            frame = decode_smrf(outsider.replies[0])
            headers = dict(frame.headers)
            assert (headers["t"], headers["c-z4"], frame.recipient, frame.sender) == (REPLY, "smrf-1", "outsider",
                                                                                        PROVIDER)
            body = json.loads(frame.body)
            assert (body["_typeName"], body["requestReplyId"], body["response"]) == ("joynr.Reply", "smrf-1",
                                                                                     ["smrf-1"])
            assert decode_reply(joynr.decode(outsider.replies[0], DEFAULT_LIMITS).payload) == "smrf-1"

            outsider.publish("cc2/low", encode(_request(sim, "msgpack-1")))  # the other wire's frame
            await until(lambda: events(tmp_path, "msg.drop", rt="cc2", reason="decode-error"))
            assert len(outsider.replies) == 1
        finally:
            outsider.close()
    # the routing decisions are traced as on the default wire: the request in at cc2, out to the app
    assert events(tmp_path, "msg.in", rt="cc2", msg="smrf-1")
    assert events(tmp_path, "msg.out", rt="cc2", msg="smrf-1")


def test_an_unknown_wire_is_refused_before_anything_starts(tmp_path) -> None:
    with pytest.raises(ValueError, match="wire: expected one of joynr-sim, joynr, got 'smrf'"):
        Simulation(tmp_path / "run", gbids=["gbid1"], wire="smrf")
    assert not (tmp_path / "run").exists()
