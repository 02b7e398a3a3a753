"""Rows in and out of pgsift, as dataclasses.

The row types mirror the SQL contract's composite types (sift.hit,
sift.candidate, sift.explanation) column for column; knob values travel as
dicts (`Collection.knobs`, `Collection.settings`), so a new knob needs no
change here.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

Vector = Sequence[float] | npt.NDArray[Any]


class Embedder(Protocol):
    """Anything that turns texts into L2-normalised vectors (see pgsift.embed)."""

    dims: int

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]: ...


@dataclass(frozen=True)
class Collection:
    """A collection as sift.collection_info returns it: `knobs` holds the values set for it,
    `settings` every knob in force (defaults included, within its tenant's ceilings),
    `dense_index` "built", or "queued" while the HNSW index its active vector space walks waits
    for the operator's build (searched by exact scan until then)."""

    collection_id: int
    tenant: str
    name: str
    search_language: str
    embedding_dims: int
    distance: str
    description: str | None
    reranker: str | None
    created_at: datetime
    knobs: dict[str, Any]
    settings: dict[str, Any]
    dense_index: str


@dataclass(frozen=True)
class Section:
    """One part of a document's heading tree: its heading (None for the text before the first
    heading, level 0), its level (1-6) and its enclosing section (an index into
    `Document.sections`, None at top level)."""

    heading: str | None
    level: int
    parent: int | None = None


@dataclass
class Chunk:
    """One chunk to write: its text, its embedding, and optionally a context header, its
    token count, its section (an index into `Document.sections`) and its token vectors for
    late interaction (one vector per token, from a ColBERT-style model; written with it)."""

    content: str
    embedding: Vector | None
    context: str | None = None
    token_count: int | None = None
    section: int | None = None
    token_vectors: Sequence[Vector] | npt.NDArray[Any] | None = None
    # Set by Client.enrich_documents: what the model wrote (written with the chunk).
    enrichment: ChunkEnrichment | None = None


def embedding_text(context: str | None, content: str) -> str:
    """What a chunk's vector is embedded from: its context header, then its text (defined
    once, for ingest, enrichment and the benchmarks)."""
    return f"{context}\n\n{content}" if context else content


@dataclass(frozen=True)
class ChunkEnrichment:
    """What a language model wrote for a chunk (pgsift.enrich), kept apart from its text, and
    the cache key it is found again by."""

    key: str
    context: str | None
    questions: list[str]
    model: str | None
    # questions_as "vectors" or "both": each question's vector (the dense leg searches them).
    question_vectors: list[Any] | None = None
    # The chunk's deterministic header before enrichment (its context is composed from it).
    header: str | None = None


@dataclass
class EnrichmentRun:
    """One document's enrichment in one ingestion: chunks enriched, reused (unchanged text,
    no call), failed and skipped (past the token budget), tokens, cost (None: cannot price)
    and warnings. Recorded with the document (sift.enrichment_history)."""

    model: str
    chunks: int = 0
    enriched: int = 0
    reused: int = 0
    failed: int = 0
    skipped: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float | None = None
    warnings: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class EnrichmentRecord:
    """One row of sift.enrichment_history: a recorded run of a document."""

    source_uri: str
    run_id: int
    model: str | None
    chunks: int
    enriched: int
    reused: int
    failed: int
    skipped: int
    input_tokens: int
    output_tokens: int
    cost_usd: float | None
    warnings: list[str]
    created_at: datetime


@dataclass
class Document:
    """A document and all of its chunks; writing it replaces whatever it had."""

    source_uri: str
    chunks: list[Chunk]
    title: str | None = None
    language: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)
    created_at: datetime | None = None
    modified_at: datetime | None = None
    sections: list[Section] = field(default_factory=list)
    # Set by Client.enrich_documents: what enriching it spent (recorded with the document).
    enrichment_run: EnrichmentRun | None = None


