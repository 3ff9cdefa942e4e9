"""joynr's JSON subscription messages, from and to the simulator's payloads, and the pair
``to_joynr_payload``/``from_joynr_payload`` that converts the payload of every message type.

The simulator's side is ``joynr_sim.core.subscription_wire`` (msgpack). joynr's types, from
bmwcarit/joynr ``javascript/libjoynr-js/src/main/js/joynr/dispatching/types/`` (8d664af5fd6e)
``SubscriptionRequest.ts``, ``BroadcastSubscriptionRequest.ts``, ``MulticastSubscriptionRequest.ts``,
``SubscriptionReply.ts``, ``SubscriptionStop.ts``, ``SubscriptionPublication.ts``,
``MulticastPublication.ts``; ``.../joynr/exceptions/SubscriptionException.ts`` (9a83e7084557):

    arq  joynr.SubscriptionRequest           {subscriptionId, subscribedToName, qos}
    brq  joynr.BroadcastSubscriptionRequest  {subscriptionId, subscribedToName, qos, filterParameters:
                                              {_typeName: joynr.BroadcastFilterParameters, filterParameters}}
    mrq  joynr.MulticastSubscriptionRequest  {subscriptionId, subscribedToName, qos, multicastId}
    srp  joynr.SubscriptionReply             {subscriptionId[, error: joynr.exceptions.SubscriptionException
                                              {detailMessage, subscriptionId}]}
    sst  joynr.SubscriptionStop              {subscriptionId}
    p    joynr.SubscriptionPublication       {subscriptionId, response: [value]}
    m    joynr.MulticastPublication          {multicastId, response: [value]}

A publication's response is the list of the broadcast's or attribute's values (joynr's
``PublicationManager.ts``, 29ef6fe4614a, sends ``[value]``); the simulator's carry one scalar.
A publication with an ``error`` (a provider whose getter failed) is refused: the simulator's
publication payload has no error. A multicast id is ``<provider>/<broadcast>[/<partition>...]``
(``.../dispatching/subscription/util/SubscriptionUtil.ts``, a5fc8f74da3a, createMulticastId);
the simulator's payloads carry neither the provider of a multicast subscription request nor
the multicast id of a publication: both are the message's ``to``, passed as ``recipient``.

The qos (``.../joynr/proxy/SubscriptionQos.ts`` 8d5be427f1f2, ``OnChangeSubscriptionQos.ts``
411b8b790b40, ``OnChangeWithKeepAliveSubscriptionQos.ts`` 111e194ddddd,
``PeriodicSubscriptionQos.ts`` d5ed2dfc931d, ``MulticastSubscriptionQos.ts`` f62bbbadc6d7;
``java/javaapi/src/main/java/io/joynr/pubsub/SubscriptionQos.java`` 42a5e8ffcbec,
``java/javaapi/src/main/java/joynr/*SubscriptionQos.java``), by the simulator's kind:

    on-change             joynr.OnChangeSubscriptionQos               expiryDateMs publicationTtlMs minIntervalMs
    on-change-keep-alive  joynr.OnChangeWithKeepAliveSubscriptionQos  ... minIntervalMs maxIntervalMs
                                                                      alertAfterIntervalMs
    periodic              joynr.PeriodicSubscriptionQos               ... periodMs alertAfterIntervalMs
    (a multicast's)       joynr.MulticastSubscriptionQos              expiryDateMs publicationTtlMs

joynr's expiryDateMs 0 means no expiry, the simulator's ``NO_EXPIRY``. Fields a kind does not
use are not written. joynr's clamps (a periodMs of at least 50, ...) are its constructors', not
its wire's: a qos is checked with the simulator's rules (``qos_from_dict``).

A payload from the wire is hostile: every field is checked, and a bad one raises
``PayloadDecodeError`` naming it.
"""

from __future__ import annotations

from typing import Any

import msgpack

