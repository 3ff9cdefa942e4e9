"""A pytest plugin for writing your own joynr scenarios as Python tests.

Installed with joynr-sim and loaded by pytest on its own (entry point ``pytest11``); or
name it in a conftest: ``pytest_plugins = ["joynr_sim.testing"]``. Fixtures:

``joynr_simulation``
    ``await joynr_simulation(gbids, broker="amqtt", policy="precedence")`` gives a started
    Simulation (brokers, a GCD per GBID) in the test's tmp_path; closed at teardown.

``joynr_brokers``
    ``await joynr_brokers(gbids, broker="amqtt")`` gives a started BrokerSet; stopped at
    teardown.

``joynr_scenario``
    ``await joynr_scenario(source, broker=None, policy=None)`` runs a scenario (YAML text,
    a path, or a loaded Scenario) into tmp_path and returns its RunResult; assert on
    ``result.passed`` and read the trace under ``result.run_dir``.

Their runtimes run in host processes (``Simulation(processes=True)``): a crash is a real
SIGKILL. Providers there are the built-in interfaces; for one implemented in the test,
build ``Simulation(..., processes=False)`` yourself.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest_asyncio

from brokers import BrokerSet

from .scenario.loader import load_scenario, parse_scenario
from .scenario.model import Scenario
from .scenario.runner import RunResult, run_scenario
from .simulation import Simulation


@pytest_asyncio.fixture
async def joynr_simulation(tmp_path: Path) -> AsyncIterator[Callable[..., Awaitable[Simulation]]]:
    made: list[Simulation] = []

    async def make(gbids: list[str], broker: str = "amqtt", policy: str = "precedence") -> Simulation:
        sim = Simulation(tmp_path / f"sim-{len(made)}", gbids=gbids, broker=broker, policy=policy)
        made.append(sim)
        await sim.start()
        return sim

    yield make
    for sim in reversed(made):
        await sim.close()


@pytest_asyncio.fixture
async def joynr_brokers(tmp_path: Path) -> AsyncIterator[Callable[..., Awaitable[BrokerSet]]]:
    made: list[BrokerSet] = []

    async def make(gbids: list[str], broker: str = "amqtt") -> BrokerSet:
        brokers = BrokerSet(gbids, broker=broker, run_dir=tmp_path / f"brokers-{len(made)}")
        made.append(brokers)
        await brokers.start()
        return brokers

    yield make
    for brokers in reversed(made):
        await brokers.stop()


@pytest_asyncio.fixture
async def joynr_scenario(tmp_path: Path) -> Callable[..., Awaitable[RunResult]]:
    async def run(
        source: str | Path | Scenario, broker: str | None = None, policy: str | None = None
    ) -> RunResult:
        if isinstance(source, Scenario):
            scenario = source
        elif isinstance(source, Path) or (isinstance(source, str) and "\n" not in source):
            scenario = load_scenario(Path(source))
        else:
            scenario = parse_scenario(source)
        return await run_scenario(scenario, tmp_path / "runs", broker=broker, policy=policy)

    return run
