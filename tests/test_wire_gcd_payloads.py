"""GCD calls on the joynr wire: joynr's GlobalCapabilitiesDirectory overloads (methodName and
paramDatatypes as joynr's Java runtime names them) with GlobalDiscoveryEntry structs, and its
replies with joynr.types.DiscoveryError. The joynr JSON here is written out as joynr sends it
(bmwcarit/joynr GlobalCapabilitiesDirectory.fidl, DiscoveryTypes.fidl, ReflectionUtils.java),
not made by the encoder under test."""

from __future__ import annotations

import copy
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import msgpack
import pytest
from hypothesis import given
from hypothesis import strategies as st

from joynr_sim.core.address import ChannelAddress, MqttAddress, WebSocketClientAddress, to_json
from joynr_sim.core.discovery import GlobalDiscoveryEntry
from joynr_sim.core.errors import ApplicationException, ProviderRuntimeException
from joynr_sim.core.gcd import GCD_PARTICIPANT_ID
from joynr_sim.core.message import ONE_WAY, REPLY, REQUEST
from joynr_sim.runtime.participants import encode_reply, encode_request
from joynr_sim.scenario import load_scenario
from joynr_sim.scenario.runner import run_scenario
from joynr_sim.wire import codecs
from joynr_sim.wire.payloads import PayloadDecodeError
from joynr_sim.wire.subscription_payloads import from_joynr_payload, to_joynr_payload

GCD = GCD_PARTICIPANT_ID
ADDRESS = '{"_typeName":"joynr.system.RoutingTypes.MqttAddress","brokerUri":"gbid1","topic":"cc1"}'
# A GlobalDiscoveryEntry as joynr writes it: every struct with its _typeName, the scope by name.
ENTRY_JSON: dict[str, Any] = {
    "_typeName": "joynr.types.GlobalDiscoveryEntry",
    "providerVersion": {"_typeName": "joynr.types.Version", "majorVersion": 47, "minorVersion": 11},
    "domain": "dom",
    "interfaceName": "joynrsim/Echo",
    "participantId": "echo-1",
    "qos": {"_typeName": "joynr.types.ProviderQos",
            "customParameters": [{"_typeName": "joynr.types.CustomParameter", "name": "k", "value": "v"}],
            "priority": 1234, "scope": "GLOBAL", "supportsOnChangeSubscriptions": True},
    "lastSeenDateMs": 1700000000000,
    "expiryDateMs": 1703628800000,
    "publicKeyId": "",
    "address": ADDRESS,
}
# The same entry as the simulator's GlobalDiscoveryEntry.to_wire() writes it.
ENTRY_SIM: dict[str, Any] = {
    "participantId": "echo-1", "domain": "dom", "interfaceName": "joynrsim/Echo",
    "providerVersion": {"majorVersion": 47, "minorVersion": 11},
    "qos": {"customParameters": [{"name": "k", "value": "v"}], "priority": 1234, "scope": "GLOBAL",
            "supportsOnChangeSubscriptions": True},
    "lastSeenDateMs": 1700000000000, "expiryDateMs": 1703628800000, "publicKeyId": "", "address": ADDRESS,
}
E = "joynr.types.GlobalDiscoveryEntry"

# (the simulator's method, its params, joynr's methodName, paramDatatypes, params)
OVERLOADS = [
    ("add_old", [[ENTRY_SIM]], "add", [E + "[]"], [[ENTRY_JSON]]),
    ("add_old", [ENTRY_SIM], "add", [E], [ENTRY_JSON]),
    ("add", [ENTRY_SIM, ["gbid1", "gbid2"]], "add", [E, "String[]"], [ENTRY_JSON, ["gbid1", "gbid2"]]),
    ("lookup_domains_old", [["dom"], "joynrsim/Echo"], "lookup", ["String[]", "String"], [["dom"], "joynrsim/Echo"]),
    ("lookup_domains", [["dom"], "joynrsim/Echo", ["gbid1"]], "lookup", ["String[]", "String", "String[]"],
     [["dom"], "joynrsim/Echo", ["gbid1"]]),
    ("lookup_participant_old", ["echo-1"], "lookup", ["String"], ["echo-1"]),
    ("lookup_participant", ["echo-1", ["gbid1"]], "lookup", ["String", "String[]"], ["echo-1", ["gbid1"]]),
    ("remove_old", [["echo-1", "echo-2"]], "remove", ["String[]"], [["echo-1", "echo-2"]]),
    ("remove_old", ["echo-1"], "remove", ["String"], ["echo-1"]),
    ("remove", ["echo-1", [""]], "remove", ["String", "String[]"], ["echo-1", [""]]),
    ("remove_stale", ["cc1", 1700000000000], "removeStale", ["String", "Long"], ["cc1", 1700000000000]),
    ("touch", ["cc1"], "touch", ["String"], ["cc1"]),
    ("touch", ["cc1", ["echo-1"]], "touch", ["String", "String[]"], ["cc1", ["echo-1"]]),
]
IDS = [f"{m}({', '.join(t)})" for _, _, m, t, _ in OVERLOADS]


