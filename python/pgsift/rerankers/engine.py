# DO NOT EDIT: generated from python/pgsift/rerankers/engine_async.py by tools/async_to_sync.py.
# Change the async source and run `make sync` (a test fails while this file is stale).
"""The retry and deadline engine: one search's rerank, which never raises.

Written once, async; tools/async_to_sync.py generates the sync twin (engine.py).

Time: one deadline bounds a search's whole rerank, from the call on: building
the reranker (a client library's first import can take seconds), every
attempt and every backoff. Each attempt gets min(attempt timeout, time left) as
its HTTP timeout and is also cut off from outside (compat.run_bounded: a
worker thread for sync, asyncio.wait_for for async, on a task it does not wait
for once it gives up: base.detached), no attempt starts with
less than MIN_ATTEMPT_S left and no backoff sleeps past the deadline, so the
worst case is deadline_s + compat.GRACE_S (3.05 s with the defaults).
"""

from __future__ import annotations

import functools
import inspect
import math
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from ..compat import run_bounded, sleep
from ..models import RerankerConfig
from .base import RerankCallError, Reranker, detached, shape_fault
from .limits import Batches, RerankLimits, plan_batches
from .outcome import DEFAULT_CONTEXT_CHARS, RerankOutcome, build_query, log, log_fault, validate
from .registry import SecretResolver, build_reranker

DEFAULT_DEADLINE_S = 3.0       # a search's whole rerank budget (sift.rerankers.deadline_ms)
DEFAULT_MAX_ATTEMPTS = 2
MIN_ATTEMPT_S = 0.05           # no attempt starts with less time left than this
BACKOFF_S = 0.1                # the first retry waits this long, then twice as long


@dataclass
class _Plan:
    query: str
    docs: list[str]
    top_n: int | None
    deadline_s: float
    attempt_timeout_s: float
    max_attempts: int
    batches: Batches
    limits: RerankLimits | None = None
    info: dict[str, Any] = field(default_factory=dict)


def _plan(reranker: Any, query: str, context: Any, pool_texts: Sequence[str], top_n: int | None,
          deadline_s: float | None, context_chars: int | None, attempt_timeout_s: float | None,
          max_attempts: int | None, alias: str | None, limits: RerankLimits | None) -> _Plan | RerankOutcome:
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
    batches = plan_batches(build_query(query, context, limit), docs, limits)
    return _Plan(query=batches.query, docs=batches.docs, top_n=top_n, deadline_s=deadline,
                 attempt_timeout_s=min(per_attempt, deadline),
                 max_attempts=max(1, int(max_attempts or DEFAULT_MAX_ATTEMPTS)), batches=batches,
                 limits=limits, info=info)


def _takes_timeout(reranker: Any) -> bool:
    try:
        params = inspect.signature(reranker.rerank).parameters.values()
    except (TypeError, ValueError, AttributeError):
        return False
    return any(p.name == "timeout" or p.kind is inspect.Parameter.VAR_KEYWORD for p in params)


def _calls(reranker: Any, plan: _Plan, request: Sequence[int],
           timeout: float) -> tuple[Callable[[], Any], Callable[[], Awaitable[Any]] | None]:
    """One attempt of one request (pool indices), as a sync call and (when the reranker has
    its own async method) an async one; the sync engine runs the first in a worker thread,
    the async engine awaits the second, detached so that a client swallowing its
    cancellation cannot hold the search."""
    kwargs = {"timeout": timeout} if _takes_timeout(reranker) else {}
    args = (plan.query, [plan.docs[i] for i in request], plan.top_n)
    method = getattr(reranker, "arerank", None)
    native = functools.partial(detached, method, *args, **kwargs) if inspect.iscoroutinefunction(method) else None
    return functools.partial(reranker.rerank, *args, **kwargs), native


def _backoff(error: RerankCallError, attempt: int, left: float) -> float | None:
    """Seconds to wait before the next attempt, or None when there is no time for one."""
    wait = BACKOFF_S * 2 ** (attempt - 1)
    if error.retry_after is not None:
        wait = max(wait, error.retry_after)
    return wait if wait + MIN_ATTEMPT_S <= left else None


