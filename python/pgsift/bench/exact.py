"""Where the exact dense scan stops paying: `pgsift bench exact`.

For each collection size, a collection of that many synthetic chunks (384-d
vectors around 256 centres, as `bench scale` draws them), its HNSW index
built; then the same query vectors through sift.candidates, dense only, in
turn: the exact scan (``exact_search_limit`` = the size) and the HNSW walk
(``exact_search_limit`` 0). Printed per size: p50 of each and their ratio, and
the recall@n of the walk against the scan. Alone in sift.chunks (``beside``
0), the default ``exact_search_limit`` is the largest size whose exact scan
stays within 2x the walk (issue 15, item 3); with ``beside`` N, another
collection of N chunks of the same size shares the index, as a tenant among
others does (the case sift._dense_exact scans exactly up to twice the
limit while the collection holds under a tenth of the index).
"""

from __future__ import annotations

import statistics
import time
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from ..client import Client
from ..vectors import vector_text
from . import queries as q
from .scale import DIMS, Corpus, load

SIZES = (1_000, 2_000, 5_000, 7_500, 10_000, 20_000)
COLLECTION = "bench_exact"
OTHERS = "bench_exact_others"


def run_exact(conn: psycopg.Connection[Any], *, sizes: tuple[int, ...] = SIZES, queries: int = 100,
              match_count: int = 10, seed: int = 11, beside: int = 0) -> dict[str, Any]:
    corpus = Corpus(seed)
    client = Client(conn, refresh_backlog=1)   # settled statistics before the searches
    for name in (COLLECTION, OTHERS):
        if any(c.name == name for c in client.list_collections()):
            client.drop_collection(name)
    if beside:
        # Loaded as a bulk load is: the HNSW index dropped, then built once.
        others = client.create_collection(OTHERS, embedding_dims=DIMS)
        index = conn.execute(q.BENCH_ENSURE_INDEX, {"dims": DIMS}).fetchone()
        if index and index[0]:
            conn.execute(q.bench_drop_index(index[0]))
        load(conn, corpus, beside, others.collection_id)
        conn.execute(q.BENCH_ENSURE_INDEX, {"dims": DIMS})
    rows: list[dict[str, Any]] = []
    for size in sizes:
        if any(c.name == COLLECTION for c in client.list_collections()):
            client.drop_collection(COLLECTION)
        conn.execute(q.BENCH_EXACT_VACUUM)
        col = client.create_collection(COLLECTION, embedding_dims=DIMS)
        load(conn, corpus, size, col.collection_id)
        conn.execute(q.BENCH_ENSURE_INDEX, {"dims": DIMS})
        conn.execute(q.BENCH_EXACT_ANALYZE)
        vectors = [vector_text(v) for v in corpus.vectors(queries + 1, scale=0.3)]
        times: dict[str, list[float]] = {"exact": [], "hnsw": []}
        found, wanted = 0, 0
        for i, vec in enumerate(vectors):
            got: dict[str, list[int]] = {}
            for path, limit in (("exact", size), ("hnsw", 0)) if i % 2 else (("hnsw", 0), ("exact", size)):
                t0 = time.perf_counter()
                ids = conn.execute(q.BENCH_EXACT_DENSE, {"c": COLLECTION, "e": vec, "n": match_count,
                                                         "knobs": Jsonb({"exact_search_limit": limit})}).fetchall()
                if i:   # the first query of each size warms both paths up
                    times[path].append((time.perf_counter() - t0) * 1000)
                got[path] = [r[0] for r in ids]
            if i:
                found += len(set(got["exact"]) & set(got["hnsw"]))
                wanted += len(got["exact"])
        exact, hnsw = statistics.median(times["exact"]), statistics.median(times["hnsw"])
        index_rows = conn.execute(q.BENCH_EXACT_INDEX_ROWS, {"dims": DIMS}).fetchone()
        rows.append({"chunks": size, "index_rows": int(index_rows[0]) if index_rows else None,
                     "exact_p50_ms": round(exact, 2), "hnsw_p50_ms": round(hnsw, 2),
                     "ratio": round(exact / hnsw, 2),
                     "hnsw_recall": round(found / max(1, wanted), 4)})
        client.drop_collection(COLLECTION)
    if beside:
        client.drop_collection(OTHERS)
    conn.execute(q.BENCH_EXACT_VACUUM)
    within = [r["chunks"] for r in rows if r["ratio"] <= 2.0]
    return {"match_count": match_count, "queries": queries, "beside": beside, "rows": rows,
            "largest_within_2x": max(within) if within else None}


def format_table(result: dict[str, Any]) -> str:
    lines = [f"dense leg through sift.candidates, match_count {result['match_count']} "
             f"(each leg's top max(fetch_k, match_count)), {result['queries']} queries a size, "
             + (f"beside {result['beside']:,} chunks of another collection" if result["beside"] else "alone"),
             f"{'chunks':>8} {'index rows':>11} {'exact p50':>10} {'HNSW p50':>9} {'exact/HNSW':>11} "
             f"{'HNSW recall':>12}"]
    for r in result["rows"]:
        lines.append(f"{r['chunks']:>8,} {r['index_rows'] or 0:>11,} {r['exact_p50_ms']:>10.2f} "
                     f"{r['hnsw_p50_ms']:>9.2f} {r['ratio']:>10.2f}x {r['hnsw_recall']:>12.4f}")
    lines.append(f"largest size whose exact scan is within 2x the walk: {result['largest_within_2x']}")
    return "\n".join(lines)
