"""A smoothed rate, for the time left that progress lines show.

Work arrives unevenly (a round of short chunks, then one of long ones; a big file, then a
hundred small ones), so the rate since the last update jumps, and a time left computed from
it jumps with it (issue 31: 18:59 → 24:55 → 12:02 → 16:49). ``RateMeter`` divides the work
done by the time it took, both discounted by age: each interval of ``dt`` seconds multiplies
what came before by ``exp(-dt / tau)``. Early in a run that is the plain average since the
start; later, about the rate of the last ``tau`` seconds. Either way it is a weighted mean of
the rates of the intervals seen, so it always lies between the slowest and the fastest of
them, and one interval moves it only by its share of the weight.
"""

from __future__ import annotations

import math

__all__ = ["SMOOTHING_SECONDS", "RateMeter"]

#: The moving average's time constant: the weight of work done this many seconds ago has
#: fallen to about a third.
SMOOTHING_SECONDS = 30.0


class RateMeter:
    """The smoothed rate of a count that only grows.

    ``observe(done, now)`` records the count at a time; the first observation is the start
    (no rate yet), each later one that moves the count updates the rate. Until the count
    first moves, observing it unchanged moves the start instead (the work was announced
    before it began: files listed, chunks waiting for their first round). Not thread-safe:
    the caller holds its own lock.
    """

    def __init__(self, tau: float = SMOOTHING_SECONDS) -> None:
        if tau <= 0:
            raise ValueError("tau must be positive")
        self._tau = tau
        self._last: tuple[float, int] | None = None
        self._work = self._time = 0.0  # discounted units done, discounted seconds taken
        self.started: float | None = None  # when the work began (the last start observed)
        self.rate: float | None = None  # units per second, None until the count first moves

    def observe(self, done: int, now: float) -> None:
        """Record ``done`` at ``now`` (monotonic seconds)."""
        if self._last is None or (done == self._last[1] and self.rate is None):
            self._last = (now, done)  # the start, or not started yet
            self.started = now
            return
        then, before = self._last
        seconds = now - then
        if done <= before or seconds <= 0:
            return  # wait for the count to move: the next interval spans the pause
        keep = math.exp(-seconds / self._tau)
        self._work = self._work * keep + (done - before)
        self._time = self._time * keep + seconds
        self.rate = self._work / self._time
        self._last = (now, done)

    def seconds_left(self, left: int) -> float | None:
        """Seconds to do ``left`` more at the smoothed rate; None before a rate is known."""
        if left <= 0:
            return 0.0
        if not self.rate:
            return None
        return left / self.rate
