"""A subscription of a proxy that runs in a host process, as the runner holds it: its
publications are read where they arrived, over the control protocol."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from . import ops

if TYPE_CHECKING:
    from .handles import RemoteRuntime


class RemoteSubscription:
    """A subscription of a proxy in a host: its publications are read where they arrived."""

    def __init__(self, runtime: RemoteRuntime, subscription_id: str, proxy: str, provider: str, name: str) -> None:
        self.runtime = runtime
        self.subscription_id = subscription_id
        self.proxy, self.provider, self.name = proxy, provider, name
        self._seen: ops.Published = {"values": [], "ended": None}

    @ops.asks(ops.Publications)
    def _read(self) -> ops.Published:
        if self.runtime.running:  # a runtime that went down keeps what was last read
            self._seen = self.runtime.query(ops.Publications(runtime=self.runtime.runtime_id,
                                                             subscription_id=self.subscription_id))
        return self._seen

    @property
    def values(self) -> list[Any]:
        return list(self._read()["values"])

    @property
    def ended(self) -> str | None:
        return self._read()["ended"]

    @ops.asks(ops.AwaitPublications)
    async def wait_for(self, count: int, timeout_s: float) -> list[Any]:
        """The values received, once there are at least ``count``; TimeoutError after
        ``timeout_s``."""
        self._seen = await self.runtime.ask(ops.AwaitPublications(
            runtime=self.runtime.runtime_id, subscription_id=self.subscription_id, count=count,
            timeout_ms=int(timeout_s * 1000)))
        return list(self._seen["values"])
