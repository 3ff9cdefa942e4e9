"""The hostile frames of joynr's wire (``joynr_sim.fuzz.frames_joynr``): every part, at every
layer, is refused by the joynr codec with the simulator's decode errors naming a field of
that layer, or decodes to a message; nothing else is raised. The harness reads their ids as
a runtime would."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from joynr_sim.core.limits import DEFAULT_LIMITS
from joynr_sim.core.message import InvalidMessage, JoynrMessage, MessageDecodeError
from joynr_sim.fuzz.fates import Expected
from joynr_sim.fuzz.frames import MULTILEVEL_TOPICS, restart_ids
from joynr_sim.fuzz.frames_joynr import PARTS, frame_key, hostile_joynr_frames, reply_topic, write_smrf
from joynr_sim.fuzz.harness import draw_frames
from joynr_sim.fuzz.wires import valid_frame
from joynr_sim.wire.codecs import JOYNR, codec
from joynr_sim.wire.smrf import decode_smrf

DECODE = codec(JOYNR).decode
RECIPIENTS = ["fuzz-echo", "nobody"]
# The fields a part is refused by, at least once in a draw: that it reached its layer.
REFUSED_AT = {
    "header-text": {"t", "id", "re", "ef", "cr", "c-z4", "c-joynr-sim-hops", "headers"},
    "routing-text": {"sender", "recipient"},
    "missing": {"t", "id", "pl"},
    "repeated": {"headers"},
    "unknown-key": {"headers"},
    "custom-key": {"headers"},
    "type": {"t", "ef", "pl"},
    "ttl": {"ttlAbsolute", "ttlMs"},
    "hops": {"c-joynr-sim-hops"},
    "reply-to": {"re"},
    "json": {"pl"},
    "fields": {"pl"},
    "compressed": {"body", "pl"},
    "bomb": {"body"},
    "flip": {"root", "headers", "body", "sender", "recipient", "t", "id", "isSigned", "isEncrypted",
             "isCompressed", "ttlAbsolute", "ttlMs", "pl", "re", "c-z4", "sigSize", "isCustomSigned"},
    "offset": {"root", "headers", "body", "sender", "recipient"},
    "vtable": {"root", "headers", "body", "sender", "recipient", "ttlMs", "ttlAbsolute", "isSigned",
               "isEncrypted", "isCompressed", "isCustomSigned"},
    "truncate": {"root", "msgSize"},
    "version": {"version"},
    "sizes": {"sigSize", "msgSize", "prefix"},
}


def _outcome(frame: bytes) -> str:
    """"message", or the root of the field the frame was refused by."""
    try:
        msg = DECODE(frame, DEFAULT_LIMITS)
    except MessageDecodeError as exc:  # InvalidMessage is one
        return exc.field.split(".")[0].split("[")[0].split(" ")[0]
    assert isinstance(msg, JoynrMessage)
    return "message"


@pytest.mark.parametrize("part", PARTS)
def test_every_part_is_refused_at_its_layer_with_the_decode_errors_or_decodes(part):
    seen: Counter = Counter()

    @settings(max_examples=60, database=None, deadline=None, suppress_health_check=list(HealthCheck))
    @given(hostile_joynr_frames(RECIPIENTS, parts=st.just({part})))
    def check(frame: bytes) -> None:
        seen[_outcome(frame)] += 1  # any other exception fails the test

    check()
    assert set(seen) & REFUSED_AT[part], f"{part}: {dict(seen)}"


@settings(max_examples=300, database=None, deadline=None, suppress_health_check=list(HealthCheck))
@given(hostile_joynr_frames(RECIPIENTS))
def test_the_frames_of_a_run_are_refused_with_the_decode_errors_or_decode_and_their_key_is_the_messages(frame):
    try:
        msg = DECODE(frame, DEFAULT_LIMITS)
    except (MessageDecodeError, InvalidMessage):
        return
    # The harness matches a msg.in by the id and hop count it reads from the frame.
    assert frame_key(frame) == (msg.id, msg.hops)


def test_a_run_has_messages_and_both_kinds_of_refusal():
    kinds: Counter = Counter()
    for frame in draw_frames(300, RECIPIENTS, 11, wire=JOYNR):
        try:
            DECODE(frame, DEFAULT_LIMITS)
            kinds["message"] += 1
        except InvalidMessage:
            kinds["invalid"] += 1
        except MessageDecodeError:
            kinds["decode"] += 1
    assert kinds["message"] and kinds["invalid"] and kinds["decode"], kinds


# The parts that leave the id header alone (the others may make it the hostile part, or a
# flipped bit may change it; a compressed body that does not inflate hides all headers from a reader).
ID_KEEPING = ("routing-text", "unknown-key", "custom-key", "ttl", "hops", "reply-to", "json", "fields")


def test_frames_carry_fresh_ids_unless_the_id_is_the_hostile_part():
    restart_ids(1000)
    ids = []

    @settings(max_examples=80, database=None, deadline=None, suppress_health_check=list(HealthCheck))
    @given(hostile_joynr_frames(RECIPIENTS, parts=st.sets(st.sampled_from(ID_KEEPING), min_size=1, max_size=3)))
    def collect(frame: bytes) -> None:
        ids.append(dict(decode_smrf(frame).headers)["id"])

    collect()
    assert all(i.startswith("fz-") and int(i[3:]) >= 1000 for i in ids)
    assert len(set(ids)) == len(ids) == 80


def _smrf_decodes(frame: bytes) -> bool:
    try:
        decode_smrf(frame)
    except MessageDecodeError:
        return False
    return True


@settings(max_examples=40, database=None, deadline=None, suppress_health_check=list(HealthCheck))
@given(hostile_joynr_frames(RECIPIENTS, parts=st.sampled_from(["json", "fields", "bomb"]).map(lambda p: {p})))
def test_a_hostile_body_leaves_the_frames_own_id(frame):
    mid = dict(decode_smrf(frame).headers)["id"] if _smrf_decodes(frame) else None
    assert mid is None or (mid.startswith("fz-") and frame_key(frame) == (mid, 0))


def test_the_same_seed_draws_the_same_frames():
    first, again = draw_frames(30, ["p"], 3, wire=JOYNR), draw_frames(30, ["p"], 3, wire=JOYNR)
    assert first == again and first != draw_frames(30, ["p"], 4, wire=JOYNR)


def test_the_rewritten_frame_of_a_valid_one_decodes_to_the_same_message():
    valid = valid_frame(JOYNR, "fuzz-echo")
    parsed = decode_smrf(valid)
    again = write_smrf(parsed, list(reversed(parsed.headers)), parsed.body, compressed=False)
    assert DECODE(again, DEFAULT_LIMITS) == DECODE(valid, DEFAULT_LIMITS)
    twice = write_smrf(parsed, [*parsed.headers, parsed.headers[0]], parsed.body, compressed=False)
    with pytest.raises(MessageDecodeError, match="twice"):
        DECODE(twice, DEFAULT_LIMITS)


def test_a_valid_frame_is_a_request_with_a_fresh_id_and_the_harness_finds_its_fate():
    frame = valid_frame(JOYNR, "fuzz-echo", sender="one-sender")
    msg = DECODE(frame, DEFAULT_LIMITS)
    assert msg.type == "rq" and msg.id.startswith("fz-") and msg.sender == "one-sender"
    assert reply_topic(frame) == "fuzzer"
    expected = Expected(frame_key)
    expected.add("cc2", "mqtt", frame)
    assert expected.fate("cc2", {"ev": "msg.in", "msg": msg.id, "via": "mqtt", "hops": 1}) is None  # routed on
    assert expected.fate("cc2", {"ev": "msg.in", "msg": msg.id, "via": "mqtt", "hops": 0}) == "msg.in"
    assert expected.complete()


def test_the_run_sends_reply_topics_with_a_slash():
    topics = [reply_topic(frame) for frame in draw_frames(300, ["p"], 5, wire=JOYNR)]
    assert len([t for t in topics if t in MULTILEVEL_TOPICS]) >= 5
