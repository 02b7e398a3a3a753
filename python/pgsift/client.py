"""pgsift.Client: a thin layer over the SQL functions.

Every ranking decision happens in SQL (sift.search / sift.explain / sift.finalize); the client
adapts arguments, writes documents with COPY, and turns database errors into
typed ones. It takes what the application already has: a psycopg connection
or pool, sync or async. Sync methods need a sync source, `a*` methods an
async one.
"""

from __future__ import annotations

import contextlib
import math
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Sequence
from typing import Any, Protocol

import numpy as np
import psycopg
from psycopg.rows import class_row
from psycopg.types.json import Jsonb

import dataclasses

from . import migrate as _migrate
from . import queries
from . import rerank as _rerank
from .errors import InvalidArgument, translate
from .models import Candidate, Collection, Document, Hit, SearchResult, vector_text

try:  # optional extra
    import psycopg_pool
except ImportError:  # pragma: no cover - exercised only without the pool extra
    psycopg_pool = None


class Embedder(Protocol):
    """Anything that turns texts into L2-normalised vectors (see pgsift.embed)."""

    dims: int

    def embed(self, texts: Sequence[str]) -> np.ndarray: ...


# Documents between two refreshes of the BM25 statistics during a long ingest.
REFRESH_EVERY = 500
BATCH_DOCUMENTS = 50

_KNOBS = ("hybrid", "dense_weight", "rrf_k", "fetch_k", "exact_search_limit",
          "lexical_scorer", "bm25_k1", "bm25_b")
# Per-call overrides of the finalize stage (search, explain and finalize take them).
_RANKING_KNOBS = ("recency_field", "recency_half_life", "recency_weight", "recency_bias",
                  "per_document_cap", "mmr_lambda", "boosts", "score_threshold", "lost_in_the_middle")
# Stored ranking settings that None switches off in alter_collection (the others: None
# leaves them as they are).
_NULLABLE_RANKING = ("recency_field", "mmr_lambda", "score_threshold")


def _collection_args(collection: str | Sequence[str]) -> tuple[str | None, list[str] | None]:
    """(collection, collections) for the SQL call: one name, or a list of names."""
    if isinstance(collection, str):
        return collection, None
    if isinstance(collection, Sequence) and all(isinstance(n, str) for n in collection):
        return None, list(collection)
    raise InvalidArgument("collection must be a name or a list of names")


def _batches(col: Collection, documents: Iterable[Document], size: int):
    """Documents checked and converted for writing, `size` at a time. A document that
    fails the checks first yields the valid ones before it, then raises."""
    batch: list[tuple[Document, dict, list[tuple]]] = []
    for doc in documents:
        try:
            params, rows = Client._document_params(col, doc)
        except InvalidArgument:
            if batch:
                yield batch
            raise
        batch.append((doc, params, rows))
        if len(batch) == size:
            yield batch
            batch = []
    if batch:
        yield batch


def _boosts(boosts: Any, names: list[str]) -> list[float | None] | None:
    """Per-call boosts as the SQL array: boosts[i] for the i-th collection searched."""
    if boosts is None:
        return None
    if isinstance(boosts, dict):
        unknown = set(boosts) - set(names)
        if unknown:
            raise InvalidArgument(f"boosts names collection(s) not searched: {', '.join(sorted(unknown))}")
        boosts = [boosts.get(n) for n in names]
    if isinstance(boosts, (str, bytes)) or not isinstance(boosts, Sequence):
        raise InvalidArgument("boosts must be a dict {collection: boost} or a list in collection order")
    try:
        return [None if b is None else float(b) for b in boosts]
    except (TypeError, ValueError) as exc:
        raise InvalidArgument("boosts must be numbers") from exc


# The stored thresholds of the collections searched, with the reranker each was calibrated for.
_STORED_THRESHOLDS = """
select c.name::text, c.score_threshold::float8, c.score_threshold_reranker
from sift.collections c
where c.tenant = %(tenant)s::text and c.name = any(%(names)s::text[]) and c.score_threshold is not null
"""


