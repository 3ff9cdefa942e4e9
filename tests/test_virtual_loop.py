"""The virtual-time loop: its clock jumps to the next timer, timers due at one instant run
in the order they were set, executor calls run inline and sockets are refused.

Every test is a plain function running its coroutine with ``virtual_loop.run``: on this
loop ``asyncio.sleep(x)`` is exactly ``x`` of virtual time, so times are asserted exactly."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest

from joynr_sim.network import virtual_loop
from joynr_sim.network.virtual_loop import NoSockets, VirtualTimeLoop


def test_run_gives_the_coroutines_result_on_a_virtual_time_loop() -> None:
    async def main() -> tuple[bool, float]:
        return virtual_loop.on_virtual_time(), asyncio.get_running_loop().time()

    assert virtual_loop.run(main()) == (True, 0.0)
    assert virtual_loop.on_virtual_time() is False  # outside any loop


def test_the_clock_jumps_to_the_next_timer_and_stays_between_them() -> None:
    async def main() -> list[tuple[str, float]]:
        loop = asyncio.get_running_loop()
        seen: list[tuple[str, float]] = []
        loop.call_later(3, lambda: seen.append(("a", loop.time())))
        loop.call_later(7.5, lambda: seen.append(("b", loop.time())))
        await asyncio.sleep(0)  # nothing due: no jump
        seen.append(("after sleep(0)", loop.time()))
        await asyncio.sleep(10)
        seen.append(("after sleep(10)", loop.time()))
        assert isinstance(loop, VirtualTimeLoop)
        seen.append(("jumps", loop.jumps))
        return seen

    assert virtual_loop.run(main()) == [
        ("after sleep(0)", 0.0), ("a", 3.0), ("b", 7.5), ("after sleep(10)", 10.0), ("jumps", 3),
    ]


def test_a_minute_of_sleep_is_one_jump_and_no_real_wait() -> None:
    async def main() -> tuple[float, int]:
        loop = asyncio.get_running_loop()
        await asyncio.sleep(60)
        return loop.time(), loop.jumps

    started = time.monotonic()
    assert virtual_loop.run(main()) == (60.0, 1)
    # Generous: the point is that 60 s of virtual time do not cost anything like 60 s.
    assert time.monotonic() - started < 5.0


def test_timers_due_at_one_instant_run_in_the_order_they_were_set_even_with_cancellations() -> None:
    async def main() -> tuple[list[int], list[int]]:
        loop = asyncio.get_running_loop()
        ran: list[int] = []
        handles = [loop.call_at(5.0, ran.append, i) for i in range(200)]
        # Timers at other instants, set in between, stir the heap without changing the order.
        for i in range(50):
            loop.call_at(4.0 + i / 100, lambda: None)
            loop.call_at(6.0 + i / 100, lambda: None)
        cancelled = {i for i in range(200) if i % 3 == 0 or i in (1, 199)}
        for i in sorted(cancelled, reverse=True):
            handles[i].cancel()
        await asyncio.sleep(2)
        # Set later for the same instant: after every timer set before it.
        late = [loop.call_at(5.0, ran.append, 1000 + i) for i in range(3)]
        late[1].cancel()
        await asyncio.sleep(10)
        return ran, [i for i in range(200) if i not in cancelled] + [1000, 1002]

    ran, expected = virtual_loop.run(main())
    assert ran == expected


def test_what_runs_at_one_instant_runs_in_the_order_it_was_scheduled() -> None:
    async def main() -> list[str]:
        order: list[str] = []

        async def task(name: str) -> None:
            order.append(name)
            await asyncio.sleep(1)
            order.append(name + " woke")

        await asyncio.gather(*(task(n) for n in "abcde"))
        return order

    assert virtual_loop.run(main()) == [*"abcde", *(n + " woke" for n in "abcde")]


def test_wait_for_times_out_in_virtual_time() -> None:
    async def main() -> tuple[float, float, float]:
        loop = asyncio.get_running_loop()
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(asyncio.Event().wait(), 30)
        first = loop.time()
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(12.5):
                await asyncio.sleep(3600)
        second = loop.time()
        # A wait that ends before its timeout ends when it ends, not at the timeout.
        assert await asyncio.wait_for(asyncio.sleep(2, result="done"), 100) == "done"
        return first, second, loop.time()

    assert virtual_loop.run(main()) == (30.0, 42.5, 44.5)


def test_to_thread_and_run_in_executor_run_inline_at_the_current_instant() -> None:
    caller = threading.get_ident()

    def work(x: int) -> tuple[int, int, float]:
        return x * 2, threading.get_ident(), asyncio.get_event_loop().time()

    def fails() -> None:
        raise ValueError("from the executor")

    async def main() -> None:
        loop = asyncio.get_running_loop()
        await asyncio.sleep(7)
        assert await asyncio.to_thread(work, 21) == (42, caller, 7.0)
        future = loop.run_in_executor(None, work, 5)
        assert future.done()  # ready within the call, before anything else ran
        assert await future == (10, caller, 7.0)
        with pytest.raises(ValueError, match="from the executor"):
            await asyncio.to_thread(fails)
        assert loop.time() == 7.0
        with pytest.raises(NoSockets):
            loop.set_default_executor(None)  # type: ignore[arg-type]

    virtual_loop.run(main())


@pytest.mark.parametrize("call", [
    pytest.param(lambda: asyncio.open_connection("127.0.0.1", 1883), id="open_connection"),
    pytest.param(lambda: asyncio.start_server(lambda r, w: None, "127.0.0.1", 0), id="start_server"),
    pytest.param(lambda: asyncio.get_running_loop().getaddrinfo("localhost", 80), id="getaddrinfo"),
    pytest.param(lambda: asyncio.create_subprocess_exec("true"), id="subprocess"),
])
def test_a_socket_or_a_process_is_refused_with_no_sockets(call) -> None:
    async def main() -> None:
        with pytest.raises(NoSockets):
            await call()

    virtual_loop.run(main())


def test_a_call_from_another_thread_wakes_a_loop_with_nothing_scheduled() -> None:
    async def main() -> tuple[str, float]:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[str] = loop.create_future()
        # Nothing else is scheduled: the loop must wait for the thread, not end or spin.
        thread = threading.Thread(target=loop.call_soon_threadsafe, args=(future.set_result, "woken"))
        thread.start()
        result = await future
        thread.join()
        return result, loop.time()

    assert virtual_loop.run(main()) == ("woken", 0.0)


def test_the_same_program_gives_the_same_order_every_time() -> None:
    async def main() -> list[tuple[float, int]]:
        loop = asyncio.get_running_loop()
        seen: list[tuple[float, int]] = []

        async def worker(i: int) -> None:
            for step in range(5):
                await asyncio.sleep((i * 7 + step * 3) % 5 / 10)
                seen.append((loop.time(), i))

        await asyncio.gather(*(worker(i) for i in range(20)))
        return seen

    first = virtual_loop.run(main())
    assert virtual_loop.run(main()) == first
    assert [t for t, _ in first] == sorted(t for t, _ in first)
