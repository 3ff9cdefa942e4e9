"""A pytest plugin for writing your own joynr scenarios as Python tests.

Installed with joynr-sim and loaded by pytest on its own (entry point ``pytest11``); or
name it in a conftest: ``pytest_plugins = ["joynr_sim.testing"]``. Fixtures:

``joynr_simulation``
    ``await joynr_simulation(gbids, broker="amqtt", policy="precedence", network=None)``
    gives a started Simulation (brokers, a GCD per GBID) in the test's tmp_path; closed at
    teardown.

``joynr_brokers``
    ``await joynr_brokers(gbids, broker="amqtt")`` gives a started BrokerSet; stopped at
    teardown.

``joynr_scenario``
    ``await joynr_scenario(source, broker=None, policy=None, network=None)`` runs a scenario
    (YAML text, a path, or a loaded Scenario) into tmp_path and returns its RunResult;
    assert on ``result.passed`` and read the trace under ``result.run_dir``.

Their runtimes run in host processes (``Simulation(processes=True)``): a crash is a real
SIGKILL. Providers there are the built-in interfaces; for one implemented in the test,
build ``Simulation(..., processes=False)`` yourself.

``pytest --network memory`` (or ``network="memory"`` in a fixture's call) runs them on the
memory network instead: every runtime in the test's process, in virtual time. With the
option, every async test of the session runs on a virtual-time loop (pytest-asyncio's
``pytest_asyncio_loop_factories`` hook), so a simulation made in the test and the test's
own ``asyncio.sleep`` share one virtual clock; a ``joynr_scenario`` run on memory from a
test on a real loop gets a virtual-time loop of its own.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from brokers import BrokerSet

from .network import MEMORY, NETWORKS, check_network
from .network.virtual_loop import VirtualTimeLoop
from .scenario.loader import load_scenario, parse_scenario
from .scenario.model import Scenario
from .scenario.runner import RunResult, run_scenario
from .simulation import Simulation


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.getgroup("joynr-sim").addoption(
        "--network", choices=NETWORKS, default=None,
        help="joynr-sim's fixtures: memory (in-memory brokers in virtual time; every async test runs on a "
             "virtual-time loop), amqtt or mosquitto (default: each fixture's broker)")


class _VirtualTime:
    """pytest-asyncio's loop factory for every async test: the virtual-time loop."""

    @pytest.hookimpl
    def pytest_asyncio_loop_factories(self, config: pytest.Config, item: pytest.Item) -> Mapping[str, Any]:
        return {"virtual-time": VirtualTimeLoop}


def pytest_configure(config: pytest.Config) -> None:
    if config.getoption("network", None) == MEMORY:
        config.pluginmanager.register(_VirtualTime(), "joynr-sim-virtual-time")


@pytest.fixture
def joynr_network(request: pytest.FixtureRequest) -> str | None:
    """The network ``--network`` chose for the fixtures (None: each call's broker)."""
    return request.config.getoption("network", None)


@pytest_asyncio.fixture
async def joynr_simulation(tmp_path: Path, joynr_network: str | None
                           ) -> AsyncIterator[Callable[..., Awaitable[Simulation]]]:
    made: list[Simulation] = []

    async def make(gbids: list[str], broker: str = "amqtt", policy: str = "precedence",
                   network: str | None = None) -> Simulation:
        network = check_network(network) if network is not None else joynr_network
        sim = Simulation(tmp_path / f"sim-{len(made)}", gbids=gbids, broker=broker, policy=policy,
                         network=network)
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
async def joynr_scenario(tmp_path: Path, joynr_network: str | None) -> Callable[..., Awaitable[RunResult]]:
    async def run(
        source: str | Path | Scenario, broker: str | None = None, policy: str | None = None,
        network: str | None = None,
    ) -> RunResult:
        if isinstance(source, Scenario):
            scenario = source
        elif isinstance(source, Path) or (isinstance(source, str) and "\n" not in source):
            scenario = load_scenario(Path(source))
        else:
            scenario = parse_scenario(source)
        network = check_network(network) if network is not None else joynr_network
        return await run_scenario(scenario, tmp_path / "runs", broker=broker, policy=policy, network=network)

    return run