def joynr_request(method: str, datatypes: list[str], params: list[Any], rrid: str = "rr-1") -> dict[str, Any]:
    return {"_typeName": "joynr.Request", "methodName": method, "paramDatatypes": datatypes, "params": params,
            "requestReplyId": rrid}


def to_gcd(payload: bytes, msg_type: str = REQUEST) -> dict[str, Any]:
    return json.loads(to_joynr_payload(msg_type, payload, "rr-1", recipient=GCD, sender="cc-discovery"))


def read_at_gcd(obj: Any, msg_type: str = REQUEST) -> tuple[bytes, str | None]:
    return from_joynr_payload(msg_type, json.dumps(obj).encode(), recipient=GCD, sender="cc-discovery")


def from_gcd(payload: bytes) -> dict[str, Any]:
    return json.loads(to_joynr_payload(REPLY, payload, "rr-1", recipient="cc-discovery", sender=GCD))


def read_from_gcd(obj: Any) -> tuple[bytes, str | None]:
    return from_joynr_payload(REPLY, json.dumps(obj).encode(), recipient="cc-discovery", sender=GCD)


# -- every overload, both ways -------------------------------------------------------------


@pytest.mark.parametrize("sim_method, sim_params, method, datatypes, params", OVERLOADS, ids=IDS)
def test_every_gcd_call_goes_to_joynr_as_its_overload(sim_method, sim_params, method, datatypes, params) -> None:
    assert to_gcd(encode_request(sim_method, sim_params)) == joynr_request(method, datatypes, params)


@pytest.mark.parametrize("sim_method, sim_params, method, datatypes, params", OVERLOADS, ids=IDS)
def test_every_overload_from_joynr_is_the_gcd_method(sim_method, sim_params, method, datatypes, params) -> None:
    assert read_at_gcd(joynr_request(method, datatypes, params)) == (encode_request(sim_method, sim_params), "rr-1")


def test_a_one_way_gcd_call_is_an_overload_too() -> None:
    sent = to_gcd(encode_request("add", [ENTRY_SIM, ["gbid1"]]), ONE_WAY)
    assert sent == {"_typeName": "joynr.OneWayRequest", "methodName": "add", "paramDatatypes": [E, "String[]"],
                    "params": [ENTRY_JSON, ["gbid1"]]}
    assert read_at_gcd(sent, ONE_WAY) == (encode_request("add", [ENTRY_SIM, ["gbid1"]]), None)


REPLIES = [
    ("void", encode_reply(None), {"response": []}),
    ("lookup domains", encode_reply([ENTRY_SIM]), {"response": [[ENTRY_JSON]]}),
    ("lookup domains, none", encode_reply([]), {"response": [[]]}),
    ("lookup participant", encode_reply(ENTRY_SIM), {"response": [ENTRY_JSON]}),
    ("DiscoveryError", encode_reply(error=ApplicationException("INVALID_GBID", "gbids: invalid GBID ''")),
     {"error": {"_typeName": "joynr.exceptions.ApplicationException", "detailMessage": "gbids: invalid GBID ''",
                "error": {"_typeName": "joynr.types.DiscoveryError", "name": "INVALID_GBID"}}}),
    ("ProviderRuntimeException", encode_reply(error=ProviderRuntimeException("entry field 'qos'")),
     {"error": {"_typeName": "joynr.exceptions.ProviderRuntimeException", "detailMessage": "entry field 'qos'"}}),
]


