"""A Text Embeddings Inference server's rerank endpoint, over httpx.

POST {base_url}/rerank: query, texts, truncate -> [{index, score}]. Scores are
TEI's default (sigmoid, in [0, 1]); the token count comes from its
x-compute-tokens header when it sends one.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .base import (
    DEFAULT_ATTEMPT_TIMEOUT_S,
    PerLoop,
    Ranking,
    RerankCallError,
    RerankerUnavailable,
    arefuse_redirect,
    import_client,
    int_or_none,
    refuse_redirect,
    retry_after,
    shape_fault,
    short,
    status_fault,
)


class TEIReranker:
    """Sync and async httpx clients; a key, when given, is sent as a Bearer token. A redirect is
    never followed (it raises the fault "redirected" before anything goes elsewhere)."""

    provider = "tei"

    def __init__(self, model: str = "tei", *, base_url: str | None, api_key: str | None = None,
                 timeout_s: float = DEFAULT_ATTEMPT_TIMEOUT_S, truncate: bool = True):
        httpx = import_client("httpx")
        if not base_url:
            raise RerankerUnavailable("a TEI reranker needs base_url")
        self.model = model
        self.timeout_s = timeout_s
        self.truncate = truncate
        self._httpx = httpx
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        base = base_url.rstrip("/")
        self._client = httpx.Client(base_url=base, headers=headers, timeout=timeout_s, follow_redirects=False,
                                    event_hooks={"response": [refuse_redirect]})
        self._aclients = PerLoop(lambda: httpx.AsyncClient(base_url=base, headers=headers, timeout=timeout_s,
                                                           follow_redirects=False,
                                                           event_hooks={"response": [arefuse_redirect]}))

    def _body(self, query: str, docs: list[str]) -> dict[str, Any]:
        return {"query": query, "texts": docs, "truncate": self.truncate,
                "raw_scores": False, "return_text": False}

    def _fault(self, exc: Exception) -> RerankCallError:
        if isinstance(exc, RerankCallError):
            return exc
        if isinstance(exc, self._httpx.TimeoutException):
            return RerankCallError("timeout", f"TEI did not answer in time: {short(exc)}", retryable=True)
        if isinstance(exc, self._httpx.TransportError):
            return RerankCallError("connection_error", f"cannot reach TEI: {short(exc)}", retryable=True)
        return shape_fault(exc)

    @staticmethod
    def _parse(response: Any, top_n: int | None) -> Ranking:
        if response.status_code >= 300:
            raise status_fault(response.status_code, short(response.text), retry_after(response.headers))
        try:
            body = response.json()
        except ValueError as exc:
            raise RerankCallError("malformed_response", f"TEI answered with invalid JSON: {short(exc)}") from exc
        if not isinstance(body, list):
            raise RerankCallError("malformed_response", f"TEI answered {type(body).__name__}, not a list")
        pairs = []
        for item in body:
            if not isinstance(item, Mapping):
                raise RerankCallError("malformed_response",
                                      f"TEI answered an item that is not an object: {short(item)}")
            pairs.append((item.get("index"), item.get("score")))
        if top_n is not None:
            pairs = pairs[:top_n]   # TEI scores every text; it has no top_n
        return Ranking(pairs, tokens=int_or_none(response.headers.get("x-compute-tokens")))

    def rerank(self, query: str, documents: Sequence[str], top_n: int | None = None, *,
               timeout: float | None = None) -> Ranking:
        docs = list(documents)
        try:
            response = self._client.post("/rerank", json=self._body(query, docs), timeout=timeout or self.timeout_s)
            return self._parse(response, top_n)
        except Exception as exc:
            raise self._fault(exc) from exc

    async def arerank(self, query: str, documents: Sequence[str], top_n: int | None = None, *,
                      timeout: float | None = None) -> Ranking:
        docs = list(documents)
        try:
            response = await (await self._aclients.get()).post("/rerank", json=self._body(query, docs),
                                                       timeout=timeout or self.timeout_s)
            return self._parse(response, top_n)
        except Exception as exc:
            raise self._fault(exc) from exc
