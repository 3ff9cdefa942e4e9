"""The fleet scenario format: what the loader takes, what it refuses (``file:line: field:
what``), the wave windows and the ``--hosts`` option. Nothing here starts a runtime."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from joynr_sim.cli import _hosts
from joynr_sim.core.address import WebSocketClientAddress
from joynr_sim.core.routing import RoutingEntry
from joynr_sim.scenario import load_scenario
from joynr_sim.scenario.fleet import (
    MAX_OPS_PER_S,
    FleetRunner,
    StrayCancellation,
    WaveError,
    _all,
    _bounded,
    fleet_hosts,
    wave_steps,
    windows,
)
from joynr_sim.scenario.loader import ScenarioError, parse_scenario

FLEET = Path(__file__).resolve().parent.parent / "scenarios" / "fleet"

BASE = """\
name: f
reproduces: {seed: s.txt, scenario: x}
smoke: why
backends: [gbid1, gbid2]
fleet:
  population:
    cluster_controllers: 4
    libjoynr_per_cc: 3
    providers: {per_cc: 1, participant_id: "p-{cc}-{i}"}
    proxies: {target: "p-{next}-0"}
  load: {calls_per_second_per_proxy: 2}
  duration_s: 30
  waves:
    - {at_s: 5, restart: {fraction: 0.5, over_s: 10}}
    - {at_s: 20, crash_broker: {gbid: gbid2, for_s: 5}}
    - {at_s: 25, duplicate_cc_ids: 2}
  expect: {lost: 0}
