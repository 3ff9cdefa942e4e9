"""SMRF frames, joynr messages in them and joynr's JSON payloads: round trips, and every
kind of malformed input refused with the field named (tests/test_wire_smrf_interop.py
checks the same frames against joynr's own JavaScript SMRF library)."""

from __future__ import annotations

import json
import struct
import zlib

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from joynr_sim.core.address import MqttAddress, WebSocketClientAddress
from joynr_sim.core.errors import ApplicationException, MethodInvocationException, ProviderRuntimeException
from joynr_sim.core.limits import WireLimits
from joynr_sim.core.message import REQUEST_REPLY_ID, InvalidMessage, JoynrMessage, MessageDecodeError
from joynr_sim.fuzz.frames_joynr import smrf_message
from joynr_sim.runtime.participants import encode_reply, encode_request
from joynr_sim.wire.joynr import decode_joynr, encode_joynr
from joynr_sim.wire.payloads import (
    PayloadDecodeError,
    one_way_from_joynr,
    one_way_to_joynr,
    reply_from_joynr,
    reply_to_joynr,
    request_from_joynr,
    request_to_joynr,
)
from joynr_sim.wire.smrf import (
    JOYNR_MAX_MESSAGE_SIZE,
    PREFIX,
    SmrfDecodeError,
    SmrfFrame,
    SmrfLimits,
    decode_smrf,
    encode_smrf,
)
from smrf_frames import frames, sorted_headers

FRAME = SmrfFrame("recipient-1", "sender-1", 1_700_000_000_000, True, (("t", "rq"), ("id", "m-1")), b"{}")


@given(frames)
@settings(max_examples=300)
def test_a_frame_comes_back_as_it_was_with_sorted_headers(frame: SmrfFrame) -> None:
    assert decode_smrf(encode_smrf(frame)) == sorted_headers(frame)


def test_the_prefix_is_version_signature_size_message_size_little_endian() -> None:
    data = encode_smrf(SmrfFrame("r", "s", 5, signature=b"SIG"))
    version, sig_size, msg_size = struct.unpack_from("<HHI", data)
    assert (version, sig_size, msg_size + 8 + 3) == (1, 3, len(data)) and data.endswith(b"SIG")


def test_a_compressed_body_is_a_zlib_stream_on_the_wire() -> None:
    body = b"joynr " * 1000
    data = encode_smrf(SmrfFrame("r", "s", 5, body=body, compressed=True))
    assert zlib.compress(body) in data and body not in data
    assert decode_smrf(data).body == body


@pytest.mark.parametrize("frame, why", [
    (SmrfFrame("r", "s", 0, headers=(("k", "1"), ("k", "2"))), "twice"),
    (SmrfFrame("r", "s", 2**63), "int64"),
    (SmrfFrame("r", "s", 0, signature=bytes(65536)), "65535"),
    (SmrfFrame("r\ud800", "s", 0), "surrogate"),
])
def test_a_frame_smrf_cannot_carry_is_not_encoded(frame: SmrfFrame, why: str) -> None:
    with pytest.raises(ValueError, match=why):
        encode_smrf(frame)


# -- malformed frames: each refused, its field named ------------------------------------------


def _message(*, recipient: bytes | None = b"r", sender: bytes | None = b"s", bools: dict[int, int | None] | None = None,
             headers: list[tuple[bytes | None, bytes | None]] | None = None, body: bytes | None = b"",
             ttl: int = 7) -> bytes:
    """A smrf.Message buffer with exactly these fields (None: left out); ``bools`` by slot
    (None: left out), isSigned (4) and isEncrypted (5) false unless given."""
    return smrf_message(recipient=recipient, sender=sender, ttl_ms=ttl, bools={4: 0, 5: 0} | (bools or {}),
                        headers=headers, body=body)


def _frame(message: bytes, signature: bytes = b"", version: int = 1) -> bytes:
    return PREFIX.pack(version, len(signature), len(message)) + message + signature


