"""The control protocol between the runner and a host process: frames, requests, answers,
errors and routing entries on the wire, each refused with a clear error when hostile."""

from __future__ import annotations

import asyncio

import msgpack
import msgspec
import pytest

from joynr_sim.core.address import InProcessAddress, MqttAddress, WebSocketClientAddress
from joynr_sim.core.discovery import DiscoveryError, DiscoveryErrorException
from joynr_sim.core.errors import ApplicationException, DiscoveryException, JoynrTimeoutException
from joynr_sim.core.routing import PutResult, RoutingEntry
from joynr_sim.host.rpc import ops
from joynr_sim.host.rpc.dispatch import Host
from joynr_sim.host.rpc.errors import RemoteError, failure, raise_remote
from joynr_sim.host.rpc.framing import (
    HEADER,
    MAX_FRAME_BYTES,
    VERSION,
    ProtocolError,
    decode_body,
    encode_frame,
    frame_length,
    read_frame,
    request,
    success,
    validate_response,
)
from joynr_sim.host.rpc.ops import validate_request
from joynr_sim.host.rpc.specs import check_options
from joynr_sim.host.rpc.wire import WireEntry, WirePutResult
from joynr_sim.runtime.participants import ProviderSkeleton


def roundtrip(message: dict) -> dict:
    frame = encode_frame(message)
    assert frame_length(frame[:4]) == len(frame) - 4
    return decode_body(frame[4:])


def test_a_request_and_its_answer_survive_the_wire():
    op = ops.LookupRoute(runtime="cc1", participant_id="p", gbid=None)
    assert op.arguments() == {"runtime": "cc1", "participant_id": "p", "gbid": None}
    assert validate_request(roundtrip(request(7, "lookup_route", op.arguments()))) == (7, "lookup_route", op)
    assert validate_response(roundtrip(success(7, {"a": [1, b"x"]}))) == (7, True, {"a": [1, b"x"]})
    call = ops.Request(runtime="a", sender="s", recipient="r", method="m", params=[b"\x00"], ttl_ms=5, gbid=None)
    assert validate_request(roundtrip(request(8, "request", call.arguments())))[2] == call


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
    ({"op": "stop", "args": {}}, "^stop.runtime: missing$"),
    ({"op": "stop", "args": {"runtime": 1}}, "^stop.runtime: expected str, got int$"),
    ({"op": "stop", "args": {"runtime": "a", "x": 1}}, "^stop: unknown field 'x'$"),
    ({"op": "stop", "args": {"runtime": "a", "op": "stop"}}, "^stop: unknown field 'op'$"),
    ({"op": "start", "args": {"runtime": "a", "restart": 1}}, "^start.restart: expected bool, got int$"),
    ({"op": "advance", "args": {"offset_ms": True}}, "^advance.offset_ms: expected int, got bool$"),
    ({"op": "stop", "args": {"runtime": "a"}, "extra": 1}, "unknown fields"),
    ({"op": "discover_proxy", "args": {"runtime": "a", "interface": "i", "domain": "d", "participant_id": None,
                                       "scope": "GLOBAL_ONLY", "gbids": [1], "cache_max_age_ms": 0}},
     r"^discover_proxy.gbids\[0\]: expected str, got int$"),
    ({"op": "hello", "args": {"version": 2}}, "^hello.version: 2, this host speaks 1$"),
    ({"op": "await_publications", "args": {"runtime": "a", "subscription_id": "s", "count": -1, "timeout_ms": 1}},
     "^await_publications.count: expected int >= 0$"),
    ({"op": "await_publications", "args": {"runtime": "a", "subscription_id": "s", "count": 1,
                                           "timeout_ms": ops.MAX_AWAIT_MS + 1}},
     f"^await_publications.timeout_ms: expected int <= {ops.MAX_AWAIT_MS}$"),
    ({"op": "load", "args": {"runtime": "a", "sender": "s", "recipient": "r", "method": "m", "params": [],
                             "ttl_ms": 1, "calls": 0, "concurrency": 1}}, "^load.calls: expected int >= 1$"),
    ({"op": "load", "args": {"runtime": "a", "sender": "s", "recipient": "r", "method": "m", "params": [],
                             "ttl_ms": 1, "calls": 1, "concurrency": 10**9}}, "^load.concurrency: expected int <= "),
    ({"op": "add_next_hop", "args": {"runtime": "a", "participant_id": "p", "origin": "elsewhere", "entry": {
        "address": {"_typeName": "joynr.system.RoutingTypes.MqttAddress", "brokerUri": "g", "topic": "t"},
        "visible": True, "expiry": 1, "sticky": False}}}, "^add_next_hop.origin: invalid enum value 'elsewhere'$"),
    ({"op": "add_next_hop", "args": {"runtime": "a", "participant_id": "p", "origin": "gcd", "entry": {
        "address": {"_typeName": "InProcess", "id": "p"}, "visible": True, "expiry": 1, "sticky": False}}},
     "^add_next_hop.entry.address: an InProcess address cannot be sent to a host$"),
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

