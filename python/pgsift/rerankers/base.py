"""What every reranker shares: the protocol, the answer type, and how a failed call is
classified (each provider module maps its client's exceptions onto these faults)."""

from __future__ import annotations

import asyncio
import importlib
import json
import math
import urllib.parse
import weakref
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any, Protocol, runtime_checkable

from ..errors import PgsiftError

DEFAULT_ATTEMPT_TIMEOUT_S = 2.0

# Outcomes that made no call (not faults): reranking off, nothing to rerank.
SKIPS = ("off", "blank_query", "top_k", "too_few_candidates")
# Faults, each logged and each leaving the search's own order.
FAULTS = ("timeout", "connection_error", "rate_limited", "server_error", "client_error",
          "malformed_response", "invalid_ranking", "partial_ranking", "deadline_exceeded",
          "redirected", "not_allowed", "no_reranker", "unavailable", "unexpected_error")


class RerankError(PgsiftError):
    """A rerank could not be used. The engine never raises it: it returns an outcome
    carrying `fault` instead."""

    fault = "unexpected_error"


class RerankerUnavailable(RerankError, RuntimeError):
    """The reranker cannot be built here: its client package is not installed
    (pip install 'pgsift[rerank]'), its key is not mapped or not set, or it is misconfigured."""

    fault = "unavailable"


class EndpointRefused(RerankError, PermissionError):
    """A reranker's base_url this process will not call, whatever an allow-list said: one
    carrying credentials (http://allowed:1@elsewhere/ is a request to elsewhere)."""

    fault = "not_allowed"


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


class Ranking(list[tuple[int, float]]):
    """A reranker's answer: [(index into documents, score), ...] best first, plus what the
    provider reported for metering (`tokens`, `search_units`; None when it said nothing)."""

    def __init__(self, pairs: Iterable[Any] = (), *, tokens: int | None = None,
                 search_units: float | None = None):
        super().__init__(pairs)
        self.tokens = tokens
        self.search_units = search_units


@runtime_checkable
class Reranker(Protocol):
    """Scores (query, document) pairs. `rerank` returns [(index, score)] best first, at most
    `top_n` of them (None: every document), within `timeout` seconds (one attempt; None: the
    reranker's own). `arerank` is the same, awaitable. A local cross-encoder fits the same
    protocol."""

    provider: str
    model: str

    def rerank(self, query: str, documents: Sequence[str], top_n: int | None = None, *,
               timeout: float | None = None) -> Sequence[Any]: ...

    async def arerank(self, query: str, documents: Sequence[str], top_n: int | None = None, *,
                      timeout: float | None = None) -> Sequence[Any]: ...


def import_client(module: str) -> Any:
    """A provider's client library, imported when a reranker is first built."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        raise RerankerUnavailable(f"the {module} package is not installed: pip install 'pgsift[rerank]'") from exc


class PerLoop:
    """Async HTTP clients hold connections bound to one event loop: one client per loop,
    built the first time that loop reranks and dropped with the loop."""

    def __init__(self, build: Callable[[], Any]):
        self._build = build
        self._clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Any] = weakref.WeakKeyDictionary()

    async def get(self) -> Any:
        loop = asyncio.get_running_loop()
        client = self._clients.get(loop)
        if client is None:
            # Built in a worker thread: a client library's first construction may import
            # for seconds, and the loop must stay free to cut the attempt off at its deadline.
            built = await loop.run_in_executor(None, self._build)
            client = self._clients.setdefault(loop, built)
        return client


async def detached(method: Callable[..., Awaitable[Any]], *args: Any, **kwargs: Any) -> Any:
    """Await method(*args, **kwargs) in a task of its own. When the caller stops waiting (its
    deadline), the task is asked to cancel but not waited for: a client that swallows or
    delays its cancellation cannot hold a search past the deadline."""
    task = asyncio.ensure_future(method(*args, **kwargs))
    task.add_done_callback(_collect)
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        task.cancel()
        raise


def _collect(task: asyncio.Future[Any]) -> None:
    # An abandoned attempt's exception is nobody's: read it so asyncio does not log it.
    if not task.cancelled():
        task.exception()


def short(text: Any, limit: int = 200) -> str:
    s = " ".join(str(text).split())
    return s if len(s) <= limit else s[: limit - 3] + "..."


def redirect_refused(status: int, location: Any = None) -> RerankCallError:
    """A redirect, which no provider client here follows: the query, the texts and the key
    go to the endpoint the operator allowed and nowhere else. Not retried. The message names
    the target's scheme, host and port only."""
    where = ""
    if location:
        try:
            target = urllib.parse.urlsplit(str(location))
            if target.hostname:
                where = f" to {target.scheme}://{target.hostname}" + (f":{target.port}" if target.port else "")
        except ValueError:
            where = " elsewhere"
    return RerankCallError("redirected", f"HTTP {status}: the endpoint redirected{where}; a redirect is never "
                           "followed (the request and its key go to the allowed endpoint only)", status=status)


def refuse_redirect(response: Any) -> None:
    """An httpx response hook: a redirect raises (redirect_refused) before anything follows it."""
    status = getattr(response, "status_code", None)
    if isinstance(status, int) and 300 <= status < 400:
        raise redirect_refused(status, response.headers.get("location"))


async def arefuse_redirect(response: Any) -> None:
    """refuse_redirect for httpx.AsyncClient, whose hooks are awaited."""
    refuse_redirect(response)


def status_fault(status: int | None, message: str, retry_after: float | None = None) -> RerankCallError:
    """An HTTP status as a fault: 429 and 5xx may be retried, other 4xx not; a 3xx is a
    redirect (never followed)."""
    if status is not None and 300 <= status < 400:
        return redirect_refused(status)
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


def shape_fault(exc: BaseException) -> RerankCallError:
    """A response the client library could not even read as a ranking."""
    if isinstance(exc, RerankCallError):
        return exc
    if isinstance(exc, RerankError):
        return RerankCallError(exc.fault, str(exc))
    if isinstance(exc, IndexError):
        # voyageai looks documents[index] up while reading the response
        return RerankCallError("invalid_ranking", f"index out of range ({short(exc)})")
    if isinstance(exc, AttributeError) and "score" in str(exc):
        return RerankCallError("invalid_ranking", f"score missing ({short(exc)})")
    if isinstance(exc, (AttributeError, KeyError, TypeError, ValueError, json.JSONDecodeError)):
        return RerankCallError("malformed_response", f"unreadable response: {type(exc).__name__}: {short(exc)}")
    if isinstance(exc, (TimeoutError, asyncio.TimeoutError)):   # distinct types before Python 3.11
        return RerankCallError("timeout", "no answer within the attempt's time", retryable=True)
    return RerankCallError("unexpected_error", f"{type(exc).__name__}: {short(exc)}")


def retry_after(headers: Any) -> float | None:
    """The seconds a Retry-After header asks for (its date form is not used by these APIs)."""
    try:
        raw: Any = (headers or {}).get("retry-after") or (headers or {}).get("Retry-After")
        value = float(raw)
    except (TypeError, ValueError, AttributeError):
        return None
    return value if math.isfinite(value) and value >= 0 else None


def int_or_none(value: Any) -> int | None:
    try:
        out = int(value)
    except (TypeError, ValueError):
        return None
    return out if out >= 0 else None


def float_or_none(value: Any) -> float | None:
    try:
        out = float(value)
    except (TypeError, ValueError):
        return None
    return out if math.isfinite(out) and out >= 0 else None
