"""joynr's JSON subscription messages and to_joynr_payload/from_joynr_payload: round trips of
every message type, joynr-shaped JSON (as joynr's JavaScript and Java classes write it)
decoding to the simulator's values, and every malformed field refused with its name."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from joynr_sim.core import subscription_wire as sw
from joynr_sim.core.errors import ApplicationException, ProviderRuntimeException
from joynr_sim.core.message import MESSAGE_TYPES
from joynr_sim.core.subscriptions import NO_EXPIRY, SubscriptionQos
from joynr_sim.runtime.participants import encode_reply, encode_request
from joynr_sim.wire.payloads import PayloadDecodeError
from joynr_sim.wire.subscription_payloads import from_joynr_payload, to_joynr_payload

INT64_MAX = 2**63 - 1
PROVIDER = "provider-1"

# -- strategies --------------------------------------------------------------------------

ids = st.text(st.characters(blacklist_categories=("Cc", "Cs")), min_size=1, max_size=40)
names = st.from_regex(r"[A-Za-z][A-Za-z0-9_]{0,20}", fullmatch=True)
texts = st.text(st.characters(blacklist_categories=("Cs",)), max_size=30)
scalars = st.one_of(st.none(), st.booleans(), st.integers(-(2**63), INT64_MAX),
                    st.floats(allow_nan=False, allow_infinity=False), texts)
ms = st.integers(0, NO_EXPIRY)
expiries = st.one_of(st.just(NO_EXPIRY), st.integers(1, NO_EXPIRY))
partition = st.from_regex(r"[A-Za-z0-9]{1,8}", fullmatch=True)


@st.composite
def qoses(draw: st.DrawFn, multicast: bool = False) -> SubscriptionQos:
    """A qos as the simulator makes one, with only the fields its kind uses (joynr has no others)."""
    expiry, ttl = draw(expiries), draw(ms)
    kind = "on-change" if multicast else draw(st.sampled_from(SubscriptionQos.KINDS))
    if kind == "on-change":
        return SubscriptionQos(kind, expiry, 0 if multicast else draw(ms), publication_ttl_ms=ttl).check()
    if kind == "on-change-keep-alive":
        low = draw(st.integers(0, 10**9))
        high = draw(st.integers(max(1, low), NO_EXPIRY))
        alert = draw(st.one_of(st.just(0), st.integers(high, NO_EXPIRY)))
        return SubscriptionQos(kind, expiry, low, high, 0, alert, ttl).check()
    period = draw(st.integers(1, NO_EXPIRY))
    alert = draw(st.one_of(st.just(0), st.integers(period, NO_EXPIRY)))
    return SubscriptionQos(kind, expiry, 0, 0, period, alert, ttl).check()


@st.composite
def messages(draw: st.DrawFn) -> tuple[str, bytes, str | None, str | None]:
    """(type, the simulator's payload, request-reply id, recipient) of any message type."""
    msg_type = draw(st.sampled_from(sorted(MESSAGE_TYPES)))
    sid, name, rrid = draw(ids), draw(names), draw(ids)
    if msg_type in ("rq", "o"):
        params = draw(st.lists(st.one_of(scalars, st.lists(scalars, max_size=3)), max_size=4))
        return msg_type, encode_request(draw(names), params), rrid if msg_type == "rq" else None, None
    if msg_type == "rp":
        payload = draw(st.one_of(scalars.map(encode_reply),
                                 texts.map(lambda t: encode_reply(error=ProviderRuntimeException(t))),
                                 names.map(lambda n: encode_reply(error=ApplicationException(n, "why")))))
        return msg_type, payload, rrid, None
    if msg_type == "arq":
        return msg_type, sw.encode_request(sw.SubscriptionRequest(sid, name, draw(qoses())), msg_type), None, PROVIDER
    if msg_type == "brq":
        flt = draw(st.dictionaries(texts, scalars, max_size=sw.MAX_FILTER_KEYS))
        req = sw.SubscriptionRequest(sid, name, draw(qoses()), flt)
        return msg_type, sw.encode_request(req, msg_type), None, PROVIDER
    if msg_type == "mrq":
        parts = draw(st.lists(st.one_of(partition, st.just("+")), max_size=5))
        parts += draw(st.sampled_from([[], ["*"]]))
        req = sw.SubscriptionRequest(sid, name, draw(qoses(multicast=True)), None, tuple(parts))
        return msg_type, sw.encode_request(req, msg_type), None, PROVIDER
    if msg_type == "srp":
        return msg_type, sw.encode_reply(sid, draw(st.one_of(st.none(), texts))), None, None
    if msg_type == "sst":
        return msg_type, sw.encode_stop(sid), None, None
    if msg_type == "p":
        return msg_type, sw.encode_publication(sid, draw(scalars)), None, None
    parts = draw(st.lists(partition, max_size=5))
    return msg_type, sw.encode_multicast(draw(scalars)), None, "/".join([PROVIDER, name, *parts])


@given(messages())
@settings(max_examples=1500)
def test_every_message_type_goes_to_joynr_and_back_unchanged(message: tuple[str, bytes, str | None, str | None]
                                                             ) -> None:
    msg_type, payload, rrid, recipient = message
    data = to_joynr_payload(msg_type, payload, rrid, recipient=recipient)
    assert json.loads(data)["_typeName"].startswith("joynr.")
    assert from_joynr_payload(msg_type, data, recipient=recipient) == (payload, rrid)


# -- joynr's JSON, as joynr's classes write it ---------------------------------------------


def _request(kind: str, payload: bytes) -> sw.SubscriptionRequest:
    return sw.decode_request(payload, kind)


def test_joynrs_subscription_requests_decode_to_the_simulators() -> None:
    # JavaScript: the SubscriptionRequest.ts and PeriodicSubscriptionQos.ts fields, JSON.stringify's order.
    periodic = {"subscriptionId": "sub-1", "subscribedToName": "speed", "_typeName": "joynr.SubscriptionRequest",
                "qos": {"_typeName": "joynr.PeriodicSubscriptionQos", "expiryDateMs": 1_700_000_060_000,
                        "publicationTtlMs": 10000, "alertAfterIntervalMs": 120000, "periodMs": 60000}}
    payload, rrid = from_joynr_payload("arq", json.dumps(periodic).encode())
    assert rrid is None
    assert _request("arq", payload) == sw.SubscriptionRequest(
        "sub-1", "speed", SubscriptionQos("periodic", 1_700_000_060_000, period_ms=60000,
                                          alert_after_interval_ms=120000, publication_ttl_ms=10000))
    # Java: Long.MAX_VALUE (INFINITE_SUBSCRIPTION) and 0 (NO_EXPIRY_DATE) both never expire.
    keep_alive = {"_typeName": "joynr.SubscriptionRequest", "subscriptionId": "sub-2", "subscribedToName": "speed",
                  "qos": {"_typeName": "joynr.OnChangeWithKeepAliveSubscriptionQos", "expiryDateMs": INT64_MAX,
                          "publicationTtlMs": 2000, "minIntervalMs": 50, "maxIntervalMs": 500,
                          "alertAfterIntervalMs": 0}}
    qos = _request("arq", from_joynr_payload("arq", json.dumps(keep_alive).encode())[0]).qos
    assert qos == SubscriptionQos("on-change-keep-alive", NO_EXPIRY, 50, 500, 0, 0, 2000)
    # A field left out has joynr's default (OnChangeSubscriptionQos.ts: minIntervalMs 1000; SubscriptionQos.ts).
    on_change = {"_typeName": "joynr.SubscriptionRequest", "subscriptionId": "sub-3", "subscribedToName": "speed",
                 "qos": {"_typeName": "joynr.OnChangeSubscriptionQos", "expiryDateMs": 0}}
    qos = _request("arq", from_joynr_payload("arq", json.dumps(on_change).encode())[0]).qos
    assert qos == SubscriptionQos("on-change", NO_EXPIRY, 1000, publication_ttl_ms=10000)


def test_joynrs_broadcast_and_multicast_subscription_requests_decode_to_the_simulators() -> None:
    base = {"subscriptionId": "sub-4", "subscribedToName": "fired",
            "qos": {"_typeName": "joynr.OnChangeSubscriptionQos", "expiryDateMs": 5000, "publicationTtlMs": 100,
                    "minIntervalMs": 0}}
    brq = {**base, "_typeName": "joynr.BroadcastSubscriptionRequest",
           "filterParameters": {"_typeName": "joynr.BroadcastFilterParameters",
                                "filterParameters": {"country": "DE", "every": "2"}}}
    req = _request("brq", from_joynr_payload("brq", json.dumps(brq).encode())[0])
    assert (req.name, req.filter, req.qos.expiry_date_ms) == ("fired", {"country": "DE", "every": "2"}, 5000)
    # JavaScript leaves filterParameters out without a filter; BroadcastFilterParameters() holds null.
    for flt in ({}, {"filterParameters": {"_typeName": "joynr.BroadcastFilterParameters", "filterParameters": None}}):
        data = json.dumps({**base, **flt, "_typeName": "joynr.BroadcastSubscriptionRequest"}).encode()
        assert _request("brq", from_joynr_payload("brq", data)[0]).filter == {}
    # MulticastSubscriptionQos: JavaScript's has publicationTtlMs, Java's only expiryDateMs.
    mrq = {"_typeName": "joynr.MulticastSubscriptionRequest", "subscriptionId": "sub-5", "subscribedToName": "fired",
           "multicastId": f"{PROVIDER}/fired/DE/+/*",
           "qos": {"_typeName": "joynr.MulticastSubscriptionQos", "expiryDateMs": 0, "publicationTtlMs": 300}}
    req = _request("mrq", from_joynr_payload("mrq", json.dumps(mrq).encode(), recipient=PROVIDER)[0])
    assert req == sw.SubscriptionRequest("sub-5", "fired", SubscriptionQos("on-change", NO_EXPIRY,
                                                                           publication_ttl_ms=300),
                                         None, ("DE", "+", "*"))
    java = {**mrq, "qos": {"_typeName": "joynr.MulticastSubscriptionQos", "expiryDateMs": 9000}}
    assert _request("mrq", from_joynr_payload("mrq", json.dumps(java).encode())[0]).qos == SubscriptionQos(
        "on-change", 9000, publication_ttl_ms=10000)


def test_joynrs_replies_stops_and_publications_decode_to_the_simulators() -> None:
    def decode(msg_type: str, obj: dict, recipient: str | None = None) -> bytes:
        return from_joynr_payload(msg_type, json.dumps(obj).encode(), recipient=recipient)[0]

    refused = {"_typeName": "joynr.SubscriptionReply", "subscriptionId": "sub-1",
               "error": {"_typeName": "joynr.exceptions.SubscriptionException", "detailMessage": "no such attribute",
                         "subscriptionId": "sub-1"}}
    assert sw.decode_reply(decode("srp", refused)) == ("sub-1", "no such attribute")
    assert sw.decode_reply(decode("srp", {"_typeName": "joynr.SubscriptionReply", "subscriptionId": "sub-1",
                                          "error": None})) == ("sub-1", None)
    assert sw.decode_stop(decode("sst", {"_typeName": "joynr.SubscriptionStop", "subscriptionId": "sub-1"})) == "sub-1"
    publication = {"_typeName": "joynr.SubscriptionPublication", "subscriptionId": "sub-1", "response": [88.5]}
    assert sw.decode_publication(decode("p", publication)) == ("sub-1", 88.5)
    assert sw.decode_publication(decode("p", {**publication, "response": []})) == ("sub-1", None)
    multicast = {"_typeName": "joynr.MulticastPublication", "multicastId": f"{PROVIDER}/fired/DE",
                 "response": ["alarm"]}
    assert sw.decode_multicast(decode("m", multicast, f"{PROVIDER}/fired/DE")) == "alarm"


def test_the_simulators_qos_is_written_as_joynrs_qos_types() -> None:
    def qos_of(kind: str, qos: SubscriptionQos) -> dict:
        req = sw.SubscriptionRequest("s", "speed", qos)
        return json.loads(to_joynr_payload(kind, sw.encode_request(req, kind), None, recipient=PROVIDER))["qos"]

    assert qos_of("arq", SubscriptionQos("periodic", NO_EXPIRY, period_ms=100, alert_after_interval_ms=300)) == {
        "_typeName": "joynr.PeriodicSubscriptionQos", "expiryDateMs": 0, "publicationTtlMs": 10000,
        "periodMs": 100, "alertAfterIntervalMs": 300}
    assert qos_of("brq", SubscriptionQos("on-change-keep-alive", 77, 10, 20, 0, 40, 50)) == {
        "_typeName": "joynr.OnChangeWithKeepAliveSubscriptionQos", "expiryDateMs": 77, "publicationTtlMs": 50,
        "minIntervalMs": 10, "maxIntervalMs": 20, "alertAfterIntervalMs": 40}
    # A multicast subscription's qos has only an expiry and a ttl in joynr; the provider uses no other field.
    assert qos_of("mrq", SubscriptionQos("periodic", 77, period_ms=5, publication_ttl_ms=60)) == {
        "_typeName": "joynr.MulticastSubscriptionQos", "expiryDateMs": 77, "publicationTtlMs": 60}


# -- refused -----------------------------------------------------------------------------

ARQ = {"_typeName": "joynr.SubscriptionRequest", "subscriptionId": "s", "subscribedToName": "speed",
       "qos": {"_typeName": "joynr.OnChangeSubscriptionQos", "expiryDateMs": 0, "publicationTtlMs": 10,
               "minIntervalMs": 0}}
BRQ = {**ARQ, "_typeName": "joynr.BroadcastSubscriptionRequest"}
MRQ = {**ARQ, "_typeName": "joynr.MulticastSubscriptionRequest", "multicastId": f"{PROVIDER}/speed",
       "qos": {"_typeName": "joynr.MulticastSubscriptionQos", "expiryDateMs": 0}}
SRP = {"_typeName": "joynr.SubscriptionReply", "subscriptionId": "s"}
PUB = {"_typeName": "joynr.SubscriptionPublication", "subscriptionId": "s", "response": [1]}
MCP = {"_typeName": "joynr.MulticastPublication", "multicastId": f"{PROVIDER}/speed", "response": [1]}
SEC = {"_typeName": "joynr.exceptions.SubscriptionException", "detailMessage": "no"}


def _qos(**fields: object) -> dict:
    return {**ARQ, "qos": {**ARQ["qos"], **fields}}


@pytest.mark.parametrize("msg_type, obj, field", [
    ("arq", {**ARQ, "_typeName": "joynr.SubscriptionStop"}, "_typeName"),
    ("arq", {**ARQ, "extra": 1}, "joynr.SubscriptionRequest"),
    ("arq", {k: v for k, v in ARQ.items() if k != "qos"}, "joynr.SubscriptionRequest"),
    ("arq", {**ARQ, "subscriptionId": ""}, "subscriptionId"),
    ("arq", {**ARQ, "subscriptionId": "a\nb"}, "subscriptionId"),
    ("arq", {**ARQ, "subscriptionId": "x" * 201}, "subscriptionId"),
    ("arq", {**ARQ, "subscriptionId": 7}, "subscriptionId"),
    ("arq", {**ARQ, "subscribedToName": "a b"}, "subscribedToName"),
    ("arq", {**ARQ, "subscribedToName": "x" * 129}, "subscribedToName"),
    ("arq", {**ARQ, "qos": None}, "qos._typeName"),
    ("arq", {**ARQ, "qos": {"_typeName": "joynr.MulticastSubscriptionQos"}}, "qos._typeName"),
    ("arq", _qos(periodMs=5), "qos"),
    ("arq", _qos(minIntervalMs=-1), "qos.minIntervalMs"),
    ("arq", _qos(minIntervalMs=1.5), "qos.minIntervalMs"),
    ("arq", _qos(minIntervalMs=True), "qos.minIntervalMs"),
    ("arq", _qos(publicationTtlMs="10"), "qos.publicationTtlMs"),
    ("arq", _qos(publicationTtlMs=2**62 + 1), "qos.publicationTtlMs"),
    ("arq", _qos(expiryDateMs=2**63), "qos.expiryDateMs"),
    ("arq", {**ARQ, "qos": {"_typeName": "joynr.OnChangeWithKeepAliveSubscriptionQos", "minIntervalMs": 900,
                            "maxIntervalMs": 100}}, "qos"),
    ("arq", {**ARQ, "qos": {"_typeName": "joynr.PeriodicSubscriptionQos", "periodMs": 0}}, "qos"),
    ("brq", {**BRQ, "filterParameters": {"country": "DE"}}, "filterParameters"),
    ("brq", {**BRQ, "filterParameters": {"_typeName": "joynr.BroadcastFilterParameters",
                                         "filterParameters": {"a": [1]}}}, "filterParameters.filterParameters"),
    ("brq", {**BRQ, "filterParameters": {"_typeName": "joynr.BroadcastFilterParameters",
                                         "filterParameters": {str(n): n for n in range(17)}}},
     "filterParameters.filterParameters"),
    ("brq", {**BRQ, "filterParameters": {"_typeName": "joynr.BroadcastFilterParameters",
                                         "filterParameters": {"a": 2**64}}}, "filterParameters.filterParameters.a"),
    ("brq", {**BRQ, "multicastId": "p/speed"}, "joynr.BroadcastSubscriptionRequest"),
    ("mrq", {k: v for k, v in MRQ.items() if k != "multicastId"}, "joynr.MulticastSubscriptionRequest"),
    ("mrq", {**MRQ, "qos": ARQ["qos"]}, "qos._typeName"),
    ("mrq", {**MRQ, "qos": {"_typeName": "joynr.MulticastSubscriptionQos", "minIntervalMs": 0}}, "qos"),
    ("mrq", {**MRQ, "multicastId": f"{PROVIDER}/other"}, "multicastId"),
    ("mrq", {**MRQ, "multicastId": "speed"}, "multicastId"),
    ("mrq", {**MRQ, "multicastId": f"{PROVIDER}/speed/*/x"}, "multicastId"),
    ("mrq", {**MRQ, "multicastId": f"{PROVIDER}/speed/a-b"}, "multicastId"),
    ("mrq", {**MRQ, "multicastId": f"{PROVIDER}/speed/\ud800"}, "multicastId"),
    ("mrq", {**MRQ, "multicastId": "other-provider/speed"}, "multicastId"),
    ("mrq", {**MRQ, "multicastId": 5}, "multicastId"),
    ("srp", {**SRP, "subscriptionId": None}, "subscriptionId"),
    ("srp", {**SRP, "error": "no"}, "error"),
    ("srp", {**SRP, "error": {**SEC, "_typeName": "joynr.exceptions.ProviderRuntimeException"}}, "error"),
    ("srp", {**SRP, "error": {**SEC, "extra": 1}}, "error"),
    ("srp", {**SRP, "error": {**SEC, "subscriptionId": "other"}}, "error.subscriptionId"),
    ("srp", {**SRP, "error": {**SEC, "detailMessage": 5}}, "error.detailMessage"),
    ("srp", {**SRP, "error": {**SEC, "detailMessage": "x" * 5000}}, "error.detailMessage"),
    ("srp", {**SRP, "error": {**SEC, "detailMessage": "\udc00"}}, "error.detailMessage"),
    ("sst", {"_typeName": "joynr.SubscriptionStop"}, "joynr.SubscriptionStop"),
    ("sst", {"_typeName": "joynr.SubscriptionStop", "subscriptionId": ["s"]}, "subscriptionId"),
    ("p", {**PUB, "response": [1, 2]}, "response"),
    ("p", {**PUB, "response": 1}, "response"),
    ("p", {k: v for k, v in PUB.items() if k != "response"}, "response"),
    ("p", {**PUB, "response": [[1]]}, "response[0]"),
    ("p", {**PUB, "response": [{"a": 1}]}, "response[0]"),
    ("p", {**PUB, "response": [2**63]}, "response[0]"),
    ("p", {**PUB, "response": ["\ud800"]}, "response[0]"),
    ("p", {**PUB, "error": {"_typeName": "joynr.exceptions.ProviderRuntimeException"}}, "error"),
    ("p", {**PUB, "subscriptionId": "\x00"}, "subscriptionId"),
    ("m", {**MCP, "multicastId": f"{PROVIDER}/speed/+"}, "multicastId"),
    ("m", {**MCP, "multicastId": f"{PROVIDER}/speed/x"}, "multicastId"),
    ("m", {**MCP, "multicastId": "x" * 1025}, "multicastId"),
    ("m", {**MCP, "response": [1e308 * 10]}, "response[0]"),
    ("m", {**MCP, "subscriptionId": "s"}, "joynr.MulticastPublication"),
    ("rp", {"_typeName": "joynr.Reply", "requestReplyId": "r", "error": {"_typeName": []}}, "error._typeName"),
    ("rq", {"_typeName": "joynr.Request", "methodName": "m", "requestReplyId": "r", "params": ["\ud800"],
            "paramDatatypes": ["String"]}, "params[0]"),
    ("rq", {"_typeName": "joynr.Request", "methodName": "m", "requestReplyId": "r", "params": [{"\ud800": 1}],
            "paramDatatypes": ["Object"]}, "params[0] key"),
])
def test_a_bad_joynr_subscription_payload_is_refused_naming_its_field(msg_type: str, obj: dict, field: str) -> None:
    with pytest.raises(PayloadDecodeError) as err:
        from_joynr_payload(msg_type, json.dumps(obj).replace("Infinity", "1e999").encode(), recipient=(
            PROVIDER if msg_type == "mrq" else f"{PROVIDER}/speed" if msg_type == "m" else None))
    assert err.value.field == field, str(err.value)


@pytest.mark.parametrize("msg_type, data, field", [
    ("srp", b"\xff", "payload"),
    ("sst", b'{"_typeName":"joynr.SubscriptionStop","subscriptionId":"a","subscriptionId":"b"}', "payload"),
    ("p", b'{"_typeName":"joynr.SubscriptionPublication","subscriptionId":"s","response":[NaN]}', "payload"),
    ("brq", b"[" * 100_000 + b"]" * 100_000, "payload"),
    ("arq", "not bytes", "payload"),
    ("arq", b'{"_typeName":"joynr.SubscriptionRequest"' + b" " * (1024 * 1024) + b"}", "payload"),
    ("xx", b"{}", "t"),
])
def test_a_payload_that_is_no_joynr_json_is_refused(msg_type: str, data: bytes, field: str) -> None:
    with pytest.raises(PayloadDecodeError) as err:
        from_joynr_payload(msg_type, data)  # type: ignore[arg-type]
    assert err.value.field == field, str(err.value)


def _arq(qos: SubscriptionQos) -> bytes:
    return sw.encode_request(sw.SubscriptionRequest("s", "speed", qos), "arq")


@pytest.mark.parametrize("msg_type, payload, rrid, recipient, words", [
    ("xx", b"", None, None, "message type"),
    ("rq", encode_request("m", []), None, None, "request-reply id"),
    ("rp", encode_reply(1), None, None, "request-reply id"),
    ("rp", b"\x81\xa1x\x01", "r", None, "not a simulator rp payload"),
    ("rq", b"\xc1", "r", None, "not a simulator rq payload"),
    ("o", encode_request("m", [b"bytes"]), None, None, "JSON"),
    ("p", sw.encode_publication("s", float("nan")), None, None, "JSON"),
    ("arq", _arq(SubscriptionQos("on-change", 0)), None, None, "expiryDateMs of 0"),
    ("mrq", sw.encode_request(sw.SubscriptionRequest("s", "speed", SubscriptionQos("on-change")), "mrq"), None,
     None, "recipient"),
    ("mrq", sw.encode_request(sw.SubscriptionRequest("s", "speed", SubscriptionQos("on-change")), "mrq"), None,
     "a/b", "provider participant id"),
    ("m", sw.encode_multicast(1), None, None, "recipient"),
    ("m", sw.encode_multicast(1), None, f"{PROVIDER}/speed/+", "multicast id"),
    ("sst", b"garbage", None, None, "not msgpack"),
])
def test_a_payload_the_simulator_could_not_have_made_is_not_encoded(msg_type: str, payload: bytes, rrid: str | None,
                                                                    recipient: str | None, words: str) -> None:
    with pytest.raises(ValueError, match=words):
        to_joynr_payload(msg_type, payload, rrid, recipient=recipient)


# -- hostile input -----------------------------------------------------------------------

json_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.floats(allow_nan=False), st.text(max_size=8)),
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=12), inner, max_size=4)),
    max_leaves=12)
