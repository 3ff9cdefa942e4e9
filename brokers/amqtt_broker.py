"""One embedded amqtt broker as its own OS process: ``python -m brokers.amqtt_broker``.

    python -m brokers.amqtt_broker --gbid joynrdefaultgbid --port 18830 [--host 127.0.0.1]
        [--exit-on-stdin-eof]

The secret every client's password derives from comes from the environment variable
``JOYNR_SIM_BROKER_SECRET`` (kept off the command line, which any local user can read).
Who may log in and which topics each login may use is ``brokers.access``: a client logs in
as itself (username = client id) with its own password, subscribes within its own prefix
and publishes to unicast topics; the administrative user may do anything.

Anonymous access is off on purpose: amqtt 0.12 marks every session it lets in through its
anonymous plugin as anonymous and deletes it about a second after the client disconnects,
which would lose persistent sessions and their queued messages.

amqtt 0.12.1 touches the session of a CONNECT's client id before it authenticates: a clean
session deletes the old session's subscriptions (its connected owner goes deaf without
noticing), a persistent one takes the session over, and only then is the CONNECT refused.
So ``AdmittingBroker`` checks the login (and the will's topic, which amqtt never checks)
as soon as the CONNECT is read, and refuses it before any of that.

amqtt 0.12.1 (the version pyproject.toml pins) breaks what MQTT 3.1.1 promises a session;
``SessionHandler`` and the overrides of ``AdmittingBroker``, each amqtt 0.12.1's own code
with the change its comment names, keep it:

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
  starts a new session (amqtt took the clean one up, session present 1, within a second).

QoS 2 keeps amqtt's own flow (joynr uses QoS 0 and 1): dropped after 5 s without PUBREC or
PUBCOMP. Not kept either: a connection silent beyond its keep-alive is never closed (amqtt
ignores the read timeout; a dead peer is seen only when its socket closes, or taken over).

Longer than 400 lines because the overrides copy amqtt's methods whole: amqtt offers no
smaller hook for any of these changes.

amqtt keeps sessions in memory only: a clean stop or a crash of this process loses every
session, subscription and queued message.

SIGTERM or SIGINT shut the broker down cleanly (exit 0). With ``--exit-on-stdin-eof`` the
broker also shuts down when its standard input reaches end of file, i.e. when the process
that started it has gone, so no broker outlives its owner even after a SIGKILL of it.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import logging
import os
import signal
import sys
from collections import deque
from dataclasses import dataclass
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
from amqtt.mqtt.protocol.handler import ProtocolHandler
from amqtt.mqtt.puback import PubackPacket
from amqtt.plugins.base import BaseAuthPlugin, BaseTopicPlugin
from amqtt.session import OUTGOING, OutgoingApplicationMessage, Session
from amqtt.utils import format_client_message, gen_client_id

from brokers import access
from brokers.broker_set import SECRET_ENV

log = logging.getLogger("joynr_sim.amqtt_broker")


def refusal(secret: str, session: Session) -> str | None:
    """Why a CONNECT is refused, or None: the login, then the will's topic."""
    why = access.admitted(secret, session.username, session.password, session.client_id)
    if why is None and session.will_flag and not access.may_publish(session.username or "", session.will_topic or ""):
        why = f"the will's topic {session.will_topic!r} is not one the user may publish to"
    return why


class ClientAuthPlugin(BaseAuthPlugin):
    """amqtt's own authentication step: the check ``AdmittingBroker`` already made.

    It never marks a session anonymous (as amqtt's AnonymousAuthPlugin does), so persistent
    sessions (clean_session false) keep their subscriptions and offline queue.
    """

    @dataclass
    class Config:
        secret: str = ""

    async def authenticate(self, *, session: Session) -> bool:
        return refusal(self.config.secret, session) is None


class TopicAclPlugin(BaseTopicPlugin):
    """The grants of ``brokers.access``. amqtt answers a refused SUBSCRIBE with return code
    0x80, acknowledges a refused PUBLISH and drops it, and skips a subscriber that may not
    receive a topic."""

    async def topic_filtering(
        self, *, session: Session | None = None, topic: str | None = None, action: Action | None = None
    ) -> bool:
        if session is None or not session.username or topic is None:
            return False
        if action == Action.SUBSCRIBE:
            return access.may_subscribe(session.username, topic)
        if action == Action.PUBLISH:
            return access.may_publish(session.username, topic)
        if action == Action.RECEIVE:
            return access.may_receive(session.username, topic)
        return False


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
                qos = broadcast.get("qos", sub_qos)
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


def broker_config(host: str, port: int, secret: str) -> dict[str, object]:
    # An explicit plugins dict replaces amqtt's defaults (anonymous auth, $SYS, packet logs).
    return {
        "listeners": {"default": {"type": "tcp", "bind": f"{host}:{port}"}},
        "plugins": {
            f"{__name__}.ClientAuthPlugin": {"secret": secret},
            f"{__name__}.TopicAclPlugin": {},
        },
    }


async def _watch_stdin(stop: asyncio.Event) -> None:
    """End of file on stdin (a pipe from the owner) means the owner has gone."""
    reader = asyncio.StreamReader()
    loop = asyncio.get_running_loop()
    transport, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    try:
        while await reader.read(4096):
            pass
    except OSError:
        pass
    finally:
        transport.close()
    stop.set()


async def serve(host: str, port: int, gbid: str, secret: str, exit_on_stdin_eof: bool) -> int:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    watcher = asyncio.create_task(_watch_stdin(stop)) if exit_on_stdin_eof else None

    broker = AdmittingBroker(broker_config(host, port, secret), secret)  # needs the running loop
    try:
        await broker.start()
    except Exception as exc:  # bind errors arrive wrapped in BrokerError
        log.error("gbid=%s: cannot listen on %s:%d: %s", gbid, host, port, exc)
        return 2
    log.warning("gbid=%s: amqtt broker listening on %s:%d (pid %d)", gbid, host, port, os.getpid())
    await stop.wait()
    log.warning("gbid=%s: shutting down", gbid)
    await broker.shutdown()
    if watcher is not None:
        watcher.cancel()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m brokers.amqtt_broker", description=__doc__.split("\n\n")[0])
    parser.add_argument("--gbid", required=True, help="GBID this broker serves (for logs)")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--exit-on-stdin-eof", action="store_true")
    args = parser.parse_args(argv)
    if not 0 < args.port < 65536:
        parser.error(f"--port: must be 1..65535, got {args.port}")
    secret = os.environ.get(SECRET_ENV, "")
    if not secret:
        parser.error(f"{SECRET_ENV}: must be set to the secret the clients' passwords derive from")

    logging.basicConfig(
        level=logging.WARNING,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    return asyncio.run(serve(args.host, args.port, args.gbid, secret, args.exit_on_stdin_eof))


if __name__ == "__main__":
    sys.exit(main())
