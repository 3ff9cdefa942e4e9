"""The broker semantics suite's properties of delivery: what reaches whom, how much at
once and in what order, on connections that stay up: the grants of ``brokers.access``, the
in-flight window, the order of one publisher's messages, the QoS a QoS 0 message is
delivered at, messages acknowledged just before their publisher leaves, retained messages.
Each check is a few lines of MQTT exchange on the clients of ``brokers.semantics_client``;
``brokers.semantics`` runs them by property id.

Separate from the session properties (``brokers.semantics_sessions``), which reconnect a
client or restart the broker and judge what the session held.
"""

from __future__ import annotations

import contextlib
import time

import paho.mqtt.client as mqtt

from .promises import Outcome
from .semantics_client import QUIET_S, WAIT_S, NotKept, Session, distinct, unicast

WINDOW_PROBE = 50  # inflight-window: messages published to a subscriber that withholds acks
IN_ORDER = 50  # ordering: messages of one publisher to one topic
PUBLISHER_GONE = 500  # publisher-gone: messages acknowledged just before the publisher leaves


def acl_publish_denied(s: Session) -> Outcome:
    sub = s.subscriber("sub")
    pub = s.client("pub")
    info = pub.publish(f"{sub.client_id}/high", b"denied", wait=False)  # only <topic>/low is granted
    acked = pub.acked(info)
    closed = pub.gone.wait(QUIET_S)  # a broker may acknowledge, then close the connection
    how = {(True, False): "acknowledged and dropped", (True, True): "acknowledged, then disconnected",
           (False, True): "disconnected", (False, False): "no PUBACK, still connected"}[(acked, closed)]
    (s.client("pub2") if closed else pub).publish(unicast(sub), b"marker")
    if any(m.payload == b"denied" for m in sub.receive_until(b"marker")):
        raise NotKept(f"delivered ({how})")
    return Outcome(True, how)


def acl_subscribe_denied(s: Session) -> Outcome:
    sub = s.subscriber("sub")
    other = s.subscriber("other")
    code = sub.subscribe(f"{other.client_id}/#")  # another client's prefix
    pub = s.client("pub")
    pub.publish(unicast(other), b"not-yours")
    pub.publish(unicast(sub), b"marker")
    how = "SUBACK 0x80" if code == 0x80 else f"granted (SUBACK {code}), nothing delivered"
    if any(m.payload == b"not-yours" for m in sub.receive_until(b"marker")):
        raise NotKept(f"delivered outside the grants (SUBACK {code:#x})")
    if code != 0x80:
        how = "granted, nothing delivered"
    return Outcome(True, how)


def inflight_window(s: Session) -> Outcome:
    sub = s.subscriber("sub", manual_ack=True)
    pub = s.client("pub")
    infos = [pub.publish(unicast(sub), f"w-{i}".encode(), wait=False) for i in range(WINDOW_PROBE)]
    unacked = [i for i, info in enumerate(infos) if not pub.acked(info)]
    if unacked:
        raise NotKept(f"no PUBACK to the publisher for {len(unacked)} of {WINDOW_PROBE}")
    held: list[mqtt.MQTTMessage] = []
    msg = sub.receive()
    while msg is not None:
        held.append(msg)
        msg = sub.receive(QUIET_S * 2)
    window = len({m.payload for m in held})
    if window == 0:
        raise NotKept(f"window 0: no message within {WAIT_S:g} s")
    sub.auto_ack = True
    for m in held:
        sub.paho.ack(m.mid, m.qos)
    got = {m.payload for m in held} | distinct(sub, WINDOW_PROBE - window)
    shown = f"window {window}" if window < WINDOW_PROBE else f"window {WINDOW_PROBE} or more, none held back"
    if len(got) < WINDOW_PROBE:
        raise NotKept(f"{shown}, {WINDOW_PROBE - len(got)} of {WINDOW_PROBE} dropped")
    return Outcome(True, shown)


def ordering(s: Session) -> Outcome:
    sub = s.subscriber("sub")
    pub = s.client("pub")
    infos = [pub.publish(unicast(sub), f"{i:04d}".encode(), wait=False) for i in range(IN_ORDER)]
    for info in infos:
        pub.acked(info)
    seen: list[int] = []
    deadline = time.monotonic() + WAIT_S
    while len(seen) < IN_ORDER:
        msg = sub.receive(max(0.0, deadline - time.monotonic()))
        if msg is None:
            raise NotKept(f"{len(seen)} of {IN_ORDER} within {WAIT_S:g} s")
        n = int(msg.payload)
        if n not in seen:
            seen.append(n)
    late = next((b for a, b in zip(seen, seen[1:]) if b < a), None)
    if late is not None:
        raise NotKept(f"{late} arrived after {seen[seen.index(late) - 1]}")
    return Outcome(True, f"{IN_ORDER} in order")


def qos0_delivery(s: Session) -> Outcome:
    sub = s.subscriber("sub")  # subscribed at QoS 1
    pub = s.client("pub")
    pub.paho.publish(unicast(sub), b"qos0", qos=0)
    pub.publish(unicast(sub), b"marker")  # after the QoS 0 message: one publisher, one topic
    got = [m for m in sub.receive_until(b"marker") if m.payload == b"qos0"]
    if not got:
        raise NotKept("not delivered")
    if got[0].qos != 0:
        raise NotKept(f"delivered at QoS {got[0].qos}")
    return Outcome(True, "delivered at QoS 0")


def publisher_gone(s: Session) -> Outcome:
    sub = s.subscriber("sub")
    pub = s.client("pub")
    infos = [pub.publish(unicast(sub), f"gone-{i}".encode(), wait=False) for i in range(PUBLISHER_GONE)]
    for i, info in enumerate(infos):
        if not pub.acked(info):
            raise NotKept(f"no PUBACK for gone-{i} within {WAIT_S:g} s")
    pub.disconnect()  # at once: whatever the broker has not routed yet is its to deliver
    got = distinct(sub, PUBLISHER_GONE)
    if len(got) < PUBLISHER_GONE:
        raise NotKept(f"{len(got)} of {PUBLISHER_GONE} acknowledged messages delivered within {WAIT_S:g} s")
    return Outcome(True, f"{PUBLISHER_GONE} of {PUBLISHER_GONE}")


def retained(s: Session) -> Outcome:
    topic = f"{s.client_id('sub')}/low"
    pub = s.client("pub")
    pub.publish(topic, b"retained", retain=True)
    try:
        sub = s.subscriber("sub", clean_session=True)
        msg = sub.receive()
        if msg is None:
            raise NotKept(f"no message within {WAIT_S:g} s of the subscribe")
        return Outcome(True, f"RETAIN={int(msg.retain)}")
    finally:
        with contextlib.suppress(NotKept):
            pub.publish(topic, b"", retain=True)  # an empty retained message clears it
