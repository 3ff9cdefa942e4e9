"""The MQTT topics a runtime publishes to, in the layout the brokers' grants allow
(``brokers.access``): a unicast goes to ``<topic>/low`` where ``<topic>`` is one topic level
(``joynr_sim.core.limits.check_unicast_topic``), a multicast to
``joynr-sim-multicast/<provider>/<broadcast>[/<partition>...]``.

A publish outside the grants is never attempted: Mosquitto (2.0.11, MQTT 3.1.1) closes the
connection of a client that publishes where it may not, at QoS 0 and 1 alike (at QoS 1 after
its PUBACK), so every such publish would cost a reconnect.
"""

from __future__ import annotations

from ..core.limits import DEFAULT_LIMITS, InvalidField, WireLimits, check_topic, check_unicast_topic, preview

# joynr's multicast topic prefix (joynr.messaging.mqtt.topicprefix.multicast), the one the
# brokers' grants allow (brokers.access.MULTICAST_PREFIX).
MULTICAST_TOPIC_PREFIX = "joynr-sim-multicast/"
UNICAST_LEVEL = "low"  # brokers.access.UNICAST_LEVEL


def unicast_topic(topic: str) -> str:
    return f"{topic}/{UNICAST_LEVEL}"


def multicast_topic(multicast_topic_: str) -> str:
    """The MQTT topic (or filter) of a multicast: the prefix, then the multicast id's topic."""
    return MULTICAST_TOPIC_PREFIX + multicast_topic_


def check_publish_topic(topic: str, field: str, limits: WireLimits = DEFAULT_LIMITS) -> str:
    """A topic the grants let a client publish to: a multicast topic (the prefix, then at
    least a provider and a broadcast level) or ``<one level>/low``; else InvalidField
    naming ``field`` (the unicast target's own error when that is what is wrong)."""
    check_topic(topic, field, limits)
    if topic.startswith(MULTICAST_TOPIC_PREFIX) and topic.count("/") >= 2:
        return topic
    target, sep, level = topic.rpartition("/")
    if not sep or level != UNICAST_LEVEL:
        raise InvalidField(field, f"{preview(topic)} is neither <topic>/{UNICAST_LEVEL} nor a multicast topic")
    check_unicast_topic(target, field, limits)
    return topic