GOOD = encode_smrf(FRAME)
BAD_FRAMES = {
    "empty": (b"", "prefix"),
    "a short prefix": (GOOD[:7], "prefix"),
    "version 2": (struct.pack("<H", 2) + GOOD[2:], "version"),
    "version 0": (struct.pack("<H", 0) + GOOD[2:], "version"),
    "truncated": (GOOD[:-1], "msgSize"),
    "msgSize past the end": (GOOD[:4] + struct.pack("<I", len(GOOD)) + GOOD[8:], "msgSize"),
    "bytes after the message": (GOOD + b"\0", "sigSize"),
    "sigSize past the end": (GOOD[:2] + struct.pack("<H", 1) + GOOD[4:], "sigSize"),
    "a signature on an unsigned frame": (_frame(_message(), b"SIG"), "sigSize"),
    "no root table": (_frame(b"\0\0"), "root"),
    "root offset outside": (_frame(struct.pack("<I", 1 << 20) + GOOD[12:]), "root"),
    "root offset unaligned": (_frame(struct.pack("<I", 5) + GOOD[12:]), "root"),
    "vtable outside": (_frame(struct.pack("<Ii", 4, -(1 << 20)) + bytes(8)), "root vtable"),
    "encrypted": (_frame(_message(bools={5: 1})), "isEncrypted"),
    "isEncrypted left out (its default is true)": (_frame(_message(bools={5: None})), "isEncrypted"),
    "isSigned left out (its default is true)": (_frame(_message(bools={4: None})), "isSigned"),
    "signed (CMS)": (_frame(_message(bools={4: 1})), "isSigned"),
    "a bool of 2": (_frame(_message(bools={6: 2})), "isCompressed"),
    "no recipient": (_frame(_message(recipient=None)), "recipient"),
    "no sender": (_frame(_message(sender=None)), "sender"),
    "a sender not UTF-8": (_frame(_message(sender=b"\xff\xfe")), "sender"),
    "a header without key": (_frame(_message(headers=[(None, b"v")])), "headers[0].key"),
    "a header without value": (_frame(_message(headers=[(b"k", b"v"), (b"j", None)])), "headers[1].value"),
    "a header key twice": (_frame(_message(headers=[(b"k", b"v"), (b"k", b"w")])), "headers[1].key"),
    "compressed garbage": (_frame(_message(bools={6: 1}, body=b"not zlib")), "body"),
    "compressed, cut short": (_frame(_message(bools={6: 1}, body=zlib.compress(b"x" * 999)[:-3])), "body"),
    "compressed, bytes after": (_frame(_message(bools={6: 1}, body=zlib.compress(b"x") + b"!")), "body"),
}


def _unterminated() -> bytes:
    data = encode_smrf(SmrfFrame("RRRR", "s", 0))
    at = data.index(b"RRRR\0")
    return data[:at + 4] + b"X" + data[at + 5:]


BAD_FRAMES["a string without its NUL"] = (_unterminated(), "recipient")


@pytest.mark.parametrize("name", sorted(BAD_FRAMES))
def test_a_malformed_frame_is_refused_naming_its_field(name: str) -> None:
    data, field = BAD_FRAMES[name]
    with pytest.raises(SmrfDecodeError) as err:
        decode_smrf(data)
    assert err.value.field == field, str(err.value)


def test_the_schema_defaults_apply_to_fields_left_out() -> None:
    # A buffer without ttlAbsolute, headers and body (joynr's C++ writes none for an empty
    # body) is absolute, has no headers and an empty body.
    frame = decode_smrf(_frame(_message(headers=None, body=None)))
    assert (frame.ttl_absolute, frame.headers, frame.body, frame.ttl_ms) == (True, (), b"", 7)


@given(st.binary(max_size=200), st.integers(0, 400), st.binary(min_size=1, max_size=8))
@settings(max_examples=1000)
def test_garbage_and_damaged_frames_raise_only_the_decode_error(noise: bytes, at: int, patch: bytes) -> None:
    for data in (noise, _frame(noise), GOOD[:at % len(GOOD)] + patch + GOOD[at % len(GOOD) + len(patch):]):
        try:
            decode_smrf(data)
        except SmrfDecodeError:
            pass


def test_the_largest_frame_joynr_allows_is_taken_and_one_byte_more_is_not() -> None:
    overhead = len(encode_smrf(SmrfFrame("r", "s", 0, body=b"")))
    largest = encode_smrf(SmrfFrame("r", "s", 0, body=bytes(JOYNR_MAX_MESSAGE_SIZE - overhead)))
    assert len(largest) == JOYNR_MAX_MESSAGE_SIZE == 4_000_000
    assert len(decode_smrf(largest).body) == JOYNR_MAX_MESSAGE_SIZE - overhead
    with pytest.raises(SmrfDecodeError) as err:
        decode_smrf(largest + b"\0")
    assert err.value.field == "frame"


