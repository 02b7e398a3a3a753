"""Several systems timed on the same queries in turn.

Each query goes through every system, the order rotated by one from query to
query, after one untimed warm-up search each. Timed one system after another,
ratios moved with what ran when: the first measured after a load, or right
after a leg that read most of the table, ran on a cold cache (twice the time of
the same searches later), and pgvector's own p50 was 1.5 ms run last and 3.1
among the others. Only the search is timed: what a system needs around it (a
setting raised and put back) runs before and after the clock.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import TypeVar

T = TypeVar("T")
Hooks = tuple[Callable[[], None], Callable[[], None]]


def in_turn(runs: Mapping[str, Callable[[int], T]], queries: Sequence[int],
            around: Mapping[str, Hooks] | None = None,
            warm_up: int | None = None) -> tuple[dict[str, list[T]], dict[str, list[float]]]:
    """Each system's results and times (ms) on these queries, in query order, after one
    untimed search each on query warm_up (default: the first query, timed again after);
    around: what to run, untimed, before and after a system's search."""
    names = list(runs)
    hooks = around or {}
    nothing: Hooks = (lambda: None, lambda: None)

    def timed(name: str, i: int) -> tuple[T, float]:
        before, after = hooks.get(name, nothing)
        before()
        try:
            t0 = time.perf_counter()
            out = runs[name](i)
            return out, (time.perf_counter() - t0) * 1000.0
        finally:
            after()

    for name in names:
        timed(name, queries[0] if warm_up is None else warm_up)
    results: dict[str, list[T]] = {name: [] for name in names}
    times_ms: dict[str, list[float]] = {name: [] for name in names}
    for turn, i in enumerate(queries):
        for name in names[turn % len(names):] + names[:turn % len(names)]:
            out, ms = timed(name, i)
            results[name].append(out)
            times_ms[name].append(ms)
    return results, times_ms
