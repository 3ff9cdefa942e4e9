"""What a step or an application holds of a runtime in a host process, besides the runtime's
handle itself (``handles``): its proxies, and read views of its routing table and MQTT
connections for callers that look without awaiting (each a blocking query of the host)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from ...core.routing import RoutingEntry
from ...core.subscriptions import SubscriptionQos
from ...runtime.joynr_runtime import ProxyCalls
from . import ops
from .remote_subscription import RemoteSubscription

if TYPE_CHECKING:
    from .handles import RemoteClusterController, RemoteRuntime


class RemoteTable:
    """The routing table of a runtime in a host, read where it is; the handle's
    ``lookup_route`` and ``routes`` ask the same without blocking."""

    def __init__(self, runtime: RemoteRuntime) -> None:
        self._runtime = runtime

    @ops.asks(ops.LookupRoute)
    def lookup(self, participant_id: str, gbid: str | None = None) -> RoutingEntry | None:
        if not self._runtime.running:
            return None  # a runtime that is down has no table
        found = self._runtime.query(ops.LookupRoute(runtime=self._runtime.runtime_id, participant_id=participant_id,
                                                    gbid=gbid))
        return None if found is None else found.routing_entry()

    @ops.asks(ops.Routes)
    def items(self) -> list[tuple[str, RoutingEntry]]:
        if not self._runtime.running:
            return []
        return [(pid, entry.routing_entry()) for pid, entry in self._runtime.query(
            ops.Routes(runtime=self._runtime.runtime_id))]

    def __contains__(self, participant_id: object) -> bool:
        return isinstance(participant_id, str) and self.lookup(participant_id) is not None

    def __iter__(self) -> Iterator[str]:
        return iter([pid for pid, _ in self.items()])

    def __len__(self) -> int:
        return len(self.items())


class _Connected:
    def __init__(self, cc: RemoteClusterController, gbid: str) -> None:
        self._cc, self._gbid = cc, gbid

    @ops.asks(ops.Connected)
    def is_set(self) -> bool:
        return self._cc.running and self._cc.query(ops.Connected(runtime=self._cc.runtime_id, gbid=self._gbid))


class RemoteConnection:
    """A cluster controller's MQTT connection, as a step looks at it; the handle's
    ``connected`` asks the same without blocking."""

    def __init__(self, cc: RemoteClusterController, gbid: str) -> None:
        self.gbid = gbid
        self.connected = _Connected(cc, gbid)


class RemoteProxy(ProxyCalls):
    """What an application holds, for a proxy in a host: calls go from its participant."""

    def __init__(self, runtime: RemoteRuntime, participant_id: str, provider_participant_id: str) -> None:
        self.runtime = runtime
        self.participant_id = participant_id
        self.provider_participant_id = provider_participant_id

    async def subscribe_attribute(self, attribute: str, qos: SubscriptionQos | None = None) -> RemoteSubscription:
        return await self._subscribe("attribute", attribute, qos, None, ())

    async def subscribe_broadcast(self, broadcast: str, qos: SubscriptionQos | None = None, *,
                                  filter: dict[str, Any] | None = None,
                                  partitions: tuple[str, ...] = ()) -> RemoteSubscription:
        return await self._subscribe("broadcast", broadcast, qos, filter, partitions)

    @ops.asks(ops.Subscribe)
    async def _subscribe(self, kind: str, name: str, qos: SubscriptionQos | None, flt: dict[str, Any] | None,
                         partitions: tuple[str, ...]) -> RemoteSubscription:
        qos = (qos or SubscriptionQos("on-change")).check()
        sid = await self.runtime.ask(ops.Subscribe(
            runtime=self.runtime.runtime_id, proxy=self.participant_id, name=name, kind=kind, qos=asdict(qos),
            filter=flt, partitions=list(partitions)))
        return RemoteSubscription(self.runtime, sid, self.participant_id, self.provider_participant_id, name)

    @ops.asks(ops.Unsubscribe)
    async def unsubscribe(self, subscription_id: str) -> None:
        await self.runtime.ask(ops.Unsubscribe(runtime=self.runtime.runtime_id, subscription_id=subscription_id))
