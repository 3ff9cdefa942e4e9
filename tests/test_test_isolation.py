"""The test suite keeps to its own cache folder, also in fixtures that run before any test."""

from __future__ import annotations

import os

import pytest


@pytest.fixture(scope="module")
def cache_seen_by_a_module_fixture() -> str | None:
    return os.environ.get("XDG_CACHE_HOME")


def test_a_module_fixture_sees_the_suites_cache_not_the_users(cache_seen_by_a_module_fixture, tmp_path_factory):
    # A check run from a module fixture (the report's browser tests) wrote the user's
    # ~/.cache/joynr-sim while the suite's folder was set per test only.
    assert cache_seen_by_a_module_fixture == str(tmp_path_factory.getbasetemp() / "xdg-cache")
