"""What late interaction costs: `pgsift bench maxsim`.

A synthetic collection (no dataset needed): `chunks` chunks, each with `tokens` token vectors
of `dims` dimensions (random unit vectors: MaxSim's cost does not depend on their values),
questions of `query_tokens` token vectors. For each N in `top_ns` it times, per question and
in turn, the MaxSim stage alone (sift.maxsim over N chunks) and a whole hybrid search with and
without query_tokens at late_interaction_top_n = N, and prints p50 and p95 of each.
"""

from __future__ import annotations

import statistics
import time
from typing import Any

import numpy as np
import psycopg

from ..client import Client
from ..errors import CollectionNotFound
from ..models import Chunk, Document

WORDS = ["refund", "parcel", "invoice", "lunch", "holiday", "laptop", "badge", "printer", "salary", "travel"]
DENSE_DIMS = 64


def _unit(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    v = rng.normal(size=shape).astype(np.float32)
    out: np.ndarray = v / np.linalg.norm(v, axis=-1, keepdims=True)
    return out


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[int(q * (len(ordered) - 1))]


def run_maxsim(conn: psycopg.Connection[Any], *, chunks: int = 500, tokens: int = 200, dims: int = 128,
               query_tokens: int = 32, top_ns: tuple[int, ...] = (50, 100), queries: int = 50,
               collection: str = "bench_maxsim", seed: int = 0) -> dict[str, Any]:
    client = Client(conn, refresh_backlog=1)   # settled statistics before the searches
    rng = np.random.default_rng(seed)   # the chunks, then every question and pool
    try:
        client.drop_collection(collection)
    except CollectionNotFound:
        pass
    client.create_collection(collection, embedding_dims=DENSE_DIMS)
    started = time.perf_counter()
    per_doc = 10
    docs = [Document(source_uri=f"doc-{d}", chunks=[
        Chunk(content=" ".join(rng.choice(WORDS, size=12)), embedding=_unit(rng, (DENSE_DIMS,)),
              token_vectors=_unit(rng, (tokens, dims)))
        for _ in range(min(per_doc, chunks - d * per_doc))]) for d in range((chunks + per_doc - 1) // per_doc)]
    client.upsert_documents(collection, docs, batch_documents=5)
    load_s = time.perf_counter() - started
    row = conn.execute("select pg_catalog.pg_total_relation_size('sift.chunk_tokens')").fetchone()
    size = int(row[0]) if row else 0
    ids = [r[0] for r in conn.execute("select k.chunk_id from sift.chunks k join sift.collections c "
                                      "using (collection_id) where c.name = %s order by k.chunk_id",
                                      [collection]).fetchall()]
    rows = []
    for n in top_ns:
        stage: list[float] = []
        plain: list[float] = []
        late: list[float] = []
        for i in range(queries):
            question = _unit(rng, (query_tokens, dims))
            vector = _unit(rng, (DENSE_DIMS,))
            text = " ".join(rng.choice(WORDS, size=3))
            pool = [int(x) for x in rng.choice(ids, size=min(n, len(ids)), replace=False)]
            for r in range(3):
                which = (i + r) % 3   # each measurement first in turn
                t0 = time.perf_counter()
                if which == 0:
                    client.maxsim(collection, pool, question)
                    stage.append((time.perf_counter() - t0) * 1000)
                elif which == 1:
                    client.search(collection, text, embedding=vector, late_interaction_top_n=n)
                    plain.append((time.perf_counter() - t0) * 1000)
                else:
                    client.search(collection, text, embedding=vector, query_tokens=question,
                                  late_interaction_top_n=n)
                    late.append((time.perf_counter() - t0) * 1000)
        rows.append({"top_n": n,
                     "maxsim_p50_ms": round(statistics.median(stage), 2),
                     "maxsim_p95_ms": round(_percentile(stage, 0.95), 2),
                     "search_p50_ms": round(statistics.median(plain), 2),
                     "search_late_p50_ms": round(statistics.median(late), 2),
                     "search_late_p95_ms": round(_percentile(late, 0.95), 2)})
    client.drop_collection(collection)
    return {"chunks": len(ids), "tokens": tokens, "dims": dims, "query_tokens": query_tokens, "queries": queries,
            "load_s": round(load_s, 1), "token_bytes": int(size), "rows": rows}


def format_table(result: dict[str, Any]) -> str:
    lines = [f"{result['chunks']} chunks x {result['tokens']} token vectors of {result['dims']} dimensions "
             f"(half precision, {result['token_bytes'] / 2**20:.1f} MiB, written in {result['load_s']} s); "
             f"questions of {result['query_tokens']} tokens; {result['queries']} per N, each measurement first "
             "in turn",
             f"{'N':>4} {'MaxSim p50':>11} {'p95':>8} {'search p50':>11} {'+tokens p50':>12} {'p95':>8} "
             f"{'extra p50':>10}"]
    for r in result["rows"]:
        lines.append(f"{r['top_n']:>4} {r['maxsim_p50_ms']:>11.2f} {r['maxsim_p95_ms']:>8.2f} "
                     f"{r['search_p50_ms']:>11.2f} {r['search_late_p50_ms']:>12.2f} {r['search_late_p95_ms']:>8.2f} "
                     f"{r['search_late_p50_ms'] - r['search_p50_ms']:>+10.2f}")
    lines.append("(ms; MaxSim: sift.maxsim over N chunks alone; search: hybrid at the defaults, "
                 "late_interaction_top_n = N, with and without query_tokens)")
    return "\n".join(lines)
