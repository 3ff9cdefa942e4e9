"""The link registry: AMQP 1.0 links ("Design v3" of the link-registry seed) as joynr-sim
uses them for MQTT broker sessions.

A link is identified by the ordered tuple (source container id, target container id, link
name); for a sending link the source container is the local one, for a receiving link the
remote one. In joynr-sim the remote container is a GBID (one broker per GBID) and the link
name is the MQTT client id: a second CONNECT with the same client id steals the link, a
persistent session is a suspended link whose unacknowledged QoS 1 messages are its
unsettled deliveries.

The registry is pure (no I/O but the optional store, no wall clock unless none is passed)
and thread-safe.

Link.attach decides one mode (checked in this order):
  reject     recover with nothing stored (amqp:not-found), or the store write failed
             (amqp:internal-error); owner, terminus and stored record stay as they were
  steal      attached on another connection: that owner is detached with amqp:link:stolen
             and told through the on_stolen it gave at attach
  recover    null local terminus: the stored one is used
  establish  nothing stored
  resume     stored terminus, and the attach carried an unsettled map or deliveries are
             unsettled here: reconciled per delivery tag (see reconcile)
  reattach   stored terminus, no unsettled state
A steal or recover can resume too: the outcome's recovered/resumed flags say so.

Locking, and why it cannot deadlock:

* Every operation that changes a link (attach, detach, add_unsettled, settle, purge) runs
  in that link's *turn*: a FIFO ticket lock. Waiting attaches of one link are its thief
  queue, served strictly in arrival order, one at a time.
* A turn holder never waits for anything but leaf locks (the registry's map lock, the
  store's lock, the event queue's lock), never for another link's turn and never for the
  connection it steals from: the owner is detached by the registry on its behalf and told
  afterwards. So two connections stealing each other's links at once cannot wait on each
  other.
* Callbacks (listeners, ``on_stolen``) run after the turn is released, with no lock held,
  from one ordered queue: they see events in the order the transitions happened and may
  call back into the registry. They should not block.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections import deque
from collections.abc import Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from enum import IntEnum
from typing import Any, Callable, ClassVar, Iterator, Literal, Protocol

log = logging.getLogger(__name__)

Role = Literal["sending", "receiving"]
ROLES: tuple[Role, ...] = ("sending", "receiving")

AttachMode = Literal["establish", "reattach", "resume", "recover", "steal", "reject"]
ESTABLISH: AttachMode = "establish"
REATTACH: AttachMode = "reattach"
RESUME: AttachMode = "resume"
RECOVER: AttachMode = "recover"
STEAL: AttachMode = "steal"
REJECT: AttachMode = "reject"

# AMQP 1.0 error conditions (section 2.8.15 and 2.8.17).
ERR_STOLEN = "amqp:link:stolen"
ERR_NOT_FOUND = "amqp:not-found"
ERR_INTERNAL = "amqp:internal-error"

# Container ids and link names: AMQP puts no bound on them, a registry that stores them
# must. 256 bytes of UTF-8 covers GBIDs, container ids and joynr's client ids.
MAX_NAME_BYTES = 256
# MQTT 3.1.1 section 3.1.3.1: a server MUST accept 1-23 bytes of [0-9a-zA-Z]; it MAY accept
# more, up to the 65535 bytes a UTF-8 string field can hold (Mosquitto and amqtt do).
MQTT_STRICT_CLIENT_ID_MAX_BYTES = 23
MQTT_CLIENT_ID_MAX_BYTES = 65535
_MQTT_STRICT_CLIENT_ID = re.compile(r"[0-9a-zA-Z]{1,23}", re.ASCII)
# AMQP bounds delivery tags at 32 bytes; joynr message ids (the natural tag of a QoS 1
# publish) are longer, so the bound is the name bound.
MAX_DELIVERY_TAG_BYTES = MAX_NAME_BYTES
MAX_ADDRESS_BYTES = 65535

# AMQP 1.0 section 3.4 delivery states; None is "sent, no state yet".
DELIVERY_STATES: tuple[str | None, ...] = (
    None, "received", "accepted", "rejected", "released", "modified",
)
TERMINAL_STATES = frozenset({"accepted", "rejected", "released", "modified"})


class TerminusDurability(IntEnum):
    NONE = 0  # nothing survives a restart
    CONFIGURATION = 1  # the terminus survives
    UNSETTLED_STATE = 2  # the terminus and its unsettled deliveries survive


# -- errors ---------------------------------------------------------------------------


class LinkError(ValueError):
    """Bad input to the registry. Names the field and the value; nothing was changed."""

    def __init__(self, field: str, value: object, problem: str) -> None:
        self.field = field
        self.value = value
        super().__init__(f"{field}: {problem}, got {_short_repr(value)}")


class LinkStateError(LinkError):
    """An operation that the link's current state does not allow; nothing was changed."""


