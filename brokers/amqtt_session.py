"""The broker side of one amqtt connection, its QoS 1 deliveries kept in the session:
``SessionHandler`` and ``store_outgoing``.

amqtt 0.12.1 waited at most 5 s for a QoS 1 message's PUBACK and dropped the message then,
or when the connection ended; here it stays in ``session.inflight_out`` until its PUBACK,
however late, and the resume sends it again with DUP 1 (MQTT 3.1.1 sections 4.4, 3.3.1.1).
Nothing waits for a PUBACK, so a client that never acknowledges holds up nothing.

Separate from the broker (``brokers.amqtt_admitting``) because it is one connection's
protocol handler, amqtt's ``BrokerProtocolHandler`` with overrides; the broker decides where
a message goes and when a connection is live, the handler how it is written and settled.
"""

from __future__ import annotations

import asyncio
import itertools
from typing import Any

from amqtt.errors import AMQTTError
from amqtt.mqtt.constants import QOS_1, QOS_2
from amqtt.mqtt.protocol.broker_handler import BrokerProtocolHandler
from amqtt.mqtt.protocol.handler import ProtocolHandler
from amqtt.mqtt.puback import PubackPacket
from amqtt.session import OUTGOING, OutgoingApplicationMessage, Session


def store_outgoing(session: Session, topic: str, data: bytes | bytearray) -> OutgoingApplicationMessage:
    """A QoS 1 message for the session's client, put in its in-flight messages under a free
    packet id (AMQTTError when all 65535 are in flight)."""
    message = OutgoingApplicationMessage(session.next_packet_id, topic, QOS_1, data, retain=False)
    session.inflight_out[message.packet_id] = message
    return message


class SessionHandler(BrokerProtocolHandler):
    """amqtt 0.12.1's broker side of one connection, its QoS 1 deliveries kept in the session.

    An outgoing QoS 1 message is in ``session.inflight_out`` before its PUBLISH is written
    and leaves it only with its PUBACK; nothing waits for that PUBACK. ``live``: the session
    has been resumed on this connection (``resumed``, set by the broker) and the connection
    is neither closed nor taken over, so new messages may be written to it.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.resumed = False
        self.closed = False
        self.session_moved = False  # taken over by a connection that goes on with the session

    @property
    def live(self) -> bool:
        return self.resumed and not self.closed

    async def start(self) -> None:
        # amqtt 0.12.1 creates the disconnect waiter after the reader has started and the
        # retries are sent, so a connection that closed meanwhile was never seen closed (the
        # session stayed connected for good). Created first, no close is missed.
        self._disconnect_waiter = asyncio.get_running_loop().create_future()
        await ProtocolHandler.start(self)

    async def stop(self) -> None:
        self.closed = True
        await super().stop()

    async def handle_connection_closed(self) -> None:
        self.closed = True
        await super().handle_connection_closed()

    def abort(self) -> None:
        """Close the connection now, unsent bytes dropped (a takeover: the client may have
        stopped reading); the reader then ends as after any lost connection."""
        self.closed = True
        # amqtt 0.12.1's StreamWriterAdapter holds the asyncio StreamWriter as _writer.
        transport = getattr(getattr(self.writer, "_writer", None), "transport", None)
        if transport is not None:
            transport.abort()
        elif self._reader_task is not None:
            self._reader_task.cancel()

    async def _handle_qos1_message_flow(self, app_message: Any) -> None:
        if app_message.direction != OUTGOING:
            await super()._handle_qos1_message_flow(app_message)
            return
        # MQTT 3.1.1 section 4.4: the message stays in the session until its PUBACK
        # (handle_puback) and is sent again on the resume; amqtt 0.12.1 waited at most 5 s
        # for the PUBACK here and then, or when the wait was cancelled as the connection
        # ended, dropped it. Section 3.3.1.1: DUP 1 on every sending after the first.
        session = self.session
        if session is None or app_message.packet_id is None:
            raise AMQTTError("an outgoing QoS 1 message needs a session and a packet id")
        session.inflight_out.setdefault(app_message.packet_id, app_message)
        packet = app_message.build_publish_packet(dup=app_message.publish_packet is not None)
        app_message.publish_packet = packet
        await self._send_packet(packet)

    async def handle_puback(self, puback: PubackPacket) -> None:
        # The PUBACK settles the message (amqtt 0.12.1 only woke a waiter, if one still waited).
        header, session = puback.variable_header, self.session
        message = session.inflight_out.get(header.packet_id) if header and session else None
        if message is None or message.qos != QOS_1:
            await super().handle_puback(puback)
            return
        del session.inflight_out[header.packet_id]
        message.puback_packet = puback

    async def send_stored(self, message: OutgoingApplicationMessage) -> None:
        """Write a QoS 1 message that is in the session's in-flight messages; one acknowledged
        meanwhile is not written, and on a closed connection it waits there for the resume."""
        session = self.session
        if self.closed or session is None or session.inflight_out.get(message.packet_id or 0) is not message:
            return
        try:
            await self._handle_qos1_message_flow(message)
        except Exception as exc:
            self.logger.warning(f"closing the connection: writing packet {message.packet_id} failed: {exc!r}")
            self.abort()

    async def _retry_deliveries(self) -> None:
        # MQTT 3.1.1 sections 4.4 and 4.6: the QoS 1 messages in flight are sent again one
        # after the other, in the order first sent (amqtt 0.12.1 sent every message in a
        # task of its own and waited up to 10 s for each acknowledgement). QoS 2 ones as amqtt.
        session = self.session
        if session is None:
            raise AMQTTError("Session is not initialized.")
        for message in list(session.inflight_out.values()):
            if message.qos == QOS_1:
                await self.send_stored(message)
        qos2 = [m for m in itertools.chain(session.inflight_in.values(), session.inflight_out.values())
                if m.qos == QOS_2]
        if qos2:
            await asyncio.wait([asyncio.create_task(asyncio.wait_for(self._handle_message_flow(m), 10))
                                for m in qos2])
