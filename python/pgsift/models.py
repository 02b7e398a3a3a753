"""Rows in and out of pgsift, as dataclasses."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
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
    found_by: str
    dense_rank: int | None
    dense_distance: float | None
    lexical_rank: int | None
    lexical_score: float | None
    legs: list[str]
    lexical_query: str | None


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


@dataclass(frozen=True)
class SearchResult:
    """The hits, plus how they were produced (which legs ran, the lexical query)."""

    hits: list[Hit]

    @property
    def legs(self) -> list[str]:
        return self.hits[0].legs if self.hits else []

    @property
    def lexical_query(self) -> str | None:
        return self.hits[0].lexical_query if self.hits else None

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
