"""Snippet cost: `pgsift bench snippets --dataset ../shared/datasets/scifact`.

Loads a BEIR folder and runs its first queries through `Client.search` (hybrid, the
collection's defaults) at match_count 10 and 50 with snippets off, text and html, the
three in turn per query, and prints each one's p50 and p95 and the extra over off.
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path
from typing import Any

import psycopg

from ..beir import load_beir
from ..client import Client
from .quality import load_collection

MODES = (None, "text", "html")
MATCH_COUNTS = (10, 50)


def run_snippets(conn: psycopg.Connection[Any], dataset: Path, *, queries: int = 100,
                 collection: str = "bench_snippets") -> dict[str, Any]:
    data = load_beir(dataset)
    client = Client(conn)
    load_collection(client, collection, data)
    samples: dict[tuple[int, str], list[float]] = {(k, str(m)): [] for k in MATCH_COUNTS for m in MODES}
    n = min(queries, len(data.query_ids))
    for i in range(n):
        for k in MATCH_COUNTS:
            for r in range(len(MODES)):
                mode = MODES[(i + r) % len(MODES)]     # each mode first in turn
                started = time.perf_counter()
                client.search(collection, data.query_texts[i], embedding=data.query_embeddings[i], top_k=k,
                              snippets=mode)
                samples[(k, str(mode))].append((time.perf_counter() - started) * 1000)
    client.drop_collection(collection)
    rows = []
    for k in MATCH_COUNTS:
        off = statistics.median(samples[(k, "None")])
        for mode in MODES:
            values = sorted(samples[(k, str(mode))])
            p50 = statistics.median(values)
            rows.append({"match_count": k, "snippets": mode or "off", "p50_ms": round(p50, 2),
                         "p95_ms": round(values[int(0.95 * (len(values) - 1))], 2),
                         "extra_p50_ms": round(p50 - off, 2)})
    return {"dataset": data.name, "queries": n, "rows": rows}


def format_table(result: dict[str, Any]) -> str:
    lines = [f"{result['dataset']}: {result['queries']} queries, hybrid at the defaults, each mode in turn",
             f"{'match_count':>11} {'snippets':>8} {'p50 ms':>8} {'p95 ms':>8} {'extra p50':>10}"]
    for r in result["rows"]:
        lines.append(f"{r['match_count']:>11} {r['snippets']:>8} {r['p50_ms']:>8.2f} {r['p95_ms']:>8.2f} "
                     f"{r['extra_p50_ms']:>+10.2f}")
    return "\n".join(lines)
