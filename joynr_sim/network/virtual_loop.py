"""Virtual time: an asyncio event loop whose clock jumps to the next timer when nothing is
runnable, as trio's ``MockClock(autojump_threshold=0)``.

Every node of a simulation on the memory network runs on this one loop. A 60 s TTL that
nobody answers costs one jump of the clock, not a minute; what runs at one instant runs in
the order it was scheduled (asyncio's ready queue is first in, first out), and timers due
at the same instant run in the order they were set, not in the order a heap happens to
leave them. So the same program, fed the same choices, runs the same way every time: the
network draws its choices (latencies, faults) from the run's seeded generator.

The loop does no I/O of its own. There is no selector: a socket on this loop is a bug
(a real broker or a real WebSocket reached from a simulated run), and refused at once.
A call handed to an executor (``run_in_executor``, ``asyncio.to_thread``: the GCD store's
statements) runs within the call, at the current instant: a thread finishing at a moment
of the machine's choosing would decide what happens first. ``call_soon_threadsafe`` still
works (Ctrl-C wakes the loop through it); when nothing is scheduled at all the loop waits
for such a call in real time.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import heapq
import itertools
import threading
from asyncio import events
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class NoSockets(RuntimeError):
    """Something on the memory network tried to use a real socket."""


class _Timer(events.TimerHandle):
    """A timer ordered by (when, the order it was set): ties never depend on the heap."""

    __slots__ = ("_order",)

    def __init__(self, when: float, order: int, callback: Callable[..., Any], args: tuple[Any, ...],
                 loop: asyncio.AbstractEventLoop, context: Any) -> None:
        super().__init__(when, callback, args, loop, context)
        self._order = order

    def __lt__(self, other: Any) -> bool:
        return (self._when, self._order) < (other._when, other._order)

    def __le__(self, other: Any) -> bool:
        return (self._when, self._order) <= (other._when, other._order)

    def __gt__(self, other: Any) -> bool:
        return (self._when, self._order) > (other._when, other._order)

    def __ge__(self, other: Any) -> bool:
        return (self._when, self._order) >= (other._when, other._order)

    def __eq__(self, other: Any) -> bool:
        return self is other

    __hash__ = events.TimerHandle.__hash__


class VirtualTimeLoop(asyncio.BaseEventLoop):
    def __init__(self) -> None:
        super().__init__()
        self._now = 0.0
        self._orders = itertools.count()
        self._from_threads: collections.deque[events.Handle] = collections.deque()
        self._wakeup = threading.Condition()
        self.jumps = 0  # how often time jumped to a timer: a measure for benchmarks

    # -- the clock -------------------------------------------------------------------
    def time(self) -> float:
        return self._now

    def call_at(self, when: float, callback: Callable[..., Any], *args: Any, context: Any = None) -> events.TimerHandle:
        self._check_closed()
        timer = _Timer(when, next(self._orders), callback, args, self, context)
        heapq.heappush(self._scheduled, timer)
        timer._scheduled = True
        return timer

    # -- one turn --------------------------------------------------------------------
    def _run_once(self) -> None:
        scheduled = self._scheduled
        while scheduled and scheduled[0]._cancelled:
            self._timer_cancelled_count -= 1
            heapq.heappop(scheduled)._scheduled = False
        with self._wakeup:
            if not self._ready and not scheduled and not self._stopping and not self._from_threads:
                # Nothing will ever run unless another thread says so (Ctrl-C does).
                self._wakeup.wait()
            while self._from_threads:
                self._ready.append(self._from_threads.popleft())
        if not self._ready and not self._stopping and scheduled:
            when = scheduled[0]._when
            if when > self._now:
                self._now = when
                self.jumps += 1
        while scheduled and scheduled[0]._when <= self._now:
            timer = heapq.heappop(scheduled)
            timer._scheduled = False
            if timer._cancelled:
                self._timer_cancelled_count -= 1
            else:
                self._ready.append(timer)
        for _ in range(len(self._ready)):
            handle = self._ready.popleft()
            if not handle._cancelled:
                handle._run()

    def _process_events(self, event_list: Any) -> None:
        pass

    def _write_to_self(self) -> None:
        with self._wakeup:
            self._wakeup.notify()

    def call_soon_threadsafe(self, callback: Callable[..., Any], *args: Any, context: Any = None) -> events.Handle:
        self._check_closed()
        handle = events.Handle(callback, args, self, context)
        with self._wakeup:
            self._from_threads.append(handle)
            self._wakeup.notify()
        return handle

    # -- no threads, no sockets ----------------------------------------------------------
    def run_in_executor(self, executor: Any, func: Callable[..., T], *args: Any) -> asyncio.Future[T]:
        """Runs ``func`` now, in this thread: its result is ready at this instant."""
        self._check_closed()
        future: asyncio.Future[T] = self.create_future()
        try:
            future.set_result(func(*args))
        except BaseException as exc:  # handed to the awaiting caller, as an executor would
            if isinstance(exc, (KeyboardInterrupt, SystemExit)):
                raise
            future.set_exception(exc)
        return future

    def set_default_executor(self, executor: concurrent.futures.Executor) -> None:
        raise NoSockets("the virtual-time loop runs executor calls inline; it takes no executor")

    def _no_io(self, *args: Any, **kwargs: Any) -> Any:
        raise NoSockets("a real socket on the memory network: it has in-memory brokers and WebSockets only")

    add_reader = add_writer = remove_reader = remove_writer = _no_io
    sock_recv = sock_recv_into = sock_sendall = sock_connect = sock_accept = _no_io
    create_connection = create_server = create_unix_connection = create_unix_server = _no_io
    create_datagram_endpoint = connect_accepted_socket = subprocess_exec = subprocess_shell = _no_io
    getaddrinfo = getnameinfo = add_signal_handler = _no_io

    def remove_signal_handler(self, sig: int) -> bool:
        return False


def run(main: Coroutine[Any, Any, T], *, debug: bool | None = None) -> T:
    """``asyncio.run`` on a new virtual-time loop."""
    with asyncio.Runner(debug=debug, loop_factory=VirtualTimeLoop) as runner:
        return runner.run(main)


def on_virtual_time() -> bool:
    """Whether the running loop (if any) is a virtual-time loop."""
    try:
        return isinstance(asyncio.get_running_loop(), VirtualTimeLoop)
    except RuntimeError:
        return False
