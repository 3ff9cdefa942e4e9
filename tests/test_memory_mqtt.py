"""The memory network's MQTT broker and client together: logins, delivery and PUBACKs,
persistent sessions, redelivery with DUP, takeover, the in-flight window, the grants, a
broker crash and the keep-alive, in virtual time."""

from __future__ import annotations

import asyncio

import pytest

from joynr_sim.network import virtual_loop
from joynr_sim.network.memory import MemoryNetwork
from joynr_sim.network.mqtt_broker import INFLIGHT_WINDOW
from joynr_sim.transport.mqtt import KEEPALIVE_S, RECONNECT_MAX_DELAY_S, RECONNECT_MIN_DELAY_S, MqttConnectError
from joynr_sim.transport.mqtt_topics import multicast_topic, unicast_topic

GBID = "gbid-a"
SETTLE_S = 0.01  # far beyond the network's latency of a few hundred microseconds, below any backoff


class Node:
    """A memory MQTT connection with recording callbacks; acknowledges what it receives
    unless told not to. Every packet it receives is recorded too (DUP is not in its
    interface)."""

    def __init__(self, network: MemoryNetwork, client_id: str, *, ack: bool = True,
                 runtime_id: str | None = None, credentials: tuple[str, str] | None = None) -> None:
        self.loop = asyncio.get_running_loop()
        self.messages: list[bytes] = []
        self.deliveries: list = []
        self.published: list[int] = []
        self.connects: list[tuple[float, bool]] = []
        self.disconnects: list[float] = []
        self.packets: list[tuple] = []
        self.ack = ack
        self.conn = network.mqtt_connection(
            runtime_id=runtime_id or client_id, gbid=GBID, client_id=client_id, topic=client_id,
            credentials=credentials or network.brokers.credentials(client_id, GBID),
            on_message=self._message,
            on_connected=lambda conn, present: self.connects.append((self.loop.time(), present)),
            on_disconnected=lambda conn: self.disconnects.append(self.loop.time()),
            on_published=lambda conn, mid: self.published.append(mid),
        )
        deliver = self.conn.received

        def spy(packet: tuple) -> None:
            self.packets.append(packet)
            deliver(packet)

        self.conn.received = spy  # type: ignore[method-assign]

    def _message(self, conn, payload: bytes, delivery) -> None:
        self.messages.append(payload)
        self.deliveries.append(delivery)
        if self.ack:
            conn.ack(delivery)

    async def connect(self) -> Node:
        self.conn.start()
        await self.conn.wait_connected(5)
        return self

    def publishes(self) -> list[tuple]:
        """The PUBLISH packets received: (packet id, payload, DUP)."""
        return [(p[1], p[3], p[5]) for p in self.packets if p[0] == "publish"]


async def network() -> MemoryNetwork:
    net = MemoryNetwork([GBID], seed=11)
    await net.brokers.start()
    return net


def test_a_client_connects_with_the_brokers_credentials_and_subscribes_to_its_topic() -> None:
    async def main() -> None:
        net = await network()
        node = await Node(net, "cc1").connect()
        assert len(node.connects) == 1 and node.connects[0][1] is False  # no session yet
        assert node.connects[0][0] < SETTLE_S
        session = net.brokers.broker(GBID).sessions["cc1"]
        assert list(session.subscriptions) == ["cc1/#"] and not session.clean
        await node.conn.stop()

    virtual_loop.run(main())


def test_a_wrong_password_is_refused_with_a_clear_connect_error_at_once() -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        net = await network()
        node = Node(net, "cc1", credentials=("cc1", "not-the-password"))
        node.conn.start()
        with pytest.raises(MqttConnectError) as refused:
            await node.conn.wait_connected(5)
        assert loop.time() < 1  # refused by the CONNACK, not given up after the timeout
        assert refused.value.gbid == GBID
        assert "refused the CONNECT" in str(refused.value) and GBID in str(refused.value)
        assert node.connects == [] and not node.conn.connected.is_set()
        assert net.brokers.broker(GBID).sessions == {}
        await node.conn.stop()

    virtual_loop.run(main())


