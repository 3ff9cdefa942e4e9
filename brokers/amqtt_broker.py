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

amqtt keeps sessions in memory only: a clean stop or a crash of this process loses every
session, subscription and queued message.

SIGTERM or SIGINT shut the broker down cleanly (exit 0). With ``--exit-on-stdin-eof`` the
broker also shuts down when its standard input reaches end of file, i.e. when the process
that started it has gone, so no broker outlives its owner even after a SIGKILL of it.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys
from dataclasses import dataclass

from amqtt.adapters import ReaderAdapter, WriterAdapter
from amqtt.broker import Broker
from amqtt.contexts import Action
from amqtt.errors import AMQTTError, MQTTError, NoDataError
from amqtt.mqtt.connack import NOT_AUTHORIZED, ConnackPacket
from amqtt.mqtt.protocol.broker_handler import BrokerProtocolHandler
from amqtt.plugins.base import BaseAuthPlugin, BaseTopicPlugin
from amqtt.session import Session
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


class AdmittingBroker(Broker):
    """An amqtt Broker that refuses a CONNECT before it touches any session.

    ``_initialize_client_session`` is amqtt 0.12.1's own (the version pyproject.toml pins)
    with ``refusal`` between reading the CONNECT and looking up its client id's session:
    amqtt offers no hook there.
    """

    def __init__(self, config: dict[str, object], secret: str) -> None:
        super().__init__(config)
        self._secret = secret

    async def _initialize_client_session(
        self, reader: ReaderAdapter, writer: WriterAdapter, remote_address: str, remote_port: int
    ) -> tuple[BrokerProtocolHandler, Session]:
        where = format_client_message(address=remote_address, port=remote_port)
        try:
            handler, client_session = await BrokerProtocolHandler.init_from_connect(
                reader, writer, self.plugins_manager
            )
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

        # From here on amqtt 0.12.1's own code.
        if client_session.clean_session:
            if client_session.client_id:
                await self._delete_session(client_session.client_id)
            else:
                client_session.client_id = gen_client_id()
            client_session.parent = 0
        elif client_session.client_id in self._sessions:
            # The new connection brings updated configuration and credentials.
            existing_client_session, _ = self._sessions[client_session.client_id]
            existing_client_session.will_flag = client_session.will_flag
            existing_client_session.will_message = client_session.will_message
            existing_client_session.will_topic = client_session.will_topic
            existing_client_session.will_qos = client_session.will_qos
            existing_client_session.keep_alive = client_session.keep_alive
            existing_client_session.username = client_session.username
            existing_client_session.password = client_session.password
            client_session = existing_client_session
            client_session.parent = 1
        else:
            client_session.parent = 0

        timeout_disconnect_delay = self.config.get("timeout-disconnect-delay", 0)
        if client_session.keep_alive > 0 and isinstance(timeout_disconnect_delay, int):
            client_session.keep_alive += timeout_disconnect_delay
        return handler, client_session


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
