"""What the link registry tells its listeners: one event per transition, as trace fields.

Listeners get them in the order the transitions happened, after the link's turn is
released (see ``joynr_sim.core.links.link``); ``LinkEvent.fields`` flattens one for a
trace writer.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

from .model import AttachMode, LinkKey


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
    op: str  # load | find | save | delete
    durability: int | None
    ok: bool
    error: str | None = None
    count: int = 1  # links loaded (load) or written


Listener = Callable[[LinkEvent], None]
StolenCallback = Callable[[LinkDetached], None]