def test_a_refused_login_is_worded_as_on_the_real_connection() -> None:
    async def main() -> None:
        net = await network()
        node = Node(net, "cc1", credentials=("cc1", "not-the-password"))
        node.conn.start()
        with pytest.raises(MqttConnectError) as refused:
            await node.conn.wait_connected(5)
        await node.conn.stop()
        assert refused.value.reason == "the broker refused the CONNECT: Not authorized"

    virtual_loop.run(main())


def test_a_publish_is_delivered_acknowledged_and_reported_published() -> None:
    async def main() -> None:
        net = await network()
        sender, receiver = await Node(net, "cc1").connect(), await Node(net, "cc2").connect()
        mid = sender.conn.publish(unicast_topic("cc2"), b"hello")
        await asyncio.sleep(SETTLE_S)
        assert receiver.messages == [b"hello"]
        assert receiver.deliveries[0].qos == 1 and receiver.deliveries[0].mid > 0
        assert sender.published == [mid] and sender.messages == []
        assert net.brokers.broker(GBID).sessions["cc2"].inflight == {}  # the receiver's PUBACK came
        topic = multicast_topic("provider/broadcast")
        receiver.conn.subscribe_multicast(topic)
        await asyncio.sleep(SETTLE_S)
        sender.conn.publish(topic, b"to all")
        await asyncio.sleep(SETTLE_S)
        assert receiver.messages == [b"hello", b"to all"]
        receiver.conn.unsubscribe_multicast(topic)
        await asyncio.sleep(SETTLE_S)
        sender.conn.publish(topic, b"to nobody")
        await asyncio.sleep(SETTLE_S)
        assert receiver.messages == [b"hello", b"to all"]

    virtual_loop.run(main())


def test_a_qos_0_publish_is_delivered_at_qos_0_never_queued_and_refused_without_a_connection() -> None:
    # paho's and Mosquitto's: a QoS 0 message goes out on the open socket or not at all, is
    # delivered at QoS 0 to a QoS 1 subscription and kept for no session that is away.
    async def main() -> None:
        net = await network()
        sender, receiver = await Node(net, "cc1").connect(), await Node(net, "cc2").connect()
        sender.conn.publish(unicast_topic("cc2"), b"best effort", 0)
        await asyncio.sleep(SETTLE_S)
        assert receiver.messages == [b"best effort"] and receiver.deliveries[0].qos == 0
        assert sender.published == [] and net.brokers.broker(GBID).sessions["cc2"].inflight == {}
        await receiver.conn.stop()
        sender.conn.publish(unicast_topic("cc2"), b"while away", 0)
        sender.conn.publish(unicast_topic("cc2"), b"kept", 1)
        await asyncio.sleep(SETTLE_S)
        back = await Node(net, "cc2").connect()
        await asyncio.sleep(SETTLE_S)
        assert back.messages == [b"kept"]
        await sender.conn.stop()
        with pytest.raises(ConnectionError, match="not currently connected"):
            sender.conn.publish(unicast_topic("cc2"), b"no socket", 0)

    virtual_loop.run(main())


def test_an_absent_clients_messages_are_queued_and_its_session_is_present_on_return() -> None:
    async def main() -> None:
        net = await network()
        sender, receiver = await Node(net, "cc1").connect(), await Node(net, "cc2").connect()
        await receiver.conn.stop()
        mids = [sender.conn.publish(unicast_topic("cc2"), b"%d" % i) for i in range(50)]
        await asyncio.sleep(SETTLE_S)
        assert sender.published == mids  # the broker took them for the absent client
        back = await Node(net, "cc2").connect()
        await asyncio.sleep(SETTLE_S)
        assert [present for _, present in back.connects] == [True]
        assert back.messages == [b"%d" % i for i in range(50)]

    virtual_loop.run(main())


def test_an_unacknowledged_message_comes_again_with_dup_after_the_connection_dropped() -> None:
    async def main() -> None:
        net = await network()
        sender, receiver = await Node(net, "cc1").connect(), await Node(net, "cc2", ack=False).connect()
        sender.conn.publish(unicast_topic("cc2"), b"unacked")
        await asyncio.sleep(SETTLE_S)
        [(pid, payload, dup)] = receiver.publishes()
        assert (payload, dup) == (b"unacked", False)
        receiver.conn.drop()
        await asyncio.sleep(RECONNECT_MIN_DELAY_S + SETTLE_S)
        assert len(receiver.disconnects) == 1
        assert [present for _, present in receiver.connects] == [False, True]
        assert receiver.publishes() == [(pid, b"unacked", False), (pid, b"unacked", True)]
        receiver.conn.ack(receiver.deliveries[-1])
        await asyncio.sleep(SETTLE_S)
        receiver.conn.drop()
        await asyncio.sleep(RECONNECT_MIN_DELAY_S + SETTLE_S)
        assert len(receiver.connects) == 3 and len(receiver.publishes()) == 2  # acknowledged: gone

    virtual_loop.run(main())


