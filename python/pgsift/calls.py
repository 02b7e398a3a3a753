"""What Client and AsyncClient share without touching a connection: argument checks, the
parameters of each call, and putting a reranked answer back together.

Checks here catch what would otherwise surface as a raw driver error (a NUL byte, a
value JSON cannot carry); everything about knobs themselves is the database's to check.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import date, datetime, timedelta
from decimal import Decimal
from typing import Any

import numpy as np
from psycopg.types.json import Jsonb

from .errors import InvalidArgument
from .models import Candidate, Collection, Document, Explanation, Hit, Reranked, RerankerConfig, Section, embedding_text
from .rerankers.outcome import log_fault
from .vectors import Vec, vec

MAX_POOL = 1000   # sift.search's match_count bound
# How deep a filter, metadata or knobs may nest (a value inside at most this many dicts and
# lists): the database's limit (sift._check_nesting in sql/00_core.sql; change both together),
# checked here before anything recurses that deep, so it is an InvalidArgument naming the limit,
# never a RecursionError.
MAX_JSON_DEPTH = 64


def names(collection: str | Sequence[str]) -> list[str]:
    return [collection] if isinstance(collection, str) else list(collection)


def collection_args(collection: Any) -> dict[str, Any]:
    """{collection, collections} for the SQL call: one name, or a list of names."""
    if isinstance(collection, str):
        return {"collection": check_text(collection, "collection"), "collections": None}
    if isinstance(collection, Sequence) and collection and all(isinstance(n, str) for n in collection):
        return {"collection": None, "collections": [check_text(n, "collection") for n in collection]}
    raise InvalidArgument("collection must be a name or a non-empty list of names")


def check_text(value: Any, what: str, *, blank: bool = True) -> str:
    """A text the database can store: a str without NUL characters (PostgreSQL has no room
    for them), and not blank unless allowed."""
    if not isinstance(value, str):
        raise InvalidArgument(f"{what} must be a string, got {type(value).__name__}")
    if "\x00" in value:
        raise InvalidArgument(f"{what} contains a NUL character, which PostgreSQL text cannot hold")
    if not blank and not value.strip():
        raise InvalidArgument(f"{what} is blank")
    return value


def check_int(value: Any, what: str) -> int:
    """An integer the database's integer holds (the database checks its range further)."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise InvalidArgument(f"{what} must be an integer, got {type(value).__name__}")
    if not -2**31 <= int(value) < 2**31:
        raise InvalidArgument(f"{what} is out of range: {value}")
    return int(value)


def check_top_k(top_k: Any) -> int:
    if not isinstance(top_k, int) or isinstance(top_k, bool):
        raise InvalidArgument("top_k must be an integer")
    return top_k


def _json_value(value: Any, where: str, depth: int = 0, root: str | None = None) -> Any:
    """A Python value as JSON: timedeltas as PostgreSQL intervals, dates as ISO text, numpy
    numbers and Decimals as numbers; NUL characters, non-finite numbers and nesting deeper
    than MAX_JSON_DEPTH refused (`depth`: the containers `value` is inside of `root`)."""
    root = root or where
    if isinstance(value, (Mapping, list, tuple)) and value and depth >= MAX_JSON_DEPTH:
        raise InvalidArgument(f"{root} nests more than {MAX_JSON_DEPTH} levels deep; filters and metadata nest "
                              f"at most {MAX_JSON_DEPTH} levels (flatten it; a filter reaches into nested objects with "
                              'dotted keys ({"a.b": 1}))')
    if value is None or isinstance(value, (bool, int)):
        return value
    if isinstance(value, (float, np.floating)):
        if not math.isfinite(float(value)):
            raise InvalidArgument(f"{where} is not a finite number")
        return float(value)
    if isinstance(value, np.integer):
        return int(value)
    if isinstance(value, Decimal):   # (a numeric column's value, as psycopg reads it)
        if value.is_finite() and value == value.to_integral_value():
            return int(value)
        if not (value.is_finite() and math.isfinite(float(value))):
            raise InvalidArgument(f"{where} is not a finite number")
        return float(value)   # (as a float: 17 significant digits)
    if isinstance(value, str):
        return check_text(value, where)
    if isinstance(value, timedelta):   # days kept apart, as an interval keeps them (no exponent)
        seconds = f"{value.seconds + value.microseconds / 1e6:.6f}".rstrip("0").rstrip(".")
        return f"{value.days} days {seconds} seconds"
    if isinstance(value, (datetime, date)):
        return value.isoformat()
    if isinstance(value, Mapping):
        return {check_text(str(k), f"a key of {where}"): _json_value(v, f"{where}.{k}", depth + 1, root)
                for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_json_value(v, f"{where}[{i}]", depth + 1, root) for i, v in enumerate(value)]
    raise InvalidArgument(f"{where} must be JSON-like (a number, text, boolean, list or dict), "
                          f"got {type(value).__name__}")


