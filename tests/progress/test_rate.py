"""The smoothed rate behind the time left: bounded by what it saw, steady under uneven work."""

from __future__ import annotations

import itertools

import pytest
from hypothesis import given
from hypothesis import strategies as st

from guaipeca.progress import RateMeter

# (seconds, units done) of each interval: uneven, as rounds of long and short chunks are.
intervals = st.lists(
    st.tuples(st.floats(0.01, 120.0), st.integers(1, 10_000)), min_size=1, max_size=40
)


@given(intervals)
def test_the_rate_stays_between_the_slowest_and_fastest_interval(
    steps: list[tuple[float, int]],
) -> None:
    meter = RateMeter()
    now, done = 0.0, 0
    meter.observe(done, now)
    seen: list[float] = []
    for seconds, units in steps:
        before = meter.rate
        now, done = now + seconds, done + units
        meter.observe(done, now)
        current = units / seconds
        seen.append(current)
        assert meter.rate is not None
        # Bounded: never outside the rates seen, and one interval moves the estimate only
        # toward its own rate, never past it.
        assert min(seen) * (1 - 1e-9) <= meter.rate <= max(seen) * (1 + 1e-9)
        if before is not None:
            low, high = sorted((before, current))
            assert low * (1 - 1e-9) <= meter.rate <= high * (1 + 1e-9)


def test_uneven_rounds_give_a_steady_time_left() -> None:
    # Rounds alternate between 20 and 10 units/s (issue 31's time left jumped 18:59 → 24:55
    # → 12:02 → 16:49 that way); the time left printed every 5 s moves by under 10% a line.
    meter = RateMeter()
    meter.observe(0, 0.0)
    now, done, total, lefts = 0.0, 0, 100_000, []
    for i in range(40):
        now, done = now + 5.0, done + (100 if i % 2 else 50)
        meter.observe(done, now)
        seconds = meter.seconds_left(total - done)
        assert seconds is not None
        lefts.append(seconds)
    steps = [abs(b - a) / a for a, b in itertools.pairwise(lefts[5:])]
    assert max(steps) < 0.10
    # The estimate is the mean rate, 15 units/s, not either round's.
    assert meter.rate == pytest.approx(15.0, rel=0.1)


def test_early_the_rate_is_the_average_since_the_start() -> None:
    meter = RateMeter(tau=30.0)
    meter.observe(0, 0.0)
    meter.observe(1, 2.0)  # a slow first file (workers starting)
    for t in range(1, 11):
        meter.observe(1 + 50 * t, 2.0 + 0.5 * t)  # then 100 files/s
    assert meter.rate == pytest.approx(501 / 7.0, rel=0.05)  # about the plain average


def test_the_start_moves_until_the_count_does() -> None:
    meter = RateMeter()
    meter.observe(0, 0.0)  # the task shown
    meter.observe(0, 60.0)  # its work announced a minute later: the start
    assert meter.rate is None and meter.seconds_left(10) is None
    meter.observe(10, 65.0)
    assert meter.rate == pytest.approx(2.0) and meter.started == 60.0
    assert meter.seconds_left(20) == pytest.approx(10.0) and meter.seconds_left(0) == 0.0


def test_a_count_that_stands_still_keeps_the_rate() -> None:
    meter = RateMeter()
    meter.observe(0, 0.0)
    meter.observe(10, 1.0)
    meter.observe(10, 50.0)  # no progress: nothing to learn yet
    assert meter.rate == pytest.approx(10.0)
    meter.observe(20, 51.0)  # the pause counts in the interval that ends it
    assert meter.rate is not None and meter.rate < 10.0
