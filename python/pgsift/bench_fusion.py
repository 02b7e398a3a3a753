"""Fusion sweep: `pgsift bench fusion --dataset DIR --split train`.

How the fusion defaults were chosen: load a BEIR folder, take each query's
dense and lexical rank lists once (200 deep), then fuse them with `sift.rrf`
in the database for every (dense_weight, rrf_k, fetch_k) of a grid and score
nDCG@10. Tune on the train split, report on test.
"""

from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any

import psycopg

from . import metrics, queries
from .bench import corpus_documents, load_beir
from .client import Client
from .errors import CollectionNotFound

WEIGHTS = (0.3, 0.4, 0.45, 0.5, 0.55, 0.6, 0.7)
RRF_KS = (1, 3, 5, 10, 30, 60)
FETCH_KS = (40, 100)
DEPTH = 200


def run_fusion(conn: psycopg.Connection[Any], dataset: Path, *, split: str = "train", model: str | None = None,
               collection: str = "bench_fusion") -> dict[str, Any]:
    data = load_beir(dataset, model=model, split=split)
    client = Client(conn)
    try:
        client.drop_collection(collection)
    except CollectionNotFound:
        pass
    client.create_collection(collection, embedding_dims=data.dims)
    for start in range(0, len(data.doc_ids), 500):
        client.upsert_documents(collection, corpus_documents(data, start, min(start + 500, len(data.doc_ids))))
    with client.transaction() as tx:
        uri = dict(tx.execute(queries.CHUNK_SOURCES, {"collection": collection}).fetchall())
    legs = []
    for qid, text, emb in zip(data.query_ids, data.query_texts, data.query_embeddings):
        dense = client.candidates(collection, embedding=emb, top_k=DEPTH, hybrid=False)
        lexical = client.candidates(collection, text, top_k=DEPTH)
        legs.append((qid, [c.chunk_id for c in sorted(dense, key=lambda c: c.dense_rank or 0)],
                     [c.chunk_id for c in sorted(lexical, key=lambda c: c.lexical_rank or 0)]))

    def ndcg(w: float, k: float, f: int) -> float:
        total = 0.0
        for qid, dense, lexical in legs:
            fused = conn.execute(queries.RRF, dict(d=dense[:f], l=lexical[:f], w=w, k=k, n=10)).fetchall()
            total += metrics.ndcg_at_k([uri[r[0]] for r in fused], data.qrels[qid], 10)
        return total / len(legs)

    grid = [{"dense_weight": w, "rrf_k": k, "fetch_k": f, "ndcg@10": round(ndcg(w, k, f), 4)}
            for w, k, f in itertools.product(WEIGHTS, RRF_KS, FETCH_KS)]
    grid.sort(key=lambda g: (-g["ndcg@10"], g["dense_weight"], g["rrf_k"], g["fetch_k"]))
    client.drop_collection(collection)
    return {"dataset": data.name, "split": split, "queries": len(legs),
            "dense_only": round(ndcg(1.0, 60, 40), 4), "lexical_only": round(ndcg(0.0, 60, 40), 4),
            "grid": grid}


def format_table(result: dict[str, Any], top: int = 15) -> str:
    lines = [f"{result['dataset']} {result['split']}: {result['queries']} queries; dense only "
             f"{result['dense_only']}, lexical only {result['lexical_only']}",
             f"{'dense_weight':>12} {'rrf_k':>6} {'fetch_k':>8} {'nDCG@10':>8}"]
    for g in result["grid"][:top]:
        lines.append(f"{g['dense_weight']:>12} {g['rrf_k']:>6} {g['fetch_k']:>8} {g['ndcg@10']:>8.4f}")
    return "\n".join(lines)
