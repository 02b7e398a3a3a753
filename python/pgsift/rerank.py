"""Reranking: the one call of a search that leaves the database.

All ranking logic stays in SQL. The client asks SQL which reranker a search
uses (`reranker_for`, no network), asks SQL for the candidate pool and its
texts (`fetch_pool_texts`, one statement), sends the pool here
(`rerank_search` / `rerank_pool`), and hands the scores back to SQL
(`RerankOutcome.finalize_scores()` -> `sift.finalize(scores => ...)`).

A rerank never fails a search and never shrinks it. Every fault (timeout,
connection refused, 429/5xx, other 4xx, malformed JSON, a response that does
not describe the pool it was sent, a partial ranking, a missing package or
secret, another tenant's reranker) becomes an outcome with `reranked=False`,
a `fault` code and a `reason`, logged on the `pgsift.rerank` logger; the
search keeps the order it already had.

Time: one deadline bounds a search's whole rerank (every attempt and every
backoff). Each attempt gets `min(attempt_timeout, time left)` as its HTTP
timeout and is also cut off from the outside (a worker thread for the sync
path, `asyncio.wait_for` for the async one), no attempt starts with less than
MIN_ATTEMPT_S left and no backoff sleeps past the deadline, so the worst case
is `deadline_s + GRACE_S` (3.05 s with the defaults), whatever the provider
does.

Secrets: a reranker row names, in `secret_ref`, the environment variable that
holds its API key (`PGSIFT_VOYAGE_KEY`, say), or a `scheme:path` key for a
custom resolver passed as `resolver=`. The key is read in this process when a
reranker is built; no table holds it.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import copy
import functools
import hashlib
import inspect
import json
import logging
import math
import numbers
import os
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Protocol, runtime_checkable

import psycopg
from psycopg.rows import class_row

from . import rerank_queries as q
from .errors import InvalidArgument, PgsiftError, translate

log = logging.getLogger("pgsift.rerank")

PROVIDERS = ("voyage", "cohere", "tei")
DEFAULT_MODELS = {"voyage": "rerank-2", "cohere": "rerank-v3.5", "tei": "tei"}
DEFAULT_DEADLINE_S = 3.0          # a search's whole rerank budget (sift.rerankers.deadline_ms)
DEFAULT_ATTEMPT_TIMEOUT_S = 2.0   # one HTTP attempt (sift.rerankers.timeout_ms)
DEFAULT_MAX_ATTEMPTS = 2
DEFAULT_CONTEXT_CHARS = 1500
MIN_ATTEMPT_S = 0.05    # no attempt starts with less time left than this
GRACE_S = 0.05          # what an attempt may overrun its timeout before it is cut off
BACKOFF_S = 0.1         # the first retry waits this long, then twice as long, within the deadline
MAX_POOL = 1000         # sift.match_count's upper bound

# Outcomes that made no call (not faults): reranking off, nothing to rerank.
SKIPS = ("off", "blank_query", "top_k", "too_few_candidates")
# Faults, each logged and each leaving the search's own order.
FAULTS = ("timeout", "connection_error", "rate_limited", "server_error", "client_error",
          "malformed_response", "invalid_ranking", "partial_ranking", "deadline_exceeded",
          "not_allowed", "no_reranker", "unavailable", "unexpected_error")


# -- errors ---------------------------------------------------------------------

class RerankError(PgsiftError):
    """A rerank could not be used. rerank_pool/rerank_search never raise it: they return
    an outcome carrying `fault` instead."""

    fault = "unexpected_error"


class RerankerNotAllowed(RerankError, PermissionError):
    """The reranker is not registered for this tenant: using it would bill another tenant
    and send this tenant's queries to its account. Register one for the tenant
    (sift.register_reranker(..., tenant => ...))."""

    fault = "not_allowed"


class RerankerUnavailable(RerankError, RuntimeError):
    """The reranker cannot be built here: its client package is not installed
    (pip install 'pgsift[rerank]'), its secret variable is unset, or it is misconfigured."""

    fault = "unavailable"


class InvalidRanking(RerankError, ValueError):
    """A response that does not describe the pool it was sent: an index out of range or
    given twice, a missing, NaN or infinite score."""

    fault = "invalid_ranking"


class RerankCallError(RerankError):
    """One failed attempt, classified: `fault` (timeout, connection_error, rate_limited,
    server_error, client_error, malformed_response, invalid_ranking) and whether another
    attempt may help (`retryable`)."""

    def __init__(self, fault: str, message: str, *, retryable: bool = False,
                 status: int | None = None, retry_after: float | None = None):
        super().__init__(message)
        self.fault = fault
        self.retryable = retryable
        self.status = status
        self.retry_after = retry_after


def _status_fault(status: int | None, message: str, retry_after: float | None = None) -> RerankCallError:
    if status == 429:
        return RerankCallError("rate_limited", f"HTTP 429: {message}", retryable=True,
                               status=status, retry_after=retry_after)
    if status is not None and status >= 500:
        return RerankCallError("server_error", f"HTTP {status}: {message}", retryable=True,
                               status=status, retry_after=retry_after)
    if status is not None and 400 <= status < 500:
        return RerankCallError("client_error", f"HTTP {status}: {message}", status=status)
    where = f" (HTTP {status})" if status else ""
    return RerankCallError("malformed_response", f"unreadable response{where}: {message}", status=status)


def _short(text: Any, limit: int = 200) -> str:
    s = " ".join(str(text).split())
    return s if len(s) <= limit else s[: limit - 3] + "..."


def _retry_after(headers: Any) -> float | None:
    try:
        value = float((headers or {}).get("retry-after") or (headers or {}).get("Retry-After"))
    except (TypeError, ValueError, AttributeError):
        return None
    return value if math.isfinite(value) and value >= 0 else None


# -- the protocol -----------------------------------------------------------------

class Ranking(list):
    """A reranker's answer: [(index into documents, score), ...] best first, plus what the
    provider reported for metering (`tokens`, `search_units`; None when it said nothing)."""

    def __init__(self, pairs: Any = (), *, tokens: int | None = None,
                 search_units: float | None = None):
        super().__init__(pairs)
        self.tokens = tokens
        self.search_units = search_units


@runtime_checkable
class Reranker(Protocol):
    """Scores (query, document) pairs. `rerank` returns [(index, score)] best first, at most
    `top_n` of them (None: every document). Implementations may take a keyword `timeout`
    (seconds, one attempt); rerank_pool passes it when they do. A local cross-encoder
    fits the same protocol (provider = "local")."""

    provider: str
    model: str

    def rerank(self, query: str, documents: Sequence[str],
               top_n: int | None = None) -> list[tuple[int, float]]: ...

    async def arerank(self, query: str, documents: Sequence[str],
                      top_n: int | None = None) -> list[tuple[int, float]]: ...


def _import(module: str) -> Any:
    try:
        return __import__(module)
    except ImportError as exc:
        raise RerankerUnavailable(
            f"the {module} package is not installed: pip install 'pgsift[rerank]'") from exc


def _loop_key() -> Any:
    return asyncio.get_running_loop()


class _PerLoop:
    """Async HTTP clients hold connections bound to one event loop: one client per loop,
    built the first time that loop reranks and dropped with the loop."""

    def __init__(self, build: Callable[[], Any]):
        self._build = build
        self._clients: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()

    def get(self) -> Any:
        loop = _loop_key()
        client = self._clients.get(loop)
        if client is None:
            client = self._clients[loop] = self._build()
        return client


class VoyageReranker:
    """Voyage AI's rerank endpoint (POST {base_url}/rerank: model, query, documents, top_k,
    truncation -> data[{index, relevance_score}], usage.total_tokens) through the official
    `voyageai` client, sync and async, both built once here."""

    provider = "voyage"

    def __init__(self, model: str = DEFAULT_MODELS["voyage"], *, api_key: str,
                 base_url: str | None = None, timeout_s: float = DEFAULT_ATTEMPT_TIMEOUT_S,
                 truncation: bool = True):
        voyageai = _import("voyageai")
        if not api_key:
            raise RerankerUnavailable("Voyage needs an API key")
        self.model = model
        self.truncation = truncation
        self.timeout_s = timeout_s
        # max_retries counts attempts in the voyageai client: 1 = no retry of its own (its
        # backoff sleeps 1-16 s and knows nothing of our deadline); rerank_pool retries.
        kwargs: dict[str, Any] = {"api_key": api_key, "max_retries": 1, "timeout": timeout_s}
        if base_url:
            kwargs["base_url"] = base_url.rstrip("/")
        self._client = voyageai.Client(**kwargs)
        self._aclient = voyageai.AsyncClient(**kwargs)
        self._errors = voyageai.error

    @staticmethod
    def _with_timeout(client: Any, timeout: float | None) -> Any:
        # The voyageai client takes its timeout at construction. A per-attempt timeout (what
        # is left of the deadline) goes through a shallow copy that shares everything else;
        # the HTTP session is the library's own (per thread for sync, per call for async).
        params = getattr(client, "_params", None)
        if timeout is None or not isinstance(params, dict) or "request_timeout" not in params:
            return client
        view = copy.copy(client)
        view._params = {**params, "request_timeout": timeout}
        return view

    def _fault(self, exc: Exception) -> RerankCallError:
        e = self._errors
        if isinstance(exc, e.Timeout):
            return RerankCallError("timeout", f"Voyage did not answer in time: {_short(exc)}", retryable=True)
        if isinstance(exc, e.APIConnectionError):
            return RerankCallError("connection_error", f"cannot reach Voyage: {_short(exc)}", retryable=True)
        if isinstance(exc, e.VoyageError):
            return _status_fault(getattr(exc, "http_status", None), _short(exc),
                                 _retry_after(getattr(exc, "headers", None)))
        return _shape_fault(exc)

    def _ranking(self, result: Any) -> Ranking:
        return Ranking([(r.index, r.relevance_score) for r in result.results],
                       tokens=_int_or_none(getattr(result, "total_tokens", None)))

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


class CohereReranker:
    """Cohere's v2 rerank (POST {base_url}/v2/rerank: model, query, documents, top_n ->
    results[{index, relevance_score}], meta.billed_units.search_units) through the official
    `cohere` client (ClientV2 / AsyncClientV2). Same protocol as Voyage: switching is a
    configuration change."""

    provider = "cohere"

    def __init__(self, model: str = DEFAULT_MODELS["cohere"], *, api_key: str,
                 base_url: str | None = None, timeout_s: float = DEFAULT_ATTEMPT_TIMEOUT_S,
                 max_tokens_per_doc: int | None = None):
        cohere = _import("cohere")
        if not api_key:
            raise RerankerUnavailable("Cohere needs an API key")
        self.model = model
        self.timeout_s = timeout_s
        self.max_tokens_per_doc = max_tokens_per_doc
        kwargs: dict[str, Any] = {"api_key": api_key, "timeout": timeout_s, "max_retries": 0}
        if base_url:
            kwargs["base_url"] = base_url.rstrip("/")
        self._client = cohere.ClientV2(**kwargs)
        self._aclients = _PerLoop(lambda: cohere.AsyncClientV2(**kwargs))
        self._httpx = _import("httpx")

    def _args(self, query: str, docs: list[str], top_n: int | None, timeout: float | None) -> dict:
        args: dict[str, Any] = {
            "model": self.model, "query": query, "documents": docs, "top_n": top_n or len(docs),
            # the client's own retries sleep without knowing our deadline: rerank_pool retries
            "request_options": {"timeout_in_seconds": timeout or self.timeout_s,
                                "timeout": timeout or self.timeout_s, "max_retries": 0},
        }
        if self.max_tokens_per_doc:
            args["max_tokens_per_doc"] = self.max_tokens_per_doc
        return args

    def _fault(self, exc: Exception) -> RerankCallError:
        httpx = self._httpx
        if isinstance(exc, httpx.TimeoutException):
            return RerankCallError("timeout", f"Cohere did not answer in time: {_short(exc)}", retryable=True)
        if isinstance(exc, httpx.TransportError):
            return RerankCallError("connection_error", f"cannot reach Cohere: {_short(exc)}", retryable=True)
        status = getattr(exc, "status_code", None)
        if status is not None or type(exc).__name__ in ("ApiError", "ParsingError"):
            return _status_fault(status, _short(getattr(exc, "body", None) or exc),
                                 _retry_after(getattr(exc, "headers", None)))
        return _shape_fault(exc)

    @staticmethod
    def _ranking(response: Any) -> Ranking:
        meta = getattr(response, "meta", None)
        billed = getattr(meta, "billed_units", None)
        tokens = getattr(meta, "tokens", None)
        return Ranking([(r.index, getattr(r, "relevance_score", None)) for r in response.results],
                       tokens=_int_or_none(getattr(tokens, "input_tokens", None)),
                       search_units=_float_or_none(getattr(billed, "search_units", None)))

    def rerank(self, query: str, documents: Sequence[str], top_n: int | None = None, *,
               timeout: float | None = None) -> Ranking:
        try:
            return self._ranking(self._client.rerank(**self._args(query, list(documents), top_n, timeout)))
        except Exception as exc:
            raise self._fault(exc) from exc

    async def arerank(self, query: str, documents: Sequence[str], top_n: int | None = None, *,
                      timeout: float | None = None) -> Ranking:
        try:
            response = await self._aclients.get().rerank(**self._args(query, list(documents), top_n, timeout))
            return self._ranking(response)
        except Exception as exc:
            raise self._fault(exc) from exc


class TEIReranker:
    """A Text Embeddings Inference server (POST {base_url}/rerank: query, texts, truncate ->
    [{index, score}]) over httpx, sync and async. Scores are TEI's default (sigmoid, in
    [0, 1]); the token count comes from its x-compute-tokens header when it sends one."""

    provider = "tei"

    def __init__(self, model: str = DEFAULT_MODELS["tei"], *, base_url: str,
                 api_key: str | None = None, timeout_s: float = DEFAULT_ATTEMPT_TIMEOUT_S,
                 truncate: bool = True):
        httpx = _import("httpx")
        if not base_url:
            raise RerankerUnavailable("a TEI reranker needs base_url")
        self.model = model
        self.timeout_s = timeout_s
        self.truncate = truncate
        self._httpx = httpx
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        base = base_url.rstrip("/")
        self._client = httpx.Client(base_url=base, headers=headers, timeout=timeout_s)
        self._aclients = _PerLoop(lambda: httpx.AsyncClient(base_url=base, headers=headers, timeout=timeout_s))

    def _body(self, query: str, docs: list[str]) -> dict:
        return {"query": query, "texts": docs, "truncate": self.truncate,
                "raw_scores": False, "return_text": False}

    def _fault(self, exc: Exception) -> RerankCallError:
        if isinstance(exc, RerankCallError):
            return exc
        if isinstance(exc, self._httpx.TimeoutException):
            return RerankCallError("timeout", f"TEI did not answer in time: {_short(exc)}", retryable=True)
        if isinstance(exc, self._httpx.TransportError):
            return RerankCallError("connection_error", f"cannot reach TEI: {_short(exc)}", retryable=True)
        return _shape_fault(exc)

    @staticmethod
    def _parse(response: Any, top_n: int | None) -> Ranking:
        if response.status_code >= 300:
            raise _status_fault(response.status_code, _short(response.text), _retry_after(response.headers))
        try:
            body = response.json()
        except ValueError as exc:
            raise RerankCallError("malformed_response", f"TEI answered with invalid JSON: {_short(exc)}") from exc
        if not isinstance(body, list):
            raise RerankCallError("malformed_response", f"TEI answered {type(body).__name__}, not a list")
        pairs = []
        for item in body:
            if not isinstance(item, Mapping):
                raise RerankCallError("malformed_response", f"TEI answered an item that is not an object: {_short(item)}")
            pairs.append((item.get("index"), item.get("score")))
        if top_n is not None:
            pairs = pairs[:top_n]   # TEI scores every text; it has no top_n
        return Ranking(pairs, tokens=_int_or_none(response.headers.get("x-compute-tokens")))

    def rerank(self, query: str, documents: Sequence[str], top_n: int | None = None, *,
               timeout: float | None = None) -> Ranking:
        docs = list(documents)
        try:
            response = self._client.post("/rerank", json=self._body(query, docs),
                                         timeout=timeout or self.timeout_s)
            return self._parse(response, top_n)
        except Exception as exc:
            raise self._fault(exc) from exc

    async def arerank(self, query: str, documents: Sequence[str], top_n: int | None = None, *,
                      timeout: float | None = None) -> Ranking:
        docs = list(documents)
        try:
            response = await self._aclients.get().post("/rerank", json=self._body(query, docs),
                                                       timeout=timeout or self.timeout_s)
            return self._parse(response, top_n)
        except Exception as exc:
            raise self._fault(exc) from exc


def _shape_fault(exc: Exception) -> RerankCallError:
    """A response the client library could not even read as a ranking."""
    if isinstance(exc, RerankCallError):
        return exc
    if isinstance(exc, InvalidRanking):
        return RerankCallError("invalid_ranking", str(exc))
    if isinstance(exc, IndexError):
        # voyageai looks documents[index] up while reading the response
        return RerankCallError("invalid_ranking", f"index out of range ({_short(exc)})")
    if isinstance(exc, AttributeError) and "score" in str(exc):
        return RerankCallError("invalid_ranking", f"score missing ({_short(exc)})")
    if isinstance(exc, (AttributeError, KeyError, TypeError, ValueError, json.JSONDecodeError)):
        return RerankCallError("malformed_response", f"unreadable response: {type(exc).__name__}: {_short(exc)}")
    return RerankCallError("unexpected_error", f"{type(exc).__name__}: {_short(exc)}")


def _int_or_none(value: Any) -> int | None:
    try:
        out = int(value)
    except (TypeError, ValueError):
        return None
    return out if out >= 0 else None


def _float_or_none(value: Any) -> float | None:
    try:
        out = float(value)
    except (TypeError, ValueError):
        return None
    return out if math.isfinite(out) and out >= 0 else None


# -- building rerankers from sift.rerankers rows ---------------------------------------

SecretResolver = Callable[[str], "str | None"]


def env_secret(ref: str) -> str | None:
    """The default resolver: secret_ref names an environment variable of this process
    ("PGSIFT_VOYAGE_KEY", or "env:PGSIFT_VOYAGE_KEY"). Other schemes need a resolver."""
    name = ref[4:] if ref.startswith("env:") else ref
    if ":" in name:
        return None
    return os.environ.get(name) or None


@dataclass(frozen=True)
class RerankerConfig:
    """A reranker as SQL chose it (a row of sift.reranker_for): which one runs for a search.
    `refused` says why it cannot run (the provider columns are then None)."""

    tenant: str
    alias: str | None
    provider: str | None
    model: str | None
    base_url: str | None = None
    secret_ref: str | None = None
    timeout_ms: int | None = 2000
    deadline_ms: int | None = 3000
    max_attempts: int | None = DEFAULT_MAX_ATTEMPTS
    context_chars: int | None = DEFAULT_CONTEXT_CHARS
    rerank_top_n: int | None = 50
    chosen_by: str | None = None
    refused: str | None = None
    reranker_id: int | None = None

    @property
    def usable(self) -> bool:
        """Switched on, named, allowed: a search with this config calls the reranker."""
        return self.refused is None and self.provider is not None


def make_reranker(config: RerankerConfig, resolver: SecretResolver | None = None) -> Reranker:
    """Build the reranker a config names (no cache: see get_reranker). Raises
    RerankerUnavailable (unknown provider, package missing, secret unset)."""
    if config.provider not in PROVIDERS:
        raise RerankerUnavailable(f"unknown reranker provider {config.provider!r}")
    key = _secret(config, resolver)
    timeout_s = (config.timeout_ms or DEFAULT_ATTEMPT_TIMEOUT_S * 1000) / 1000
    model = config.model or DEFAULT_MODELS[config.provider]
    if config.provider == "voyage":
        return VoyageReranker(model, api_key=key, base_url=config.base_url, timeout_s=timeout_s)
    if config.provider == "cohere":
        return CohereReranker(model, api_key=key, base_url=config.base_url, timeout_s=timeout_s)
    return TEIReranker(model, base_url=config.base_url, api_key=key, timeout_s=timeout_s)


def _secret(config: RerankerConfig, resolver: SecretResolver | None) -> str | None:
    if not config.secret_ref:
        if config.provider in ("voyage", "cohere"):
            raise RerankerUnavailable(f"reranker {config.alias!r} ({config.provider}) has no secret_ref")
        return None
    try:
        key = (resolver or env_secret)(config.secret_ref)
    except Exception as exc:  # a custom resolver's failure is this reranker's, not the search's
        raise RerankerUnavailable(f"resolving the secret of reranker {config.alias!r} failed: "
                                  f"{type(exc).__name__}") from exc
    if not key:
        raise RerankerUnavailable(
            f"the API key of reranker {config.alias!r} is not set: set the environment variable "
            f"{config.secret_ref} in the client process (or pass a resolver)")
    return key


_CACHE: OrderedDict[tuple, Reranker] = OrderedDict()
_CACHE_LOCK = threading.Lock()
_CACHE_SIZE = 64


def get_reranker(config: RerankerConfig, resolver: SecretResolver | None = None) -> Reranker:
    """The reranker for a config, built once and reused by every search (keyed by its
    settings and a fingerprint of its key, so a rotated key builds a new one)."""
    secret = _secret(config, resolver)
    fingerprint = hashlib.sha256(secret.encode()).hexdigest()[:16] if secret else None
    key = (config.provider, config.model, config.base_url, config.timeout_ms, config.secret_ref,
           fingerprint, id(resolver) if resolver else None)
    with _CACHE_LOCK:
        hit = _CACHE.get(key)
        if hit is not None:
            _CACHE.move_to_end(key)
            return hit
    built = make_reranker(config, (lambda _ref: secret) if secret else resolver)
    with _CACHE_LOCK:
        hit = _CACHE.setdefault(key, built)
        _CACHE.move_to_end(key)
        while len(_CACHE) > _CACHE_SIZE:
            _CACHE.popitem(last=False)
        return hit


def clear_reranker_cache() -> None:
    with _CACHE_LOCK:
        _CACHE.clear()


# -- text helpers -------------------------------------------------------------------

def contextualize(context: str | None, text: str) -> str:
    """The text a reranker scores: the chunk's context header, a blank line, its text (the
    text alone without a header). sift.contextualize is the SQL twin."""
    if context is None or not context.strip():
        return text
    return f"{context}\n\n{text}"


def _conversation_text(conversation: Any) -> str:
    if conversation is None:
        return ""
    if isinstance(conversation, str):
        return conversation
    turns = []
    for turn in conversation:
        if isinstance(turn, Mapping):
            role, content = turn.get("role"), turn.get("content")
            turns.append(f"{role}: {content}" if role else str(content or ""))
        else:
            turns.append(str(turn))
    return "\n".join(t for t in turns if t)


def build_query(query: str, conversation: Any = None, limit: int = DEFAULT_CONTEXT_CHARS) -> str:
    """The reranker's query: the tail of the conversation (at most `limit` characters; a
    string, or turns as strings or {"role", "content"} dicts, joined by newlines), a blank
    line, then the query, which is never clipped. Nothing else reads the conversation."""
    text = _conversation_text(conversation)
    if limit <= 0 or not text.strip():
        return query
    return f"{text[-limit:]}\n\n{query}"


def validate(result: Any, n_docs: int) -> list[tuple[int, float]]:
    """The (index, score) pairs of a ranking, checked against the pool it was sent: every
    index an integer in [0, n_docs) given once, every score a finite number. Raises
    InvalidRanking naming the first problem."""
    if result is None or isinstance(result, (str, bytes, Mapping)):
        raise InvalidRanking(f"the ranking is {type(result).__name__}, not a list of (index, score)")
    try:
        items = list(result)
    except TypeError as exc:
        raise InvalidRanking(f"the ranking is {type(result).__name__}, not a list") from exc
    out: list[tuple[int, float]] = []
    seen: set[int] = set()
    for pos, item in enumerate(items):
        if isinstance(item, Mapping):
            index = item.get("index")
            score = item.get("relevance_score", item.get("score"))
        else:
            try:
                index, score = item
            except (TypeError, ValueError) as exc:
                raise InvalidRanking(f"item {pos} is not an (index, score) pair") from exc
        if isinstance(index, bool) or not isinstance(index, numbers.Integral):
            raise InvalidRanking(f"item {pos}: index {index!r} is not an integer")
        index = int(index)
        if not 0 <= index < n_docs:
            raise InvalidRanking(f"index {index} out of range for {n_docs} documents")
        if index in seen:
            raise InvalidRanking(f"duplicate index {index}")
        if score is None:
            raise InvalidRanking(f"score missing for index {index}")
        if isinstance(score, bool) or not isinstance(score, numbers.Real):
            raise InvalidRanking(f"score for index {index} is not a number: {score!r}")
        score = float(score)
        if math.isnan(score):
            raise InvalidRanking(f"score for index {index} is NaN")
        if math.isinf(score):
            raise InvalidRanking(f"score for index {index} is infinite")
        seen.add(index)
        out.append((index, score))
    return out


# -- the outcome ----------------------------------------------------------------------

@dataclass(frozen=True)
class RerankOutcome:
    """What reranking did to one search's pool (pool index = place in the fused pool).

    scores[i]: the provider's score for pool item i, None when it was not scored (every
    item when nothing was reranked). reranked: every item the provider was asked for came
    back valid, so the reranker's order holds. partial: only some came back: those lead in
    their order and the unranked remainder follows in pool order (reranked is False and
    fault is "partial_ranking"). fault: None, or one of FAULTS; skip: why no call was made
    (one of SKIPS), else None. called: a request left the process (metered). alias and
    chosen_by ("collection" or "tenant_default") say which reranker scored the pool."""

    scores: tuple[float | None, ...]
    reranked: bool = False
    partial: bool = False
    reason: str = ""
    fault: str | None = None
    skip: str | None = None
    called: bool = False
    provider: str | None = None
    model: str | None = None
    alias: str | None = None
    chosen_by: str | None = None
    latency_ms: float = 0.0
    tokens: int | None = None
    search_units: float | None = None
    attempts: int = 0
    documents: int = 0

    @classmethod
    def unchanged(cls, n: int, *, skip: str | None = None, fault: str | None = None,
                  reason: str = "", **info: Any) -> RerankOutcome:
        return cls(scores=(None,) * n, skip=skip, fault=fault, reason=reason, **info)

    @property
    def applied(self) -> bool:
        """Whether the reranker's scores change the order (reranked or partial)."""
        return any(s is not None for s in self.scores)

    def order(self) -> list[int]:
        """Pool indices in the order the scores give: scored ones best first (ties: pool
        order), then the unscored ones in pool order. No scores: the pool order."""
        scored = sorted((i for i, s in enumerate(self.scores) if s is not None),
                        key=lambda i: (-self.scores[i], i))
        return scored + [i for i, s in enumerate(self.scores) if s is None]

    def finalize_scores(self) -> list[float] | None:
        """Scores for sift.finalize(chunk_ids => pool ids, scores => these), one per pool item,
        each finite and in (0, 1e100]; None when nothing was scored (pass the fused scores, or
        none, as without a reranker). A scored item keeps the provider's score (scores below
        zero or above 1e100, i.e. logits, go through a sigmoid first; a floor of 1e-9 keeps
        room below the lowest); an unscored item (partial ranking) gets a score below the
        lowest scored one, decreasing in pool order: lowest x (m - j) / (m + 1) for the
        j-th of m. finalize then orders them exactly as order() does (ties among scored
        items: by chunk id)."""
        scored = {i: s for i, s in enumerate(self.scores) if s is not None}
        if not scored:
            return None
        if min(scored.values()) < 0 or max(scored.values()) > 1e100:
            scored = {i: 1 / (1 + math.exp(-max(min(s, 700.0), -700.0))) for i, s in scored.items()}
        rest = [i for i, s in enumerate(self.scores) if s is None]
        if rest and min(scored.values()) < 1e-9:
            shift = 1e-9 - min(scored.values())
            scored = {i: s + shift for i, s in scored.items()}
        lowest = min(scored.values())
        m = len(rest)
        for j, i in enumerate(rest):
            scored[i] = lowest * (m - j) / (m + 1)
        return [scored[i] for i in range(len(self.scores))]

    def rerank_scores(self, chunk_ids: Sequence[int]) -> dict[int, float]:
        """{chunk_id: provider score} for the scored pool items (chunk_ids in pool order)."""
        return {cid: s for cid, s in zip(chunk_ids, self.scores) if s is not None}


