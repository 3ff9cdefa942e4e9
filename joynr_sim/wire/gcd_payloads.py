"""Calls to and replies from the global capabilities directory (GCD) on the joynr wire, as
joynr's ``infrastructure.GlobalCapabilitiesDirectory`` (Franca interface, version 0.3) with
``joynr.types.GlobalDiscoveryEntry`` structs, so a joynr discovery service can take them.

The simulator's GCD provider (``joynr_sim.runtime.gcd_service.GcdProvider``) has a method per
joynr overload, and its entries are the dicts of ``GlobalDiscoveryEntry.to_wire()`` (no
``_typeName``). joynr chooses an overload by methodName and paramDatatypes, the Java names
of the parameters' types (``ReflectionUtils.toDatatypeNames``: ``String``, ``String[]``,
``Long``, a struct by its full name):

    the simulator's method   joynr's methodName  paramDatatypes
    add_old                  add                 [GlobalDiscoveryEntry[]] or [GlobalDiscoveryEntry]
    add                      add                 [GlobalDiscoveryEntry, String[]]
    lookup_domains_old       lookup              [String[], String]
    lookup_domains           lookup              [String[], String, String[]]
    lookup_participant_old   lookup              [String]
    lookup_participant       lookup              [String, String[]]
    remove_old               remove              [String[]] or [String]
    remove                   remove              [String, String[]]
    remove_stale             removeStale         [String, Long]
    touch                    touch               [String] or [String, String[]]

(``GlobalDiscoveryEntry`` is ``joynr.types.GlobalDiscoveryEntry``.) A reply's response is
``[]`` for the void methods, ``[[entry, ...]]`` for a lookup of domains, ``[entry]`` for a
lookup of a participant; a modelled error is an ApplicationException whose enum is
``joynr.types.DiscoveryError``. Every struct carries its ``_typeName``; the scope is the
ProviderScope's name (``GLOBAL``, ``LOCAL``); the address is the address's JSON as a string.

From bmwcarit/joynr: ``basemodel/src/main/franca/joynr/GlobalCapabilitiesDirectory.fidl``
(a240071d87a7) and ``DiscoveryTypes.fidl`` (371aded49e4d) for the overloads and the structs;
``java/jeeintegration/src/test/java/io/joynr/jeeintegration/JoynrIntegrationBeanTest.java``
(3413a9d4bda9), whose GlobalCapabilitiesDirectorySync has the overloads of version 0.3
(removeStale(String, Long), touch(String, String[])); ``java/javaapi/src/main/java/io/joynr/
util/ReflectionUtils.java`` and its test (1e10dba59baa) for the datatype names and the
dispatch on them; ``java/backend-services/capabilities-directory/.../CapabilitiesDirectoryImpl.java``
(7a9c102c72a9) for the replies and the DiscoveryErrors; libjoynr-js's
``joynr/util/JSONSerializer.ts`` (6513002c2abc) for an enum written as its name.

A request for a method the GCD has not got (a fuzzer's echo) is written as any request is;
on reading, a methodName or overload the interface has not got, a param that is not of its
datatype and a malformed entry raise ``PayloadDecodeError`` naming the field.
"""

from __future__ import annotations

from typing import Any

from ..core.address import AddressError
from ..core.address import from_json as address_from_json
from ..core.discovery import PROVIDER_SCOPES, DiscoveryError, GlobalDiscoveryEntry
from ..core.errors import ApplicationException, JoynrRuntimeException
from ..core.limits import DEFAULT_LIMITS, WireLimits, preview
from ..runtime.participants import decode_reply, decode_request, encode_request
from .payloads import (
    INT64,
    ONE_WAY_REQUEST,
    REQUEST,
    PayloadDecodeError,
    checked_id,
    checked_method,
    dump_json,
    load_object,
    one_way_to_joynr,
    reply_from_joynr,
    reply_to_joynr,
    request_to_joynr,
)