@pytest.mark.parametrize("payload, body", [r[1:] for r in REPLIES], ids=[r[0] for r in REPLIES])
def test_every_gcd_reply_goes_to_joynr_and_back(payload: bytes, body: dict[str, Any]) -> None:
    joynr = {"_typeName": "joynr.Reply", "requestReplyId": "rr-1", **body}
    assert from_gcd(payload) == joynr
    assert read_from_gcd(joynr) == (payload, "rr-1")


def test_only_the_gcd_speaks_its_interface() -> None:
    """Another provider's calls and errors keep the simulator's datatypes and enum name."""
    request = json.loads(to_joynr_payload(REQUEST, encode_request("add", [{"a": 1}, ["g"]]), "rr-1",
                                          recipient="echo-provider", sender="cc"))
    assert request["paramDatatypes"] == ["Object", "String[]"]
    reply = json.loads(to_joynr_payload(REPLY, encode_reply(error=ApplicationException("INVALID_GBID", "x")),
                                        "rr-1", recipient="cc", sender="echo-provider"))
    assert reply["error"]["error"]["_typeName"] == "joynrsim.Error"
    # and the GCD's DiscoveryError from anyone else is just an enum
    assert from_joynr_payload(REPLY, json.dumps({**reply, "error": {**reply["error"], "error": {
        "_typeName": "joynr.types.DiscoveryError", "name": "INVALID_GBID"}}}).encode(), sender="echo-provider")[0] \
        == encode_reply(error=ApplicationException("INVALID_GBID", "x"))


def test_a_method_the_gcd_has_not_got_is_written_as_any_request_and_refused_where_it_is_read() -> None:
    sent = to_gcd(encode_request("echo", ["fz"]))
    assert (sent["methodName"], sent["paramDatatypes"]) == ("echo", ["String"])
    with pytest.raises(PayloadDecodeError) as refused:
        read_at_gcd(sent)
    assert refused.value.field == "methodName"


@pytest.mark.parametrize("method, params", [
    ("add", [{**ENTRY_SIM, "participantId": ""}, ["gbid1"]]),  # no entry a GCD takes
    ("add", [{k: v for k, v in ENTRY_SIM.items() if k != "address"}, ["gbid1"]]),
    ("add", [{**ENTRY_SIM, "isLocal": True}, ["gbid1"]]),  # not a GlobalDiscoveryEntry's field
    ("lookup_participant", ["echo-1", "gbid1"]),  # gbids not a list
    ("touch", ["cc1", None]),
    ("remove_stale", ["cc1", 2**63]),
    ("lookup_domains", [["d" * 5000], "i", ["g"]]),  # longer than the GCD's side reads
], ids=["empty participant", "no address", "extra field", "gbids a string", "touch null", "Long past int64",
        "huge domain"])
def test_a_gcd_call_joynr_cannot_carry_is_not_written(method: str, params: list[Any]) -> None:
    with pytest.raises(ValueError):
        to_gcd(encode_request(method, params))


def test_a_gcd_error_that_is_no_discovery_error_is_not_written() -> None:
    with pytest.raises(ValueError):
        from_gcd(encode_reply(error=ApplicationException("NOT_A_DISCOVERY_ERROR", "x")))


# -- round trips of random calls -------------------------------------------------------------