"""


def _load(text: str):
    return parse_scenario(text, "fleet.yaml")


def _refused(text: str) -> str:
    with pytest.raises(ScenarioError) as info:
        _load(text)
    return str(info.value)


def test_the_base_loads_with_its_defaults() -> None:
    s = _load(BASE)
    f = s.fleet
    assert s.runtimes == () and s.steps == () and s.checks
    assert (f.cluster_controllers, f.libjoynr_per_cc, f.providers_per_cc, f.proxies_per_cc) == (4, 3, 1, 2)
    assert (f.interface, f.domain, f.provider_scope, f.proxy_scope) == (
        "joynrsim/Echo", "fleet", "GLOBAL", "LOCAL_THEN_GLOBAL")
    assert (f.method, f.args, f.ttl_ms) == ("echo", ("x",), 10000)
    assert [w.title for w in f.waves] == [
        "restart 0.5 of the cluster controllers over 10 s", "crash broker gbid2 for 5 s", "duplicate 2 CC ids"]
    assert [w.line for w in f.waves] == [14, 15, 16]
    assert f.target_of(3, 1) == "p-0-0" and f.provider_participant(2, 0) == "p-2-0"
    assert f.expect == {"lost": 0} and f.expect_lines == {"lost": 17}
    assert f.broker_autosave is None  # the broker saves after every change


def test_a_fleet_may_choose_the_brokers_save_interval() -> None:
    f = _load(BASE.replace("duration_s: 30", "duration_s: 30\n  broker_autosave: 1000")).fleet
    assert f.broker_autosave == 1000


@pytest.mark.parametrize("path", sorted(FLEET.glob("*.yaml")), ids=lambda p: p.name)
def test_the_example_fleets_load(path: Path) -> None:
    s = load_scenario(path)
    assert s.fleet is not None and (s.guards or s.smoke)


def test_the_1000x10000_example_is_the_target_fleet_size() -> None:
    f = load_scenario(FLEET / "restart-wave-1000x10000.yaml").fleet
    assert (f.cluster_controllers, f.cluster_controllers * f.libjoynr_per_cc) == (1000, 10000)
    (wave,) = f.waves
    assert (wave.restart.fraction, wave.restart.over_s, wave.restart.register_providers) == (0.5, 30, True)


BAD = [
    # (replace this, with that, the error: line, field, message)
    ("cluster_controllers: 4", "cluster_controllers: 0",
     r"fleet.yaml:7: fleet.population.cluster_controllers: must be at least 1, got 0"),
    ("cluster_controllers: 4", "cluster_controllers: 10001", r":7: .*cluster_controllers: must be at most 10000"),
    ("cluster_controllers: 4", "cluster_controllers: 4.0", r":7: .*cluster_controllers: expected an integer"),
    ("cluster_controllers: 4", "cluster_controllers: 99999999999999999999999", r":7: .*cannot read"),
    ("cluster_controllers: 4\n    libjoynr_per_cc: 3", "cluster_controllers: 10000\n    libjoynr_per_cc: 10",
     r":8: fleet.population.libjoynr_per_cc: .* 110000 runtimes; at most 100000"),
    ("libjoynr_per_cc: 3", "libjoynr_per_cc: 3\n    colour: red",
     r":9: fleet.population.colour: unknown key for population"),
    ("duration_s: 30", "duration_s: 30\n  size: 3", r":13: fleet.size: unknown key for fleet"),
    ("duration_s: 30", "duration_s: 86401", r":12: fleet.duration_s: must be at most 86400"),
    ("duration_s: 30", "duration_s: 30\n  broker_autosave: 0", r":13: fleet.broker_autosave: must be at least 1"),
    ("duration_s: 30", "duration_s: 30\n  broker_autosave: 2.5", r":13: fleet.broker_autosave: expected an integer"),
    ("{calls_per_second_per_proxy: 2}", "{calls_per_second_per_proxy: 0}",
     r":11: fleet.load.calls_per_second_per_proxy: must be at least 0.01"),
    ("{calls_per_second_per_proxy: 2}", "{calls_per_second_per_proxy: 2, ttl_ms: 600001}",
     r":11: fleet.load.ttl_ms: must be at most 600000"),
    ("{calls_per_second_per_proxy: 2}", "{calls_per_second_per_proxy: 2, method: 'a b'}",
     r":11: fleet.load.method: 'a b' does not match"),
    ("{per_cc: 1,", "{per_cc: 3,", r":9: fleet.population.providers.per_cc: must be below libjoynr_per_cc \(3\)"),
    ('"p-{cc}-{i}"', '"p-{cc}-{x}"', r":9: .*participant_id: unknown placeholder \{x\}; choose from \{cc\}, \{i\}"),
    ('"p-{cc}-{i}"', '"p-{cc}-{}"', r":9: .*participant_id: 'p-\{cc\}-\{\}' is not a pattern"),
    ('"p-{cc}-{i}"', '"p-{cc}}-{i}"', r":9: .*participant_id: 'p-\{cc\}\}-\{i\}' is not a pattern"),
    ('"p-{cc}-{i}"', '"p-{i}"', r":9: .*participant_id: gives 'p-0' twice"),
    ('"p-{next}-0"', '"p-{next}-1"', r":10: fleet.population.proxies.target: gives 'p-1-1' for proxy 0 of cc 0"),
    ('"p-{next}-0"', '"p-{next"', r":10: .*target: 'p-\{next' does not match|is not a pattern"),
    ("{at_s: 5, restart", "{at_s: 31, restart", r":14: fleet.waves\[0\].at_s: must be at most|before duration_s"),
    ("over_s: 10", "over_s: 26", r":14: fleet.waves\[0\].restart.over_s: the wave would end at 31 s"),
    ("fraction: 0.5", "fraction: 1.5", r":14: fleet.waves\[0\].restart.fraction: must be at most 1"),
    ("over_s: 10}", "over_s: 10, register_providers: 'no'}",
     r":14: fleet.waves\[0\].restart.register_providers: expected true or false, got 'no'"),
    ("{at_s: 25, dup", "{at_s: 19, dup", r":16: fleet.waves\[2\].at_s: waves come in order of at_s"),
    ("gbid: gbid2", "gbid: gbid3", r":15: fleet.waves\[1\].crash_broker.gbid: 'gbid3' is not one of the backends"),
    ("duplicate_cc_ids: 2", "duplicate_cc_ids: 5", r":16: .*duplicate_cc_ids: must be at most cluster_controllers"),
    ("duplicate_cc_ids: 2}", "duplicate_cc_ids: 2, restart: {fraction: 1}}",
     r":16: fleet.waves\[2\]: give exactly one of restart, crash_broker, duplicate_cc_ids"),
    ("{at_s: 25, duplicate_cc_ids: 2}", "{at_s: 25, reboot: 2}", r":16: fleet.waves\[2\].reboot: unknown key"),
    ("expect: {lost: 0}", "expect: {}", r":17: fleet.expect: give at least one of lost, failed, answered_fraction"),
    ("expect: {lost: 0}", "expect: {lost: -1}", r":17: fleet.expect.lost: must be at least 0"),
    ("expect: {lost: 0}", "expect: {answered_fraction: 2}", r":17: .*answered_fraction: must be at most 1"),
    ("fleet:\n", "gbids: [gbid1]\nfleet:\n", r":5: gbids: unknown key"),
    ("libjoynr_per_cc: 3", "libjoynr_per_cc: 3\n    gbids: [gbid9]", r":9: fleet.population.gbids: 'gbid9' is not"),
    ("smoke: why\n", "", r"fleet.yaml:1: \(top\): a fleet scenario says what it guards"),
    ("backends: [gbid1, gbid2]\n", "backends: [gbid1, gbid2]\nruntimes: []\n",
     r":5: runtimes: a fleet scenario declares its runtimes and load in fleet:"),
    ("smoke: why\n", "smoke: why\nguards: [gcd-trust]\n", r":3: smoke: give guards or smoke, not both"),
    ("backends: [gbid1, gbid2]\n", "backends: [gbid1, gbid2]\nbroker: gbid1=mqtt://h:1\n",
     r":5: broker: .*gbid2"),
]


@pytest.mark.parametrize("old, new, error", BAD, ids=[b[2][:40] for b in BAD])
def test_the_loader_refuses(old: str, new: str, error: str) -> None:
    assert old in BASE
    message = _refused(BASE.replace(old, new, 1))
    assert re.search(error, message), message


def test_an_ordinary_scenario_still_needs_runtimes_and_steps() -> None:
    text = BASE.split("fleet:")[0]
    assert "missing required key 'runtimes'" in _refused(text)


def test_windows_run_from_wave_to_wave() -> None:
    f = _load(BASE).fleet
    assert [(w.name, w.from_s, w.to_s) for w in windows(f)] == [
        ("before waves", 0, 5), ("wave 0", 5, 20), ("wave 1", 20, 25), ("wave 2", 25, 30)]
    at_zero = _load(BASE.replace("{at_s: 5, restart", "{at_s: 0, restart")).fleet
    assert windows(at_zero)[0].name == "wave 0"
    kinds = [k for k, _, _ in wave_steps(f)]
    assert kinds == ["population", "load", "wave", "wave", "wave", "expect"]


def test_window_counts_timeouts_as_lost_and_a_dead_op_as_lost_calls() -> None:
    w = windows(_load(BASE).fleet)[0]
    w.add(4, {"ok": 1, "failed": {"JoynrTimeoutException": 2, "ProviderRuntimeException": 1}})
    w.add(3, ConnectionError("host gone"))
    assert (w.started, w.answered, w.failed, w.lost) == (7, 1, 1, 5)
    assert w.failed_by == {"JoynrTimeoutException": 2, "ProviderRuntimeException": 1, "op: ConnectionError": 3}


@pytest.mark.parametrize("proxies, rate, expected", [
    (4, 2, (1.0, 2)), (4, 0.3, (1 / 0.3, 1)), (9000, 0.1, (50.0, 5)), (9000, 10, (45.0, 450)), (1, 1000, (1.0, 1000)),
])
def test_load_slices_keep_the_rate_and_the_runner_within_its_ops(proxies: int, rate: float, expected) -> None:
    fleet = _load(BASE.replace("calls_per_second_per_proxy: 2", f"calls_per_second_per_proxy: {rate}")).fleet
    runner = FleetRunner(fleet, sim=None, trace=None, seed=1)  # type: ignore[arg-type]
    runner.pairs = [None] * proxies  # type: ignore[list-item]
    slice_s, calls = runner.slicing()
    assert slice_s == pytest.approx(expected[0]) and calls == expected[1]
    assert calls / slice_s == pytest.approx(rate)
    assert slice_s >= 1 and proxies / slice_s <= MAX_OPS_PER_S


def test_hosts_default_to_cores_with_at_most_80_controllers_each(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("os.cpu_count", lambda: 2)
    f = _load(BASE).fleet
    assert fleet_hosts(f, None) == fleet_hosts(f, "cores") == 2
    assert fleet_hosts(f, 7) == 7
    big = _load(BASE.replace("cluster_controllers: 4", "cluster_controllers: 1000")).fleet
    assert fleet_hosts(big, "cores") == 13


@pytest.mark.parametrize("value", ["0", "-1", "x", "1025", " 2", "２", "1.5"])
def test_a_bad_hosts_value_is_refused(value: str) -> None:
    with pytest.raises(ValueError, match=r"--hosts: expected a number from 1 to 1024, 'cores' or 'ray'"):
        _hosts(value)
    assert [_hosts(v) for v in (None, "cores", "ray", "1", "1024")] == [None, "cores", "ray", 1, 1024]


def test_run_exits_2_on_a_bad_hosts_value(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "joynr_sim.cli", "run", str(FLEET), "--hosts=0",
                           "--out", str(tmp_path / "runs")], capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done
    assert done.stderr == "joynr-sim run: --hosts: expected a number from 1 to 1024, 'cores' or 'ray', got '0'\n"
    assert not (tmp_path / "runs").exists()



def test_run_exits_2_on_an_unknown_event_loop(tmp_path: Path) -> None:
    env = {**os.environ, "JOYNR_SIM_EVENT_LOOP": "tokio"}
    done = subprocess.run([sys.executable, "-m", "joynr_sim.cli", "run", str(FLEET), "--out", str(tmp_path / "runs")],
                          capture_output=True, text=True, timeout=60, env=env)
    assert done.returncode == 2, done
    assert done.stderr == "joynr-sim run: JOYNR_SIM_EVENT_LOOP: expected uvloop or asyncio, got 'tokio'\n"
    assert not (tmp_path / "runs").exists()

class _FakeTable:
    """A restarted controller's routing table: its runtimes' participants come back (as
    WebSocketClient routes) after ``polls`` lookups, or never."""

    def __init__(self, polls: int | None) -> None:
        self.polls, self.lookups = polls, 0

    async def lookup_route(self, participant_id: str) -> RoutingEntry | None:
        self.lookups += 1
        if self.polls is None or self.lookups <= self.polls:
            return None
        return RoutingEntry(WebSocketClientAddress(participant_id.split("-")[1]), False, 0)


class _FakeController:
    """Stands in for a cluster controller's handle: a restart either works or not."""

    def __init__(self, k: int, broken: bool, polls: int | None = 0) -> None:
        self.k, self.broken, self.starts, self.table = k, broken, 0, _FakeTable(polls)
        self.lookup_route = self.table.lookup_route

    async def stop(self) -> None:
        if self.broken:
            raise TimeoutError("stop: no answer within 60 s")

    async def start(self) -> None:
        self.starts += 1