class LinkStoreError(Exception):
    """A link store could not be opened, read or written."""


def _short_repr(value: object, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}... ({len(text)} chars)"


# -- validation -----------------------------------------------------------------------


def _utf8_text(value: object, field: str, max_bytes: int) -> str:
    """A non-empty str of valid UTF-8 (no lone surrogates); bytes must decode strictly."""
    if isinstance(value, (bytes, bytearray)):
        try:
            value = bytes(value).decode("utf-8")
        except UnicodeDecodeError as e:
            raise LinkError(field, value, f"is not valid UTF-8 ({e.reason} at byte {e.start})")
    if not isinstance(value, str):
        raise LinkError(field, value, f"expected a string, not {type(value).__name__}")
    if not value:
        raise LinkError(field, value, "must not be empty")
    try:
        size = len(value.encode("utf-8"))
    except UnicodeEncodeError as e:
        raise LinkError(field, value, f"is not valid UTF-8 (lone surrogate at index {e.start})")
    if size > max_bytes:
        raise LinkError(field, value, f"is {size} bytes of UTF-8, longer than {max_bytes}")
    return value


def validate_container_id(value: object, field: str = "container_id") -> str:
    """1 to MAX_NAME_BYTES bytes of valid UTF-8; returns the id as str."""
    return _utf8_text(value, field, MAX_NAME_BYTES)


def validate_link_name(value: object, field: str = "link_name") -> str:
    """1 to MAX_NAME_BYTES bytes of valid UTF-8; returns the name as str."""
    return _utf8_text(value, field, MAX_NAME_BYTES)


def validate_mqtt_client_id(
    value: object, field: str = "client_id", *, strict: bool = False
) -> str:
    """An MQTT 3.1.1 client id used as a link name.

    strict: only what every server must accept, 1-23 bytes of [0-9a-zA-Z].
    Otherwise (the default) what brokers accept: 1-65535 bytes of UTF-8 without U+0000
    (section 1.5.3). Empty ids are refused in both modes: a server-assigned id has no
    session to resume, so it is never a link.
    """
    if strict:
        text = _utf8_text(value, field, MQTT_STRICT_CLIENT_ID_MAX_BYTES)
        if not _MQTT_STRICT_CLIENT_ID.fullmatch(text):
            raise LinkError(field, value, "must be 1-23 characters of [0-9a-zA-Z] (MQTT 3.1.1)")
        return text
    text = _utf8_text(value, field, MQTT_CLIENT_ID_MAX_BYTES)
    if "\x00" in text:
        raise LinkError(field, value, "must not contain U+0000 (MQTT 3.1.1 section 1.5.3)")
    return text


def validate_delivery_tag(value: object, field: str = "tag") -> str:
    return _utf8_text(value, field, MAX_DELIVERY_TAG_BYTES)


def validate_delivery_state(value: object, field: str = "state") -> str | None:
    if value not in DELIVERY_STATES or isinstance(value, bool):
        raise LinkError(field, value, f"expected one of {DELIVERY_STATES}")
    return value  # type: ignore[return-value]