# -- rerank_pool: one search's rerank, never raising ---------------------------------------

@dataclass
class _Plan:
    query: str
    docs: list[str]
    top_n: int | None
    expected: int
    deadline_s: float
    attempt_timeout_s: float
    max_attempts: int
    info: dict = field(default_factory=dict)


def _plan(reranker: Any, query: str, context: Any, pool_texts: Sequence[str], top_n: int | None,
          deadline_s: float | None, context_chars: int | None, attempt_timeout_s: float | None,
          max_attempts: int | None, alias: str | None) -> _Plan | RerankOutcome:
    docs = ["" if t is None else str(t) for t in pool_texts]
    n = len(docs)
    info = {"provider": getattr(reranker, "provider", None), "model": getattr(reranker, "model", None),
            "alias": alias}
    if reranker is None:
        return RerankOutcome.unchanged(n, skip="off", reason="no reranker", **info)
    if not isinstance(query, str) or not query.strip():
        return RerankOutcome.unchanged(n, skip="blank_query", reason="blank query: no rerank call", **info)
    if top_n is not None and top_n <= 0:
        return RerankOutcome.unchanged(n, skip="top_k", reason="top_k <= 0: no rerank call", **info)
    if n < 2:
        return RerankOutcome.unchanged(n, skip="too_few_candidates",
                                       reason=f"{n} candidate(s): nothing to rerank", **info)
    deadline = DEFAULT_DEADLINE_S if deadline_s is None else float(deadline_s)
    if not math.isfinite(deadline) or deadline <= 0:
        deadline = DEFAULT_DEADLINE_S
    per_attempt = deadline if attempt_timeout_s is None else max(float(attempt_timeout_s), MIN_ATTEMPT_S)
    limit = DEFAULT_CONTEXT_CHARS if context_chars is None else context_chars
    return _Plan(query=build_query(query, context, limit), docs=docs, top_n=top_n,
                 expected=n if top_n is None else min(top_n, n), deadline_s=deadline,
                 attempt_timeout_s=min(per_attempt, deadline),
                 max_attempts=max(1, int(max_attempts or DEFAULT_MAX_ATTEMPTS)), info=info)