def json_arg(value: Any, where: str) -> Jsonb:
    """Any JSON argument (golden questions' metadata...), checked as filters and metadata are."""
    return Jsonb(_json_value(value, where))


def knobs_json(knobs: Mapping[str, Any] | None) -> Jsonb:
    """A call's knobs as the jsonb argument (the database checks names, types and ranges)."""
    return Jsonb(_json_value(dict(knobs or {}), "knobs"))


def filter_json(filter: Any) -> Jsonb:
    if filter is not None and not isinstance(filter, Mapping):
        raise InvalidArgument("filter must be a dict (equality, or operators such as $gt and $in: sift.filter_path)")
    return Jsonb(_json_value(dict(filter or {}), "filter"))


def search_params(collection: Any, query: Any, embedding: Any, top_k: Any, filter: Any,
                  knobs: Mapping[str, Any]) -> dict[str, Any]:
    """The parameters of sift.search / candidates / explain."""
    return {**collection_args(collection), "query_text": check_text(query or "", "query"),
            "query_embedding": None if embedding is None else vec(embedding, "query embedding"),
            "match_count": check_top_k(top_k), "filter": filter_json(filter), "knobs": knobs_json(knobs)}


def space_params(space_embeddings: Any, space_weights: Any) -> dict[str, Any]:
    """The added spaces' query vectors and weights as sift.search's parallel arrays."""
    if space_embeddings is None:
        if space_weights:
            raise InvalidArgument("space_weights names spaces that have no query vector (space_embeddings)")
        return {"spaces": None, "space_embeddings": None, "space_weights": None}
    if not isinstance(space_embeddings, Mapping) or not space_embeddings:
        raise InvalidArgument("space_embeddings must be a non-empty mapping of space name to its query vector")
    weights = dict(space_weights or {})
    unknown = sorted(set(weights) - set(space_embeddings))
    if unknown:
        raise InvalidArgument(f"space_weights names {unknown}, which space_embeddings does not")
    names = [check_text(n, "a space name", blank=False) for n in space_embeddings]
    out_weights: list[float | None] = []
    for name in names:
        w = weights.get(name)
        if w is not None and (isinstance(w, bool) or not isinstance(w, (int, float)) or not 0 <= w <= 1000):
            raise InvalidArgument(f"the weight of space {name!r} must be a number between 0 and 1,000, got {w!r}")
        out_weights.append(None if w is None else float(w))
    return {"spaces": names,
            "space_embeddings": [vec(v, f"the query vector of space {n!r}") for n, v in space_embeddings.items()],
            "space_weights": out_weights if any(w is not None for w in out_weights) else None}


# Late interaction: a chunk stores 1 to 2,048 token vectors, a question gives 1 to 256, each
# in half precision in the database (so a value beyond its range is refused here, named).
MAX_CHUNK_TOKENS = 2048
MAX_QUERY_TOKENS = 256
_HALF_MAX = 65504.0


