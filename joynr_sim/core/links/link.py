"""One link and its operations: attach (establish, reattach, resume, recover, steal,
reject), detach, unsettled deliveries, expiry. Links come from ``LinkRegistry``.
Longer than 400 lines because every operation runs in the same turn on the same state
(one lock, one record), which reads best in one place.

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
  resume     stored terminus, and the attach carried an unsettled map or deliveries are
             unsettled here: reconciled per delivery tag (see reconcile)
  reattach   stored terminus, no unsettled state
A steal or recover can resume too: the outcome's recovered/resumed flags say so.

Registries of other holders (processes) may share the store: attach, detach, purge and
refresh first bring the link up to its record in the store (``_sync``), so the connection
the record names is the owner wherever it was attached.

Locking, and why it cannot deadlock: see the package doc.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import TYPE_CHECKING

from .events import (
    LinkAttached,
    LinkDetached,
    LinkEvent,
    LinkExpired,
    LinkRecovered,
    LinkResumed,
    LinkStolen,
    LinkStored,
    StolenCallback,
)
from .model import (
    ERR_INTERNAL,
    ERR_NOT_FOUND,
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
    LinkKey,
    LinkStateError,
    Role,
    Terminus,
    TerminusDurability,
    validate_connection_id,
    validate_delivery_state,
    validate_delivery_tag,
    validate_unsettled,
)
from .reconcile import reconcile, restart_deliveries
from .store import LinkStoreError, StoredLink

if TYPE_CHECKING:  # pragma: no cover
    from .registry import LinkRegistry

_MIRRORED = object()  # Link._stored: the record of the link as it is in memory


class Link:
    """One link: its local terminus, remote terminus, owner and unsettled deliveries.

    Get it from LinkRegistry.get_sending_link / get_receiving_link, never construct it.
    """

    def __init__(self, registry: LinkRegistry, key: LinkKey) -> None:
        self._registry = registry
        self.key = key
        self._cond = threading.Condition(threading.Lock())
        self._next_ticket = 0
        self._serving = 0
        # Threads in _cond.wait: with none (a link used from one event loop, every MQTT
        # publish and PUBACK) a turn notifies nobody, which was most of its cost.
        self._waiters = 0
        self._turn_lock = _Turn(self)
        # State below: changed only in a turn, and under _cond so readers see it whole.
        self._terminus: Terminus | None = None
        self._remote: Terminus | None = None
        self._owner: str | None = None
        self._on_stolen: StolenCallback | None = None
        self._unsettled: dict[str, str | None] = {}
        self._detached_since_ms: int | None = registry._clock()
        # What the store holds for this link; _MIRRORED: the record of the link's own terminus,
        # deliveries and owner, built when compared (a delivery added or settled changes the
        # store row by row: rebuilding the record each time sorted every delivery in flight).
        self._stored: StoredLink | object | None = None
        self._removed = False  # purged or closed: the registry holds a new Link for the key

    # -- inspection -----------------------------------------------------------------
    @property
    def role(self) -> Role:
        return self.key.role

    @property
    def link_name(self) -> str:
        return self.key.link_name

    @property
    def local_container_id(self) -> str:
        return self.key.local_container_id

    @property
    def remote_container_id(self) -> str:
        return self.key.remote_container_id

    @property
    def terminus(self) -> Terminus | None:
        with self._cond:
            return self._terminus

    @property
    def source(self) -> Terminus | None:
        with self._cond:
            return self._terminus if self.role == "sending" else self._remote

    @property
    def target(self) -> Terminus | None:
        with self._cond:
            return self._remote if self.role == "sending" else self._terminus

    @property
    def owner(self) -> str | None:
        """The connection the link is attached on, None while detached."""
        with self._cond:
            return self._owner

    @property
    def is_attached(self) -> bool:
        return self.owner is not None

    @property
    def unsettled(self) -> dict[str, str | None]:
        with self._cond:
            return dict(self._unsettled)

    @property
    def detached_since_ms(self) -> int | None:
        with self._cond:
            return self._detached_since_ms

    @property
    def removed(self) -> bool:
        with self._cond:
            return self._removed

    def pending(self) -> int:
        """Operations holding or waiting for this link's turn (the thief queue)."""
        with self._cond:
            return self._next_ticket - self._serving

    def wait_pending(self, count: int, timeout: float) -> bool:
        """Wait until at least count operations hold or wait for the turn."""
        with self._cond:
            self._waiters += 1
            try:
                return self._cond.wait_for(lambda: self._next_ticket - self._serving >= count, timeout)
            finally:
                self._waiters -= 1

    def __repr__(self) -> str:
        k = self.key
        return f"Link({k.role}, {k.remote_container_id!r}, {k.link_name!r}, owner={self.owner!r})"

    # -- the turn: a FIFO ticket lock ------------------------------------------------
    def _turn(self) -> _Turn:
        return self._turn_lock


    # -- operations -----------------------------------------------------------------
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
        with self._turn():
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

        try:
            self._sync(now, events)
        except LinkStoreError as e:
            return reject(ERR_INTERNAL, f"link store: {e}")
        stored, owner = self._terminus, self._owner
        if local is None:
            if stored is None:
                return reject(ERR_NOT_FOUND, f"no terminus to recover for link {self.link_name!r}")
            terminus, recovered = stored, True
        else:
            terminus, recovered = reg._effective(local), False
        held = self._unsettled if stored is not None else {}
        peer_only: tuple[str, ...] = ()
        if peer_kept_state:
            resumed = stored is not None and (peer is not None or bool(held))
            resend, settled, peer_only, remaining = reconcile(self.role, held, peer or {})
        else:
            resumed = False
            resend, settled, remaining = restart_deliveries(self.role, held)
        if owner is not None and owner != conn:
            mode: AttachMode = STEAL
        elif recovered:
            mode = RECOVER
        elif stored is None or not peer_kept_state:
            mode = ESTABLISH
        elif resumed:
            mode = RESUME
        else:
            mode = REATTACH

        record = self._record(terminus, remaining, conn)
        try:
            self._write(record, now, events)
        except LinkStoreError as e:
            return reject(ERR_INTERNAL, f"link store: {e}")

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
        with self._turn():
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
        with self._turn():
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
                    self._stored = _MIRRORED

    def settle(self, tag: str) -> bool:
        """Settle a delivery; False when the link does not track that tag."""
        tag = validate_delivery_tag(tag)
        with self._turn():
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
                    self._stored = _MIRRORED
            return True

    # -- helpers (in a turn) ----------------------------------------------------------
    def _stored_record(self) -> StoredLink | None:
        if self._stored is _MIRRORED:
            assert self._terminus is not None
            self._stored = self._record(self._terminus, self._unsettled, self._owner)
        return self._stored  # type: ignore[return-value]

    def _record(
        self, terminus: Terminus, unsettled: Mapping[str, str | None], owner: str | None
    ) -> StoredLink | None:
        """What the store should hold for this terminus, per its durability, attached on
        owner (None: suspended)."""
        if terminus.durability == TerminusDurability.NONE:
            return None
        pairs = (
            tuple(sorted(unsettled.items()))
            if terminus.durability == TerminusDurability.UNSETTLED_STATE
            else ()
        )
        holder = None if owner is None else self._registry.holder
        return StoredLink(self.role, self.remote_container_id, self.link_name, terminus, pairs,
                          owner, holder)

    def _sync(self, now: int, events: list[LinkEvent]) -> None:
        """Bring the link up to its record in the store, which a registry of another holder
        sharing the store may have changed since this one last read or wrote it.

        The connection the record names is the owner. A connection of this registry that
        it no longer names lost the link meanwhile (stolen, or closed or expired by the
        other holder): it is detached here, without its on_stolen (only refresh calls that:
        here it may be the very connection attaching again). When reading the store
        raises, memory is unchanged and the failure is an event."""
        reg = self._registry
        store = reg.store
        if store is None or reg.max_durability == TerminusDurability.NONE:
            return  # nothing is stored, so nothing is shared
        try:
            record = store.find(self.role, self.remote_container_id, self.link_name)
        except LinkStoreError as e:
            events.append(LinkStored(now, self.key, "find", None, False, str(e)))
            raise
        if record == self._stored_record():
            return
        owner = reg._live_owner(record, self._owner)
        if self._owner is not None and owner != self._owner:
            events.append(LinkDetached(now, self.key, self._owner, False,
                                       None if owner is None else ERR_STOLEN, owner))
        terminus = None if record is None else reg._effective(record.terminus)
        with self._cond:
            if owner != self._owner:
                self._on_stolen = None
                self._detached_since_ms = now if owner is None else None
            self._owner = owner
            self._terminus = terminus
            if record is None:
                self._unsettled = {}
            elif terminus is not None and terminus.durability == TerminusDurability.UNSETTLED_STATE:
                self._unsettled = dict(record.unsettled)
            self._stored = record

    def _write(self, record: StoredLink | None, now: int, events: list[LinkEvent]) -> None:
        """Bring the store to record (None: nothing stored); store and memory are unchanged
        when it raises."""
        store = self._registry.store
        if store is None or record == self._stored_record():
            return
        op = "save" if record is not None else "delete"
        durability = record.terminus.durability if record is not None else None
        try:
            if record is not None:
                store.save(record)
            else:
                store.delete(self.role, self.remote_container_id, self.link_name)
        except LinkStoreError as e:
            events.append(LinkStored(now, self.key, op, durability, False, str(e)))
            raise
        with self._cond:
            self._stored = record
        events.append(LinkStored(now, self.key, op, durability, True))

    def _refresh(self) -> None:
        """Look in the store whether a connection of another holder took the link from the
        connection of this registry that has it; if so, detach that connection here and
        tell it through its on_stolen (its broker may not have closed it: amqtt 0.12 keeps
        both). Read failures are events; the link stays as it was."""
        reg = self._registry
        with self._turn():
            if self._removed or self._owner is None:
                return
            owner, callback = self._owner, self._on_stolen
            events: list[LinkEvent] = []
            try:
                self._sync(reg._clock(), events)
            except LinkStoreError:
                pass
            reg._enqueue(events)
            if self._owner not in (owner, None) and callback is not None:
                for event in events:
                    if isinstance(event, LinkDetached) and event.connection_id == owner:
                        reg._enqueue_call(callback, event)

    def _purge_if_expired(self, now_ms: int, timeout_ms: int) -> bool:
        reg = self._registry
        with self._turn():
            events: list[LinkEvent] = []
            try:
                self._sync(now_ms, events)
            except LinkStoreError:
                reg._enqueue(events)  # the failure is an event; the link stays
                return False
            since = self._detached_since_ms
            if (self._removed or self._owner is not None or since is None
                    or now_ms - since <= timeout_ms):
                reg._enqueue(events)
                return False
            try:
                self._write(None, now_ms, events)
            except LinkStoreError:
                reg._enqueue(events)  # the failure is an event; the link stays
                return False
            with self._cond:
                self._removed = True
            reg._forget(self)
            events.append(LinkExpired(now_ms, self.key, since, timeout_ms))
            reg._enqueue(events)
            return True


class _Turn:
    """A link's turn, entered and left as a context manager; one object per link, as a turn
    needs no state of its own (a generator-based context manager was made per operation)."""

    __slots__ = ("_link",)

    def __init__(self, link: Link) -> None:
        self._link = link

    def __enter__(self) -> None:
        link = self._link
        cond = link._cond
        with cond:
            ticket = link._next_ticket
            link._next_ticket += 1
            if link._waiters:
                cond.notify_all()  # wake wait_pending
            if link._serving != ticket:
                link._waiters += 1
                try:
                    while link._serving != ticket:
                        cond.wait()
                finally:
                    link._waiters -= 1

    def __exit__(self, *exc_info: object) -> None:
        link = self._link
        with link._cond:
            link._serving += 1
            if link._waiters:
                link._cond.notify_all()