_texts = st.text(max_size=12)
_int64 = st.integers(-(2**63), 2**63 - 1)
_addresses = st.one_of(
    st.builds(MqttAddress, _texts, _texts), st.builds(WebSocketClientAddress, _texts),
    st.builds(ChannelAddress, _texts, _texts),
).map(to_json)
entries = st.fixed_dictionaries({
    "participantId": st.text(min_size=1, max_size=12), "domain": _texts, "interfaceName": _texts,
    "providerVersion": st.fixed_dictionaries({"majorVersion": st.integers(-(2**31), 2**31 - 1),
                                              "minorVersion": st.integers(-(2**31), 2**31 - 1)}),
    "qos": st.fixed_dictionaries({
        "customParameters": st.lists(st.fixed_dictionaries({"name": _texts, "value": _texts}), max_size=3),
        "priority": _int64, "scope": st.sampled_from(["GLOBAL", "LOCAL"]),
        "supportsOnChangeSubscriptions": st.booleans()}),
    "lastSeenDateMs": _int64, "expiryDateMs": _int64, "publicKeyId": _texts, "address": _addresses,
}).map(lambda wire: GlobalDiscoveryEntry.from_wire(wire).to_wire())  # in the order the simulator writes
_strings = st.lists(_texts, max_size=4)
calls = st.one_of(
    st.tuples(st.just("add_old"), st.tuples(st.lists(entries, max_size=3))),
    st.tuples(st.just("add_old"), st.tuples(entries)),
    st.tuples(st.just("add"), st.tuples(entries, _strings)),
    st.tuples(st.just("lookup_domains_old"), st.tuples(_strings, _texts)),
    st.tuples(st.just("lookup_domains"), st.tuples(_strings, _texts, _strings)),
    st.tuples(st.just("lookup_participant_old"), st.tuples(_texts)),
    st.tuples(st.just("lookup_participant"), st.tuples(_texts, _strings)),
    st.tuples(st.just("remove_old"), st.tuples(_strings | _texts)),
    st.tuples(st.just("remove"), st.tuples(_texts, _strings)),
    st.tuples(st.just("remove_stale"), st.tuples(_texts, _int64)),
    st.tuples(st.just("touch"), st.tuples(_texts) | st.tuples(_texts, _strings)),
)


@given(calls)
def test_random_gcd_calls_go_to_joynr_and_back_byte_for_byte(call: tuple[str, tuple[Any, ...]]) -> None:
    payload = encode_request(call[0], list(call[1]))
    assert read_at_gcd(to_gcd(payload)) == (payload, "rr-1")


@given(st.one_of(st.none(), entries, st.lists(entries, max_size=3)))
def test_random_gcd_results_go_to_joynr_and_back_byte_for_byte(result: Any) -> None:
    payload = encode_reply(result)
    assert read_from_gcd(from_gcd(payload)) == (payload, "rr-1")


@given(st.sampled_from(["UNKNOWN_GBID", "INVALID_GBID", "NO_ENTRY_FOR_PARTICIPANT", "NO_ENTRY_FOR_SELECTED_BACKENDS",
                        "INTERNAL_ERROR"]), _texts)
def test_every_discovery_error_goes_to_joynr_and_back_byte_for_byte(name: str, detail: str) -> None:
    payload = encode_reply(error=ApplicationException(name, detail))
    assert read_from_gcd(from_gcd(payload)) == (payload, "rr-1")


# -- hostile input -----------------------------------------------------------------------------


def _add(**changes: Any) -> dict[str, Any]:
    """joynr's add(GlobalDiscoveryEntry, String[]) with its entry changed: a path a.b.c -> value
    (``DELETE`` removes the field)."""
    entry = copy.deepcopy(ENTRY_JSON)
    for path, value in changes.items():
        *outer, last = path.split("__")
        target = entry
        for key in outer:
            target = target[int(key)] if key.isdigit() else target[key]
        if value is DELETE:
            del target[last]
        else:
            target[last] = value
    return joynr_request("add", [E, "String[]"], [entry, ["gbid1"]])


DELETE = object()
_deep: Any = "x"
for _ in range(40):
    _deep = [_deep]

