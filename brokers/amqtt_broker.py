"""One embedded amqtt broker as its own OS process: ``python -m brokers.amqtt_broker``.

    python -m brokers.amqtt_broker --gbid joynrdefaultgbid --port 18830 [--host 127.0.0.1]
        [--exit-on-stdin-eof]

The secret every client's password derives from comes from the environment variable
``JOYNR_SIM_BROKER_SECRET`` (kept off the command line, which any local user can read).
Who may log in and which topics each login may use is ``brokers.access``: a client logs in
as itself (username = client id) with its own password, subscribes within its own prefix
and publishes to unicast topics; the administrative user may do anything.

This module is the process: its arguments, the broker's config, signals and shutdown. What
it runs lives next to it:

- ``brokers.amqtt_access``: the login and topic checks, as amqtt plugins;
- ``brokers.amqtt_admitting``: ``AdmittingBroker``, which refuses a CONNECT before it
  touches any session and keeps what MQTT 3.1.1 promises a session, where amqtt 0.12.1
  does not (its docstring lists how);
- ``brokers.amqtt_session``: ``SessionHandler``, one connection's side of those promises.

Anonymous access is off on purpose: amqtt 0.12 marks every session it lets in through its
anonymous plugin as anonymous and deletes it about a second after the client disconnects,
which would lose persistent sessions and their queued messages.

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

from brokers.amqtt_access import ClientAuthPlugin, TopicAclPlugin
from brokers.amqtt_access import refusal as refusal
from brokers.amqtt_admitting import AdmittingBroker
from brokers.broker_set import SECRET_ENV
from brokers.malloc import tune_malloc

log = logging.getLogger("joynr_sim.amqtt_broker")


def _plugin(cls: type) -> str:
    """The dotted path amqtt imports a plugin by: its config names plugins, not classes."""
    return f"{cls.__module__}.{cls.__qualname__}"


def broker_config(host: str, port: int, secret: str) -> dict[str, object]:
    # An explicit plugins dict replaces amqtt's defaults (anonymous auth, $SYS, packet logs).
    return {
        "listeners": {"default": {"type": "tcp", "bind": f"{host}:{port}"}},
        "plugins": {
            _plugin(ClientAuthPlugin): {"secret": secret},
            _plugin(TopicAclPlugin): {},
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
    tune_malloc()
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
