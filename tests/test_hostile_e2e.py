"""Hostile input on real brokers and sockets: frames that decode but carry values a runtime
must not use, calls to internal providers from the backend, a client taking another's id,
and floods for participants nobody knows. After each, the runtimes still answer and every
frame is accounted for in the trace."""

from __future__ import annotations

import json

import msgpack
import pytest
from websockets.asyncio.client import connect

from e2e_helpers import PROVIDER, BrokerClient, events, topology, until
from joynr_sim.core.address import MqttAddress
from joynr_sim.core.message import REQUEST, REQUEST_REPLY_ID, JoynrMessage, encode
from joynr_sim.runtime.participants import (
    ProviderRuntimeException,
    decode_reply,
    encode_request,
)
from joynr_sim.simulation import Simulation
from joynr_sim.trace import read_run

pytestmark = pytest.mark.e2e

MQTT = "joynr.system.RoutingTypes.MqttAddress"


def frame(**slots) -> bytes:
    """A request frame for the provider, with some slots replaced."""
    values = {"v": 1, "t": "rq", "id": "hostile", "f": "attacker", "to": PROVIDER,
              "rt": json.dumps({"_typeName": MQTT, "brokerUri": "gbid1", "topic": "attacker"}),
              "ex": 2**41, "ef": "NORMAL", "ch": [[REQUEST_REPLY_ID, "c"]], "h": 0,
              "pl": encode_request("echo", ["x"])}
    values.update(slots)
    return msgpack.packb(list(values.values()), use_bin_type=True)


def reply_to(topic: str) -> str:
    return json.dumps({"_typeName": MQTT, "brokerUri": "gbid1", "topic": topic})


HOSTILE_FRAMES = [
    ("f", frame(id="empty-sender", f="")),
    ("rt.topic", frame(id="nul-topic", rt=reply_to("cc\x00x"))),
    ("rt.topic", frame(id="hash-topic", rt=reply_to("#"))),
    ("rt.topic", frame(id="plus-topic", rt=reply_to("a/+/b"))),
    ("rt", frame(id="huge-topic", rt=reply_to("t" * 70_000))),
    ("h", frame(id="forged-hops", h=-5)),
] + [("id", frame(id=f"{n:03d}" + "i" * 300)) for n in range(30)]  # more than an inflight window


@pytest.mark.parametrize("broker", ["amqtt", "mosquitto"])
async def test_frames_with_hostile_values_are_dropped_and_nothing_goes_deaf(tmp_path, broker):
    async with Simulation(tmp_path, gbids=["gbid1"], broker=broker, processes=False) as sim:
        cc1, cc2, provider_app, proxy = await topology(sim)
        attacker = BrokerClient(sim, "attacker")
        try:
            for _, payload in HOSTILE_FRAMES:
                attacker.publish("cc2/low", payload)
            await until(lambda: len(events(tmp_path, "msg.drop", rt="cc2", reason="invalid-message"))
                        == len(HOSTILE_FRAMES))
            # Still serving, over the same sessions: nothing was disconnected.
            assert await proxy.call("echo", "still here", ttl_ms=10_000) == "still here"
            assert not events(tmp_path, "link.detach", rt="cc2")
            # Nothing hostile was kept to be re-sent: a crash and restart of the cluster
            # controller comes back and serves.
            await cc2.crash()
            await cc2.start()
            await until(lambda: provider_app.ws is not None and provider_app.ws.connected)
            assert await proxy.call("echo", "after restart", ttl_ms=15_000) == "after restart"
        finally:
            attacker.close()
    drops = events(tmp_path, "msg.drop", rt="cc2", reason="invalid-message")
    assert sorted(d["field"] for d in drops) == sorted(f for f, _ in HOSTILE_FRAMES)
    assert all(d["msg"] is None and len(json.dumps(d)) < 1000 for d in drops)
    assert not events(tmp_path, "msg.drop", reason="internal-error")
    hostile_ids = {msgpack.unpackb(payload, raw=False)[2] for _, payload in HOSTILE_FRAMES}
    assert not [e for e in read_run(tmp_path) if e.get("msg") in hostile_ids]  # none got any further


async def test_the_routing_provider_refuses_calls_from_the_backend(tmp_path):
    async with Simulation(tmp_path, gbids=["gbid1"]) as sim:
        cc1, cc2, provider_app, proxy = await topology(sim)
        attacker = BrokerClient(sim, "attacker")
        attacker.client.subscribe("attacker/#", qos=1)
        try:
            request = JoynrMessage(
                REQUEST, "attacker", cc2.routing_provider_id, sim.clock.now_ms() + 10_000,
                encode_request("removeNextHop", [PROVIDER]),
                reply_to=MqttAddress("gbid1", "attacker"), custom_headers=((REQUEST_REPLY_ID, "r1"),),
            )
            attacker.publish("cc2/low", encode(request))
            await until(lambda: attacker.replies)
        finally:
            attacker.close()
        with pytest.raises(ProviderRuntimeException, match="not permitted"):
            decode_reply(msgpack.unpackb(attacker.replies[0], raw=False)[10])
        assert PROVIDER in cc2.table
        assert await proxy.call("echo", "reachable", ttl_ms=10_000) == "reachable"
    (drop,) = events(tmp_path, "msg.drop", rt="cc2", reason="not-permitted")
    assert drop["msg"] == request.id and drop["via"] == "mqtt"


