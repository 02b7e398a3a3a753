"""Rows in and out of pgsift, as dataclasses."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import numpy as np

from .errors import InvalidArgument


@dataclass(frozen=True)
class Collection:
    collection_id: int
    tenant: str
    name: str
    search_language: str
    embedding_dims: int
    distance: str
    hybrid: bool
    dense_weight: float
    rrf_k: float
    fetch_k: int
    exact_search_limit: int
    description: str | None
    lexical_scorer: str
    bm25_k1: float
    bm25_b: float
    created_at: datetime
    # The finalize stage (sift.alter_ranking): see docs/sql.md, "Ranking knobs".
    recency_field: str | None
    recency_half_life: timedelta
    recency_weight: float
    recency_ceiling: float
    per_document_cap: int
    mmr_lambda: float | None
    boost: float
    score_threshold: float | None
    lost_in_the_middle: bool


@dataclass
class Chunk:
    """One chunk to write: its text, its embedding, and optionally a context header."""

    content: str
    embedding: Sequence[float] | np.ndarray
    context: str | None = None
    token_count: int | None = None


@dataclass
class Document:
    """A document and all of its chunks; writing it replaces whatever it had."""

    source_uri: str
    chunks: list[Chunk]
    title: str | None = None
    language: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    created_at: datetime | None = None
    modified_at: datetime | None = None


@dataclass(frozen=True)
class Hit:
    """One result row. `rank` is its strength (1 = best after every knob), `position` the
    order it is presented in (they differ only with lost_in_the_middle). `score` is
    `base_score` (fused, or the reranker's) times `recency_factor` times `boost`. The leg
    columns are None for rows of `Client.finalize`, which does not know how a pool was
    retrieved."""

    rank: int
    chunk_id: int
    document_id: int
    source_uri: str
    title: str | None
    ordinal: int
    content: str
    context: str | None
    metadata: dict[str, Any]
    score: float
    found_by: str | None = None
    dense_rank: int | None = None
    dense_distance: float | None = None
    lexical_rank: int | None = None
    lexical_score: float | None = None
    legs: list[str] = field(default_factory=list)
    lexical_query: str | None = None
    collection_name: str | None = None
    base_score: float | None = None
    pool_rank: int | None = None
    recency_factor: float | None = None
    boost: float = 1.0
    position: int | None = None
    threshold_applied: bool = False
    below_threshold: int = 0
    rerank_score: float | None = None
    fused_score: float | None = None     # set when reranked: base_score is then the reranker's


@dataclass(frozen=True)
class Candidate:
    fused_rank: int | None
    chunk_id: int
    document_id: int
    source_uri: str
    title: str | None
    ordinal: int
    found_by: str | None
    dense_rank: int | None
    dense_distance: float | None
    lexical_rank: int | None
    lexical_score: float | None
    score: float | None
    kept: bool
    reason: str
    legs: list[str]
    lexical_query: str | None
    collection_name: str
    base_score: float | None
    recency_date: datetime | None
    recency_factor: float | None
    boost: float | None
    cap_status: str | None
    mmr_similarity: float | None
    mmr_penalty: float | None
    final_rank: int | None
    position: int | None
    cut_by: str | None
    threshold_applied: bool
    below_threshold: int


@dataclass(frozen=True)
class SearchResult:
    """The hits, plus how they were produced (which legs ran, the lexical query, whether a
    score threshold was applied and how many candidates fell below it)."""

    hits: list[Hit]
    # Set when the collections name a reranker: what it did (pgsift.rerank.RerankOutcome:
    # reranked, partial, fault, reason, alias, chosen_by, latency_ms, ...).
    rerank: Any = None
    # Set when the collections' stored score threshold was calibrated for a reranker other
    # than the one that scored this pool (or for a reranker, and none scored it): why it was
    # not applied. A per-call score_threshold is always applied.
    threshold_skipped: str | None = None

    @property
    def reranked(self) -> bool:
        """Whether a reranker's scores ordered these hits (False after any fallback)."""
        return bool(self.rerank is not None and self.rerank.applied)

    @property
    def legs(self) -> list[str]:
        """The legs that ran, in any of the collections searched."""
        return [leg for leg in ("dense", "lexical") if any(leg in (h.legs or ()) for h in self.hits)]

    @property
    def lexical_query(self) -> str | None:
        return self.hits[0].lexical_query if self.hits else None

    @property
    def threshold_applied(self) -> bool | None:
        """Whether a score threshold was in effect; None when nothing came back (the rows carry
        it: ask `Client.explain` why a result is empty)."""
        return self.hits[0].threshold_applied if self.hits else None

    @property
    def below_threshold(self) -> int | None:
        """How many candidates the score threshold dropped (broaden and retry when many);
        None when nothing came back."""
        return self.hits[0].below_threshold if self.hits else None

    def __iter__(self) -> Iterator[Hit]:
        return iter(self.hits)

    def __len__(self) -> int:
        return len(self.hits)

    def __getitem__(self, i: int) -> Hit:
        return self.hits[i]


def vector_text(embedding: Sequence[float] | np.ndarray, what: str = "embedding") -> str:
    """pgvector's text form of an embedding, refusing what the database would choke on."""
    try:
        arr = np.asarray(embedding, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise InvalidArgument(f"{what} must be a sequence of numbers") from exc
    if arr.ndim != 1 or arr.size == 0:
        raise InvalidArgument(f"{what} must be a non-empty 1-d sequence of numbers, got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise InvalidArgument(f"{what} contains NaN or infinity")
    return "[" + ",".join(repr(float(x)) for x in arr.tolist()) + "]"
