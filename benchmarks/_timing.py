"""Shared helper of the benchmark scripts."""

from __future__ import annotations

import time


def best_of(repeats, func):
    """``(shortest wall time of `repeats` calls, value of the last call)``."""
    times, value = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        value = func()
        times.append(time.perf_counter() - start)
    return min(times), value
