"""The subscription steps of a scenario: subscribe, unsubscribe, publish and
expect_publications, carried out by the ``ScenarioRunner`` they are part of."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from ..core.subscriptions import NO_EXPIRY, SubscriptionQos
from ..runtime.handle import ProxyHandle
from .failure import StepFailed
from .model import qos_args, thaw


class SubscriptionSteps:
    """What the runner does for the subscription steps; it keeps the subscriptions by name."""

    subscriptions: dict[str, tuple[ProxyHandle, Any]]

    async def _step_subscribe(self, a: Mapping[str, Any]) -> None:
        proxy = self._proxy(a["proxy"])
        q = qos_args(a["qos"])
        expiry = NO_EXPIRY if q["expiry_ms"] is None else self.sim.clock.now_ms() + q["expiry_ms"]
        qos = SubscriptionQos(q["kind"], expiry, q["min_interval_ms"], q["max_interval_ms"], q["period_ms"],
                              q["alert_after_ms"])

        async def subscribe():
            if a.get("attribute") is not None:
                return await proxy.subscribe_attribute(a["attribute"], qos)
            flt = thaw(a["filter"]) if a["filter"] is not None else None
            return await proxy.subscribe_broadcast(a["broadcast"], qos, filter=flt, partitions=tuple(a["partitions"]))

        subscription = await self._expecting_error(a, subscribe)
        if subscription is not None:
            self.subscriptions[a["name"]] = (proxy, subscription)

    def _subscription(self, name: str) -> tuple[ProxyHandle, Any]:
        if name not in self.subscriptions:
            raise StepFailed(f"subscription {name} was not made: its subscribe step failed")
        return self.subscriptions[name]

    async def _step_unsubscribe(self, a: Mapping[str, Any]) -> None:
        proxy, subscription = self._subscription(a["subscription"])
        try:
            await proxy.unsubscribe(subscription.subscription_id)
        except KeyError:
            raise StepFailed(f"subscription {a['subscription']} has ended already") from None

    async def _step_publish(self, a: Mapping[str, Any]) -> None:
        runtime, pid = self._provider(a["provider"])
        for _ in range(a["count"]):
            await runtime.invoke_provider(pid, a["method"], list(thaw(a["args"])))

    async def _step_expect_publications(self, a: Mapping[str, Any]) -> None:
        proxy, subscription = self._subscription(a["subscription"])
        if "last" in a and a.get("count") is None and a.get("at_least") is None and a.get("values") is None:
            await self._expect_last(a, proxy, subscription)
            return
        want = list(thaw(a["values"])) if a.get("values") is not None else None
        exact = a.get("at_least") is None
        count = len(want) if want is not None else a["count"] if exact else a["at_least"]
        try:
            values = await subscription.wait_for(count, a["timeout_ms"] / 1000)
        except TimeoutError:
            raise StepFailed(f"subscription {a['subscription']}: {len(subscription.values)} of {count} publications "
                             f"within {a['timeout_ms']} ms: {subscription.values!r}",
                             await self._context(proxy.provider_participant_id)) from None
        if want is not None and values != want:
            raise StepFailed(f"subscription {a['subscription']}: received {values!r}, expected {want!r}")
        if want is None and exact and len(values) != count:
            raise StepFailed(f"subscription {a['subscription']}: {len(values)} publications, expected {count}: "
                             f"{values!r}")

    async def _expect_last(self, a: Mapping[str, Any], proxy: ProxyHandle, subscription: Any) -> None:
        """Until the latest publication is the value wanted: one more at a time, within
        the step's bound."""
        want = thaw(a["last"])
        deadline = asyncio.get_running_loop().time() + a["timeout_ms"] / 1000
        values = list(subscription.values)
        while not values or values[-1] != want:
            left = deadline - asyncio.get_running_loop().time()
            if left <= 0:
                raise StepFailed(f"subscription {a['subscription']}: latest value {values[-1:]!r}, expected "
                                 f"{want!r} within {a['timeout_ms']} ms: {values[-10:]!r}",
                                 await self._context(proxy.provider_participant_id))
            try:
                values = await subscription.wait_for(len(values) + 1, left)
            except TimeoutError:
                values = list(subscription.values)
