"""The control protocol over MQTT: how a runner and the hosts that joined its run from
other machines talk, on the run's first broker (no coordinator of their own).

Topics, under ``joynr-sim-control/<run>/``:

    hosts/<host>                 a host's announcement, retained: {v, host, address, pid, cores};
                                 cleared (an empty retained message) when it leaves, by its will
                                 when it dies
    <host>/<session>/request     a runner's requests to a host: {v, worker, query, message}
    <host>/<session>/response    the host's answers: a protocol response (``rpc.framing``)
    sessions/<session>           a runner's will: "gone" (its hosts then kill its workers)

``worker`` 0 is the host itself (``join.ops``), any other number the pid of one of its
worker processes (``rpc.ops``); ``query`` marks an op asked on the blocking query
channel. Run, host and session names are 1 to 64 letters, digits, ``.``, ``_`` or ``-``.
Anyone logged in to the broker may publish there: each end validates every payload as a
frame from a socket (at most ``MAX_FRAME_BYTES``, msgpack, version, id, op and arguments)
and the topic it came on; what fails is a recorded drop, never an answer to a stranger.

``Channel`` is one paho connection (its network loop in paho's thread) that is connected
only once it is subscribed, and subscribes again after every reconnect.
"""

from __future__ import annotations

import re
import socket
import threading
from collections.abc import Callable
from typing import Any

import msgpack
import paho.mqtt.client as paho
from paho.mqtt.enums import CallbackAPIVersion

from ..rpc.framing import MAX_FRAME_BYTES, ProtocolError

PREFIX = "joynr-sim-control"
CONNECT_TIMEOUT_S = 10.0
_NAME = re.compile(r"[A-Za-z0-9._-]{1,64}")


def check_name(what: str, value: object) -> str:
    if not isinstance(value, str) or not _NAME.fullmatch(value):
        shown = value[:64] if isinstance(value, str) else type(value).__name__
        raise ValueError(f"{what}: expected 1 to 64 letters, digits, '.', '_' or '-', got {shown!r}")
    return value


class Topics:
    def __init__(self, run: str) -> None:
        self.run = check_name("run", run)
        self.root = f"{PREFIX}/{run}"

    def host(self, host: str) -> str:
        return f"{self.root}/hosts/{host}"

    def requests(self, host: str, session: str) -> str:
        return f"{self.root}/{host}/{session}/request"

    def responses(self, host: str, session: str) -> str:
        return f"{self.root}/{host}/{session}/response"

    def session(self, session: str) -> str:
        return f"{self.root}/sessions/{session}"

    def parts(self, topic: str) -> list[str] | None:
        """The levels below the run's root, or None for a topic of another run."""
        if not topic.startswith(self.root + "/"):
            return None
        return topic[len(self.root) + 1:].split("/")


def pack(message: dict[str, Any]) -> bytes:
    body = msgpack.packb(message, use_bin_type=True)
    if len(body) > MAX_FRAME_BYTES:
        raise ProtocolError(f"frame: {len(body)} bytes, more than {MAX_FRAME_BYTES}")
    return body


def unpack(payload: bytes) -> dict[str, Any]:
    """A payload's map; a ProtocolError for anything else."""
    if len(payload) > MAX_FRAME_BYTES:
        raise ProtocolError(f"frame: {len(payload)} bytes, more than {MAX_FRAME_BYTES}")
    try:
        message = msgpack.unpackb(payload, raw=False, strict_map_key=True)
    except Exception as exc:  # msgpack raises many types for garbage
        raise ProtocolError(f"frame: not msgpack ({type(exc).__name__}: {exc})") from None
    if not isinstance(message, dict):
        raise ProtocolError(f"frame: expected a map, got {type(message).__name__}")
    return message


class Channel:
    """One MQTT connection for the control topics; ``on_message(topic, payload)`` runs in
    paho's thread."""

    def __init__(self, client_id: str, host: str, port: int, credentials: tuple[str, str] | None,
                 filters: list[str], on_message: Callable[[str, bytes], None],
                 will: tuple[str, bytes, bool] | None = None) -> None:
        self.where = f"{host}:{port}"
        self._endpoint = (host, port)
        self._filters = list(filters)
        self._on_message = on_message
        self._ready = threading.Event()
        self._failure: str | None = None
        self._subscription: int | None = None
        client = paho.Client(CallbackAPIVersion.VERSION2, client_id=client_id, clean_session=True,
                             protocol=paho.MQTTv311)
        if credentials is not None:
            client.username_pw_set(*credentials)
        if will is not None:
            client.will_set(will[0], will[1], qos=1, retain=will[2])
        client.max_queued_messages_set(0)
        client.reconnect_delay_set(min_delay=0.05, max_delay=1)  # type: ignore[arg-type]
        client.on_connect = self._connected
        client.on_subscribe = self._subscribed
        client.on_message = lambda c, u, m: self._on_message(m.topic, m.payload)
        client.on_socket_open = self._socket_open
        self._client = client

    @staticmethod
    def _socket_open(client, userdata, sock) -> None:
        # A small request otherwise waits for the peer's delayed ACK (about 40 ms a round trip).
        if isinstance(sock, socket.socket):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def _connected(self, client, userdata, flags, reason_code, properties) -> None:
        if reason_code.is_failure:
            self._failure = f"the broker refused the CONNECT: {reason_code}"
            self._ready.set()
            return
        _rc, self._subscription = client.subscribe([(f, 1) for f in self._filters])

    def _subscribed(self, client, userdata, mid, reason_codes, properties) -> None:
        if mid != self._subscription:
            return
        refused = [code for code in reason_codes if code.is_failure]
        if refused:  # an ACL without the control topics: say so rather than wait deaf
            self._failure = f"the broker refused the subscription to {self._filters}: {refused[0]}"
        self._ready.set()

    def connect(self, timeout: float = CONNECT_TIMEOUT_S) -> None:
        """Connected and subscribed, or a ConnectionError naming why not."""
        try:
            self._client.connect(*self._endpoint, keepalive=10)
        except OSError as exc:
            raise ConnectionError(f"control channel: cannot reach the broker at {self.where}: "
                                  f"{exc.strerror or exc}") from None
        self._client.loop_start()
        if not self._ready.wait(timeout):
            self.close()
            raise ConnectionError(f"control channel: the broker at {self.where} did not let us in and "
                                  f"subscribed within {timeout:g} s")
        if self._failure is not None:
            self.close()
            raise ConnectionError(f"control channel: {self._failure} (at {self.where})")

    def publish(self, topic: str, payload: bytes, *, retain: bool = False, wait_s: float = 0.0) -> None:
        """QoS 1; with ``wait_s``, wait (bounded) until the broker has it."""
        info = self._client.publish(topic, payload, qos=1, retain=retain)
        if wait_s:
            info.wait_for_publish(wait_s)

    def close(self, timeout: float = CONNECT_TIMEOUT_S) -> None:
        self._client.disconnect()
        self._client.loop_stop()
