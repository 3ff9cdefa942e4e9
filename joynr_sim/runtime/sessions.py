"""A cluster controller's broker sessions as links of the link registry.

Each MQTT connection (GBID, client id) is a sending link (the session's identity and its
published QoS 1 messages not yet acknowledged) and a receiving link (messages received but
not yet handled). CONNACK attaches both: establish (nothing stored, or the broker answered
session present 0: it lost the session); reattach (the link endpoint still exists: a
connection that came back within the grace period of its loss); resume (a suspended link:
its terminus kept, its endpoint gone with the lost connection, whether or not anything is
unsettled); or steal when the same client id is attached on another connection (a second
cluster controller with the same id: the takeover). A lost connection suspends them, a
clean shutdown closes them. A restarted process knows its link names and none of its
termini: its first attach of each session names no terminus and recovers the stored one
(recover); when the store has none (a clean stop closed the links) that attach is rejected
(amqp:not-found) and the link established with the process's own terminus. A connection
that comes back to a broker that no longer has its session (session present 0: another
CONNECT with its client id and a clean session took it over, or the broker lost it) detaches
them first (``link.detach``, error ``session-lost``): that session is over, whatever the
grace period of the lost connection said, and the attach establishes a new one.

A BrokerSessions is the memory of one process of the runtime: every start opens a new one
over a new registry that knows only what the link store kept (see ``MqttEndpoint``).
Runtimes with the same client id share the store, not the registry: each learns of the
other's steals from the store's records.

The bytes of every unsettled delivery are kept in the cluster controller's outbox, so after
a crash and restart the cluster controller re-sends what the broker may not have (amqtt
does not redeliver on resume, and loses its sessions when it stops) and handles again what
it received but never handled; receivers drop duplicates by message id. Delivery across a
crash so does not depend on the broker.

Registry events become ``link.*`` trace events of the runtime whose connection they are
about; a burst of steals of one key is a ``link.takeover-storm`` naming both runtimes.
``link.attach`` comes once the connection is subscribed to its own topic again (the
transport reports a connection only after the SUBACK) and carries the CONNACK's
``session_present``. When that is false the broker had lost the session: a publish to
this runtime that reached the broker before this event found no subscriber. A
resume is traced once the broker has acknowledged every delivery it resumed (or the
connection went first): ``link.resume`` counts what the outbox re-sent and what the
broker's PUBACKs settled (a resume with nothing unsettled counts nothing). The trace
itself is written by ``session_events``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core.links import (
    ERR_NOT_FOUND,
    REJECT,
    AttachOutcome,
    Link,
    LinkRegistry,
    Terminus,
    TerminusDurability,
    validate_mqtt_client_id,
)
from ..store.link_store import SqliteLinkStore
from ..store.outbox import INCOMING, OUTGOING, Outbox
from .session_events import SessionEvents, SessionOwner

if TYPE_CHECKING:  # pragma: no cover
    from ..transport.mqtt import MqttConnection

LOST_GRACE_S = 5.0  # a lost connection keeps its link this long before it is suspended
SESSION_LOST = "session-lost"  # the detach of a link whose session the broker no longer has
# How often a runtime looks in the link store for a session another runtime took. Mosquitto
# closes the connection a takeover leaves behind; amqtt 0.12 keeps it open, so the runtime
# closes it itself, as a compliant broker would have. One read per attached link.
STEAL_CHECK_S = 0.25
# A check that finds the store unchanged waits twice as long for the next, up to this; a
# change or an attach brings it back to STEAL_CHECK_S. A thousand controllers checking
# four times a second were 7% of a fleet's hosts' CPU while nothing changed (profiled
# start of 300 controllers); a takeover is still seen within a second, and on Mosquitto the
# broker closes the connection it took at once anyway.
STEAL_CHECK_MAX_S = 1.0


def open_link_registry(
    state_dir: Path, cc_id: str, clock: Callable[[], int], detached_timeout_ms: int | None = None,
    variant: str | None = None,
) -> LinkRegistry:
    """The broker sessions a cluster controller persists, in ``<state_dir>/<cc id>.links.sqlite``;
    ``variant``: a link-registry variant's name (``core.links.variants``), None for seed 004's rules."""
    state_dir.mkdir(parents=True, exist_ok=True)
    return LinkRegistry(
        store=SqliteLinkStore(state_dir / f"{cc_id}.links.sqlite", synchronous="OFF", group_commit=True),
        clock=clock,
        detached_timeout_ms=detached_timeout_ms,
        link_name_validator=validate_mqtt_client_id,
        variant=variant,
    )


@dataclass
class _Resume:
    """A resume under way on one connection: the deliveries it resumed that the broker has
    not acknowledged yet."""

    gbid: str
    client_id: str
    pending: set[str] = field(default_factory=set)
    resent: int = 0
    settled: int = 0
    handled: int = 0
    attaching: bool = True  # still re-sending: not over even if nothing is pending yet


class BrokerSessions(SessionEvents):
    def __init__(self, owner: SessionOwner, registry: LinkRegistry, outbox: Outbox, restarted: bool = False) -> None:
        """restarted: the process these sessions are the memory of is a restart of the runtime
        (it found the runtime's persistence): its first attach of each broker session recovers
        the termini by link name (see ``attached``)."""
        super().__init__(owner)
        self.registry = registry
        self.outbox = outbox
        self._restarted = restarted
        self._gbids_attached: set[str] = set()  # by this process: the next attaches resume
        self._inflight: dict[str, dict[int, str]] = {}  # connection id -> packet id -> tag
        self._grace: dict[str, asyncio.TimerHandle] = {}
        self._resumes: dict[str, _Resume] = {}  # connection id -> the resume under way
        self._steal_check: asyncio.TimerHandle | None = None
        self._checked_generation: tuple[int, int] | None = None  # the store's when last read
        self._steal_interval = STEAL_CHECK_S
        self._closed = False
        registry.add_listener(self._on_event)

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        """The end of this process's sessions (a stop or a crash): late callbacks of its
        connections change nothing any more."""
        self._closed = True
        if self._steal_check is not None:
            self._steal_check.cancel()
            self._steal_check = None
        for handle in self._grace.values():
            handle.cancel()
        self._grace.clear()
        self._resumes.clear()
        self.registry.remove_listener(self._on_event)

    def connection_id(self, gbid: str, n: int) -> str:
        return f"{self.owner.runtime_id}|{gbid}|{n}"

    # -- connection lifecycle ----------------------------------------------------------
    def attached(self, conn: MqttConnection, session_present: bool) -> None:
        """CONNACK: attach both links, then re-send and re-handle what is still held.

        session_present is the CONNACK's flag. Without it the broker lost the session
        (amqtt after a restart, Mosquitto without persistence): the attach establishes the
        links anew and resumes nothing. Either way the outbox re-sends everything held that
        this connection's paho client does not already carry (paho re-sends its own after
        a reconnect; after a crash it has nothing) and handles again what was received but
        never handled: nothing is lost.

        When the sending link resumed, link.resume is traced once the broker acknowledged
        every delivery the link resumed (see ``acknowledged``), or when the connection goes
        first."""
        if self._closed:
            return
        again = conn.connection_id in self._mine  # a reconnect of a connection of this process
        self._mine.add(conn.connection_id)
        self._session_present[conn.connection_id] = session_present
        self._cancel_grace(conn)
        self._end_resume(conn.connection_id)
        inflight = set(self._inflight.setdefault(conn.connection_id, {}).values())
        durable = TerminusDurability.UNSETTLED_STATE  # granted as far as the store keeps
        held_out = self.outbox.held(OUTGOING, conn.gbid)
        held_in = self.outbox.held(INCOMING, conn.gbid)
        sending = self.registry.get_sending_link(conn.gbid, conn.client_id)
        receiving = self.registry.get_receiving_link(conn.gbid, conn.client_id)
        if again and not session_present and sending.owner == conn.connection_id:
            # Still attached from before the connection was lost, to a session the broker no
            # longer has: a clean CONNECT with this client id took it over (the broker closed
            # this connection for it) or the broker lost it. What paho re-sends of its own
            # stays counted in _inflight: only the links end.
            for link in (sending, receiving):
                link.detach(conn.connection_id, closed=False, error=SESSION_LOST)
        # A restarted process knows its link names, not its termini: its first attach of each
        # session states none and recovers what the link store kept; a recover that finds
        # nothing (a clean stop closed the links) is rejected and the link established anew.
        recover = self._restarted and conn.gbid not in self._gbids_attached
        self._gbids_attached.add(conn.gbid)
        # Stolen by another connection of this runtime means detached: the connection goes,
        # as the broker that hands the session over closes it. (Another runtime's broker
        # connection is closed by the broker; this runtime learns it from the store.)
        out = self._attach(
            sending, conn, Terminus(conn.topic, durable), Terminus(conn.gbid), recover, unsettled=None,
            on_stolen=lambda event: conn.drop(), peer_kept_state=session_present,
        )
        into = self._attach(
            receiving, conn, Terminus(conn.topic, durable), Terminus(conn.gbid), recover,
            unsettled={tag: "received" for tag in held_in} if session_present else None,
            peer_kept_state=session_present,
        )
        resume = _Resume(conn.gbid, conn.client_id)
        if out.resumed or (into.resumed and held_in):
            # What the link resumed and is (re-)sent now; a resumed tag without bytes
            # anywhere cannot be acknowledged, so it is not waited for.
            resumed = {d.tag for d in out.resend} if out.resumed else set()
            resume.pending = {tag for tag in held_out if tag in resumed}
            self._resumes[conn.connection_id] = resume
        if out.ok:
            for tag, (topic, payload) in held_out.items():
                if tag not in sending.unsettled:
                    sending.add_unsettled(tag)  # sent again as a new delivery
                if tag not in inflight:
                    resume.resent += 1
                    self.owner.resend(conn, tag, topic, payload)
        if into.ok:
            for tag, (_, payload) in held_in.items():
                self.owner.handle_again(conn, tag, payload)
                resume.handled += 1
        resume.attaching = False
        self._end_resume_if_settled(conn.connection_id)
        self._steal_interval = STEAL_CHECK_S
        if self._steal_check is None:
            self._steal_check = asyncio.get_running_loop().call_later(STEAL_CHECK_S, self._check_steals)

    @staticmethod
    def _attach(link: Link, conn: MqttConnection, local: Terminus, remote: Terminus, recover: bool,
                **kwargs: Any) -> AttachOutcome:
        """Attach one link of the connection with its own terminus ``local``, or first by link
        name alone (``recover``): seed 004, "When Attaching with a null Source or Target the
        existing Terminus should be easily recovered from the Link name"; a session must
        "detach link if terminus is not created/found upon Attach (rejecting link)", and
        then establishes it with the terminus it has."""
        def attach(mine: Terminus | None) -> AttachOutcome:
            source, target = (mine, remote) if link.role == "sending" else (remote, mine)
            return link.attach(conn.connection_id, source, target, **kwargs)

        if recover:
            out = attach(None)
            if out.mode != REJECT or out.error is None or out.error.condition != ERR_NOT_FOUND:
                return out
        return attach(local)

    def _check_steals(self) -> None:
        """A connection whose session another runtime took is dropped (its on_stolen), and
        paho reconnects it: on amqtt too, twins keep taking the session from each other."""
        self._steal_check = None
        if self._closed:
            return
        # Only a holder's write of a link record can steal a link: a store whose records
        # nobody wrote since the last check is not read again (the reads were a third of
        # a 300-controller fleet's CPU, four a second per controller).
        store = self.registry.store
        generation = store.link_generation() if isinstance(store, SqliteLinkStore) else None
        if generation is None or generation != self._checked_generation:
            self._checked_generation = generation  # read before the store: a write after it counts next time
            self.registry.refresh()
            self._steal_interval = STEAL_CHECK_S
        else:
            self._steal_interval = min(self._steal_interval * 2, STEAL_CHECK_MAX_S)
        self._steal_check = asyncio.get_running_loop().call_later(self._steal_interval, self._check_steals)

    def lost(self, conn: MqttConnection) -> None:
        """The connection dropped; paho is reconnecting. Like a broker that only gives up on
        a connection after its keep-alive, the link stays attached to it for a grace
        period: a reconnect reattaches, another connection attaching meanwhile steals it
        (which is how a takeover looks from here), and otherwise it is suspended."""
        if self._closed:
            return
        self._end_resume(conn.connection_id)
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
        if self._closed:
            return
        self._end_resume(conn.connection_id)
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
        """PUBACK: the broker has the delivery; it is settled."""
        if self._closed:
            return
        tag = self._inflight.get(conn.connection_id, {}).pop(mid, None)
        if tag is None:
            return
        self.registry.get_sending_link(conn.gbid, conn.client_id).settle(tag)
        self.outbox.delete(OUTGOING, conn.gbid, tag)
        resume = self._resumes.get(conn.connection_id)
        if resume is not None and tag in resume.pending:
            resume.pending.discard(tag)
            resume.settled += 1
            self._end_resume_if_settled(conn.connection_id)

    def discard(self, conn: MqttConnection, tag: str) -> None:
        """A held outgoing delivery that can never be sent: settle it and forget its bytes."""
        self.registry.get_sending_link(conn.gbid, conn.client_id).settle(tag)
        self.outbox.delete(OUTGOING, conn.gbid, tag)
        resume = self._resumes.get(conn.connection_id)
        if resume is not None and tag in resume.pending:
            resume.pending.discard(tag)  # not settled by the broker: not counted
            self._end_resume_if_settled(conn.connection_id)

    def _end_resume_if_settled(self, connection_id: str) -> None:
        resume = self._resumes.get(connection_id)
        if resume is not None and not resume.attaching and not resume.pending:
            self._end_resume(connection_id)

    def _end_resume(self, connection_id: str) -> None:
        """Trace the resume under way on a connection: what the outbox re-sent, what the
        broker acknowledged of what was resumed, what was handled again."""
        resume = self._resumes.pop(connection_id, None)
        if resume is not None:
            self.owner.emit(
                "link.resume", gbid=resume.gbid, client_id=resume.client_id, role="sending",
                conn=connection_id, resent=resume.resent, settled=resume.settled,
                handled=resume.handled,
            )

    def handled(self, conn: MqttConnection, tag: str) -> None:
        self.registry.get_receiving_link(conn.gbid, conn.client_id).settle(tag)
        self.outbox.delete(INCOMING, conn.gbid, tag)
