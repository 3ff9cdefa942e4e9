"""A libjoynr runtime that reconnects to a restarted cluster controller announces all of its
participants again even when a routing call of that announcement fails."""

from __future__ import annotations

import pytest

from e2e_helpers import until
from joynr_sim.core.address import InProcessAddress, WebSocketClientAddress
from joynr_sim.runtime.participants import EchoProvider, JoynrTimeoutException
from joynr_sim.simulation import Simulation

pytestmark = pytest.mark.e2e


def _announced(cc, pid: str) -> bool:
    entry = cc.table.lookup(pid)
    return entry is not None and isinstance(entry.address, WebSocketClientAddress)


async def test_a_failed_announcement_after_a_reconnect_is_tried_again_and_the_rest_still_made(tmp_path):
    async with Simulation(tmp_path, gbids=["gbid1"], broker="mosquitto", processes=False) as sim:
        cc = await sim.cluster_controller("cc1", ["gbid1"])
        app = await sim.libjoynr("app", cc, reconnect_interval_ms=50)
        for pid in ("first", "second"):
            await app.register_provider("d", "joynrsim/Echo", EchoProvider(), participant_id=pid, scope="LOCAL")
        assert isinstance(app.table.lookup("first").address, InProcessAddress)
        announce = app.directory.announce
        failed: list[str] = []

        async def times_out_once(pid: str, visible: bool) -> None:
            if pid == "first" and not failed:
                failed.append(pid)  # as a busy cluster controller's unanswered addNextHop
                raise JoynrTimeoutException("addNextHop: no reply within 10000 ms")
            await announce(pid, visible)

        app.directory.announce = times_out_once
        await cc.restart()  # forgets the participants; the app reconnects and announces them
        await until(lambda: _announced(cc, "first") and _announced(cc, "second"), 20)
        assert failed == ["first"]