def token_vectors(vectors: Any, what: str, most: int) -> list[Vec]:
    """A multivector (one vector per token) checked: 1 to `most` vectors of one size, each
    finite and within half precision's range; the error names `what` and the token."""
    if isinstance(vectors, np.ndarray):
        if vectors.ndim != 2:
            raise InvalidArgument(f"{what} must be a 2-d array (tokens x dimensions), got shape {vectors.shape}")
        vectors = list(vectors)
    if isinstance(vectors, (str, bytes)) or not isinstance(vectors, Sequence):
        raise InvalidArgument(f"{what} must be a sequence of vectors, one per token")
    if not 1 <= len(vectors) <= most:
        raise InvalidArgument(f"{what} has {len(vectors)} token vectors; 1 to {most:,} are taken")
    out = [vec(v, f"token {i} of {what}") for i, v in enumerate(vectors)]
    sizes = sorted({len(v.to_list()) for v in out})
    if len(sizes) > 1:
        raise InvalidArgument(f"the token vectors of {what} differ in size ({', '.join(map(str, sizes))})")
    for i, v in enumerate(out):
        if np.abs(v.to_numpy()).max() > _HALF_MAX:
            raise InvalidArgument(f"token {i} of {what} has a value beyond half precision's range (65,504)")
    return out


def late_params(params: dict[str, Any], query_tokens: Any) -> dict[str, Any]:
    """search_params plus the question's token vectors (None: no late interaction)."""
    tokens = None if query_tokens is None else token_vectors(query_tokens, "query_tokens", MAX_QUERY_TOKENS)
    return {**params, "query_tokens": tokens}


def page_params(params: dict[str, Any], cursor: Any) -> dict[str, Any]:
    """search_params plus the cursor of a paged search (top_k is the page size, 1 to 1,000)."""
    if not 1 <= params["match_count"] <= 1000:
        raise InvalidArgument(f"page_size must be between 1 and 1000, got {params['match_count']}")
    if cursor is not None and not isinstance(cursor, str):
        raise InvalidArgument("cursor must be the str a previous page gave (Page.cursor)")
    return {**params, "cursor": cursor}


def _cursor_payload(cursor: str | None) -> dict[str, Any]:
    """A cursor's payload, read without checking it (the database checks it), or {}."""
    if not cursor:
        return {}
    try:
        payload = cursor.split(".", 1)[0]
        data = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    except (ValueError, AttributeError):
        return {}
    return data if isinstance(data, dict) else {}


def cursor_kind(cursor: str | None) -> str | None:
    """Which entry point issued a cursor ("search", or "finalize" for a reranked page); None
    when it cannot be read (the database then refuses it, SF012)."""
    kind = _cursor_payload(cursor).get("k")
    return kind if isinstance(kind, str) else None


def cursor_window(cursor: str | None) -> int | None:
    """The window a cursor's pages are cut from (a reranked page reranks that many)."""
    window = _cursor_payload(cursor).get("w")
    return window if isinstance(window, int) and 1 <= window <= 1000 else None


def delete_params(collection: str, filter: Any, source_prefix: str | None, delete_all: bool,
                  keep: Sequence[str] | None = None) -> dict[str, Any]:
    """The parameters of sift.delete_documents, checked before anything is sent."""
    return {"collection": check_text(collection, "collection"),
            "filter": None if filter is None else filter_json(filter),
            "source_prefix": None if source_prefix is None else check_text(source_prefix, "source_prefix",
                                                                            blank=False),
            "delete_all": bool(delete_all), "keep": None if keep is None else list(keep)}


def finalize_params(collection: Any, chunk_ids: Any, scores: Any, top_k: Any, knobs: Mapping[str, Any],
                    scored_by: str | None, query: str | None = None) -> dict[str, Any]:
    try:
        ids = [int(i) for i in chunk_ids]
    except (TypeError, ValueError) as exc:
        raise InvalidArgument("chunk_ids must be a sequence of chunk ids") from exc
    values: list[float] | None = None
    if scores is not None:
        try:
            values = [float(x) for x in scores]
        except (TypeError, ValueError) as exc:
            raise InvalidArgument("scores must be a sequence of numbers") from exc
        if len(values) != len(ids):
            raise InvalidArgument(f"scores has {len(values)} values for {len(ids)} chunk_ids")
        if not all(math.isfinite(x) and x >= 0 for x in values):
            raise InvalidArgument("scores must be finite and >= 0 (recency and boost multiply them; "
                                  "map logits through a sigmoid first)")
    return {**collection_args(collection), "chunk_ids": ids, "scores": values, "match_count": check_top_k(top_k),
            "knobs": knobs_json(knobs), "scored_by": scored_by,
            "query_text": None if query is None else check_text(query, "query")}


