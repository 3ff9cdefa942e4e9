"""The narrow ports a runtime is composed of, besides its node.

``Port``: a piece of the runtime's I/O with a lifecycle — a transport (the MQTT endpoint,
a WebSocket server or client), or what runs beside it (the local capabilities directory's
freshness, a GCD's store). Each names the address types it carries (``carriers``): the
runtime looks a ``Send``'s carrier up by the address's type, as joynr's messaging-stub
factory does, and a type no port carries fails as no-connection.

``Network``: where the ports' connections come from (sockets, or the memory network).

``Directory``: where a runtime asks about participants: the route to one it does not know
(``resolve``), telling its parent router of its own (``announce``/``withdraw``), its
multicast receivers, and discovery (add, remove, lookup). A cluster controller answers
from its own local capabilities directory; a libjoynr runtime asks its cluster
controller's routing and discovery providers; a GCD instance asks no one.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol

from ..core.address import Address
from ..core.discovery import DiscoveryEntry, DiscoveryEntryWithMetaInfo
from ..core.message import JoynrMessage
from ..core.multicast import MulticastId

Carrier = Callable[[JoynrMessage, Any], None]


class Port:
    """A lifecycle with nothing to do at each step; a port does what it needs at its own."""

    carriers: Mapping[type[Address], Carrier] = {}

    async def start(self) -> None:
        """Come up (in the runtime's order of ports): the runtime already runs."""

    async def drain(self) -> None:
        """A graceful stop, still running: finish what was taken on, where it can."""

    async def stop(self) -> None:
        """Go down politely (in the reverse order)."""

    async def abort(self) -> None:
        """Go down as a killed process does: no goodbye."""

    def tick(self, now_ms: int) -> None:
        """Periodic bookkeeping, after the node's."""

    def reset(self) -> None:
        """The runtime crashed: what this port held in memory is gone."""

    def close(self) -> None:
        """The runtime is stopped for good: release files."""


class Network(Protocol):
    """Where a port's connections come from: the real network (``transport.network``) or
    the memory network (``joynr_sim.network``); a port asks it for each connection."""

    name: str

    def mqtt_connection(self, *, runtime_id: str, gbid: str, **kwargs: Any) -> Any: ...

    def websocket_server(self, **kwargs: Any) -> Any: ...

    def websocket_client(self, url: str, client_id: str, **kwargs: Any) -> Any: ...


class Directory(Protocol):
    async def resolve(self, participant_id: str) -> None: ...

    async def announce(self, participant_id: str, is_globally_visible: bool) -> None: ...

    async def withdraw(self, participant_id: str) -> None: ...

    async def multicast_receiver(self, mid: MulticastId, receiver: str, added: bool) -> None: ...

    def route_to_discovered(self, entry: DiscoveryEntryWithMetaInfo) -> None: ...

    async def discovery_add(self, entry: DiscoveryEntry, gbids: Sequence[str] | None) -> None: ...

    async def discovery_remove(self, participant_id: str) -> None: ...

    async def discovery_lookup(self, domains: Sequence[str], interface_name: str, scope: Any,
                               gbids: Sequence[str] | None, cache_max_age_ms: int,
                               ) -> list[DiscoveryEntryWithMetaInfo]: ...

    async def discovery_lookup_participant(self, participant_id: str, scope: Any, gbids: Sequence[str] | None,
                                           cache_max_age_ms: int) -> DiscoveryEntryWithMetaInfo: ...


class NoDirectory:
    """A runtime that asks no one about participants (a GCD instance): it looks nothing up,
    has no parent router and no discovery of its own."""

    def __init__(self, who: str) -> None:
        self._who = who

    async def resolve(self, participant_id: str) -> None:
        return None

    async def announce(self, participant_id: str, is_globally_visible: bool) -> None:
        return None

    async def withdraw(self, participant_id: str) -> None:
        return None

    async def multicast_receiver(self, mid: MulticastId, receiver: str, added: bool) -> None:
        return None

    def route_to_discovered(self, entry: DiscoveryEntryWithMetaInfo) -> None:
        return None

    def _none(self) -> RuntimeError:
        return RuntimeError(f"{self._who}: runs without discovery")

    async def discovery_add(self, entry: DiscoveryEntry, gbids: Sequence[str] | None) -> None:
        raise self._none()

    async def discovery_remove(self, participant_id: str) -> None:
        raise self._none()

    async def discovery_lookup(self, domains: Sequence[str], interface_name: str, scope: Any,
                               gbids: Sequence[str] | None, cache_max_age_ms: int,
                               ) -> list[DiscoveryEntryWithMetaInfo]:
        raise self._none()

    async def discovery_lookup_participant(self, participant_id: str, scope: Any, gbids: Sequence[str] | None,
                                           cache_max_age_ms: int) -> DiscoveryEntryWithMetaInfo:
        raise self._none()
