"""Reranking: the one call of a search that leaves the database.

All ranking logic stays in SQL. SQL says which reranker a search uses
(sift.reranker_for, no network), gives the candidate pool and its texts
(sift.candidates, sift.rerank_texts), and applies the ranking knobs to the
reranker's scores (sift.finalize). What runs here: one provider call per
search, through one retry and deadline engine, which never fails a search
and never shrinks it: every fault (timeout, connection refused, 429/5xx, other
4xx, malformed JSON, a response that does not describe the pool, a partial
ranking, a missing package or key) becomes an outcome with `reranked=False`,
a `fault` and a `reason`, logged on the `pgsift.rerank` logger.

One module per provider (voyage, cohere, tei) behind the `Reranker` protocol;
the provider list itself is SQL's (sift.reranker_providers), and so are their
request limits (sift.reranker_limits), which `limits` turns into requests.
"""

from . import engine, engine_async
from .base import (
    FAULTS,
    SKIPS,
    EndpointRefused,
    InvalidRanking,
    Ranking,
    RerankCallError,
    Reranker,
    RerankError,
    RerankerUnavailable,
)
from .cohere import CohereReranker
from .engine import ConnectionCheck, rerank_pool, rerank_search, test_connection
from .limits import Batches, RerankLimits, estimate_tokens, plan_batches
from .outcome import RerankOutcome, build_query, contextualize, validate
from .registry import IMPLEMENTATIONS, SecretResolver, build_reranker, clear_reranker_cache, resolve_secret
from .tei import TEIReranker
from .voyage import VoyageReranker

arerank_pool = engine_async.rerank_pool
arerank_search = engine_async.rerank_search
atest_connection = engine_async.test_connection

__all__ = [
    "FAULTS", "IMPLEMENTATIONS", "SKIPS", "Batches", "CohereReranker", "ConnectionCheck", "EndpointRefused",
    "InvalidRanking", "Ranking", "RerankCallError", "RerankError", "RerankLimits", "RerankOutcome",
    "Reranker", "RerankerUnavailable", "SecretResolver", "TEIReranker", "VoyageReranker", "arerank_pool",
    "arerank_search", "atest_connection", "build_query", "build_reranker", "clear_reranker_cache",
    "contextualize", "engine", "engine_async", "estimate_tokens", "plan_batches", "rerank_pool",
    "rerank_search", "resolve_secret", "test_connection", "validate",
]
