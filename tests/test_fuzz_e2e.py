"""A bounded fuzz run in the test suite: hostile frames over MQTT and WebSocket to a running
simulation; after every batch a call goes through and every frame has one fate in the
trace. ``make fuzz`` is the long run."""

from __future__ import annotations

import json

import msgpack
import pytest

from joynr_sim.fuzz.frames import SLOTS, valid_slots
from joynr_sim.fuzz.harness import Expected, draw_frames, fuzz


@pytest.mark.e2e
@pytest.mark.parametrize("broker", ["amqtt", "mosquitto"])
async def test_a_fuzz_run_crashes_nothing_and_accounts_for_every_frame(tmp_path, broker):
    report = await fuzz(tmp_path, frames=600, batch=200, broker=broker, seed_value=7)
    assert report.crashes == 0
    assert sum(report.sent.values()) == 600 and report.fates == report.sent
    assert report.calls == 3
    # The strategy reaches both kinds of refusal and some frames that are messages.
    assert report.outcomes["invalid-message"] and report.outcomes["decode-error"] and report.outcomes["msg.in"]


def test_the_same_seed_draws_the_same_frames():
    # Frames carry fresh ids; everything else is the same draw.
    first, again, other = draw_frames(20, ["p"], 3), draw_frames(20, ["p"], 3), draw_frames(20, ["p"], 4)
    assert [_strip_id(f) for f in first] == [_strip_id(f) for f in again]
    assert [_strip_id(f) for f in first] != [_strip_id(f) for f in other]


def _strip_id(frame: bytes) -> bytes:
    fields = msgpack.unpackb(frame, raw=False)
    if isinstance(fields[2], str) and fields[2].startswith("fz-"):
        fields[2] = "fz"
    return msgpack.packb(fields, use_bin_type=True)


def test_a_frame_has_one_fate_where_it_was_sent():
    expected = Expected()
    slots = valid_slots("p")
    frame = msgpack.packb([slots[s] for s in SLOTS], use_bin_type=True)
    expected.add("cc1", "mqtt", frame)
    expected.add("cc1", "ws", b"garbage")
    own = {"ev": "msg.in", "msg": "0f8fad5b-d9cb-469f-a165-70867728950e", "via": "mqtt"}
    assert expected.fate("cc1", own) is None
    # The fuzz message routed on and arriving at another runtime is no fate of the frame.
    assert expected.fate("cc2", {"ev": "msg.in", "msg": slots["id"], "via": "mqtt", "hops": 0}) is None
    # Routed back here with a higher hop count, it is not the frame either.
    assert expected.fate("cc1", {"ev": "msg.in", "msg": slots["id"], "via": "mqtt", "hops": 2}) is None
    assert expected.fate("cc1", {"ev": "msg.in", "msg": slots["id"], "via": "mqtt", "hops": 0}) == "msg.in"
    assert expected.fate("cc1", {"ev": "msg.in", "msg": slots["id"], "via": "mqtt", "hops": 0}) is None  # once
    assert not expected.complete() and expected.missing() == {"cc1/ws": 1}
    assert expected.fate("cc1", {"ev": "msg.drop", "msg": None, "via": "ws", "reason": "decode-error"})
    assert expected.complete()
    # A second drop where every frame has its fate is counted apart, not as a fate.
    assert expected.fate("cc1", {"ev": "msg.drop", "msg": None, "via": "ws", "reason": "decode-error"}) is None
    assert expected.surplus == 1 and expected.fates == expected.sent


def test_a_valid_frame_decodes():
    from joynr_sim.core.message import decode

    slots = valid_slots("p")
    msg = decode(msgpack.packb([slots[s] for s in SLOTS], use_bin_type=True))
    assert msg.id.startswith("fz-") and json.loads(slots["rt"])["topic"] == "fuzzer"