@dataclass(frozen=True)
class Hit:
    """One result row (sift.hit). `rank` is its strength (1 = best after every knob), `position`
    the order it is presented in (they differ only with lost_in_the_middle). `score` is
    `base_score` (fused, or the reranker's) times `recency_factor` times `boost`. The leg
    columns are None for rows of `finalize`, which does not know how a pool was retrieved.
    `rerank_score` and `fused_score` are set by the client when a reranker scored the pool.

    Structure (parent_return, neighbours): `merged` hits stand for their whole section
    (`content` is the section's text, `chunk_ids` its chunks, `matched_chunk_ids` the passages
    that matched); `window_text` is the hit with its neighbours (`window_chunk_ids`), or None
    when `window_of` names the better hit whose window already holds this one's text."""

    rank: int
    position: int
    chunk_id: int
    document_id: int
    collection_name: str
    source_uri: str
    title: str | None
    ordinal: int
    content: str
    context: str | None
    metadata: dict[str, Any]
    score: float
    base_score: float
    pool_rank: int
    found_by: str | None
    dense_rank: int | None
    dense_distance: float | None
    lexical_rank: int | None
    lexical_score: float | None
    legs: list[str] | None
    lexical_query: str | None
    recency_factor: float
    boost: float
    threshold_applied: bool
    below_threshold: int
    threshold_skipped: str | None
    reranker: str | None
    rerank_refused: str | None
    section_id: int | None = None
    merged: bool = False
    chunk_ids: list[int] | None = None
    matched_chunk_ids: list[int] | None = None
    token_count: int | None = None
    window_chunk_ids: list[int] | None = None
    window_text: str | None = None
    window_of: int | None = None
    language: str | None = None
    language_factor: float = 1.0
    lexical_configs: list[str] | None = None
    snippet: str | None = None
    # search_page, on a page's last hit by rank: the cursor that continues after it, or why
    # nothing follows ("exhausted" or "window"). None on every other hit.
    cursor: str | None = None
    cursor_end: str | None = None
    # The vector space the dense leg searched, and how many chunks lack a vector in it (0
    # for a complete one; None when the dense leg did not run or for finalize's rows).
    dense_space: str | None = None
    dense_space_missing: int | None = None
    # Whether the lexical leg's top n is proven exact (False: its budget, lexical_budget,
    # lexical_exact_limit and lexical_list_limit, ran out first; every score is exact, the set
    # may miss a better chunk); None when the leg did not run. The same on every hit of a
    # collection in a call.
    lexical_exact: bool | None = None
    # MaxSim of the question's token vectors against the chunk's (a search with query_tokens);
    # None without them, for a chunk without token vectors or past late_interaction_top_n.
    late_interaction_score: float | None = None
    # What each leg that found the chunk gave it, by leg ("dense", "lexical", an added space's
    # name): {"rank", "raw" (distance or BM25 score), "weight", "contribution"}.
    leg_details: dict[str, Any] | None = None
    rerank_score: float | None = None
    fused_score: float | None = None

    @property
    def text(self) -> str:
        """The text to hand a model for this hit: its window when it has one, else its content
        ("" when a better hit's window already holds it, so nothing is sent twice)."""
        if self.window_of is not None:
            return ""
        return self.window_text if self.window_text is not None else self.content


@dataclass(frozen=True)
class Candidate:
    """One row of the fused pool (sift.candidate)."""

    chunk_id: int
    document_id: int
    collection_name: str
    fused_rank: int
    score: float
    found_by: str
    dense_rank: int | None
    dense_distance: float | None
    lexical_rank: int | None
    lexical_score: float | None
    legs: list[str]
    lexical_query: str | None
    lexical_configs: list[str] | None = None
    # Whether the lexical leg's top n is proven exact (False: its budget ran out first); None:
    # the leg did not run.
    lexical_exact: bool | None = None
    # MaxSim against the question's token vectors (sift.search with query_tokens), else None.
    late_interaction_score: float | None = None
    # What each leg gave the chunk: {leg: {"rank", "raw", "weight", "contribution"}}.
    leg_details: dict[str, Any] | None = None


@dataclass(frozen=True)
class Explanation:
    """One row of the candidate view (sift.explanation): what every stage did to a candidate."""

    fused_rank: int | None
    chunk_id: int
    document_id: int
    collection_name: str
    source_uri: str
    title: str | None
    ordinal: int
    found_by: str | None
    dense_rank: int | None
    dense_distance: float | None
    lexical_rank: int | None
    lexical_score: float | None
    base_score: float | None
    score: float | None
    kept: bool
    cut_by: str | None
    reason: str
    legs: list[str]
    lexical_query: str | None
    recency_date: datetime | None
    recency_factor: float | None
    boost: float | None
    cap_status: str | None
    mmr_similarity: float | None
    mmr_penalty: float | None
    final_rank: int | None
    position: int | None
    threshold_applied: bool
    below_threshold: int
    threshold_skipped: str | None
    section_id: int | None = None
    merged: bool = False
    matched_chunk_ids: list[int] | None = None
    merged_into: int | None = None
    language: str | None = None
    language_factor: float | None = None
    lexical_configs: list[str] | None = None
    # Whether the lexical leg's top n is proven exact (False: its budget ran out first); None:
    # the leg did not run.
    lexical_exact: bool | None = None
    # MaxSim against the question's token vectors (explain with query_tokens), else None.
    late_interaction_score: float | None = None
    # What each leg gave the chunk: {leg: {"rank", "raw", "weight", "contribution"}}.
    leg_details: dict[str, Any] | None = None
    # The reranker a search over the pool uses (None: off); the score it gave the candidate
    # (the provider's, as Hit.rerank_score) and its place in the reranked pool; and whether
    # this view includes the rerank ("reranked: ...", "not reranked: ...", "refused: ...").
    reranker: str | None = None
    rerank_score: float | None = None
    rerank_rank: int | None = None
    rerank_status: str | None = None


