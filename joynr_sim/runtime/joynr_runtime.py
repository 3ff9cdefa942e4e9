"""What an application programs against, as joynr's ``JoynrRuntime``: providers, proxies and
calls, and the routing table as the runner's steps read and change it. Every operation is
a coroutine (``handle.RuntimeHandle``), the same in this process as in a host process.

A ``JoynrRuntime`` is a ``Runtime`` (lifecycle and carrying out) of a cluster controller or
a libjoynr runtime; what differs between the two is composed in, not overridden: the node,
the ports, and the directory each asks about participants (``ports.Directory``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..core.address import InProcessAddress
from ..core.discovery import DEFAULT_EXPIRY_MS, DiscoveryEntry, DiscoveryScope, ProviderQos, Version
from ..core.errors import DiscoveryException
from ..core.ids import uuid_from
from ..core.message import ONE_WAY, REQUEST, REQUEST_REPLY_ID, JoynrMessage
from ..core.node import MessageRouter
from ..core.routing import PutResult, RoutingEntry
from ..core.subscriptions import SubscriptionQos
from .base import DEFAULT_TTL_MS, FOREVER_MS, Runtime, offer_route
from .load import drive_calls
from .participants import ProviderSkeleton, ProxySkeleton, broadcast_kind, encode_request
from .subscriptions import Subscription, Subscriptions


class JoynrRuntime(Runtime):
    # -- what tests and the runner's steps look at -----------------------------------------
    @property
    def router(self) -> MessageRouter:
        return self.node.router

    @property
    def providers(self) -> dict[str, ProviderSkeleton]:
        return self.dispatcher.providers

    @property
    def proxies(self) -> dict[str, ProxySkeleton]:
        return self.dispatcher.proxies

    @property
    def subscriptions(self) -> Subscriptions:
        return self.dispatcher.subscriptions

    def new_participant_id(self) -> str:
        return uuid_from(self.ids)

    # -- providers and proxies -------------------------------------------------------
    async def register_provider(
        self, domain: str, interface_name: str, implementation: Any, participant_id: str | None = None,
        scope: str = "GLOBAL", gbids: Sequence[str] | None = None, priority: int = 0,
    ) -> ProviderSkeleton:
        """Register a provider: InProcess here, announced to the parent router, then in
        the local capabilities directory (and the GCD for scope GLOBAL). A registration
        that fails leaves nothing behind."""
        pid = participant_id or self.new_participant_id()
        now = self.clock.now_ms()
        entry = DiscoveryEntry(
            pid, domain, interface_name, Version(1, 0), ProviderQos(priority=priority, scope=scope),
            now, now + DEFAULT_EXPIRY_MS,
        )
        skeleton = ProviderSkeleton(pid, domain, interface_name, implementation)
        visible = entry.qos.is_global
        result, waiting = self.node.add_next_hop(
            pid, RoutingEntry(InProcessAddress(skeleton), visible, FOREVER_MS), "registration"
        )
        if result.outcome == "refused":
            raise RuntimeError(f"participant {pid!r}: routing entry refused ({result.reason})")
        self.providers[pid] = skeleton
        self.subscriptions.attach(skeleton)
        self.carry_out(waiting)  # what waited for the provider, now that it is known here
        try:
            await self.directory.announce(pid, visible)
            await self.directory.discovery_add(entry, gbids)
        except BaseException:
            self.subscriptions.detach(pid, implementation)
            self.providers.pop(pid, None)
            self.node.remove_next_hop(pid)
            await self.directory.withdraw(pid)
            raise
        return skeleton

    async def invoke_provider(self, participant_id: str, method: str, params: list[Any]) -> Any:
        """Call a method of a provider here directly, as its application does (e.g. to
        change an attribute or fire a broadcast): no message, no proxy."""
        skeleton = self.providers.get(participant_id)
        if skeleton is None:
            raise KeyError(f"participant_id: no provider {participant_id!r} in {self.runtime_id}")
        return await skeleton.invoke(method, list(params))

    async def create_proxy(
        self, interface_name: str, provider_participant_id: str, is_globally_visible: bool = False
    ) -> Proxy:
        """A proxy for a provider whose route is already known (provisioned), no discovery.
        A proxy always gets a fresh participant id, so it never collides with an entry."""
        skeleton = ProxySkeleton(self.new_participant_id(), interface_name, provider_participant_id)
        self.proxies[skeleton.participant_id] = skeleton
        offer_route(self, skeleton.participant_id,
                    RoutingEntry(InProcessAddress(skeleton), is_globally_visible, FOREVER_MS), "registration")
        await self.directory.announce(skeleton.participant_id, is_globally_visible)
        return Proxy(self, skeleton)

    async def discover_proxy(
        self, interface_name: str, domain: str | None = None, *, participant_id: str | None = None,
        scope: DiscoveryScope | str = DiscoveryScope.LOCAL_THEN_GLOBAL, gbids: Sequence[str] | None = None,
        cache_max_age_ms: int = 0,
    ) -> Proxy:
        """Build a proxy through discovery, by domain or by a fixed provider participant id.
        Modeled discovery errors (e.g. NO_ENTRY_FOR_SELECTED_BACKENDS) reach the caller as
        DiscoveryErrorException; no provider at all as DiscoveryException."""
        if (domain is None) == (participant_id is None):
            raise ValueError("discover_proxy: give exactly one of domain and participant_id")
        if participant_id is not None:
            entries = [await self.directory.discovery_lookup_participant(participant_id, scope, gbids,
                                                                         cache_max_age_ms)]
        else:
            entries = await self.directory.discovery_lookup([domain], interface_name, scope, gbids, cache_max_age_ms)
        entries = [e for e in entries if e.interface_name == interface_name]
        if not entries:
            raise DiscoveryException(f"no provider of {interface_name} in domain {domain!r} for scope {scope}")
        # joynr's highest-priority arbitration; a local provider wins a tie.
        chosen = max(entries, key=lambda e: (e.qos.priority, e.is_local, e.participant_id))
        self.directory.route_to_discovered(chosen)
        # Seed 000: a proxy is globally visible when it is connected to a global provider or
        # has discovered a local provider globally (scope GLOBAL_ONLY; LOCAL_AND_GLOBAL and
        # LOCAL_THEN_GLOBAL answer a local provider from the local store, not globally).
        visible = not chosen.is_local or DiscoveryScope(getattr(scope, "value", scope)) is DiscoveryScope.GLOBAL_ONLY
        return await self.create_proxy(interface_name, chosen.participant_id, visible)

    # -- calls -------------------------------------------------------------------------
    async def request(self, sender: str, recipient: str, method: str, params: list[Any],
                      ttl_ms: int = DEFAULT_TTL_MS, gbid: str | None = None) -> Any:
        """Send a request from a local participant and wait for its reply (or time out)."""
        corr = uuid_from(self.ids)  # reproducible from the run's seed, as participant ids are
        msg = self._outgoing(REQUEST, sender, recipient, method, params, ttl_ms, ((REQUEST_REPLY_ID, corr),))
        return await self.dispatcher.call(msg, method, corr, ttl_ms, gbid, self.route)

    async def one_way(self, sender: str, recipient: str, method: str, params: list[Any],
                      ttl_ms: int = DEFAULT_TTL_MS) -> str:
        msg = self._outgoing(ONE_WAY, sender, recipient, method, params, ttl_ms)
        self.route(msg)
        return msg.id

    async def load(self, sender: str, recipient: str, method: str, params: list[Any], *, calls: int,
                   concurrency: int, ttl_ms: int = DEFAULT_TTL_MS) -> dict[str, Any]:
        """``calls`` requests driven here: ok and failed counts and the seconds they took."""
        return await drive_calls(self, sender, recipient, method, params, calls=calls, concurrency=concurrency,
                                 ttl_ms=ttl_ms)

    def _outgoing(self, type_: str, sender: str, recipient: str, method: str, params: list[Any], ttl_ms: int,
                  headers: tuple[tuple[str, str], ...] = ()) -> JoynrMessage:
        return JoynrMessage(type=type_, sender=sender, recipient=recipient,
                            expiry_date_ms=self.clock.now_ms() + ttl_ms, payload=encode_request(method, params),
                            custom_headers=headers)

    # -- the routing table, as the runner reads and changes it -------------------------------
    async def add_next_hop(self, participant_id: str, entry: RoutingEntry, origin: str) -> PutResult:
        """Offer a route (the node's add_next_hop); what waited for it goes now."""
        return offer_route(self, participant_id, entry, origin)

    async def remove_next_hop(self, participant_id: str) -> str:
        return self.node.remove_next_hop(participant_id)

    async def lookup_route(self, participant_id: str, gbid: str | None = None) -> RoutingEntry | None:
        return self.table.lookup(participant_id, gbid)

    async def routes(self) -> list[tuple[str, RoutingEntry]]:
        return list(self.table.items())

    async def queued(self, participant_id: str | None = None) -> int:
        return self.node.queued(participant_id)


class ProxyCalls:
    """A proxy's calls, wherever its runtime runs (``handle.RuntimeHandle``): from the
    proxy's participant to its provider."""

    runtime: Any
    participant_id: str
    provider_participant_id: str

    async def call(self, method: str, *params: Any, ttl_ms: int = DEFAULT_TTL_MS) -> Any:
        return await self.runtime.request(self.participant_id, self.provider_participant_id, method, list(params),
                                          ttl_ms)

    async def one_way(self, method: str, *params: Any, ttl_ms: int = DEFAULT_TTL_MS) -> str:
        return await self.runtime.one_way(self.participant_id, self.provider_participant_id, method, list(params),
                                          ttl_ms)


class Proxy(ProxyCalls):
    """What an application holds of a proxy in this process."""

    def __init__(self, runtime: JoynrRuntime, skeleton: ProxySkeleton) -> None:
        self.runtime = runtime
        self.skeleton = skeleton

    @property
    def participant_id(self) -> str:  # type: ignore[override]
        return self.skeleton.participant_id

    @property
    def provider_participant_id(self) -> str:  # type: ignore[override]
        return self.skeleton.provider_participant_id

    async def subscribe_attribute(self, attribute: str, qos: SubscriptionQos | None = None) -> Subscription:
        """Subscribe to an attribute (on change unless ``qos`` says otherwise): the current
        value comes first, then each change."""
        return await self.runtime.subscriptions.subscribe(
            self.participant_id, self.provider_participant_id, attribute, "attribute",
            qos or SubscriptionQos("on-change"))

    async def subscribe_broadcast(self, broadcast: str, qos: SubscriptionQos | None = None, *,
                                  filter: dict[str, Any] | None = None,
                                  partitions: tuple[str, ...] = ()) -> Subscription:
        """Subscribe to a broadcast: with ``filter`` a selective one (request and
        publications between proxy and provider), else a multicast (``partitions`` may use
        ``+`` and end with ``*``)."""
        kind = broadcast_kind(self.skeleton.interface_name, broadcast, filter)
        return await self.runtime.subscriptions.subscribe(
            self.participant_id, self.provider_participant_id, broadcast, kind,
            qos or SubscriptionQos("on-change"), filter=filter, partitions=tuple(partitions))

    async def unsubscribe(self, subscription_id: str) -> None:
        await self.runtime.subscriptions.unsubscribe(subscription_id)