def _validate_unsettled(value: object, field: str = "unsettled") -> dict[str, str | None]:
    if not isinstance(value, Mapping):
        raise LinkError(field, value, "expected a mapping of delivery tag to delivery state")
    return {
        validate_delivery_tag(tag, f"{field} tag"): validate_delivery_state(
            state, f"{field}[{tag!r}]"
        )
        for tag, state in value.items()
    }


# -- values ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Terminus:
    """A source or target: the part of a link that is stored."""

    address: str | None = None
    durability: int = TerminusDurability.NONE
    # Further attributes (for MQTT: subscriptions and their QoS), sorted (name, value) pairs.
    properties: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        if self.address is not None:
            _utf8_text(self.address, "terminus.address", MAX_ADDRESS_BYTES)
        if isinstance(self.durability, bool) or self.durability not in (0, 1, 2):
            raise LinkError("terminus.durability", self.durability, "expected 0, 1 or 2")
        object.__setattr__(self, "durability", int(self.durability))
        props = self.properties
        items = props.items() if isinstance(props, Mapping) else props
        try:
            pairs = tuple(sorted((k, v) for k, v in items))
        except (TypeError, ValueError):
            raise LinkError("terminus.properties", props, "expected (name, value) string pairs")
        for k, v in pairs:
            if not isinstance(k, str) or not isinstance(v, str):
                raise LinkError("terminus.properties", props, "expected (name, value) string pairs")
        object.__setattr__(self, "properties", pairs)

    def with_durability(self, durability: int) -> "Terminus":
        return Terminus(self.address, durability, self.properties)


Source = Terminus
Target = Terminus


@dataclass(frozen=True)
class LinkKey:
    role: Role
    local_container_id: str
    remote_container_id: str
    link_name: str

    @property
    def source_container_id(self) -> str:
        return self.local_container_id if self.role == "sending" else self.remote_container_id

    @property
    def target_container_id(self) -> str:
        return self.remote_container_id if self.role == "sending" else self.local_container_id

    def as_tuple(self) -> tuple[str, str, str]:
        """The seed's unique key: (source container id, target container id, link name)."""
        return (self.source_container_id, self.target_container_id, self.link_name)


@dataclass(frozen=True)
class StoredLink:
    """What a store holds for one link: its local terminus and, at durability 2, its
    unsettled deliveries as sorted (tag, state) pairs."""

    role: Role
    remote_container_id: str
    link_name: str
    terminus: Terminus
    unsettled: tuple[tuple[str, str | None], ...] = ()


@dataclass(frozen=True)
class Delivery:
    tag: str
    state: str | None
    resumed: bool = True  # sent again with the resume flag: the peer may have seen it


@dataclass(frozen=True)
class LinkErrorCondition:
    condition: str
    description: str


@dataclass(frozen=True)
class AttachOutcome:
    mode: AttachMode
    key: LinkKey
    connection_id: str
    terminus: Terminus | None  # the local terminus held afterwards (None: nothing held)
    resend: tuple[Delivery, ...] = ()  # to transfer again, by us (sending) or the peer
    settled: tuple[str, ...] = ()  # settled while resuming, without a resend
    peer_only: tuple[str, ...] = ()  # in the peer's unsettled map, unknown here
    stolen_from: str | None = None
    recovered: bool = False  # the local terminus came from the registry (null in attach)
    resumed: bool = False  # an existing terminus with unsettled state was reconciled
    error: LinkErrorCondition | None = None

    @property
    def ok(self) -> bool:
        return self.mode != REJECT


@dataclass(frozen=True)
class DetachOutcome:
    key: LinkKey
    connection_id: str
    detached: bool  # False: that connection did not own the link, nothing changed
    closed: bool
    error: LinkErrorCondition | None = None


# -- events ---------------------------------------------------------------------------


@dataclass(frozen=True)
class LinkEvent:
    ev: ClassVar[str] = "link"
    ts: int
    key: LinkKey | None

    def fields(self) -> dict[str, Any]:
        """The event as flat trace fields (ev, role, gbid, link, and its own)."""
        out: dict[str, Any] = {"ev": self.ev}
        if self.key is not None:
            out.update(
                role=self.key.role,
                local=self.key.local_container_id,
                remote=self.key.remote_container_id,
                link=self.key.link_name,
            )
        for name in self.__dataclass_fields__:
            if name not in ("ts", "key"):
                out[name] = getattr(self, name)
        return out


