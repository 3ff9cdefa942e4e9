"""The broker semantics suite: each property of ``brokers.promises`` measured on a running
broker, with paho-mqtt 2 clients used the way joynr uses MQTT (MQTT 3.1.1, QoS 1,
persistent sessions, a subscriber that acknowledges only what it has handled).

    target = Target("127.0.0.1", port, login=lambda cid: brokers.credentials(cid))
    outcome = run_property("offline-queue", target)     # Outcome(kept, how)

A ``Target`` is where the broker listens, how a client id logs in (``login``), how to
crash and start the broker again on its port (``restart``, None when the suite may not)
and whether it enforces the grants of ``brokers.access`` (a client reads ``<client id>/#``
and publishes to ``<topic>/low``). The suite calls nothing else, so a test can point it
at a broker it configured itself. Blocking: call it from a thread, not from an event loop's.

This module is the harness: which check measures which property, what a target skips, a
failed check turned into an outcome. The checks are in ``brokers.semantics_sessions`` and
``brokers.semantics_delivery``; the client they drive, whose bounded waits and markers
judge "not delivered", in ``brokers.semantics_client``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable

from . import semantics_delivery as delivery
from . import semantics_sessions as sessions
from .broker_set import BrokerSet
from .promises import BY_ID, Outcome
from .semantics_client import NotKept, Session
from .semantics_client import Target as Target

RESTART_TIMEOUT_S = 90.0  # a broker's crash and start (amqtt's start imports it anew)
# An external broker is checked as it is: not restarted, and its own grants apply, not joynr-sim's.
EXTERNAL_SKIP = {
    "persistence": "external (not restarted)",
    "acl-publish-denied": "external (its own grants apply)",
    "acl-subscribe-denied": "external (its own grants apply)",
}


def broker_set_target(brokers: BrokerSet, gbid: str, loop: asyncio.AbstractEventLoop) -> Target:
    """The broker of ``gbid`` in a started set whose lifecycle runs on ``loop``: its
    clients log in as ``brokers.credentials`` says; a managed broker is restarted with
    ``crash_broker`` and ``start_broker`` (on ``loop``, from the suite's thread)."""
    host, port = brokers.endpoint(gbid)
    if brokers.kind == "external":
        return Target(host, port, login=lambda client_id: brokers.credentials(client_id, gbid), skip=EXTERNAL_SKIP)

    async def crash_and_start() -> None:
        await brokers.crash_broker(gbid)
        await brokers.start_broker(gbid)

    def restart() -> None:
        asyncio.run_coroutine_threadsafe(crash_and_start(), loop).result(RESTART_TIMEOUT_S)

    return Target(host, port, login=lambda client_id: brokers.credentials(client_id, gbid), restart=restart)


CHECKS: dict[str, Callable[[Session], Outcome]] = {
    "qos1-redelivery": sessions.qos1_redelivery,
    "offline-queue": sessions.offline_queue,
    "clean-session-discards": sessions.clean_session_discards,
    "takeover": sessions.takeover,
    "acl-publish-denied": delivery.acl_publish_denied,
    "acl-subscribe-denied": delivery.acl_subscribe_denied,
    "inflight-window": delivery.inflight_window,
    "ordering": delivery.ordering,
    "qos0-delivery": delivery.qos0_delivery,
    "publisher-gone": delivery.publisher_gone,
    "retained": delivery.retained,
    "persistence": sessions.persistence,
}
assert list(CHECKS) == list(BY_ID), "a check for every declared property, in the same order"


def run_property(prop_id: str, target: Target) -> Outcome:
    """Measure one property; Outcome(None, "not tested: ...") when the target skips it."""
    if prop_id not in CHECKS:
        raise ValueError(f"property: unknown id {prop_id!r}; one of {', '.join(CHECKS)}")
    if prop_id in target.skip:
        return Outcome(None, f"not tested: {target.skip[prop_id]}")
    if prop_id == "persistence" and target.restart is None:
        return Outcome(None, "not tested: the broker cannot be restarted here")
    if prop_id.startswith("acl-") and not target.grants:
        return Outcome(None, "not tested: the broker does not enforce joynr-sim's grants")
    session = Session(target, prop_id.replace("-", "")[:12])
    try:
        return CHECKS[prop_id](session)
    except NotKept as exc:
        return Outcome(False, str(exc))
    except OSError as exc:  # the broker went away under a client
        return Outcome(False, f"connection failed: {exc.strerror or exc}")
    finally:
        session.close()


def run_suite(target: Target, on_result: Callable[[str, Outcome, float], None] = lambda *_: None,
              only: list[str] | None = None) -> dict[str, Outcome]:
    """Every property (or ``only`` these), in declaration order; ``on_result(id, outcome,
    seconds)`` after each."""
    out: dict[str, Outcome] = {}
    for prop_id in only or list(CHECKS):
        started = time.monotonic()
        out[prop_id] = run_property(prop_id, target)
        on_result(prop_id, out[prop_id], time.monotonic() - started)
    return out
