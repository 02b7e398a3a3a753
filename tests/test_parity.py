"""SQL is the only ranking policy: the same call through psql-style SQL (sift.search with a
knobs object) and through Client.search returns the same rows, over a grid of knobs, query
shapes and collection sets, a threshold calibrated for a reranker included."""

from __future__ import annotations

import itertools
import json
from datetime import datetime, timedelta, timezone
from typing import Any

import numpy as np
import pytest
from conftest import unit
from pgsift import Chunk, Client, Document
from pgsift.vectors import vector_text

DIMS = 8
WORDS = ["refund", "policy", "invoice", "shipping", "return", "warranty", "order", "delivery"]

KNOB_GRID: list[dict[str, Any]] = [
    {},
    {"hybrid": False},
    {"preset": "pgvector"},
    {"preset": "seeds"},
    {"dense_weight": 0.2, "rrf_k": 20, "fetch_k": 15},
    {"per_document_cap": 1},
    {"per_document_cap": None, "mmr_lambda": 0.5},
    {"recency_field": "published", "recency_bias": 0.8, "recency_half_life": "10 days"},
    {"boost": {"a": 2.0}},
    {"score_threshold": 0.02},
    {"lost_in_the_middle": True},
    {"lexical_scorer": "ts_rank_cd", "max_query_terms": 1},
    {"exact_search_limit": 0, "per_document_cap": 2, "mmr_lambda": 0.7, "lost_in_the_middle": True},
]
QUERIES = [("refund policy", True), ("shipping", False), ("", True)]
COLLECTIONS: list[str | list[str]] = ["a", ["a", "b"]]


@pytest.fixture
def corpus(db):
    client = Client(db)
    rng = np.random.default_rng(9)
    now = datetime.now(timezone.utc)
    for name in ("a", "b"):
        client.create_collection(name, embedding_dims=DIMS)
        client.upsert_documents(name, [
            Document(source_uri=f"{name}-{d}", title=f"doc {d}",
                     metadata={"published": (now - timedelta(days=int(rng.integers(0, 60)))).isoformat()},
                     chunks=[Chunk(content=" ".join(rng.choice(WORDS, size=5)), embedding=unit(rng.normal(size=DIMS)))
                             for _ in range(3)])
            for d in range(12)])
    # A threshold calibrated for a reranker: SQL applies it only to that reranker's scores,
    # so neither path applies it to fused scores (it once differed between them).
    client.register_reranker("voy", "voyage", secret_ref="voyage")
    client.store_calibrated_threshold("a", "voy", 0.9)
    return client


def _sql_rows(db, collection: str | list[str], query: str, embedding: np.ndarray | None,
              knobs: dict[str, Any]) -> list[tuple[Any, ...]]:
    single = collection if isinstance(collection, str) else None
    several = None if isinstance(collection, str) else list(collection)
    rows = db.execute(
        "select rank, chunk_id, score, threshold_skipped from sift.search("
        "collection => %s, query_text => %s, query_embedding => %s, match_count => 10, "
        "filter => '{}', knobs => %s::jsonb, collections => %s) order by position, chunk_id",
        [single, query, None if embedding is None else vector_text(embedding), json.dumps(knobs), several]).fetchall()
    return [(r[0], r[1], round(r[2], 9), r[3]) for r in rows]


def test_sql_and_the_client_return_the_same_rows(db, corpus):
    rng = np.random.default_rng(3)
    compared = 0
    for knobs, (query, with_embedding), collection in itertools.product(KNOB_GRID, QUERIES, COLLECTIONS):
        embedding = unit(rng.normal(size=DIMS)) if with_embedding else None
        via_sql = _sql_rows(db, collection, query, embedding, knobs)
        result = corpus.search(collection, query, embedding=embedding, top_k=10, **knobs)
        via_client = [(h.rank, h.chunk_id, round(h.score, 9), h.threshold_skipped) for h in result.hits]
        assert [r[:2] + r[3:] for r in via_client] == [r[:2] + r[3:] for r in via_sql], (knobs, query, collection)
        # Scores equal, but for recency: its decay counts from now(), a moment later the second time.
        assert [r[2] for r in via_client] == pytest.approx([r[2] for r in via_sql], rel=1e-6)
        compared += 1
    assert compared == len(KNOB_GRID) * len(QUERIES) * len(COLLECTIONS)
    # The calibrated threshold was skipped, and said so, on both paths.
    skipped = _sql_rows(db, "a", "refund", None, {})
    assert skipped and all("calibrated for reranker" in (r[3] or "") for r in skipped)