def test_a_second_connect_with_a_connected_client_id_takes_the_session_over() -> None:
    async def main() -> None:
        net = await network()
        old = await Node(net, "cc2", ack=False).connect()
        sender = await Node(net, "cc1").connect()
        sender.conn.publish(unicast_topic("cc2"), b"pending")
        await asyncio.sleep(SETTLE_S)
        new = await Node(net, "cc2", runtime_id="cc2-again").connect()
        await asyncio.sleep(SETTLE_S)  # less than the old one's reconnect backoff
        assert len(old.disconnects) == 1 and not old.conn.connected.is_set()
        assert [present for _, present in new.connects] == [True]
        assert new.publishes()[0][1:] == (b"pending", True)  # the old one never acknowledged it
        session = net.brokers.broker(GBID).sessions["cc2"]
        assert session.connection is not None and session.connection.channel.client is new.conn
        await old.conn.stop()

    virtual_loop.run(main())


def test_at_most_twenty_unacknowledged_messages_are_in_flight_and_none_is_dropped() -> None:
    async def main() -> None:
        net = await network()
        sender, receiver = await Node(net, "cc1").connect(), await Node(net, "cc2", ack=False).connect()
        for i in range(30):
            sender.conn.publish(unicast_topic("cc2"), b"%d" % i)
        await asyncio.sleep(SETTLE_S)
        assert INFLIGHT_WINDOW == 20
        assert receiver.messages == [b"%d" % i for i in range(20)]
        assert len(sender.published) == 30  # the publisher is not held back
        receiver.conn.ack(receiver.deliveries[0])
        await asyncio.sleep(SETTLE_S)
        assert receiver.messages[20:] == [b"20"]
        for delivery in receiver.deliveries[1:]:
            receiver.conn.ack(delivery)
        await asyncio.sleep(SETTLE_S)
        assert receiver.messages == [b"%d" % i for i in range(21)] + [b"%d" % i for i in range(21, 30)]
        assert len(set(d.mid for d in receiver.deliveries[:20])) == 20  # distinct packet ids

    virtual_loop.run(main())


def test_a_publish_outside_the_grants_is_acknowledged_then_its_connection_closed() -> None:
    async def main() -> None:
        net = await network()
        sender, other = await Node(net, "cc1").connect(), await Node(net, "cc3").connect()
        mid = sender.conn.publish("cc3/high", b"not allowed")  # only <topic>/low may be written
        await asyncio.sleep(SETTLE_S)
        assert sender.published == [mid]
        assert len(sender.disconnects) == 1
        assert other.messages == []
        await asyncio.sleep(RECONNECT_MIN_DELAY_S + SETTLE_S)
        assert len(sender.connects) == 2  # reconnected, and the acknowledged publish not sent again
        sender.conn.publish(unicast_topic("cc3"), b"allowed")
        await asyncio.sleep(SETTLE_S)
        assert other.messages == [b"allowed"] and len(sender.disconnects) == 1

    virtual_loop.run(main())