GOOD = [(t, to_joynr_payload(t, p, r, recipient=rc)) for t, p, r, rc in [
    ("arq", _arq(SubscriptionQos("on-change-keep-alive", 9, 1, 2, 0, 3, 4)), None, None),
    ("brq", sw.encode_request(sw.SubscriptionRequest("s", "speed", SubscriptionQos("periodic", period_ms=5),
                                                     {"a": 1}), "brq"), None, None),
    ("mrq", sw.encode_request(sw.SubscriptionRequest("s", "speed", SubscriptionQos("on-change"), None, ("a", "+")),
                              "mrq"), None, PROVIDER),
    ("srp", sw.encode_reply("s", "no"), None, None), ("sst", sw.encode_stop("s"), None, None),
    ("p", sw.encode_publication("s", "v"), None, None), ("m", sw.encode_multicast(2.5), None, f"{PROVIDER}/speed"),
    ("rq", encode_request("m", [1, "x"]), "r", None), ("o", encode_request("m", []), None, None),
    ("rp", encode_reply(error=ApplicationException("E", "m")), "r", None)]]
FIELDS = ["subscriptionId", "subscribedToName", "qos", "filterParameters", "multicastId", "response", "error",
          "expiryDateMs", "minIntervalMs", "maxIntervalMs", "periodMs", "alertAfterIntervalMs", "publicationTtlMs",
          "_typeName", "detailMessage", "methodName", "params", "requestReplyId"]