@functools.lru_cache(maxsize=256)
def _takes_timeout(kind: type, method: str) -> bool:
    try:
        params = inspect.signature(getattr(kind, method)).parameters.values()
    except (TypeError, ValueError, AttributeError):
        return False
    return any(p.name == "timeout" or p.kind is inspect.Parameter.VAR_KEYWORD for p in params)


def _kwargs(reranker: Any, method: str, timeout: float) -> dict:
    return {"timeout": timeout} if _takes_timeout(type(reranker), method) else {}


def _classify(exc: BaseException) -> RerankCallError:
    if isinstance(exc, RerankCallError):
        return exc
    if isinstance(exc, RerankError):
        return RerankCallError(exc.fault, str(exc))
    if isinstance(exc, (TimeoutError, asyncio.TimeoutError, concurrent.futures.TimeoutError)):
        return RerankCallError("timeout", "no answer within the attempt's time", retryable=True)
    return _shape_fault(exc) if isinstance(exc, Exception) else RerankCallError(
        "unexpected_error", type(exc).__name__)


def _backoff(error: RerankCallError, attempt: int, left: float) -> float | None:
    """Seconds to wait before the next attempt, or None when there is no time for one."""
    wait = BACKOFF_S * 2 ** (attempt - 1)
    if error.retry_after is not None:
        wait = max(wait, error.retry_after)
    return wait if wait + MIN_ATTEMPT_S <= left else None