def _threshold_guard(stored: list[tuple], knobs: dict, outcome: Any) -> tuple[float, bool, str] | None:
    """None when the stored thresholds apply as they are. Otherwise (threshold, applied, reason):
    some collection's threshold was calibrated for a reranker other than the one whose scores
    finalize sees (outcome.alias when its scores were applied; none after a fallback or without
    a reranker), so it is not applied: the threshold to pass per call is the highest of the
    others (applied), or 0, which keeps every score (scores are >= 0; not applied)."""
    if knobs.get("score_threshold") is not None:
        return None   # a per-call threshold is the caller's and always applies
    scored_by = outcome.alias if outcome is not None and outcome.applied else None
    skipped = [(n, t, r) for n, t, r in stored if r is not None and r != scored_by]
    if not skipped:
        return None
    kept = [t for n, t, r in stored if r is None or r == scored_by]
    if scored_by is not None:
        what = f'this pool was scored by reranker "{scored_by}"'
    elif outcome is not None and outcome.alias is not None:
        what = (f'the rerank by "{outcome.alias}" fell back to the fused scores '
                f"({outcome.fault or outcome.skip})")
    else:
        what = "no reranker scored this search (fused scores)"
    reason = "; ".join(f'score threshold {t:g} of collection "{n}" was calibrated for reranker "{r}"'
                       for n, t, r in skipped) + f", but {what}: not applied"
    return (max(kept), True, reason) if kept else (0.0, False, reason)


def _guarded(result: SearchResult, guard: tuple[float, bool, str] | None) -> SearchResult:
    if guard is None:
        return result
    _value, applied, reason = guard
    hits = result.hits if applied else [
        dataclasses.replace(h, threshold_applied=False, below_threshold=0) for h in result.hits]
    return dataclasses.replace(result, hits=hits, threshold_skipped=reason)


def _is_async(source: Any) -> bool:
    if isinstance(source, psycopg.AsyncConnection):
        return True
    return psycopg_pool is not None and isinstance(source, psycopg_pool.AsyncConnectionPool)