def pool_size(top_k: int, config: RerankerConfig | None) -> int:
    """How many candidates a reranked search asks for: max(top_k, rerank_top_n)."""
    if config is None or not config.usable or top_k <= 0:
        return top_k
    return min(max(top_k, config.rerank_top_n or 0), MAX_POOL)


def aligned_texts(rows: list[tuple[int, int, str]], n: int) -> list[str]:
    """sift.rerank_texts rows (ord, chunk_id, text) as a list in pool order (a chunk deleted
    since the pool was read scores as empty)."""
    texts = [""] * n
    for ord_, _chunk_id, text in rows:
        texts[ord_ - 1] = text
    return texts


def pooled(rows: list[dict[str, Any]]) -> tuple[RerankerConfig | None, list[Candidate], list[str], bool]:
    """sift.rerank_pool's rows as (the reranker SQL chose, the pool in fused order, the text of each
    candidate, whether the fused pool goes on past it)."""
    names = [f.name for f in dataclasses.fields(Candidate)]
    pool = [Candidate(**{name: row[name] for name in names}) for row in rows]
    config = RerankerConfig(**rows[0]["reranker_config"]) if rows and rows[0]["reranker_config"] else None
    return config, pool, [row["document"] or "" for row in rows], bool(rows and rows[0]["more"])


def with_legs(final: list[Hit], pool: list[Candidate], rerank_scores: dict[int, float],
              reranker: str | None = None) -> list[Hit]:
    """finalize knows nothing of the legs nor of the reranker: put each hit's leg columns back
    from the pool, and name the reranker the search went to (as sift.search names it)."""
    legs = {c.chunk_id: c for c in pool}
    out = []
    for hit in final:
        c = legs[hit.chunk_id]
        out.append(dataclasses.replace(
            hit, reranker=reranker if reranker is not None else hit.reranker,
            rerank_score=rerank_scores.get(hit.chunk_id), fused_score=c.score, found_by=c.found_by,
            dense_rank=c.dense_rank, dense_distance=c.dense_distance, lexical_rank=c.lexical_rank,
            lexical_score=c.lexical_score, legs=c.legs, lexical_query=c.lexical_query,
            lexical_configs=c.lexical_configs, lexical_exact=c.lexical_exact, leg_details=c.leg_details))
    return out


def explained(rows: list[Explanation], reranked: Reranked | None) -> list[Explanation]:
    """explain's rows after the client reranked their pool: each candidate's rerank_score is the
    provider's (as on a hit; None for one it did not score), and a rerank that fell back says
    so in rerank_status (the rows are then the fused view, as the search's answer is)."""
    if reranked is None:
        return rows
    outcome = reranked.outcome
    raw = outcome.rerank_scores([c.chunk_id for c in reranked.pool])
    if outcome.finalize_scores() is not None:
        return [dataclasses.replace(r, rerank_score=raw.get(r.chunk_id)) for r in rows]
    log_fault(outcome)
    why = f"{outcome.fault}: {outcome.reason}" if outcome.fault else f"{outcome.skip}: {outcome.reason}"
    status = f'not reranked: the rerank by "{outcome.alias}" fell back to the fused ranking ({why}), as search does'
    return [dataclasses.replace(r, rerank_status=status) for r in rows]


# -- writing documents ----------------------------------------------------------------

Row = tuple[int, str, str | None, int | None, Vec, int | None, list[Vec] | None]
Batch = list[tuple[Document, dict[str, Any], list[Row]]]


