"""Search latency of two installs, paired: the same queries on two databases in turn,
each holding the collection `pgsift bench quality` loads (`bench`). For before/after
checks of a change (one database on main, one on the change) or two servers.

``run_compare(conn_a, conn_b, dataset)`` times ``sift.search`` in three modes (hybrid:
text and embedding; dense: embedding and no text; lexical: text only) with the
arguments every version of sift.search has taken, alternating which database goes
first, after one warm-up round. ``format_table`` prints p50/p95 per side and the ratio.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import numpy as np
import psycopg

from ..beir import load_beir
from ..vectors import vector_text
from . import queries

MODES = ("hybrid", "dense", "lexical")


def run_compare(conn_a: psycopg.Connection[Any], conn_b: psycopg.Connection[Any], dataset: Path, *,
                model: str | None = None, collection: str = "bench", depth: int = 100,
                rounds: int = 1) -> dict[str, Any]:
    """Time each mode on both databases, paired query by query; see the module docstring."""
    data = load_beir(dataset, model=model)
    embeddings = [vector_text(e) for e in data.query_embeddings]
    result: dict[str, Any] = {"dataset": data.name, "queries": len(data.query_ids), "rounds": rounds, "modes": {}}
    for mode in MODES:
        times: dict[str, list[float]] = {"a": [], "b": []}
        for r in range(rounds + 1):        # round 0 warms both up
            for i in range(len(data.query_ids)):
                params = {"collection": collection, "match_count": depth,
                          "query_text": "" if mode == "dense" else data.query_texts[i],
                          "query_embedding": None if mode == "lexical" else embeddings[i]}
                sides = [("a", conn_a), ("b", conn_b)] if i % 2 == 0 else [("b", conn_b), ("a", conn_a)]
                for side, conn in sides:
                    started = time.perf_counter()
                    conn.execute(queries.BENCH_COMPARE_SEARCH, params, prepare=False).fetchall()
                    if r > 0:
                        times[side].append((time.perf_counter() - started) * 1000)
        a, b = np.asarray(times["a"]), np.asarray(times["b"])
        result["modes"][mode] = {"a_p50_ms": float(np.median(a)), "a_p95_ms": float(np.percentile(a, 95)),
                                 "b_p50_ms": float(np.median(b)), "b_p95_ms": float(np.percentile(b, 95)),
                                 "ratio_p50": float(np.median(b) / np.median(a))}
    return result


def format_table(result: dict[str, Any]) -> str:
    """The result of :func:`run_compare` as an aligned plain-text table (ms per search)."""
    lines = [f"paired search latency, {result['dataset']}: {result['queries']} queries x {result['rounds']} "
             f"round(s) per mode, A and B in turn (ratio = B / A)",
             f"{'mode':<9}{'A p50':>8}{'B p50':>8}{'ratio':>7}{'A p95':>8}{'B p95':>8}"]
    for mode, m in result["modes"].items():
        lines.append(f"{mode:<9}{m['a_p50_ms']:>8.1f}{m['b_p50_ms']:>8.1f}{m['ratio_p50']:>7.2f}"
                     f"{m['a_p95_ms']:>8.1f}{m['b_p95_ms']:>8.1f}")
    return "\n".join(lines)
