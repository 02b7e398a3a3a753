"""Several systems timed on the same queries in turn.

Each query goes through every system, in an order that changes from query to
query (turn_order), after one untimed warm-up search each. Timed one system
after another, ratios moved with what ran when: the first measured after a
load, or right after a leg that read most of the table, ran on a cold cache
(twice the time of the same searches later), and pgvector's own p50 was 1.5 ms
run last and 3.1 among the others. Only the search is timed: what a system
needs around it (a setting raised and put back) runs before and after the
clock.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from typing import TypeVar

T = TypeVar("T")
Hooks = tuple[Callable[[], None], Callable[[], None]]


def turn_order(n: int, turn: int) -> list[int]:
    """The order of n systems in one turn: a row of a Williams design, a Latin square in
    which each system runs in every place once and right after every other system
    once, over n turns (2n when n is odd). A search right after another on the same
    query finds what that one read (the same graph nodes, the same rows) in the CPU's
    caches: orders rotated by one put each system after the same one in all turns but
    one, and on SciFact the ids-only walk, always after a peer's search, took 1.12-1.59
    ms p50 while the same walk returning text and titles, always right after it,
    took 0.84-1.37."""
    first = [0]
    low, high = 1, n - 1
    while len(first) < n:
        if len(first) % 2:
            first.append(low)
            low += 1
        else:
            first.append(high)
            high -= 1
    rows = n if n % 2 == 0 else 2 * n
    row = turn % rows
    order = [(k + row) % n for k in first]
    return order if row < n else order[::-1]


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
        for name in (names[k] for k in turn_order(len(names), turn)):
            out, ms = timed(name, i)
            results[name].append(out)
            times_ms[name].append(ms)
    return results, times_ms
