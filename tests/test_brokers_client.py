"""The broker suite's own client: packets reach the socket from its network thread only,
so the order of publishes is the order on the wire (paho is not safe to write from two
threads at once)."""

from __future__ import annotations

import asyncio
import threading

from broker_helpers import BrokerFactory
from brokers.semantics import broker_set_target
from brokers.semantics_client import Session


async def test_only_the_network_thread_writes_to_the_socket(amqtt_brokers: BrokerFactory) -> None:
    brokers = await amqtt_brokers(["check"])
    target = broker_set_target(brokers, "check", asyncio.get_running_loop())

    def publish_from_the_caller() -> set[str]:
        session = Session(target, "writer")
        try:
            pub = session.client("pub")
            writers: set[str] = set()
            send = pub.paho._sock_send

            def recording_send(data: bytes) -> int:
                writers.add(threading.current_thread().name)
                return send(data)

            pub.paho._sock_send = recording_send  # the one place paho writes a packet
            infos = [pub.publish(f"{pub.client_id}/low", b"x", wait=False) for _ in range(50)]
            assert all(pub.acked(info) for info in infos)
            return writers
        finally:
            session.close()

    writers = await asyncio.to_thread(publish_from_the_caller)
    assert writers and all(name.startswith("mqtt-") for name in writers), writers
