"""The control protocol between the runner and a host process: frames, requests, answers,
errors and routing entries on the wire, each refused with a clear error when hostile."""

from __future__ import annotations

import asyncio

import msgpack
import pytest

from joynr_sim.core.address import InProcessAddress, MqttAddress, WebSocketClientAddress
from joynr_sim.core.discovery import DiscoveryError, DiscoveryErrorException
from joynr_sim.core.errors import ApplicationException, JoynrTimeoutException
from joynr_sim.core.routing import PutResult, RoutingEntry
from joynr_sim.host.host import Host, check_options
from joynr_sim.host.protocol import (
    HEADER,
    MAX_FRAME_BYTES,
    VERSION,
    ProtocolError,
    RemoteError,
    decode_body,
    encode_frame,
    entry_from_wire,
    entry_to_wire,
    failure,
    frame_length,
    put_result_from_wire,
    put_result_to_wire,
    raise_remote,
    read_frame,
    request,
    success,
    validate_request,
    validate_response,
)
from joynr_sim.runtime.base import DiscoveryException
from joynr_sim.runtime.participants import ProviderSkeleton


def roundtrip(message: dict) -> dict:
    frame = encode_frame(message)
    assert frame_length(frame[:4]) == len(frame) - 4
    return decode_body(frame[4:])


def test_a_request_and_its_answer_survive_the_wire():
    args = {"runtime": "cc1", "participant_id": "p", "gbid": None}
    assert validate_request(roundtrip(request(7, "table_lookup", args))) == (7, "table_lookup", args)
    assert validate_response(roundtrip(success(7, {"a": [1, b"x"]}))) == (7, True, {"a": [1, b"x"]})


@pytest.mark.parametrize("header", [HEADER.pack(0), HEADER.pack(MAX_FRAME_BYTES + 1), HEADER.pack(2**32 - 1)])
def test_a_frame_length_outside_the_bounds_is_refused(header):
    with pytest.raises(ProtocolError, match="frame: length"):
        frame_length(header)


@pytest.mark.parametrize("body, problem", [
    (b"\xc1", "not msgpack"),
    (msgpack.packb([1, 2]), "expected a map"),
    (msgpack.packb({"v": 2, "id": 1}), "protocol version 2"),
    (msgpack.packb({"v": True, "id": 1}), "protocol version True"),
    (msgpack.packb({"v": VERSION, "id": -1}), "id: expected"),
    (msgpack.packb({"v": VERSION, "id": "1"}), "id: expected"),
    (msgpack.packb({"v": VERSION, "id": 2**60}), "id: expected"),
    (msgpack.packb({1: 2}), "not msgpack"),  # a map key that is no string
])
def test_a_body_that_is_no_message_is_refused(body, problem):
    with pytest.raises(ProtocolError, match=problem):
        decode_body(body)


@pytest.mark.parametrize("message, problem", [
    ({"op": "nope", "args": {}}, "unknown operation 'nope'"),
    ({"op": 3, "args": {}}, "unknown operation 3"),
    ({"op": "stop", "args": []}, "args: expected a map"),
    ({"op": "stop", "args": {}}, "stop.runtime: missing"),
    ({"op": "stop", "args": {"runtime": 1}}, "stop.runtime: expected str"),
    ({"op": "stop", "args": {"runtime": "a", "x": 1}}, "unknown arguments"),
    ({"op": "start", "args": {"runtime": "a", "restart": 1}}, "start.restart: expected bool"),
    ({"op": "advance", "args": {"offset_ms": True}}, "advance.offset_ms: expected int"),
    ({"op": "stop", "args": {"runtime": "a"}, "extra": 1}, "unknown fields"),
    ({"op": "discover_proxy", "args": {"runtime": "a", "interface": "i", "domain": "d", "participant_id": None,
                                       "scope": "GLOBAL_ONLY", "gbids": [1], "cache_max_age_ms": 0}},
     "list of strings"),
])
def test_a_request_that_breaks_the_schema_is_refused(message, problem):
    with pytest.raises(ProtocolError, match=problem):
        validate_request({"v": VERSION, "id": 1, **message})


