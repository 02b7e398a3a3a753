"""How much one rerank request may carry, and how a pool is cut to fit.

The figures are SQL's data (sift.reranker_limits, one row per provider and model,
returned by sift.reranker_for); here they become requests. A pool is split in
its fused order into at most `max_requests` requests, each within
`max_documents` and `max_request_tokens`; a document too long for its pair
(`max_pair_tokens` less the query's) is clipped at its end rather than failing
the request it is in, and a query past `max_query_tokens` (or half a pair or a
request, so documents keep room) loses its oldest conversation first.
Candidates past the last request are not sent: they keep the fused order
behind the scored ones. Scores from different requests are
comparable because a cross-encoder scores each (query, document) pair alone.

Tokens are estimated, not counted (no provider's tokenizer is available
offline): `chars_per_token` characters per token, and a CJK, kana, Hangul or
Thai character one token each. The estimate errs high: a 400 from a provider
for a limit the estimate missed still falls back like any fault.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

# Scripts whose characters are about one token each.
_DENSE = re.compile("[\u0e00-\u0e7f\u1100-\u11ff\u3000-\u30ff\u3130-\u318f\u3400-\u4dbf"
                    "\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\uff00-\uffef\U00020000-\U0003ffff]")


@dataclass(frozen=True)
class RerankLimits:
    """One row of sift.reranker_limits (None: no such limit)."""

    max_documents: int
    max_query_tokens: int | None = None
    max_pair_tokens: int | None = None
    max_request_tokens: int | None = None
    chars_per_token: float = 3.0
    max_requests: int = 4

    @classmethod
    def from_row(cls, row: Mapping[str, Any] | None) -> RerankLimits | None:
        """The limits sift.reranker_for returned (its `limits` column), or None."""
        if not row:
            return None
        return cls(max_documents=int(row["max_documents"]), max_query_tokens=row.get("max_query_tokens"),
                   max_pair_tokens=row.get("max_pair_tokens"), max_request_tokens=row.get("max_request_tokens"),
                   chars_per_token=float(row.get("chars_per_token") or 3.0),
                   max_requests=int(row.get("max_requests") or 4))


def estimate_tokens(text: str, chars_per_token: float = 3.0) -> int:
    """Tokens a provider will count for `text`, estimated high."""
    dense = len(_DENSE.findall(text))
    return dense + math.ceil((len(text) - dense) / chars_per_token)


def clip(text: str, tokens: int, chars_per_token: float = 3.0, *, keep: str = "head") -> str:
    """`text` cut to at most `tokens` estimated tokens, keeping its head (a document) or its
    tail (a query, whose question comes last); the cut moves to a space when one is near."""
    if estimate_tokens(text, chars_per_token) <= tokens:
        return text
    source = text if keep == "head" else text[::-1]
    budget = float(tokens)
    end = 0
    for ch in source:
        cost = 1.0 if _DENSE.match(ch) else 1.0 / chars_per_token
        if budget < cost:
            break
        budget -= cost
        end += 1
    cut = source[:end]
    space = cut.rfind(" ")
    if space >= 0.9 * end:
        cut = cut[:space]
    return cut if keep == "head" else cut[::-1]


@dataclass(frozen=True)
class Batches:
    """A pool cut into requests: `docs` (pool order, clipped ones shortened), `requests` (pool
    indices per request, in pool order), `clipped` (pool indices whose text was cut),
    `query_clipped`, `not_sent` (pool indices past the last request)."""

    query: str
    docs: list[str]
    requests: list[list[int]]
    clipped: tuple[int, ...] = ()
    query_clipped: bool = False
    not_sent: tuple[int, ...] = field(default=())

    def describe(self, limits: RerankLimits | None) -> str:
        """What was split, clipped or left out, in words ("" when the pool went whole)."""
        parts = []
        if len(self.requests) > 1 and limits is not None:
            parts.append(f"split into {len(self.requests)} requests (at most {limits.max_documents} documents"
                         + (f" and {limits.max_request_tokens} tokens" if limits.max_request_tokens else "")
                         + " each)")
        if self.clipped:
            parts.append(f"clipped {len(self.clipped)} document(s) to the provider's pair limit "
                         f"(pool places {', '.join(str(i + 1) for i in self.clipped[:10])}"
                         + (", ..." if len(self.clipped) > 10 else "") + ")")
        if self.query_clipped:
            parts.append("clipped the query to the provider's query limit (the oldest conversation went first)")
        if self.not_sent:
            parts.append(f"{len(self.not_sent)} candidate(s) past the last request kept the fused order")
        return "; ".join(parts)


def plan_batches(query: str, docs: Sequence[str], limits: RerankLimits | None) -> Batches:
    """Cut (query, docs) into requests within `limits` (None: one request, nothing cut)."""
    docs = list(docs)
    if limits is None:
        return Batches(query=query, docs=docs, requests=[list(range(len(docs)))] if docs else [])
    cpt = limits.chars_per_token
    # The query gets at most half of a pair and of a request: the documents keep the other
    # half (a long conversation must not leave them a few characters each).
    caps = [c for c in (limits.max_query_tokens,
                        None if limits.max_pair_tokens is None else limits.max_pair_tokens // 2,
                        None if limits.max_request_tokens is None else limits.max_request_tokens // 2)
            if c is not None]
    query_cap = max(1, min(caps)) if caps else None
    query_clipped = False
    if query_cap is not None and estimate_tokens(query, cpt) > query_cap:
        query, query_clipped = clip(query, query_cap, cpt, keep="tail"), True
    q = estimate_tokens(query, cpt)
    budgets = [b - q for b in (limits.max_pair_tokens, limits.max_request_tokens) if b is not None]
    budget = max(1, min(budgets)) if budgets else None
    clipped = []
    tokens = []
    for i, doc in enumerate(docs):
        if budget is not None and estimate_tokens(doc, cpt) > budget:
            docs[i] = clip(doc, budget, cpt)
            clipped.append(i)
        tokens.append(estimate_tokens(docs[i], cpt))
    requests: list[list[int]] = []
    used = 0
    not_sent: list[int] = []
    for i, t in enumerate(tokens):
        fits = requests and len(requests[-1]) < limits.max_documents and (
            limits.max_request_tokens is None or used + q + t <= limits.max_request_tokens)
        if fits:
            requests[-1].append(i)
            used += q + t
        elif len(requests) < limits.max_requests:
            requests.append([i])
            used = q + t
        else:
            not_sent = list(range(i, len(tokens)))
            break
    sent = {i for r in requests for i in r}
    return Batches(query=query, docs=docs, requests=requests,
                   clipped=tuple(i for i in clipped if i in sent), query_clipped=query_clipped,
                   not_sent=tuple(not_sent))
