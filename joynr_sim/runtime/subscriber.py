"""What a subscriber holds: a subscription's publications as they arrive, and a way to wait
for them (``joynr_sim.runtime.subscriptions`` fills it)."""

from __future__ import annotations

import asyncio
from typing import Any

from ..core.multicast import MulticastId
from ..core.subscriptions import SubscriptionQos

MAX_KEPT_VALUES = 10_000  # publications a subscription keeps for its reader; the oldest go first


class Subscription:
    """What a subscriber holds: the publications that arrived, and a way to wait for them."""

    def __init__(self, subscription_id: str, proxy: str, provider: str, name: str, kind: str,
                 qos: SubscriptionQos, multicast: MulticastId | None = None,
                 filter: dict[str, Any] | None = None) -> None:
        self.subscription_id = subscription_id
        self.proxy, self.provider, self.name, self.kind = proxy, provider, name, kind
        self.qos = qos
        self.multicast = multicast
        self.filter = filter
        self.values: list[Any] = []
        self.ended: str | None = None  # why it ended: unsubscribed, expired
        self._changed = asyncio.Event()

    def _add(self, value: Any) -> None:
        self.values.append(value)
        del self.values[:-MAX_KEPT_VALUES]
        self._changed.set()

    def _end(self, reason: str) -> None:
        self.ended = reason
        self._changed.set()

    async def wait_for(self, count: int, timeout_s: float) -> list[Any]:
        """The values received, once there are at least ``count``; TimeoutError after
        ``timeout_s`` (the values so far are in ``values``)."""
        async def until() -> None:
            while len(self.values) < count:
                self._changed.clear()
                await self._changed.wait()
        await asyncio.wait_for(until(), timeout_s)
        return list(self.values)
