"""Broker fixtures for tests on real brokers; import them into a test module:

    from broker_fixtures import amqtt_brokers, mosquitto_brokers  # noqa: F401

(pytest puts ``tests/`` on ``sys.path`` for its modules, so the plain module name works.)

    async def test_x(amqtt_brokers):
        brokers = await amqtt_brokers(["gbid-a", "gbid-b"])
        host, port = brokers.endpoint("gbid-a")

Each fixture is an async factory ``make(gbids, *, trace=None, run_dir=None) -> BrokerSet``
that returns a started set; every set it made is stopped at teardown. Without ``run_dir``
each set gets its own directory under the test's ``tmp_path``. ``mosquitto_brokers`` fails
(never skips) when Mosquitto is not installed, naming what it looked for.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable
from pathlib import Path
from typing import Protocol

import pytest_asyncio

from brokers import BrokerSet
from joynr_sim.trace import TraceWriter


class BrokerFactory(Protocol):
    def __call__(
        self, gbids: list[str], *, trace: TraceWriter | None = None, run_dir: Path | None = None
    ) -> Awaitable[BrokerSet]: ...


def _factory(kind: str, tmp_path: Path, made: list[BrokerSet]) -> BrokerFactory:
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


async def _cleanup(made: list[BrokerSet]) -> None:
    for brokers in reversed(made):
        await brokers.stop()


@pytest_asyncio.fixture
async def amqtt_brokers(tmp_path: Path) -> AsyncIterator[BrokerFactory]:
    made: list[BrokerSet] = []
    yield _factory("amqtt", tmp_path, made)
    await _cleanup(made)


@pytest_asyncio.fixture
async def mosquitto_brokers(tmp_path: Path) -> AsyncIterator[BrokerFactory]:
    made: list[BrokerSet] = []
    yield _factory("mosquitto", tmp_path, made)
    await _cleanup(made)


__all__ = ["BrokerFactory", "amqtt_brokers", "mosquitto_brokers"]