@dataclass(frozen=True)
class MaxSimScore:
    """One row of sift.maxsim: a chunk's late-interaction score (None when it has no token
    vectors: it keeps its given place behind the scored ones) and its rank."""

    chunk_id: int
    rank: int
    score: float | None
    token_count: int


@dataclass(frozen=True)
class ResolvedSection:
    """One row of sift.resolve_sections: a section a hit's chunks belong to (depth 0) or one of
    its ancestors (depth 1, 2, ...), with where it is in its document and its own text."""

    section_id: int
    document_id: int
    collection_name: str
    source_uri: str
    title: str | None
    ordinal: int
    level: int
    heading: str | None
    path: list[str] | None
    parent_section_id: int | None
    depth: int
    for_chunk_ids: list[int]
    section_chunk_ids: list[int]
    content: str
    token_count: int | None


@dataclass(frozen=True)
class Knob:
    """One row of sift.knobs(): a knob's definition, and with a collection its value in force."""

    name: str
    type: str
    default_value: Any
    allowed: str
    can_be_off: bool
    off_value: Any
    scope: str
    stage: str
    meaning: str
    value: Any
    source: str | None


@dataclass(frozen=True)
class RerankerConfig:
    """The reranker SQL chose for a search (a row of sift.reranker_for). `refused` says why it
    cannot run (the provider columns are then None); `secret_source` is where the operator keeps
    this tenant's key ("env:VAR", or a reference for the application's resolver)."""

    tenant: str
    alias: str | None
    provider: str | None
    model: str | None
    base_url: str | None = None
    secret_ref: str | None = None
    secret_source: str | None = None
    timeout_ms: int | None = 2000
    deadline_ms: int | None = 3000
    max_attempts: int | None = 2
    context_chars: int | None = 1500
    rerank_top_n: int | None = 50
    chosen_by: str | None = None
    refused: str | None = None
    reranker_id: int | None = None
    # The provider's limits for this model (a row of sift.reranker_limits; None: none known).
    limits: dict[str, Any] | None = None

    @property
    def usable(self) -> bool:
        """Switched on, named, allowed: a search with this config calls the reranker."""
        return self.refused is None and self.provider is not None


@dataclass(frozen=True)
class VectorSpace:
    """One of a collection's vector spaces (sift.vector_space_status): `builtin` (stored with the
    chunks), `active` (searched and written), its chunks and how many lack a vector in it, and
    its HNSW index (`dense_precision` full or half, `hnsw_m`, `hnsw_ef_construction`,
    `index_name`: its own, or the one shared by its size and distance; `index_built`: false while
    it waits for the operator's build, the space searched by exact scan meanwhile)."""

    name: str
    dimensions: int
    distance: str
    model: str | None
    builtin: bool
    active: bool
    chunks: int
    missing: int
    created_at: datetime
    dense_precision: str
    hnsw_m: int
    hnsw_ef_construction: int
    index_name: str
    index_built: bool


@dataclass(frozen=True)
class ReembedReport:
    """What Client.reembed did: vectors written in how many batches, whether it switched searches
    to the space (and from which), whether it dropped the old one, and how long it took."""

    collection: str
    space: str
    written: int
    batches: int
    switched: bool
    previous: str | None
    dropped: bool
    seconds: float


