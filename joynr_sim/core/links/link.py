"""One link's operations: attach (establish, reattach, resume, recover, steal, reject),
detach, and its unsettled deliveries. Links come from ``LinkRegistry``.

Link.attach decides one mode (checked in this order):
  reject     recover with nothing stored (amqp:not-found), or the store could not be read
             or written (amqp:internal-error); owner, terminus and stored record stay as
             the store has them
  steal      attached on another connection: that owner is detached with amqp:link:stolen
             and told through the on_stolen it gave at attach (an owner of another
             holder's registry: when that registry next looks, see refresh)
  recover    null local terminus: the stored one is used
  establish  nothing stored, or the peer kept no state of the link (an MQTT broker that
             lost the session): nothing is resumed, what was unsettled is sent again as
             new deliveries (see restart_deliveries)
  resume     stored terminus and no link endpoint (the link is suspended: it was detached,
             or its process is gone): a new endpoint, the unsettled deliveries reconciled
             per delivery tag (see reconcile), even when there are none
  reattach   stored terminus and the link endpoint exists: attached on this very
             connection (a connection that comes back before its loss was noticed);
             the endpoint keeps its deliveries, nothing is reconciled
This is the seed's receiveAttach: resume or reattach is decided by whether the link
endpoint still exists, never by the unsettled state (``links:resume-by-unsettled`` does
that). A detach ends the endpoint: in joynr-sim a link is detached only when its
connection's session is over (lost, taken over, closed), so no detached endpoint is kept.
A steal or recover can resume too: the outcome's recovered/resumed flags say so.

Registries of other holders (processes) may share the store: attach, detach, purge and
refresh first bring the link up to its record in the store (``_sync``, in ``record``), so
the connection the record names is the owner wherever it was attached.

What a link holds and its views are in ``state``, its record in the store (and the
registry's refresh and expiry against it) in ``record``, its turn in ``turn``; this module
holds only what a connection drives: attach, detach and deliveries.

Locking, and why it cannot deadlock: see the package doc.
"""

from __future__ import annotations

from collections.abc import Mapping

from .events import (
    LinkAttached,
    LinkDetached,
    LinkEvent,
    LinkRecovered,
    LinkResumed,
    LinkStolen,
    StolenCallback,
)
from .model import (
    ERR_INTERNAL,
    ERR_NOT_FOUND,
    ERR_RESOURCE_LOCKED,
    ERR_STOLEN,
    ESTABLISH,
    REATTACH,
    RECOVER,
    REJECT,
    RESUME,
    STEAL,
    AttachMode,
    AttachOutcome,
    DetachOutcome,
    LinkError,
    LinkErrorCondition,
    LinkStateError,
    Terminus,
    TerminusDurability,
    validate_connection_id,
    validate_delivery_state,
    validate_delivery_tag,
    validate_unsettled,
)
from .reconcile import reconcile, restart_deliveries
from .record import MIRRORED, LinkRecord
from .store import LinkStoreError
from .variants import NO_RECOVER, NO_REJECT, RESUME_BY_UNSETTLED, STEAL_REFUSED