def test_an_inflated_body_is_bounded_before_it_is_allocated() -> None:
    bomb = encode_smrf(SmrfFrame("r", "s", 0, body=bytes(50_000_000), compressed=True))
    assert len(bomb) < 100_000
    with pytest.raises(SmrfDecodeError, match="inflates to more than 4000000"):
        decode_smrf(bomb)
    exact = encode_smrf(SmrfFrame("r", "s", 0, body=bytes(1000), compressed=True))
    assert decode_smrf(exact, SmrfLimits(max_body_bytes=1000)).body == bytes(1000)
    with pytest.raises(SmrfDecodeError) as err:
        decode_smrf(exact, SmrfLimits(max_body_bytes=999))
    assert err.value.field == "body"


def test_the_header_count_is_bounded() -> None:
    data = encode_smrf(SmrfFrame("r", "s", 0, headers=tuple((f"k{i}", "") for i in range(5))))
    assert len(decode_smrf(data, SmrfLimits(max_headers=5)).headers) == 5
    with pytest.raises(SmrfDecodeError, match="5 headers, at most 4"):
        decode_smrf(data, SmrfLimits(max_headers=4))


# -- a joynr message in a frame -------------------------------------------------------------

MESSAGE = JoynrMessage("rq", "consumer-1", "provider-1", 1_700_000_000_000, b"payload", id="msg-1",
                       reply_to=MqttAddress("gbid1", "cc1"), effort="BEST_EFFORT",
                       custom_headers=((REQUEST_REPLY_ID, "rr-1"), ("gb", "gbid1")), hops=3)


def test_joynrs_header_keys_and_values_are_on_the_wire() -> None:
    frame = decode_smrf(encode_joynr(MESSAGE))
    assert (frame.sender, frame.recipient, frame.ttl_ms, frame.ttl_absolute) == (
        "consumer-1", "provider-1", 1_700_000_000_000, True)
    assert dict(frame.headers) == {
        "t": "rq", "id": "msg-1", "ef": "BEST_EFFORT", "c-z4": "rr-1", "c-gb": "gbid1", "c-joynr-sim-hops": "3",
        "re": '{"_typeName":"joynr.system.RoutingTypes.MqttAddress","brokerUri":"gbid1","topic":"cc1"}',
    }
    plain = JoynrMessage("o", "a", "b", 1, id="m")  # NORMAL effort, no hops: no header for either
    assert dict(decode_smrf(encode_joynr(plain)).headers) == {"t": "o", "id": "m"}


@pytest.mark.parametrize("compressed", [False, True])
def test_a_joynr_message_comes_back_as_it_was(compressed: bool) -> None:
    back = decode_joynr(encode_joynr(MESSAGE, compressed=compressed))
    assert back == JoynrMessage(**{**MESSAGE.__dict__, "custom_headers": (("gb", "gbid1"), (REQUEST_REPLY_ID, "rr-1"))})


def _joynr(headers: dict[str, str], **smrf: object) -> bytes:
    fields = {"recipient": "p", "sender": "c", "ttl_ms": 5, "headers": tuple(headers.items())} | smrf
    return encode_smrf(SmrfFrame(**fields))  # type: ignore[arg-type]


OK = {"t": "rq", "id": "m"}


