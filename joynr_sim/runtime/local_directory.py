"""A cluster controller's directory (``ports.Directory``): it is the parent router of its own
participants and answers discovery from its own local capabilities directory
(``discovery.LocalDiscovery``), which asks the GCD of each backend.

As a port it runs the directory's background work: the removeStale of a start, once the
connections are up, and the freshness touches on every tick; a crash loses its store.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..core.discovery import DiscoveryEntry, DiscoveryEntryWithMetaInfo
from ..core.multicast import MulticastId
from .discovery import LocalDiscovery
from .ports import Port


class LocalDirectory(Port):
    def __init__(self, who: str, discovery: LocalDiscovery | None) -> None:
        self._who = who
        self.discovery = discovery

    # -- as a port -------------------------------------------------------------------
    async def start(self) -> None:
        if self.discovery is not None:
            self.discovery.on_start()

    def tick(self, now_ms: int) -> None:
        if self.discovery is not None:
            self.discovery.tick(now_ms)

    def reset(self) -> None:
        if self.discovery is not None:
            self.discovery.reset()

    # -- as the directory --------------------------------------------------------------
    async def resolve(self, participant_id: str) -> None:
        """A message waits for a participant this cluster controller has no route for
        (e.g. after a restart): ask discovery, whose answer becomes a route through the
        policy."""
        if self.discovery is None:
            return
        try:
            await self.discovery.lookup_participant(participant_id)
        except Exception:  # not found anywhere: the message waits until it expires
            pass

    async def announce(self, participant_id: str, is_globally_visible: bool) -> None:
        """The cluster controller is its participants' parent router itself."""

    async def withdraw(self, participant_id: str) -> None:
        """As announce."""

    async def multicast_receiver(self, mid: MulticastId, receiver: str, added: bool) -> None:
        """The cluster controller's own multicast routing is all there is."""

    def route_to_discovered(self, entry: DiscoveryEntryWithMetaInfo) -> None:
        """The lookup itself gave the route."""

    def _require(self) -> LocalDiscovery:
        if self.discovery is None:
            raise RuntimeError(f"{self._who}: runs without discovery")
        return self.discovery

    async def discovery_add(self, entry: DiscoveryEntry, gbids: Sequence[str] | None) -> None:
        await self._require().add(entry, gbids)

    async def discovery_remove(self, participant_id: str) -> None:
        await self._require().remove(participant_id)

    async def discovery_lookup(self, domains: Sequence[str], interface_name: str, scope: Any,
                               gbids: Sequence[str] | None, cache_max_age_ms: int,
                               ) -> list[DiscoveryEntryWithMetaInfo]:
        return await self._require().lookup(domains, interface_name, scope, gbids, cache_max_age_ms)

    async def discovery_lookup_participant(self, participant_id: str, scope: Any, gbids: Sequence[str] | None,
                                           cache_max_age_ms: int) -> DiscoveryEntryWithMetaInfo:
        return await self._require().lookup_participant(participant_id, scope, gbids, cache_max_age_ms)
