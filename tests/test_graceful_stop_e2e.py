"""A graceful stop of a cluster controller finishes what it has taken on: the requests its
libjoynr runtime wrote to it just before the stop are still read and routed on, and their
replies, which the broker keeps for the stopped controller, reach the caller once the
controller is back and its runtime has reconnected. The bounds of the stop and of the
reconnection are options, checked where they enter."""

from __future__ import annotations

import asyncio

import pytest

from e2e_helpers import events, until
from joynr_sim.clock import SimClock
from joynr_sim.core.address import MqttAddress, WebSocketAddress
from joynr_sim.runtime.cluster_controller import ClusterController
from joynr_sim.runtime.libjoynr import LibjoynrRuntime
from joynr_sim.runtime.participants import EchoProvider
from joynr_sim.simulation import Simulation

PROVIDER = "echo-provider"
CALLS = 5


@pytest.mark.parametrize("option", ["drain_timeout_ms", "connect_timeout_ms"])
@pytest.mark.parametrize("bad", [-1, 600_001, 1.5, True, "5000"])
def test_a_cluster_controller_bound_out_of_range_is_refused(tmp_path, option, bad):
    with pytest.raises(ValueError, match=f"^{option}: "):
        ClusterController("cc1", ["gbid1"], brokers=None, run_dir=tmp_path, run_id="r",  # type: ignore[arg-type]
                          clock=SimClock(), **{option: bad})


@pytest.mark.parametrize("bad", [0, 60_001, 0.5, False, None])
def test_a_reconnect_interval_out_of_bounds_is_refused(tmp_path, bad):
    with pytest.raises(ValueError, match="^reconnect_interval_ms: "):
        LibjoynrRuntime("app1", "cc1", WebSocketAddress("WS", "127.0.0.1", 1, "/"), run_dir=tmp_path, run_id="r",
                        clock=SimClock(), reconnect_interval_ms=bad)


async def _topology(sim: Simulation):
    """A consumer on cc1 calling a provider behind cc2, over the broker."""
    cc1 = await sim.cluster_controller("cc1", ["gbid1"], provisioned=[(PROVIDER, MqttAddress("gbid1", "cc2"), True)])
    cc2 = await sim.cluster_controller("cc2", ["gbid1"])
    consumer = await sim.libjoynr("consumer", cc1)
    provider_app = await sim.libjoynr("provider-app", cc2)
    await provider_app.register_provider("dom", "joynrsim/Echo", EchoProvider(), participant_id=PROVIDER,
                                         scope="GLOBAL")
    proxy = await consumer.create_proxy("joynrsim/Echo", PROVIDER)
    assert await proxy.call("echo", "before", ttl_ms=10_000) == "before"
    return cc1, consumer, proxy


@pytest.mark.e2e
async def test_requests_written_just_before_a_graceful_stop_are_answered(tmp_path):
    # Mosquitto: it delivers again what it had sent a stopped controller unacknowledged.
    async with Simulation(tmp_path, gbids=["gbid1"], broker="mosquitto", processes=False) as sim:
        cc1, consumer, proxy = await _topology(sim)

        # The stop begins right after the consumer wrote its last request, in the loop turn
        # before cc1 could read any of them: they are on cc1's WebSocket, unread.
        ws = consumer.ws
        assert ws is not None
        written: list[bytes] = []
        stopping: list[asyncio.Task] = []

        def send_soon(data, on_failed):
            type(ws).send_soon(ws, data, on_failed)
            written.append(data)
            if len(written) == CALLS:
                stopping.append(asyncio.ensure_future(cc1.stop()))

        ws.send_soon = send_soon  # type: ignore[method-assign]
        calls = [asyncio.ensure_future(proxy.call("echo", f"call {n}", ttl_ms=10_000)) for n in range(CALLS)]
        while not stopping:
            await asyncio.wait(calls, timeout=0.05)  # bounded by the calls' ttl
        await stopping[0]
        del ws.send_soon

        # cc1 routed every one of them on before it stopped.
        read = {e["corr"] for e in events(tmp_path, "msg.out", rt="cc1", type="rq", to=PROVIDER)}
        sent = {e["corr"] for e in events(tmp_path, "msg.out", rt="consumer", type="rq", to=PROVIDER)}
        assert sent <= read, f"{len(sent - read)} of {len(sent)} requests never left cc1"

        # Started again with fresh memory, as a new process; the replies waited at the
        # broker in cc1's session, and each waits in cc1 until the consumer is back.
        await cc1.restart()
        assert await asyncio.gather(*calls) == [f"call {n}" for n in range(CALLS)]


@pytest.mark.e2e
async def test_replies_queued_for_a_websocket_when_the_stop_begins_are_delivered(tmp_path):
    async with Simulation(tmp_path, gbids=["gbid1"], broker="mosquitto", processes=False) as sim:
        cc1, consumer, proxy = await _topology(sim)
        # The consumer's connection takes nothing for a while (its socket buffer is full, as
        # websockets' flow control sees it): cc1 queues the replies it takes from the broker.
        conn = cc1.ws_server.clients["consumer"]
        conn.pause_writing()
        calls = [asyncio.ensure_future(proxy.call("echo", f"call {n}", ttl_ms=10_000)) for n in range(CALLS)]
        replies = {"rt": "cc1", "type": "rp", "via": "ws", "from": PROVIDER}  # "before"'s and these
        await until(lambda: len(events(tmp_path, "msg.out", **replies)) == CALLS + 1)
        # All wait in cc1's queue (websockets wrote the first before it waited on the
        # connection; it leaves the queue once that wait is over).
        assert len(cc1.ws_server._outgoing["consumer"]._queue) == CALLS

        listening = cc1.ws_server._server.server
        stopping = asyncio.ensure_future(cc1.stop())
        await until(lambda: not listening.is_serving())  # the stop has begun
        if conn.paused:  # (a connection already closed is not)
            conn.resume_writing()
        await stopping
        assert await asyncio.gather(*calls) == [f"call {n}" for n in range(CALLS)]