def _finish(plan: _Plan, ranking: Any, started: float, attempts: int) -> RerankOutcome:
    latency = (time.monotonic() - started) * 1000
    n = len(plan.docs)
    info = dict(plan.info, called=True, latency_ms=latency, attempts=attempts, documents=n,
                tokens=getattr(ranking, "tokens", None), search_units=getattr(ranking, "search_units", None))
    try:
        pairs = validate(ranking, n)
    except InvalidRanking as exc:
        return _failed(plan, RerankCallError("invalid_ranking", str(exc)), info)
    scores: list[float | None] = [None] * n
    for i, s in pairs:
        scores[i] = s
    if len(pairs) < plan.expected:
        reason = (f"partial ranking: the reranker ranked {len(pairs)} of {plan.expected} candidates; "
                  f"the other {n - len(pairs)} follow in pool order")
        outcome = RerankOutcome(scores=tuple(scores), partial=True, fault="partial_ranking",
                                reason=reason, **info)
        _log_fault(outcome)
        return outcome
    return RerankOutcome(scores=tuple(scores), reranked=True, **info)


def _failed(plan: _Plan, error: RerankCallError, info: dict) -> RerankOutcome:
    outcome = RerankOutcome.unchanged(len(plan.docs), fault=error.fault, reason=str(error), **info)
    _log_fault(outcome)
    return outcome


