"""Shared fixtures and the test tiers.

Tiers (markers registered in pyproject.toml): ``e2e`` starts brokers or runtimes,
``spark`` starts Spark, ``postgres`` needs PostgreSQL; ``make test-fast`` runs the rest.
A test gets its tier's mark here when it uses one of the tier's fixtures (the broker,
simulation and scenario fixtures, ``spark``, the PostgreSQL side of ``store``); a module
whose tests start these things themselves says so in its ``pytestmark``. So that no test
can miss its mark silently, a guard fails any test that starts a broker or runtime, a
SparkContext or a PostgreSQL connection without carrying the matching mark.

Plain helpers live in ``broker_helpers``, ``gcd_helpers`` and ``analytics_helpers``.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import psycopg
import pytest
import pytest_asyncio
from pyspark.context import SparkContext

from broker_helpers import BrokerFactory, broker_factory, stop_all
from brokers import BrokerSet
from joynr_sim.host.process.host_process import HostProcess
from joynr_sim.runtime.base import Runtime

# -- tiers ------------------------------------------------------------------------------

TIER_FIXTURES = {
    "e2e": {"amqtt_brokers", "mosquitto_brokers", "joynr_simulation", "joynr_brokers",
            "joynr_scenario"},
    "spark": {"spark"},
}

# What each tier starts: (owner, attribute, what it is). Checked after a successful call.
# A runtime on the memory network (in this process, in virtual time: joynr_sim.network)
# opens no socket and starts no process: it is no end-to-end test's, and runs in the fast tier.
TIER_STARTS: dict[str, list[tuple[object, str, str]]] = {
    "e2e": [(BrokerSet, "start", "a broker"), (Runtime, "start", "a runtime on real sockets"),
            (HostProcess, "spawn", "a host process")],
    "spark": [(SparkContext, "__init__", "a SparkContext")],
    "postgres": [(psycopg, "connect", "a PostgreSQL connection")],
}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        used = set(getattr(item, "fixturenames", ()))
        for tier, fixtures in TIER_FIXTURES.items():
            if used & fixtures:
                item.add_marker(tier)


def _on_real_sockets(args: tuple) -> bool:
    owner = args[0] if args else None
    return not (isinstance(owner, Runtime) and owner.network is not None)


def _watching(original: Callable, on_start: Callable[[], None]) -> Callable:
    if inspect.iscoroutinefunction(original):
        @functools.wraps(original)
        async def watched_async(*args, **kwargs):
            result = await original(*args, **kwargs)
            if _on_real_sockets(args):
                on_start()
            return result

        return watched_async

    @functools.wraps(original)
    def watched(*args, **kwargs):
        result = original(*args, **kwargs)
        if _on_real_sockets(args):
            on_start()
        return result

    return watched


@pytest.fixture(autouse=True)
def _tier_guard(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Fails a test that starts what a tier starts without the tier's mark."""
    missing: dict[str, str] = {}
    for tier, starts in TIER_STARTS.items():
        if request.node.get_closest_marker(tier) is not None:
            continue
        for owner, name, what in starts:
            def seen(tier: str = tier, what: str = what) -> None:
                missing.setdefault(tier, what)

            monkeypatch.setattr(owner, name, _watching(getattr(owner, name), seen))
    yield
    if missing:
        pytest.fail(
            "; ".join(f"started {what} but is not marked {tier}" for tier, what in missing.items())
            + " (add the mark, e.g. pytestmark = pytest.mark.<tier> in its module)",
            pytrace=False,
        )


@pytest.fixture(scope="session", autouse=True)
def _trace_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """``joynr-sim check`` caches parsed traces and Spark's class archive under
    $XDG_CACHE_HOME: in a test, a temporary folder (inherited by the commands a test starts),
    never the user's cache. Session-wide, so that module fixtures which run a check before
    any test (the report's browser tests) see it too."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("XDG_CACHE_HOME", str(tmp_path_factory.getbasetemp() / "xdg-cache"))
        yield


# -- brokers ----------------------------------------------------------------------------


@pytest_asyncio.fixture
async def amqtt_brokers(tmp_path: Path) -> AsyncIterator[BrokerFactory]:
    """``await amqtt_brokers(gbids, trace=None, run_dir=None)``: a started BrokerSet."""
    made: list[BrokerSet] = []
    yield broker_factory("amqtt", tmp_path, made)
    await stop_all(made)


@pytest_asyncio.fixture
async def mosquitto_brokers(tmp_path: Path) -> AsyncIterator[BrokerFactory]:
    """The same on Mosquitto; fails (never skips) when Mosquitto is not installed."""
    made: list[BrokerSet] = []
    yield broker_factory("mosquitto", tmp_path, made)
    await stop_all(made)


# -- Spark ------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def spark():
    """One local Spark session per pytest run."""
    from pyspark.sql import SparkSession

    session = (
        SparkSession.builder.master("local[2]")
        .appName("analytics-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


@pytest.fixture(autouse=True)
def _release_spark_cache(request):
    """What a test cached in the shared session goes with the test."""
    yield
    if "spark" in request.fixturenames:
        request.getfixturevalue("spark").catalog.clearCache()