async def test_a_websocket_client_cannot_take_a_libjoynr_runtimes_id(tmp_path):
    async with Simulation(tmp_path, gbids=["gbid1"], processes=False) as sim:
        cc1, cc2, provider_app, proxy = await topology(sim)
        url = f"ws://127.0.0.1:{cc2.ws_port}/"
        claims = [
            {"_typeName": "joynr.system.RoutingTypes.WebSocketClientAddress", "id": "provider-app"},
            {"_typeName": "joynr.system.RoutingTypes.WebSocketClientAddress", "id": "provider-app",
             "token": "guessed"},
        ]
        for claim in claims:
            async with connect(url) as impostor:
                await impostor.send(json.dumps(claim))
                await impostor.wait_closed()
                assert impostor.close_code == 1008
        # The real runtime kept its connection and its replies.
        assert await proxy.call("echo", "mine", ttl_ms=10_000) == "mine"
        assert provider_app.ws.connected
    refused = events(tmp_path, "msg.drop", rt="cc2", reason="not-permitted")
    assert len(refused) == 2 and all("provider-app" in d["detail"] for d in refused)


async def test_messages_for_unknown_participants_wait_within_the_bounds(tmp_path):
    mb = 1_000_000
    async with Simulation(tmp_path, gbids=["gbid1"], processes=False) as sim:
        cc1, cc2, provider_app, proxy = await topology(sim, max_queued_bytes=3 * mb + 10_000)
        attacker = BrokerClient(sim, "attacker")
        try:
            for n in range(8):
                attacker.publish("cc2/low", frame(id=f"flood-{n}", to=f"nobody-{n}", pl=b"x" * mb))
            await until(lambda: len(events(tmp_path, "msg.queue", rt="cc2")) == 8)
        finally:
            attacker.close()
        assert await cc2.queued() == 3 and cc2.router.queued_bytes <= 3 * mb + 10_000
        assert await proxy.call("echo", "unbothered", ttl_ms=10_000) == "unbothered"
    full = events(tmp_path, "msg.drop", rt="cc2", reason="queue-full")
    assert [d["msg"] for d in full] == [f"flood-{n}" for n in range(5)]  # the oldest first


async def test_an_oversized_frame_is_dropped_with_a_short_trace_line(tmp_path):
    async with Simulation(tmp_path, gbids=["gbid1"], processes=False) as sim:
        cc1, cc2, provider_app, proxy = await topology(sim, max_frame_bytes=100_000)
        attacker = BrokerClient(sim, "attacker")
        try:
            # Over WebSocket too: the provider's runtime sends its cluster controller a frame
            # past the limit; it is dropped and the connection keeps serving.
            assert await provider_app.ws.send(frame(id="big-ws", pl=b"x" * 200_000))
            attacker.publish("cc2/low", frame(id="big", pl=b"x" * 200_000))
            attacker.publish("cc2/low", frame(id="x", t="t" * 90_000))  # a large undecodable value
            await until(lambda: len(events(tmp_path, "msg.drop", rt="cc2")) == 3)
        finally:
            attacker.close()
        assert await proxy.call("echo", "fine", ttl_ms=10_000) == "fine"
    lines = (tmp_path / "trace" / "cc2.ndjson").read_text().splitlines()
    drops = [json.loads(line) for line in lines if '"msg.drop"' in line]
    assert sorted((d["reason"], d["via"], d.get("field")) for d in drops) == [
        ("decode-error", "mqtt", "t"), ("invalid-message", "mqtt", "frame"), ("invalid-message", "ws", "frame"),
    ]
    drops = [line for line in lines if '"msg.drop"' in line]
    assert all(len(line) < 1000 for line in drops)


async def test_a_failing_handler_is_an_internal_error_drop_and_the_connection_keeps_serving(tmp_path):
    async with Simulation(tmp_path, gbids=["gbid1"], processes=False) as sim:
        cc1, cc2, provider_app, proxy = await topology(sim)
        receive = cc2.router.receive

        def broken(msg, via, gbid=None, source=None):  # a bug in a handler, for one message only
            if msg.id == "trips-the-bug":
                raise KeyError("a bug")
            return receive(msg, via, gbid, source)

        cc2.router.receive = broken
        attacker = BrokerClient(sim, "attacker")
        try:
            attacker.publish("cc2/low", frame(id="trips-the-bug"))
            await until(lambda: events(tmp_path, "msg.drop", rt="cc2", reason="internal-error"))
        finally:
            attacker.close()
        # The same MQTT connection keeps serving: the reply path to the consumer crosses it.
        assert await proxy.call("echo", "after the bug", ttl_ms=10_000) == "after the bug"
    (drop,) = events(tmp_path, "msg.drop", rt="cc2", reason="internal-error")
    assert drop["msg"] == "trips-the-bug" and drop["detail"] == "KeyError: 'a bug'"
    log = (tmp_path / "log" / "cc2.log").read_text()
    assert "trips-the-bug" in log and "Traceback" in log and "KeyError: 'a bug'" in log