def _log_fault(outcome: RerankOutcome) -> None:
    log.warning("rerank fell back to the pool order: %s: %s (reranker=%s provider=%s model=%s "
                "documents=%d attempts=%d latency_ms=%.0f)", outcome.fault, outcome.reason,
                outcome.alias, outcome.provider, outcome.model, outcome.documents,
                outcome.attempts, outcome.latency_ms)


_EXECUTOR: concurrent.futures.ThreadPoolExecutor | None = None
_EXECUTOR_LOCK = threading.Lock()


def _executor() -> concurrent.futures.ThreadPoolExecutor:
    # Sync attempts run here so the caller can stop waiting at the deadline even when a
    # server trickles bytes slower than the HTTP read timeout; an abandoned attempt ends on
    # its own HTTP timeout.
    global _EXECUTOR
    with _EXECUTOR_LOCK:
        if _EXECUTOR is None:
            _EXECUTOR = concurrent.futures.ThreadPoolExecutor(max_workers=32, thread_name_prefix="pgsift-rerank")
        return _EXECUTOR


def _give_up(plan: _Plan, last: RerankCallError | None, started: float, attempts: int) -> RerankOutcome:
    info = dict(plan.info, called=attempts > 0, latency_ms=(time.monotonic() - started) * 1000,
                attempts=attempts, documents=len(plan.docs))
    if last is None:
        error = RerankCallError("deadline_exceeded",
                                f"the deadline of {plan.deadline_s:.2f}s left no time for a call")
    elif last.retryable and attempts < plan.max_attempts:
        error = RerankCallError(last.fault, f"{last} (after {attempts} attempt(s): the deadline of "
                                f"{plan.deadline_s:.2f}s left no time for another)")
    elif attempts > 1:
        error = RerankCallError(last.fault, f"{last} (after {attempts} attempts)")
    else:
        error = last
    return _failed(plan, error, info)


