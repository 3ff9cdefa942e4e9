"""A hostile local process for the flood tests: publishes N valid requests for participants
nobody knows, at QoS 1, from one sender, as fast as its broker takes them, then prints how
long that took. Its last message, ``flood-end``, comes from another sender (not held to the
flood's share): one publisher's messages on one topic arrive in order, so once the cluster
controller has received it, it has taken every message of the flood. Run as a separate
process so the flood does not share the runner's CPU.

    python flood_publisher.py HOST PORT USER PASSWORD TOPIC N SENDER EXPIRY_MS
"""

from __future__ import annotations

import sys
import time

import paho.mqtt.client as paho
from paho.mqtt.enums import CallbackAPIVersion

from joynr_sim.core.address import MqttAddress
from joynr_sim.core.message import REQUEST, JoynrMessage, encode
from joynr_sim.runtime.participants import REQUEST_REPLY_ID, encode_request


def main(host: str, port: str, user: str, password: str, topic: str, n: str, sender: str, expiry_ms: str) -> None:
    client = paho.Client(CallbackAPIVersion.VERSION2, client_id=user, protocol=paho.MQTTv311)
    client.username_pw_set(user, password)
    client.max_inflight_messages_set(500)
    client.max_queued_messages_set(0)
    client.connect(host, int(port))
    client.loop_start()
    started = time.monotonic()
    payload = encode_request("echo", ["x"])
    sent = []
    for i in range(int(n)):
        msg = JoynrMessage(REQUEST, sender, f"nobody-{i}", int(expiry_ms), payload,
                           reply_to=MqttAddress("gbid1", user), custom_headers=((REQUEST_REPLY_ID, f"f{i}"),),
                           id=f"flood-{i}")
        sent.append(client.publish(topic, encode(msg), qos=1))
    end = JoynrMessage(REQUEST, "flood-end-sender", "nobody-at-the-end", int(expiry_ms), payload,
                       reply_to=MqttAddress("gbid1", user), id="flood-end")
    sent.append(client.publish(topic, encode(end), qos=1))
    for info in sent:
        info.wait_for_publish(300)
    print(f"published {n} in {time.monotonic() - started:.1f} s", flush=True)
    client.disconnect()
    client.loop_stop()


if __name__ == "__main__":
    main(*sys.argv[1:])
