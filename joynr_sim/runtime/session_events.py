"""The trace of a cluster controller's broker sessions: the link registry's events, as the
``link.*`` trace events of the runtime whose connection they are about, and the
``link.takeover-storm`` a burst of steals of one key is.

Kept apart from ``sessions`` (what the runtime does with its links) because this only says
what happened: one ``link.*`` event per transition of a session's sending link (its
identity), ``link.attach`` with the CONNACK's ``session_present``.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Any, Protocol

from ..core.links import (
    LinkAttached,
    LinkDetached,
    LinkEvent,
    LinkExpired,
    LinkRecovered,
    LinkResumed,
    LinkStolen,
    LinkStored,
)

if TYPE_CHECKING:  # pragma: no cover
    from ..transport.mqtt import MqttConnection

STORM_THRESHOLD = 5  # steals of one key ...
STORM_WINDOW_MS = 10_000  # ... within this window


def connection_runtime(connection_id: str) -> str:
    """Connection ids are ``<runtime id>|<gbid>|<n>``."""
    return connection_id.split("|", 1)[0]


class SessionOwner(Protocol):
    """What the sessions need of the runtime whose connections they are."""

    runtime_id: str
    client_id: str

    def emit(self, ev: str, **fields: Any) -> Any: ...

    def resend(self, conn: MqttConnection, tag: str, topic: str, payload: bytes) -> None: ...

    def handle_again(self, conn: MqttConnection, tag: str, payload: bytes) -> None: ...



class SessionEvents:
    """The trace of the broker sessions of one process of a runtime; the base of
    ``BrokerSessions``, whose attaches fill in which connections are this process's and what
    their CONNACKs said."""

    def __init__(self, owner: SessionOwner) -> None:
        self.owner = owner
        self._mine: set[str] = set()  # connection ids of this runtime
        self._steals: dict[tuple[str, str], deque[int]] = {}
        self._storm_until: dict[tuple[str, str], int] = {}
        # connection id -> the last CONNACK's session-present flag, for its link.attach: a
        # checker needs it to tell a broker that lost the receiver's subscription.
        self._session_present: dict[str, bool] = {}

    def _on_event(self, event: LinkEvent) -> None:
        key = event.key
        base: dict[str, Any] = {}
        if key is not None:
            base = {"gbid": key.remote_container_id, "client_id": key.link_name, "role": key.role}
        emit = self.owner.emit
        if isinstance(event, LinkResumed):
            return  # attached() reports what was really re-sent and handled again
        if key is not None and key.role != "sending":
            return  # the session's identity is its sending link; one event per transition
        if isinstance(event, LinkAttached) and event.connection_id in self._mine:
            emit("link.attach", **base, conn=event.connection_id, mode=event.mode,
                 durability=event.durability, error=event.error,
                 session_present=self._session_present.get(event.connection_id, False))
        elif isinstance(event, LinkDetached) and event.connection_id in self._mine:
            emit("link.detach", **base, conn=event.connection_id, closed=event.closed,
                 error=event.error, stolen_by=event.stolen_by)
        elif isinstance(event, LinkStolen) and event.to_connection in self._mine:
            emit("link.steal", **base, conn=event.to_connection, victim=event.from_connection)
            self._count_steal(event, base)
        elif isinstance(event, LinkRecovered) and event.connection_id in self._mine:
            emit("link.recover", **base, conn=event.connection_id, detail=f"durability {event.durability}")
        elif isinstance(event, LinkExpired) and self.owner.client_id == key.link_name:
            emit("link.expire", **base, conn=None,
                 detail=f"detached since {event.detached_since_ms}, timeout {event.timeout_ms} ms")
        elif isinstance(event, LinkStored) and not event.ok:
            emit("link.store", **base, conn=None, detail=f"{event.op} failed: {event.error}")

    def _count_steal(self, event: LinkStolen, base: dict[str, Any]) -> None:
        key = (base["gbid"], base["client_id"])
        times = self._steals.setdefault(key, deque())
        times.append(event.ts)
        while times and times[0] < event.ts - STORM_WINDOW_MS:
            times.popleft()
        if len(times) >= STORM_THRESHOLD and event.ts >= self._storm_until.get(key, 0):
            self._storm_until[key] = event.ts + STORM_WINDOW_MS
            runtimes = sorted({connection_runtime(event.to_connection),
                               connection_runtime(event.from_connection)})
            self.owner.emit("link.takeover-storm", **base, runtimes=runtimes, count=len(times),
                               window_ms=STORM_WINDOW_MS)