from ..core import subscription_wire as sw
from ..core.gcd import GCD_PARTICIPANT_ID
from ..core.limits import DEFAULT_LIMITS, InvalidField, WireLimits, check_text, preview
from ..core.message import (
    BROADCAST_SUBSCRIPTION_REQUEST,
    MULTICAST,
    MULTICAST_SUBSCRIPTION_REQUEST,
    ONE_WAY,
    PUBLICATION,
    REPLY,
    REQUEST,
    SUBSCRIPTION_REPLY,
    SUBSCRIPTION_REQUEST,
    SUBSCRIPTION_STOP,
)
from ..core.multicast import MulticastError, MulticastId, multicast_id, parse
from ..core.subscriptions import NO_EXPIRY, SubscriptionQos
from .gcd_payloads import (
    gcd_one_way_from_joynr,
    gcd_one_way_to_joynr,
    gcd_reply_from_joynr,
    gcd_reply_to_joynr,
    gcd_request_from_joynr,
    gcd_request_to_joynr,
)
from .payloads import (
    PayloadDecodeError,
    checked_id,
    checked_value,
    detail_message,
    dump_json,
    load_object,
    one_way_from_joynr,
    one_way_to_joynr,
    reply_from_joynr,
    reply_to_joynr,
    request_from_joynr,
    request_to_joynr,
)

TYPE_NAMES = {
    SUBSCRIPTION_REQUEST: "joynr.SubscriptionRequest",
    BROADCAST_SUBSCRIPTION_REQUEST: "joynr.BroadcastSubscriptionRequest",
    MULTICAST_SUBSCRIPTION_REQUEST: "joynr.MulticastSubscriptionRequest",
    SUBSCRIPTION_REPLY: "joynr.SubscriptionReply",
    SUBSCRIPTION_STOP: "joynr.SubscriptionStop",
    PUBLICATION: "joynr.SubscriptionPublication",
    MULTICAST: "joynr.MulticastPublication",
}
FILTER_PARAMETERS = "joynr.BroadcastFilterParameters"
SUBSCRIPTION_EXCEPTION = "joynr.exceptions.SubscriptionException"
ON_CHANGE_QOS = "joynr.OnChangeSubscriptionQos"
KEEP_ALIVE_QOS = "joynr.OnChangeWithKeepAliveSubscriptionQos"
PERIODIC_QOS = "joynr.PeriodicSubscriptionQos"
MULTICAST_QOS = "joynr.MulticastSubscriptionQos"
NO_EXPIRY_DATE = 0  # joynr's expiryDateMs of a subscription that never ends

# Per joynr qos type: the simulator's kind and the fields joynr's class has.
_QOS: dict[str, tuple[str, tuple[str, ...]]] = {
    ON_CHANGE_QOS: ("on-change", ("expiryDateMs", "publicationTtlMs", "minIntervalMs")),
    KEEP_ALIVE_QOS: ("on-change-keep-alive", ("expiryDateMs", "publicationTtlMs", "minIntervalMs", "maxIntervalMs",
                                              "alertAfterIntervalMs")),
    PERIODIC_QOS: ("periodic", ("expiryDateMs", "publicationTtlMs", "periodMs", "alertAfterIntervalMs")),
    # joynr's Java class has only expiryDateMs; its JavaScript one (which the simulator's interop
    # tests run) also publicationTtlMs, written so that the simulator's value comes back.
    MULTICAST_QOS: ("on-change", ("expiryDateMs", "publicationTtlMs")),
}
_QOS_OF_KIND = {"on-change": ON_CHANGE_QOS, "on-change-keep-alive": KEEP_ALIVE_QOS, "periodic": PERIODIC_QOS}
_SIM_FIELD = {"expiryDateMs": "expiry_date_ms", "publicationTtlMs": "publication_ttl_ms",
              "minIntervalMs": "min_interval_ms", "maxIntervalMs": "max_interval_ms", "periodMs": "period_ms",
              "alertAfterIntervalMs": "alert_after_interval_ms"}
# A field joynr's JSON leaves out has the default of joynr's constructors.
_JOYNR_DEFAULTS = {"expiryDateMs": NO_EXPIRY_DATE, "publicationTtlMs": 10_000, "minIntervalMs": 1_000,
                   "maxIntervalMs": 60_000, "periodMs": 60_000, "alertAfterIntervalMs": 0}
_INT64 = 2**63