GLOBAL_DISCOVERY_ENTRY = "joynr.types.GlobalDiscoveryEntry"
VERSION = "joynr.types.Version"
PROVIDER_QOS = "joynr.types.ProviderQos"
CUSTOM_PARAMETER = "joynr.types.CustomParameter"
DISCOVERY_ERROR = "joynr.types.DiscoveryError"
STRING, STRINGS, LONG = "String", "String[]", "Long"
ENTRY, ENTRIES = GLOBAL_DISCOVERY_ENTRY, GLOBAL_DISCOVERY_ENTRY + "[]"
INT32 = 2**31  # a Version's majorVersion and minorVersion are Franca Int32s

# (the simulator's method, joynr's methodName, paramDatatypes), in the fidl's order.
OVERLOADS: tuple[tuple[str, str, tuple[str, ...]], ...] = (
    ("add_old", "add", (ENTRIES,)),
    ("add_old", "add", (ENTRY,)),
    ("add", "add", (ENTRY, STRINGS)),
    ("lookup_domains_old", "lookup", (STRINGS, STRING)),
    ("lookup_domains", "lookup", (STRINGS, STRING, STRINGS)),
    ("lookup_participant_old", "lookup", (STRING,)),
    ("lookup_participant", "lookup", (STRING, STRINGS)),
    ("remove_old", "remove", (STRINGS,)),
    ("remove_old", "remove", (STRING,)),
    ("remove", "remove", (STRING, STRINGS)),
    ("remove_stale", "removeStale", (STRING, LONG)),
    ("touch", "touch", (STRING,)),
    ("touch", "touch", (STRING, STRINGS)),
)
_SIM_METHODS = {sim for sim, _, _ in OVERLOADS}
_JOYNR_METHODS = {name for _, name, _ in OVERLOADS}
_BY_JOYNR = {(name, types): sim for sim, name, types in OVERLOADS}
DISCOVERY_ERRORS = frozenset(e.value for e in DiscoveryError)

_ENTRY_FIELDS = ("providerVersion", "domain", "interfaceName", "participantId", "qos", "lastSeenDateMs",
                 "expiryDateMs", "publicKeyId", "address")
_QOS_FIELDS = ("customParameters", "priority", "scope", "supportsOnChangeSubscriptions")


# -- an entry ------------------------------------------------------------------------------


def _struct(value: Any, type_name: str, fields: tuple[str, ...], field: str) -> dict[str, Any]:
    """A joynr struct: its _typeName, and exactly its fields."""
    if not isinstance(value, dict):
        raise PayloadDecodeError(field, f"a {type_name}, got {preview(value)}")
    if value.get("_typeName") != type_name:
        raise PayloadDecodeError(f"{field}._typeName", f"{type_name}, got {preview(value.get('_typeName'))}")
    for name in fields:
        if name not in value:
            raise PayloadDecodeError(f"{field}.{name}", "missing")
    extra = sorted(set(value) - {"_typeName", *fields})
    if extra:
        raise PayloadDecodeError(field, f"fields of a {type_name}, got also {preview(extra)}")
    return value


def _string(value: Any, field: str, limits: WireLimits) -> str:
    # A text a directory stores and a header may carry: bounded as a header value is.
    if not isinstance(value, str) or len(value.encode("utf-8", "surrogatepass")) > limits.max_header_bytes:
        raise PayloadDecodeError(field, f"a String of at most {limits.max_header_bytes} bytes, got {preview(value)}")
    return value


def _integer(value: Any, field: str, bound: int) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not -bound <= value < bound:
        raise PayloadDecodeError(field, f"an integer within {bound.bit_length()} bits, got {preview(value)}")
    return value


def _strings(value: Any, field: str, limits: WireLimits) -> list[str]:
    if not isinstance(value, list):
        raise PayloadDecodeError(field, f"a String[], got {preview(value)}")
    return [_string(v, f"{field}[{n}]", limits) for n, v in enumerate(value)]