def test_after_a_broker_crash_clients_back_off_reconnect_after_the_restart_and_keep_their_sessions() -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        net = await network()
        sender, receiver = await Node(net, "cc1").connect(), await Node(net, "cc2", ack=False).connect()
        sender.conn.publish(unicast_topic("cc2"), b"before the crash")
        await asyncio.sleep(SETTLE_S)
        attempts: list[float] = []
        connect = receiver.conn.link.connect

        def counted(open_, reset=None) -> None:
            attempts.append(loop.time())
            connect(open_, reset)

        receiver.conn.link.connect = counted  # type: ignore[method-assign]
        crashed = loop.time()
        await net.brokers.crash_broker(GBID)
        assert receiver.disconnects == [crashed] and sender.disconnects == [crashed]
        with pytest.raises(MqttConnectError, match="Connection refused"):
            await receiver.conn.wait_connected(0.5)
        await asyncio.sleep(5)
        gaps = [b - a for a, b in zip([crashed, *attempts], attempts)]
        # paho's backoff: the minimum, doubled after every refusal, up to the maximum; each
        # attempt also waits a network latency (well under the tolerance) to be refused.
        expected = [min(RECONNECT_MIN_DELAY_S * 2 ** i, RECONNECT_MAX_DELAY_S) for i in range(len(gaps))]
        assert expected[:6] == [0.05, 0.1, 0.2, 0.4, 0.8, 1.0]
        assert gaps == pytest.approx(expected, abs=1e-3)
        restarted = loop.time()
        await net.brokers.start_broker(GBID)
        # wait_connected would raise the last failed attempt at once, as the real one does.
        await asyncio.wait_for(receiver.conn.connected.wait(), RECONNECT_MAX_DELAY_S + SETTLE_S)
        await asyncio.wait_for(sender.conn.connected.wait(), RECONNECT_MAX_DELAY_S + SETTLE_S)
        assert restarted < receiver.connects[-1][0] <= restarted + RECONNECT_MAX_DELAY_S + SETTLE_S
        assert [present for _, present in receiver.connects] == [False, True]
        assert [present for _, present in sender.connects] == [False, True]
        await asyncio.sleep(SETTLE_S)
        assert [(p, dup) for _, p, dup in receiver.publishes()] == [
            (b"before the crash", False), (b"before the crash", True)]

    virtual_loop.run(main())


def test_a_quiet_connection_pings_and_stays_up_for_many_keepalive_periods() -> None:
    async def main() -> None:
        net = await network()
        node = await Node(net, "cc1").connect()
        await asyncio.sleep(10 * KEEPALIVE_S)
        assert node.disconnects == [] and len(node.connects) == 1
        assert sum(1 for p in node.packets if p[0] == "pingresp") >= 9

    virtual_loop.run(main())


def test_a_connection_quiet_after_one_packet_is_kept_alive() -> None:
    async def main() -> None:
        net = await network()
        node = await Node(net, "cc1").connect()
        await asyncio.sleep(10)
        node.conn.publish(unicast_topic("cc1"), b"once")  # then nothing more
        await asyncio.sleep(5 * KEEPALIVE_S)
        assert node.disconnects == []

    virtual_loop.run(main())


def test_the_clients_keepalive_gives_a_blackholed_connection_up_after_two_periods() -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        net = await network()
        node = await Node(net, "cc1").connect()
        await asyncio.sleep(1)
        await node.conn.link.blackhole()
        await asyncio.sleep(3 * KEEPALIVE_S)
        assert len(node.disconnects) == 1
        # PINGREQ after one quiet period, given up when its answer has not come a period later.
        assert 2 * KEEPALIVE_S - 1 <= node.disconnects[0] <= 2 * KEEPALIVE_S + 1
        assert loop.time() == pytest.approx(1 + 3 * KEEPALIVE_S, abs=0.01)  # after the connect's latency

    virtual_loop.run(main())


def test_a_partitioned_link_refuses_and_the_client_reconnects_after_the_heal() -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        net = await network()
        node = await Node(net, "cc1").connect()
        link = node.conn.link
        await link.partition()
        assert len(node.disconnects) == 1
        with pytest.raises(MqttConnectError, match="Connection refused"):
            await node.conn.wait_connected(1)
        await asyncio.sleep(10)
        healed = loop.time()
        await link.heal()
        await asyncio.wait_for(node.conn.connected.wait(), RECONNECT_MAX_DELAY_S + SETTLE_S)
        assert healed < node.connects[-1][0] <= healed + RECONNECT_MAX_DELAY_S + SETTLE_S
        assert [present for _, present in node.connects] == [False, True]

    virtual_loop.run(main())


def test_a_partition_also_ends_a_connect_that_hangs_in_a_blackhole() -> None:
    async def main() -> None:
        net = await network()
        node = Node(net, "cc1")
        await node.conn.link.blackhole()
        node.conn.start()
        await asyncio.sleep(1)  # the connect hangs
        await node.conn.link.partition()
        with pytest.raises(MqttConnectError, match="Connection refused"):
            await node.conn.wait_connected(5)

    virtual_loop.run(main())