HOSTILE_CALLS = [
    ("add with datatypes of no add", joynr_request("add", ["String", "String[]"], ["p", ["g"]]), "paramDatatypes"),
    ("an entry where remove has a String", joynr_request("remove", ["String", "String[]"], [ENTRY_JSON, ["g"]]),
     "params[0]"),
    ("lookup with swapped datatypes", joynr_request("lookup", ["String", "String[]"], [["dom"], "i"]), "params[0]"),
    ("an overload joynr has not got", joynr_request("touch", ["Long"], [5]), "paramDatatypes"),
    ("a method joynr has not got", joynr_request("lookupAll", ["String"], ["x"]), "methodName"),
    ("datatypes of another count", joynr_request("remove", ["String"], ["a", ["g"]]), "paramDatatypes"),
    ("no datatypes", {k: v for k, v in joynr_request("touch", ["String"], ["cc1"]).items()
                      if k != "paramDatatypes"}, "paramDatatypes"),
    ("entry _typeName", _add(_typeName="joynr.types.DiscoveryEntry"), "params[0]._typeName"),
    ("entry without _typeName", _add(_typeName=DELETE), "params[0]._typeName"),
    ("Version _typeName", _add(providerVersion___typeName="joynr.types.ProviderQos"),
     "params[0].providerVersion._typeName"),
    ("ProviderQos _typeName", _add(qos___typeName="joynr.types.Version"), "params[0].qos._typeName"),
    ("CustomParameter _typeName", _add(qos__customParameters__0___typeName=DELETE),
     "params[0].qos.customParameters[0]._typeName"),
    ("missing address", _add(address=DELETE), "params[0].address"),
    ("missing priority", _add(qos__priority=DELETE), "params[0].qos.priority"),
    ("missing minorVersion", _add(providerVersion__minorVersion=DELETE), "params[0].providerVersion.minorVersion"),
    ("a field joynr has not got", _add(isLocal=True), "params[0]"),
    ("majorVersion a string", _add(providerVersion__majorVersion="47"), "params[0].providerVersion.majorVersion"),
    ("majorVersion past Int32", _add(providerVersion__majorVersion=2**31), "params[0].providerVersion.majorVersion"),
    ("priority past Int64", _add(qos__priority=2**63), "params[0].qos.priority"),
    ("lastSeenDateMs a float", _add(lastSeenDateMs=1.5), "params[0].lastSeenDateMs"),
    ("expiryDateMs a bool", _add(expiryDateMs=True), "params[0].expiryDateMs"),
    ("scope unknown", _add(qos__scope="GLOBALLY"), "params[0].qos.scope"),
    ("scope an object", _add(qos__scope={"_typeName": "joynr.types.ProviderScope", "name": "GLOBAL"}),
     "params[0].qos.scope"),
    ("supportsOnChange a string", _add(qos__supportsOnChangeSubscriptions="true"),
     "params[0].qos.supportsOnChangeSubscriptions"),
    ("customParameters an object", _add(qos__customParameters={}), "params[0].qos.customParameters"),
    ("custom value a number", _add(qos__customParameters__0__value=1), "params[0].qos.customParameters[0].value"),
    ("address not JSON", _add(address="{mqtt"), "params[0].address"),
    ("address an object", _add(address={"_typeName": "joynr.system.RoutingTypes.MqttAddress"}),
     "params[0].address"),
    ("address of no known type", _add(address='{"_typeName":"joynr.system.RoutingTypes.UdsAddress"}'),
     "params[0].address"),
    ("empty participantId", _add(participantId=""), "params[0].participantId"),
    ("participantId null", _add(participantId=None), "params[0].participantId"),
    ("huge domain", _add(domain="d" * 5000), "params[0].domain"),
    ("huge gbid", joynr_request("remove", ["String", "String[]"], ["p", ["g" * 5000]]), "params[1][0]"),
    ("gbids null", joynr_request("remove", ["String", "String[]"], ["p", None]), "params[1]"),
    ("gbids of numbers", joynr_request("remove", ["String", "String[]"], ["p", [1]]), "params[1][0]"),
    ("deep param", joynr_request("lookup", ["String"], [_deep]), "params[0]*"),
    ("Long a string", joynr_request("removeStale", ["String", "Long"], ["cc1", "5"]), "params[1]"),
    ("Long a float", joynr_request("removeStale", ["String", "Long"], ["cc1", 5.0]), "params[1]"),
    ("entries not a list", joynr_request("add", [E + "[]"], [ENTRY_JSON]), "params[0]"),
    ("an entry of entries not one", joynr_request("add", [E + "[]"], [[ENTRY_JSON, "x"]]), "params[0][1]"),
]


@pytest.mark.parametrize("obj, field", [c[1:] for c in HOSTILE_CALLS], ids=[c[0] for c in HOSTILE_CALLS])
def test_a_hostile_gcd_call_is_refused_naming_its_field(obj: dict[str, Any], field: str) -> None:
    """The field exactly; ``*`` at its end: a field under it (a value nested too deep)."""
    with pytest.raises(PayloadDecodeError) as refused:
        read_at_gcd(obj)
    got = refused.value.field
    assert got.startswith(field[:-1]) if field.endswith("*") else got == field, refused.value


def _reply(**body: Any) -> dict[str, Any]:
    return {"_typeName": "joynr.Reply", "requestReplyId": "rr-1", **body}


