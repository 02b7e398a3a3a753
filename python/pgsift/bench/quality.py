"""Quality benchmark: nDCG / recall / latency of sift.search on a BEIR dataset.

``pgsift bench quality --dataset DIR`` loads a folder in the BEIR layout with
precomputed embeddings, writes every corpus document into a fresh collection
(one document, one chunk), and runs each test query three ways through
``sift.search``: dense only, lexical only, and hybrid (weighted RRF); then the
peers' SQL on a plain copy of the same chunks (pgsift.bench.peers: pgvector
HNSW, full text by ts_rank_cd, Supabase's hybrid_search), each latency also as a
ratio of pgvector's. The dataset is read from its path; nothing of it is copied.

The folder's layout: :mod:`pgsift.beir`.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import psycopg

from .. import metrics
from ..beir import BeirDataset, corpus_documents, load_beir
from ..client import Client
from ..errors import CollectionNotFound, InvalidArgument
from . import peers as bench_peers
from . import queries
from . import turns as bench_turns

log = logging.getLogger(__name__)

MODES = ("dense", "lexical", "hybrid")
# Exhaustive BM25: the lexical leg with its read budget and exhaustive limit lifted.
EXHAUSTIVE = {"lexical_budget": 2_000_000_000, "lexical_exact_limit": 2_000_000_000}
_INGEST_BATCH = 500


def load_collection(client: Client, collection: str, data: BeirDataset) -> None:
    """A fresh collection holding the dataset's corpus (one replaced if it was there), 500
    documents a call, its statistics folded at the end (whatever the client's backlog)."""
    try:
        client.drop_collection(collection)
    except CollectionNotFound:
        pass
    client.create_collection(collection, embedding_dims=data.dims)
    for start in range(0, len(data.doc_ids), 500):
        client.upsert_documents(collection, corpus_documents(data, start, min(start + 500, len(data.doc_ids))))
    client.refresh_lexical_stats(collection)


def _percentile(values: list[float], q: float) -> float:
    return float(np.percentile(values, q)) if values else math.nan


def _server_info(conn: psycopg.Connection[Any]) -> dict[str, str | None]:
    with conn.transaction():
        row = conn.execute(queries.SERVER_VERSIONS).fetchone()
    return {"postgres": row[0] if row else None, "pgvector": row[1] if row else None}


def run_quality(conn: psycopg.Connection[Any], dataset: Path, *, model: str | None = None,
                collection: str = "bench", search_language: str = "english", top_k: int = 10,
                depth: int = 100, max_queries: int | None = None,
                knobs: dict[str, Any] | None = None, peers_too: bool = True) -> dict[str, Any]:
    """Ingest a BEIR dataset into a fresh collection and score dense, lexical and hybrid search.

    The collection ``collection`` is dropped first if it exists, then created with the
    dataset's embedding size and ``search_language`` (every other setting at the
    database's defaults). Each test query runs once per mode through ``sift.search``
    with ``top_k=depth``:

    * dense: the query embedding, ``hybrid=False``;
    * lexical: the query text only (no embedding);
    * hybrid: embedding and text, the collection's settings overridden by ``knobs``.

    ``knobs`` (fetch_k, dense_weight, rrf_k, exact_search_limit) apply to every mode;
    ``hybrid`` is not allowed in it since the mode decides. Hits map to corpus ids by
    source_uri. Reported per mode: mean nDCG@top_k and recall@depth over the queries,
    and p50 / p95 latency in ms of the client call (perf_counter, after one untimed
    warm-up search per mode). With ``peers_too`` the peers' SQL runs too
    (:mod:`pgsift.bench.peers`; skipped with the reason where it cannot run), and every
    p50 is also a ratio of pgvector's. Every mode and peer runs in turn on each query,
    in an order changed from query to query (turns.turn_order), so all are timed under
    the same load.
    """
    knobs = dict(knobs or {})
    if "hybrid" in knobs:
        raise InvalidArgument("knobs may not set 'hybrid': each mode sets it")
    if top_k < 1 or depth < top_k:
        raise InvalidArgument(f"need 1 <= top_k <= depth, got top_k={top_k}, depth={depth}")

    data = load_beir(Path(dataset), model)
    query_idx = list(range(len(data.query_ids)))
    if max_queries is not None:
        query_idx = query_idx[:max_queries]
    if not query_idx:
        raise InvalidArgument(f"{dataset}: no test query has a relevant judgment")

    # Each load call folds its statistics (refresh_backlog 1): the searches run on a settled
    # collection, as a production one is between writes.
    client = Client(conn, refresh_backlog=1)
    try:
        client.drop_collection(collection)
    except CollectionNotFound:
        pass
    col = client.create_collection(collection, embedding_dims=data.dims, search_language=search_language)

    log.info("ingesting %d documents into %r", len(data), collection)
    started = time.perf_counter()
    n_written = 0
    for start in range(0, len(data), _INGEST_BATCH):
        n_written += len(client.upsert_documents(
            collection, corpus_documents(data, start, min(start + _INGEST_BATCH, len(data)))))
    ingest_s = time.perf_counter() - started
    with client.transaction() as tx:
        n_docs = (tx.execute(queries.COUNT_DOCUMENTS, {"collection": collection}).fetchone() or (0,))[0]
        # Fresh planner statistics, as autovacuum would give a settled table.
        tx.execute(queries.ANALYZE)

    def call(mode: str, i: int) -> list[str]:
        if mode == "dense":
            result = client.search(collection, "", embedding=data.query_embeddings[i], top_k=depth,
                                   hybrid=False, **knobs)
        elif mode == "lexical":
            result = client.search(collection, data.query_texts[i], top_k=depth, **knobs)
        elif mode == "lexical_exhaustive":
            # The same leg with its read budget and exhaustive limit lifted:
            # exhaustive BM25, for what the bounded leg gives up (if anything).
            result = client.search(collection, data.query_texts[i], top_k=depth,
                                   **{**knobs, **EXHAUSTIVE})
        else:
            result = client.search(collection, data.query_texts[i], embedding=data.query_embeddings[i],
                                   top_k=depth, hybrid=True, **knobs)
        return [hit.source_uri for hit in result]

    # Every system in turn on each query, the order changing from query to query, so
    # that none is timed only while the machine is busy or the cache cold (timed one
    # system after another, the first measured right after the ingest could run at
    # twice the time of the same searches later).
    runs: dict[str, Callable[[int], list[str]]] = {m: partial(call, m) for m in (*MODES, "lexical_exhaustive")}
    around: dict[str, tuple[Callable[[], None], Callable[[], None]]] = {}
    n_peer_rows, skipped = 0, None
    try:
        if peers_too:
            try:
                n_peer_rows = bench_peers.install(conn, collection, data.dims)
                peers = bench_peers.Peers(conn)
                for peer in bench_peers.MODES:
                    runs[peer] = partial(_peer_search, peers, peer, data, depth)
                    # pgvector's ef_search raised to the depth around that peer's searches
                    # only, untimed (each of the other systems runs at its own setting).
                    around[peer] = (partial(peers.begin, peer, depth), peers.end)
            except bench_peers.PeersUnavailable as exc:
                skipped = str(exc)
                log.warning("peers skipped: %s", exc)
        lists, modes = _time_in_turns(runs, around, query_idx, data, top_k, depth)
    finally:
        if peers_too:
            bench_peers.drop(conn)
    if "pgvector_hnsw" in modes:
        base = modes["pgvector_hnsw"]["p50_ms"]
        for m in modes.values():
            m["p50_over_pgvector"] = m["p50_ms"] / base if base else math.nan

    same = {n: sum(a[:n] == b[:n] for a, b in zip(lists["lexical"], lists["lexical_exhaustive"]))
            for n in (top_k, depth)}
    return {
        "dataset": data.name,
        "n_docs": int(n_docs),
        "n_queries": len(query_idx),
        "ingest_s": ingest_s,
        "modes": modes,
        "lexical_identical_to_exhaustive": {f"top_{n}": count for n, count in same.items()},
        **({"peer_rows": n_peer_rows} if "pgvector_hnsw" in modes else {}),
        **({"peers_skipped": skipped} if skipped else {}),
        "settings": {
            "path": str(dataset),
            "model": data.model,
            "dims": data.dims,
            "collection": collection,
            "search_language": search_language,
            "top_k": top_k,
            "depth": depth,
            "max_queries": max_queries,
            "knobs": knobs,
            "distance": col.distance,
            "collection_settings": col.settings,
            **_server_info(conn),
        },
    }


def _peer_search(peers: bench_peers.Peers, mode: str, data: BeirDataset, depth: int, i: int) -> list[str]:
    return peers.search(mode, data.query_texts[i], data.query_embeddings[i], depth)


def _time_in_turns(runs: dict[str, Callable[[int], list[str]]],
                   around: dict[str, tuple[Callable[[], None], Callable[[], None]]], query_idx: list[int],
                   data: BeirDataset, top_k: int,
                   depth: int) -> tuple[dict[str, list[list[str]]], dict[str, dict[str, float]]]:
    """Each query through every system in turn (bench_turns.in_turn; around: what to do,
    untimed, before and after a system's search). Each system's ranked lists, and its mean
    nDCG@top_k, recall@depth and p50 / p95 latency in ms."""
    names = list(runs)
    lists, times_ms = bench_turns.in_turn(runs, query_idx, around)
    modes: dict[str, dict[str, float]] = {}
    for name in names:
        judged = [data.qrels[data.query_ids[i]] for i in query_idx]
        modes[name] = {
            f"ndcg@{top_k}": float(np.mean([metrics.ndcg_at_k(r, j, top_k) for r, j in zip(lists[name], judged)])),
            f"recall@{depth}": float(np.mean([metrics.recall_at_k(r, j, depth)
                                              for r, j in zip(lists[name], judged)])),
            "p50_ms": _percentile(times_ms[name], 50),
            "p95_ms": _percentile(times_ms[name], 95),
        }
        log.info("%s: %s", name, modes[name])
    return lists, modes


def format_table(result: dict[str, Any]) -> str:
    """The result of :func:`run_quality` as an aligned plain-text table."""
    settings = result.get("settings", {})
    k, depth = settings.get("top_k", 10), settings.get("depth", 100)
    header = (f"dataset {result['dataset']}: {result['n_docs']:,} docs, "
              f"{result['n_queries']:,} queries"
              + (f", model {settings['model']}" if settings.get("model") else "")
              + (f", ingest {result['ingest_s']:.1f} s" if "ingest_s" in result else ""))
    columns = ["mode", f"nDCG@{k}", f"recall@{depth}", "p50 ms", "p95 ms", "p50 / pgvector"]
    rows = []
    for mode, m in result["modes"].items():
        ratio = m.get("p50_over_pgvector")
        rows.append([mode, f"{m[f'ndcg@{k}']:.4f}", f"{m[f'recall@{depth}']:.4f}",
                     f"{m['p50_ms']:.1f}", f"{m['p95_ms']:.1f}", "" if ratio is None else f"{ratio:.2f}x"])
    widths = [max(len(columns[c]), *(len(r[c]) for r in rows)) for c in range(len(columns))]

    def line(cells: list[str]) -> str:
        return "  ".join(cell.ljust(w) if c == 0 else cell.rjust(w)
                         for c, (cell, w) in enumerate(zip(cells, widths))).rstrip()

    out = [header, line(columns), line(["-" * w for w in widths])]
    out += [line(r) for r in rows]
    if "lexical_identical_to_exhaustive" in result:
        same = ", ".join(f"top {n.removeprefix('top_')} {c}/{result['n_queries']}"
                         for n, c in result["lexical_identical_to_exhaustive"].items())
        out.append(f"lexical (bounded) ranking identical to lexical_exhaustive: {same}")
    if "peers_skipped" in result:
        out.append(f"peers skipped: {result['peers_skipped']}")
    if "peer_rows" in result:
        out.append("pgvector_hnsw, fts_ts_rank_cd, supabase_hybrid: the peers' SQL on a plain copy of the "
                   f"{result['peer_rows']:,} chunks (pgsift.bench.peers); supabase_hybrid returns at most 30 rows")
    return "\n".join(out)