@dataclass(frozen=True)
class LinkAttached(LinkEvent):
    ev: ClassVar[str] = "link.attach"
    connection_id: str
    mode: AttachMode
    durability: int | None
    error: str | None = None


@dataclass(frozen=True)
class LinkDetached(LinkEvent):
    ev: ClassVar[str] = "link.detach"
    connection_id: str
    closed: bool
    error: str | None = None
    stolen_by: str | None = None


@dataclass(frozen=True)
class LinkStolen(LinkEvent):
    ev: ClassVar[str] = "link.steal"
    from_connection: str
    to_connection: str


@dataclass(frozen=True)
class LinkResumed(LinkEvent):
    ev: ClassVar[str] = "link.resume"
    connection_id: str
    resent: int
    settled: int


@dataclass(frozen=True)
class LinkRecovered(LinkEvent):
    ev: ClassVar[str] = "link.recover"
    connection_id: str
    durability: int


@dataclass(frozen=True)
class LinkExpired(LinkEvent):
    ev: ClassVar[str] = "link.expire"
    detached_since_ms: int
    timeout_ms: int


@dataclass(frozen=True)
class LinkStored(LinkEvent):
    ev: ClassVar[str] = "link.store"
    op: str  # load | save | delete
    durability: int | None
    ok: bool
    error: str | None = None
    count: int = 1  # links loaded (load) or written


Listener = Callable[[LinkEvent], None]
StolenCallback = Callable[[LinkDetached], None]


class LinkStore(Protocol):
    """What the registry needs of a store (see joynr_sim.store.link_store). Failures raise
    LinkStoreError."""

    max_durability: int

    def load(self) -> list[StoredLink]: ...
    def save(self, record: StoredLink) -> None: ...
    def delete(self, role: Role, remote_container_id: str, link_name: str) -> None: ...
    def put_unsettled(
        self, role: Role, remote_container_id: str, link_name: str, tag: str, state: str | None
    ) -> None: ...
    def remove_unsettled(
        self, role: Role, remote_container_id: str, link_name: str, tag: str
    ) -> None: ...


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


# -- resuming -------------------------------------------------------------------------


def reconcile(
    role: Role, local: Mapping[str, str | None], peer: Mapping[str, str | None]
) -> tuple[tuple[Delivery, ...], tuple[str, ...], tuple[str, ...], dict[str, str | None]]:
    """Reconcile the local unsettled map with the peer's on resume (AMQP 1.0 3.4.4).

    Returns (resend, settled, peer_only, still unsettled). On a sending link the peer is
    the receiver: a terminal state there settles the delivery without a resend, anything
    else (no state, received, unknown) is resent marked resumed. On a receiving link the
    peer is the sender: what it no longer knows it considers settled, so it is settled
    here too; what it still holds without a terminal state it resends.
    """
    resend: list[Delivery] = []
    settled: list[str] = []
    remaining: dict[str, str | None] = {}
    for tag in sorted(local):
        state = local[tag]
        if role == "sending":
            peer_state = peer.get(tag)
            if peer_state in TERMINAL_STATES:
                settled.append(tag)
            else:
                resend.append(Delivery(tag, state))
                remaining[tag] = state
        elif tag not in peer or peer[tag] in TERMINAL_STATES:
            settled.append(tag)
        else:
            resend.append(Delivery(tag, state))
            remaining[tag] = state
    peer_only = tuple(sorted(t for t in peer if t not in local))
    return tuple(resend), tuple(settled), peer_only, remaining


# -- the link -------------------------------------------------------------------------


