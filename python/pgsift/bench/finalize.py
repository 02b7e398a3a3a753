"""Latency of the finalize stage (recency, boost, threshold, per-document cap, MMR,
lost-in-the-middle) on generated data.

``run_finalize(conn)`` writes a scratch collection (random unit vectors, dated
metadata, several chunks per document) under its own tenant, then times, for each
pool size:

* ``sift.finalize`` on a pool of that many chunk ids with scores, knob by knob
  (all off, recency only, cap only, MMR only, all on);
* ``sift.search`` dense-only with ``fetch_k`` = the pool size, all knobs off and all
  on, so the difference is what finalize adds inside one search.

Times are wall-clock per call as the client sees them (median and p95 over
``repeats`` calls after a warm-up; the calls take turns so that noise on the
machine hits them alike), next to a ``select 1`` round trip. The scratch
collection is dropped at the end. ``format_table`` prints the result.
"""

from __future__ import annotations

import functools
import math
import time
import uuid
from collections.abc import Callable, Mapping
from datetime import datetime, timedelta, timezone
from typing import Any

import numpy as np
import psycopg

from ..client import Client
from ..models import Chunk, Document
from . import queries
from .turns import turn_order

TENANT = "pgsift-bench"
CONFIGS: dict[str, dict[str, Any]] = {
    "off": {"per_document_cap": 0},
    "recency": {"per_document_cap": 0, "recency_field": "published", "recency_bias": 0.5},
    "cap": {"per_document_cap": 2},
    "mmr": {"per_document_cap": 0, "mmr_lambda": 0.5},
    "all": {"per_document_cap": 2, "mmr_lambda": 0.5, "recency_field": "published",
            "recency_bias": 0.5, "boost": 1.5, "lost_in_the_middle": True},
}


def _stats(samples: list[float]) -> dict[str, float]:
    ms = np.asarray(samples) * 1000
    return {"median_ms": float(np.median(ms)), "p95_ms": float(np.percentile(ms, 95))} if len(ms) else \
        {"median_ms": math.nan, "p95_ms": math.nan}


def time_in_turns(calls: Mapping[str, Callable[[], object]], repeats: int,
          warmup: int = 3) -> dict[str, dict[str, float]]:
    """Median and p95 per call. The calls take turns (turns.turn_order: each round in
    another order, each call after every other alike), so a noisy machine slows them all
    alike instead of whichever ran during the noise."""
    for _ in range(warmup):
        for call in calls.values():
            call()
    labels = list(calls)
    samples: dict[str, list[float]] = {label: [] for label in labels}
    for r in range(repeats):
        for label in (labels[k] for k in turn_order(len(labels), r)):
            t0 = time.perf_counter()
            calls[label]()
            samples[label].append(time.perf_counter() - t0)
    return {label: _stats(samples[label]) for label in labels}


def _documents(rng: np.random.Generator, n_chunks: int, dims: int, chunks_per_doc: int) -> list[Document]:
    now = datetime.now(timezone.utc)
    docs = []
    for d in range(math.ceil(n_chunks / chunks_per_doc)):
        # One document in ten has no date: it gets the full recency penalty.
        meta = {} if d % 10 == 9 else {"published": (now - timedelta(days=float(rng.uniform(0, 730)))).isoformat()}
        vectors = rng.normal(size=(chunks_per_doc, dims))
        vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
        docs.append(Document(source_uri=f"bench-{d}", metadata=meta, chunks=[
            Chunk(content=f"generated chunk {d} {i}", embedding=v) for i, v in enumerate(vectors)]))
    return docs


