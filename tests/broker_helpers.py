"""Helpers behind the broker fixtures of ``conftest.py`` (``amqtt_brokers``,
``mosquitto_brokers``):

    async def test_x(amqtt_brokers):
        brokers = await amqtt_brokers(["gbid-a", "gbid-b"])
        host, port = brokers.endpoint("gbid-a")

Each fixture is an async factory ``make(gbids, *, trace=None, run_dir=None) -> BrokerSet``
that returns a started set; every set it made is stopped at teardown. Without ``run_dir``
each set gets its own directory under the test's ``tmp_path``.
"""

from __future__ import annotations

from collections.abc import Awaitable
from pathlib import Path
from typing import Protocol

from brokers import BrokerSet
from joynr_sim.trace import TraceWriter


class BrokerFactory(Protocol):
    def __call__(
        self, gbids: list[str], *, trace: TraceWriter | None = None, run_dir: Path | None = None
    ) -> Awaitable[BrokerSet]: ...


def broker_factory(kind: str, tmp_path: Path, made: list[BrokerSet]) -> BrokerFactory:
    async def make(
        gbids: list[str], *, trace: TraceWriter | None = None, run_dir: Path | None = None
    ) -> BrokerSet:
        if run_dir is None:
            run_dir = tmp_path / f"{kind}-brokers-{len(made)}"
        brokers = BrokerSet(gbids, broker=kind, run_dir=run_dir, trace=trace)
        made.append(brokers)
        await brokers.start()
        return brokers

    return make


async def stop_all(made: list[BrokerSet]) -> None:
    for brokers in reversed(made):
        await brokers.stop()