def entry_over_the_wire(entry: RoutingEntry | None) -> RoutingEntry | None:
    found = ops.LookupRoute.answer(msgpack.unpackb(msgpack.packb(msgspec.to_builtins(WireEntry.of(entry)))))
    return None if found is None else found.routing_entry()


def test_routing_entries_cross_the_wire_with_their_addresses():
    for entry in (RoutingEntry(MqttAddress("gbid1", "cc2"), True, 1234, False),
                  RoutingEntry(WebSocketClientAddress("app"), False, 2**62, True), None):
        assert entry_over_the_wire(entry) == entry
    result = PutResult("refused", "own-address", None)
    assert ops.AddNextHop.answer(msgspec.to_builtins(WirePutResult.of(result))).put_result() == result


def test_an_in_process_entry_is_named_by_its_participant_and_never_sent_to_a_host():
    entry = RoutingEntry(InProcessAddress(ProviderSkeleton("p1", "d", "i", object())), True, 5)
    wire = WireEntry.of(entry)
    assert wire.address == {"_typeName": "InProcess", "id": "p1"}
    back = entry_over_the_wire(entry)
    assert back.address.skeleton.name == "p1" and back.is_globally_visible
    with pytest.raises(ProtocolError, match="^entry.address: an InProcess address cannot be sent to a host$"):
        ops.AddNextHop(runtime="cc1", participant_id="p1", entry=wire, origin="local")


MQTT = {"_typeName": "joynr.system.RoutingTypes.MqttAddress", "brokerUri": "g", "topic": "t"}


@pytest.mark.parametrize("data, problem", [
    ({"address": {}, "visible": True, "expiry": 1}, r"^lookup_route: the answer.sticky: missing$"),
    ({"address": {"_typeName": "x"}, "visible": True, "expiry": 1, "sticky": False},
     "^lookup_route: the answer.address: address field '_typeName': unknown address type 'x'$"),
    ({"address": {"_typeName": "InProcess", "id": 1}, "visible": True, "expiry": 1, "sticky": False},
     "^lookup_route: the answer.address: an InProcess address is {_typeName, id}$"),
    ({"address": MQTT, "visible": 1, "expiry": 1, "sticky": False},
     "^lookup_route: the answer.visible: expected bool, got int$"),
    ({"address": MQTT, "visible": True, "expiry": True, "sticky": False},
     "^lookup_route: the answer.expiry: expected int, got bool$"),
    ({"address": MQTT, "visible": True, "expiry": 1, "sticky": False, "more": 1},
     "^lookup_route: the answer: unknown field 'more'$"),
])
def test_a_hostile_entry_is_refused(data, problem):
    with pytest.raises(ProtocolError, match=problem):
        ops.LookupRoute.answer(data)


def test_every_answer_is_checked_against_its_ops_result():
    assert ops.CreateProxy.answer(["proxy", "provider"]) == ("proxy", "provider")
    assert ops.Request.answer({"any": ["thing"]}) == {"any": ["thing"]}  # a provider's own result
    for op, answer, problem in [
        (ops.CreateProxy, ["proxy"], r"^create_proxy: the answer: expected list of length 2, got 1$"),
        (ops.Start, {"ws_port": 70000}, r"^start: the answer.ws_port: expected int <= 65535$"),
        (ops.Load, {"ok": "1", "failed": {}, "seconds": 0.1}, r"^load: the answer.ok: expected int, got str$"),
        (ops.Hello, {"pid": 1}, r"^hello: the answer.version: missing$"),
    ]:
        with pytest.raises(ProtocolError, match=problem):
            op.answer(answer)


# -- what a host accepts -------------------------------------------------------------------