@pytest.mark.parametrize("message, problem", [
    ({"ok": 1}, "ok: expected"),
    ({"ok": False, "error": "boom"}, "error: expected"),
    ({"ok": False, "error": {"type": "X", "message": 1, "error": None}}, "error: expected"),
    ({"ok": True, "surprise": 1}, "unknown fields"),
])
def test_an_answer_that_breaks_the_schema_is_refused(message, problem):
    with pytest.raises(ProtocolError, match=problem):
        validate_response({"v": VERSION, "id": 1, **message})


def test_an_oversized_message_is_refused_before_it_is_sent():
    with pytest.raises(ProtocolError, match="more than"):
        encode_frame(success(1, b"x" * (MAX_FRAME_BYTES + 1)))


@pytest.mark.parametrize("data, problem", [
    (b"\x00\x00", "inside a header"),
    (HEADER.pack(10) + b"abc", "inside a 10-byte frame"),
])
def test_a_stream_that_ends_inside_a_frame_is_refused(data, problem):
    async def read():
        reader = asyncio.StreamReader()
        reader.feed_data(data)
        reader.feed_eof()
        return await read_frame(reader)

    with pytest.raises(ProtocolError, match=problem):
        asyncio.run(read())


def test_end_of_file_between_frames_is_the_end_not_an_error():
    async def read():
        reader = asyncio.StreamReader()
        reader.feed_data(encode_frame(success(1, None)))
        reader.feed_eof()
        return [await read_frame(reader), await read_frame(reader)]

    first, second = asyncio.run(read())
    assert first["id"] == 1 and second is None


# -- errors ------------------------------------------------------------------------------

def answer_of(exc: BaseException) -> dict:
    _, ok, error = validate_response(roundtrip(failure(3, exc)))
    assert not ok
    return error


def test_joynr_errors_come_back_as_their_own_types():
    with pytest.raises(JoynrTimeoutException, match="no reply"):
        raise_remote(answer_of(JoynrTimeoutException("no reply")))
    with pytest.raises(ApplicationException) as app:
        raise_remote(answer_of(ApplicationException("INVALID_ARGUMENT", "two numbers")))
    assert app.value.error == "INVALID_ARGUMENT"
    with pytest.raises(DiscoveryErrorException) as disc:
        raise_remote(answer_of(DiscoveryErrorException(DiscoveryError.NO_ENTRY_FOR_PARTICIPANT, "participant p")))
    assert disc.value.error is DiscoveryError.NO_ENTRY_FOR_PARTICIPANT
    assert str(disc.value) == "NO_ENTRY_FOR_PARTICIPANT: participant p"
    with pytest.raises(DiscoveryException):
        raise_remote(answer_of(DiscoveryException("none")))
    with pytest.raises(KeyError) as key:
        raise_remote(answer_of(KeyError("participant_id: no provider")))
    assert key.value.args == ("participant_id: no provider",)


def test_an_unknown_error_keeps_its_name():
    class Strange(Exception):
        pass

    with pytest.raises(RemoteError, match="Strange: odd") as info:
        raise_remote(answer_of(Strange("odd")))
    assert info.value.type_name == "Strange"


def test_an_unknown_discovery_error_code_is_not_trusted():
    with pytest.raises(RemoteError, match="DiscoveryErrorException"):
        raise_remote({"type": "DiscoveryErrorException", "message": "m", "error": "NOT_A_CODE"})


# -- routing entries -----------------------------------------------------------------------

def test_routing_entries_cross_the_wire_with_their_addresses():
    for entry in (RoutingEntry(MqttAddress("gbid1", "cc2"), True, 1234, False),
                  RoutingEntry(WebSocketClientAddress("app"), False, 2**62, True)):
        assert entry_from_wire(msgpack.unpackb(msgpack.packb(entry_to_wire(entry)))) == entry
    result = PutResult("refused", "own-address", None)
    assert put_result_from_wire(put_result_to_wire(result)) == result


def test_an_in_process_entry_is_named_by_its_participant_and_never_sent_to_a_host():
    entry = RoutingEntry(InProcessAddress(ProviderSkeleton("p1", "d", "i", object())), True, 5)
    wire = entry_to_wire(entry)
    assert wire["address"] == {"_typeName": "InProcess", "id": "p1"}
    back = entry_from_wire(wire)
    assert back.address.skeleton.name == "p1" and back.is_globally_visible
    with pytest.raises(ProtocolError, match="InProcess address cannot be sent"):
        entry_from_wire(wire, in_process=False)


