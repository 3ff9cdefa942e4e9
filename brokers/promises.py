"""What joynr relies on an MQTT broker for: the one list of broker properties, and what each
kind of broker the simulator runs is declared to keep.

A property has a stable id, the MQTT 3.1.1 section it comes from and whether joynr relies
on it (``relied_on``); ``brokers.semantics`` measures each one on a running broker
(``joynr-sim brokers check``). ``DECLARED`` is what a run records in its ``run.json``
(``broker_properties``) without measuring: the outcome per property for each broker kind
as ``brokers.broker_set`` starts it (amqtt: sessions in memory; Mosquitto: the config of
``brokers.mosquitto_config``, persistence saved after every change), for the memory
network's broker (``memory``) and unknown for an external broker. Tests run the suite
against amqtt, Mosquitto and the memory broker (served on a loopback port) and compare it
with these declarations, so they cannot drift apart from what the brokers do.

Pure: no sockets, files or clocks.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class BrokerProperty:
    id: str
    title: str
    description: str
    relied_on: bool
    relies: str  # what joynr relies on, or why it does not
    section: str  # where MQTT 3.1.1 (OASIS Standard, 2014) says it


@dataclass(frozen=True)
class Outcome:
    """Whether a broker keeps a property (None: unknown or not tested) and how, in a few words."""

    kept: bool | None
    how: str = ""

    def text(self) -> str:
        """``kept (DUP=1)``, ``not kept: no message within 5 s``, ``unknown``."""
        if self.kept is None:
            return self.how or "unknown"
        if self.kept:
            return f"kept ({self.how})" if self.how else "kept"
        return f"not kept: {self.how}" if self.how else "not kept"


PROPERTIES: tuple[BrokerProperty, ...] = (
    BrokerProperty(
        "qos1-redelivery", "QoS 1 redelivery on resume",
        "A QoS 1 message a subscriber received but did not acknowledge before its connection died "
        "(closed without DISCONNECT) is sent again, with DUP set, when it reconnects to its persistent session.",
        True, "at-least-once delivery to a cluster controller that crashed while handling a message",
        "3.1.1 section 4.4 [MQTT-4.4.0-1], section 3.3.1.1 [MQTT-3.3.1-1]",
    ),
    BrokerProperty(
        "offline-queue", "offline queue",
        "QoS 1 messages published while a persistent-session subscriber was away are delivered when it "
        "reconnects, and its CONNACK says session present 1.",
        True, "requests and replies to a cluster controller that is restarting are not lost",
        "3.1.1 section 3.1.2.4, section 3.2.2.2 [MQTT-3.2.2-2]",
    ),
    BrokerProperty(
        "clean-session-discards", "clean session discards",
        "A CONNECT with clean session 1 discards the client's previous session and what was queued for it "
        "(session present 0, nothing delivered), and the clean session itself ends with its connection.",
        True, "a cluster controller that starts afresh gets nothing of a previous incarnation",
        "3.1.1 section 3.1.2.4 [MQTT-3.1.2-6], section 3.2.2.2 [MQTT-3.2.2-1]",
    ),
    BrokerProperty(
        "takeover", "session takeover",
        "A second CONNECT with a connected client's id closes the old connection, and the new one "
        "receives what is published to the session's subscriptions.",
        True, "a restarted cluster controller takes its session over from a connection not yet seen dead",
        "3.1.1 section 3.1.4 [MQTT-3.1.4-2]",
    ),
    BrokerProperty(
        "acl-publish-denied", "publish outside the grants",
        "A PUBLISH to a topic the client may not publish to is acknowledged and dropped, or its connection "
        "is closed; nobody receives it.",
        True, "never delivered: a client cannot write into another controller's topics",
        "3.1.1 section 3.3.5 [MQTT-3.3.5-2], section 5.4.2",
    ),
    BrokerProperty(
        "acl-subscribe-denied", "subscribe outside the grants",
        "A SUBSCRIBE to a filter the client may not read is refused (SUBACK 0x80) or granted without "
        "anything outside the grants ever being delivered.",
        True, "never delivered: a client cannot read another controller's traffic",
        "3.1.1 section 3.9.3, section 5.4.2",
    ),
    BrokerProperty(
        "inflight-window", "in-flight window",
        "How many unacknowledged QoS 1 PUBLISHes the broker sends a subscriber that withholds its PUBACKs; "
        "what is beyond the window waits and is delivered after the acknowledgements, none dropped.",
        True, "a window above zero, and nothing dropped when it is full (a slow controller loses nothing)",
        "3.1.1 section 4.6 (in-flight messages), section 4.3.2",
    ),
    BrokerProperty(
        "ordering", "per-topic ordering",
        "QoS 1 messages of one publisher to one topic arrive in the order they were published.",
        True, "messages of one sender to one controller arrive in order",
        "3.1.1 section 4.6 [MQTT-4.6.0-6]",
    ),
    BrokerProperty(
        "qos0-delivery", "QoS 0 delivered at QoS 0",
        "A QoS 0 PUBLISH to a topic a subscriber holds at QoS 1 is delivered at QoS 0: the lower of the "
        "published and the granted QoS.",
        True, "a best-effort message goes out at QoS 0 (joynr's MqttMessagingStub) and is never redelivered",
        "3.1.1 section 3.8.4 [MQTT-3.8.4-6]",
    ),
    BrokerProperty(
        "publisher-gone", "delivery after the publisher left",
        "QoS 1 messages a publisher had acknowledged (PUBACK) are delivered to the subscriber even when the "
        "publisher disconnects right after its last PUBACK.",
        True, "a reply a cluster controller handed over before it stopped or crashed still arrives",
        "3.1.1 section 4.3.2 [MQTT-4.3.2-2] (the PUBACK accepts ownership of the message)",
    ),
    BrokerProperty(
        "retained", "retained message",
        "A retained message is delivered to a subscriber that subscribes later, with RETAIN set.",
        False, "joynr does not publish retained messages; informational",
        "3.1.1 section 3.3.1.3 [MQTT-3.3.1-6]",
    ),
    BrokerProperty(
        "persistence", "persistence across a broker restart",
        "A persistent session and a QoS 1 message queued for it survive a broker crash (SIGKILL) and start.",
        False, "joynr does not require it (its own outbox re-sends); informational",
        "3.1.1 section 4.1 (not required across a Server restart)",
    ),
)

BY_ID: dict[str, BrokerProperty] = {p.id: p for p in PROPERTIES}

DECLARED: dict[str, dict[str, Outcome]] = {
    # amqtt 0.12.1 as brokers.amqtt_broker runs it: every client logs in, so sessions are
    # persistent; they live in its process's memory only.
    "amqtt": {
        "qos1-redelivery": Outcome(True, "DUP=1"),
        "offline-queue": Outcome(True, "3 of 3, session present 1"),
        "clean-session-discards": Outcome(True, "session present 0, nothing delivered"),
        "takeover": Outcome(True, "old connection closed, new one receives"),
        "acl-publish-denied": Outcome(True, "acknowledged and dropped"),
        "acl-subscribe-denied": Outcome(True, "SUBACK 0x80"),
        "inflight-window": Outcome(True, "window 50 or more, none held back"),
        "ordering": Outcome(True, "50 in order"),
        "qos0-delivery": Outcome(True, "delivered at QoS 0"),
        "publisher-gone": Outcome(True, "500 of 500"),
        "retained": Outcome(True, "RETAIN=1"),
        "persistence": Outcome(False, "session present 0 after the restart"),  # sessions live in memory
    },
    # Mosquitto 2.0 with brokers.mosquitto_config: max_queued_messages 0, persistence saved
    # after every counted change (autosave 1).
    "mosquitto": {
        "qos1-redelivery": Outcome(True, "DUP=1"),
        "offline-queue": Outcome(True, "3 of 3, session present 1"),
        "clean-session-discards": Outcome(True, "session present 0, nothing delivered"),
        "takeover": Outcome(True, "old connection closed, new one receives"),
        # With max_queued_messages 0, Mosquitto 2.0.11 sends the PUBACK of a denied QoS 1
        # publish and then closes the connection (its quota check counts every packet).
        "acl-publish-denied": Outcome(True, "acknowledged, then disconnected"),
        "acl-subscribe-denied": Outcome(True, "granted, nothing delivered"),
        "inflight-window": Outcome(True, "window 20"),
        "ordering": Outcome(True, "50 in order"),
        "qos0-delivery": Outcome(True, "delivered at QoS 0"),
        "publisher-gone": Outcome(True, "500 of 500"),
        "retained": Outcome(True, "RETAIN=1"),
        "persistence": Outcome(True, "session and message kept"),
    },
    # The memory network's broker (joynr_sim.network.mqtt_broker), measured on a loopback
    # port (joynr_sim.network.mqtt_listener) by the same suite and clients. It keeps
    # Mosquitto's semantics, so every outcome is Mosquitto's, in Mosquitto's words; only
    # the reason differs for persistence: nothing it holds is ever lost (there is no save
    # to wait for), where Mosquitto keeps it by saving after every change.
    "memory": {
        "qos1-redelivery": Outcome(True, "DUP=1"),
        "offline-queue": Outcome(True, "3 of 3, session present 1"),
        "clean-session-discards": Outcome(True, "session present 0, nothing delivered"),
        "takeover": Outcome(True, "old connection closed, new one receives"),
        "acl-publish-denied": Outcome(True, "acknowledged, then disconnected"),
        "acl-subscribe-denied": Outcome(True, "granted, nothing delivered"),
        "inflight-window": Outcome(True, "window 20"),
        "ordering": Outcome(True, "50 in order"),
        "qos0-delivery": Outcome(True, "delivered at QoS 0"),
        "publisher-gone": Outcome(True, "500 of 500"),
        "retained": Outcome(True, "RETAIN=1"),
        "persistence": Outcome(True, "session and message kept"),
    },
    "external": {p.id: Outcome(None, "unknown: the broker's own configuration") for p in PROPERTIES},
}


def declared(kind: str) -> dict[str, dict[str, Any]]:
    """What ``run.json`` records as ``broker_properties`` for a broker ``kind`` (``amqtt``,
    ``mosquitto``, ``memory``, ``external``): per property id ``kept`` (true, false or
    null), ``how`` and ``relied_on``. An unknown kind gets every property unknown."""
    outcomes = DECLARED.get(kind, DECLARED["external"])
    return {p.id: {"kept": outcomes[p.id].kept, "how": outcomes[p.id].how, "relied_on": p.relied_on}
            for p in PROPERTIES}
