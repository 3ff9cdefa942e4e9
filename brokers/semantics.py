"""The broker semantics suite: each property of ``brokers.promises`` measured on a running
broker, with paho-mqtt 2 clients used the way joynr uses MQTT (MQTT 3.1.1, QoS 1,
persistent sessions, a subscriber that acknowledges only what it has handled).

    target = Target("127.0.0.1", port, login=lambda cid: brokers.credentials(cid))
    outcome = run_property("offline-queue", target)     # Outcome(kept, how)

A ``Target`` is where the broker listens, how a client id logs in (``login``), how to
crash and start the broker again on its port (``restart``, None when the suite may not)
and whether it enforces the grants of ``brokers.access`` (a client reads ``<client id>/#``
and publishes to ``<topic>/low``). The suite calls nothing else, so a test can point it
at a broker it configured itself.

Every client id is fresh (a random suffix): a subscriber S reads ``S/#`` and is published
to on ``S/low``. Every wait is bounded (``WAIT_S``); a wait that runs out is an outcome
("no message within 5 s"), never a hang. "Nothing delivered" is judged by a marker: a
permitted message sent after the one that must not arrive, on the same subscriber's
connection; once the marker is in, and ``QUIET_S`` after it, what did not arrive was not
delivered. Blocking: call it from a thread, not from an event loop's.

Longer than 400 lines because it is the one suite: the client it drives and the ten
property checks, each a few lines of MQTT exchange, read best next to the client whose
waits bound them.
"""

from __future__ import annotations

import asyncio
import contextlib
import queue
import secrets
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import paho.mqtt.client as mqtt
from paho.mqtt.enums import CallbackAPIVersion, MQTTErrorCode

from .broker_set import BrokerSet
from .promises import BY_ID, Outcome

WAIT_S = 5.0  # a CONNACK, SUBACK, PUBACK, message or disconnect expected within this
QUIET_S = 0.3  # after the marker: the broker had its chance to deliver what it would
CLEANUP_S = 2.0  # a persistent session's discard at the end, best effort
LOOP_S = 0.02  # a client's network thread wakes at least this often
QUEUED = 3  # offline-queue: messages published while the subscriber is away
WINDOW_PROBE = 50  # inflight-window: messages published to a subscriber that withholds acks
IN_ORDER = 50  # ordering: messages of one publisher to one topic
PUBLISHER_GONE = 500  # publisher-gone: messages acknowledged just before the publisher leaves
RESTART_TIMEOUT_S = 90.0  # a broker's crash and start (amqtt's start imports it anew)
# An external broker is checked as it is: not restarted, and its own grants apply, not joynr-sim's.
EXTERNAL_SKIP = {
    "persistence": "external (not restarted)",
    "acl-publish-denied": "external (its own grants apply)",
    "acl-subscribe-denied": "external (its own grants apply)",
}


@dataclass(frozen=True)
class Target:
    host: str
    port: int
    login: Callable[[str], tuple[str, str]]  # client id -> (username, password)
    restart: Callable[[], None] | None = None  # crash the broker, start it again on its port
    grants: bool = True  # the broker enforces brokers.access
    skip: dict[str, str] = field(default_factory=dict)  # property id -> why it is not tested


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


class NotKept(Exception):
    """The property does not hold; the message says how, in a few words."""


