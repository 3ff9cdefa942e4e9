"""On the joynr wire a cluster controller forwards a call's body as it came, unread, as joynr's
does; only the runtime that delivers the message reads it. Checked on a real broker: a body
written as no simulated runtime writes it reaches the next topic byte for byte, and a body that
may not be used passes the cluster controller and is dropped, naming its field, by the
libjoynr runtime that would have delivered it. On amqtt and on Mosquitto."""

from __future__ import annotations

import asyncio
import json

import pytest

from e2e_helpers import PROVIDER, BrokerClient, events, topology, until
from joynr_sim.core.address import MqttAddress
from joynr_sim.core.limits import DEFAULT_LIMITS
from joynr_sim.core.message import REQUEST, REQUEST_REPLY_ID, InvalidMessage, JoynrMessage
from joynr_sim.loss import EXPLAINED, Exchanges
from joynr_sim.runtime.participants import encode_request
from joynr_sim.simulation import Simulation
from joynr_sim.trace import read_run
from joynr_sim.wire.codecs import JOYNR, codec
from joynr_sim.wire.joynr import encode_joynr
from joynr_sim.wire.smrf import decode_smrf

pytestmark = pytest.mark.e2e

# A Request as another serialiser may write it (keys in another order, spaces): valid joynr
# JSON the simulator's own encoder never writes.
FOREIGN_BODY = (b'{ "params": ["m"], "requestReplyId": "%s", "methodName": "echo",'
                b' "paramDatatypes": ["String"], "_typeName": "joynr.Request" }')


def _frame(sim: Simulation, mid: str, to: str, body: bytes) -> bytes:
    msg = JoynrMessage(REQUEST, "outsider", to, sim.clock.now_ms() + 30_000, encode_request("echo", ["m"]), id=mid,
                       reply_to=MqttAddress("gbid1", "outsider"), custom_headers=((REQUEST_REPLY_ID, mid),))
    return encode_joynr(msg, body=body)


@pytest.mark.parametrize("broker", ["amqtt", "mosquitto"])
async def test_a_cluster_controller_forwards_a_calls_body_unread(tmp_path, broker) -> None:
    async with Simulation(tmp_path, gbids=["gbid1"], broker=broker, wire=JOYNR, faults=False) as sim:
        # cc2 routes participant "far" to the watcher's topic: what cc2 relays there, the watcher sees.
        *_, proxy = await topology(sim, provisioned=[("far", MqttAddress("gbid1", "watcher"), True)])
        watcher = BrokerClient(sim, "watcher", subscribe=True)
        outsider = BrokerClient(sim, "outsider")
        try:
            assert await asyncio.to_thread(watcher.subscribed.wait, 10)
            body = FOREIGN_BODY % b"relayed-1"
            await asyncio.to_thread(outsider.publish, "cc2/low", _frame(sim, "relayed-1", "far", body))
            await until(lambda: len(watcher.replies) == 1)
            relayed = decode_smrf(watcher.replies[0])
            assert relayed.body == body
            assert dict(relayed.headers)["c-joynr-sim-hops"] == "1"

            # A body that may not be used: its header is good, so cc2 routes it to the provider's
            # runtime over its WebSocket, and that runtime, where it would be delivered, drops it.
            bad = json.loads(FOREIGN_BODY % b"hostile-1")
            bad["params"] = "not a list"
            frame = _frame(sim, "hostile-1", PROVIDER, json.dumps(bad).encode())
            with pytest.raises(InvalidMessage) as refused:
                codec(JOYNR).decode(frame, DEFAULT_LIMITS)
            await asyncio.to_thread(outsider.publish, "cc2/low", frame)
            await until(lambda: events(tmp_path, "msg.drop", rt="provider-app", msg="hostile-1"))
        finally:
            watcher.close()
            outsider.close()
        assert await proxy.call("echo", "after") == "after"  # nothing else broke
    assert [e["via"] for e in events(tmp_path, "msg.out", rt="cc2", msg="hostile-1")] == ["ws"]
    assert not events(tmp_path, "msg.drop", rt="cc2", msg="hostile-1")
    [drop] = events(tmp_path, "msg.drop", rt="provider-app", msg="hostile-1")
    assert (drop["reason"], drop["field"]) == ("invalid-message", refused.value.field)
    # The call that got no reply is explained by the drop where it ended (loss.json; the Spark
    # lost-message check of this trace agrees: no finding).
    verdict = Exchanges(read_run(tmp_path)).verdict("hostile-1")
    assert (verdict.outcome, verdict.why) == (EXPLAINED, "drop-recorded")