@dataclass(frozen=True)
class SearchResult:
    """The hits, plus how they were produced."""

    hits: list[Hit]
    # What reranking did, when the collections use a reranker (pgsift.rerankers.RerankOutcome:
    # reranked, partial, fault, reason, alias, chosen_by, latency_ms, usage_recorded, ...).
    rerank: Any = None

    @property
    def reranked(self) -> bool:
        """Whether a reranker's scores ordered these hits (False after any fallback)."""
        return bool(self.rerank is not None and self.rerank.applied)

    @property
    def legs(self) -> list[str]:
        """The legs that ran, in any of the collections searched."""
        return [leg for leg in ("dense", "lexical") if any(leg in (h.legs or ()) for h in self.hits)]

    @property
    def lexical_query(self) -> str | None:
        return self.hits[0].lexical_query if self.hits else None

    @property
    def threshold_applied(self) -> bool | None:
        """Whether a score threshold was in effect; None when nothing came back (ask `explain`)."""
        return self.hits[0].threshold_applied if self.hits else None

    @property
    def below_threshold(self) -> int | None:
        """How many candidates the score threshold dropped; None when nothing came back."""
        return self.hits[0].below_threshold if self.hits else None

    @property
    def threshold_skipped(self) -> str | None:
        """Why a score threshold calibrated for a reranker was not applied to these scores."""
        return self.hits[0].threshold_skipped if self.hits else None

    def __iter__(self) -> Iterator[Hit]:
        return iter(self.hits)

    def __len__(self) -> int:
        return len(self.hits)

    def __getitem__(self, i: int) -> Hit:
        return self.hits[i]


@dataclass(frozen=True)
class Page(SearchResult):
    """One page of search_page: the hits, `cursor` to pass for the next page (None: no more),
    and `end`, why there are no more: "exhausted" (the legs found nothing further) or "window"
    (page_window hits were served; raise the knob for more)."""

    cursor: str | None = None
    end: str | None = None

    @classmethod
    def of(cls, hits: list[Hit], rerank: Any = None) -> Page:
        """The page of these hits: its last hit by rank carries the cursor or the end (with
        lost_in_the_middle the last shown is not the last ranked); no hit: nothing was left."""
        if not hits:
            return cls(hits, rerank=rerank, end="exhausted")
        last = max(hits, key=lambda h: (h.rank, h.chunk_id))
        return cls(hits, rerank=rerank, cursor=last.cursor, end=last.cursor_end)


@dataclass(frozen=True)
class Reranked:
    """The rerank half of a search (Client.rerank): the reranker used, the pool it scored (in
    fused order) with each candidate's text, and what the rerank did (a
    pgsift.rerankers.RerankOutcome; its scores are in pool order)."""

    config: RerankerConfig | None
    pool: list[Candidate]
    texts: list[str]
    outcome: Any
    # Whether the fused pool went on past the candidates taken (more could be ranked).
    more: bool = False


def dataclass_row(cls: type[Any]) -> Any:
    """A psycopg row factory for one of these dataclasses that fills each row's fields
    directly instead of calling the generated ``__init__``: 17 us a Hit (49 keyword
    arguments into a frozen class) against ~2, the most of what a client spends on a page
    of 100 hits. Fields the query does not select take their defaults. For plain
    dataclasses without ``__post_init__`` or slots only (checked here)."""
    import dataclasses

    if not dataclasses.is_dataclass(cls) or hasattr(cls, "__post_init__") or hasattr(cls, "__slots__"):
        raise TypeError(f"{cls!r} is not a plain dataclass")
    all_fields = dataclasses.fields(cls)
    known = {f.name for f in all_fields if f.init}

    def factory(cursor: Any) -> Any:
        # Checked when the first row is built, as class_row fails then: a statement of
        # several whose rows nobody fetches gets a factory too.
        names = [d.name for d in cursor.description or []]
        fixed = {f.name: f.default for f in all_fields
                 if f.name not in names and f.default is not dataclasses.MISSING}
        made: dict[str, Any] = {f.name: f.default_factory for f in all_fields
                                if f.name not in names and f.default_factory is not dataclasses.MISSING}
        problem = next((f"{cls.__name__} has no field {n!r}" for n in names if n not in known), None) or next(
            (f"{cls.__name__} needs {f.name!r}, which the query does not select" for f in all_fields
             if f.name not in names and f.name not in fixed and f.name not in made), None)
        new = object.__new__

        order = [f.name for f in all_fields]
        in_order = names == order   # every field selected, in the class's order (columns() does so)

        def make(values: Sequence[Any]) -> Any:
            if problem:
                raise TypeError(problem)
            obj = new(cls)
            state = obj.__dict__
            if in_order:
                state.update(zip(names, values))
                return obj
            given = dict(zip(names, values))
            for name in order:   # the instance's dict in field order, as __init__ leaves it
                if name in given:
                    state[name] = given[name]
                elif name in fixed:
                    state[name] = fixed[name]
                else:
                    state[name] = made[name]()
            return obj

        return make

    return factory
