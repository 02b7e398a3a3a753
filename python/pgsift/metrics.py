"""Retrieval metrics: pure functions over one query's ranking and its judgments.

Every function takes

* ``ranked_ids``: the retrieved ids, best first (position 1 = ``ranked_ids[0]``);
* ``qrels``: the judgments for that query, ``{id: relevance}``. An id with
  relevance > 0 is relevant; 0 or negative (BEIR files carry explicit zeros)
  counts as not relevant, exactly as trec_eval does;
* ``k``: the cut-off (``None`` = the whole ranking).

An id repeated in the ranking (several chunks of one document mapped to the
document's id) counts once, at its best position: later copies are dropped
before the cut-off is applied, so they neither earn gain twice nor use up a
slot.

A query with no relevant judgment scores 0.0 on every metric (callers that
follow BEIR leave such queries out of the mean instead).
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Mapping, Sequence
from typing import TypeVar

# Any hashable id: chunk ids, document ids, "doc:<uri>" units.
H = TypeVar("H", bound=Hashable)

__all__ = ["dcg", "dedupe", "hit_rate", "mrr", "ndcg_at_k", "recall_at_k", "relevant"]


def dedupe(ranked_ids: Iterable[H]) -> list[H]:
    """The ranking with repeated ids removed, each kept at its first (best) position."""
    seen: set[H] = set()
    out: list[H] = []
    for doc_id in ranked_ids:
        if doc_id not in seen:
            seen.add(doc_id)
            out.append(doc_id)
    return out


def _cut(ranked_ids: Iterable[H], k: int | None) -> list[H]:
    if k is not None and k < 0:
        raise ValueError(f"k must be >= 0 or None, got {k}")
    ranked = dedupe(ranked_ids)
    return ranked if k is None else ranked[:k]


def relevant(qrels: Mapping[H, int]) -> set[H]:
    """The ids judged relevant (relevance > 0)."""
    return {doc_id for doc_id, rel in qrels.items() if rel > 0}


def dcg(gains: Sequence[float]) -> float:
    """Discounted cumulative gain of gains in rank order: sum of gain_i / log2(i + 1), i from 1.

    Linear gain (gain = graded relevance), the trec_eval / pytrec_eval form BEIR reports.
    """
    return sum(g / math.log2(i + 2) for i, g in enumerate(gains) if g)


def ndcg_at_k(ranked_ids: Iterable[H], qrels: Mapping[H, int], k: int | None = 10) -> float:
    """Normalised DCG at k, graded (trec_eval ``ndcg_cut``, as BEIR reports it).

    DCG@k = sum over the top k of rel(id) / log2(rank + 1); the ideal DCG sorts
    all positive judgments (including ids the ranking never returned) by
    relevance, takes the top k, and applies the same formula. Result in [0, 1].

    >>> round(ndcg_at_k(["a", "b", "c"], {"b": 1, "c": 2}, 3), 4)
    0.6199
    """
    ranked = _cut(ranked_ids, k)
    gains = [max(qrels.get(doc_id, 0), 0) for doc_id in ranked]
    ideal = sorted((rel for rel in qrels.values() if rel > 0), reverse=True)
    if k is not None:
        ideal = ideal[:k]
    idcg = dcg(ideal)
    return dcg(gains) / idcg if idcg > 0 else 0.0


def recall_at_k(ranked_ids: Iterable[H], qrels: Mapping[H, int], k: int | None = 100) -> float:
    """Share of the relevant ids found in the top k: |relevant in top k| / |relevant|.

    The denominator is every relevant judgment, so a query with more relevant ids
    than k cannot reach 1.0 (trec_eval ``recall_k`` and BEIR agree).
    """
    rel = relevant(qrels)
    if not rel:
        return 0.0
    return sum(1 for doc_id in _cut(ranked_ids, k) if doc_id in rel) / len(rel)


def mrr(ranked_ids: Iterable[H], qrels: Mapping[H, int], k: int | None = None) -> float:
    """Reciprocal rank of the first relevant id in the top k (1/rank), 0.0 if none.

    Averaged over queries this is the mean reciprocal rank (MRR@k).
    """
    rel = relevant(qrels)
    for rank, doc_id in enumerate(_cut(ranked_ids, k), start=1):
        if doc_id in rel:
            return 1.0 / rank
    return 0.0


def hit_rate(ranked_ids: Iterable[H], qrels: Mapping[H, int], k: int | None = 10) -> float:
    """1.0 if any relevant id is in the top k, else 0.0 (averaged: hit rate / success@k)."""
    rel = relevant(qrels)
    return 1.0 if any(doc_id in rel for doc_id in _cut(ranked_ids, k)) else 0.0
