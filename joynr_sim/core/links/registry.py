"""The link registry: one Link per key, the termini it persists, the expiry of detached links,
and the ordered delivery of its events.

A registry is the memory of one process; its store is what outlives the process. A
restarted process opens a new registry over the same store (``reopen``) that knows only
what the store kept, as much as the store's terminus durability allows. Registries of
different processes (holders) may share one store: each link's record names the
connection it is attached on, and a registry reads it before every attach, detach and
purge of the link, so a link stays attached on one connection however many processes
attach it (see ``joynr_sim.core.links.link``)."""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from .events import LinkEvent, LinkStored, Listener
from .link import Link
from .model import (
    ROLES,
    LinkError,
    LinkKey,
    Role,
    Terminus,
    TerminusDurability,
    validate_container_id,
    validate_link_name,
)
from .store import LinkStore, LinkStoreError, StoredLink
from .turn import LastComerTurn, Turn
from .variants import NO_DETACHED_TIMEOUT, NO_THIEF_QUEUE, UNCAPPED_DURABILITY, validate_link_variant

log = logging.getLogger(__name__)


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


class LinkRegistry:
    """Ensures one Link per key and persists termini per their durability.

    store: a LinkStore; the links it holds are loaded at once, suspended unless their
    record names a connection of another holder. Durability above what the store can keep
    (its max_durability; 0 without a store) is lowered, as AMQP lets the attach's receiver
    do. clock: epoch ms, thread-safe. detached_timeout_ms: links detached longer than this
    are removed by purge_expired (None: never). link_name_validator: e.g.
    validate_mqtt_client_id for links named by MQTT client ids. holder: the process this
    registry belongs to, the same across its restarts and distinct for every process that
    shares the store (None: no other process shares it). variant: a link variant's name
    (``core.links.variants``) this registry follows instead of the seed's rule it breaks;
    None: the seed's rules.
    """

    def __init__(
        self,
        store: LinkStore | None = None,
        clock: Callable[[], int] = wall_clock_ms,
        detached_timeout_ms: int | None = None,
        container_id: str = "joynr-sim",
        link_name_validator: Callable[[object, str], str] = validate_link_name,
        listeners: tuple[Listener, ...] | list[Listener] = (),
        holder: str | None = None,
        variant: str | None = None,
    ) -> None:
        self.variant = validate_link_variant(variant)
        self.container_id = validate_container_id(container_id, "container_id")
        self.holder = None if holder is None else validate_container_id(holder, "holder")
        if detached_timeout_ms is not None and (
            isinstance(detached_timeout_ms, bool)
            or not isinstance(detached_timeout_ms, int)
            or detached_timeout_ms < 0
        ):
            raise LinkError("detached_timeout_ms", detached_timeout_ms,
                            "expected a non-negative int or None")
        if not callable(clock):
            raise LinkError("clock", clock, "expected a callable returning epoch ms")
        if store is not None:
            advertised = getattr(store, "max_durability", None)
            if isinstance(advertised, bool) or advertised not in (0, 1, 2):
                raise LinkError("store.max_durability", advertised, "expected 0, 1 or 2")
        self.store = store
        self.detached_timeout_ms = detached_timeout_ms
        self._clock = clock
        self._validate_link_name = link_name_validator
        self._lock = threading.Lock()  # the map; a leaf lock
        self._links: dict[LinkKey, Link] = {}
        self._listeners: list[Listener] = list(listeners)
        self._events_lock = threading.Lock()  # a leaf lock
        self._events: deque[tuple[Callable[[Any], None], LinkEvent]] = deque()
        self._draining = False
        if store is not None:
            self._load(store)

    @property
    def max_durability(self) -> int:
        """The highest terminus durability this registry grants: what its store can keep."""
        return 0 if self.store is None else int(self.store.max_durability)

    def reopen(self, holder: str | None = None) -> LinkRegistry:
        """The registry a (re)started process opens: the same store and settings, and
        nothing of this object's memory (links, owners, listeners) but what the store
        kept. holder: the process it belongs to (default: this registry's)."""
        return LinkRegistry(
            store=self.store,
            clock=self._clock,
            detached_timeout_ms=self.detached_timeout_ms,
            container_id=self.container_id,
            link_name_validator=self._validate_link_name,
            holder=self.holder if holder is None else holder,
            variant=self.variant,
        )

    # -- public API -------------------------------------------------------------------
    def get_sending_link(self, remote_container_id: str, link_name: str) -> Link:
        """The link that sends to remote_container_id; always the same object per key."""
        return self._link(self._key("sending", remote_container_id, link_name))

    def get_receiving_link(self, remote_container_id: str, link_name: str) -> Link:
        """The link that receives from remote_container_id; always the same object per key."""
        return self._link(self._key("receiving", remote_container_id, link_name))

    def find_link(self, role: Role, remote_container_id: str, link_name: str) -> Link | None:
        """The registered link for a key, without registering one."""
        key = self._key(role, remote_container_id, link_name)
        with self._lock:
            return self._links.get(key)

    def links(self) -> list[Link]:
        with self._lock:
            return list(self._links.values())

    def __len__(self) -> int:
        with self._lock:
            return len(self._links)

    def purge_expired(self, now_ms: int) -> list[Link]:
        """Remove links detached longer than detached_timeout_ms (and their durable
        records); returns them."""
        if isinstance(now_ms, bool) or not isinstance(now_ms, int):
            raise LinkError("now_ms", now_ms, "expected epoch ms as int")
        if self.detached_timeout_ms is None or self.variant == NO_DETACHED_TIMEOUT:
            return []
        purged = [
            link for link in self.links()
            if link._purge_if_expired(now_ms, self.detached_timeout_ms)
        ]
        self._drain()
        return purged

    def refresh(self) -> None:
        """Bring every link attached here up to the store: a link that a registry of another
        holder attached meanwhile is detached from this registry's connection, which is told
        through its on_stolen. (Attach, detach and purge read the store anyway; this is for
        a connection that would otherwise not learn of the steal until it next attaches.)"""
        for link in self.links():
            link._refresh()
        self._drain()

    def add_listener(self, listener: Listener) -> None:
        with self._events_lock:
            self._listeners.append(listener)

    def remove_listener(self, listener: Listener) -> None:
        with self._events_lock:
            if listener in self._listeners:
                self._listeners.remove(listener)

    # -- internals ----------------------------------------------------------------------
    def _key(self, role: Role, remote_container_id: object, link_name: object) -> LinkKey:
        remote = validate_container_id(remote_container_id, "remote_container_id")
        name = self._validate_link_name(link_name, "link_name")
        return LinkKey(role, self.container_id, remote, name)

    def _link(self, key: LinkKey) -> Link:
        with self._lock:
            link = self._links.get(key)
            if link is None:
                link = self._links[key] = Link(self, key)
            return link

    def _forget(self, link: Link) -> None:
        with self._lock:
            if self._links.get(link.key) is link:
                del self._links[link.key]

    def _new_turn(self) -> Turn | LastComerTurn:
        return LastComerTurn() if self.variant == NO_THIEF_QUEUE else Turn()

    def _effective(self, terminus: Terminus) -> Terminus:
        """The terminus as granted: its durability lowered to what the store keeps."""
        if terminus.durability <= self.max_durability or self.variant == UNCAPPED_DURABILITY:
            return terminus
        return terminus.with_durability(self.max_durability)

    def _live_owner(self, record: StoredLink | None, known: str | None) -> str | None:
        """The connection a stored record says its link is attached on; None when it names
        none, or names a connection of this registry's own holder that this registry does
        not know (``known`` is the owner it knows): one its previous process had, gone with
        that process, as a broker drops the connections of a process that died."""
        if record is None or record.owner is None:
            return None
        if record.holder == self.holder and record.owner != known:
            return None
        return record.owner

    def _store_call(self, method: str, *args: Any) -> None:
        assert self.store is not None
        getattr(self.store, method)(*args)

    def _load(self, store: LinkStore) -> None:
        now = self._clock()
        try:
            records = store.load()
        except LinkStoreError as e:
            self._enqueue([LinkStored(now, None, "load", None, False, str(e), 0)])
            self._drain()
            raise
        for record in records:
            if record.role not in ROLES:
                raise LinkStoreError(f"role: expected one of {ROLES}, got {record.role!r}")
            key = self._key(record.role, record.remote_container_id, record.link_name)
            terminus = self._effective(record.terminus)
            if terminus.durability == TerminusDurability.NONE:
                continue  # never persisted by a registry; nothing to keep
            link = self._link(key)
            link._terminus = terminus
            if terminus.durability == TerminusDurability.UNSETTLED_STATE:
                link._unsettled = dict(record.unsettled)
            link._owner = self._live_owner(record, None)
            link._detached_since_ms = None if link._owner is not None else now
            link._stored = record
        self._enqueue([LinkStored(now, None, "load", None, True, None, len(records))])
        self._drain()

    # Events: enqueued in a turn, in transition order; delivered by whichever thread drains,
    # with no lock held, so callbacks may call back into the registry.
    def _enqueue(self, events: list[LinkEvent]) -> None:
        with self._events_lock:
            for event in events:
                for listener in self._listeners:
                    self._events.append((listener, event))

    def _enqueue_call(self, callback: Callable[[Any], None], event: LinkEvent) -> None:
        with self._events_lock:
            self._events.append((callback, event))

    def _drain(self) -> None:
        with self._events_lock:
            if self._draining:
                return  # the draining thread delivers ours too
            self._draining = True
        try:
            while True:
                with self._events_lock:
                    if not self._events:
                        self._draining = False
                        return
                    callback, event = self._events.popleft()
                try:
                    callback(event)
                except Exception:
                    log.exception("link event callback %r failed on %r", callback, event)
        except BaseException:
            with self._events_lock:
                self._draining = False
            raise
