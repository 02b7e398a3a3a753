"""What a rerank did to a search's pool, and the pure rules around it: the text a reranker
scores, the query it gets, and which answers describe the pool they were sent."""

from __future__ import annotations

import logging
import math
import numbers
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .base import InvalidRanking

log = logging.getLogger("pgsift.rerank")

DEFAULT_CONTEXT_CHARS = 1500


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


@dataclass(frozen=True)
class RerankOutcome:
    """What reranking did to one search's pool (pool index = place in the fused pool).

    scores[i]: the provider's score for pool item i, None when it was not scored (every
    item when nothing was reranked). reranked: every item the provider was asked for came
    back valid, so the reranker's order holds. partial: only some came back: those lead in
    their order and the unranked remainder follows in pool order (reranked is False and
    fault is "partial_ranking"). fault: None, or one of base.FAULTS; skip: why no call was
    made (one of base.SKIPS), else None. called: a request left the process (metered).
    alias and chosen_by ("collection", "tenant_default", "named") say which reranker scored
    the pool. Within the provider's limits (sift.reranker_limits): requests (how many were
    answered; more than one: the pool was split), clipped (pool indices whose text was cut
    to fit a query-document pair), query_clipped, not_sent (candidates past the last
    request, left in pool order); `reason` says it in words. usage_recorded: the call was
    metered in sift.rerank_usage; when it could not be (a read-only standby and no primary
    to write to), `usage` is the row to record."""

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
    usage_recorded: bool | None = None
    requests: int = 0
    clipped: tuple[int, ...] = ()
    query_clipped: bool = False
    not_sent: int = 0

    @classmethod
    def unchanged(cls, n: int, *, skip: str | None = None, fault: str | None = None,
                  reason: str = "", **info: Any) -> RerankOutcome:
        return cls(scores=(None,) * n, skip=skip, fault=fault, reason=reason, **info)

    @property
    def complete(self) -> bool:
        """Every candidate of the pool has the reranker's score (reranked, none left unsent):
        only then does a threshold calibrated for the reranker judge the scores."""
        return self.reranked and self.not_sent == 0

    @property
    def applied(self) -> bool:
        """Whether the reranker's scores change the order (reranked or partial)."""
        return any(s is not None for s in self.scores)

    @property
    def usage(self) -> dict[str, Any]:
        """The metering row of this call (sift.record_rerank_usage's arguments)."""
        return {
            "reranker_alias": self.alias, "provider": self.provider or "unknown",
            "model": self.model or "unknown", "documents": self.documents,
            "latency_ms": self.latency_ms, "ok": self.reranked,
            "tokens": self.tokens if self.reranked else None,
            "search_units": self.search_units if self.reranked else None,
            "attempts": max(self.attempts, 1),
            "error": None if self.reranked else f"{self.fault}: {self.reason}"[:2000],
        }

    def order(self) -> list[int]:
        """Pool indices in the order the scores give: scored ones best first (ties: pool
        order), then the unscored ones in pool order. No scores: the pool order."""
        scored = sorted((i for i, s in enumerate(self.scores) if s is not None),
                        key=lambda i: (-(self.scores[i] or 0.0), i))
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
        return {cid: s for cid, s in zip(chunk_ids, self.scores, strict=False) if s is not None}


def log_fault(outcome: RerankOutcome) -> None:
    log.warning("rerank fell back to the pool order: %s: %s (reranker=%s provider=%s model=%s "
                "documents=%d attempts=%d latency_ms=%.0f)", outcome.fault, outcome.reason,
                outcome.alias, outcome.provider, outcome.model, outcome.documents,
                outcome.attempts, outcome.latency_ms)