def _app_error(type_name: str, name: str) -> dict[str, Any]:
    return {"_typeName": "joynr.exceptions.ApplicationException", "detailMessage": "",
            "error": {"_typeName": type_name, "name": name}}


HOSTILE_REPLIES = [
    ("a scalar result", _reply(response=["x"]), "response[0]"),
    ("a null result", _reply(response=[None]), "response[0]"),
    ("two results", _reply(response=[[], []]), "response"),
    ("an entry of no fields", _reply(response=[{"_typeName": E}]), "response[0].providerVersion"),
    ("an entry without _typeName", _reply(response=[{k: v for k, v in ENTRY_JSON.items() if k != "_typeName"}]),
     "response[0]._typeName"),
    ("a list with a wrong entry", _reply(response=[[ENTRY_JSON, {**ENTRY_JSON, "domain": 5}]]),
     "response[0][1].domain"),
    ("the simulator's enum", _reply(error=_app_error("joynrsim.Error", "INVALID_GBID")), "error.error._typeName"),
    ("no DiscoveryError", _reply(error=_app_error("joynr.types.DiscoveryError", "NOT_FOUND")), "error.error.name"),
]


@pytest.mark.parametrize("obj, field", [c[1:] for c in HOSTILE_REPLIES], ids=[c[0] for c in HOSTILE_REPLIES])
def test_a_hostile_gcd_reply_is_refused_naming_its_field(obj: dict[str, Any], field: str) -> None:
    with pytest.raises(PayloadDecodeError) as refused:
        read_from_gcd(obj)
    assert refused.value.field == field, refused.value


# -- the GCD's conversations on the memory network --------------------------------------------

SCENARIO = Path(__file__).resolve().parent.parent / "scenarios" / "gcd-invalid-and-unknown-gbids.yaml"


async def test_the_gcd_is_called_with_joynrs_overloads_on_the_memory_network(tmp_path, monkeypatch) -> None:
    """Registrations, lookups and removes of a scenario travel as joynr's overloads, its
    DiscoveryErrors as joynr.types.DiscoveryError, and the trace is the default wire's."""
    seen: list[dict[str, Any]] = []
    write = codecs.to_joynr_payload

    def spying(msg_type: str, payload: bytes, rrid: str | None, **kw: Any) -> bytes:
        body = write(msg_type, payload, rrid, **kw)
        if GCD in (kw.get("recipient"), kw.get("sender")):
            seen.append(json.loads(body))
        return body

    monkeypatch.setattr(codecs, "to_joynr_payload", spying)
    scenario = load_scenario(SCENARIO)
    default = await run_scenario(scenario, tmp_path / "default", seed=4, network="memory")
    assert not seen
    joynr = await run_scenario(replace(scenario, wire="joynr"), tmp_path / "joynr", seed=4, network="memory")
    assert default.passed and joynr.passed, joynr.error or joynr.failed_step
    calls = {(b["methodName"], tuple(b["paramDatatypes"])) for b in seen if b["_typeName"] == "joynr.Request"}
    assert {("add", (E, "String[]")), ("lookup", ("String", "String[]")),
            ("lookup", ("String[]", "String", "String[]")), ("remove", ("String", "String[]"))} <= calls
    entries = [p for b in seen if b.get("methodName") == "add" for p in b["params"][:1]]
    assert entries and all(e["_typeName"] == E and e["qos"]["_typeName"] == "joynr.types.ProviderQos"
                           for e in entries)
    errors = {b["error"]["error"]["name"] for b in seen if "error" in b and "error" in b["error"]}
    assert {"INVALID_GBID", "UNKNOWN_GBID"} <= errors
    assert all(b["error"]["error"]["_typeName"] == "joynr.types.DiscoveryError"
               for b in seen if "error" in b and "error" in b["error"])
    assert _traces(joynr.run_dir) == _traces(default.run_dir)


def _traces(run_dir: str) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted((Path(run_dir) / "trace").glob("*.ndjson"))}


def test_msgpack_of_a_round_trip_keeps_the_simulators_key_order() -> None:
    """The bytes, not only the values: the trace and the GCD see the payload's map in to_wire's order."""
    payload = encode_request("add", [ENTRY_SIM, ["gbid1"]])
    back, _ = read_at_gcd(to_gcd(payload))
    assert list(msgpack.unpackb(back)["p"][0]) == list(ENTRY_SIM)
