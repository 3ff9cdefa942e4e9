"""The run's clock (``SimClock``) on a time source of its own, and a runtime's view of it
(``RuntimeClock``): the run's time off by a skew, which advancing and listening respect."""

from __future__ import annotations

import time

import pytest

from joynr_sim.clock import MAX_SKEW_MS, RuntimeClock, SimClock


class Source:
    """A time source that moves only when told."""

    def __init__(self, now: int = 1_000_000) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


def test_a_clock_reads_its_source_plus_what_was_advanced():
    source = Source()
    clock = SimClock(offset_ms=5, source=source)
    assert clock.now_ms() == clock() == 1_000_005
    source.now += 10
    assert clock.now_ms() == 1_000_015
    assert clock.advance(100) == 1_000_115 and clock.offset_ms == 105
    assert clock.advance_to(50) == 1_000_115  # never back
    with pytest.raises(ValueError, match="only moves forward"):
        clock.advance(-1)


def test_without_a_source_the_clock_is_the_wall_clock():
    before = time.time_ns() // 1_000_000
    now = SimClock(offset_ms=1_000).now_ms()
    assert before + 1_000 <= now <= time.time_ns() // 1_000_000 + 1_000


def test_a_runtime_clock_reads_the_run_clock_off_by_its_skew():
    base = SimClock(source=Source())
    ahead, behind = RuntimeClock(base), RuntimeClock(base)
    assert ahead.now_ms() == behind() == base.now_ms() == 1_000_000 and ahead.skew_ms == 0
    ahead.set_skew(60_000)
    behind.set_skew(-60_000)
    assert (ahead.now_ms(), ahead(), behind.now_ms()) == (1_060_000, 1_060_000, 940_000)
    assert base.now_ms() == 1_000_000  # the run's clock is not skewed by anyone's view of it


def test_advancing_a_runtime_clock_advances_the_run_for_everyone():
    base = SimClock(source=Source())
    mine, other = RuntimeClock(base, skew_ms=500), RuntimeClock(base)
    assert mine.advance(1_000) == 1_001_500
    assert (base.now_ms(), other.now_ms(), mine.offset_ms, base.offset_ms) == (1_001_000, 1_001_000, 1_000, 1_000)
    assert mine.advance_to(3_000) == 1_003_500 and base.offset_ms == 3_000
    assert mine.skew_ms == 500  # the skew stays out of the offset a host process's clock follows


def test_a_listener_hears_the_time_as_its_runtime_reads_it_then():
    base = SimClock(source=Source())
    clock = RuntimeClock(base)
    heard: list[int] = []
    stop = clock.on_advance(heard.append)
    base.advance(10)
    clock.set_skew(-2_000)  # set after the listener: it still counts
    base.advance(10)
    stop()
    base.advance(10)
    assert heard == [1_000_010, 998_020]


@pytest.mark.parametrize("ms", [MAX_SKEW_MS + 1, -MAX_SKEW_MS - 1, 1.5, True, "5"])
def test_a_skew_is_a_bounded_whole_number_of_ms(ms):
    clock = RuntimeClock(SimClock(source=Source()))
    with pytest.raises(ValueError, match="^ms: a whole number from -86400000 to 86400000"):
        clock.set_skew(ms)
    assert clock.skew_ms == 0
    clock.set_skew(-MAX_SKEW_MS)
    assert clock.now_ms() == 1_000_000 - MAX_SKEW_MS
