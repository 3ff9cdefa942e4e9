"""What the broker semantics suite (``brokers.semantics``) drives a broker with: the
``Target`` it is pointed at, a paho-mqtt 2 ``Client`` used the way joynr uses MQTT (MQTT
3.1.1, QoS 1, persistent sessions, a subscriber that acknowledges only what it has
handled), and the ``Session`` of one property's test, which leaves nothing on the broker.

Every client id is fresh (a random suffix): a subscriber S reads ``S/#`` and is published
to on ``S/low`` (``unicast``). Every wait is bounded (``WAIT_S``); a wait that runs out is
an outcome ("no message within 5 s"), never a hang. "Nothing delivered" is judged by a
marker: a permitted message sent after the one that must not arrive, on the same
subscriber's connection; once the marker is in, and ``QUIET_S`` after it, what did not
arrive was not delivered (``Client.receive_until``). Blocking: call it from a thread, not
from an event loop's.

Separate from the properties because every property's exchange is bounded by these waits
and ended by this cleanup; a property says only what it sends and what it expects.
"""

from __future__ import annotations

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

WAIT_S = 5.0  # a CONNACK, SUBACK, PUBACK, message or disconnect expected within this
QUIET_S = 0.3  # after the marker: the broker had its chance to deliver what it would
CLEANUP_S = 2.0  # a persistent session's discard at the end, best effort
LOOP_S = 0.02  # a client's network thread wakes at least this often


@dataclass(frozen=True)
class Target:
    host: str
    port: int
    login: Callable[[str], tuple[str, str]]  # client id -> (username, password)
    restart: Callable[[], None] | None = None  # crash the broker, start it again on its port
    grants: bool = True  # the broker enforces brokers.access
    skip: dict[str, str] = field(default_factory=dict)  # property id -> why it is not tested


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
        # paho writes from the calling thread when no loop_start thread is its own: a publish
        # here would race the network thread's writes and put packets on the wire out of order
        # (measured: "13 arrived after 16" against Mosquitto under load). With a write-interest
        # callback set, a publish only queues the packet and wakes the network thread, which
        # alone writes to the socket.
        self.paho.on_socket_register_write = lambda *_: None

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


def distinct(c: Client, count: int) -> set[bytes]:
    """Up to ``count`` distinct payloads, within ``WAIT_S``."""
    got: set[bytes] = set()
    deadline = time.monotonic() + WAIT_S
    while len(got) < count:
        msg = c.receive(max(0.0, deadline - time.monotonic()))
        if msg is None:
            break
        got.add(msg.payload)
    return got