def _bad_arguments(exc: Exception, pool_texts: Any, alias: str | None) -> RerankOutcome:
    try:
        n = len(pool_texts)
    except Exception:  # noqa: BLE001
        n = 0
    outcome = RerankOutcome.unchanged(n, fault="unexpected_error", alias=alias,
                                      reason=f"bad rerank arguments: {type(exc).__name__}: {_short(exc)}")
    _log_fault(outcome)
    return outcome


def rerank_pool(reranker: Reranker | None, query: str, context: Any, pool_texts: Sequence[str],
                top_n: int | None = None, deadline_s: float | None = DEFAULT_DEADLINE_S,
                context_chars: int | None = DEFAULT_CONTEXT_CHARS, *,
                attempt_timeout_s: float | None = None, max_attempts: int | None = DEFAULT_MAX_ATTEMPTS,
                alias: str | None = None) -> RerankOutcome:
    """Rerank one search's pool; never raises. `pool_texts` are the candidates' texts in pool
    order (contextualized: sift.rerank_texts / contextualize); `context` is the conversation,
    whose tail (context_chars) goes before the query; `top_n` is how many the provider
    returns (None: all, the normal case). One HTTP request per attempt for the whole pool;
    attempts (at most max_attempts, on timeouts, connection errors, 429 and 5xx) and their
    backoffs all fit in deadline_s: the call returns within deadline_s + GRACE_S."""
    try:
        plan = _plan(reranker, query, context, pool_texts, top_n, deadline_s, context_chars,
                     attempt_timeout_s, max_attempts, alias)
    except Exception as exc:  # noqa: BLE001 - a bad argument must not fail the search either
        return _bad_arguments(exc, pool_texts, alias)
    if isinstance(plan, RerankOutcome):
        log.debug("no rerank: %s", plan.reason)
        return plan
    started = time.monotonic()
    end = started + plan.deadline_s
    last: RerankCallError | None = None
    attempts = 0
    while attempts < plan.max_attempts:
        left = end - time.monotonic()
        if left < MIN_ATTEMPT_S:
            break
        timeout = min(plan.attempt_timeout_s, left)
        attempts += 1
        try:
            future = _executor().submit(reranker.rerank, plan.query, plan.docs, plan.top_n,
                                        **_kwargs(reranker, "rerank", timeout))
            try:
                ranking = future.result(timeout=timeout + GRACE_S)
            finally:
                future.cancel()   # never send it late (a busy pool had not started it yet)
            return _finish(plan, ranking, started, attempts)
        except BaseException as exc:  # noqa: BLE001 - every fault becomes an outcome
            if isinstance(exc, (KeyboardInterrupt, SystemExit)):
                raise
            last = _classify(exc)
        if not last.retryable or attempts >= plan.max_attempts:
            break
        wait = _backoff(last, attempts, end - time.monotonic())
        if wait is None:
            break
        time.sleep(wait)
    return _give_up(plan, last, started, attempts)


async def arerank_pool(reranker: Reranker | None, query: str, context: Any, pool_texts: Sequence[str],
                       top_n: int | None = None, deadline_s: float | None = DEFAULT_DEADLINE_S,
                       context_chars: int | None = DEFAULT_CONTEXT_CHARS, *,
                       attempt_timeout_s: float | None = None,
                       max_attempts: int | None = DEFAULT_MAX_ATTEMPTS,
                       alias: str | None = None) -> RerankOutcome:
    """Async twin of rerank_pool (the reranker's arerank; a reranker with only a sync
    rerank runs in a worker thread). Never raises; returns within deadline_s + GRACE_S."""
    try:
        plan = _plan(reranker, query, context, pool_texts, top_n, deadline_s, context_chars,
                     attempt_timeout_s, max_attempts, alias)
    except Exception as exc:  # noqa: BLE001 - a bad argument must not fail the search either
        return _bad_arguments(exc, pool_texts, alias)
    if isinstance(plan, RerankOutcome):
        log.debug("no rerank: %s", plan.reason)
        return plan
    started = time.monotonic()
    end = started + plan.deadline_s
    last: RerankCallError | None = None
    attempts = 0
    native = inspect.iscoroutinefunction(getattr(reranker, "arerank", None))
    while attempts < plan.max_attempts:
        left = end - time.monotonic()
        if left < MIN_ATTEMPT_S:
            break
        timeout = min(plan.attempt_timeout_s, left)
        attempts += 1
        try:
            if native:
                call = reranker.arerank(plan.query, plan.docs, plan.top_n,
                                        **_kwargs(reranker, "arerank", timeout))
            else:
                call = asyncio.get_running_loop().run_in_executor(
                    _executor(), functools.partial(reranker.rerank, plan.query, plan.docs, plan.top_n,
                                                   **_kwargs(reranker, "rerank", timeout)))
            ranking = await asyncio.wait_for(call, timeout + GRACE_S)
            return _finish(plan, ranking, started, attempts)
        except asyncio.CancelledError:
            raise
        except BaseException as exc:  # noqa: BLE001
            if isinstance(exc, (KeyboardInterrupt, SystemExit)):
                raise
            last = _classify(exc)
        if not last.retryable or attempts >= plan.max_attempts:
            break
        wait = _backoff(last, attempts, end - time.monotonic())
        if wait is None:
            break
        await asyncio.sleep(wait)
    return _give_up(plan, last, started, attempts)


# -- rerank_search: the seam Client.search calls ---------------------------------------------

def pool_size(top_k: int, config: RerankerConfig | None) -> int:
    """How many candidates to ask sift.candidates for: max(top_k, rerank_top_n) when the
    reranker will run, else top_k (capped at 1000, sift.match_count's bound)."""
    if config is None or not config.usable or top_k <= 0:
        return top_k
    return min(max(top_k, config.rerank_top_n or 0), MAX_POOL)


def _gate(config: RerankerConfig | None, tenant: str, n: int, top_k: int,
          query: str) -> RerankOutcome | None:
    if config is None:
        return RerankOutcome.unchanged(n, skip="off", reason="reranking is off for these collections")
    info = {"alias": config.alias, "provider": config.provider, "model": config.model,
            "chosen_by": config.chosen_by}
    if config.refused:
        fault = "not_allowed" if config.chosen_by == "refused" else "no_reranker"
        outcome = RerankOutcome.unchanged(n, fault=fault, reason=config.refused, **info)
        _log_fault(outcome)
        return outcome
    if config.tenant != tenant:
        error = RerankerNotAllowed(
            f"reranker {config.alias!r} belongs to tenant {config.tenant!r}, not to tenant "
            f"{tenant!r}: refused (it would bill tenant {config.tenant!r} and send this tenant's "
            "queries to its account)")
        outcome = RerankOutcome.unchanged(n, fault=error.fault, reason=str(error), **info)
        _log_fault(outcome)
        return outcome
    if top_k <= 0:
        return RerankOutcome.unchanged(n, skip="top_k", reason="top_k <= 0: no rerank call", **info)
    if not isinstance(query, str) or not query.strip():
        return RerankOutcome.unchanged(n, skip="blank_query", reason="blank query: no rerank call", **info)
    if n < 2:
        return RerankOutcome.unchanged(n, skip="too_few_candidates",
                                       reason=f"{n} candidate(s): nothing to rerank", **info)
    return None