# -- the qos ---------------------------------------------------------------------------


def qos_to_joynr(qos: SubscriptionQos, multicast: bool = False) -> dict[str, Any]:
    """The simulator's qos as joynr's qos object (a multicast subscription's: only its expiry and ttl)."""
    if qos.expiry_date_ms == NO_EXPIRY_DATE:
        raise ValueError("qos expiry_date_ms 0 cannot be written: joynr reads an expiryDateMs of 0 as no expiry")
    type_name = MULTICAST_QOS if multicast else _QOS_OF_KIND[qos.kind]
    out: dict[str, Any] = {"_typeName": type_name}
    for field in _QOS[type_name][1]:
        value = getattr(qos, _SIM_FIELD[field])
        out[field] = NO_EXPIRY_DATE if field == "expiryDateMs" and value >= NO_EXPIRY else value
    return out


def qos_from_joynr(qos: Any, multicast: bool = False) -> SubscriptionQos:
    """joynr's qos object as the simulator's, checked with the simulator's rules."""
    allowed = (MULTICAST_QOS,) if multicast else (ON_CHANGE_QOS, KEEP_ALIVE_QOS, PERIODIC_QOS)
    if not isinstance(qos, dict) or qos.get("_typeName") not in allowed:
        raise PayloadDecodeError("qos._typeName", f"one of {', '.join(allowed)}, got {preview(qos)}")
    kind, fields = _QOS[qos["_typeName"]]
    if not set(qos) <= {"_typeName", *fields}:
        raise PayloadDecodeError("qos", f"fields of {qos['_typeName']}: {', '.join(fields)}, "
                                        f"got {preview(sorted(qos))}")
    sim: dict[str, Any] = {"kind": kind}
    for field in fields:
        value = qos.get(field, _JOYNR_DEFAULTS[field])
        if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value < _INT64:
            raise PayloadDecodeError(f"qos.{field}", f"a whole number of ms from 0 within int64, got {preview(value)}")
        if field == "expiryDateMs":
            # 0 is joynr's no expiry; Java's INFINITE_SUBSCRIPTION (Long.MAX_VALUE) is "forever" too.
            value = NO_EXPIRY if value == NO_EXPIRY_DATE or value > NO_EXPIRY else value
        elif value > NO_EXPIRY:
            raise PayloadDecodeError(f"qos.{field}", f"at most {NO_EXPIRY} ms, got {value}")
        sim[_SIM_FIELD[field]] = value
    try:
        return sw.qos_from_dict(sim)
    except sw.SubscriptionPayloadError as exc:
        raise PayloadDecodeError("qos", str(exc)) from None


# -- to joynr ----------------------------------------------------------------------------


def _multicast_id(text: str, wildcards: bool, limits: WireLimits) -> MulticastId:
    try:
        return parse(check_text(text, "multicastId", limits.max_topic_bytes), wildcards=wildcards, limits=limits)
    except (InvalidField, MulticastError) as exc:
        raise PayloadDecodeError("multicastId", str(exc)) from None


def subscription_request_to_joynr(payload: bytes, kind: str, recipient: str | None = None) -> bytes:
    """A simulator subscription request (``kind``: arq, brq or mrq) as joynr's; a multicast
    subscription's multicastId is built from ``recipient``, the provider it is sent to."""
    req = sw.decode_request(payload, kind)
    data: dict[str, Any] = {"_typeName": TYPE_NAMES[kind], "subscriptionId": req.subscription_id,
                            "subscribedToName": req.name,
                            "qos": qos_to_joynr(req.qos, kind == MULTICAST_SUBSCRIPTION_REQUEST)}
    if kind == BROADCAST_SUBSCRIPTION_REQUEST:
        data["filterParameters"] = {"_typeName": FILTER_PARAMETERS, "filterParameters": dict(req.filter or {})}
    elif kind == MULTICAST_SUBSCRIPTION_REQUEST:
        if recipient is None:
            raise ValueError("a MulticastSubscriptionRequest's multicastId names its provider: pass the recipient")
        data["multicastId"] = str(multicast_id(recipient, req.name, req.partitions, wildcards=True))
    return dump_json(data)


