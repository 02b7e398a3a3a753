"""Enrichment at ingest: a language model writes, for each chunk, a short context placing it
in its document and questions the chunk answers (the one call besides rerank that leaves the
database, and only at index time).

- `Enricher` is the protocol; `OpenAIChatEnricher` speaks the OpenAI-compatible chat API
  (which most servers speak) through its official client. The document goes first in the
  prompt, the same for every chunk of it, so a provider's prompt caching reuses it; a
  document past `max_document_tokens` sends its outline and the chunk's section instead.
- A call that fails (timeout, 429, 5xx, malformed or empty output) is a warning: the chunk
  keeps its deterministic header and gets no questions, and the document still indexes.
- `Client.enrich_documents` reuses what was written for unchanged text (keyed on the text,
  its document and the settings: `enrichment_key`), stops at a per-document token budget
  (the rest keep their header), and `Client.upsert_documents` records each document's spend
  and warnings (sift.enrichment_history).
- `estimate` prices an ingestion before it runs, from `RATES` (or rates you give); a model
  without rates "cannot price".
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import os
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from .errors import InvalidArgument
from .models import Document

log = logging.getLogger("pgsift.enrich")

PROMPT_VERSION = "2026-12-01"
MAX_FAILURES_IN_A_ROW = 5   # failed calls in a row, then an ingestion stops calling (a wrong endpoint, model or key)
MAX_QUESTIONS = 5
CONTEXT_WORDS = (50, 100)
# questions_as: in the chunk's embedding, as vectors of their own, or both (the lexical leg
# sees them in every policy).
POLICIES = ("embedding", "vectors", "both")

SYSTEM = (
    "You index documents for search. Given a document and one chunk of it, answer with one JSON "
    "object and nothing else: {\"context\": a 50-100 word note that places the chunk in the "
    "document (what the document is, where the chunk sits, what it refers to), \"questions\": a "
    "list of questions a reader could ask that this chunk answers}. Write in the document's "
    "language. Do not repeat the chunk.")

# USD per million tokens (input, output). Extend or override with `rates=`.
RATES: dict[str, tuple[float, float]] = {
    "gpt-4o-mini": (0.15, 0.60),
    "gpt-4.1-mini": (0.40, 1.60),
    "gpt-4.1-nano": (0.10, 0.40),
    "gpt-4o": (2.50, 10.00),
}


def estimate_tokens(text: str) -> int:
    """About four characters a token: what budgets and estimates count before a call."""
    return max(1, (len(text) + 3) // 4)


@dataclass(frozen=True)
class Enrichment:
    """What one call gave for a chunk: its context (None: none), questions, the tokens the
    provider reported, and what went wrong (None: nothing)."""

    context: str | None
    questions: list[str]
    input_tokens: int = 0
    output_tokens: int = 0
    warning: str | None = None
    failed: bool = False
    # The call itself failed (an exception, a refused request), not its answer.
    call_error: bool = False


class Enricher(Protocol):
    """Writes a chunk's context and questions. `model` names what writes them (it is part of
    the cache key and of the spend record)."""

    model: str

    def enrich(self, document: str, chunk: str, *, context: bool, questions: int) -> Enrichment: ...


def parse_output(text: str | None, *, context: bool, questions: int) -> Enrichment:
    """The model's answer checked: one JSON object (a fenced or surrounded one is found), a
    context of at most 100 words when asked for, 0 to `questions` non-blank questions. What
    does not fit is cut or dropped with a warning; unusable output is a failure."""
    if text is None or not text.strip():
        return Enrichment(None, [], warning="empty output", failed=True)
    found = re.search(r"\{.*\}", text, re.S)
    try:
        data = json.loads(found.group(0) if found else text)
    except (json.JSONDecodeError, ValueError):
        return Enrichment(None, [], warning=f"malformed output (not JSON): {text[:80]!r}", failed=True)
    if not isinstance(data, dict):
        return Enrichment(None, [], warning="malformed output (not a JSON object)", failed=True)
    warnings = []
    ctx = data.get("context") if context else None
    if ctx is not None and not isinstance(ctx, str):
        warnings.append("context was not a string: dropped")
        ctx = None
    if context and ctx is None and not warnings:
        warnings.append("no context in the output")
    raw = data.get("questions", []) if questions else []
    if not isinstance(raw, list):
        warnings.append("questions was not a list: dropped")
        raw = []
    got = normalise(Enrichment(ctx, [q for q in raw if isinstance(q, str)]), context=context, questions=questions)
    warnings += [got.warning] if got.warning else []
    if got.context is None and not got.questions:
        return Enrichment(None, [], warning="; ".join([*warnings, "nothing usable in the output"]), failed=True)
    return dataclasses.replace(got, warning="; ".join(warnings) or None)


def normalise(got: Enrichment, *, context: bool, questions: int) -> Enrichment:
    """Any enricher's answer held to the contract: no NUL, a context of at most 100 words
    (when asked for), 0 to `questions` distinct non-blank questions; what was cut is said."""
    warnings = [got.warning] if got.warning else []
    ctx = got.context.replace("\x00", "").strip() if context and isinstance(got.context, str) else None
    if ctx:
        words = ctx.split()
        if len(words) > CONTEXT_WORDS[1]:
            warnings.append(f"context had {len(words)} words: cut to {CONTEXT_WORDS[1]}")
            ctx = " ".join(words[:CONTEXT_WORDS[1]])
    kept = list(dict.fromkeys(q.replace("\x00", "").strip() for q in (got.questions or [])
                              if isinstance(q, str) and q.replace("\x00", "").strip()))
    if len(kept) > questions:
        warnings.append(f"{len(kept)} questions: kept the first {questions}")
        kept = kept[:questions]
    elif questions and len(kept) < questions and not got.failed:
        warnings.append(f"asked for {questions} questions, got {len(kept)}")
    return dataclasses.replace(got, context=ctx or None, questions=kept, warning="; ".join(warnings) or None)


def outline(document: Document) -> str:
    """A long document's stand-in: its title and headings, else each chunk's first line."""
    lines = [document.title or document.source_uri]
    if document.sections:
        lines += [("  " * max(s.level - 1, 0)) + s.heading for s in document.sections if s.heading]
    else:
        lines += [c.content.strip().split("\n", 1)[0][:120] for c in document.chunks]
    return "\n".join(lines)


def prompt_parts(document: Document, chunk_index: int, max_tokens: int) -> tuple[str, str]:
    """What the prompt shows for chunk `chunk_index`: (the document part, the chunk part). The
    document part is the whole document when it fits `max_tokens`, else its outline, the same
    for every chunk of it either way (a cacheable prefix); past it, the chunk part carries the
    chunk's section (the chunks under its heading, or its neighbours) before the chunk."""
    chunk = document.chunks[chunk_index].content
    whole = "\n\n".join(c.content for c in document.chunks)
    if estimate_tokens(whole) <= max_tokens:
        return whole, chunk
    section = document.chunks[chunk_index].section
    around = [c.content for c in document.chunks if section is not None and c.section == section] \
        or [c.content for c in document.chunks[max(0, chunk_index - 1):chunk_index + 2]]
    share = max(200, max_tokens * 4 // max(1, len(around)))   # every part of the section gets its share
    shown = "\n\n".join(part[:share] for part in around)
    return f"Outline:\n{outline(document)}"[:max_tokens * 4], f"Its section:\n{shown}\n\nThe chunk:\n{chunk}"


class OpenAIChatEnricher:
    """An `Enricher` over the OpenAI-compatible chat completions API, through the official
    `openai` client (pip install 'pgsift[enrich]'): any server that speaks it (OpenAI, vLLM,
    Ollama, llama.cpp, LiteLLM...) at `base_url`. `max_retries` and `timeout` are the client's
    (429 and 5xx are retried by it); what still fails is a warning, never an exception."""

    def __init__(self, model: str, *, base_url: str | None = None, api_key: str | None = None,
                 timeout: float = 60.0, max_retries: int = 2, client: Any = None) -> None:
        if not model or not isinstance(model, str):
            raise InvalidArgument("the enricher needs a model name")
        self.model = model
        # Part of the cache key: another endpoint serving a model of the same name answers apart.
        self.fingerprint = base_url or "default"
        if client is None:
            try:
                import openai
            except ImportError as exc:   # pragma: no cover - the extra is missing
                raise InvalidArgument("OpenAIChatEnricher needs the openai package: "
                                      "pip install 'pgsift[enrich]'") from exc
            # The environment's OPENAI_API_KEY when none is given; a local server needs none.
            client = openai.OpenAI(base_url=base_url,
                                   api_key=api_key or os.environ.get("OPENAI_API_KEY") or "not-needed",
                                   timeout=timeout, max_retries=max_retries)
        self.client = client

    def enrich(self, document: str, chunk: str, *, context: bool, questions: int) -> Enrichment:
        asked = []
        if context:
            asked.append("the context")
        if questions:
            asked.append(f"exactly {questions} questions")
        messages = [
            {"role": "system", "content": SYSTEM},
            # The document first, the same for every chunk of it: a cached prefix.
            {"role": "user", "content": f"<document>\n{document}\n</document>"},
            {"role": "user", "content": f"<chunk>\n{chunk}\n</chunk>\nWrite {' and '.join(asked)}."},
        ]
        try:
            response = self.client.chat.completions.create(model=self.model, messages=messages, temperature=0)
        except Exception as exc:  # noqa: BLE001 - any provider fault is a warning, never a failed ingest
            return Enrichment(None, [], warning=f"call failed: {type(exc).__name__}: {str(exc)[:160]}", failed=True,
                              call_error=True)
        usage = getattr(response, "usage", None)
        tokens_in = int(getattr(usage, "prompt_tokens", 0) or 0)
        tokens_out = int(getattr(usage, "completion_tokens", 0) or 0)
        try:
            text = response.choices[0].message.content
        except (AttributeError, IndexError, TypeError):
            text = None
        parsed = parse_output(text, context=context, questions=questions)
        return dataclasses.replace(parsed, input_tokens=tokens_in, output_tokens=tokens_out)


@dataclass(frozen=True)
class Settings:
    """What is asked of the enricher; part of the cache key."""

    context: bool = True
    questions: int = 3
    questions_as: str = "embedding"
    max_document_tokens: int = 6000

    def check(self) -> None:
        if not isinstance(self.questions, int) or isinstance(self.questions, bool) \
                or not 0 <= self.questions <= MAX_QUESTIONS:
            raise InvalidArgument(f"questions must be 0 to {MAX_QUESTIONS}, got {self.questions!r}")
        if not self.context and not self.questions:
            raise InvalidArgument("enrichment asks for nothing: context=False and questions=0")
        if self.questions_as not in POLICIES:
            raise InvalidArgument(f"questions_as must be one of {', '.join(POLICIES)}, got {self.questions_as!r}")
        if self.max_document_tokens < 100:
            raise InvalidArgument("max_document_tokens must be at least 100")


def enrichment_key(document_part: str, chunk_part: str, enricher: Any, settings: Settings) -> str:
    """The cache key: exactly what the prompt shows (the document part and the chunk part),
    the model (and the enricher's `fingerprint`, if it has one: another endpoint or prompt)
    and what is asked; not how the answer is used (questions_as)."""
    payload = json.dumps([PROMPT_VERSION, enricher.model, str(getattr(enricher, "fingerprint", "")),
                          hashlib.sha256(document_part.encode()).hexdigest(), chunk_part,
                          settings.context, settings.questions], ensure_ascii=False)
    return hashlib.sha256(payload.encode()).hexdigest()


def expected_tokens(document_part: str, chunk_part: str, settings: Settings) -> int:
    """What a call will cost at most, before it is made: the prompt and the longest answer."""
    return estimate_tokens(SYSTEM) + 30 + estimate_tokens(document_part) + estimate_tokens(chunk_part) \
        + (140 if settings.context else 0) + 25 * settings.questions + 10


def call(enricher: Any, document_part: str, chunk_part: str, settings: Settings) -> Enrichment:
    """One call, whatever the enricher: an exception is a failure, the answer is held to the
    contract (normalise), and tokens a provider did not report are estimated."""
    try:
        got = enricher.enrich(document_part, chunk_part, context=settings.context, questions=settings.questions)
    except Exception as exc:  # noqa: BLE001 - an enricher's fault never fails an ingestion
        return Enrichment(None, [], warning=f"call failed: {type(exc).__name__}: {str(exc)[:160]}", failed=True,
                          call_error=True)
    if not isinstance(got, Enrichment):
        return Enrichment(None, [], warning=f"the enricher returned {type(got).__name__}, not an Enrichment",
                          failed=True)
    if got.failed:
        return got
    got = normalise(got, context=settings.context, questions=settings.questions)
    if got.context is None and not got.questions:
        got = dataclasses.replace(got, failed=True, warning="; ".join(filter(None, [got.warning, "nothing usable"])))
    if got.input_tokens <= 0 and got.output_tokens <= 0:
        got = dataclasses.replace(got, input_tokens=estimate_tokens(document_part) + estimate_tokens(chunk_part),
                                  output_tokens=estimate_tokens(" ".join([got.context or "", *got.questions])))
    return got


def compose_context(header: str | None, context: str | None, questions: Sequence[str]) -> str | None:
    """Its deterministic header, the model's context and its questions: the chunk's context
    column (what the lexical leg indexes, questions included in every policy), and what is
    embedded before its text (questions only with questions_as "embedding" or "both")."""
    parts = [p for p in (header, context) if p]
    if questions:
        parts.append("Questions: " + " ".join(questions))
    return "\n\n".join(parts) or None


@dataclass(frozen=True)
class Estimate:
    """What an ingestion would send before it runs: tokens, and their cost at the model's
    rates (None, with `note`, when it cannot price)."""

    chunks: int
    input_tokens: int
    output_tokens: int
    cost_usd: float | None
    note: str


def price(model: str, input_tokens: int, output_tokens: int,
          rates: Mapping[str, tuple[float, float]] | None = None) -> float | None:
    table = {**RATES, **(rates or {})}
    if model not in table:
        return None
    per_in, per_out = table[model]
    return (input_tokens * per_in + output_tokens * per_out) / 1_000_000


def estimate(documents: Sequence[Document], model: str, settings: Settings | None = None,
             rates: Mapping[str, tuple[float, float]] | None = None) -> Estimate:
    """Tokens an ingestion would send and receive, an upper bound (every chunk called: nothing
    reused, no cached-input discount), priced from `RATES` or `rates`."""
    settings = settings or Settings()
    settings.check()
    chunks = input_tokens = output_tokens = 0
    overhead = estimate_tokens(SYSTEM) + 30
    for doc in documents:
        for i in range(len(doc.chunks)):
            chunks += 1
            doc_part, chunk_part = prompt_parts(doc, i, settings.max_document_tokens)
            input_tokens += overhead + estimate_tokens(doc_part) + estimate_tokens(chunk_part)
            output_tokens += (140 if settings.context else 0) + 25 * settings.questions + 10
    cost = price(model, input_tokens, output_tokens, rates)
    note = (f"about ${cost:.4f} at {model}'s rates" if cost is not None
            else f"cannot price: no rates for model {model!r} (pass rates={{model: (input, output)}} per Mtok)")
    return Estimate(chunks, input_tokens, output_tokens, cost, note)