def _resolve(config: RerankerConfig, resolver: SecretResolver | None, n: int) -> Reranker | RerankOutcome:
    try:
        return get_reranker(config, resolver)
    except Exception as exc:  # noqa: BLE001 - a reranker that cannot be built only loses the rerank
        fault = exc.fault if isinstance(exc, RerankError) else "unavailable"
        outcome = RerankOutcome.unchanged(n, fault=fault, reason=f"{type(exc).__name__}: {exc}",
                                          alias=config.alias, provider=config.provider,
                                          model=config.model, chosen_by=config.chosen_by)
        _log_fault(outcome)
        return outcome


def _search_args(config: RerankerConfig, deadline_s: float | None, context_chars: int | None) -> dict:
    return {
        "deadline_s": deadline_s if deadline_s is not None else (config.deadline_ms or 3000) / 1000,
        "context_chars": context_chars if context_chars is not None else config.context_chars,
        "attempt_timeout_s": (config.timeout_ms or 2000) / 1000,
        "max_attempts": config.max_attempts,
        "alias": config.alias,
    }


def rerank_search(config: RerankerConfig | None, *, tenant: str, query: str, pool_texts: Sequence[str],
                  top_k: int, conversation: Any = None, deadline_s: float | None = None,
                  context_chars: int | None = None,
                  resolver: SecretResolver | None = None) -> RerankOutcome:
    """Rerank a search's pool with the reranker SQL chose (reranker_for); never raises.
    No call when config is None, refused or another tenant's (logged), the query is blank,
    top_k <= 0 or the pool has fewer than 2 candidates. deadline_s (default: the
    reranker's deadline_ms) bounds the whole call."""
    n = len(pool_texts)
    gated = _gate(config, tenant, n, top_k, query)
    if gated is not None:
        return gated
    reranker = _resolve(config, resolver, n)
    if isinstance(reranker, RerankOutcome):
        return reranker
    outcome = rerank_pool(reranker, query, conversation, pool_texts, None,
                          **_search_args(config, deadline_s, context_chars))
    return replace(outcome, alias=config.alias, chosen_by=config.chosen_by)


async def arerank_search(config: RerankerConfig | None, *, tenant: str, query: str,
                         pool_texts: Sequence[str], top_k: int, conversation: Any = None,
                         deadline_s: float | None = None, context_chars: int | None = None,
                         resolver: SecretResolver | None = None) -> RerankOutcome:
    """Async twin of rerank_search."""
    n = len(pool_texts)
    gated = _gate(config, tenant, n, top_k, query)
    if gated is not None:
        return gated
    reranker = _resolve(config, resolver, n)
    if isinstance(reranker, RerankOutcome):
        return reranker
    outcome = await arerank_pool(reranker, query, conversation, pool_texts, None,
                                 **_search_args(config, deadline_s, context_chars))
    return replace(outcome, alias=config.alias, chosen_by=config.chosen_by)


# -- test_connection -------------------------------------------------------------------

PROBE_QUERY = "How many days does a refund take to reach my account?"
# (label, passage), sent in this order so that an endpoint echoing its input fails.
PROBE = (
    ("irrelevant", "The office cafeteria serves lunch from noon to two, with a vegetarian dish every day."),
    ("relevant", "Refunds reach your account within five business days after we receive the returned item."),
    ("near_miss", "You can return an item within thirty days of delivery if it is unused and in its box."),
)
PROBE_ORDER = ("relevant", "near_miss", "irrelevant")


@dataclass(frozen=True)
class ConnectionCheck:
    """test_connection's report: ok (the call worked), order_ok (relevant > near miss >
    irrelevant came back), latency, the score range and each passage's score."""

    ok: bool
    order_ok: bool
    latency_ms: float
    min_score: float | None
    max_score: float | None
    order: tuple[str, ...]
    scores: dict[str, float]
    provider: str | None
    model: str | None
    error: str | None = None
    tokens: int | None = None


def _check(outcome: RerankOutcome) -> ConnectionCheck:
    scores = {label: s for (label, _), s in zip(PROBE, outcome.scores) if s is not None}
    order = tuple(PROBE[i][0] for i in outcome.order()) if outcome.reranked else ()
    return ConnectionCheck(
        ok=outcome.reranked, order_ok=outcome.reranked and order == PROBE_ORDER,
        latency_ms=outcome.latency_ms, min_score=min(scores.values()) if scores else None,
        max_score=max(scores.values()) if scores else None, order=order, scores=scores,
        provider=outcome.provider, model=outcome.model,
        error=None if outcome.reranked else f"{outcome.fault}: {outcome.reason}", tokens=outcome.tokens)


def test_connection(reranker: Reranker, *, timeout_s: float = 10.0) -> ConnectionCheck:
    """Score three passages with an obvious order (relevant, near miss, irrelevant) and
    report latency, the score range and whether the order came back right. Never raises."""
    return _check(rerank_pool(reranker, PROBE_QUERY, None, [p for _, p in PROBE], None,
                              deadline_s=timeout_s, max_attempts=1))


async def atest_connection(reranker: Reranker, *, timeout_s: float = 10.0) -> ConnectionCheck:
    return _check(await arerank_pool(reranker, PROBE_QUERY, None, [p for _, p in PROBE], None,
                                     deadline_s=timeout_s, max_attempts=1))


test_connection.__test__ = False   # not a pytest test, whoever imports it
atest_connection.__test__ = False


# -- SQL: which reranker, the pool's texts, metering, administration ------------------------

def _translate(exc: psycopg.Error) -> Exception:
    if getattr(exc, "sqlstate", None) == "SF008":
        diag = exc.diag
        message = diag.message_primary or str(exc)
        return RerankerNotAllowed(f"{message} ({diag.message_hint})" if diag.message_hint else message)
    return translate(exc)


def _config_row(tenant: str, collections: str | Sequence[str]) -> dict:
    names = [collections] if isinstance(collections, str) else list(collections)
    if not names or not all(isinstance(n, str) for n in names):
        raise InvalidArgument("collections must be a name or a non-empty list of names")
    return {"tenant": tenant, "collections": names}


def reranker_for(conn: psycopg.Connection, tenant: str,
                 collections: str | Sequence[str]) -> RerankerConfig | None:
    """The reranker a search over these collections uses (None: reranking is off). One
    read-only statement, no network; config.refused says why one cannot run."""
    try:
        rows = conn.cursor(row_factory=class_row(RerankerConfig)).execute(
            q.RERANKER_FOR, _config_row(tenant, collections)).fetchall()
    except psycopg.Error as exc:
        raise _translate(exc) from exc
    return rows[0] if rows else None