@pytest.mark.parametrize("data, error, field", [
    (_joynr({"id": "m"}), MessageDecodeError, "t"),
    (_joynr({**OK, "t": "xx"}), MessageDecodeError, "t"),
    (_joynr({"t": "rq"}), MessageDecodeError, "id"),
    (_joynr({**OK, "ef": "FAST"}), MessageDecodeError, "ef"),
    (_joynr({**OK, "id": ""}), InvalidMessage, "id"),
    (_joynr(OK, sender="a\nb"), InvalidMessage, "sender"),
    (_joynr(OK, recipient="x" * 201), InvalidMessage, "recipient"),
    (_joynr(OK, ttl_ms=-1), InvalidMessage, "ttlMs"),
    (_joynr(OK, ttl_absolute=False), InvalidMessage, "ttlAbsolute"),
    (_joynr({**OK, "re": "{"}), InvalidMessage, "re._typeName"),
    (_joynr({**OK, "re": '{"_typeName":"joynr.system.RoutingTypes.MqttAddress","brokerUri":"g","topic":"a/b"}'}),
     InvalidMessage, "re.topic"),
    (_joynr({**OK, "xyz": "1"}), InvalidMessage, "headers[2].key"),
    (_joynr({**OK, "c-": "1"}), InvalidMessage, "headers[0].key"),
    (_joynr({**OK, "c-z4": "1", f"c-{REQUEST_REPLY_ID}": "2"}), InvalidMessage, "headers[1].key"),
    (_joynr({**OK, "c-a": "\x00"}), InvalidMessage, "c-a"),
    (_joynr({**OK, "c-joynr-sim-hops": "07"}), InvalidMessage, "c-joynr-sim-hops"),
    (_joynr({**OK, "c-joynr-sim-hops": "1025"}), InvalidMessage, "c-joynr-sim-hops"),
    (_joynr({**OK, **{f"c-h{i}": "" for i in range(33)}}), InvalidMessage, "headers"),
    (_joynr(OK, body=b"x" * 2000), InvalidMessage, "frame"),
    (_joynr(OK, body=b"x" * 2000, compressed=True), SmrfDecodeError, "body"),
    (GOOD[:-1], SmrfDecodeError, "msgSize"),
])
def test_a_bad_joynr_value_raises_the_core_codecs_errors_naming_it(data: bytes, error: type, field: str) -> None:
    with pytest.raises(MessageDecodeError) as err:
        decode_joynr(data, WireLimits(max_frame_bytes=1500))
    assert type(err.value) is error and err.value.field == field, str(err.value)


def test_joynrs_creator_header_is_taken_and_a_frame_from_joynr_counts_no_hops() -> None:
    msg = decode_joynr(_joynr({**OK, "cr": "user", "re": '{"_typeName":"joynr.system.RoutingTypes.'
                                                        'WebSocketClientAddress","id":"ws-1"}'}))
    assert (msg.hops, msg.reply_to, msg.effort, msg.custom_headers) == (0, WebSocketClientAddress("ws-1"), "NORMAL", ())


JOYNR_GOOD = encode_joynr(MESSAGE)


@given(st.integers(0, 10_000), st.binary(min_size=1, max_size=8), st.binary(max_size=100))
@settings(max_examples=500)
def test_damaged_joynr_frames_and_payloads_raise_only_the_decode_errors(at: int, patch: bytes, noise: bytes) -> None:
    at %= len(JOYNR_GOOD)
    try:
        decode_joynr(JOYNR_GOOD[:at] + patch + JOYNR_GOOD[at + len(patch):])
    except MessageDecodeError:
        pass
    for decode in (request_from_joynr, one_way_from_joynr, reply_from_joynr):
        try:
            decode(noise)
        except PayloadDecodeError:
            pass


@pytest.mark.parametrize("headers", [(("joynr-sim-hops", "1"),), (("z4", "1"),), (("a", "1"), ("a", "2"))])
def test_a_message_smrf_cannot_carry_as_it_is_is_not_encoded(headers: tuple[tuple[str, str], ...]) -> None:
    with pytest.raises(ValueError):
        encode_joynr(JoynrMessage("rq", "a", "b", 1, custom_headers=headers))


# -- joynr's JSON payloads --------------------------------------------------------------------


def test_a_request_is_joynrs_request_json_and_back() -> None:
    payload = encode_request("add", [1, 2**40, 2.5, "x", [1, 2], {"a": None}, True])
    data = request_to_joynr(payload, "rr-1")
    assert json.loads(data) == {
        "_typeName": "joynr.Request", "methodName": "add", "requestReplyId": "rr-1",
        "paramDatatypes": ["Integer", "Long", "Double", "String", "Integer[]", "Object", "Boolean"],
        "params": [1, 2**40, 2.5, "x", [1, 2], {"a": None}, True]}
    assert request_from_joynr(data) == (payload, "rr-1")
    fire = encode_request("fire", [])
    assert json.loads(one_way_to_joynr(fire)) == {"_typeName": "joynr.OneWayRequest", "methodName": "fire",
                                                  "paramDatatypes": [], "params": []}
    assert one_way_from_joynr(one_way_to_joynr(fire)) == fire


