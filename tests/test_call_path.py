"""The call path: a provider's method runs where its task would have started and gets a
task only for what comes after it suspends (the rest still answers, fails and is cancelled
as a task's); a reply wakes its caller without a second future."""

from __future__ import annotations

import asyncio

import pytest

from e2e_helpers import until
from joynr_sim.runtime.dispatcher import _rest_of
from joynr_sim.runtime.participants import (
    EchoProvider,
    JoynrTimeoutException,
    ProviderRuntimeException,
    encode_reply,
)
from joynr_sim.simulation import Simulation


async def _body(gate: asyncio.Event, failing: asyncio.Future, log: list[str]) -> int:
    log.append("first step")
    try:
        await gate.wait()
        log.append("second step")
        try:
            await failing
        except ValueError as exc:
            log.append(f"caught {exc}")
        await asyncio.sleep(0)  # a bare yield to the loop
        return 7
    except asyncio.CancelledError:
        log.append("cancelled")
        raise


async def test_the_rest_of_a_suspended_coroutine_runs_as_a_task_would():
    gate, failing, log = asyncio.Event(), asyncio.get_running_loop().create_future(), []
    coroutine = _body(gate, failing, log)
    suspended_on = coroutine.send(None)
    assert log == ["first step"]
    task = asyncio.create_task(_rest_of(coroutine, suspended_on))
    await asyncio.sleep(0)
    assert not task.done()
    gate.set()
    await until(lambda: log[-1:] == ["second step"])
    failing.set_exception(ValueError("boom"))
    assert await task == 7
    assert log == ["first step", "second step", "caught boom"]


async def _spinning(log: list[str]) -> None:
    log.append("first step")
    try:
        while True:
            await asyncio.sleep(0)  # suspends on nothing: only a thrown-in cancellation stops it
    except asyncio.CancelledError:
        log.append("cancelled")
        raise


@pytest.mark.parametrize("suspends", ["on a future", "on nothing"])
async def test_a_cancelled_rest_cancels_the_coroutine(suspends):
    log: list[str] = []
    if suspends == "on a future":
        coroutine = _body(asyncio.Event(), asyncio.get_running_loop().create_future(), log)
    else:
        coroutine = _spinning(log)
    task = asyncio.create_task(_rest_of(coroutine, coroutine.send(None)))
    await asyncio.sleep(0)
    task.cancel()
    done, _ = await asyncio.wait([task], timeout=10)
    if not done:
        coroutine.close()  # so that the loop can close after the failure below
    assert task.cancelled()
    assert log == ["first step", "cancelled"]


class GatedEcho(EchoProvider):
    """echo answers at once; slow_echo when the test opens the gate."""

    def __init__(self) -> None:
        self.gate = asyncio.Event()
        self.log: list[str] = []

    async def slow_echo(self, text: str) -> str:
        self.log.append("waiting")
        try:
            await self.gate.wait()
        except asyncio.CancelledError:
            self.log.append("cancelled")
            raise
        if text == "fail":
            raise RuntimeError("after the wait")
        return text


@pytest.mark.e2e
async def test_providers_that_return_at_once_and_that_suspend(tmp_path):
    async with Simulation(tmp_path, gbids=["gbid1"], broker="mosquitto", faults=False, processes=False) as sim:
        cc = await sim.cluster_controller("cc1")
        provider_app = await sim.libjoynr("provider-app", cc)
        consumer = await sim.libjoynr("consumer", cc)
        impl = GatedEcho()
        await provider_app.register_provider("dom", "joynrsim/Echo", impl, participant_id="gated")
        proxy = await consumer.create_proxy("joynrsim/Echo", "gated")
        spawned: list[str] = []
        spawn = provider_app.dispatcher._spawn

        def counting_spawn(coro):
            spawned.append(coro.__qualname__)
            return spawn(coro)

        provider_app.dispatcher._spawn = counting_spawn
        # A method that does not suspend is answered without a task.
        assert await proxy.call("echo", "now", ttl_ms=10_000) == "now"
        assert spawned == []

        # One that suspends gets a task for the rest; its answer and its failure come back.
        call = asyncio.ensure_future(proxy.call("slow_echo", "later", ttl_ms=10_000))
        failing = asyncio.ensure_future(proxy.call("slow_echo", "fail", ttl_ms=10_000))
        await until(lambda: impl.log == ["waiting", "waiting"])
        assert spawned == ["_rest_of", "_rest_of"]
        impl.gate.set()
        assert await call == "later"
        with pytest.raises(ProviderRuntimeException, match="RuntimeError: after the wait"):
            await failing

        # A crash cancels an invocation that waits, as it cancelled the task before.
        impl.gate.clear()
        impl.log.clear()
        lost = asyncio.ensure_future(proxy.call("slow_echo", "lost", ttl_ms=1_000))
        await until(lambda: impl.log == ["waiting"])
        await provider_app.crash()
        await until(lambda: impl.log == ["waiting", "cancelled"])
        with pytest.raises(JoynrTimeoutException):
            await lost


@pytest.mark.e2e
async def test_a_reply_wakes_its_caller_in_the_loop_turn_it_resolves_and_a_missing_one_times_out(tmp_path):
    async with Simulation(tmp_path, gbids=["gbid1"], broker="mosquitto", faults=False, processes=False) as sim:
        cc = await sim.cluster_controller("cc1")
        consumer = await sim.libjoynr("consumer", cc)
        proxy = await consumer.create_proxy("joynrsim/Echo", "nobody")
        call = asyncio.ensure_future(proxy.call("echo", "x", ttl_ms=10_000))
        await until(lambda: len(consumer.dispatcher._pending) == 1)
        (reply,) = consumer.dispatcher._pending.values()
        reply.set_result(encode_reply("answered", None))
        await asyncio.sleep(0)  # one loop turn
        assert call.done() and call.result() == "answered"
        assert consumer.dispatcher._pending == {}

        with pytest.raises(JoynrTimeoutException, match="no reply within 200 ms"):
            await proxy.call("echo", "y", ttl_ms=200)
        assert consumer.dispatcher._pending == {}