def entry_from_joynr(value: Any, field: str, limits: WireLimits = DEFAULT_LIMITS) -> dict[str, Any]:
    """joynr's GlobalDiscoveryEntry as the simulator's (``to_wire``'s form, in its order)."""
    obj = _struct(value, GLOBAL_DISCOVERY_ENTRY, _ENTRY_FIELDS, field)
    version = _struct(obj["providerVersion"], VERSION, ("majorVersion", "minorVersion"), f"{field}.providerVersion")
    qos = _struct(obj["qos"], PROVIDER_QOS, _QOS_FIELDS, f"{field}.qos")
    params = qos["customParameters"]
    if not isinstance(params, list):
        raise PayloadDecodeError(f"{field}.qos.customParameters", f"a CustomParameter[], got {preview(params)}")
    custom = []
    for n, param in enumerate(params):
        where = f"{field}.qos.customParameters[{n}]"
        param = _struct(param, CUSTOM_PARAMETER, ("name", "value"), where)
        custom.append({"name": _string(param["name"], f"{where}.name", limits),
                       "value": _string(param["value"], f"{where}.value", limits)})
    if qos["scope"] not in PROVIDER_SCOPES:  # joynr writes an enum as its name
        raise PayloadDecodeError(f"{field}.qos.scope", f"one of {PROVIDER_SCOPES}, got {preview(qos['scope'])}")
    if not isinstance(qos["supportsOnChangeSubscriptions"], bool):
        raise PayloadDecodeError(f"{field}.qos.supportsOnChangeSubscriptions",
                                 f"a Boolean, got {preview(qos['supportsOnChangeSubscriptions'])}")
    participant_id = _string(obj["participantId"], f"{field}.participantId", limits)
    if not participant_id:
        raise PayloadDecodeError(f"{field}.participantId", "empty")
    address = _string(obj["address"], f"{field}.address", limits)
    try:
        address_from_json(address)
    except AddressError as exc:
        raise PayloadDecodeError(f"{field}.address", f"no address joynr's JSON names: {exc}") from None
    return {
        "participantId": participant_id,
        "domain": _string(obj["domain"], f"{field}.domain", limits),
        "interfaceName": _string(obj["interfaceName"], f"{field}.interfaceName", limits),
        "providerVersion": {
            "majorVersion": _integer(version["majorVersion"], f"{field}.providerVersion.majorVersion", INT32),
            "minorVersion": _integer(version["minorVersion"], f"{field}.providerVersion.minorVersion", INT32),
        },
        "qos": {
            "customParameters": custom,
            "priority": _integer(qos["priority"], f"{field}.qos.priority", INT64),
            "scope": qos["scope"],
            "supportsOnChangeSubscriptions": qos["supportsOnChangeSubscriptions"],
        },
        "lastSeenDateMs": _integer(obj["lastSeenDateMs"], f"{field}.lastSeenDateMs", INT64),
        "expiryDateMs": _integer(obj["expiryDateMs"], f"{field}.expiryDateMs", INT64),
        "publicKeyId": _string(obj["publicKeyId"], f"{field}.publicKeyId", limits),
        "address": address,
    }