def subscription_reply_to_joynr(payload: bytes) -> bytes:
    subscription_id, error = sw.decode_reply(payload)
    data: dict[str, Any] = {"_typeName": TYPE_NAMES[SUBSCRIPTION_REPLY], "subscriptionId": subscription_id}
    if error is not None:
        data["error"] = {"_typeName": SUBSCRIPTION_EXCEPTION, "detailMessage": error, "subscriptionId": subscription_id}
    return dump_json(data)


def subscription_stop_to_joynr(payload: bytes) -> bytes:
    return dump_json({"_typeName": TYPE_NAMES[SUBSCRIPTION_STOP], "subscriptionId": sw.decode_stop(payload)})


def publication_to_joynr(payload: bytes) -> bytes:
    subscription_id, value = sw.decode_publication(payload)
    return dump_json({"_typeName": TYPE_NAMES[PUBLICATION], "subscriptionId": subscription_id, "response": [value]})


def multicast_publication_to_joynr(payload: bytes, recipient: str | None) -> bytes:
    """A simulator multicast as joynr's MulticastPublication; ``recipient`` is its multicast id."""
    value = sw.decode_multicast(payload)
    if recipient is None:
        raise ValueError("a MulticastPublication names its multicastId: pass the recipient")
    try:
        mid = parse(recipient)
    except MulticastError as exc:
        raise ValueError(f"recipient is no multicast id a provider fires: {exc}") from None
    return dump_json({"_typeName": TYPE_NAMES[MULTICAST], "multicastId": str(mid), "response": [value]})


# -- from joynr --------------------------------------------------------------------------


def subscription_request_from_joynr(data: bytes, kind: str, limits: WireLimits = DEFAULT_LIMITS,
                                    recipient: str | None = None) -> bytes:
    """joynr's subscription request (``kind``: arq, brq or mrq) as the simulator's payload; a
    multicastId must name the subscribedToName and, when ``recipient`` is given, that provider."""
    if kind not in sw.REQUEST_KINDS:
        raise PayloadDecodeError("t", f"not a subscription request type: {preview(kind)}")
    extra = {BROADCAST_SUBSCRIPTION_REQUEST: {"filterParameters"}, MULTICAST_SUBSCRIPTION_REQUEST: {"multicastId"}}
    keys = {"subscriptionId", "subscribedToName", "qos"}
    required = keys | (extra[kind] if kind == MULTICAST_SUBSCRIPTION_REQUEST else set())
    obj = load_object(data, TYPE_NAMES[kind], keys | extra.get(kind, set()), required, limits)
    subscription_id = checked_id(obj["subscriptionId"], "subscriptionId", limits)
    try:
        name = sw.check_name(obj["subscribedToName"])
    except sw.SubscriptionPayloadError as exc:
        raise PayloadDecodeError("subscribedToName", str(exc)) from None
    qos = qos_from_joynr(obj["qos"], kind == MULTICAST_SUBSCRIPTION_REQUEST)
    flt, partitions = None, ()
    if kind == BROADCAST_SUBSCRIPTION_REQUEST:
        flt = _filter(obj.get("filterParameters"))
    elif kind == MULTICAST_SUBSCRIPTION_REQUEST:
        mid = _multicast_id(obj["multicastId"], True, limits)
        if mid.broadcast != name:
            raise PayloadDecodeError("multicastId", f"names broadcast {mid.broadcast!r}, not the subscribedToName")
        if recipient is not None and mid.provider != recipient:
            raise PayloadDecodeError("multicastId", f"names provider {preview(mid.provider)}, not the recipient")
        partitions = mid.partitions
    return sw.encode_request(sw.SubscriptionRequest(subscription_id, name, qos, flt, partitions), kind)


def _filter(value: Any) -> dict[str, Any]:
    # joynr leaves filterParameters out (JavaScript) or null when a subscription has no filter.
    if value is None:
        return {}
    if not isinstance(value, dict) or value.get("_typeName") != FILTER_PARAMETERS \
            or not set(value) <= {"_typeName", "filterParameters"}:
        raise PayloadDecodeError("filterParameters", f"a {FILTER_PARAMETERS}, got {preview(value)}")
    params = value.get("filterParameters")
    params = {} if params is None else checked_value(params, "filterParameters.filterParameters")
    try:
        return sw.check_filter(params) or {}
    except sw.SubscriptionPayloadError as exc:
        raise PayloadDecodeError("filterParameters.filterParameters", str(exc)) from None