class Link:
    """One link: its local terminus, remote terminus, owner and unsettled deliveries.

    Get it from LinkRegistry.get_sending_link / get_receiving_link, never construct it.
    """

    def __init__(self, registry: "LinkRegistry", key: LinkKey) -> None:
        self._registry = registry
        self.key = key
        self._cond = threading.Condition(threading.Lock())
        self._next_ticket = 0
        self._serving = 0
        # State below: changed only in a turn, and under _cond so readers see it whole.
        self._terminus: Terminus | None = None
        self._remote: Terminus | None = None
        self._owner: str | None = None
        self._on_stolen: StolenCallback | None = None
        self._unsettled: dict[str, str | None] = {}
        self._detached_since_ms: int | None = registry._clock()
        self._stored: StoredLink | None = None  # what the store holds for this link
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
            return self._cond.wait_for(
                lambda: self._next_ticket - self._serving >= count, timeout
            )

    def __repr__(self) -> str:
        k = self.key
        return f"Link({k.role}, {k.remote_container_id!r}, {k.link_name!r}, owner={self.owner!r})"

    # -- the turn: a FIFO ticket lock ------------------------------------------------
    @contextmanager
    def _turn(self) -> Iterator[None]:
        with self._cond:
            ticket = self._next_ticket
            self._next_ticket += 1
            self._cond.notify_all()  # wake wait_pending
            while self._serving != ticket:
                self._cond.wait()
        try:
            yield
        finally:
            with self._cond:
                self._serving += 1
                self._cond.notify_all()

    # -- operations -----------------------------------------------------------------
    def attach(
        self,
        connection_id: str,
        source: Terminus | None,
        target: Terminus | None,
        unsettled: Mapping[str, str | None] | None = None,
        on_stolen: StolenCallback | None = None,
    ) -> AttachOutcome:
        """Attach the link on a connection; see the module doc for the modes.

        source and target are as in the attach frame: the local terminus is the source of
        a sending link and the target of a receiving one; None there asks to recover the
        stored terminus. unsettled is the peer's unsettled map (None: the attach carried
        none). on_stolen is called with the LinkDetached event when another connection
        steals the link from this one.
        """
        connection_id = _utf8_text(connection_id, "connection_id", MAX_NAME_BYTES)
        for name, value in (("source", source), ("target", target)):
            if value is not None and not isinstance(value, Terminus):
                raise LinkError(name, value, "expected a Terminus or None")
        peer = None if unsettled is None else _validate_unsettled(unsettled)
        if on_stolen is not None and not callable(on_stolen):
            raise LinkError("on_stolen", on_stolen, "expected a callable or None")
        local, remote = (source, target) if self.role == "sending" else (target, source)
        outcome = None
        with self._turn():
            if not self._removed:
                outcome = self._attach_in_turn(connection_id, local, remote, peer, on_stolen)
        if outcome is None:  # closed or purged meanwhile: the key lives on in a new Link
            return self._registry._link(self.key).attach(
                connection_id, source, target, unsettled, on_stolen
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
    ) -> AttachOutcome:
        reg = self._registry
        now = reg._clock()
        stored, owner = self._terminus, self._owner

        def reject(condition: str, description: str, events: list[LinkEvent]) -> AttachOutcome:
            error = LinkErrorCondition(condition, description)
            events.append(LinkAttached(now, self.key, conn, REJECT,
                                       None if stored is None else stored.durability, condition))
            reg._enqueue(events)
            return AttachOutcome(REJECT, self.key, conn, stored, error=error)

        if local is None:
            if stored is None:
                return reject(ERR_NOT_FOUND,
                              f"no terminus to recover for link {self.link_name!r}", [])
            terminus, recovered = stored, True
        else:
            terminus, recovered = reg._effective(local), False
        resumed = stored is not None and (peer is not None or bool(self._unsettled))
        resend, settled, peer_only, remaining = reconcile(
            self.role, self._unsettled if stored is not None else {}, peer or {}
        )
        if owner is not None and owner != conn:
            mode: AttachMode = STEAL
        elif recovered:
            mode = RECOVER
        elif stored is None:
            mode = ESTABLISH
        elif resumed:
            mode = RESUME
        else:
            mode = REATTACH

        events: list[LinkEvent] = []
        record = self._record(terminus, remaining)
        try:
            self._write(record, now, events)
        except LinkStoreError as e:
            return reject(ERR_INTERNAL, f"link store: {e}", events)

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
        connection_id = _utf8_text(connection_id, "connection_id", MAX_NAME_BYTES)
        if not isinstance(closed, bool):
            raise LinkError("closed", closed, "expected a bool")
        if error is not None and not isinstance(error, str):
            raise LinkError("error", error, "expected an error condition string or None")
        reg = self._registry
        with self._turn():
            if self._removed or self._owner != connection_id:
                return DetachOutcome(self.key, connection_id, False, closed)
            now = reg._clock()
            events: list[LinkEvent] = []
            failure = None
            if closed:
                try:
                    self._write(None, now, events)
                except LinkStoreError as e:
                    # The connection is gone either way: keep the link suspended, so a
                    # later close can still delete the record.
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
        reg._drain()
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
                    self._stored = self._record(self._terminus, self._unsettled)

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
                    self._stored = self._record(self._terminus, self._unsettled)
            return True

    # -- helpers (in a turn) ----------------------------------------------------------
    def _record(self, terminus: Terminus, unsettled: Mapping[str, str | None]) -> StoredLink | None:
        """What the store should hold for this terminus, per its durability."""
        if terminus.durability == TerminusDurability.NONE:
            return None
        pairs = (
            tuple(sorted(unsettled.items()))
            if terminus.durability == TerminusDurability.UNSETTLED_STATE
            else ()
        )
        return StoredLink(self.role, self.remote_container_id, self.link_name, terminus, pairs)

    def _write(self, record: StoredLink | None, now: int, events: list[LinkEvent]) -> None:
        """Bring the store to record (None: nothing stored); store and memory are unchanged
        when it raises."""
        store = self._registry.store
        if store is None or record == self._stored:
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

    def _purge_if_expired(self, now_ms: int, timeout_ms: int) -> bool:
        reg = self._registry
        with self._turn():
            since = self._detached_since_ms
            if self._removed or self._owner is not None or since is None:
                return False
            if now_ms - since <= timeout_ms:
                return False
            events: list[LinkEvent] = []
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


