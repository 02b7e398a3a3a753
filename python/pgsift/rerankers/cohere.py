"""Cohere's v2 rerank through the official `cohere` client (ClientV2 / AsyncClientV2).

POST {base_url}/v2/rerank: model, query, documents, top_n ->
results[{index, relevance_score}], meta.billed_units.search_units.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .base import (
    DEFAULT_ATTEMPT_TIMEOUT_S,
    PerLoop,
    Ranking,
    RerankCallError,
    RerankerUnavailable,
    arefuse_redirect,
    float_or_none,
    import_client,
    int_or_none,
    refuse_redirect,
    retry_after,
    shape_fault,
    short,
    status_fault,
)


class CohereReranker:
    """Same protocol as Voyage: switching is a configuration change. The client library gets
    httpx clients of ours, which never follow a redirect (the library's own do)."""

    provider = "cohere"

    def __init__(self, model: str = "rerank-v3.5", *, api_key: str | None, base_url: str | None = None,
                 timeout_s: float = DEFAULT_ATTEMPT_TIMEOUT_S, max_tokens_per_doc: int | None = None):
        cohere = import_client("cohere")
        if not api_key:
            raise RerankerUnavailable("Cohere needs an API key")
        self.model = model
        self.timeout_s = timeout_s
        self.max_tokens_per_doc = max_tokens_per_doc
        httpx = import_client("httpx")
        self._httpx = httpx
        kwargs: dict[str, Any] = {"api_key": api_key, "timeout": timeout_s}
        if base_url:
            kwargs["base_url"] = base_url.rstrip("/")
        self._client = cohere.ClientV2(**kwargs, httpx_client=httpx.Client(
            timeout=timeout_s, follow_redirects=False, event_hooks={"response": [refuse_redirect]}))
        self._aclients = PerLoop(lambda: cohere.AsyncClientV2(**kwargs, httpx_client=httpx.AsyncClient(
            timeout=timeout_s, follow_redirects=False, event_hooks={"response": [arefuse_redirect]})))

    def _args(self, query: str, docs: list[str], top_n: int | None, timeout: float | None) -> dict[str, Any]:
        args: dict[str, Any] = {
            "model": self.model, "query": query, "documents": docs, "top_n": top_n or len(docs),
            # the client's own retries sleep without knowing our deadline: the engine retries
            "request_options": {"timeout_in_seconds": timeout or self.timeout_s, "max_retries": 0},
        }
        if self.max_tokens_per_doc:
            args["max_tokens_per_doc"] = self.max_tokens_per_doc
        return args

    def _fault(self, exc: Exception) -> RerankCallError:
        httpx = self._httpx
        if isinstance(exc, RerankCallError):
            return exc
        if isinstance(exc, httpx.TimeoutException):
            return RerankCallError("timeout", f"Cohere did not answer in time: {short(exc)}", retryable=True)
        if isinstance(exc, httpx.TransportError):
            return RerankCallError("connection_error", f"cannot reach Cohere: {short(exc)}", retryable=True)
        status = getattr(exc, "status_code", None)
        if status is not None or type(exc).__name__ in ("ApiError", "ParsingError"):
            return status_fault(status, short(getattr(exc, "body", None) or exc),
                                retry_after(getattr(exc, "headers", None)))
        return shape_fault(exc)

    @staticmethod
    def _ranking(response: Any) -> Ranking:
        meta = getattr(response, "meta", None)
        billed = getattr(meta, "billed_units", None)
        tokens = getattr(meta, "tokens", None)
        return Ranking([(r.index, getattr(r, "relevance_score", None)) for r in response.results],
                       tokens=int_or_none(getattr(tokens, "input_tokens", None)),
                       search_units=float_or_none(getattr(billed, "search_units", None)))

    def rerank(self, query: str, documents: Sequence[str], top_n: int | None = None, *,
               timeout: float | None = None) -> Ranking:
        try:
            return self._ranking(self._client.rerank(**self._args(query, list(documents), top_n, timeout)))
        except Exception as exc:
            raise self._fault(exc) from exc

    async def arerank(self, query: str, documents: Sequence[str], top_n: int | None = None, *,
                      timeout: float | None = None) -> Ranking:
        try:
            response = await (await self._aclients.get()).rerank(**self._args(query, list(documents), top_n, timeout))
            return self._ranking(response)
        except Exception as exc:
            raise self._fault(exc) from exc
