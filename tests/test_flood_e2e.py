"""One client's flood on real brokers, with the runtimes in OS processes: 5,000 valid
requests for participants nobody knows, at QoS 1, from one sender, published by a separate
process as fast as the broker takes them. The cluster controller keeps that sender to its
share (``core.fairness``): at least 90% of the legitimate calls made during the flood are
answered, every call after it is, the controller is never disconnected, and every flood
message is accounted for in a bounded trace."""

from __future__ import annotations

import asyncio
import sys

import pytest

from e2e_helpers import events, topology, until
from joynr_sim.core.fairness import DEFAULT_TRACED_DROPS_PER_SENDER, DEFAULT_WINDOW_MS
from joynr_sim.simulation import Simulation

pytestmark = pytest.mark.e2e

FLOOD = 5_000


async def _calls_while(proxy, running: asyncio.subprocess.Process, trace) -> tuple[int, int]:
    """A call every 100 ms, each answered within 20 s or not at all, until the publisher has
    exited and the controller has taken the flood's last message (``trace`` names it): the
    flood lasts as long as the controller works through it, and amqtt can take all of its
    frames in under a second. (answered, made). Mosquitto saves its database at every
    PUBACK: on a machine busy elsewhere a flood's calls wait for the broker longer than 10 s."""
    calls = []
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 120
    while running.returncode is None or (b'"msg":"flood-end"' not in trace.read_bytes() and loop.time() < deadline):
        calls.append(asyncio.create_task(proxy.call("echo", f"during-{len(calls)}", ttl_ms=20_000)))
        try:
            await asyncio.wait_for(asyncio.shield(running.wait()), 0.1)
        except TimeoutError:
            pass
    results = await asyncio.gather(*calls, return_exceptions=True)
    return sum(isinstance(r, str) for r in results), len(results)


@pytest.mark.parametrize("broker", ["amqtt", "mosquitto"])
async def test_a_flood_from_one_sender_leaves_everyone_elses_calls_answered(tmp_path, broker):
    async with Simulation(tmp_path, gbids=["gbid1"], broker=broker) as sim:
        cc1, cc2, provider_app, proxy = await topology(sim)
        assert await proxy.call("echo", "before", ttl_ms=10_000) == "before"
        host, port = sim.brokers.endpoint("gbid1")
        publisher = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "joynr_sim.fuzz.publisher", host, str(port), *sim.brokers.credentials("attacker"),
            "cc2/low", str(FLOOD), "attacker", str(sim.clock.now_ms() + 600_000), "flood-",
            stdout=asyncio.subprocess.PIPE,
        )
        answered, made = await _calls_while(proxy, publisher, tmp_path / "trace" / "cc2.ndjson")
        assert publisher.returncode == 0, (await publisher.stdout.read()).decode()
        assert made >= 10 and answered >= 0.9 * made, f"{answered} of {made} calls answered during the flood"
        after = await asyncio.gather(*(proxy.call("echo", f"after-{n}", ttl_ms=10_000) for n in range(20)))
        assert after == [f"after-{n}" for n in range(20)]
        cc2_trace = tmp_path / "trace" / "cc2.ndjson"
        await until(lambda: b'"msg":"flood-end"' in cc2_trace.read_bytes(), 120)
    assert not events(tmp_path, "link.detach", rt="cc2", closed=False)  # the flood cut no connection
    # Every flood message is accounted for: it waits, or was dropped one by one, or is
    # counted in a summary line; the trace holds a bounded number of lines about them.
    mine = [e for e in events(tmp_path, rt="cc2") if e.get("from") == "attacker"]
    waited = {e["msg"] for e in mine if e["ev"] == "msg.queue"}
    dropped = {e["msg"] for e in mine if e["ev"] == "msg.drop" and e["msg"] is not None}
    counted = sum(e["count"] for e in mine if e["ev"] == "msg.drop" and e["msg"] is None)
    assert all(e["reason"] == "sender-limit" for e in mine if e["ev"] == "msg.drop")
    assert len(waited | dropped) + counted == FLOOD
    # Per window of the sender's share: the messages that wait (received, reply-to route,
    # queued), the drops traced one by one and the line that counts the rest.
    windows = (mine[-1]["ts"] - mine[0]["ts"]) // DEFAULT_WINDOW_MS + 2
    share = 1_000 // 4  # a quarter of the default queue
    assert counted > 0
    assert len(mine) <= 3 * share + windows * (DEFAULT_TRACED_DROPS_PER_SENDER + 1), f"{len(mine)} lines, {windows}"
    # The GCD was asked about no more of the flood's recipients than the sender's share.
    lookups = [e for e in events(tmp_path, "gcd.lookup") if str(e.get("participant")).startswith("nobody-")]
    assert 0 < len(lookups) <= share