def subscription_reply_from_joynr(data: bytes, limits: WireLimits = DEFAULT_LIMITS) -> bytes:
    obj = load_object(data, TYPE_NAMES[SUBSCRIPTION_REPLY], {"subscriptionId", "error"}, {"subscriptionId"}, limits)
    subscription_id = checked_id(obj["subscriptionId"], "subscriptionId", limits)
    error = obj.get("error")
    if error is None:
        return sw.encode_reply(subscription_id)
    if not isinstance(error, dict) or error.get("_typeName") != SUBSCRIPTION_EXCEPTION \
            or not set(error) <= {"_typeName", "detailMessage", "subscriptionId"}:
        raise PayloadDecodeError("error", f"a {SUBSCRIPTION_EXCEPTION}, got {preview(error)}")
    if error.get("subscriptionId") not in (None, subscription_id):
        raise PayloadDecodeError("error.subscriptionId", f"{preview(error['subscriptionId'])}, not the reply's")
    return sw.encode_reply(subscription_id, detail_message(error.get("detailMessage", ""), "error.detailMessage",
                                                           limits))


def subscription_stop_from_joynr(data: bytes, limits: WireLimits = DEFAULT_LIMITS) -> bytes:
    obj = load_object(data, TYPE_NAMES[SUBSCRIPTION_STOP], {"subscriptionId"}, {"subscriptionId"}, limits)
    return sw.encode_stop(checked_id(obj["subscriptionId"], "subscriptionId", limits))


def _response(obj: dict[str, Any]) -> Any:
    if obj.get("error") is not None:
        raise PayloadDecodeError("error", "a publication of an error: the simulator's publications carry a value")
    response = obj.get("response")
    # The simulator publishes one value: joynr's list of a broadcast's outputs holds 0 or 1.
    if not isinstance(response, list) or len(response) > 1:
        raise PayloadDecodeError("response", f"a list of at most one value, got {preview(response)}")
    value = checked_value(response[0], "response[0]") if response else None
    if isinstance(value, (list, dict)):
        raise PayloadDecodeError("response[0]", f"a scalar, got {preview(value)}")
    return value


def publication_from_joynr(data: bytes, limits: WireLimits = DEFAULT_LIMITS) -> bytes:
    obj = load_object(data, TYPE_NAMES[PUBLICATION], {"subscriptionId", "response", "error"}, {"subscriptionId"},
                      limits)
    subscription_id = checked_id(obj["subscriptionId"], "subscriptionId", limits)
    return sw.encode_publication(subscription_id, _response(obj))


def multicast_publication_from_joynr(data: bytes, limits: WireLimits = DEFAULT_LIMITS,
                                     recipient: str | None = None) -> bytes:
    """joynr's MulticastPublication as the simulator's payload; its multicastId must be one a
    provider fires and, when ``recipient`` is given, the message's."""
    obj = load_object(data, TYPE_NAMES[MULTICAST], {"multicastId", "response", "error"}, {"multicastId"}, limits)
    mid = _multicast_id(obj["multicastId"], False, limits)
    if recipient is not None and str(mid) != recipient:
        raise PayloadDecodeError("multicastId", f"{preview(str(mid))}, not the recipient {preview(recipient)}")
    return sw.encode_multicast(_response(obj))


# -- every message type ------------------------------------------------------------------