def _finish(plan: _Plan, answers: list[tuple[list[int], Any]], started: float, attempts: int,
            stopped: RerankCallError | None = None) -> RerankOutcome:
    """The outcome of the requests that were answered (pool indices, ranking), in order;
    `stopped` is the fault that ended the requests early (the later ones were not made)."""
    latency = (time.monotonic() - started) * 1000
    n = len(plan.docs)
    sent = sum(len(request) for request, _ in answers)
    info = dict(plan.info, called=True, latency_ms=latency, attempts=attempts, documents=sent,
                tokens=_total(answers, "tokens"), search_units=_total(answers, "search_units"),
                requests=len(answers), clipped=plan.batches.clipped, query_clipped=plan.batches.query_clipped,
                not_sent=n - sent)
    scores: list[float | None] = [None] * n
    short_by = 0
    for request, ranking in answers:
        try:
            pairs = validate(ranking, len(request))
        except RerankCallError as exc:
            return _failed(plan, exc, info)
        except Exception as exc:  # noqa: BLE001 - InvalidRanking
            return _failed(plan, RerankCallError("invalid_ranking", str(exc)), info)
        for i, s in pairs:
            scores[request[i]] = s
        expected = len(request) if plan.top_n is None else min(plan.top_n, len(request))
        short_by += max(0, expected - len(pairs))
    note = plan.batches.describe(plan.limits)
    if short_by or stopped is not None:
        ranked = sum(s is not None for s in scores)
        why = (f"partial ranking: the reranker ranked {ranked} of {n} candidates"
               if stopped is None else f"{stopped} (request {len(answers) + 1} of {len(plan.batches.requests)}; "
               f"the {ranked} candidates of the earlier requests are ranked)")
        reason = f"{why}; the other {n - ranked} follow in pool order" + (f" ({note})" if note else "")
        outcome = RerankOutcome(scores=tuple(scores), partial=True, fault="partial_ranking",
                                reason=reason, **info)
        log_fault(outcome)
        return outcome
    return RerankOutcome(scores=tuple(scores), reranked=True, reason=note, **info)


def _total(answers: list[tuple[list[int], Any]], name: str) -> Any:
    values = [getattr(ranking, name, None) for _, ranking in answers]
    known = [v for v in values if v is not None]
    return sum(known) if known else None


def _failed(plan: _Plan, error: RerankCallError, info: dict[str, Any]) -> RerankOutcome:
    outcome = RerankOutcome.unchanged(len(plan.docs), fault=error.fault, reason=str(error), **info)
    log_fault(outcome)
    return outcome


def _give_up(plan: _Plan, last: RerankCallError | None, started: float, attempts: int) -> RerankOutcome:
    # What was sent: the first request (no other was made).
    sent = len(plan.batches.requests[0]) if plan.batches.requests else len(plan.docs)
    info = dict(plan.info, called=attempts > 0, latency_ms=(time.monotonic() - started) * 1000,
                attempts=attempts, documents=sent)
    if last is None:
        error = RerankCallError("deadline_exceeded", f"the deadline of {plan.deadline_s:.2f}s left no time for a call")
    elif last.retryable and attempts < plan.max_attempts:
        error = RerankCallError(last.fault, f"{last} (after {attempts} attempt(s): the deadline of "
                                f"{plan.deadline_s:.2f}s left no time for another)")
    elif attempts > 1:
        error = RerankCallError(last.fault, f"{last} (after {attempts} attempts)")
    else:
        error = last
    return _failed(plan, error, info)


def rerank_pool(reranker: Reranker | None, query: str, context: Any, pool_texts: Sequence[str],
                      top_n: int | None = None, deadline_s: float | None = DEFAULT_DEADLINE_S,
                      context_chars: int | None = DEFAULT_CONTEXT_CHARS, *,
                      attempt_timeout_s: float | None = None,
                      max_attempts: int | None = DEFAULT_MAX_ATTEMPTS, alias: str | None = None,
                      started: float | None = None, limits: RerankLimits | None = None) -> RerankOutcome:
    """Rerank one search's pool; never raises. `pool_texts` are the candidates' texts in pool
    order (contextualized: sift.rerank_texts); `context` is the conversation, whose tail
    (context_chars) goes before the query; `top_n` is how many the provider returns per
    request (None: all, the normal case). One request for the whole pool, or, within the
    provider's `limits` (sift.reranker_limits), several in pool order with too-long texts
    clipped (the outcome's requests, clipped, query_clipped and not_sent say what was done).
    Attempts (at most max_attempts per request, on timeouts, connection errors, 429 and 5xx)
    and their backoffs all fit in deadline_s, counted from `started` (a time.monotonic();
    default now)."""
    begun = time.monotonic() if started is None else started
    try:
        plan = _plan(reranker, query, context, pool_texts, top_n, deadline_s, context_chars,
                     attempt_timeout_s, max_attempts, alias, limits)
    except Exception as exc:  # noqa: BLE001 - a bad argument must not fail the search either
        n = len(pool_texts) if isinstance(pool_texts, Sequence) else 0
        outcome = RerankOutcome.unchanged(n, fault="unexpected_error", alias=alias,
                                          reason=f"bad rerank arguments: {type(exc).__name__}: {exc}")
        log_fault(outcome)
        return outcome
    if isinstance(plan, RerankOutcome):
        log.debug("no rerank: %s", plan.reason)
        return plan
    end = begun + plan.deadline_s
    answers: list[tuple[list[int], Any]] = []
    attempts = 0
    for request in plan.batches.requests:
        ranking, error, tries = _request(reranker, plan, request, end)
        attempts += tries
        if error is not None or ranking is None:
            # A request that failed stops the others (they would share its fault and its
            # deadline); the ones answered before it still rank their candidates.
            if not answers:
                return _give_up(plan, error, begun, attempts)
            return _finish(plan, answers, begun, attempts, stopped=error or _no_time(plan))
        answers.append((request, ranking))
    return _finish(plan, answers, begun, attempts)