class Link(LinkRecord):
    """One link: its local terminus, remote terminus, owner and unsettled deliveries.

    Get it from LinkRegistry.get_sending_link / get_receiving_link, never construct it.
    """

    def attach(
        self,
        connection_id: str,
        source: Terminus | None,
        target: Terminus | None,
        unsettled: Mapping[str, str | None] | None = None,
        on_stolen: StolenCallback | None = None,
        *,
        peer_kept_state: bool = True,
    ) -> AttachOutcome:
        """Attach the link on a connection; see the module doc for the modes.

        source and target are as in the attach frame: the local terminus is the source of
        a sending link and the target of a receiving one; None there asks to recover the
        stored terminus. unsettled is the peer's unsettled map (None: the attach carried
        none). on_stolen is called with the LinkDetached event when another connection
        steals the link from this one: at once if it is a connection of this registry,
        else at this registry's next refresh. peer_kept_state False:
        the peer has no state of the link (an MQTT CONNACK with session present 0), so
        the attach establishes it and carries no unsettled map.
        """
        connection_id = validate_connection_id(connection_id)
        for name, value in (("source", source), ("target", target)):
            if value is not None and not isinstance(value, Terminus):
                raise LinkError(name, value, "expected a Terminus or None")
        peer = None if unsettled is None else validate_unsettled(unsettled)
        if on_stolen is not None and not callable(on_stolen):
            raise LinkError("on_stolen", on_stolen, "expected a callable or None")
        if not isinstance(peer_kept_state, bool):
            raise LinkError("peer_kept_state", peer_kept_state, "expected a bool")
        if not peer_kept_state and peer is not None:
            raise LinkError("unsettled", unsettled, "a peer that kept no state has no unsettled map")
        local, remote = (source, target) if self.role == "sending" else (target, source)
        outcome = None
        with self._turn:
            if not self._removed:
                outcome = self._attach_in_turn(
                    connection_id, local, remote, peer, on_stolen, peer_kept_state
                )
        if outcome is None:  # closed or purged meanwhile: the key lives on in a new Link
            return self._registry._link(self.key).attach(
                connection_id, source, target, unsettled, on_stolen,
                peer_kept_state=peer_kept_state,
            )
        self._registry._drain()
        return outcome

    def _attach_in_turn(
        self,
        conn: str,
        local: Terminus | None,
        remote: Terminus | None,
        peer: dict[str, str | None] | None,
        on_stolen: StolenCallback | None,
        peer_kept_state: bool,
    ) -> AttachOutcome:
        reg = self._registry
        now = reg._clock()
        events: list[LinkEvent] = []

        def reject(condition: str, description: str) -> AttachOutcome:
            error = LinkErrorCondition(condition, description)
            held = self._terminus
            events.append(LinkAttached(now, self.key, conn, REJECT,
                                       None if held is None else held.durability, condition))
            reg._enqueue(events)
            return AttachOutcome(REJECT, self.key, conn, held, error=error)

        variant = reg.variant
        try:
            self._sync(now, events)
        except LinkStoreError as e:
            if variant != NO_REJECT:
                return reject(ERR_INTERNAL, f"link store: {e}")
            # links:no-reject: attached from what memory holds (the failure is an event)
        stored, owner = self._terminus, self._owner
        if local is None:
            if stored is None and variant == NO_REJECT:
                terminus, recovered = Terminus(), False  # attached to nothing, kept nowhere
            elif stored is None:
                return reject(ERR_NOT_FOUND, f"no terminus to recover for link {self.link_name!r}")
            elif variant == NO_RECOVER:
                return reject(ERR_NOT_FOUND, f"no terminus given for link {self.link_name!r}, "
                                             "and termini are not looked up by link name")
            else:
                terminus, recovered = stored, True
        else:
            terminus, recovered = reg._effective(local), False
        held = self._unsettled if stored is not None else {}
        peer_only: tuple[str, ...] = ()
        if peer_kept_state:
            resend, settled, peer_only, remaining = reconcile(self.role, held, peer or {})
        else:
            resend, settled, remaining = restart_deliveries(self.role, held)
        if owner is not None and owner != conn:
            if variant == STEAL_REFUSED:
                return reject(ERR_RESOURCE_LOCKED, f"link {self.link_name!r} is attached on another connection")
            mode: AttachMode = STEAL
        elif recovered:
            mode = RECOVER
        elif stored is None or not peer_kept_state:
            mode = ESTABLISH
        elif variant == RESUME_BY_UNSETTLED:
            mode = RESUME if peer is not None or held else REATTACH
        elif owner == conn:
            mode = REATTACH  # the link endpoint exists: this connection's
        else:
            mode = RESUME  # a suspended link: a terminus without a link endpoint
        # What was unsettled is reconciled for a new link endpoint: always on a resume (even an
        # empty map), on a steal or recover when there is something to reconcile; never on a
        # reattach, whose endpoint keeps its deliveries, nor with a peer that kept nothing.
        if not peer_kept_state or stored is None or mode == REATTACH:
            resumed = False
        elif mode == RESUME:
            resumed = True
        else:
            resumed = peer is not None or bool(held)

        record = self._record(terminus, remaining, conn)
        try:
            self._write(record, now, events)
        except LinkStoreError as e:
            if variant != NO_REJECT:
                return reject(ERR_INTERNAL, f"link store: {e}")
            # links:no-reject: attached in memory only (the failure is an event)

        victim, victim_callback = owner, self._on_stolen
        with self._cond:
            self._terminus = terminus
            if remote is not None or mode == ESTABLISH:
                self._remote = remote
            self._owner = conn
            self._on_stolen = on_stolen
            self._unsettled = remaining
            self._detached_since_ms = None
        if mode == STEAL:
            assert victim is not None
            detached = LinkDetached(now, self.key, victim, False, ERR_STOLEN, conn)
            events.append(detached)
            events.append(LinkStolen(now, self.key, victim, conn))
        events.append(LinkAttached(now, self.key, conn, mode, terminus.durability))
        if resumed:
            events.append(LinkResumed(now, self.key, conn, len(resend), len(settled)))
        if recovered:
            events.append(LinkRecovered(now, self.key, conn, terminus.durability))
        reg._enqueue(events)
        if mode == STEAL and victim_callback is not None:
            reg._enqueue_call(victim_callback, detached)
        return AttachOutcome(
            mode, self.key, conn, terminus, resend, settled, peer_only,
            stolen_from=victim if mode == STEAL else None,
            recovered=recovered, resumed=resumed,
        )

    def detach(
        self, connection_id: str, closed: bool = False, error: str | None = None
    ) -> DetachOutcome:
        """Detach from a connection: suspended (terminus and unsettled state kept) or closed
        (the link is removed and its durable record deleted). A connection that does not
        own the link (e.g. one it was stolen from) changes nothing."""
        connection_id = validate_connection_id(connection_id)
        if not isinstance(closed, bool):
            raise LinkError("closed", closed, "expected a bool")
        if error is not None and not isinstance(error, str):
            raise LinkError("error", error, "expected an error condition string or None")
        reg = self._registry
        with self._turn:
            now = reg._clock()
            events: list[LinkEvent] = []
            try:
                self._sync(now, events)
            except LinkStoreError:
                pass  # the failure is an event; the connection is gone either way
            if self._removed or self._owner != connection_id:
                reg._enqueue(events)
                outcome = DetachOutcome(self.key, connection_id, False, closed)
            else:
                outcome = self._detach_in_turn(connection_id, closed, error, now, events)
        reg._drain()
        return outcome

    def _detach_in_turn(
        self, connection_id: str, closed: bool, error: str | None, now: int, events: list[LinkEvent]
    ) -> DetachOutcome:
        reg = self._registry
        failure = None
        assert self._terminus is not None
        try:
            # Suspended: the record stays, naming no connection. Closed: it goes.
            self._write(None if closed else self._record(self._terminus, self._unsettled, None),
                        now, events)
        except LinkStoreError as e:
            # The connection is gone either way: keep the link suspended (in memory), so
            # a later close can still delete the record.
            closed = False
            failure = LinkErrorCondition(ERR_INTERNAL, f"link store: {e}")
        with self._cond:
            self._owner = None
            self._on_stolen = None
            self._detached_since_ms = now
            if closed:
                self._terminus = self._remote = None
                self._unsettled = {}
                self._removed = True
        if closed:
            reg._forget(self)
        events.append(LinkDetached(now, self.key, connection_id, closed, error))
        reg._enqueue(events)
        return DetachOutcome(self.key, connection_id, True, closed, failure)

    def add_unsettled(self, tag: str, state: str | None = None) -> None:
        """Track a delivery (or update its state) until it is settled; at durability 2 the
        store holds it too. The link must be attached."""
        tag = validate_delivery_tag(tag)
        state = validate_delivery_state(state)
        with self._turn:
            if self._removed or self._owner is None:
                raise LinkStateError("link", self, "is not attached, no delivery can be added")
            assert self._terminus is not None
            if self._terminus.durability == TerminusDurability.UNSETTLED_STATE:
                self._registry._store_call(
                    "put_unsettled", self.role, self.remote_container_id, self.link_name,
                    tag, state,
                )
            with self._cond:
                self._unsettled[tag] = state
                if self._stored is not None:
                    self._stored = MIRRORED

    def settle(self, tag: str) -> bool:
        """Settle a delivery; False when the link does not track that tag."""
        tag = validate_delivery_tag(tag)
        with self._turn:
            if tag not in self._unsettled:
                return False
            assert self._terminus is not None
            if self._terminus.durability == TerminusDurability.UNSETTLED_STATE:
                self._registry._store_call(
                    "remove_unsettled", self.role, self.remote_container_id, self.link_name, tag
                )
            with self._cond:
                del self._unsettled[tag]
                if self._stored is not None:
                    self._stored = MIRRORED
            return True