def _replace_somewhere(obj: object, key: str, value: object, at: int) -> object:
    """``obj`` with the ``at``-th occurrence (cyclically) of ``key`` in any nested object set to ``value``."""
    spots: list[dict] = []

    def walk(node: object) -> None:
        if isinstance(node, dict):
            spots.extend([node] if key in node else [])
            for v in node.values():
                walk(v)
        elif isinstance(node, list):
            for v in node:
                walk(v)
    walk(obj)
    if spots:
        spots[at % len(spots)][key] = value
    return obj


@given(st.integers(0, len(GOOD) - 1), st.sampled_from(sorted(MESSAGE_TYPES)), st.integers(0, 10_000),
       st.binary(min_size=1, max_size=8), json_values, st.sampled_from(FIELDS), st.integers(0, 3))
@settings(max_examples=1500)
def test_random_and_damaged_json_raises_only_payload_decode_errors(
        n: int, msg_type: str, at: int, patch: bytes, value: object, key: str, spot: int) -> None:
    good_type, good = GOOD[n]
    field_changed = json.dumps(_replace_somewhere(json.loads(good), key, value, spot)).encode()
    for data in (good[: at % len(good)] + patch + good[at % len(good) + len(patch):], field_changed,
                 json.dumps(value).encode()):
        for kind, recipient in ((good_type, None), (msg_type, None), (msg_type, f"{PROVIDER}/speed")):
            try:
                payload, _ = from_joynr_payload(kind, data, recipient=recipient)
            except PayloadDecodeError:
                continue
            # What was taken is a payload the simulator takes, and goes back to joynr's JSON.
            to_joynr_payload(kind, payload, "r", recipient=f"{PROVIDER}/speed" if kind == "m" else PROVIDER)