def _check_sim_payload(msg_type: str, payload: bytes) -> None:
    """The simulator's request and reply payloads have no checking decoder of their own (a
    malformed reply decodes as a JoynrRuntimeException): their form is checked here."""
    try:
        data = msgpack.unpackb(payload, raw=False)
    except Exception as exc:  # msgpack raises many types for garbage
        raise ValueError(f"not a simulator {msg_type} payload: {type(exc).__name__}") from None
    if msg_type in (REQUEST, ONE_WAY):
        ok = isinstance(data, dict) and set(data) == {"m", "p"} and isinstance(data["m"], str) \
            and isinstance(data["p"], list)
    else:
        err = data.get("e") if isinstance(data, dict) else None
        ok = isinstance(data, dict) and (set(data) == {"r"} or (
            set(data) == {"e"} and isinstance(err, dict) and {"type", "msg"} <= set(err) <= {"type", "msg", "err"}
            and all(isinstance(v, str) for v in err.values())))
    if not ok:
        raise ValueError(f"not a simulator {msg_type} payload: {preview(data)}")


def to_joynr_payload(msg_type: str, payload: bytes, request_reply_id: str | None, *,
                     recipient: str | None = None, sender: str | None = None) -> bytes:
    """The simulator's payload of a message of type ``msg_type`` as joynr's JSON. A request
    or reply needs its ``request_reply_id``; a multicast subscription request or multicast
    needs the message's ``recipient``. A request to the GCD (``recipient``) and a reply from
    it (``sender``) are joynr's GlobalCapabilitiesDirectory's (``gcd_payloads``). A payload
    the simulator could not have made raises ValueError."""
    if msg_type in (REQUEST, REPLY, ONE_WAY):
        _check_sim_payload(msg_type, payload)
        to_gcd = recipient == GCD_PARTICIPANT_ID
        if msg_type == ONE_WAY:
            return (gcd_one_way_to_joynr if to_gcd else one_way_to_joynr)(payload)
        if request_reply_id is None:
            raise ValueError(f"a {msg_type} message's payload names its request-reply id: pass it")
        if msg_type == REQUEST:
            return (gcd_request_to_joynr if to_gcd else request_to_joynr)(payload, request_reply_id)
        from_gcd = sender == GCD_PARTICIPANT_ID
        return (gcd_reply_to_joynr if from_gcd else reply_to_joynr)(payload, request_reply_id)
    if msg_type in sw.REQUEST_KINDS:
        return subscription_request_to_joynr(payload, msg_type, recipient)
    if msg_type == MULTICAST:
        return multicast_publication_to_joynr(payload, recipient)
    convert = {SUBSCRIPTION_REPLY: subscription_reply_to_joynr, SUBSCRIPTION_STOP: subscription_stop_to_joynr,
               PUBLICATION: publication_to_joynr}.get(msg_type)
    if convert is None:
        raise ValueError(f"not a joynr message type: {preview(msg_type)}")
    return convert(payload)


def from_joynr_payload(msg_type: str, data: bytes, limits: WireLimits = DEFAULT_LIMITS, *,
                       recipient: str | None = None, sender: str | None = None) -> tuple[bytes, str | None]:
    """joynr's JSON payload of a message of type ``msg_type`` as (the simulator's payload,
    the request-reply id of a request or reply, else None). ``recipient``, the message's
    ``to``, when given is checked against a multicastId; a request to the GCD and a reply
    from it (``sender``) are read as joynr's GlobalCapabilitiesDirectory's. Raises
    PayloadDecodeError."""
    if msg_type == REQUEST:
        return (gcd_request_from_joynr if recipient == GCD_PARTICIPANT_ID else request_from_joynr)(data, limits)
    if msg_type == REPLY:
        return (gcd_reply_from_joynr if sender == GCD_PARTICIPANT_ID else reply_from_joynr)(data, limits)
    if msg_type == ONE_WAY:
        return (gcd_one_way_from_joynr if recipient == GCD_PARTICIPANT_ID else one_way_from_joynr)(data, limits), None
    if msg_type in sw.REQUEST_KINDS:
        return subscription_request_from_joynr(data, msg_type, limits, recipient), None
    if msg_type == MULTICAST:
        return multicast_publication_from_joynr(data, limits, recipient), None
    convert = {SUBSCRIPTION_REPLY: subscription_reply_from_joynr, SUBSCRIPTION_STOP: subscription_stop_from_joynr,
               PUBLICATION: publication_from_joynr}.get(msg_type)
    if convert is None:
        raise PayloadDecodeError("t", f"not a joynr message type: {preview(msg_type)}")
    return convert(data, limits), None
