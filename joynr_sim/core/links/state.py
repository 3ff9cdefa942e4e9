"""What one link holds, and the views of it a caller reads without taking the link's turn.

Kept apart from what changes that state (the link's record in the store, ``record``; its
attach, detach and deliveries, ``link``): every field here is changed only in the link's
turn and under the turn's condition, so the views below see it whole; this module only
holds the state and shows it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .events import StolenCallback
from .model import LinkKey, Role, Terminus
from .store import StoredLink
from .turn import LastComerTurn, Turn

if TYPE_CHECKING:  # pragma: no cover
    from .registry import LinkRegistry


class LinkState:
    """One link's local terminus, remote terminus, owner and unsettled deliveries, and its
    turn; the base of ``Link``."""

    def __init__(self, registry: LinkRegistry, key: LinkKey) -> None:
        self._registry = registry
        self.key = key
        self._turn: Turn | LastComerTurn = registry._new_turn()
        self._cond = self._turn.cond
        # State below: changed only in a turn, and under _cond so readers see it whole.
        self._terminus: Terminus | None = None
        self._remote: Terminus | None = None
        self._owner: str | None = None
        self._on_stolen: StolenCallback | None = None
        self._unsettled: dict[str, str | None] = {}
        self._detached_since_ms: int | None = registry._clock()
        # What the store holds for this link; record.MIRRORED: the record of the link's own
        # terminus, deliveries and owner, built when compared (a delivery added or settled
        # changes the store row by row: rebuilding the record each time sorted every
        # delivery in flight).
        self._stored: StoredLink | object | None = None
        self._removed = False  # purged or closed: the registry holds a new Link for the key

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
        return self._turn.pending()

    def wait_pending(self, count: int, timeout: float) -> bool:
        """Wait until at least count operations hold or wait for the turn."""
        return self._turn.wait_pending(count, timeout)

    def __repr__(self) -> str:
        k = self.key
        return f"Link({k.role}, {k.remote_container_id!r}, {k.link_name!r}, owner={self.owner!r})"