async def areranker_for(conn: psycopg.AsyncConnection, tenant: str,
                        collections: str | Sequence[str]) -> RerankerConfig | None:
    try:
        cur = conn.cursor(row_factory=class_row(RerankerConfig))
        await cur.execute(q.RERANKER_FOR, _config_row(tenant, collections))
        rows = await cur.fetchall()
    except psycopg.Error as exc:
        raise _translate(exc) from exc
    return rows[0] if rows else None


def reranking_enabled(conn: psycopg.Connection, tenant: str, collections: str | Sequence[str]) -> bool:
    """Whether a search over these collections would call a reranker (no network call)."""
    config = reranker_for(conn, tenant, collections)
    return config is not None and config.usable


async def areranking_enabled(conn: psycopg.AsyncConnection, tenant: str,
                             collections: str | Sequence[str]) -> bool:
    config = await areranker_for(conn, tenant, collections)
    return config is not None and config.usable


def _align(rows: list, chunk_ids: Sequence[int]) -> list[str]:
    texts = [""] * len(chunk_ids)   # a chunk deleted since the pool was read scores as empty
    for ord_, _cid, text in rows:
        texts[ord_ - 1] = text
    return texts


def fetch_pool_texts(conn: psycopg.Connection, tenant: str, chunk_ids: Sequence[int]) -> list[str]:
    """The pool's contextualized texts, aligned with chunk_ids, in ONE statement
    (sift.rerank_texts), never one per candidate."""
    ids = [int(i) for i in chunk_ids]
    try:
        rows = conn.execute(q.RERANK_TEXTS, {"chunk_ids": ids, "tenant": tenant}).fetchall()
    except psycopg.Error as exc:
        raise _translate(exc) from exc
    return _align(rows, ids)


async def afetch_pool_texts(conn: psycopg.AsyncConnection, tenant: str,
                            chunk_ids: Sequence[int]) -> list[str]:
    ids = [int(i) for i in chunk_ids]
    try:
        cur = await conn.execute(q.RERANK_TEXTS, {"chunk_ids": ids, "tenant": tenant})
        rows = await cur.fetchall()
    except psycopg.Error as exc:
        raise _translate(exc) from exc
    return _align(rows, ids)


def _usage_params(tenant: str, outcome: RerankOutcome) -> dict:
    return {
        "tenant": tenant, "reranker_alias": outcome.alias, "provider": outcome.provider or "unknown",
        "model": outcome.model or "unknown", "documents": outcome.documents,
        "latency_ms": outcome.latency_ms, "ok": outcome.reranked,
        "tokens": outcome.tokens if outcome.reranked else None,
        "search_units": outcome.search_units if outcome.reranked else None,
        "attempts": max(outcome.attempts, 1),
        "error": None if outcome.reranked else f"{outcome.fault}: {outcome.reason}"[:2000],
    }


def record_usage(conn: psycopg.Connection, tenant: str, outcome: RerankOutcome) -> int | None:
    """Meter a rerank call in sift.rerank_usage (its own transaction or savepoint): billed
    when it succeeded, recorded as failed (never billed) otherwise; nothing when no call
    was made. Never raises (a read-only replica, say): logs and returns None."""
    if not outcome.called:
        return None
    try:
        with conn.transaction():
            return conn.execute(q.RECORD_USAGE, _usage_params(tenant, outcome)).fetchone()[0]
    except psycopg.Error as exc:
        log.warning("rerank usage not recorded: %s", _short(exc))
        return None


async def arecord_usage(conn: psycopg.AsyncConnection, tenant: str, outcome: RerankOutcome) -> int | None:
    if not outcome.called:
        return None
    try:
        async with conn.transaction():
            cur = await conn.execute(q.RECORD_USAGE, _usage_params(tenant, outcome))
            return (await cur.fetchone())[0]
    except psycopg.Error as exc:
        log.warning("rerank usage not recorded: %s", _short(exc))
        return None


def register_reranker(conn: psycopg.Connection, alias: str, provider: str, *, tenant: str = "default",
                      model: str | None = None, base_url: str | None = None,
                      secret_ref: str | None = None, timeout_ms: int = 2000, deadline_ms: int = 3000,
                      max_attempts: int = DEFAULT_MAX_ATTEMPTS,
                      context_chars: int = DEFAULT_CONTEXT_CHARS, is_default: bool = False) -> dict:
    """sift.register_reranker: secret_ref is the NAME of the variable holding the key."""
    params = {"alias": alias, "provider": provider, "tenant": tenant, "model": model,
              "base_url": base_url, "secret_ref": secret_ref, "timeout_ms": timeout_ms,
              "deadline_ms": deadline_ms, "max_attempts": max_attempts,
              "context_chars": context_chars, "is_default": is_default}
    try:
        with conn.transaction():
            cur = conn.execute(q.REGISTER_RERANKER, params)
            names = [d.name for d in cur.description]
            return dict(zip(names, cur.fetchone()))
    except psycopg.Error as exc:
        raise _translate(exc) from exc


def drop_reranker(conn: psycopg.Connection, alias: str, *, tenant: str = "default") -> bool:
    try:
        with conn.transaction():
            return conn.execute(q.DROP_RERANKER, {"alias": alias, "tenant": tenant}).fetchone()[0]
    except psycopg.Error as exc:
        raise _translate(exc) from exc


def set_collection_reranker(conn: psycopg.Connection, collection: str, *, tenant: str = "default",
                            alias: str | None = None, enabled: bool | None = None,
                            rerank_top_n: int | None = None,
                            reset: Sequence[str] | None = None) -> dict:
    """sift.set_collection_reranker; RerankerNotAllowed (SF008) for an alias not registered
    for the collection's tenant."""
    params = {"collection": collection, "tenant": tenant, "alias": alias, "enabled": enabled,
              "rerank_top_n": rerank_top_n, "reset": list(reset) if reset else None}
    try:
        with conn.transaction():
            cur = conn.execute(q.SET_COLLECTION_RERANKER, params)
            names = [d.name for d in cur.description]
            return dict(zip(names, cur.fetchone()))
    except psycopg.Error as exc:
        raise _translate(exc) from exc


__all__ = [
    "CohereReranker", "ConnectionCheck", "InvalidRanking", "Ranking", "RerankCallError",
    "RerankError", "RerankOutcome", "Reranker", "RerankerConfig", "RerankerNotAllowed",
    "RerankerUnavailable", "TEIReranker", "VoyageReranker", "arecord_usage", "arerank_pool",
    "arerank_search", "areranker_for", "areranking_enabled", "afetch_pool_texts",
    "atest_connection", "build_query", "clear_reranker_cache", "contextualize", "drop_reranker",
    "env_secret", "fetch_pool_texts", "get_reranker", "make_reranker", "pool_size",
    "record_usage", "register_reranker", "rerank_pool", "rerank_search", "reranker_for",
    "reranking_enabled", "set_collection_reranker", "test_connection", "validate",
]