def run_finalize(conn: psycopg.Connection[Any], pool_sizes: tuple[int, ...] = (50, 200), repeats: int = 50, *,
                 dims: int = 384, chunks_per_doc: int = 4, match_count: int = 10, seed: int = 0) -> dict[str, Any]:
    """Time the finalize stage at each pool size; see the module docstring. Needs pgsift
    installed in the database; writes only a scratch collection, which it drops again."""
    if not pool_sizes or min(pool_sizes) < 1 or max(pool_sizes) > 1000:
        raise ValueError("pool sizes must be between 1 and 1000 (fetch_k's range)")
    if repeats < 1:
        raise ValueError("repeats must be at least 1")
    rng = np.random.default_rng(seed)
    client = Client(conn, tenant=TENANT, refresh_backlog=1)   # settled statistics before the searches
    name = f"finalize-{uuid.uuid4().hex[:8]}"
    n_chunks = max(2 * max(pool_sizes), 400)
    client.create_collection(name, embedding_dims=dims, fetch_k=max(pool_sizes), exact_search_limit=n_chunks)
    try:
        client.upsert_documents(name, _documents(rng, n_chunks, dims, chunks_per_doc))
        with client.transaction() as tx:
            all_ids = [r[0] for r in tx.execute(queries.COLLECTION_CHUNK_IDS, {"collection": name}).fetchall()]
            server = tx.execute(queries.SERVER_VERSIONS).fetchone()
        roundtrip = time_in_turns({"select 1": lambda: conn.execute(queries.ROUNDTRIP).fetchall()}, repeats)["select 1"]

        pools = []
        for size in pool_sizes:
            ids = [int(i) for i in rng.choice(all_ids, size=size, replace=False)]
            scores = np.sort(rng.uniform(0, 1, size=size))[::-1].tolist()
            threshold = float(np.quantile(scores, 0.1))
            calls: dict[str, Callable[[], object]] = {}
            for label, knobs in CONFIGS.items():
                chosen = {**knobs, **({"score_threshold": threshold} if label == "all" else {})}
                calls[f"finalize {label}"] = functools.partial(
                    client.finalize, name, ids, scores, top_k=match_count, **chosen)
            query = rng.normal(size=dims)
            for label in ("off", "all"):
                calls[f"search {label}"] = functools.partial(
                    client.search, name, embedding=query, top_k=match_count, hybrid=False, fetch_k=size,
                    **CONFIGS[label])
            timed = time_in_turns(calls, repeats)
            finalize = {label: timed[f"finalize {label}"] for label in CONFIGS}
            search = {label: timed[f"search {label}"] for label in ("off", "all")}
            pools.append({
                "pool": size, "finalize": finalize, "search": search,
                "extra_median_ms": finalize["all"]["median_ms"] - finalize["off"]["median_ms"],
                "extra_p95_ms": finalize["all"]["p95_ms"] - finalize["off"]["p95_ms"],
                "search_extra_median_ms": search["all"]["median_ms"] - search["off"]["median_ms"],
            })
    finally:
        client.drop_collection(name)
    return {"dims": dims, "chunks": len(all_ids), "chunks_per_doc": chunks_per_doc,
            "match_count": match_count, "repeats": repeats, "roundtrip": roundtrip,
            "postgres": server[0] if server else None, "pgvector": server[1] if server else None,
            "configs": CONFIGS, "pools": pools}


def format_table(result: dict[str, Any]) -> str:
    """The result of :func:`run_finalize` as an aligned plain-text table."""
    header = (f"finalize stage: {result['chunks']:,} chunks of {result['dims']} dims "
              f"({result['chunks_per_doc']} a document), top {result['match_count']}, "
              f"{result['repeats']} calls each; PostgreSQL {result['postgres']}, pgvector "
              f"{result['pgvector']}; select 1 round trip {result['roundtrip']['median_ms']:.2f} ms")
    columns = ["pool", "call", "knobs", "p50 ms", "p95 ms", "p50 extra"]
    rows = []
    for p in result["pools"]:
        for call in ("finalize", "search"):
            off = p[call]["off"]["median_ms"]
            for label, t in p[call].items():
                rows.append([str(p["pool"]), call, label, f"{t['median_ms']:.2f}", f"{t['p95_ms']:.2f}",
                             "" if label == "off" else f"{t['median_ms'] - off:+.2f}"])
    widths = [max(len(columns[c]), *(len(r[c]) for r in rows)) for c in range(len(columns))]

    def line(cells: list[str]) -> str:
        return "  ".join(cell.ljust(w) if c < 3 else cell.rjust(w)
                         for c, (cell, w) in enumerate(zip(cells, widths))).rstrip()

    knobs = "; ".join(f"{k}: {', '.join(f'{a}={b}' for a, b in v.items())}" for k, v in result["configs"].items())
    return "\n".join([header, line(columns), line(["-" * w for w in widths]), *map(line, rows),
                      f"knobs: {knobs}; all also sets score_threshold at the pool's 10th percentile",
                      "search: dense-only sift.search with fetch_k = pool, so its pool has exactly that size"])
