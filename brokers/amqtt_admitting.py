"""``AdmittingBroker``: amqtt 0.12.1's Broker, refusing a CONNECT before it touches any
session and keeping what MQTT 3.1.1 promises a session.

amqtt 0.12.1 touches the session of a CONNECT's client id before it authenticates: a clean
session deletes the old session's subscriptions (its connected owner goes deaf without
noticing), a persistent one takes the session over, and only then is the CONNECT refused.
So ``AdmittingBroker`` checks the login (and the will's topic, which amqtt never checks;
``brokers.amqtt_access.refusal``) as soon as the CONNECT is read, and refuses it before any
of that.

amqtt 0.12.1 (the version pyproject.toml pins) breaks what MQTT 3.1.1 promises a session;
``SessionHandler`` (``brokers.amqtt_session``) and the overrides of ``AdmittingBroker``, each
amqtt 0.12.1's own code with the change its comment names, keep it:

- a QoS 1 message sent to a client stays in its session until the client's PUBACK, however
  late (amqtt dropped it after 5 s, and when the connection ended); the CONNECT that resumes
  the session gets it again with DUP 1, in the order first sent (sections 4.4, 3.3.1.1);
- then what was queued while the client was away, in order, with RETAIN 0 (3.3.1.3), then
  what is published after; nothing waits for a PUBACK, so a client that never acknowledges
  holds up nothing (amqtt waited for each PUBACK of the queue before serving the client);
- a message published to a connection the broker has not yet seen die is in the session, so
  the resume sends it again; once the connection is seen dead, messages are queued;
- a CONNECT with the client id of a connected client closes the old connection (3.1.4); a
  persistent session goes on with the new one, which gets the old one's in-flight messages
  with DUP 1, and the old one's end sends no will (as Mosquitto; amqtt marked the session
  disconnected, so the new connection received nothing, and sent the new connection's will);
- a clean session lasts as long as its connection (3.1.2.4): a persistent CONNECT after it
  starts a new session (amqtt took the clean one up, session present 1, within a second);
- a message is delivered at the lower of its published QoS and the subscription's (3.8.4):
  amqtt delivered a QoS 0 message at the subscription's QoS 1.

QoS 2 keeps amqtt's own flow (joynr uses QoS 0 and 1): dropped after 5 s without PUBREC or
PUBCOMP. Not kept either: a connection silent beyond its keep-alive is never closed (amqtt
ignores the read timeout; a dead peer is seen only when its socket closes, or taken over).

The overrides copy amqtt's methods whole (amqtt offers no smaller hook for these changes),
so the broker is a module of its own; the connection's side is ``brokers.amqtt_session``.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
from collections import deque
from typing import Any

from amqtt.adapters import ReaderAdapter, WriterAdapter
from amqtt.broker import Broker, Server
from amqtt.contexts import Action
from amqtt.errors import AMQTTError, BrokerError, MQTTError, NoDataError
from amqtt.events import BrokerEvents
from amqtt.mqtt.connack import NOT_AUTHORIZED, ConnackPacket
from amqtt.mqtt.constants import QOS_0, QOS_1, QOS_2
from amqtt.mqtt.disconnect import DisconnectPacket
from amqtt.mqtt.protocol.broker_handler import BrokerProtocolHandler
from amqtt.session import Session
from amqtt.utils import format_client_message, gen_client_id

from brokers.amqtt_access import refusal
from brokers.amqtt_session import SessionHandler, store_outgoing

# The QoS of the PUBLISH being routed, for the broadcast it makes (see _handle_message_delivery).
_PUBLISHED_QOS: contextvars.ContextVar[int | None] = contextvars.ContextVar("published_qos", default=None)


class AdmittingBroker(Broker):
    """An amqtt Broker that refuses a CONNECT before it touches any session, and keeps the
    session promises of the module's docstring.

    Each override is amqtt 0.12.1's own method (the version pyproject.toml pins) with the
    change its comment names; ``_initialize_client_session`` puts ``refusal`` between reading
    the CONNECT and looking up its client id's session: amqtt offers no hook there.
    """

    def __init__(self, config: dict[str, object], secret: str) -> None:
        super().__init__(config)
        self._secret = secret

    async def _initialize_client_session(
        self, reader: ReaderAdapter, writer: WriterAdapter, remote_address: str, remote_port: int
    ) -> tuple[BrokerProtocolHandler, Session]:
        where = format_client_message(address=remote_address, port=remote_port)
        try:
            handler, client_session = await SessionHandler.init_from_connect(reader, writer, self.plugins_manager)
        except AMQTTError as exc:
            self.logger.warning(f"[MQTT-3.1.0-1] {where}: Can't read first packet as CONNECT: {exc}")
            raise AMQTTError(exc) from exc
        except MQTTError as exc:
            self.logger.warning(f"Invalid connection from {where}")
            await writer.close()
            raise MQTTError(exc) from exc
        except NoDataError as exc:
            self.logger.error(f"No data from {where} : {exc}")
            raise AMQTTError(exc) from exc

        why = refusal(self._secret, client_session)
        if why is not None:
            await ConnackPacket.build(0, NOT_AUTHORIZED).to_stream(writer)
            await writer.close()
            # amqtt logs it ("Failed to initialize client session: ...") and drops the connection.
            raise AMQTTError(
                f"refused CONNECT from {where}: client id {client_session.client_id!r}, "
                f"user {client_session.username!r}: {why}"
            )

        # From here on amqtt 0.12.1's own code, but for the takeover (MQTT 3.1.1 section 3.1.4)
        # and a clean session, which a persistent CONNECT does not resume (section 3.1.2.4).
        client_id = client_session.client_id
        existing = self._sessions.get(client_id)[0] if client_id in self._sessions else None
        resumes = not client_session.clean_session and existing is not None and not existing.clean_session
        if client_id:
            self._take_over(client_id, continues=resumes)
        if client_session.clean_session:
            if client_id:
                await self._delete_session(client_id)
            else:
                client_session.client_id = gen_client_id()
            client_session.parent = 0
        elif existing is not None and resumes:
            # The new connection brings updated configuration and credentials.
            existing.will_flag = client_session.will_flag
            existing.will_message = client_session.will_message
            existing.will_topic = client_session.will_topic
            existing.will_qos = client_session.will_qos
            existing.keep_alive = client_session.keep_alive
            existing.username = client_session.username
            existing.password = client_session.password
            client_session = existing
            client_session.parent = 1
        else:
            if existing is not None:  # a clean session that has not yet been cleaned up
                await self._delete_session(existing.client_id or "")
            client_session.parent = 0

        timeout_disconnect_delay = self.config.get("timeout-disconnect-delay", 0)
        if client_session.keep_alive > 0 and isinstance(timeout_disconnect_delay, int):
            client_session.keep_alive += timeout_disconnect_delay
        return handler, client_session

    def _take_over(self, client_id: str, *, continues: bool) -> None:
        """MQTT 3.1.1 section 3.1.4 [MQTT-3.1.4-2]: a CONNECT with the client id of a connected
        client closes the existing connection. ``continues``: its session goes on with the new
        connection, so the old one's end neither marks it disconnected nor sends its will."""
        session, handler = self._sessions.get(client_id, (None, None))
        if session is None or not session.transitions.is_connected() or not isinstance(handler, SessionHandler):
            return
        self.logger.warning(f"Client {client_id} is already connected: closing its old connection")
        handler.session_moved = continues
        handler.abort()

    async def _handle_client_session(
        self,
        reader: ReaderAdapter,
        writer: WriterAdapter,
        client_session: Session,
        handler: BrokerProtocolHandler,
        server: Server,
        listener_name: str,
    ) -> None:
        # amqtt 0.12.1's own, but for the takeover (section 3.1.4): amqtt stopped the old
        # connection here and left its end to mark the session disconnected under the new one;
        # a connection that registered meanwhile (a third CONNECT) is closed too. And the
        # resume: in-flight messages, then the offline queue, then the client loop.
        authenticated = await self._authenticate(client_session, self.listeners_config[listener_name])
        client_id = client_session.client_id
        if client_id is None:
            raise BrokerError("Client ID was not correctly created/set.")
        current = self._sessions.get(client_id)
        if current is not None and current[1] is not handler:
            self._take_over(client_id, continues=current[0] is client_session)
        if not client_session.transitions.is_connected():  # else it goes on from a connection taken over
            client_session.transitions.connect()
        handler.attach(client_session, reader, writer)
        self._sessions[client_id] = (client_session, handler)

        await handler.mqtt_connack_authorize(authenticated)
        if not authenticated:
            await writer.close()
            return
        await self.plugins_manager.fire_event(
            BrokerEvents.CLIENT_CONNECTED, client_id=client_id, client_session=client_session
        )
        await handler.start()  # sends the in-flight messages again (SessionHandler._retry_deliveries)
        await self._publish_session_retained_messages(client_session)  # the offline queue; then live
        # amqtt's: the retained messages of every subscription's filter, at QoS 0.
        for topic in list(self._subscriptions):
            await self._publish_retained_messages_for_subscription((topic, QOS_0), client_session)
        await self._client_message_loop(client_session, handler)

    async def _client_message_loop(self, client_session: Session, handler: BrokerProtocolHandler) -> None:
        # amqtt 0.12.1's loop, but what the client published is routed to its end. amqtt
        # acknowledges a QoS 1 PUBLISH as it reads it and routes it later, from the session's
        # queue, here; at the end of the connection it stopped, and what was still queued
        # (and a message just taken from the queue) was never routed: lost with a clean
        # session, late and out of order with a persistent one. Mosquitto routes a message
        # before its PUBACK, which accepts ownership of it (section 4.3.2): what was
        # acknowledged is delivered, before the will.
        loop = asyncio.get_running_loop()
        disconnect = asyncio.ensure_future(handler.wait_disconnect())
        subscribe = asyncio.ensure_future(handler.get_next_pending_subscription())
        unsubscribe = asyncio.ensure_future(handler.get_next_pending_unsubscription())
        deliver = asyncio.ensure_future(handler.mqtt_deliver_next_message())
        try:
            while True:
                done, _ = await asyncio.wait([disconnect, subscribe, unsubscribe, deliver],
                                             return_when=asyncio.FIRST_COMPLETED)
                if subscribe in done:
                    await self._handle_subscription(client_session, handler, subscribe)
                    subscribe = asyncio.ensure_future(handler.get_next_pending_subscription())
                if unsubscribe in done:
                    await self._handle_unsubscription(client_session, handler, unsubscribe)
                    unsubscribe = asyncio.ensure_future(handler.get_next_pending_unsubscription())
                if deliver in done:
                    if not await self._handle_message_delivery(client_session, handler, deliver):
                        break  # a protocol violation: amqtt ends the client's loop
                    deliver = asyncio.ensure_future(handler.mqtt_deliver_next_message())
                if disconnect in done:
                    deliver.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await deliver
                    # Taken from the queue before the cancel reached it: routed first.
                    pending = [deliver.result()] if not deliver.cancelled() and deliver.result() else []
                    queue = client_session.delivered_message_queue
                    pending.extend(queue.get_nowait() for _ in range(queue.qsize()))
                    for message in pending:
                        read = loop.create_future()
                        read.set_result(message)
                        await self._handle_message_delivery(client_session, handler, read)
                    await self._handle_disconnect(client_session, handler, disconnect)
                    break
        except asyncio.CancelledError:
            pass  # amqtt's: a cancelled loop ends quietly
        finally:
            for waiter in (disconnect, subscribe, unsubscribe, deliver):
                waiter.cancel()
            await asyncio.gather(disconnect, subscribe, unsubscribe, deliver, return_exceptions=True)

    async def _publish_session_retained_messages(self, session: Session) -> None:
        # The offline queue, after the in-flight messages (section 4.6), in the order queued and
        # with RETAIN 0 (section 3.3.1.3 [MQTT-3.3.1-9]); what is published meanwhile is queued
        # too, so it follows. amqtt 0.12.1 sent them with RETAIN 1, each in a task of its own,
        # and waited for every PUBACK before serving the client. The connection is live once
        # the queue is empty. QoS 2: amqtt's flow, in the broadcast tasks, not waited for.
        handler = self._get_handler(session)
        if not isinstance(handler, SessionHandler) or handler.session is not session:
            await super()._publish_session_retained_messages(session)
            return
        queue = session.retained_messages
        while not handler.closed and not queue.empty():
            queued = queue.get_nowait()
            if queued.qos != QOS_1:
                self._tasks_queue.append(asyncio.ensure_future(
                    handler.mqtt_publish(queued.topic, queued.data, queued.qos, retain=False)))
                continue
            try:
                message = store_outgoing(session, queued.topic, queued.data)
            except AMQTTError as exc:
                self.logger.warning(f"{session.client_id}: queued message on {queued.topic} dropped: {exc}")
                continue
            await handler.send_stored(message)
        handler.resumed = True

    async def _handle_disconnect(
        self, client_session: Session, handler: BrokerProtocolHandler, disconnect_waiter: asyncio.Future[Any]
    ) -> None:
        # amqtt 0.12.1's own, but a connection taken over by one that goes on with its session
        # (section 3.1.4) leaves the session connected and sends no will: amqtt marked the
        # session disconnected under the new connection, which then received nothing.
        def moved() -> bool:
            return isinstance(handler, SessionHandler) and handler.session_moved

        result = disconnect_waiter.result()
        if not isinstance(result, DisconnectPacket) and client_session.will_flag and not moved():
            will = (client_session.will_topic, client_session.will_message, client_session.will_qos)
            await self._broadcast_message(client_session, *will)
            if client_session.will_retain:
                await self.retain_message(client_session, *will)
        await self._stop_handler(handler)
        if moved():
            return
        client_session.transitions.disconnect()
        await self.plugins_manager.fire_event(
            BrokerEvents.CLIENT_DISCONNECTED, client_id=client_session.client_id, client_session=client_session
        )

    async def _handle_message_delivery(self, client_session: Session, handler: BrokerProtocolHandler,
                                       wait_deliver: asyncio.Future[Any]) -> bool:
        # amqtt 0.12.1 broadcasts what a client published without its QoS, and delivers it at
        # each subscription's QoS: a QoS 0 message went out at QoS 1. The published QoS is
        # handed to _broadcast_message, which amqtt calls within this one, in this task.
        message = wait_deliver.result()
        token = _PUBLISHED_QOS.set(getattr(message, "qos", None))
        try:
            return await super()._handle_message_delivery(client_session, handler, wait_deliver)
        finally:
            _PUBLISHED_QOS.reset(token)

    async def _broadcast_message(self, session: Session | None, topic: str | None, data: bytes | bytearray | None,
                                 force_qos: int | None = None) -> None:
        # As amqtt 0.12.1's, with the QoS a client published at beside it: _run_broadcast
        # delivers at the lower of that and the subscription's (section 3.8.4 [MQTT-3.8.4-6]).
        broadcast: dict[str, Any] = {"session": session, "topic": topic, "data": data}
        if force_qos is not None:
            broadcast["qos"] = force_qos
        elif _PUBLISHED_QOS.get() is not None:
            broadcast["published_qos"] = _PUBLISHED_QOS.get()
        await self._broadcast_queue.put(broadcast)

    async def _run_broadcast(self, running_tasks: deque[asyncio.Task[Any]]) -> None:
        # amqtt 0.12.1's own but for where a message goes. QoS 1 to a live connection: into
        # the session's in-flight messages at once, in the order broadcast, then written by a
        # task, so a connection that dies first leaves it there for the resume (section 4.4).
        # QoS 1 or 2 to a session without a live connection (away, being resumed, closed but
        # not yet seen so, taken over): queued (amqtt queued only for a session marked
        # disconnected, and wrote to whatever connection the session had).
        broadcast = await self._broadcast_queue.get()
        topic, data = broadcast["topic"], broadcast["data"]
        for k_filter, subscriptions in list(self._subscriptions.items()):
            if not self._matches(topic, k_filter):
                continue
            for target_session, sub_qos in list(subscriptions):
                qos = broadcast.get("qos", min(sub_qos, broadcast.get("published_qos", sub_qos)))
                if not await self._topic_filtering(target_session, topic=topic, action=Action.RECEIVE):
                    self.logger.info(f"{target_session.client_id} not allowed to receive messages from TOPIC {topic}.")
                    continue
                handler = self._get_handler(target_session)
                own = handler if isinstance(handler, SessionHandler) and handler.session is target_session else None
                connected = target_session.transitions.state == "connected"
                if qos == QOS_1 and own is not None and own.live:
                    try:
                        message = store_outgoing(target_session, topic, data)
                    except AMQTTError as exc:
                        self.logger.warning(f"{target_session.client_id}: message on {topic} dropped: {exc}")
                        continue
                    running_tasks.append(asyncio.ensure_future(own.send_stored(message)))
                elif qos in (QOS_1, QOS_2) and not (own is not None and own.live) and (
                    connected or (not target_session.clean_session and not target_session.is_anonymous)
                ):
                    await self._retain_broadcast_message(broadcast, qos, target_session)
                elif connected and own is not None:  # QoS 0, QoS 2 to a live connection: amqtt's flow
                    running_tasks.append(asyncio.ensure_future(own.mqtt_publish(topic, data, qos, retain=False)))