def document_rows(collection: Collection, doc: Document) -> tuple[dict[str, Any], list[Row]]:
    """One document's row and its chunks' rows, checked before anything is sent."""
    uri = check_text(doc.source_uri, "source_uri", blank=False)
    if not doc.chunks:
        raise InvalidArgument(f"document {uri!r} has no chunks")
    check_sections(doc.sections, uri)
    rows: list[Row] = []
    for ordinal, chunk in enumerate(doc.chunks):
        where = f"chunk {ordinal} of {uri!r}"
        content = check_text(chunk.content, f"the text of {where}", blank=False)
        context = None if chunk.context is None else check_text(chunk.context, f"the context of {where}")
        vector = vec(chunk.embedding, f"the embedding of {where}")
        if chunk.section is not None and not (isinstance(chunk.section, int)
                                              and 0 <= chunk.section < len(doc.sections)):
            raise InvalidArgument(f"the section of {where} is {chunk.section!r}; the document has "
                                  f"{len(doc.sections)} section(s)")
        tokens = None if chunk.token_vectors is None else token_vectors(
            chunk.token_vectors, f"the token vectors of {where}", MAX_CHUNK_TOKENS)
        rows.append((ordinal, content, context, chunk.token_count, vector, chunk.section, tokens))
    params = {
        "collection_id": collection.collection_id, "source_uri": uri,
        "title": None if doc.title is None else check_text(doc.title, f"the title of {uri!r}"),
        "language": None if doc.language is None else check_text(doc.language, f"the language of {uri!r}"),
        "metadata": Jsonb(_json_value(dict(doc.metadata or {}), f"the metadata of {uri!r}")),
        "created_at": doc.created_at, "modified_at": doc.modified_at,
    }
    return params, rows


def section_chunk_ids(hits: Hit | Sequence[Hit] | Sequence[int]) -> list[int]:
    """The chunk ids resolve_sections looks up: a hit's own, its section's and its window's."""
    items = [hits] if isinstance(hits, Hit) else list(hits)
    ids: list[int] = []
    for item in items:
        if isinstance(item, Hit):
            ids += item.chunk_ids or [item.chunk_id]
            ids += item.window_chunk_ids or []
        elif isinstance(item, int) and not isinstance(item, bool):
            ids.append(item)
        else:
            raise InvalidArgument(f"resolve_sections takes hits or chunk ids, got {type(item).__name__}")
    return list(dict.fromkeys(ids))


def check_sections(sections: list[Section], uri: str) -> None:
    """A heading tree the database will accept: levels 0-6, each parent an earlier section."""
    for i, sec in enumerate(sections):
        where = f"section {i} of {uri!r}"
        if not isinstance(sec.level, int) or not 0 <= sec.level <= 6:
            raise InvalidArgument(f"the level of {where} is {sec.level!r}; levels are 0-6")
        if sec.parent is not None and not (isinstance(sec.parent, int) and 0 <= sec.parent < i):
            raise InvalidArgument(f"the parent of {where} is {sec.parent!r}; it must be an earlier section")
        if sec.heading is not None:
            check_text(sec.heading, f"the heading of {where}")


def section_arrays(document_ids: list[int], batch: Batch) -> dict[str, list[Any]] | None:
    """A batch's sections as sift.write_sections' parallel arrays (None: no document has any)."""
    keys = ("document_ids", "ordinals", "parent_ordinals", "levels", "headings")
    columns: dict[str, list[Any]] = {k: [] for k in keys}
    for doc_id, (doc, _, _) in zip(document_ids, batch, strict=True):
        for i, sec in enumerate(doc.sections):
            for key, value in zip(keys, (doc_id, i, sec.parent, sec.level, sec.heading), strict=True):
                columns[key].append(value)
    return columns if columns["ordinals"] else None


# Chunks per sift.write_chunks statement: bounds the statement's size (a 384-d chunk's vector
# is 1.5 kB in binary) however large a document is; a document of more is written by several
# statements in its one transaction.
CHUNKS_PER_STATEMENT = 2000