@pytest.mark.parametrize("payload, error", [
    (encode_reply(42), None),
    (encode_reply(None), None),
    (encode_reply(error=ApplicationException("INVALID_ARGUMENT", "no")),
     {"_typeName": "joynr.exceptions.ApplicationException", "detailMessage": "no",
      "error": {"_typeName": "joynrsim.Error", "name": "INVALID_ARGUMENT"}}),
    (encode_reply(error=ProviderRuntimeException("down")),
     {"_typeName": "joynr.exceptions.ProviderRuntimeException", "detailMessage": "down"}),
    (encode_reply(error=MethodInvocationException("no such method")),
     {"_typeName": "joynr.exceptions.MethodInvocationException", "detailMessage": "no such method"}),
])
def test_a_reply_is_joynrs_reply_json_and_back(payload: bytes, error: dict | None) -> None:
    data = reply_to_joynr(payload, "rr-2")
    assert json.loads(data).get("error") == error
    assert reply_from_joynr(data) == (payload, "rr-2")


REQ = {"_typeName": "joynr.Request", "methodName": "m", "requestReplyId": "r"}
REP = {"_typeName": "joynr.Reply", "requestReplyId": "r"}


@pytest.mark.parametrize("decode, text, field", [
    (request_from_joynr, b"\xff", "payload"),
    (request_from_joynr, b"[", "payload"),
    (request_from_joynr, b'{"a":1,"a":2}', "payload"),
    (request_from_joynr, json.dumps({**REQ, "params": [float("nan")]}).encode(), "payload"),
    (request_from_joynr, b'{"_typeName":"joynr.Request","methodName":"m","requestReplyId":"r","params":[1e999],'
                         b'"paramDatatypes":["Double"]}', "params[0]"),
    (request_from_joynr, json.dumps({**REQ, "_typeName": "joynr.Reply"}).encode(), "_typeName"),
    (request_from_joynr, json.dumps({**REQ, "extra": 1}).encode(), "joynr.Request"),
    (request_from_joynr, json.dumps({**REQ, "methodName": "a b"}).encode(), "methodName"),
    (request_from_joynr, json.dumps({**REQ, "params": [1]}).encode(), "paramDatatypes"),
    (request_from_joynr, json.dumps({**REQ, "params": [2**63], "paramDatatypes": ["Long"]}).encode(), "params[0]"),
    (request_from_joynr, json.dumps({**REQ, "params": ["deep"], "paramDatatypes": ["X"]}).encode()
     .replace(b'"deep"', b"[" * 40 + b"]" * 40), "params[0]" + "[0]" * 32),
    (request_from_joynr, json.dumps({**REQ, "requestReplyId": ""}).encode(), "requestReplyId"),
    (request_from_joynr, b"[" * 100_000 + b"]" * 100_000, "payload"),
    (one_way_from_joynr, json.dumps({**REQ, "_typeName": "joynr.OneWayRequest"}).encode(), "joynr.OneWayRequest"),
    (reply_from_joynr, json.dumps(REP).encode(), "joynr.Reply"),
    (reply_from_joynr, json.dumps({**REP, "response": [1, 2]}).encode(), "response"),
    (reply_from_joynr, json.dumps({**REP, "response": [], "error": {}}).encode(), "joynr.Reply"),
    (reply_from_joynr, json.dumps({**REP, "error": {"_typeName": "java.lang.Error"}}).encode(), "error._typeName"),
    (reply_from_joynr, json.dumps({**REP, "error": {"_typeName": "joynr.exceptions.ApplicationException",
                                                    "error": {"name": "X"}}}).encode(), "error.error"),
    (reply_from_joynr, json.dumps({**REP, "error": {"_typeName": "joynr.exceptions.ProviderRuntimeException",
                                                    "detailMessage": "x" * 5000}}).encode(), "error.detailMessage"),
])
def test_a_bad_joynr_payload_is_refused_naming_its_field(decode, text: bytes, field: str) -> None:
    with pytest.raises(PayloadDecodeError) as err:
        decode(text)
    assert err.value.field == field, str(err.value)


@pytest.mark.parametrize("params", [[float("nan")], [1.5, float("inf")], [{"a": float("-inf")}], [b"bin"]])
def test_a_request_joynrs_json_cannot_carry_is_not_written(params: list) -> None:
    # orjson writes NaN and infinities as null: json must see them (and what orjson refuses).
    with pytest.raises(ValueError, match="joynr's JSON"):
        request_to_joynr(encode_request("m", params), "rr")
    assert json.loads(request_to_joynr(encode_request("m", [None, 2**64 - 1, "null"]), "r"))["params"] == [
        None, 2**64 - 1, "null"]
