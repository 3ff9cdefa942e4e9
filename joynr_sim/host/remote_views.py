"""What a step or an application holds of a runtime in a host process, besides the runtime's
handle itself (``handles``): its routing table, read where it is, and its proxies."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import asdict
from typing import TYPE_CHECKING, Any

from ..core.routing import Origin, PutResult, RoutingEntry
from ..core.subscriptions import SubscriptionQos
from ..runtime.base import DEFAULT_TTL_MS
from ..runtime.subscriptions import SUBSCRIBE_TTL_MS
from .protocol import entry_from_wire, entry_to_wire, put_result_from_wire
from .remote_subscription import CALL_SLACK_S, RemoteSubscription

if TYPE_CHECKING:
    from .handles import RemoteRuntime


class RemoteTable:
    """The routing table of a runtime in a host, read where it is."""

    def __init__(self, runtime: RemoteRuntime) -> None:
        self._runtime = runtime

    def _ask(self, op: str, **args: Any) -> Any:
        return self._runtime.query(op, runtime=self._runtime.runtime_id, **args)

    def lookup(self, participant_id: str, gbid: str | None = None) -> RoutingEntry | None:
        if not self._runtime.running:
            return None  # a runtime that is down has no table
        return entry_from_wire(self._ask("table_lookup", participant_id=participant_id, gbid=gbid))

    async def fetch(self, participant_id: str, gbid: str | None = None) -> RoutingEntry | None:
        """``lookup`` asked over the control channel: the runner's event loop goes on while
        a busy host answers (a fleet's restart wave polls hundreds of tables)."""
        if not self._runtime.running:
            return None
        return entry_from_wire(await self._runtime._ask("table_lookup", participant_id=participant_id, gbid=gbid))

    def put(self, participant_id: str, entry: RoutingEntry, origin: Origin | str = Origin.LOCAL) -> PutResult:
        wire = entry_to_wire(entry)
        return put_result_from_wire(self._ask("table_put", participant_id=participant_id, entry=wire,
                                              origin=str(getattr(origin, "value", origin))))

    def remove(self, participant_id: str) -> str:
        return self._ask("table_remove", participant_id=participant_id)

    def items(self) -> list[tuple[str, RoutingEntry]]:
        if not self._runtime.running:
            return []
        return [(pid, entry_from_wire(entry)) for pid, entry in self._ask("table_items")]

    def __contains__(self, participant_id: object) -> bool:
        return isinstance(participant_id, str) and self.lookup(participant_id) is not None

    def __iter__(self) -> Iterator[str]:
        return iter([pid for pid, _ in self.items()])

    def __len__(self) -> int:
        return len(self.items())


class RemoteProxy:
    """What an application holds, for a proxy in a host: calls go from its participant."""

    def __init__(self, runtime: RemoteRuntime, participant_id: str, provider_participant_id: str) -> None:
        self.runtime = runtime
        self.participant_id = participant_id
        self.provider_participant_id = provider_participant_id

    async def call(self, method: str, *params: Any, ttl_ms: int = DEFAULT_TTL_MS) -> Any:
        return await self.runtime.request(self.participant_id, self.provider_participant_id, method, list(params),
                                          ttl_ms)

    def one_way(self, method: str, *params: Any, ttl_ms: int = DEFAULT_TTL_MS) -> str:
        return self.runtime.one_way(self.participant_id, self.provider_participant_id, method, list(params), ttl_ms)

    async def subscribe_attribute(self, attribute: str, qos: SubscriptionQos | None = None) -> RemoteSubscription:
        return await self._subscribe("attribute", attribute, qos, None, ())

    async def subscribe_broadcast(self, broadcast: str, qos: SubscriptionQos | None = None, *,
                                  filter: dict[str, Any] | None = None,
                                  partitions: tuple[str, ...] = ()) -> RemoteSubscription:
        return await self._subscribe("broadcast", broadcast, qos, filter, partitions)

    async def _subscribe(self, kind: str, name: str, qos: SubscriptionQos | None, flt: dict[str, Any] | None,
                         partitions: tuple[str, ...]) -> RemoteSubscription:
        qos = (qos or SubscriptionQos("on-change")).check()
        sid = await self.runtime._ask("subscribe", SUBSCRIBE_TTL_MS / 1000 + CALL_SLACK_S, proxy=self.participant_id,
                                      name=name, kind=kind, qos=asdict(qos), filter=flt, partitions=list(partitions))
        return RemoteSubscription(self.runtime, sid, self.participant_id, self.provider_participant_id, name)

    async def unsubscribe(self, subscription_id: str) -> None:
        await self.runtime._ask("unsubscribe", subscription_id=subscription_id)