class Client:
    """One paho client on its own network thread, without paho's reconnecting: a lost
    connection stays lost, and a reconnect is a new ``Client`` (as a restarted process)."""

    def __init__(self, target: Target, client_id: str, *, clean_session: bool, manual_ack: bool = False) -> None:
        self.target, self.client_id = target, client_id
        self.paho = mqtt.Client(CallbackAPIVersion.VERSION2, client_id=client_id, clean_session=clean_session,
                                protocol=mqtt.MQTTv311, manual_ack=manual_ack)
        self.paho.username_pw_set(*target.login(client_id))
        self.connack = threading.Event()
        self.gone = threading.Event()
        self.refused: str | None = None  # why the CONNACK refused the connection
        self.session_present: bool | None = None
        self.messages: queue.Queue[mqtt.MQTTMessage] = queue.Queue()
        self.auto_ack = False  # with manual_ack: acknowledge on receipt from now on
        self._subacks: dict[int, list[int]] = {}
        self._suback = threading.Condition()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.paho.on_connect = self._on_connect
        self.paho.on_disconnect = lambda *_: self.gone.set()
        self.paho.on_subscribe = self._on_subscribe
        self.paho.on_message = self._on_message

    def _on_connect(self, _c, _u, flags, reason_code, _p) -> None:  # noqa: ANN001
        self.refused = str(reason_code) if reason_code.is_failure else None
        self.session_present = bool(flags.session_present)
        self.connack.set()

    def _on_subscribe(self, _c, _u, mid, codes, _p) -> None:  # noqa: ANN001
        with self._suback:
            self._subacks[mid] = [c.value for c in codes]
            self._suback.notify_all()

    def _on_message(self, _c, _u, msg: mqtt.MQTTMessage) -> None:
        if self.auto_ack:
            self.paho.ack(msg.mid, msg.qos)
        self.messages.put(msg)

    def _run(self) -> None:
        while not self._stop.is_set():
            if self.paho.loop(LOOP_S) != MQTTErrorCode.MQTT_ERR_SUCCESS:
                self.gone.set()
                return

    def connect(self, timeout: float = WAIT_S) -> bool:
        """CONNECT; whether the broker had a session (CONNACK session present)."""
        try:
            self.paho.connect(self.target.host, self.target.port, keepalive=60)
        except OSError as exc:
            raise NotKept(f"{self.client_id} cannot connect: {exc.strerror or exc}") from None
        self._thread = threading.Thread(target=self._run, name=f"mqtt-{self.client_id}", daemon=True)
        self._thread.start()
        if not self.connack.wait(timeout):
            raise NotKept(f"no CONNACK within {timeout:g} s")
        if self.refused is not None:
            raise NotKept(f"{self.client_id}: CONNACK refused: {self.refused}")
        assert self.session_present is not None
        return self.session_present

    def subscribe(self, topic_filter: str) -> int:
        """SUBSCRIBE at QoS 1; the SUBACK's return code (0, 1, or 0x80 refused)."""
        result, mid = self.paho.subscribe(topic_filter, qos=1)
        if result != MQTTErrorCode.MQTT_ERR_SUCCESS:
            raise NotKept(f"SUBSCRIBE {topic_filter} not sent: {mqtt.error_string(result)}")
        with self._suback:
            if not self._suback.wait_for(lambda: mid in self._subacks, WAIT_S):
                raise NotKept(f"no SUBACK for {topic_filter} within {WAIT_S:g} s")
            return self._subacks[mid][0]

    def publish(self, topic: str, payload: bytes, *, retain: bool = False, wait: bool = True) -> mqtt.MQTTMessageInfo:
        """PUBLISH at QoS 1; with ``wait``, NotKept unless the broker acknowledges it."""
        info = self.paho.publish(topic, payload, qos=1, retain=retain)
        if wait and not self.acked(info):
            raise NotKept(f"no PUBACK for a message to {topic}: "
                          + ("the broker closed the connection" if self.gone.is_set() else f"none within {WAIT_S:g} s"))
        return info

    def acked(self, info: mqtt.MQTTMessageInfo, timeout: float = WAIT_S) -> bool:
        """Whether the broker acknowledged the publish (PUBACK) within ``timeout``; false
        at once when the connection is gone."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and not self.gone.is_set():
            with contextlib.suppress(RuntimeError, ValueError):
                info.wait_for_publish(LOOP_S * 5)
            with contextlib.suppress(RuntimeError, ValueError):
                if info.is_published():
                    return True
        with contextlib.suppress(RuntimeError, ValueError):
            return info.is_published()
        return False

    def receive(self, timeout: float = WAIT_S) -> mqtt.MQTTMessage | None:
        try:
            return self.messages.get(timeout=timeout)
        except queue.Empty:
            return None

    def receive_until(self, payload: bytes, timeout: float = WAIT_S) -> list[mqtt.MQTTMessage]:
        """Every message up to the one with ``payload`` and ``QUIET_S`` after it; NotKept
        when that one does not come."""
        got: list[mqtt.MQTTMessage] = []
        deadline = time.monotonic() + timeout
        while not any(m.payload == payload for m in got):
            msg = self.receive(deadline - time.monotonic())
            if msg is None:
                raise NotKept(f"the marker message did not arrive within {timeout:g} s")
            got.append(msg)
        time.sleep(QUIET_S)
        return got + self.drain()

    def drain(self) -> list[mqtt.MQTTMessage]:
        got = []
        with contextlib.suppress(queue.Empty):
            while True:
                got.append(self.messages.get_nowait())
        return got

    def _halt(self) -> None:
        self._stop.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(WAIT_S)

    def crash(self) -> None:
        """Gone without DISCONNECT: the network thread stops, the socket closes under it."""
        self._halt()
        sock = self.paho.socket()
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                sock.close()

    def disconnect(self) -> None:
        """A clean DISCONNECT, then the thread stops."""
        if not self.gone.is_set():
            self.paho.disconnect()
            self.gone.wait(WAIT_S)
        self._halt()

    def close(self) -> None:
        if self._thread is not None and not self._stop.is_set():
            self.crash()


class Session:
    """The clients of one property's test: each closed at the end, and every persistent
    session used discarded (a clean-session connect), so the broker keeps nothing of it."""

    def __init__(self, target: Target, name: str) -> None:
        self.target = target
        self.tag = f"bc-{name}-{secrets.token_hex(3)}"
        self._clients: list[Client] = []
        self._persistent: set[str] = set()

    def client_id(self, role: str) -> str:
        return f"{self.tag}-{role}"

    def client(self, role: str, *, clean_session: bool = True, manual_ack: bool = False) -> Client:
        c = Client(self.target, self.client_id(role), clean_session=clean_session, manual_ack=manual_ack)
        self._clients.append(c)
        if not clean_session:
            self._persistent.add(c.client_id)
        c.connect()
        return c

    def subscriber(self, role: str, *, clean_session: bool = False, manual_ack: bool = False) -> Client:
        """A client subscribed to its own prefix, as a cluster controller is; NotKept when
        the broker refuses that."""
        c = self.client(role, clean_session=clean_session, manual_ack=manual_ack)
        code = c.subscribe(f"{c.client_id}/#")
        if code == 0x80:
            raise NotKept(f"SUBACK 0x80 for the client's own prefix {c.client_id}/#")
        return c

    def close(self) -> None:
        for c in self._clients:
            c.close()
        for client_id in self._persistent:
            c = Client(self.target, client_id, clean_session=True)
            with contextlib.suppress(NotKept, OSError):
                c.connect(CLEANUP_S)
                c.disconnect()
            c.close()


def unicast(subscriber: Client) -> str:
    """The topic others publish to for ``subscriber``: ``<client id>/low``."""
    return f"{subscriber.client_id}/low"


# -- the properties -------------------------------------------------------------------------

def qos1_redelivery(s: Session) -> Outcome:
    sub = s.subscriber("sub", manual_ack=True)
    pub = s.client("pub")
    pub.publish(unicast(sub), b"owed")
    first = sub.receive()
    if first is None:
        raise NotKept(f"no message within {WAIT_S:g} s (before the client's kill)")
    sub.crash()  # the message stays unacknowledged
    again = s.client("sub", clean_session=False)
    present = again.session_present
    msg = again.receive()
    if msg is None:
        raise NotKept(f"no message within {WAIT_S:g} s of the reconnect (session present {int(bool(present))})")
    if msg.payload != b"owed":
        raise NotKept(f"another message came instead: {msg.payload[:40]!r}")
    return Outcome(True, f"DUP={int(msg.dup)}")


def offline_queue(s: Session) -> Outcome:
    sub = s.subscriber("sub")
    sub.disconnect()
    pub = s.client("pub")
    for i in range(QUEUED):
        if not pub.acked(pub.publish(unicast(sub), f"queued-{i}".encode(), wait=False)):
            raise NotKept(f"no PUBACK for queued-{i} within {WAIT_S:g} s")
    back = s.client("sub", clean_session=False)
    got = _distinct(back, QUEUED)
    if not back.session_present:
        raise NotKept(f"session present 0, {len(got)} of {QUEUED} delivered")
    if len(got) < QUEUED:
        raise NotKept(f"{len(got)} of {QUEUED} delivered within {WAIT_S:g} s, session present 1")
    return Outcome(True, f"{QUEUED} of {QUEUED}, session present 1")


def clean_session_discards(s: Session) -> Outcome:
    sub = s.subscriber("sub")
    sub.disconnect()
    pub = s.client("pub")
    pub.publish(unicast(sub), b"queued")
    clean = s.client("sub", clean_session=True)
    if clean.session_present:
        raise NotKept("session present 1 on a clean-session connect")
    clean.subscribe(f"{clean.client_id}/#")
    pub.publish(unicast(sub), b"marker")
    stale = [m for m in clean.receive_until(b"marker") if m.payload == b"queued"]
    if stale:
        raise NotKept("the message queued for the old session was delivered")
    clean.disconnect()
    after = s.client("sub", clean_session=False)  # the clean session ended with its connection
    if after.session_present:
        raise NotKept("the clean session outlived its connection (session present 1 on the next connect)")
    return Outcome(True, "session present 0, nothing delivered")


def takeover(s: Session) -> Outcome:
    old = s.subscriber("sub")
    new = s.client("sub", clean_session=False)
    if not old.gone.wait(WAIT_S):
        raise NotKept(f"the old connection was not closed within {WAIT_S:g} s")
    pub = s.client("pub")
    pub.publish(unicast(new), b"after-takeover")
    msg = new.receive()
    if msg is None:
        raise NotKept(f"the new connection received nothing within {WAIT_S:g} s "
                      f"(session present {int(bool(new.session_present))})")
    return Outcome(True, "old connection closed, new one receives")


def acl_publish_denied(s: Session) -> Outcome:
    sub = s.subscriber("sub")
    pub = s.client("pub")
    info = pub.publish(f"{sub.client_id}/high", b"denied", wait=False)  # only <topic>/low is granted
    acked = pub.acked(info)
    closed = pub.gone.wait(QUIET_S)  # a broker may acknowledge, then close the connection
    how = {(True, False): "acknowledged and dropped", (True, True): "acknowledged, then disconnected",
           (False, True): "disconnected", (False, False): "no PUBACK, still connected"}[(acked, closed)]
    (s.client("pub2") if closed else pub).publish(unicast(sub), b"marker")
    if any(m.payload == b"denied" for m in sub.receive_until(b"marker")):
        raise NotKept(f"delivered ({how})")
    return Outcome(True, how)


def acl_subscribe_denied(s: Session) -> Outcome:
    sub = s.subscriber("sub")
    other = s.subscriber("other")
    code = sub.subscribe(f"{other.client_id}/#")  # another client's prefix
    pub = s.client("pub")
    pub.publish(unicast(other), b"not-yours")
    pub.publish(unicast(sub), b"marker")
    how = "SUBACK 0x80" if code == 0x80 else f"granted (SUBACK {code}), nothing delivered"
    if any(m.payload == b"not-yours" for m in sub.receive_until(b"marker")):
        raise NotKept(f"delivered outside the grants (SUBACK {code:#x})")
    if code != 0x80:
        how = "granted, nothing delivered"
    return Outcome(True, how)


def inflight_window(s: Session) -> Outcome:
    sub = s.subscriber("sub", manual_ack=True)
    pub = s.client("pub")
    infos = [pub.publish(unicast(sub), f"w-{i}".encode(), wait=False) for i in range(WINDOW_PROBE)]
    unacked = [i for i, info in enumerate(infos) if not pub.acked(info)]
    if unacked:
        raise NotKept(f"no PUBACK to the publisher for {len(unacked)} of {WINDOW_PROBE}")
    held: list[mqtt.MQTTMessage] = []
    msg = sub.receive()
    while msg is not None:
        held.append(msg)
        msg = sub.receive(QUIET_S * 2)
    window = len({m.payload for m in held})
    if window == 0:
        raise NotKept(f"window 0: no message within {WAIT_S:g} s")
    sub.auto_ack = True
    for m in held:
        sub.paho.ack(m.mid, m.qos)
    got = {m.payload for m in held} | _distinct(sub, WINDOW_PROBE - window)
    shown = f"window {window}" if window < WINDOW_PROBE else f"window {WINDOW_PROBE} or more, none held back"
    if len(got) < WINDOW_PROBE:
        raise NotKept(f"{shown}, {WINDOW_PROBE - len(got)} of {WINDOW_PROBE} dropped")
    return Outcome(True, shown)


def ordering(s: Session) -> Outcome:
    sub = s.subscriber("sub")
    pub = s.client("pub")
    infos = [pub.publish(unicast(sub), f"{i:04d}".encode(), wait=False) for i in range(IN_ORDER)]
    for info in infos:
        pub.acked(info)
    seen: list[int] = []
    deadline = time.monotonic() + WAIT_S
    while len(seen) < IN_ORDER:
        msg = sub.receive(max(0.0, deadline - time.monotonic()))
        if msg is None:
            raise NotKept(f"{len(seen)} of {IN_ORDER} within {WAIT_S:g} s")
        n = int(msg.payload)
        if n not in seen:
            seen.append(n)
    late = next((b for a, b in zip(seen, seen[1:]) if b < a), None)
    if late is not None:
        raise NotKept(f"{late} arrived after {seen[seen.index(late) - 1]}")
    return Outcome(True, f"{IN_ORDER} in order")


def publisher_gone(s: Session) -> Outcome:
    sub = s.subscriber("sub")
    pub = s.client("pub")
    infos = [pub.publish(unicast(sub), f"gone-{i}".encode(), wait=False) for i in range(PUBLISHER_GONE)]
    for i, info in enumerate(infos):
        if not pub.acked(info):
            raise NotKept(f"no PUBACK for gone-{i} within {WAIT_S:g} s")
    pub.disconnect()  # at once: whatever the broker has not routed yet is its to deliver
    got = _distinct(sub, PUBLISHER_GONE)
    if len(got) < PUBLISHER_GONE:
        raise NotKept(f"{len(got)} of {PUBLISHER_GONE} acknowledged messages delivered within {WAIT_S:g} s")
    return Outcome(True, f"{PUBLISHER_GONE} of {PUBLISHER_GONE}")


def retained(s: Session) -> Outcome:
    topic = f"{s.client_id('sub')}/low"
    pub = s.client("pub")
    pub.publish(topic, b"retained", retain=True)
    try:
        sub = s.subscriber("sub", clean_session=True)
        msg = sub.receive()
        if msg is None:
            raise NotKept(f"no message within {WAIT_S:g} s of the subscribe")
        return Outcome(True, f"RETAIN={int(msg.retain)}")
    finally:
        with contextlib.suppress(NotKept):
            pub.publish(topic, b"", retain=True)  # an empty retained message clears it


def persistence(s: Session) -> Outcome:
    assert s.target.restart is not None
    sub = s.subscriber("sub")
    sub.disconnect()
    pub = s.client("pub")
    pub.publish(unicast(sub), b"kept")
    pub.disconnect()
    # Mosquitto saves at the end of the loop pass that acknowledged the message: a SIGKILL
    # within that pass (a few ms) loses it even at autosave 1, so the crash comes a little later.
    time.sleep(QUIET_S)
    s.target.restart()
    back = s.client("sub", clean_session=False)
    msg = back.receive(WAIT_S if back.session_present else QUIET_S)
    if not back.session_present:
        raise NotKept("session present 0 after the restart")
    if msg is None:
        raise NotKept(f"session kept, the queued message not delivered within {WAIT_S:g} s")
    return Outcome(True, "session and message kept")


def _distinct(c: Client, count: int) -> set[bytes]:
    """Up to ``count`` distinct payloads, within ``WAIT_S``."""
    got: set[bytes] = set()
    deadline = time.monotonic() + WAIT_S
    while len(got) < count:
        msg = c.receive(max(0.0, deadline - time.monotonic()))
        if msg is None:
            break
        got.add(msg.payload)
    return got


CHECKS: dict[str, Callable[[Session], Outcome]] = {
    "qos1-redelivery": qos1_redelivery,
    "offline-queue": offline_queue,
    "clean-session-discards": clean_session_discards,
    "takeover": takeover,
    "acl-publish-denied": acl_publish_denied,
    "acl-subscribe-denied": acl_subscribe_denied,
    "inflight-window": inflight_window,
    "ordering": ordering,
    "publisher-gone": publisher_gone,
    "retained": retained,
    "persistence": persistence,
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
