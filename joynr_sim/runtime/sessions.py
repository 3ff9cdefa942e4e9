"""A cluster controller's broker sessions as links of the link registry.

Each MQTT connection (GBID, client id) is a sending link (the session's identity and its
published QoS 1 messages not yet acknowledged) and a receiving link (messages received but
not yet handled). CONNACK attaches both: establish, reattach, resume, or steal when the
same client id is attached on another connection (a second cluster controller with the
same id: the takeover). A lost connection suspends them, a clean shutdown closes them.

The bytes of every unsettled delivery are kept in the cluster controller's outbox, so after
a crash and restart the cluster controller re-sends what the broker may not have (amqtt
does not redeliver on resume) and handles again what it received but never handled;
receivers drop duplicates by message id. Delivery across a crash so does not depend on the
broker.

Registry events become ``link.*`` trace events of the runtime whose connection they are
about; a burst of steals of one key is a ``link.takeover-storm`` naming both runtimes.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from ..core.links import (
    LinkAttached,
    LinkDetached,
    LinkEvent,
    LinkExpired,
    LinkRecovered,
    LinkRegistry,
    LinkResumed,
    LinkStolen,
    LinkStored,
    Terminus,
    TerminusDurability,
    validate_mqtt_client_id,
)
from ..store.link_store import SqliteLinkStore
from ..store.outbox import INCOMING, OUTGOING, Outbox

if TYPE_CHECKING:  # pragma: no cover
    from ..transport.mqtt import MqttConnection

STORM_THRESHOLD = 5  # steals of one key ...
STORM_WINDOW_MS = 10_000  # ... within this window
LOST_GRACE_S = 5.0  # a lost connection keeps its link this long before it is suspended


def open_link_registry(
    state_dir: Path, cc_id: str, clock: Callable[[], int], detached_timeout_ms: int | None = None
) -> LinkRegistry:
    """The broker sessions a cluster controller persists, in ``<state_dir>/<cc id>.links.sqlite``."""
    state_dir.mkdir(parents=True, exist_ok=True)
    return LinkRegistry(
        store=SqliteLinkStore(state_dir / f"{cc_id}.links.sqlite", synchronous="OFF"),
        clock=clock,
        detached_timeout_ms=detached_timeout_ms,
        link_name_validator=validate_mqtt_client_id,
    )


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


class BrokerSessions:
    def __init__(self, owner: SessionOwner, registry: LinkRegistry, outbox: Outbox) -> None:
        self.owner = owner
        self.registry = registry
        self.outbox = outbox
        self._mine: set[str] = set()  # connection ids of this runtime
        self._inflight: dict[str, dict[int, str]] = {}  # connection id -> packet id -> tag
        self._steals: dict[tuple[str, str], deque[int]] = {}
        self._storm_until: dict[tuple[str, str], int] = {}
        self._grace: dict[str, asyncio.TimerHandle] = {}
        registry.add_listener(self._on_event)

    def close(self) -> None:
        for handle in self._grace.values():
            handle.cancel()
        self._grace.clear()
        self.registry.remove_listener(self._on_event)

    def connection_id(self, gbid: str, n: int) -> str:
        return f"{self.owner.runtime_id}|{gbid}|{n}"

    # -- connection lifecycle ----------------------------------------------------------
    def attached(self, conn: MqttConnection) -> None:
        """CONNACK: attach both links, then re-send and re-handle what is still held.

        The outbox decides what is re-sent: everything held that this connection's paho
        client does not already carry (paho re-sends its own after a reconnect; after a
        crash it has nothing). The registry's resume says what it reconciled."""
        self._mine.add(conn.connection_id)
        self._cancel_grace(conn)
        inflight = set(self._inflight.setdefault(conn.connection_id, {}).values())
        durable = TerminusDurability.UNSETTLED_STATE
        held_out = self.outbox.held(OUTGOING, conn.gbid)
        held_in = self.outbox.held(INCOMING, conn.gbid)
        sending = self.registry.get_sending_link(conn.gbid, conn.client_id)
        # Stolen means detached: the connection goes, as a broker that hands the session
        # over would close it (amqtt 0.12 keeps both; the registry does not).
        out = sending.attach(
            conn.connection_id, Terminus(conn.topic, durable), Terminus(conn.gbid), unsettled=None,
            on_stolen=lambda event: conn.drop(),
        )
        receiving = self.registry.get_receiving_link(conn.gbid, conn.client_id)
        into = receiving.attach(
            conn.connection_id, Terminus(conn.gbid), Terminus(conn.topic, durable),
            unsettled={tag: "received" for tag in held_in},
        )
        resent = settled = handled = 0
        if out.ok:
            for tag, (topic, payload) in held_out.items():
                if tag in out.settled:
                    self.outbox.delete(OUTGOING, conn.gbid, tag)
                    settled += 1
                elif tag not in inflight:
                    if tag not in sending.unsettled:
                        sending.add_unsettled(tag)
                    self.owner.resend(conn, tag, topic, payload)
                    resent += 1
        if into.ok:
            for tag, (_, payload) in held_in.items():
                self.owner.handle_again(conn, tag, payload)
                handled += 1
        if out.resumed or resent or settled or handled:
            self.owner.emit(
                "link.resume", gbid=conn.gbid, client_id=conn.client_id, role="sending",
                conn=conn.connection_id, resent=resent, settled=settled, handled=handled,
            )

    def lost(self, conn: MqttConnection) -> None:
        """The connection dropped; paho is reconnecting. Like a broker that only gives up on
        a connection after its keep-alive, the link stays attached to it for a grace
        period: a reconnect reattaches, another connection attaching meanwhile steals it
        (which is how a takeover looks from here), and otherwise it is suspended."""
        loop = asyncio.get_running_loop()
        self._cancel_grace(conn)
        self._grace[conn.connection_id] = loop.call_later(LOST_GRACE_S, self._lost_for_good, conn)

    def _lost_for_good(self, conn: MqttConnection) -> None:
        self._grace.pop(conn.connection_id, None)
        if not conn.connected.is_set():
            self.detached(conn, closed=False, error="connection-lost")

    def _cancel_grace(self, conn: MqttConnection) -> None:
        handle = self._grace.pop(conn.connection_id, None)
        if handle is not None:
            handle.cancel()

    def detached(self, conn: MqttConnection, closed: bool, error: str | None = None) -> None:
        self._cancel_grace(conn)
        for link in (
            self.registry.get_sending_link(conn.gbid, conn.client_id),
            self.registry.get_receiving_link(conn.gbid, conn.client_id),
        ):
            link.detach(conn.connection_id, closed=closed, error=error)
        self._inflight.pop(conn.connection_id, None)

    def purge(self, now_ms: int) -> None:
        self.registry.purge_expired(now_ms)

    # -- deliveries ------------------------------------------------------------------
    def publishing(self, conn: MqttConnection, tag: str, topic: str, payload: bytes) -> None:
        """Before a publish: the delivery is unsettled until the broker acknowledges it."""
        self.outbox.put(OUTGOING, conn.gbid, tag, topic, payload)
        link = self.registry.get_sending_link(conn.gbid, conn.client_id)
        if link.owner == conn.connection_id:
            link.add_unsettled(tag)

    def published(self, conn: MqttConnection, mid: int, tag: str) -> None:
        self._inflight.setdefault(conn.connection_id, {})[mid] = tag

    def acknowledged(self, conn: MqttConnection, mid: int) -> None:
        tag = self._inflight.get(conn.connection_id, {}).pop(mid, None)
        if tag is None:
            return
        self.registry.get_sending_link(conn.gbid, conn.client_id).settle(tag)
        self.outbox.delete(OUTGOING, conn.gbid, tag)

    def discard(self, conn: MqttConnection, tag: str) -> None:
        """A held outgoing delivery that can never be sent: settle it and forget its bytes."""
        self.registry.get_sending_link(conn.gbid, conn.client_id).settle(tag)
        self.outbox.delete(OUTGOING, conn.gbid, tag)

    def received(self, conn: MqttConnection, tag: str, payload: bytes) -> None:
        """Hold a received message until it is handled; then the broker may forget it."""
        self.outbox.put(INCOMING, conn.gbid, tag, conn.topic, payload)
        link = self.registry.get_receiving_link(conn.gbid, conn.client_id)
        if link.owner == conn.connection_id:
            link.add_unsettled(tag, "received")

    def handled(self, conn: MqttConnection, tag: str) -> None:
        self.registry.get_receiving_link(conn.gbid, conn.client_id).settle(tag)
        self.outbox.delete(INCOMING, conn.gbid, tag)

    # -- trace -----------------------------------------------------------------------
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
                 durability=event.durability, error=event.error)
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