class Client:
    """Search and write pgsift collections through an existing connection or pool.

    >>> client = Client(psycopg.connect(url), tenant="acme")
    >>> client.search("handbook", "how do refunds work?", embedding=vec, top_k=5)
    """

    def __init__(self, source: Any, *, tenant: str = "default", embedder: Embedder | None = None):
        self.source = source
        self.tenant = tenant
        self.embedder = embedder
        self._async = _is_async(source)

    # -- connections -------------------------------------------------------

    @contextlib.contextmanager
    def _conn(self) -> Iterator[psycopg.Connection]:
        if self._async:
            raise TypeError("this Client wraps an async connection or pool: use the a* methods")
        if isinstance(self.source, psycopg.Connection):
            yield self.source
        else:
            with self.source.connection() as conn:
                yield conn

    @contextlib.asynccontextmanager
    async def _aconn(self) -> AsyncIterator[psycopg.AsyncConnection]:
        if not self._async:
            raise TypeError("this Client wraps a sync connection or pool: use the methods without 'a'")
        if isinstance(self.source, psycopg.AsyncConnection):
            yield self.source
        else:
            async with self.source.connection() as conn:
                yield conn

    def _fetch(self, query: Any, params: dict, row: type | None = None) -> list:
        return self._fetch_steps([(query, params)], row)

    async def _afetch(self, query: Any, params: dict, row: type | None = None) -> list:
        return await self._afetch_steps([(query, params)], row)

    def _fetch_steps(self, steps: list[tuple[Any, dict]], row: type | None = None) -> list:
        """Run statements in one transaction; the rows of the last one."""
        with self._conn() as conn:
            try:
                with conn.transaction():
                    rows: list = []
                    for query, params in steps:
                        cur = conn.cursor(row_factory=class_row(row)) if row else conn.cursor()
                        rows = cur.execute(query, params).fetchall()
                    return rows
            except psycopg.Error as exc:
                raise translate(exc) from exc

    async def _afetch_steps(self, steps: list[tuple[Any, dict]], row: type | None = None) -> list:
        async with self._aconn() as conn:
            try:
                async with conn.transaction():
                    rows: list = []
                    for query, params in steps:
                        cur = conn.cursor(row_factory=class_row(row)) if row else conn.cursor()
                        await cur.execute(query, params)
                        rows = await cur.fetchall()
                    return rows
            except psycopg.Error as exc:
                raise translate(exc) from exc

    # -- install -----------------------------------------------------------

    def migrate(self) -> list[str]:
        """Install or upgrade the sift schema; returns the migrations applied now."""
        with self._conn() as conn:
            return _migrate.migrate(conn)

    async def amigrate(self) -> list[str]:
        async with self._aconn() as conn:
            return await _migrate.amigrate(conn)

    # -- collections -------------------------------------------------------

    @staticmethod
    def _ranking_step(name: str, tenant: str, settings: dict, reset: list[str] | None = None) -> tuple[Any, dict]:
        params = dict.fromkeys(queries.RANKING_SETTING_CASTS)
        params.update(settings, name=name, tenant=tenant, reset=reset or None)
        return queries.ALTER_RANKING, params

    @classmethod
    def _create_steps(cls, name: str, embedding_dims: int, tenant: str, given: dict) -> list[tuple[Any, dict]]:
        unknown = set(given) - set(queries.CREATE_COLLECTION_CASTS) - set(queries.RANKING_SETTING_CASTS)
        if unknown:
            raise InvalidArgument(f"unknown collection setting(s): {', '.join(sorted(unknown))}")
        params = {"collection": name, "embedding_dims": embedding_dims, "tenant": tenant}
        params.update({k: v for k, v in given.items()
                       if v is not None and k in queries.CREATE_COLLECTION_CASTS})
        steps = [(queries.create_collection(list(params)), params)]
        ranking = {k: v for k, v in given.items() if v is not None and k in queries.RANKING_SETTING_CASTS}
        if ranking:
            steps.append(cls._ranking_step(name, tenant, ranking))
        return steps

    def create_collection(self, name: str, *, embedding_dims: int, **settings: Any) -> Collection:
        """Create a collection. Settings (search_language, distance, hybrid, dense_weight,
        rrf_k, fetch_k, exact_search_limit, description, lexical_scorer, bm25_k1, bm25_b, and
        the ranking settings recency_field, recency_half_life, recency_weight, recency_ceiling,
        per_document_cap, mmr_lambda, boost, score_threshold, lost_in_the_middle) left out take
        the database's defaults; the database range-checks each. One transaction."""
        steps = self._create_steps(name, embedding_dims, self.tenant, settings)
        return self._fetch_steps(steps, Collection)[0]

    async def acreate_collection(self, name: str, *, embedding_dims: int, **settings: Any) -> Collection:
        steps = self._create_steps(name, embedding_dims, self.tenant, settings)
        return (await self._afetch_steps(steps, Collection))[0]

    def _alter_steps(self, name: str, knobs: dict) -> list[tuple[Any, dict]]:
        base_keys = {*_KNOBS, "search_language", "description"}
        unknown = set(knobs) - base_keys - set(queries.RANKING_SETTING_CASTS)
        if unknown:
            raise InvalidArgument(f"unknown collection setting(s): {', '.join(sorted(unknown))}")
        ranking = {k: v for k, v in knobs.items() if k in queries.RANKING_SETTING_CASTS}
        steps = []
        if len(ranking) < len(knobs) or not knobs:
            params = dict.fromkeys(base_keys)
            params.update({k: v for k, v in knobs.items() if k in base_keys}, name=name, tenant=self.tenant)
            steps.append((queries.ALTER_COLLECTION, params))
        if ranking:
            # None turns off recency_field, mmr_lambda and score_threshold (their "off" is null).
            reset = [k for k in _NULLABLE_RANKING if k in ranking and ranking[k] is None]
            steps.append(self._ranking_step(name, self.tenant, ranking, reset))
        return steps

    def alter_collection(self, name: str, **knobs: Any) -> Collection:
        """Change a collection's knobs (hybrid, dense_weight, rrf_k, fetch_k, ..., and the ranking
        settings). None leaves a knob as it is, except recency_field, mmr_lambda and
        score_threshold, which None switches off."""
        return self._fetch_steps(self._alter_steps(name, knobs), Collection)[0]

    async def aalter_collection(self, name: str, **knobs: Any) -> Collection:
        return (await self._afetch_steps(self._alter_steps(name, knobs), Collection))[0]

    def get_collection(self, name: str) -> Collection:
        return self._fetch(queries.GET_COLLECTION, {"name": name, "tenant": self.tenant}, Collection)[0]

    async def aget_collection(self, name: str) -> Collection:
        return (await self._afetch(queries.GET_COLLECTION, {"name": name, "tenant": self.tenant}, Collection))[0]

    def list_collections(self) -> list[Collection]:
        return self._fetch(queries.LIST_COLLECTIONS, {"tenant": self.tenant}, Collection)

    def drop_collection(self, name: str) -> None:
        self._fetch(queries.DROP_COLLECTION, {"name": name, "tenant": self.tenant})

    async def adrop_collection(self, name: str) -> None:
        await self._afetch(queries.DROP_COLLECTION, {"name": name, "tenant": self.tenant})

    # -- documents ---------------------------------------------------------

    @staticmethod
    def _document_params(collection: Collection, doc: Document) -> tuple[dict, list[tuple]]:
        if not doc.chunks:
            raise InvalidArgument(f"document {doc.source_uri!r} has no chunks")
        rows = []
        for ordinal, chunk in enumerate(doc.chunks):
            if not isinstance(chunk.content, str) or not chunk.content.strip():
                raise InvalidArgument(f"chunk {ordinal} of {doc.source_uri!r} has no text")
            vec = vector_text(chunk.embedding, f"chunk {ordinal} of {doc.source_uri!r}")
            rows.append((ordinal, chunk.content, chunk.context, chunk.token_count, vec))
        params = {
            "collection_id": collection.collection_id, "source_uri": doc.source_uri,
            "title": doc.title, "language": doc.language, "metadata": Jsonb(doc.metadata or {}),
            "created_at": doc.created_at, "modified_at": doc.modified_at,
        }
        return params, rows

    def refresh_lexical_stats(self, collection: str) -> tuple[int, int]:
        """Fold pending BM25 statistics and build impact lists for common terms
        (searches are exact without it, faster after it). upsert_documents and
        delete_document run it; returns (rows folded, lists built)."""
        return tuple(self._fetch(queries.REFRESH_LEXICAL_STATS,
                                 {"collection": collection, "tenant": self.tenant})[0])

    async def arefresh_lexical_stats(self, collection: str) -> tuple[int, int]:
        return tuple((await self._afetch(queries.REFRESH_LEXICAL_STATS,
                                         {"collection": collection, "tenant": self.tenant}))[0])

    def upsert_documents(self, collection: str, documents: Iterable[Document],
                         progress: Callable[[Document], None] | None = None,
                         refresh_every: int = REFRESH_EVERY,
                         batch_documents: int = BATCH_DOCUMENTS) -> list[int]:
        """Write documents: the document rows, then their chunks by one COPY, replacing
        any chunks they had, `batch_documents` documents to a transaction (one statistics
        row and one statement's list upkeep per batch, instead of per document). A
        failing document leaves its previous version intact and the ones before it
        written: a batch that fails is rolled back and written again one document per
        transaction, so the error names the document. Lexical statistics are refreshed
        every `refresh_every` documents and at the end."""
        if batch_documents < 1 or refresh_every < 1:
            raise InvalidArgument("batch_documents and refresh_every must be at least 1")
        col = self.get_collection(collection)
        ids: list[int] = []
        try:
            with self._conn() as conn:
                for batch in _batches(col, documents, batch_documents):
                    written = len(ids)
                    try:
                        ids += self._write_batch(conn, batch)
                    except psycopg.Error:
                        if len(batch) == 1:
                            raise
                        for one in batch:
                            ids += self._write_batch(conn, [one])
                    for doc, _, _ in batch:
                        if progress:
                            progress(doc)
                    if written // refresh_every != len(ids) // refresh_every:
                        self.refresh_lexical_stats(collection)
        except psycopg.Error as exc:
            raise translate(exc) from exc
        finally:
            if ids:
                self.refresh_lexical_stats(collection)
        return ids

    @staticmethod
    def _write_batch(conn: psycopg.Connection, batch: list[tuple[Document, dict, list[tuple]]]) -> list[int]:
        with conn.transaction():
            doc_ids = [conn.execute(queries.UPSERT_DOCUMENT, params).fetchone()[0] for _, params, _ in batch]
            conn.execute(queries.DELETE_CHUNKS_OF_DOCUMENTS, {"document_ids": doc_ids})
            with conn.cursor().copy(queries.COPY_CHUNKS) as copy:
                for doc_id, (_, _, rows) in zip(doc_ids, batch):
                    for row in rows:
                        copy.write_row((doc_id, *row))
        return doc_ids

    async def aupsert_documents(self, collection: str, documents: Iterable[Document],
                                progress: Callable[[Document], None] | None = None,
                                refresh_every: int = REFRESH_EVERY,
                                batch_documents: int = BATCH_DOCUMENTS) -> list[int]:
        if batch_documents < 1 or refresh_every < 1:
            raise InvalidArgument("batch_documents and refresh_every must be at least 1")
        col = await self.aget_collection(collection)
        ids: list[int] = []
        try:
            async with self._aconn() as conn:
                for batch in _batches(col, documents, batch_documents):
                    written = len(ids)
                    try:
                        ids += await self._awrite_batch(conn, batch)
                    except psycopg.Error:
                        if len(batch) == 1:
                            raise
                        for one in batch:
                            ids += await self._awrite_batch(conn, [one])
                    for doc, _, _ in batch:
                        if progress:
                            progress(doc)
                    if written // refresh_every != len(ids) // refresh_every:
                        await self.arefresh_lexical_stats(collection)
        except psycopg.Error as exc:
            raise translate(exc) from exc
        finally:
            if ids:
                await self.arefresh_lexical_stats(collection)
        return ids

    @staticmethod
    async def _awrite_batch(conn: psycopg.AsyncConnection,
                            batch: list[tuple[Document, dict, list[tuple]]]) -> list[int]:
        async with conn.transaction():
            doc_ids = []
            for _, params, _ in batch:
                cur = await conn.execute(queries.UPSERT_DOCUMENT, params)
                doc_ids.append((await cur.fetchone())[0])
            await conn.execute(queries.DELETE_CHUNKS_OF_DOCUMENTS, {"document_ids": doc_ids})
            async with conn.cursor().copy(queries.COPY_CHUNKS) as copy:
                for doc_id, (_, _, rows) in zip(doc_ids, batch):
                    for row in rows:
                        await copy.write_row((doc_id, *row))
        return doc_ids

    def delete_document(self, collection: str, source_uri: str) -> bool:
        """Delete a document and its chunks; False if there was none."""
        params = {"collection": collection, "source_uri": source_uri, "tenant": self.tenant}
        deleted = self._fetch(queries.DELETE_DOCUMENT, params)[0][0]
        if deleted:
            self.refresh_lexical_stats(collection)
        return deleted

    async def adelete_document(self, collection: str, source_uri: str) -> bool:
        params = {"collection": collection, "source_uri": source_uri, "tenant": self.tenant}
        deleted = (await self._afetch(queries.DELETE_DOCUMENT, params))[0][0]
        if deleted:
            await self.arefresh_lexical_stats(collection)
        return deleted

    # -- search ------------------------------------------------------------

    def _ranking_params(self, names: list[str], knobs: dict, allowed: tuple[str, ...]) -> dict:
        unknown = set(knobs) - set(allowed)
        if unknown:
            raise InvalidArgument(f"unknown search knob(s): {', '.join(sorted(unknown))}")
        params = dict.fromkeys(allowed)
        params.update(knobs)
        params["boosts"] = _boosts(knobs.get("boosts"), names)
        return params

    @staticmethod
    def _check_top_k(top_k: Any) -> None:
        if not isinstance(top_k, int) or isinstance(top_k, bool):
            raise InvalidArgument("top_k must be an integer")

    def _search_params(self, collection: str | Sequence[str], query: str, embedding: Any, top_k: int,
                       filter: dict | None, knobs: dict) -> dict:
        one, several = _collection_args(collection)
        params = self._ranking_params(several or [one], knobs, (*_KNOBS, *_RANKING_KNOBS))
        self._check_top_k(top_k)
        if filter is not None and not isinstance(filter, dict):
            raise InvalidArgument("filter must be a dict (matched by jsonb containment)")
        if embedding is None and self.embedder is not None and query and query.strip():
            embedding = self.embedder.embed([query])[0]
        params.update(
            collection=one, collections=several, query_text=query or "", match_count=top_k,
            tenant=self.tenant,
            query_embedding=None if embedding is None else vector_text(embedding, "query embedding"),
            filter=Jsonb(filter or {}))
        return params

    # -- the rerank path: pool from SQL, scores from the provider, final order from SQL --

    @staticmethod
    def _wants_rerank(query: str, top_k: int, rerank: bool) -> bool:
        return rerank and top_k > 0 and bool((query or "").strip())

    @staticmethod
    def _names(collection: str | Sequence[str]) -> list[str]:
        return [collection] if isinstance(collection, str) else list(collection)

    @staticmethod
    def _pool_params(params: dict, config: Any, top_k: int) -> dict:
        return {**params, "match_count": _rerank.pool_size(top_k, config)}

    @staticmethod
    def _final_args(pool: list, outcome: Any, knobs: dict,
                    guard: tuple[float, bool, str] | None = None) -> tuple[list[int], list[float], dict]:
        # Without scores from the reranker, the fused scores: the ranking already computed.
        scores = outcome.finalize_scores() or [row[1] for row in pool]
        ranking = {k: v for k, v in knobs.items() if k in _RANKING_KNOBS}
        if guard is not None:   # a threshold calibrated for another reranker: not on these scores
            ranking["score_threshold"] = guard[0]
        return [row[0] for row in pool], scores, ranking

    def _stored_thresholds(self, conn: psycopg.Connection, collection: str | Sequence[str]) -> list[tuple]:
        try:
            with conn.transaction():   # never leaves a transaction open on the caller's connection
                return conn.execute(_STORED_THRESHOLDS, {"tenant": self.tenant,
                                                         "names": self._names(collection)}).fetchall()
        except psycopg.Error as exc:
            raise translate(exc) from exc

    async def _astored_thresholds(self, conn: psycopg.AsyncConnection,
                                  collection: str | Sequence[str]) -> list[tuple]:
        try:
            async with conn.transaction():
                cur = await conn.execute(_STORED_THRESHOLDS, {"tenant": self.tenant,
                                                              "names": self._names(collection)})
                return await cur.fetchall()
        except psycopg.Error as exc:
            raise translate(exc) from exc

    @staticmethod
    def _merge_legs(result: SearchResult, pool: list, outcome: Any) -> SearchResult:
        """finalize knows nothing of the legs: put each hit's leg columns back from the pool."""
        legs = {row[0]: row for row in pool}
        rerank_scores = outcome.rerank_scores([row[0] for row in pool])
        hits = []
        for hit in result.hits:
            row = legs[hit.chunk_id]
            hits.append(dataclasses.replace(
                hit, rerank_score=rerank_scores.get(hit.chunk_id), fused_score=row[1],
                found_by=row[2], dense_rank=row[3],
                dense_distance=row[4], lexical_rank=row[5], lexical_score=row[6], legs=row[7],
                lexical_query=row[8]))
        return SearchResult(hits, rerank=outcome)

    def search(self, collection: str | Sequence[str], query: str = "", *, embedding: Any = None,
               top_k: int = 10, filter: dict | None = None, context: Any = None, rerank: bool = True,
               **knobs: Any) -> SearchResult:
        """Hybrid search: retrieval, fusion and the ranking knobs in one SQL call. `collection`
        is a name, or a list of names of this tenant searched as one pool (same embedding
        size). `embedding` is the query vector (computed by the client's embedder when omitted
        and one is set); knobs override the collections' settings for this call: retrieval
        (hybrid, dense_weight, rrf_k, fetch_k, ...) and ranking (recency_field,
        recency_half_life, recency_weight, recency_bias, per_document_cap, mmr_lambda,
        boosts={name: boost}, score_threshold, lost_in_the_middle).

        When the collections name a reranker (see docs/rerank.md) the pool widens to
        max(top_k, rerank_top_n), the reranker scores it (`context`: recent conversation,
        prepended to the reranker's query only), and sift.finalize applies the ranking knobs
        to its scores. Any reranker fault falls back to the fused ranking, logged; the result
        says what happened (`result.rerank`, `result.reranked`, `hit.rerank_score`)."""
        params = self._search_params(collection, query, embedding, top_k, filter, knobs)
        config = None
        with self._conn() as conn:
            stored = self._stored_thresholds(conn, collection)
            if self._wants_rerank(query, top_k, rerank):
                config = _rerank.reranker_for(conn, self.tenant, self._names(collection))
        if config is None or not config.usable:
            # A refused reranker (another tenant's, or no common one) is logged and skipped.
            outcome = None if config is None else _rerank.rerank_search(
                config, tenant=self.tenant, query=query, pool_texts=[], top_k=top_k)
            guard = _threshold_guard(stored, knobs, outcome)
            if guard is not None:
                params["score_threshold"] = guard[0]
            return _guarded(SearchResult(self._fetch(queries.SEARCH, params, Hit), rerank=outcome), guard)
        with self._conn() as conn:
            try:
                with conn.transaction():
                    pool = conn.execute(queries.RERANK_POOL, self._pool_params(params, config, top_k)).fetchall()
                    texts = _rerank.fetch_pool_texts(conn, self.tenant, [row[0] for row in pool])
            except psycopg.Error as exc:
                raise translate(exc) from exc
        # No transaction stays open across the provider call.
        outcome = _rerank.rerank_search(config, tenant=self.tenant, query=query, pool_texts=texts,
                                        top_k=top_k, conversation=context)
        with self._conn() as conn:
            _rerank.record_usage(conn, self.tenant, outcome)
        guard = _threshold_guard(stored, knobs, outcome)
        if not pool:
            return _guarded(SearchResult([], rerank=outcome), guard)
        ids, scores, ranking = self._final_args(pool, outcome, knobs, guard)
        final = self.finalize(collection, ids, scores, top_k=top_k, **ranking)
        return _guarded(self._merge_legs(final, pool, outcome), guard)

    async def asearch(self, collection: str | Sequence[str], query: str = "", *, embedding: Any = None,
                      top_k: int = 10, filter: dict | None = None, context: Any = None,
                      rerank: bool = True, **knobs: Any) -> SearchResult:
        params = self._search_params(collection, query, embedding, top_k, filter, knobs)
        config = None
        async with self._aconn() as conn:
            stored = await self._astored_thresholds(conn, collection)
            if self._wants_rerank(query, top_k, rerank):
                config = await _rerank.areranker_for(conn, self.tenant, self._names(collection))
        if config is None or not config.usable:
            outcome = None if config is None else await _rerank.arerank_search(
                config, tenant=self.tenant, query=query, pool_texts=[], top_k=top_k)
            guard = _threshold_guard(stored, knobs, outcome)
            if guard is not None:
                params["score_threshold"] = guard[0]
            hits = await self._afetch(queries.SEARCH, params, Hit)
            return _guarded(SearchResult(hits, rerank=outcome), guard)
        async with self._aconn() as conn:
            try:
                async with conn.transaction():
                    cur = await conn.execute(queries.RERANK_POOL, self._pool_params(params, config, top_k))
                    pool = await cur.fetchall()
                    texts = await _rerank.afetch_pool_texts(conn, self.tenant, [row[0] for row in pool])
            except psycopg.Error as exc:
                raise translate(exc) from exc
        outcome = await _rerank.arerank_search(config, tenant=self.tenant, query=query, pool_texts=texts,
                                               top_k=top_k, conversation=context)
        async with self._aconn() as conn:
            await _rerank.arecord_usage(conn, self.tenant, outcome)
        guard = _threshold_guard(stored, knobs, outcome)
        if not pool:
            return _guarded(SearchResult([], rerank=outcome), guard)
        ids, scores, ranking = self._final_args(pool, outcome, knobs, guard)
        final = await self.afinalize(collection, ids, scores, top_k=top_k, **ranking)
        return _guarded(self._merge_legs(final, pool, outcome), guard)

    def reranking_enabled(self, collection: str | Sequence[str]) -> bool:
        """Whether a search over these collections would call a reranker (no network call)."""
        with self._conn() as conn:
            return _rerank.reranking_enabled(conn, self.tenant, self._names(collection))

    async def areranking_enabled(self, collection: str | Sequence[str]) -> bool:
        async with self._aconn() as conn:
            return await _rerank.areranking_enabled(conn, self.tenant, self._names(collection))

    def explain(self, collection: str | Sequence[str], query: str = "", *, embedding: Any = None,
                top_k: int = 10, filter: dict | None = None, chunk_ids: Sequence[int] | None = None,
                **knobs: Any) -> list[Candidate]:
        """The whole candidate pool behind `search` with the same arguments: each leg's rank and
        score, what every ranking knob did (recency factor, boost, cap, MMR penalty), whether it
        made the cut and why not; `chunk_ids` adds chunks no leg found."""
        params = self._search_params(collection, query, embedding, top_k, filter, knobs)
        params["chunk_ids"] = list(chunk_ids) if chunk_ids else None
        return self._fetch(queries.EXPLAIN, params, Candidate)

    async def aexplain(self, collection: str | Sequence[str], query: str = "", *, embedding: Any = None,
                       top_k: int = 10, filter: dict | None = None, chunk_ids: Sequence[int] | None = None,
                       **knobs: Any) -> list[Candidate]:
        params = self._search_params(collection, query, embedding, top_k, filter, knobs)
        params["chunk_ids"] = list(chunk_ids) if chunk_ids else None
        return await self._afetch(queries.EXPLAIN, params, Candidate)

    def _finalize_params(self, collection: str | Sequence[str], chunk_ids: Sequence[int],
                         scores: Sequence[float] | None, top_k: int, knobs: dict) -> dict:
        one, several = _collection_args(collection)
        params = self._ranking_params(several or [one], knobs, _RANKING_KNOBS)
        self._check_top_k(top_k)
        try:
            ids = [int(i) for i in chunk_ids]
        except (TypeError, ValueError) as exc:
            raise InvalidArgument("chunk_ids must be a sequence of chunk ids") from exc
        if scores is not None:
            try:
                scores = [float(x) for x in scores]
            except (TypeError, ValueError) as exc:
                raise InvalidArgument("scores must be a sequence of numbers") from exc
            if len(scores) != len(ids):
                raise InvalidArgument(f"scores has {len(scores)} values for {len(ids)} chunk_ids")
            if not all(math.isfinite(x) and x >= 0 for x in scores):
                raise InvalidArgument("scores must be finite and >= 0 (recency and boost multiply them; "
                                      "map logits through a sigmoid first)")
        params.update(collection=one, collections=several, chunk_ids=ids, scores=scores,
                      match_count=top_k, tenant=self.tenant)
        return params

    def finalize(self, collection: str | Sequence[str], chunk_ids: Sequence[int],
                 scores: Sequence[float] | None = None, *, top_k: int = 10, **knobs: Any) -> SearchResult:
        """The ranking knobs on a pool you already have: `chunk_ids` in pool order (e.g. after a
        rerank) with optional `scores` (a reranker's, >= 0; without them the order is the
        ranking). Recency x boost, score threshold, per-document cap, MMR and lost-in-the-middle
        run in SQL, exactly as inside `search`; knobs override the collections' settings. Hits
        carry no leg columns (found_by, dense_rank, ... are None)."""
        params = self._finalize_params(collection, chunk_ids, scores, top_k, knobs)
        return SearchResult(self._fetch(queries.FINALIZE, params, Hit))

    async def afinalize(self, collection: str | Sequence[str], chunk_ids: Sequence[int],
                        scores: Sequence[float] | None = None, *, top_k: int = 10,
                        **knobs: Any) -> SearchResult:
        params = self._finalize_params(collection, chunk_ids, scores, top_k, knobs)
        return SearchResult(await self._afetch(queries.FINALIZE, params, Hit))
