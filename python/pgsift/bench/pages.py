"""What a page costs: `pgsift bench pages --dataset ../shared/datasets/scifact`.

Loads a BEIR folder and, per query, times (each first in turn) a plain search of 10 and of
100, then search_page's first page of 10 and its fifth (four cursors followed), at the
default page_window (100). A page ranks the whole window, so it should cost about a search
of 100; printed: p50 and p95 of each and the ratio to the search of 10.
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

CASES = ("search 10", "search 100", "page 1 of 10", "page 5 of 10")


def _call(client: Client, collection: str, case: str, text: str, vector: Any, fifth: str | None) -> Any:
    if case.startswith("search"):
        return client.search(collection, text, embedding=vector, top_k=int(case.split()[1]))
    return client.search_page(collection, text, embedding=vector, page_size=10,
                              cursor=fifth if case.startswith("page 5") else None)


def run_pages(conn: psycopg.Connection[Any], dataset: Path, *, queries: int = 100,
              collection: str = "bench_pages") -> dict[str, Any]:
    data = load_beir(dataset)
    client = Client(conn)
    load_collection(client, collection, data)
    samples: dict[str, list[float]] = {c: [] for c in CASES}
    n = min(queries, len(data.query_ids))
    for i in range(n):
        text, vector = data.query_texts[i], data.query_embeddings[i]
        page = client.search_page(collection, text, embedding=vector, page_size=10)
        for _ in range(3):
            page = client.search_page(collection, text, embedding=vector, page_size=10, cursor=page.cursor)
        for r in range(len(CASES)):
            case = CASES[(i + r) % len(CASES)]
            started = time.perf_counter()
            _call(client, collection, case, text, vector, page.cursor)
            samples[case].append((time.perf_counter() - started) * 1000)
    client.drop_collection(collection)
    base = statistics.median(samples["search 10"])
    rows = []
    for case in CASES:
        values = sorted(samples[case])
        p50 = statistics.median(values)
        rows.append({"case": case, "p50_ms": round(p50, 2), "p95_ms": round(values[int(0.95 * (len(values) - 1))], 2),
                     "ratio": round(p50 / base, 2)})
    return {"dataset": data.name, "queries": n, "rows": rows}


def format_table(result: dict[str, Any]) -> str:
    lines = [f"{result['dataset']}: {result['queries']} queries, hybrid at the defaults, page_window 100",
             f"{'case':>13} {'p50 ms':>8} {'p95 ms':>8} {'x search 10':>12}"]
    for r in result["rows"]:
        lines.append(f"{r['case']:>13} {r['p50_ms']:>8.2f} {r['p95_ms']:>8.2f} {r['ratio']:>12.2f}")
    return "\n".join(lines)