def entry_to_joynr(entry: Any) -> dict[str, Any]:
    """The simulator's entry as joynr's GlobalDiscoveryEntry; a ValueError for one that is
    not in ``to_wire``'s form or that joynr's side would refuse."""
    GlobalDiscoveryEntry.from_wire(entry)  # an InvalidDiscoveryEntry (a ValueError) names the field
    version, qos = entry["providerVersion"], entry["qos"]
    out = {
        "_typeName": GLOBAL_DISCOVERY_ENTRY,
        "providerVersion": {"_typeName": VERSION, "majorVersion": version["majorVersion"],
                            "minorVersion": version["minorVersion"]},
        "domain": entry["domain"],
        "interfaceName": entry["interfaceName"],
        "participantId": entry["participantId"],
        "qos": {"_typeName": PROVIDER_QOS,
                "customParameters": [{"_typeName": CUSTOM_PARAMETER, "name": p["name"], "value": p["value"]}
                                     for p in qos.get("customParameters", [])],
                "priority": qos["priority"], "scope": qos["scope"],
                "supportsOnChangeSubscriptions": qos["supportsOnChangeSubscriptions"]},
        "lastSeenDateMs": entry["lastSeenDateMs"],
        "expiryDateMs": entry["expiryDateMs"],
        "publicKeyId": entry["publicKeyId"],
        "address": entry["address"],
    }
    # What is written here must read back as it was: the traces are the same on both wires.
    try:
        same = entry_from_joynr(out, "entry") == entry
    except PayloadDecodeError as exc:
        raise ValueError(f"a GlobalDiscoveryEntry joynr's side would refuse: {exc}") from None
    if not same:
        raise ValueError(f"not a GlobalDiscoveryEntry in the simulator's form: {preview(entry)}")
    return out


# -- a request -----------------------------------------------------------------------------


def _fits(value: Any, datatype: str) -> bool:
    if datatype == STRING:
        return isinstance(value, str)
    if datatype == STRINGS:
        return isinstance(value, list) and all(isinstance(v, str) for v in value)
    if datatype == LONG:
        return isinstance(value, int) and not isinstance(value, bool)
    if datatype == ENTRIES:
        return isinstance(value, list)
    return isinstance(value, dict)  # ENTRY


def _param_to_joynr(value: Any, datatype: str) -> Any:
    if datatype == ENTRY:
        return entry_to_joynr(value)
    if datatype == ENTRIES:
        return [entry_to_joynr(v) for v in value]
    # Checked as they are read, so nothing is written that the GCD's side would refuse.
    return _param_from_joynr(value, datatype, "params", DEFAULT_LIMITS)


def _param_from_joynr(value: Any, datatype: str, field: str, limits: WireLimits) -> Any:
    if datatype == STRING:
        return _string(value, field, limits)
    if datatype == STRINGS:
        return _strings(value, field, limits)
    if datatype == LONG:
        return _integer(value, field, INT64)
    if datatype == ENTRY:
        return entry_from_joynr(value, field, limits)
    if not isinstance(value, list):
        raise PayloadDecodeError(field, f"a {ENTRIES}, got {preview(value)}")
    return [entry_from_joynr(v, f"{field}[{n}]", limits) for n, v in enumerate(value)]


def _joynr_call(payload: bytes) -> dict[str, Any] | None:
    """The GCD call as joynr's methodName, paramDatatypes and params; None for a method the
    GCD has not got."""
    method, params = decode_request(payload)
    if method not in _SIM_METHODS:
        return None
    for sim, name, types in OVERLOADS:
        if sim == method and len(types) == len(params) and all(map(_fits, params, types)):
            try:
                converted = [_param_to_joynr(p, t) for p, t in zip(params, types)]
            except PayloadDecodeError as exc:
                raise ValueError(str(exc)) from None
            return {"methodName": name, "paramDatatypes": list(types), "params": converted}
    raise ValueError(f"GCD method {method} with params {preview(params)} is no overload of joynr's "
                     "GlobalCapabilitiesDirectory")


def gcd_request_to_joynr(payload: bytes, request_reply_id: str) -> bytes:
    """A simulator request to the GCD as joynr's Request of a GlobalCapabilitiesDirectory overload."""
    call = _joynr_call(payload)
    if call is None:
        return request_to_joynr(payload, request_reply_id)
    return dump_json({"_typeName": REQUEST, **call, "requestReplyId": request_reply_id})


def gcd_one_way_to_joynr(payload: bytes) -> bytes:
    call = _joynr_call(payload)
    return one_way_to_joynr(payload) if call is None else dump_json({"_typeName": ONE_WAY_REQUEST, **call})


