"""The time budget of one conversion (``limits.convert_timeout_seconds``) and its cancel.

Private to ``guaipeca.convert``. A thread cannot be killed, so the budget is kept by the
converter itself: ``convert_bytes`` opens a budget, and the slow loops (PDF pages, OCR pages,
spreadsheet rows, slides) call :func:`check_budget` between steps; OCR hands Tesseract, the
one step that can take minutes, at most what is left (Tesseract is a process and is killed
at its timeout). The budget lives in a context variable, so conversions in several threads
each keep their own.
"""

from __future__ import annotations

import contextvars
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from guaipeca.errors import AbandonedError, ConversionTimeoutError

__all__ = ["DEFAULT_CONVERT_TIMEOUT_SECONDS", "budget_left", "check_budget", "time_budget"]

DEFAULT_CONVERT_TIMEOUT_SECONDS = 120.0
"""Default of ``limits.convert_timeout_seconds``: a 100-page scan read with OCR on a busy
CPU takes far longer (about 18 minutes for the issue's speckle PDF), a text PDF of 5,000
pages a few seconds."""


@dataclass(frozen=True, slots=True)
class _Budget:
    seconds: float
    deadline: float  # time.monotonic()
    cancel: threading.Event | None


_current: contextvars.ContextVar[_Budget | None] = contextvars.ContextVar(
    "guaipeca_convert_budget", default=None
)


@contextmanager
def time_budget(seconds: float | None, cancel: threading.Event | None = None) -> Iterator[None]:
    """Run the block under a budget of ``seconds`` (None: none) and ``cancel``; a budget
    already open (a nested conversion) is kept when it ends sooner."""
    outer = _current.get()
    deadline = time.monotonic() + seconds if seconds is not None else float("inf")
    if outer is not None and outer.deadline <= deadline and cancel is None:
        yield
        return
    token = _current.set(_Budget(seconds or 0.0, deadline, cancel))
    try:
        yield
    finally:
        _current.reset(token)


def check_budget() -> None:
    """Return if the current conversion may go on.

    Raises:
        AbandonedError: its cancel event is set (the client left).
        ConversionTimeoutError: its budget is spent.
    """
    budget = _current.get()
    if budget is None:
        return
    if budget.cancel is not None and budget.cancel.is_set():
        raise AbandonedError("the conversion was cancelled: its client left")
    if time.monotonic() >= budget.deadline:
        raise ConversionTimeoutError(
            f"conversion took longer than limits.convert_timeout_seconds "
            f"({budget.seconds:g} s); the file was not read"
        )


def budget_left(at_most: float) -> float:
    """Seconds the current conversion has left, at most ``at_most`` (and at least a
    tenth of a second, so a step handed it still starts and times out cleanly)."""
    budget = _current.get()
    if budget is None:
        return at_most
    return max(0.1, min(at_most, budget.deadline - time.monotonic()))
