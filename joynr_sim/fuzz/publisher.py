"""The flood of ``insiders``, published from a process of its own so that it does not share
the simulation's CPU: N valid requests for participants nobody knows, at QoS 1, from one
sender, as fast as the broker takes them. Its last message comes from another sender (not
held to the flood's share) with the id ``<prefix>end``: one publisher's messages on one
topic arrive in order, so once the cluster controller has traced that one, it has taken
every message of the flood. WIRE: what the runtimes speak (``joynr_sim.wire.codecs``; left
out: the default wire).

    python -m joynr_sim.fuzz.publisher HOST PORT USER PASSWORD TOPIC N SENDER EXPIRY_MS PREFIX [WIRE]
"""

from __future__ import annotations

import sys
import time

import paho.mqtt.client as paho
from paho.mqtt.enums import CallbackAPIVersion

from ..core.address import MqttAddress
from ..core.message import REQUEST, REQUEST_REPLY_ID, JoynrMessage
from ..runtime.participants import encode_request
from ..wire.codecs import DEFAULT_WIRE, codec

PUBLISH_TIMEOUT_S = 300


def main(host: str, port: str, user: str, password: str, topic: str, n: str, sender: str, expiry_ms: str,
         prefix: str, wire: str = DEFAULT_WIRE) -> int:
    encode = codec(wire).encode
    client = paho.Client(CallbackAPIVersion.VERSION2, client_id=user, protocol=paho.MQTTv311)
    client.username_pw_set(user, password)
    client.max_inflight_messages_set(500)
    client.max_queued_messages_set(0)
    client.connect(host, int(port))
    client.loop_start()
    started = time.monotonic()
    payload = encode_request("echo", ["x"])
    reply_to = MqttAddress("gbid1", user)
    sent = []
    for i in range(int(n)):
        msg = JoynrMessage(REQUEST, sender, f"nobody-{i}", int(expiry_ms), payload, reply_to=reply_to,
                           custom_headers=((REQUEST_REPLY_ID, f"{prefix}{i}"),), id=f"{prefix}{i}")
        sent.append(client.publish(topic, encode(msg), qos=1))
    end = JoynrMessage(REQUEST, f"{sender}-end", "nobody-at-the-end", int(expiry_ms), payload, reply_to=reply_to,
                       custom_headers=((REQUEST_REPLY_ID, f"{prefix}end"),), id=f"{prefix}end")
    sent.append(client.publish(topic, encode(end), qos=1))
    for info in sent:
        info.wait_for_publish(PUBLISH_TIMEOUT_S)
    published = sum(info.is_published() for info in sent)
    print(f"published {published} of {len(sent)} in {time.monotonic() - started:.1f} s", flush=True)
    client.disconnect()
    client.loop_stop()
    return 0 if published == len(sent) else 1


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:]))