def _sim_call(obj: dict[str, Any], limits: WireLimits) -> bytes:
    method, params = checked_method(obj)
    if method not in _JOYNR_METHODS:
        raise PayloadDecodeError("methodName", f"one of joynr's GlobalCapabilitiesDirectory {sorted(_JOYNR_METHODS)}, "
                                               f"got {preview(method)}")
    types = tuple(obj.get("paramDatatypes", []))
    sim = _BY_JOYNR.get((method, types))
    if sim is None:
        raise PayloadDecodeError("paramDatatypes", f"no overload {method}({', '.join(types)}) in joynr's "
                                                   "GlobalCapabilitiesDirectory")
    return encode_request(sim, [_param_from_joynr(v, t, f"params[{n}]", limits)
                                for n, (v, t) in enumerate(zip(params, types))])


def gcd_request_from_joynr(data: bytes, limits: WireLimits = DEFAULT_LIMITS) -> tuple[bytes, str]:
    """joynr's Request to the GCD as (the simulator's request payload, its requestReplyId)."""
    obj = load_object(data, REQUEST, {"methodName", "paramDatatypes", "params", "requestReplyId"},
                      {"methodName", "requestReplyId"}, limits)
    rrid = checked_id(obj["requestReplyId"], "requestReplyId", limits)
    return _sim_call(obj, limits), rrid


def gcd_one_way_from_joynr(data: bytes, limits: WireLimits = DEFAULT_LIMITS) -> bytes:
    obj = load_object(data, ONE_WAY_REQUEST, {"methodName", "paramDatatypes", "params"}, {"methodName"}, limits)
    return _sim_call(obj, limits)


# -- a reply -------------------------------------------------------------------------------


def _response_to_joynr(result: Any) -> list[Any]:
    if result is None:  # a void method's: joynr's list of out-parameters is empty
        return []
    if isinstance(result, list):
        return [[entry_to_joynr(e) for e in result]]
    if isinstance(result, dict):
        return [entry_to_joynr(result)]
    raise ValueError(f"a GCD result is none, an entry or a list of entries, got {preview(result)}")


def _response_from_joynr(values: list[Any], limits: WireLimits) -> Any:
    if not values:
        return None
    value = values[0]
    if isinstance(value, list):
        return [entry_from_joynr(v, f"response[0][{n}]", limits) for n, v in enumerate(value)]
    if isinstance(value, dict):
        return entry_from_joynr(value, "response[0]", limits)
    raise PayloadDecodeError("response[0]", f"a {ENTRY} or a {ENTRIES}, got {preview(value)}")


def gcd_reply_to_joynr(payload: bytes, request_reply_id: str) -> bytes:
    """A reply of the simulator's GCD as joynr's Reply: entries as GlobalDiscoveryEntry
    structs, a modelled error's enum a joynr.types.DiscoveryError."""
    try:
        decode_reply(payload)
    except ApplicationException as exc:
        # The only modelled errors the GCD's interface declares are its DiscoveryErrors.
        if exc.error not in DISCOVERY_ERRORS:
            raise ValueError(f"a GCD's ApplicationException carries a DiscoveryError, got {preview(exc.error)}") \
                from None
    except JoynrRuntimeException:
        pass
    return reply_to_joynr(payload, request_reply_id, enum_type_name=DISCOVERY_ERROR, response=_response_to_joynr)


def gcd_reply_from_joynr(data: bytes, limits: WireLimits = DEFAULT_LIMITS) -> tuple[bytes, str]:
    """joynr's Reply from the GCD as (the simulator's reply payload, its requestReplyId)."""
    return reply_from_joynr(data, limits, error_enum=(DISCOVERY_ERROR, DISCOVERY_ERRORS),
                            response=lambda values: _response_from_joynr(values, limits))