@pytest.mark.parametrize("data, problem", [
    ({"address": {}, "visible": True, "expiry": 1}, "expected {address"),
    ({"address": {"_typeName": "x"}, "visible": True, "expiry": 1, "sticky": False}, "entry.address"),
    ({"address": {"_typeName": "joynr.system.RoutingTypes.MqttAddress", "brokerUri": "g", "topic": "t"},
      "visible": 1, "expiry": 1, "sticky": False}, "entry.visible"),
    ({"address": {"_typeName": "joynr.system.RoutingTypes.MqttAddress", "brokerUri": "g", "topic": "t"},
      "visible": True, "expiry": True, "sticky": False}, "entry.expiry"),
])
def test_a_hostile_entry_is_refused(data, problem):
    with pytest.raises(ProtocolError, match=problem):
        entry_from_wire(data)


# -- what a host accepts -------------------------------------------------------------------

def test_options_are_checked_by_name_and_type():
    assert check_options("cluster-controller", {"old_joynr": True, "detached_timeout_ms": 5}) == {
        "old_joynr": True, "detached_timeout_ms": 5}
    assert check_options("libjoynr", {"route_back_to_parent": True})
    with pytest.raises(ProtocolError, match="no option 'nope'"):
        check_options("cluster-controller", {"nope": 1})
    with pytest.raises(ProtocolError, match="no option 'clock'"):
        check_options("libjoynr", {"clock": 1})  # reserved: the host sets it
    with pytest.raises(ProtocolError, match="expected a scalar"):
        check_options("cluster-controller", {"old_joynr": [True]})
    with pytest.raises(ProtocolError, match="create.kind"):
        check_options("gcd", {})


def spec(**changes):
    base = dict(run_dir="/nonexistent", run_id="r", policy="precedence", max_hops=32, seed=None, incarnation=0,
                options={}, cc_id="cc1", gbids=["gbid1"], provisioned=[], ws_host="127.0.0.1", ws_port=0, tokens={},
                brokers={"gbid1": {"host": "127.0.0.1", "port": 1883, "username": "u", "password": "p"}})
    base.update(changes)
    return base


@pytest.mark.parametrize("changes, problem", [
    ({"surprise": 1}, "unknown fields"),
    ({"ws_port": "80"}, "create.spec.ws_port"),
    ({"ws_host": "example.org"}, "create.spec.ws_host: expected an IP address"),
    ({"seed": True}, "create.spec.seed"),
    ({"brokers": {"gbid1": {"host": "h", "port": 0, "username": None, "password": None}}}, "brokers.gbid1"),
    ({"brokers": {"gbid2": {"host": "h", "port": 1, "username": None, "password": None}}}, r"GBIDs \['gbid2'\] differ"),
    ({"gbids": ["gbid1", 2]}, "create.spec.gbids"),
    ({"provisioned": [["p", {"_typeName": "nope"}, True]]}, "create.spec.provisioned"),
    ({"provisioned": [["p"]]}, "create.spec.provisioned"),
    ({"tokens": {"app": 1}}, "create.spec.tokens"),
])
def test_a_hostile_create_spec_is_refused_before_anything_is_made(changes, problem, tmp_path):
    host = Host(clock=None)
    with pytest.raises(ProtocolError, match=problem):
        host.create("cc1", "cluster-controller", spec(run_dir=str(tmp_path), **changes))
    assert host.runtimes == {}
    assert not any(tmp_path.iterdir())  # nothing was made for it


def test_a_libjoynr_spec_needs_a_websocket_address(tmp_path):
    host = Host(clock=None)
    base = dict(run_dir=str(tmp_path), run_id="r", policy="precedence", max_hops=32, seed=None, incarnation=0,
                options={}, cc_id="cc1", token=None)
    with pytest.raises(ProtocolError, match="expected a WebSocketAddress"):
        host.create("app", "libjoynr", dict(base, cc_address={
            "_typeName": "joynr.system.RoutingTypes.MqttAddress", "brokerUri": "g", "topic": "t"}))
    with pytest.raises(ProtocolError, match="create.kind"):
        host.create("app", "gcd", base)