def chunk_arrays(document_ids: list[int], batch: Batch,
                 per_statement: int = CHUNKS_PER_STATEMENT) -> Iterator[dict[str, list[Any]]]:
    """A batch's chunks as sift.write_chunks' parallel arrays, at most `per_statement` at a time."""
    keys = ("document_ids", "ordinals", "contents", "contexts", "token_counts", "embeddings", "section_ordinals")
    columns: dict[str, list[Any]] = {k: [] for k in keys}
    for doc_id, (_, _, rows) in zip(document_ids, batch, strict=True):
        for row in rows:
            for key, value in zip(keys, (doc_id, *row[:6]), strict=True):
                columns[key].append(value)
            if len(columns["ordinals"]) == per_statement:
                yield columns
                columns = {k: [] for k in keys}
    if columns["ordinals"]:
        yield columns


# Token vectors per sift.write_token_vectors statement (a chunk's are never split: a
# statement replaces the tokens of the chunks it names).
TOKENS_PER_STATEMENT = 50000


def _flat_tokens(chunks: Iterable[tuple[int, list[Vec]]],
                 per_statement: int = TOKENS_PER_STATEMENT) -> Iterator[tuple[list[int], list[Vec]]]:
    """(chunk_ids, token_vectors) flat arrays of sift.write_token_vectors, whole chunks at a
    time (a statement replaces the tokens of the chunks it names), about `per_statement` each."""
    ids: list[int] = []
    vectors: list[Vec] = []
    for chunk_id, tokens in chunks:
        if ids and len(ids) + len(tokens) > per_statement:
            yield ids, vectors
            ids, vectors = [], []
        ids += [chunk_id] * len(tokens)
        vectors += tokens
    if ids:
        yield ids, vectors


def token_arrays(chunk_ids: Mapping[tuple[int, int], int], document_ids: list[int], batch: Batch,
                 per_statement: int = TOKENS_PER_STATEMENT) -> Iterator[dict[str, list[Any]]]:
    """A batch's token vectors as sift.write_token_vectors' flat arrays (chunk_ids looked up
    by (document id, ordinal))."""
    chunks = ((chunk_ids[(doc_id, row[0])], row[6]) for doc_id, (_, _, rows) in zip(document_ids, batch, strict=True)
              for row in rows if row[6] is not None)
    for ids, vectors in _flat_tokens(chunks, per_statement):
        yield {"chunk_ids": ids, "token_vectors": vectors}


def fresh_copy(doc: Document) -> Document:
    """A document and its chunks copied, so enriching never changes the caller's objects; a
    chunk enriched before gets its header back (its context is composed again, never twice)."""
    if not isinstance(doc, Document):
        raise InvalidArgument(f"documents must be pgsift.Document, got {type(doc).__name__}")
    chunks = [dataclasses.replace(c, context=c.enrichment.header if c.enrichment is not None else c.context,
                                  enrichment=None) for c in doc.chunks]
    for c in chunks:
        check_text(c.content, f"the text of a chunk of {doc.source_uri!r}", blank=False)
    return dataclasses.replace(doc, chunks=chunks, sections=list(doc.sections), metadata=dict(doc.metadata or {}),
                               enrichment_run=None)


def embed_chunks(docs: Sequence[Document], embedder: Any, contexts: Mapping[int, str | None] | None = None) -> None:
    """Embed every chunk again from its context and text (as ingest embeds them); `contexts`
    ({id(chunk): context}) replaces the stored context where what is embedded differs."""
    chunks = [c for d in docs for c in d.chunks]
    given = contexts or {}
    texts = [embedding_text(given.get(id(c), c.context), c.content) for c in chunks]
    for start in range(0, len(texts), 256):
        for chunk, vector in zip(chunks[start:start + 256], embedder.embed(texts[start:start + 256]), strict=True):
            chunk.embedding = vector


