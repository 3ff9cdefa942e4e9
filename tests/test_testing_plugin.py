"""The pytest plugin users write their own scenarios with."""

from __future__ import annotations

from joynr_sim.runtime.participants import EchoProvider

pytest_plugins = ["pytester"]

SCENARIO = """
name: plugin-echo
reproduces: {seed: 000_65e83c7f1cb84fd7.txt, scenario: "A proxy is built for a local provider"}
backends: [gbid1]
runtimes:
  - {id: cc1, kind: cluster-controller}
  - {id: app1, kind: libjoynr, cc: cc1}
  - {id: app2, kind: libjoynr, cc: cc1}
steps:
  - register: {runtime: app1, provider: p, domain: d, interface: joynrsim/Echo, scope: LOCAL}
  - proxy: {runtime: app2, name: px, domain: d, interface: joynrsim/Echo, scope: LOCAL_ONLY}
  - call: {proxy: px, method: echo, args: [hi], expect: {result: hi}}
  - expect_route: {runtime: cc1, participant: "@px", type: WebSocketClient}
  - expect_route: {runtime: cc1, participant: "@p", type: Mqtt}
"""


async def test_scenario_fixture_runs_yaml_and_reports_the_failing_step(joynr_scenario):
    result = await joynr_scenario(SCENARIO)
    # The last step expects what the precedence rules do not allow: it fails, and says so.
    assert result.outcome == "failed"
    failed = result.failed_step
    assert failed.index == 4 and "type WebSocketClient, expected Mqtt" in failed.detail
    assert [s.outcome for s in result.steps] == ["ok", "ok", "ok", "ok", "failed"]


async def test_simulation_fixture_gives_a_running_topology(joynr_simulation):
    sim = await joynr_simulation(["gbid1"])
    cc = await sim.cluster_controller("cc1")
    app = await sim.libjoynr("app", cc)
    await app.register_provider("d", "joynrsim/Echo", EchoProvider(), participant_id="e", scope="LOCAL")
    proxy = await cc.discover_proxy("joynrsim/Echo", "d", scope="LOCAL_ONLY")
    assert await proxy.call("echo", "x") == "x"


async def test_brokers_fixture(joynr_brokers):
    brokers = await joynr_brokers(["a", "b"], broker="mosquitto")
    assert brokers.endpoint("a") != brokers.endpoint("b")
    assert brokers.is_running("a") and brokers.is_running("b")


async def test_scenario_fixture_runs_on_the_memory_network(joynr_scenario):
    result = await joynr_scenario(SCENARIO, network="memory")
    assert result.network == "memory" and result.broker == "memory"
    assert [s.outcome for s in result.steps] == ["ok", "ok", "ok", "ok", "failed"]


def test_network_option_runs_the_tests_in_virtual_time(pytester):
    """With --network memory a test's simulation and its own sleeps share one virtual clock:
    a minute passes at once, and the simulation's brokers are in memory."""
    pytester.makepyfile(test_virtual="""
        import asyncio, time

        async def test_a_minute(joynr_simulation):
            sim = await joynr_simulation(["gbid1"])
            assert sim.brokers.kind == "memory"
            loop = asyncio.get_running_loop()
            began, wall = loop.time(), time.monotonic()
            await asyncio.sleep(60)
            assert loop.time() - began == 60
            assert time.monotonic() - wall < 30
    """)
    result = pytester.runpytest_subprocess("--network", "memory", "-q", "-o", "asyncio_mode=auto",
                                          "-o", "asyncio_default_fixture_loop_scope=function")
    result.assert_outcomes(passed=1)


def test_network_option_refuses_an_unknown_network(pytester):
    pytester.makepyfile(test_nothing="def test_nothing():\n    pass\n")
    result = pytester.runpytest_subprocess("--network", "nowhere")
    assert result.ret != 0
    assert "memory" in result.stderr.str() and "nowhere" in result.stderr.str()
