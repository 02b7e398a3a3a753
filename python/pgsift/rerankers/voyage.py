"""Voyage AI's rerank endpoint through the official `voyageai` client.

POST {base_url}/rerank: model, query, documents, top_k, truncation ->
data[{index, relevance_score}], usage.total_tokens.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

from .base import (
    DEFAULT_ATTEMPT_TIMEOUT_S,
    Ranking,
    RerankCallError,
    RerankerUnavailable,
    import_client,
    int_or_none,
    retry_after,
    shape_fault,
    short,
    status_fault,
)


class VoyageReranker:
    """Sync and async clients, both built once here."""

    provider = "voyage"

    def __init__(self, model: str = "rerank-2", *, api_key: str | None, base_url: str | None = None,
                 timeout_s: float = DEFAULT_ATTEMPT_TIMEOUT_S, truncation: bool = True):
        voyageai = import_client("voyageai")
        if not api_key:
            raise RerankerUnavailable("Voyage needs an API key")
        self.model = model
        self.truncation = truncation
        self.timeout_s = timeout_s
        # max_retries counts attempts in the voyageai client: 1 = no retry of its own (its
        # backoff sleeps 1-16 s and knows nothing of our deadline); the engine retries.
        kwargs: dict[str, Any] = {"api_key": api_key, "max_retries": 1, "timeout": timeout_s}
        if base_url:
            kwargs["base_url"] = base_url.rstrip("/")
        self._client = voyageai.Client(**kwargs)
        self._aclient = voyageai.AsyncClient(**kwargs)
        self._errors = voyageai.error

    @staticmethod
    def _with_timeout(client: Any, timeout: float | None) -> Any:
        # The voyageai client takes its timeout at construction. A per-attempt timeout (what
        # is left of the deadline) goes through a shallow copy that shares everything else.
        params = getattr(client, "_params", None)
        if timeout is None or not isinstance(params, dict) or "request_timeout" not in params:
            return client
        view = copy.copy(client)
        view._params = {**params, "request_timeout": timeout}
        return view

    def _fault(self, exc: Exception) -> RerankCallError:
        e = self._errors
        if isinstance(exc, e.Timeout):
            return RerankCallError("timeout", f"Voyage did not answer in time: {short(exc)}", retryable=True)
        if isinstance(exc, e.APIConnectionError):
            return RerankCallError("connection_error", f"cannot reach Voyage: {short(exc)}", retryable=True)
        if isinstance(exc, e.VoyageError):
            return status_fault(getattr(exc, "http_status", None), short(exc),
                                retry_after(getattr(exc, "headers", None)))
        return shape_fault(exc)

    @staticmethod
    def _ranking(result: Any) -> Ranking:
        return Ranking([(r.index, r.relevance_score) for r in result.results],
                       tokens=int_or_none(getattr(result, "total_tokens", None)))

    def rerank(self, query: str, documents: Sequence[str], top_n: int | None = None, *,
               timeout: float | None = None) -> Ranking:
        docs = list(documents)
        try:
            result = self._with_timeout(self._client, timeout).rerank(
                query, docs, model=self.model, top_k=top_n or len(docs), truncation=self.truncation)
            return self._ranking(result)
        except Exception as exc:
            raise self._fault(exc) from exc

    async def arerank(self, query: str, documents: Sequence[str], top_n: int | None = None, *,
                      timeout: float | None = None) -> Ranking:
        docs = list(documents)
        try:
            result = await self._with_timeout(self._aclient, timeout).rerank(
                query, docs, model=self.model, top_k=top_n or len(docs), truncation=self.truncation)
            return self._ranking(result)
        except Exception as exc:
            raise self._fault(exc) from exc