def _no_time(plan: _Plan) -> RerankCallError:
    return RerankCallError("deadline_exceeded", f"the deadline of {plan.deadline_s:.2f}s left no time for a call")


def _request(reranker: Any, plan: _Plan, request: list[int],
                   end: float) -> tuple[Any, RerankCallError | None, int]:
    """One request's attempts (at most max_attempts, on timeouts, connection errors, 429 and
    5xx) and their backoffs, all before `end`: (ranking, None, attempts) or (None, the last
    fault or None when no attempt had time, attempts)."""
    last: RerankCallError | None = None
    attempts = 0
    while attempts < plan.max_attempts:
        left = end - time.monotonic()
        if left < MIN_ATTEMPT_S:
            break
        timeout = min(plan.attempt_timeout_s, left)
        attempts += 1
        try:
            sync_call, async_call = _calls(reranker, plan, request, timeout)
            return run_bounded(sync_call, async_call, timeout), None, attempts
        except BaseException as exc:
            if not isinstance(exc, Exception):
                raise   # KeyboardInterrupt, SystemExit, a cancelled task
            last = shape_fault(exc)
        if not last.retryable or attempts >= plan.max_attempts:
            break
        wait = _backoff(last, attempts, end - time.monotonic())
        if wait is None:
            break
        sleep(wait)
    return None, last, attempts


def _gate(config: RerankerConfig | None, n: int, top_k: int, query: str) -> RerankOutcome | None:
    if config is None:
        return RerankOutcome.unchanged(n, skip="off", reason="reranking is off for these collections")
    info = {"alias": config.alias, "provider": config.provider, "model": config.model,
            "chosen_by": config.chosen_by}
    if config.refused:
        fault = "not_allowed" if config.chosen_by == "refused" else "no_reranker"
        outcome = RerankOutcome.unchanged(n, fault=fault, reason=config.refused, **info)
        log_fault(outcome)
        return outcome
    if top_k <= 0:
        return RerankOutcome.unchanged(n, skip="top_k", reason="top_k <= 0: no rerank call", **info)
    if not isinstance(query, str) or not query.strip():
        return RerankOutcome.unchanged(n, skip="blank_query", reason="blank query: no rerank call", **info)
    if n < 2:
        return RerankOutcome.unchanged(n, skip="too_few_candidates",
                                       reason=f"{n} candidate(s): nothing to rerank", **info)
    return None


def rerank_search(config: RerankerConfig | None, *, query: str, pool_texts: Sequence[str], top_k: int,
                        conversation: Any = None, resolver: SecretResolver | None = None) -> RerankOutcome:
    """Rerank a search's pool with the reranker SQL chose (sift.reranker_for); never raises.
    No call when config is None or refused (logged), the query is blank, top_k <= 0 or the
    pool has fewer than 2 candidates. The reranker's deadline_ms bounds everything from here
    on, building the reranker included."""
    started = time.monotonic()
    n = len(pool_texts)
    gated = _gate(config, n, top_k, query)
    if gated is not None or config is None:
        return gated or RerankOutcome.unchanged(n, skip="off")
    info = {"alias": config.alias, "provider": config.provider, "model": config.model,
            "chosen_by": config.chosen_by}
    deadline_s = (config.deadline_ms or DEFAULT_DEADLINE_S * 1000) / 1000
    try:
        reranker = run_bounded(build_reranker, None, deadline_s, config, resolver)
    except Exception as exc:  # noqa: BLE001 - a reranker that cannot be built only loses the rerank
        error = shape_fault(exc)
        fault = "deadline_exceeded" if error.fault == "timeout" else getattr(exc, "fault", "unavailable")
        reason = (f"building the reranker took longer than its deadline of {deadline_s:.2f}s"
                  if fault == "deadline_exceeded" else f"{type(exc).__name__}: {exc}")
        outcome = RerankOutcome.unchanged(n, fault=fault, reason=reason,
                                          latency_ms=(time.monotonic() - started) * 1000, **info)
        log_fault(outcome)
        return outcome
    outcome = rerank_pool(reranker, query, conversation, pool_texts, None, deadline_s,
                                config.context_chars, attempt_timeout_s=(config.timeout_ms or 2000) / 1000,
                                max_attempts=config.max_attempts, alias=config.alias, started=started,
                                limits=RerankLimits.from_row(config.limits))
    return replace(outcome, alias=config.alias, chosen_by=config.chosen_by)


# -- test_connection ----------------------------------------------------------------------

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
    scores = {label: s for (label, _), s in zip(PROBE, outcome.scores, strict=False) if s is not None}
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
    outcome = rerank_pool(reranker, PROBE_QUERY, None, [p for _, p in PROBE], None,
                                deadline_s=timeout_s, max_attempts=1)
    return _check(outcome)


test_connection.__test__ = False  # type: ignore[attr-defined]  # not a pytest test, whoever imports it