class _FakeApp:
    """A libjoynr runtime's handle: what it registered, and what its controller's table
    had announced by then."""

    def __init__(self, cc: _FakeController) -> None:
        self.cc, self.registered = cc, []

    async def register_provider(self, domain, interface, implementation, *, participant_id, scope) -> None:
        self.registered.append((participant_id, scope, self.cc.table.lookups))


def _restarting(fleet, polls: int | None = 0, broken=()) -> FleetRunner:
    runner = FleetRunner(fleet, sim=None, trace=None, seed=1)  # type: ignore[arg-type]
    runner.ccs = [_FakeController(k, broken=k in broken, polls=polls) for k in range(fleet.cluster_controllers)]
    runner.by_cc = [[_FakeApp(cc) for _ in range(fleet.libjoynr_per_cc)] for cc in runner.ccs]
    runner.pairs = [(None, SimpleNamespace(participant_id=f"px-{k}-{i}"))
                    for k in range(fleet.cluster_controllers) for i in range(fleet.proxies_per_cc)]
    return runner


async def test_a_failed_restart_is_named_and_the_wave_goes_on() -> None:
    fleet = _load(BASE.replace("fraction: 0.5", "fraction: 1")).fleet
    runner = _restarting(fleet, broken=(1, 2))
    t0 = asyncio.get_running_loop().time() - 1000  # every restart's time has come
    with pytest.raises(WaveError) as info:
        await runner._restart(fleet.waves[0], t0)
    assert re.fullmatch(r"restart of cc[12]: TimeoutError: stop: no answer within 60 s \(and 1 more of 4\)",
                        str(info.value)), info.value
    assert [c.starts for c in runner.ccs] == [1, 0, 0, 1]