def test_options_are_checked_by_name_and_type():
    assert check_options("cluster-controller", {"old_joynr": True, "detached_timeout_ms": 5}) == {
        "old_joynr": True, "detached_timeout_ms": 5}
    assert check_options("libjoynr", {"route_back_to_parent": True, "purge_interval_ms": 5})
    with pytest.raises(ProtocolError, match="^options: ClusterController has no option 'nope'$"):
        check_options("cluster-controller", {"nope": 1})
    for reserved in ("clock", "ws_port", "ws_tokens", "node"):  # the host sets them
        with pytest.raises(ProtocolError, match=f"no option '{reserved}'"):
            check_options("libjoynr" if reserved == "clock" else "cluster-controller", {reserved: 1})
    with pytest.raises(ProtocolError, match="^options.old_joynr: expected a scalar, got list$"):
        check_options("cluster-controller", {"old_joynr": [True]})
    with pytest.raises(ProtocolError, match="^kind: expected one of"):
        check_options("gcd", {})


def spec(**changes):
    base = dict(run_dir="/nonexistent", run_id="r", policy="precedence", max_hops=32, seed=None, incarnation=0,
                options={}, cc_id="cc1", gbids=["gbid1"], provisioned=[], ws_host="127.0.0.1", ws_port=0, tokens={},
                brokers={"gbid1": {"host": "127.0.0.1", "port": 1883, "username": "u", "password": "p"}})
    base.update(changes)
    return base


def create(runtime: str, kind: str, spec: dict) -> dict:
    return request(1, "create", {"runtime": runtime, "kind": kind, "spec": spec})


@pytest.mark.parametrize("changes, problem", [
    ({"surprise": 1}, "^create.spec: unknown field 'surprise'$"),
    ({"ws_port": "80"}, "^create.spec.ws_port: expected int, got str$"),
    ({"ws_port": 65536}, "^create.spec.ws_port: expected int <= 65535$"),
    ({"ws_host": "example.org"}, "^create.spec.ws_host: expected an IP address, got 'example.org'$"),
    ({"seed": True}, "^create.spec.seed: expected int/NoneType, got bool$"),
    ({"brokers": {"gbid1": {"host": "h", "port": 0, "username": None, "password": None}}},
     r"^create.spec.brokers\[...\].port: expected int >= 1$"),
    ({"brokers": {"gbid2": {"host": "h", "port": 1, "username": None, "password": None}}},
     r"^create.spec.brokers: GBIDs \['gbid2'\] differ from \['gbid1'\]$"),
    ({"gbids": ["gbid1", 2]}, r"^create.spec.gbids\[1\]: expected str, got int$"),
    ({"provisioned": [["p", {"_typeName": "nope"}, True]]}, r"^create.spec.provisioned\[0\]: address field"),
    ({"provisioned": [["p"]]}, r"^create.spec.provisioned\[0\]: expected list of length 3, got 1$"),
    ({"tokens": {"app": 1}}, r"^create.spec.tokens\[...\]: expected str, got int$"),
    ({"options": {"nope": 1}}, "^create.spec.options: ClusterController has no option 'nope'$"),
    ({"options": {"ws_tokens": "x"}}, "^create.spec.options: ClusterController has no option 'ws_tokens'$"),
])
async def test_a_hostile_create_spec_is_refused_before_anything_is_made(changes, problem, tmp_path):
    host = Host(clock=None)
    with pytest.raises(ProtocolError, match=problem):
        validate_request(create("cc1", "cluster-controller", spec(run_dir=str(tmp_path), **changes)))
    with pytest.raises(ProtocolError, match=problem):
        await host.handle("create", create("cc1", "cluster-controller", spec(run_dir=str(tmp_path), **changes))["args"])
    assert host.runtimes == {}
    assert not any(tmp_path.iterdir())  # nothing was made for it


def test_a_libjoynr_spec_needs_a_websocket_address(tmp_path):
    base = dict(run_dir=str(tmp_path), run_id="r", policy="precedence", max_hops=32, seed=None, incarnation=0,
                options={}, cc_id="cc1", token=None)
    with pytest.raises(ProtocolError, match="^create.spec.cc_address: expected a WebSocketAddress$"):
        validate_request(create("app", "libjoynr", dict(base, cc_address={
            "_typeName": "joynr.system.RoutingTypes.MqttAddress", "brokerUri": "g", "topic": "t"})))
    with pytest.raises(ProtocolError, match="^create.kind: invalid enum value 'gcd'$"):
        validate_request(create("app", "gcd", base))


async def test_the_host_names_a_runtime_it_does_not_hold():
    host = Host(clock=None)
    with pytest.raises(ProtocolError, match="^runtime: no runtime 'cc9' in this host$"):
        await host.handle("queued", {"runtime": "cc9", "participant_id": None})
    with pytest.raises(ProtocolError, match="^op: 'stop' with the arguments of 'queued'$"):
        await host.handle("stop", ops.Queued(runtime="cc9", participant_id=None))
