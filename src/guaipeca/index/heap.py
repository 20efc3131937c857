"""Process memory: giving the C heap's free pages back to the OS."""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Callable

__all__ = ["trim_c_heap"]


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    """glibc's ``malloc_trim``, or None on other C libraries (musl, macOS)."""
    try:
        trim: Callable[[int], int] = ctypes.CDLL(None).malloc_trim
    except (OSError, AttributeError):
        return None
    return trim


def trim_c_heap() -> None:
    """Return free heap pages to the OS (a no-op without glibc).

    Startup (hash checks, ONNX Runtime's graph optimisation) and searches leave freed blocks
    that glibc keeps for reuse; measured on a 100k-chunk index, trimming gave back ~90 MB.
    """
    trim = _malloc_trim()
    if trim is not None:
        trim(0)
