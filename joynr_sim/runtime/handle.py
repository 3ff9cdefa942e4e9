"""What the runner, the scenario steps, the pytest plugin and a Simulation hold of a runtime,
wherever it runs: ``RuntimeHandle`` (and ``ClusterControllerHandle`` for a cluster
controller), satisfied alike by a runtime in this process (``joynr_sim.runtime``) and by a
handle on one in a host process (``joynr_sim.host.rpc.handles``).

Every operation is a coroutine, in process as well: a caller never needs to know where the
runtime runs, and one that answers at once in process costs no more than a call. The
operations are the control protocol's (``joynr_sim.host.rpc.ops``), which a test holds to
this protocol, name by name.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from ..core.discovery import DiscoveryScope
from ..core.routing import PutResult, RoutingEntry
from ..core.subscriptions import SubscriptionQos
from .base import DEFAULT_TTL_MS


@runtime_checkable
class ProxyHandle(Protocol):
    """A proxy, as its application holds it: calls go from its participant to its provider."""

    @property
    def participant_id(self) -> str: ...

    @property
    def provider_participant_id(self) -> str: ...

    async def call(self, method: str, *params: Any, ttl_ms: int = DEFAULT_TTL_MS) -> Any: ...

    async def one_way(self, method: str, *params: Any, ttl_ms: int = DEFAULT_TTL_MS) -> str: ...

    async def subscribe_attribute(self, attribute: str, qos: SubscriptionQos | None = None) -> Any: ...

    async def subscribe_broadcast(self, broadcast: str, qos: SubscriptionQos | None = None, *,
                                  filter: dict[str, Any] | None = None, partitions: tuple[str, ...] = ()) -> Any: ...

    async def unsubscribe(self, subscription_id: str) -> None: ...


@runtime_checkable
class RuntimeHandle(Protocol):
    runtime_id: str
    kind: str  # cluster-controller | libjoynr | gcd
    running: bool

    # -- lifecycle -----------------------------------------------------------------------
    async def start(self) -> None: ...

    async def stop(self) -> None: ...

    async def crash(self) -> None: ...

    async def restart(self) -> None: ...

    # -- providers, proxies and calls -----------------------------------------------------
    async def register_provider(self, domain: str, interface_name: str, implementation: Any,
                                participant_id: str | None = None, scope: str = "GLOBAL",
                                gbids: Sequence[str] | None = None, priority: int = 0) -> Any: ...

    async def unregister_provider(self, participant_id: str) -> None: ...

    async def invoke_provider(self, participant_id: str, method: str, params: list[Any]) -> Any: ...

    async def create_proxy(self, interface_name: str, provider_participant_id: str,
                           is_globally_visible: bool = False) -> ProxyHandle: ...

    async def discover_proxy(self, interface_name: str, domain: str | None = None, *,
                             participant_id: str | None = None,
                             scope: DiscoveryScope | str = DiscoveryScope.LOCAL_THEN_GLOBAL,
                             gbids: Sequence[str] | None = None, cache_max_age_ms: int = 0) -> ProxyHandle: ...

    async def request(self, sender: str, recipient: str, method: str, params: list[Any],
                      ttl_ms: int = DEFAULT_TTL_MS, gbid: str | None = None) -> Any: ...

    async def one_way(self, sender: str, recipient: str, method: str, params: list[Any],
                      ttl_ms: int = DEFAULT_TTL_MS) -> str: ...

    async def load(self, sender: str, recipient: str, method: str, params: list[Any], *, calls: int,
                   concurrency: int, ttl_ms: int = DEFAULT_TTL_MS) -> dict[str, Any]: ...

    # -- the routing table ------------------------------------------------------------------
    async def add_next_hop(self, participant_id: str, entry: RoutingEntry, origin: str) -> PutResult: ...

    async def remove_next_hop(self, participant_id: str) -> str: ...

    async def lookup_route(self, participant_id: str, gbid: str | None = None) -> RoutingEntry | None: ...

    async def routes(self) -> list[tuple[str, RoutingEntry]]: ...

    async def queued(self, participant_id: str | None = None) -> int: ...


@runtime_checkable
class ClusterControllerHandle(RuntimeHandle, Protocol):
    cc_id: str
    gbids: tuple[str, ...]
    topic: str
    ws_port: int

    async def admit(self, runtime_id: str, token: str | None = None) -> str:
        """Provision a libjoynr runtime: the token its WebSocket handshake must carry (a new
        one unless ``token`` is given)."""

    async def connected(self, gbid: str) -> bool: ...

    async def cut(self, gbid: str) -> None: ...

    async def heal(self, gbid: str) -> None: ...