def embed_questions(docs: Sequence[Document], embedder: Any) -> None:
    """Each enriched chunk's questions embedded, on its enrichment (question_vectors)."""
    pending = [(c, q) for d in docs for c in d.chunks if c.enrichment is not None for q in c.enrichment.questions]
    vectors = []
    for start in range(0, len(pending), 256):
        vectors.extend(embedder.embed([q for _, q in pending[start:start + 256]]))
    got: dict[int, list[Any]] = {}
    for (chunk, _), vector in zip(pending, vectors, strict=True):
        got.setdefault(id(chunk), []).append(vector)
    for d in docs:
        for c in d.chunks:
            if c.enrichment is not None:
                c.enrichment = dataclasses.replace(c.enrichment, question_vectors=got.get(id(c), []))


def question_vector_arrays(chunk_ids: Mapping[tuple[int, int], int],
                           documents: Sequence[tuple[int, Document]]) -> dict[str, list[Any]]:
    """question_vectors of written documents as parallel arrays, for one statement."""
    out: dict[str, list[Any]] = {"chunk_ids": [], "ordinals": [], "embeddings": []}
    for doc_id, doc in documents:
        for ordinal, chunk in enumerate(doc.chunks):
            e = chunk.enrichment
            for i, vector in enumerate((e.question_vectors or []) if e is not None else []):
                out["chunk_ids"].append(chunk_ids[(doc_id, ordinal)])
                out["ordinals"].append(i)
                out["embeddings"].append(vec(vector, f"the vector of question {i} of chunk {ordinal}"))
    return out


def enrichment_rows(chunk_ids: Mapping[tuple[int, int], int],
                    documents: Sequence[tuple[int, Document]]) -> list[dict[str, Any]]:
    """chunk_enrichments rows of written documents (chunk ids by (document id, ordinal))."""
    rows = []
    for doc_id, doc in documents:
        for ordinal, chunk in enumerate(doc.chunks):
            e = chunk.enrichment
            if e is not None:
                rows.append({"chunk_id": chunk_ids[(doc_id, ordinal)], "key": e.key, "context": e.context,
                             "questions": list(e.questions), "model": e.model})
    return rows


def run_row(document_id: int, run: Any) -> dict[str, Any]:
    """An enrichment_runs row."""
    return {"document_id": document_id, **dataclasses.asdict(run)}


def chunk_token_params(collection: Any, tokens: Mapping[int, Any]) -> list[dict[str, Any]]:
    """write_token_vectors' statements for {chunk_id: its token vectors}, checked."""
    name = check_text(collection, "collection")
    if not isinstance(tokens, Mapping):
        raise InvalidArgument("tokens must be a mapping of chunk id to that chunk's token vectors")
    checked = []
    for chunk_id, given in tokens.items():
        if not isinstance(chunk_id, int) or isinstance(chunk_id, bool):
            raise InvalidArgument(f"tokens is keyed by chunk id (int), got {chunk_id!r}")
        checked.append((chunk_id, token_vectors(given, f"the token vectors of chunk {chunk_id}", MAX_CHUNK_TOKENS)))
    return [{"collection": name, "chunk_ids": ids, "token_vectors": vectors}
            for ids, vectors in _flat_tokens(checked)]


def batches(collection: Collection, documents: Iterable[Document], size: int,
            max_chunks: int = CHUNKS_PER_STATEMENT) -> Iterator[Batch]:
    """Documents checked and converted for writing, `size` at a time, or fewer once they
    hold `max_chunks` chunks (a large document is a batch of its own). A document that
    fails the checks first yields the valid ones before it, then raises."""
    batch: Batch = []
    chunks = 0
    for doc in documents:
        try:
            params, rows = document_rows(collection, doc)
        except InvalidArgument:
            if batch:
                yield batch
            raise
        if batch and chunks + len(rows) > max_chunks:
            yield batch
            batch, chunks = [], 0
        batch.append((doc, params, rows))
        chunks += len(rows)
        if len(batch) == size or chunks >= max_chunks:
            yield batch
            batch, chunks = [], 0
    if batch:
        yield batch
