"""Every benchmark module imports: `make bench` is not part of the test run, so a name a
benchmark takes from the simulator (and that moved) would otherwise surface only there."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

import bench

MODULES = sorted(m.name for m in pkgutil.iter_modules(bench.__path__) if m.name.startswith("bench_"))


def test_there_are_benchmarks() -> None:
    assert "bench_fleet" in MODULES and "bench_analytics" in MODULES


@pytest.mark.parametrize("name", MODULES)
def test_a_benchmark_module_imports_and_has_run(name: str) -> None:
    module = importlib.import_module(f"bench.{name}")
    assert callable(module.run)