async def test_a_restarted_controllers_providers_register_again_once_its_runtimes_reconnected(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("joynr_sim.scenario.fleet.RECONNECT_POLL_S", 0)
    fleet = _load(BASE.replace("fraction: 0.5", "fraction: 1")).fleet
    runner = _restarting(fleet, polls=5)
    await runner._restart(fleet.waves[0], asyncio.get_running_loop().time() - 1000)
    for k, apps in enumerate(runner.by_cc):
        # Its provider, under its participant id and scope, after the 5 lookups that found
        # nothing and the 3 that found the provider and both proxies announced again.
        assert apps[0].registered == [(f"p-{k}-0", "GLOBAL", 8)], k
        assert apps[1].registered == apps[2].registered == []  # the proxies' runtimes


async def test_a_runtime_that_does_not_reconnect_fails_its_controllers_restart(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("joynr_sim.scenario.fleet.RECONNECT_POLL_S", 0)
    monkeypatch.setattr("joynr_sim.scenario.fleet.RECONNECT_TIMEOUT_S", 0.01)
    fleet = _load(BASE.replace("fraction: 0.5", "fraction: 0.25")).fleet
    runner = _restarting(fleet, polls=None)
    with pytest.raises(WaveError) as info:
        await runner._restart(fleet.waves[0], asyncio.get_running_loop().time() - 1000)
    assert re.fullmatch(r"restart of cc(\d): TimeoutError: 3 libjoynr participants not announced again "
                        r"within 0.01 s \(first: p-\1-0\)", str(info.value)), info.value
    assert all(app.registered == [] for apps in runner.by_cc for app in apps)


async def test_register_providers_false_leaves_the_restarted_controllers_providers_unregistered() -> None:
    fleet = _load(BASE.replace("over_s: 10}", "over_s: 10, register_providers: false}")).fleet
    assert fleet.waves[0].title == "restart 0.5 of the cluster controllers over 10 s (providers not registered again)"
    runner = _restarting(fleet, polls=None)  # waiting for it would time out
    await runner._restart(fleet.waves[0], asyncio.get_running_loop().time() - 1000)
    assert sorted(c.starts for c in runner.ccs) == [0, 0, 1, 1]
    assert all(app.registered == [] for apps in runner.by_cc for app in apps)
    assert all(c.table.lookups == 0 for c in runner.ccs)


async def test_a_start_action_that_found_no_answer_is_tried_again_an_error_reply_is_not() -> None:
    from joynr_sim.core.errors import JoynrRuntimeException, JoynrTimeoutException, ProviderRuntimeException
    from joynr_sim.scenario.fleet import START_TRIES

    runner = FleetRunner(_load(BASE).fleet, sim=None, trace=None, seed=1)  # type: ignore[arg-type]
    tries = []

    async def late(error: Exception, answer_at: int):
        tries.append(error)
        if len(tries) < answer_at:
            raise error
        return "proxy"

    assert await runner._tried(lambda: late(JoynrTimeoutException("no reply within 10000 ms"), 2)) == "proxy"
    assert runner.summary["start_retries"] == 1
    tries.clear()
    with pytest.raises(JoynrRuntimeException, match="no reply"):  # a lookup the controller gave up on
        await runner._tried(lambda: late(JoynrRuntimeException("no reply"), START_TRIES + 1))
    assert len(tries) == START_TRIES
    tries.clear()
    with pytest.raises(ProviderRuntimeException):  # an answer: not tried again
        await runner._tried(lambda: late(ProviderRuntimeException("refused"), 2))
    assert len(tries) == 1


async def test_a_start_cancelled_while_it_waits_for_its_limit_is_closed_not_left_unawaited():
    async def start() -> None:
        raise AssertionError("never runs: its turn never came")

    coro = start()
    waiting = asyncio.create_task(_bounded(asyncio.Semaphore(0), coro))
    await asyncio.sleep(0)  # the task now waits for the limit
    waiting.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiting
    assert coro.cr_frame is None  # closed: no "coroutine was never awaited" at teardown


async def test_an_action_that_ends_cancelled_unasked_fails_the_start_instead_of_leaving_it_waiting() -> None:
    """A registration whose reply future something else cancelled ends cancelled: Python
    3.11's TaskGroup ignores such a child, and the proxy waiting for the registration would
    wait for ever. The start fails instead, naming it."""
    loop = asyncio.get_running_loop()
    registered = asyncio.Event()

    async def register() -> None:
        reply = loop.create_future()
        loop.call_soon(reply.cancel)  # e.g. a connection's pending replies cancelled at its end
        await reply
        registered.set()

    async def proxy() -> None:
        await registered.wait()

    with pytest.raises(StrayCancellation, match="ended cancelled") as caught:
        await asyncio.wait_for(_all([register(), proxy()]), 10)  # the bound only ends a broken test
    assert isinstance(caught.value.__cause__, asyncio.CancelledError)


async def test_cancelling_the_start_still_cancels_every_action() -> None:
    started = asyncio.Event()

    async def waits() -> None:
        started.set()
        await asyncio.Event().wait()

    start = asyncio.create_task(_all([waits(), waits()]))
    await started.wait()
    start.cancel()
    with pytest.raises(asyncio.CancelledError):
        await start