# -- the registry ---------------------------------------------------------------------


class LinkRegistry:
    """Ensures one Link per key and persists termini per their durability.

    store: a LinkStore; the links it holds are loaded at once (suspended). Durability above
    what the store supports (0 without a store) is lowered, as AMQP lets the attach's
    receiver do. clock: epoch ms, thread-safe. detached_timeout_ms: links detached longer
    than this are removed by purge_expired (None: never). link_name_validator: e.g.
    validate_mqtt_client_id for links named by MQTT client ids.
    """

    def __init__(
        self,
        store: LinkStore | None = None,
        clock: Callable[[], int] = wall_clock_ms,
        detached_timeout_ms: int | None = None,
        container_id: str = "joynr-sim",
        link_name_validator: Callable[[object, str], str] = validate_link_name,
        listeners: tuple[Listener, ...] | list[Listener] = (),
    ) -> None:
        self.container_id = validate_container_id(container_id, "container_id")
        if detached_timeout_ms is not None and (
            isinstance(detached_timeout_ms, bool)
            or not isinstance(detached_timeout_ms, int)
            or detached_timeout_ms < 0
        ):
            raise LinkError("detached_timeout_ms", detached_timeout_ms,
                            "expected a non-negative int or None")
        if not callable(clock):
            raise LinkError("clock", clock, "expected a callable returning epoch ms")
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
        return 0 if self.store is None else int(self.store.max_durability)

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
        if self.detached_timeout_ms is None:
            return []
        purged = [
            link for link in self.links()
            if link._purge_if_expired(now_ms, self.detached_timeout_ms)
        ]
        self._drain()
        return purged

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

    def _effective(self, terminus: Terminus) -> Terminus:
        if terminus.durability <= self.max_durability:
            return terminus
        return terminus.with_durability(self.max_durability)

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
            link._stored = link._record(terminus, link._unsettled)
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
