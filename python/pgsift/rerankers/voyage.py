"""Voyage AI's rerank endpoint through the official `voyageai` client.

POST {base_url}/rerank: model, query, documents, top_k, truncation ->
data[{index, relevance_score}], usage.total_tokens.

The client sends through requests (sync) and aiohttp (async), both of which follow
redirects: a 307 from an endpoint would send the query and texts (and, to the same host,
the key) wherever it points. It takes no session per client, so each call here hands it
sessions of ours that never follow one: aiohttp through `voyageai.aiosession` (a context
variable, set for the call only), requests through the voyageai requestor's per-thread
session, swapped in for the call and put back after.
"""

from __future__ import annotations

import contextlib
import copy
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from typing import Any, TypeVar

from .base import (
    DEFAULT_ATTEMPT_TIMEOUT_S,
    Ranking,
    RerankCallError,
    RerankerUnavailable,
    import_client,
    int_or_none,
    redirect_refused,
    retry_after,
    shape_fault,
    short,
    status_fault,
)

T = TypeVar("T")


class _NoRedirects:
    """A requests.Session or aiohttp.ClientSession as voyageai uses it (`request`, and
    `proxies` and `close` of a requests session), that asks for no redirect to be followed
    and raises the fault "redirected" for a 3xx before anything is sent elsewhere."""

    def __init__(self, session: Any):
        self._session = session
        self.proxies = getattr(session, "proxies", None)

    def request(self, *args: Any, **kwargs: Any) -> Any:
        kwargs["allow_redirects"] = False
        response = self._session.request(*args, **kwargs)
        if 300 <= response.status_code < 400:
            response.close()
            raise redirect_refused(response.status_code, response.headers.get("location"))
        return response

    def close(self) -> None:
        self._session.close()


class _NoRedirectsAsync(_NoRedirects):
    async def request(self, *args: Any, **kwargs: Any) -> Any:
        kwargs["allow_redirects"] = False
        response = await self._session.request(*args, **kwargs)
        if 300 <= response.status < 400:
            response.release()
            raise redirect_refused(response.status, response.headers.get("Location"))
        return response


class VoyageReranker:
    """Sync and async clients, both built once here; neither follows a redirect."""

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
        self._voyageai = voyageai
        self._requests = import_client("requests")
        self._aiohttp = import_client("aiohttp")
        self._requestor = import_client("voyageai.api_resources.api_requestor")
        # What the sessions are handed through; a voyageai without them could follow a
        # redirect, so it is not used at all.
        if not (hasattr(self._requestor, "_thread_context") and hasattr(voyageai, "aiosession")
                and callable(getattr(voyageai.aiosession, "set", None))):
            raise RerankerUnavailable(f"voyageai {getattr(voyageai, '__version__', '?')} takes no session pgsift "
                                      "can stop from following redirects")
        self._sessions = threading.local()

    @contextlib.contextmanager
    def _own_session(self) -> Iterator[None]:
        """For one sync call in this thread: voyageai's per-thread requests session is one of
        ours (per reranker and thread, so its connections are reused); the one it had comes
        back after."""
        session = getattr(self._sessions, "session", None)
        if session is None:
            session = self._sessions.session = _NoRedirects(self._requests.Session())
        context = self._requestor._thread_context
        saved = dict(vars(context))
        context.session = session
        context.session_create_time = time.time()   # young: voyageai does not replace it
        try:
            yield
        finally:
            vars(context).clear()
            vars(context).update(saved)

    def _sync(self, call: Callable[[], T]) -> T:
        with self._own_session():
            return call()

    async def _async(self, call: Callable[[], Any]) -> Any:
        # A session per call, as voyageai makes one itself when given none.
        async with self._aiohttp.ClientSession() as session:
            token = self._voyageai.aiosession.set(_NoRedirectsAsync(session))
            try:
                return await call()
            finally:
                self._voyageai.aiosession.reset(token)

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
        if isinstance(exc, RerankCallError):
            return exc
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
        client = self._with_timeout(self._client, timeout)
        try:
            result = self._sync(lambda: client.rerank(query, docs, model=self.model, top_k=top_n or len(docs),
                                                      truncation=self.truncation))
            return self._ranking(result)
        except Exception as exc:
            raise self._fault(exc) from exc

    async def arerank(self, query: str, documents: Sequence[str], top_n: int | None = None, *,
                      timeout: float | None = None) -> Ranking:
        docs = list(documents)
        client = self._with_timeout(self._aclient, timeout)
        try:
            result = await self._async(lambda: client.rerank(query, docs, model=self.model, top_k=top_n or len(docs),
                                                             truncation=self.truncation))
            return self._ranking(result)
        except Exception as exc:
            raise self._fault(exc) from exc
