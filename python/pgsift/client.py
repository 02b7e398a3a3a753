# DO NOT EDIT: generated from python/pgsift/client_async.py by tools/async_to_sync.py.
# Change the async source and run `make sync` (a test fails while this file is stale).
"""AsyncClient: a thin layer over the SQL functions, for an async connection or pool.

Written once, async; tools/async_to_sync.py generates Client (client.py) from it.

Every ranking decision happens in SQL (sift.search, sift.explain, sift.finalize);
the client adapts arguments, writes chunks with sift.write_chunks (COPY is refused
under row-level security), makes the rerank call
(the one step that leaves the database) and turns database errors into typed
ones. Each call is one transaction with the tenant bound first
(sift.set_tenant, transaction-local), sent in one round trip, and never a
server-side prepared statement, so it behaves the same behind PgBouncer's
transaction pooling as on a direct connection.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import Iterator, Callable, Generator, Iterable, Mapping, Sequence
from typing import Any

import psycopg
from psycopg.pq import PipelineStatus, TransactionStatus
from psycopg.rows import dict_row

from . import calls, enrich, vectors
from . import queries as q
from .enrich import Enricher
from .errors import InvalidArgument, SpaceIncomplete, translate
from .languages import detect
from .migrate import migrate
from .models import (
    Candidate,
    ChunkEnrichment,
    Collection,
    Document,
    Embedder,
    EnrichmentRecord,
    EnrichmentRun,
    Explanation,
    Hit,
    Knob,
    MaxSimScore,
    Page,
    ReembedReport,
    Reranked,
    RerankerConfig,
    ResolvedSection,
    SearchResult,
    VectorSpace,
    dataclass_row,
)
from .rerankers import RerankOutcome, SecretResolver
from .rerankers.engine import rerank_search
from .rerankers.outcome import log, log_fault
from .vectors import vec

try:  # optional extra
    import psycopg_pool
except ImportError:  # pragma: no cover - exercised only without the pool extra
    psycopg_pool = None  # type: ignore[assignment]

# Documents between two refreshes of the BM25 statistics during a long ingest.
REFRESH_EVERY = 500
# Write statements of a collection left unfolded before a write's refresh runs: searches add
# what is pending at little cost (each term looks in its bucket's rows), while a refresh has a
# fixed part that one-document writes paid each time (at 100,000 chunks, a document of 20
# chunks a call: 202 ms a document refreshing after each, 140 after every tenth).
REFRESH_BACKLOG = 10
BATCH_DOCUMENTS = 50

Step = tuple[Any, dict[str, Any]]
# Where a connection can read the vector type without disturbing anything.
_ADAPTABLE = (TransactionStatus.IDLE, TransactionStatus.INTRANS)


@contextlib.contextmanager
def _unprepared(conn: psycopg.Connection[Any]) -> Generator[None]:
    """psycopg's executemany prepares its statement on the server whatever prepare= says,
    unless the connection's prepare_threshold is None (client-side, restored after): behind
    PgBouncer before 1.21 a statement so prepared stays on a pooled server connection, where
    another client's of the same name, or this one's on another server connection, fails."""
    saved = conn.prepare_threshold
    conn.prepare_threshold = None
    try:
        yield
    finally:
        conn.prepare_threshold = saved


class Client:
    """Search and write pgsift collections through an existing connection or pool.

    tenant: bound per transaction (sift.set_tenant; the role must be a gateway or the
    operator); None leaves it to the session (a role mapped to a tenant, or the operator's
    "default"). writer: where metering goes when source is a read-only standby (a
    connection or pool to the primary). secrets: the application's resolver for keys the
    operator keeps outside environment variables. refresh_backlog: a write ends with
    sift.refresh_lexical_stats once that many write statements of the collection (every
    writer's) are waiting to be folded; 1 refreshes after every write. Searches are exact
    either way. prepare: the statements every read sends (the binding, the search, explain,
    finalize, the rerank pool) become server-side prepared statements, parsed and planned
    once a connection (about 0.3 ms less a search on SciFact); off by default, as PgBouncer in
    transaction mode carries them only from 1.21 on, with max_prepared_statements set.
    """

    def __init__(self, source: Any, *, tenant: str | None = None, embedder: Embedder | None = None,
                 writer: Any = None, secrets: SecretResolver | None = None,
                 refresh_backlog: int = REFRESH_BACKLOG, prepare: bool = False):
        for what, value in (("source", source), ("writer", writer)):
            if value is not None and not _accepts(value):
                kind = psycopg.Connection.__name__
                raise TypeError(f"{what} must be a psycopg {kind} or a psycopg_pool pool of them, "
                                f"got {type(value).__name__}")
        if tenant is not None:
            calls.check_text(tenant, "tenant", blank=False)
        if isinstance(refresh_backlog, bool) or not isinstance(refresh_backlog, int) or refresh_backlog < 1:
            raise InvalidArgument(f"refresh_backlog must be an integer of at least 1, got {refresh_backlog!r}")
        if not isinstance(prepare, bool):
            raise InvalidArgument(f"prepare must be True or False, got {prepare!r}")
        self.source = source
        self.tenant = tenant
        self.prepare = prepare
        self.embedder = embedder
        self.writer = writer
        self.secrets = secrets
        self.refresh_backlog = refresh_backlog

    # -- transactions ----------------------------------------------------------------

    @contextlib.contextmanager
    def _connection(self, source: Any = None) -> Iterator[psycopg.Connection[Any]]:
        source = source or self.source
        if isinstance(source, psycopg.Connection):
            self._adapt(source)
            yield source
        else:
            with source.connection() as conn:
                self._adapt(conn)
                yield conn

    def _adapt(self, conn: psycopg.Connection[Any]) -> None:
        """Vectors go in binary on this connection from now on (pgsift.vectors): the vector
        type is read once per connection (not cached beyond it: pgvector re-created, or a
        pooler pointed elsewhere, gives a new type). Left alone inside a failed transaction
        (the statement fails anyway) and where pgvector is missing (a query vector then goes
        as text, and a write cannot send vectors at all: the database lacks the type). A
        connection serves one thread at a time, as psycopg's transactions need anyway."""
        if vectors.adapted(conn) or conn.info.transaction_status not in _ADAPTABLE:
            return
        idle = conn.info.transaction_status == TransactionStatus.IDLE
        try:
            row = (conn.execute(q.VECTOR_TYPES, prepare=False)).fetchone()
            if idle and not conn.autocommit:
                conn.rollback()   # a catalog read; the caller's transaction has not begun
        except psycopg.Error as exc:
            raise translate(exc) from exc
        if row is not None:
            vectors.register(conn, (row[0], row[1]))

    def _begin(self, conn: psycopg.Connection[Any]) -> None:
        """The first statement of each transaction: the client's tenant bound, when it binds
        one, and the session settings an answer depends on pinned for the transaction
        (q.PIN_SETTINGS says which and why). Pipelined (_rows, _write_batch), it goes in the
        round trip of the first statements; in `transaction()` (the caller's statements, or a
        method's that wait on an earlier answer) it is one round trip of its own."""
        if self.tenant is not None:
            conn.execute(q.SET_TENANT, {"tenant": self.tenant}, prepare=self.prepare)
        else:
            conn.execute(q.PIN_SETTINGS, prepare=self.prepare)

    @contextlib.contextmanager
    def _one_trip(self, conn: psycopg.Connection[Any]) -> Iterator[None]:
        """A transaction, the binding (_begin) first, whose statements and end go to the server
        in one round trip; no result may be read before the block ends. On an idle connection
        BEGIN, the statements and COMMIT are sent as statements of one pipeline, autocommit on
        for that while (psycopg would otherwise wait on a BEGIN of its own), ROLLBACK instead of
        COMMIT when the block fails in Python; after a statement fails, the rest is skipped to
        the Sync and a ROLLBACK (a round trip, on that path alone) ends the aborted
        transaction. psycopg's transaction() would cost two round trips more: it syncs at its
        BEGIN and before its COMMIT. In a transaction of the caller's, the statements run in a
        savepoint of it (psycopg's), round trips and all, as they do on a connection whose
        transactions psycopg begins with characteristics of the application's (read_only,
        isolation_level, deferrable): only its BEGIN carries them."""
        if (conn.info.transaction_status != TransactionStatus.IDLE
                or conn.info.pipeline_status != PipelineStatus.OFF
                or (conn.read_only, conn.isolation_level, conn.deferrable) != (None, None, None)):
            with conn.pipeline(), conn.transaction():
                self._begin(conn)
                yield
            return
        autocommit = conn.autocommit
        if not autocommit:
            conn.set_autocommit(True)
        try:
            with conn.pipeline():
                conn.execute(q.BEGIN, prepare=False)
                self._begin(conn)
                try:
                    yield
                except BaseException:
                    conn.execute(q.ROLLBACK, prepare=False)
                    raise
                conn.execute(q.COMMIT, prepare=False)
        finally:
            if conn.info.transaction_status in (TransactionStatus.INTRANS, TransactionStatus.INERROR):
                with contextlib.suppress(psycopg.Error):   # the error that got here says more
                    conn.execute(q.ROLLBACK, prepare=False)
            if not autocommit and conn.info.transaction_status == TransactionStatus.IDLE:
                conn.set_autocommit(False)

    @contextlib.contextmanager
    def transaction(self, source: Any = None) -> Iterator[psycopg.Connection[Any]]:
        """One transaction with the client's tenant bound (and the settings q.PIN_SETTINGS names
        pinned: extra_float_digits, IntervalStyle, gin_fuzzy_search_limit), errors typed: for work
        this client has no method for (pgsift.golden and pgsift.evaluation use it). Not pipelined
        (the caller's statements run as they would outside it), so the binding costs one round
        trip of its own."""
        with self._connection(source) as conn:
            try:
                with conn.transaction():
                    self._begin(conn)
                    yield conn
            except psycopg.Error as exc:
                raise translate(exc) from exc

    def _rows(self, steps: list[Step], row: type | None = None, source: Any = None) -> list[Any]:
        """Statements in one transaction, the tenant bound first, sent in one round trip
        (_one_trip); the rows of the last one (as `row` dataclasses, as dicts when `row` is dict, else tuples)."""
        with self._connection(source) as conn:
            try:
                with self._one_trip(conn):
                    factory = dict_row if row is dict else dataclass_row(row) if row else None
                    cur = conn.cursor(row_factory=factory) if factory else conn.cursor()
                    for query, params in steps:
                        cur.execute(query, params, prepare=self.prepare)
                return cur.fetchall()
            except psycopg.Error as exc:
                raise translate(exc) from exc

    # -- install -------------------------------------------------------------------------

    def migrate(self) -> list[str]:
        """Install or upgrade the sift schema; returns the migrations applied now."""
        with self._connection() as conn:
            return migrate(conn)

    # -- collections -----------------------------------------------------------------------

    def create_collection(self, name: str, *, embedding_dims: int, search_language: str | None = None,
                                distance: str | None = None, description: str | None = None,
                                dense_precision: str | None = None, hnsw_m: int | None = None,
                                hnsw_ef_construction: int | None = None, **knobs: Any) -> Collection:
        """Create a collection of the tenant. Knobs given (see `knobs()`) are stored with it;
        everything left out takes the database's defaults. One transaction. dense_precision
        ("full" or "half"), hnsw_m and hnsw_ef_construction give it an HNSW index of its own
        (set now, while it is empty; `vector_spaces` shows them)."""
        given: dict[str, Any] = {"collection": calls.check_text(name, "name"), "embedding_dims": embedding_dims}
        for key, value in (("search_language", search_language), ("distance", distance),
                           ("description", description), ("dense_precision", dense_precision)):
            if value is not None:
                given[key] = calls.check_text(value, key)
        for key, number in (("hnsw_m", hnsw_m), ("hnsw_ef_construction", hnsw_ef_construction)):
            if number is not None:
                given[key] = calls.check_int(number, key)
        if knobs:
            given["knobs"] = calls.knobs_json(knobs)
        rows = self._rows([(q.create_collection(list(given)), given),
                                 (q.COLLECTION_INFO, {"collection": name})], Collection)
        return rows[0]  # type: ignore[no-any-return]

    def alter_collection(self, name: str, *, reset: Sequence[str] | None = None,
                               **settings: Any) -> Collection:
        """The one setter: knobs (None switches one off) and the properties search_language,
        description and reranker; `reset` puts the named ones back to their defaults."""
        params = {"collection": calls.check_text(name, "name"), "settings": calls.knobs_json(settings),
                  "reset": [calls.check_text(r, "reset") for r in reset] if reset else None}
        rows = self._rows([(q.ALTER_COLLECTION, params), (q.COLLECTION_INFO, {"collection": name})],
                                Collection)
        return rows[0]  # type: ignore[no-any-return]

    def get_collection(self, name: str) -> Collection:
        rows = self._rows([(q.COLLECTION_INFO, {"collection": calls.check_text(name, "name")})], Collection)
        return rows[0]  # type: ignore[no-any-return]

    def list_collections(self) -> list[Collection]:
        return self._rows([(q.COLLECTION_INFO, {"collection": None})], Collection)

    def drop_collection(self, name: str) -> None:
        self._rows([(q.DROP_COLLECTION, {"collection": calls.check_text(name, "name")})])

    def knobs(self, collection: str | None = None, **knobs: Any) -> list[Knob]:
        """Every knob (sift.knobs()); with a collection, also the value in force and its source."""
        params = {"collection": None if collection is None else calls.check_text(collection, "collection"),
                  "knobs": calls.knobs_json(knobs)}
        return self._rows([(q.KNOBS, params)], Knob)

    # -- vector spaces ---------------------------------------------------------------------

    def vector_spaces(self, collection: str) -> list[VectorSpace]:
        """A collection's vector spaces, the active one first, with how many chunks each lacks."""
        return self._rows([(q.VECTOR_SPACE_STATUS, {"collection": calls.check_text(collection, "collection")})],
                                VectorSpace)

    def add_vector_space(self, collection: str, space: str, *, dimensions: int, distance: str = "cosine",
                               model: str | None = None, dense_precision: str | None = None,
                               hnsw_m: int | None = None, hnsw_ef_construction: int | None = None) -> None:
        """A new vector space beside the active one (its HNSW index built now: its own when
        dense_precision "half", hnsw_m or hnsw_ef_construction are given); nothing searches it
        until `switch_vector_space` (or the dense_space knob)."""
        self._rows([(q.ADD_VECTOR_SPACE, {
            "collection": calls.check_text(collection, "collection"), "space": calls.check_text(space, "space"),
            "dimensions": calls.check_int(dimensions, "dimensions"), "distance": calls.check_text(distance, "distance"),
            "model": None if model is None else calls.check_text(model, "model"),
            "dense_precision": None if dense_precision is None else calls.check_text(dense_precision,
                                                                                     "dense_precision"),
            "hnsw_m": None if hnsw_m is None else calls.check_int(hnsw_m, "hnsw_m"),
            "hnsw_ef_construction": None if hnsw_ef_construction is None
            else calls.check_int(hnsw_ef_construction, "hnsw_ef_construction")})])

    def missing_space_vectors(self, collection: str, space: str, *, limit: int = 1000,
                                    after: int | None = None) -> list[tuple[int, str]]:
        """(chunk_id, text to embed) of chunks without a vector in the space, in chunk order past
        chunk id `after` (None: from the start)."""
        return [(int(r[0]), r[1]) for r in self._rows([(q.MISSING_SPACE_VECTORS, {
            "collection": calls.check_text(collection, "collection"), "space": calls.check_text(space, "space"),
            "max_count": int(limit), "after_chunk_id": None if after is None else int(after)})])]

    def write_space_vectors(self, collection: str, space: str, chunk_ids: Sequence[int],
                                  embeddings: Sequence[Any]) -> int:
        """Write (or replace) chunks' vectors in an added space, in one transaction."""
        if len(chunk_ids) != len(embeddings):
            raise InvalidArgument(f"{len(chunk_ids)} chunk ids for {len(embeddings)} embeddings")
        if not chunk_ids:
            return 0   # nothing to send (an empty list has no type to tell the two signatures apart)
        params = {"collection": calls.check_text(collection, "collection"), "space": calls.check_text(space, "space"),
                  "chunk_ids": [int(i) for i in chunk_ids],
                  "embeddings": [vec(e, f"the vector of chunk {i}") for i, e in zip(chunk_ids, embeddings,
                                                                                           strict=True)]}
        rows = self._rows([(q.WRITE_SPACE_VECTORS, params)])
        return int(rows[0][0])

    # -- late interaction ----------------------------------------------------------------------

    def write_token_vectors(self, collection: str, tokens: Mapping[int, Any]) -> int:
        """Write (or replace) chunks' token vectors for late interaction, {chunk_id: one vector
        per token} (1 to 2,048 of one size a chunk, the collection's), in one transaction;
        returns how many chunks got theirs (a chunk deleted meanwhile is skipped)."""
        statements = calls.chunk_token_params(collection, tokens)
        written = 0
        with self.transaction() as conn:
            for params in statements:
                row = (conn.execute(q.WRITE_TOKEN_VECTORS, params, prepare=False)).fetchone()
                written += int(row[0]) if row else 0
        return written

    def delete_token_vectors(self, collection: str, chunk_ids: Sequence[int] | None = None) -> int:
        """Delete the token vectors of these chunks (None: the whole collection's); returns how
        many chunks lost theirs."""
        params = {"collection": calls.check_text(collection, "collection"),
                  "chunk_ids": None if chunk_ids is None else [int(i) for i in chunk_ids]}
        return int((self._rows([(q.DELETE_TOKEN_VECTORS, params)]))[0][0])

    def maxsim(self, collection: str, chunk_ids: Sequence[int], query_tokens: Any) -> list[MaxSimScore]:
        """Late-interaction scores of chunks (sift.maxsim): the scored best first, then those
        without token vectors in the order given (score None)."""
        params = {"collection": calls.check_text(collection, "collection"),
                  "chunk_ids": [int(i) for i in chunk_ids],
                  "query_tokens": calls.token_vectors(query_tokens, "query_tokens", calls.MAX_QUERY_TOKENS)}
        return self._rows([(q.MAXSIM, params)], MaxSimScore)

    def switch_vector_space(self, collection: str, space: str) -> None:
        """Search and write `space` from now on (one statement); SpaceIncomplete, with the count,
        while chunks lack a vector in it."""
        self._rows([(q.SWITCH_VECTOR_SPACE, {"collection": calls.check_text(collection, "collection"),
                                                   "space": calls.check_text(space, "space")})])

    def drop_vector_space(self, collection: str, space: str) -> None:
        """Drop a space that is not the active one, with its vectors."""
        self._rows([(q.DROP_VECTOR_SPACE, {"collection": calls.check_text(collection, "collection"),
                                                 "space": calls.check_text(space, "space")})])

    def reembed(self, collection: str, space: str, *, embedder: Embedder | None = None,
                      vectors: Callable[[Sequence[int], Sequence[str]], Any] | None = None,
                      dimensions: int | None = None, distance: str = "cosine", model: str | None = None,
                      batch_size: int = 256, switch: bool = True, drop_old: bool = False,
                      progress: Callable[[int, int], None] | None = None) -> ReembedReport:
        """Move a collection to another embedding model without downtime: add `space` (unless it
        exists), fill it in batches of `batch_size` (each its own transaction, so an interrupted
        run resumes where it stopped, and chunks written meanwhile are picked up), then switch
        searches to it and, with `drop_old`, drop the space searched before. Vectors come from
        `embedder` (its embed(texts)) or `vectors(chunk_ids, texts)`. Searches keep using the
        old space until the switch. `progress(written, still_missing)` after each batch."""
        if (embedder is None) == (vectors is None):
            raise InvalidArgument("reembed takes an embedder or a vectors function, one of them")
        if not 1 <= batch_size <= 10000:
            raise InvalidArgument(f"batch_size must be between 1 and 10000, got {batch_size}")
        started = time.monotonic()
        spaces = {sp.name: sp for sp in self.vector_spaces(collection)}
        previous = next((sp.name for sp in spaces.values() if sp.active), None)
        given = dimensions or getattr(embedder, "dims", None)
        if space in spaces:
            # Checked before anything is embedded: the space's size and distance are its own.
            existing = spaces[space]
            if given and int(given) != existing.dimensions:
                raise InvalidArgument(f"space {space!r} has {existing.dimensions} dimensions; the vectors given "
                                      f"have {given}")
            if distance != existing.distance and distance != "cosine":
                raise InvalidArgument(f"space {space!r} measures {existing.distance}, not {distance}")
        else:
            if not given:
                raise InvalidArgument(f"space {space!r} does not exist: give its dimensions")
            self.add_vector_space(collection, space, dimensions=int(given), distance=distance,
                                        model=model or getattr(embedder, "name", None))
        written = batches = 0
        switched = False
        for _attempt in range(5):
            # One walk through the collection in chunk order, then again from the start for
            # chunks written meanwhile, until none is missing (each batch its own transaction).
            after: int | None = None
            while todo := self.missing_space_vectors(collection, space, limit=batch_size, after=after):
                ids, texts = [t[0] for t in todo], [t[1] for t in todo]
                embedded = embedder.embed(texts) if embedder is not None else vectors(ids, texts)  # type: ignore[misc]
                written += self.write_space_vectors(collection, space, ids, list(embedded))
                batches += 1
                after = ids[-1]
                if progress is not None:
                    left = next(sp.missing for sp in self.vector_spaces(collection) if sp.name == space)
                    progress(written, left)
            if self.missing_space_vectors(collection, space, limit=1):
                continue
            if not switch or space == previous:
                break
            try:
                self.switch_vector_space(collection, space)
                switched = True
                break
            except SpaceIncomplete:   # chunks written since the last batch: fill them, try again
                continue
        else:
            raise SpaceIncomplete(f"chunks of {collection!r} kept arriving faster than space {space!r} "
                                  "was filled; run reembed again")
        dropped = False
        if drop_old and switched and previous is not None:
            self.drop_vector_space(collection, previous)
            dropped = True
        return ReembedReport(collection=collection, space=space, written=written, batches=batches,
                             switched=switched, previous=previous if switched else None, dropped=dropped,
                             seconds=time.monotonic() - started)

    # -- documents -------------------------------------------------------------------------

    def upsert_documents(self, collection: str, documents: Iterable[Document],
                               progress: Callable[[Document], None] | None = None,
                               refresh_every: int = REFRESH_EVERY,
                               batch_documents: int = BATCH_DOCUMENTS) -> list[int]:
        """Write documents: the document rows, then their chunks (sift.write_chunks, up to
        2,000 a statement), replacing any chunks they had, `batch_documents` documents (or
        fewer, once they hold 2,000 chunks) to a transaction; a document is always written
        whole, in one transaction, however many chunks it has. A failing document
        leaves its previous version intact and the ones before it written: a batch that fails
        is rolled back and written again one document per transaction, so the error names the
        document. Lexical statistics are refreshed every `refresh_every` documents, and at the
        end once the collection has `refresh_backlog` write statements waiting (the client's)."""
        if batch_documents < 1 or refresh_every < 1:
            raise InvalidArgument("batch_documents and refresh_every must be at least 1")
        col = self.get_collection(collection)
        ids: list[int] = []
        try:
            for batch in calls.batches(col, documents, batch_documents):
                written = len(ids)
                try:
                    ids += self._write_batch(batch)
                except psycopg.Error:
                    if len(batch) == 1:
                        raise
                    for one in batch:
                        ids += self._write_batch([one])
                for doc, _, _ in batch:
                    if progress:
                        progress(doc)
                if written // refresh_every != len(ids) // refresh_every:
                    self.refresh_lexical_stats(collection)
        except psycopg.Error as exc:
            raise translate(exc) from exc
        finally:
            if ids:
                self._refresh_if_due(collection)
        return ids

    def _write_batch(self, batch: calls.Batch) -> list[int]:
        # Pipelined: BEGIN, the binding (_begin) and the batch's first statements in one round trip.
        with self._connection() as conn, conn.pipeline(), conn.transaction():
            self._begin(conn)
            return self._write_in(conn, batch)

    def _write_in(self, conn: psycopg.Connection[Any], batch: calls.Batch) -> list[int]:
        """A batch of documents written in the caller's transaction (rows, sections, chunks)."""
        cur = conn.cursor()
        with _unprepared(conn):
            cur.executemany(q.UPSERT_DOCUMENT, [params for _, params, _ in batch], returning=True)
        doc_ids: list[int] = []
        while True:
            row = cur.fetchone()
            doc_ids.append(int(row[0]))  # type: ignore[index]
            if not cur.nextset():
                break
        conn.execute(q.DELETE_CHUNKS_OF_DOCUMENTS, {"document_ids": doc_ids}, prepare=False)
        conn.execute(q.DELETE_SECTIONS_OF_DOCUMENTS, {"document_ids": doc_ids}, prepare=False)
        sections = calls.section_arrays(doc_ids, batch)
        if sections is not None:
            conn.execute(q.WRITE_SECTIONS, sections, prepare=False)
        for arrays in calls.chunk_arrays(doc_ids, batch):
            conn.execute(q.WRITE_CHUNKS, arrays, prepare=False)
        enriched = [(d, doc) for d, (doc, _, _) in zip(doc_ids, batch, strict=True)
                    if doc.enrichment_run is not None or any(c.enrichment for c in doc.chunks)]
        if any(row[6] is not None for _, _, rows in batch for row in rows) or enriched:
            # Token vectors go in with their chunks, in the same transaction.
            cur2 = conn.execute(q.CHUNK_IDS_OF_DOCUMENTS, {"document_ids": doc_ids}, prepare=False)
            found = cur2.fetchall()
            ids = {(int(d), int(o)): int(c) for d, o, c, _ in found}
            for tokens in calls.token_arrays(ids, doc_ids, batch):
                conn.execute(q.WRITE_TOKEN_VECTORS, {"collection": found[0][3], **tokens}, prepare=False)
            # What a model wrote for the chunks, and what it spent, with them.
            cur3 = conn.cursor()
            rows = calls.enrichment_rows(ids, enriched)
            if rows:
                with _unprepared(conn):
                    cur3.executemany(q.INSERT_ENRICHMENT, rows)
            vectors = calls.question_vector_arrays(ids, enriched)
            if vectors["chunk_ids"]:
                conn.execute(q.INSERT_QUESTION_VECTORS, vectors, prepare=False)
            runs = [calls.run_row(d, doc.enrichment_run) for d, doc in enriched if doc.enrichment_run is not None]
            if runs:
                with _unprepared(conn):
                    cur3.executemany(q.INSERT_ENRICHMENT_RUN, runs)
        return doc_ids

    def enrich_documents(self, collection: str, documents: Iterable[Document], enricher: Enricher, *,
                               context: bool = True, questions: int = 3, questions_as: str = "embedding",
                               budget_tokens: int | None = None, max_document_tokens: int = 6000,
                               rates: Mapping[str, tuple[float, float]] | None = None,
                               embedder: Embedder | None = None) -> list[Document]:
        """Documents with what `enricher` writes for each chunk (a context placing it in its
        document, `questions` it answers), ready for `upsert_documents`, which writes it
        apart from the chunk's text with the run's spend. Writes nothing itself.

        Each chunk's context becomes its header (the `context` given), the model's context and
        its questions, which the lexical leg indexes; it is embedded again (`embedder`, else the
        client's) from that context and its text, the questions in it with `questions_as`
        "embedding" or "both", and each question gets a vector of its own with "vectors" or
        "both" (the dense leg searches them too and says which matched). Text unchanged
        since an earlier ingestion (same document, settings and model) reuses what was written
        and calls nothing. A failed call is a warning: the chunk keeps its header. A document
        stops calling once it has spent `budget_tokens` (the rest keep their header)."""
        settings = enrich.Settings(context=context, questions=questions, questions_as=questions_as,
                                   max_document_tokens=max_document_tokens)
        settings.check()
        if budget_tokens is not None and budget_tokens < 0:
            raise InvalidArgument("budget_tokens must be at least 0")
        embedder = embedder or self.embedder
        if embedder is None:
            raise InvalidArgument("enriched chunks are embedded again: give an embedder (or the client one)")
        docs = [calls.fresh_copy(d) for d in documents]
        embed_as: dict[int, str | None] = {}   # the context embedded, where it is not the stored one
        parts = [[enrich.prompt_parts(d, i, max_document_tokens) for i in range(len(d.chunks))] for d in docs]
        keys = [[enrich.enrichment_key(dp, cp, enricher, settings) for dp, cp in p] for p in parts]
        cached = {r[0]: r for r in self._rows([(q.CACHED_ENRICHMENTS, {
            "collection": calls.check_text(collection, "collection"),
            "keys": sorted({k for ks in keys for k in ks})})])}
        failures_in_a_row = 0
        for doc, doc_keys, doc_parts in zip(docs, keys, parts, strict=True):
            run = EnrichmentRun(model=enricher.model, chunks=len(doc.chunks))
            for i, (chunk, key, (doc_part, chunk_part)) in enumerate(zip(doc.chunks, doc_keys, doc_parts,
                                                                          strict=True)):
                header = chunk.context
                if key in cached:
                    _, ctx, qs, model = cached[key]
                    run.reused += 1
                    chunk.enrichment = ChunkEnrichment(key, ctx, list(qs or []), model, header=header)
                elif failures_in_a_row >= enrich.MAX_FAILURES_IN_A_ROW or (
                        budget_tokens is not None and run.input_tokens + run.output_tokens
                        + enrich.expected_tokens(doc_part, chunk_part, settings) > budget_tokens):
                    # The endpoint keeps failing, or the call would pass the document's budget.
                    run.skipped += 1
                    continue
                else:
                    got = enrich.call(enricher, doc_part, chunk_part, settings)
                    run.input_tokens += got.input_tokens
                    run.output_tokens += got.output_tokens
                    if got.warning:
                        run.warnings.append(f"chunk {i}: {got.warning}")
                        enrich.log.warning("enrichment of %s chunk %d: %s", doc.source_uri, i, got.warning)
                    # Only calls that fail count toward stopping: an answer that is of no use is the chunk's.
                    failures_in_a_row = failures_in_a_row + 1 if got.call_error else 0
                    if got.failed:
                        run.failed += 1
                        continue
                    run.enriched += 1
                    chunk.enrichment = ChunkEnrichment(key, got.context, got.questions, enricher.model, header=header)
                chunk.context = enrich.compose_context(header, chunk.enrichment.context, chunk.enrichment.questions)
                if questions_as == "vectors":
                    embed_as[id(chunk)] = enrich.compose_context(header, chunk.enrichment.context, [])
            if run.skipped and failures_in_a_row >= enrich.MAX_FAILURES_IN_A_ROW:
                run.warnings.append(f"{enrich.MAX_FAILURES_IN_A_ROW} calls in a row failed: {run.skipped} chunk(s) "
                                    "not sent (check the endpoint, model and key)")
            elif run.skipped:
                run.warnings.append(f"token budget of {budget_tokens} reached: {run.skipped} chunk(s) keep the "
                                    "deterministic header")
            run.cost_usd = enrich.price(enricher.model, run.input_tokens, run.output_tokens, rates)
            doc.enrichment_run = run
        calls.embed_chunks(docs, embedder, embed_as)
        if questions_as in ("vectors", "both"):
            calls.embed_questions(docs, embedder)
        return docs

    def enrichment_history(self, collection: str, source_uri: str | None = None) -> list[EnrichmentRecord]:
        """What each ingestion with enrichment spent and what went wrong, per document."""
        return self._rows([(q.ENRICHMENT_HISTORY, {
            "collection": calls.check_text(collection, "collection"),
            "source_uri": None if source_uri is None else calls.check_text(source_uri, "source_uri")})],
            EnrichmentRecord)

    def replace_documents(self, collection: str, documents: Iterable[Document], *,
                                source_prefix: str | None = None, filter: dict[str, Any] | None = None,
                                delete_all: bool = False) -> tuple[int, int]:
        """A re-crawl in one transaction: write `documents` and delete the documents of the scope
        (source_uri starting with `source_prefix`, metadata containing `filter`; `delete_all`: the
        whole collection) that are not among them. Readers see the old set or the new one, never
        a mix; a failure leaves the old set. Returns (written, deleted)."""
        docs = list(documents)
        uris = [d.source_uri for d in docs]
        if len(set(uris)) != len(uris):
            raise InvalidArgument("replace_documents was given one source_uri twice")
        params = calls.delete_params(collection, filter, source_prefix, delete_all, keep=uris)
        col = self.get_collection(collection)
        written: list[int] = []
        with self.transaction() as conn:
            for batch in calls.batches(col, docs, BATCH_DOCUMENTS):
                written += self._write_in(conn, batch)
            row = (conn.execute(q.DELETE_DOCUMENTS, params, prepare=False)).fetchone()
        deleted = int(row[0]) if row else 0
        self._refresh_if_due(collection)
        return len(written), deleted

    def delete_documents(self, collection: str, *, filter: dict[str, Any] | None = None,
                               source_prefix: str | None = None, delete_all: bool = False) -> int:
        """Delete the documents whose metadata contains `filter` and whose source_uri starts with
        `source_prefix`, in one statement; neither is refused (InvalidArgument) unless
        `delete_all`. Returns how many were deleted."""
        params = calls.delete_params(collection, filter, source_prefix, delete_all)
        deleted = int((self._rows([(q.DELETE_DOCUMENTS, params)]))[0][0])
        if deleted:
            self._refresh_if_due(collection)
        return deleted

    def delete_document(self, collection: str, source_uri: str) -> bool:
        """Delete a document and its chunks; False if there was none."""
        params = {"collection": calls.check_text(collection, "collection"),
                  "source_uri": calls.check_text(source_uri, "source_uri")}
        deleted = bool((self._rows([(q.DELETE_DOCUMENT, params)]))[0][0])
        if deleted:
            self._refresh_if_due(collection)
        return deleted

    def refresh_lexical_stats(self, collection: str) -> tuple[int, int]:
        """Fold pending BM25 statistics and build impact lists for common terms (searches are
        exact without it, faster after it); returns (rows folded, lists built)."""
        row = (self._rows([(q.REFRESH_LEXICAL_STATS, {"collection": collection})]))[0]
        return int(row[0]), int(row[1])

    def _refresh_if_due(self, collection: str) -> None:
        """The refresh after a write, once refresh_backlog write statements wait (one round
        trip either way)."""
        self._rows([(q.REFRESH_IF_DUE, {"collection": collection, "backlog": self.refresh_backlog})])

    # -- search --------------------------------------------------------------------------------

    def _params(self, collection: Any, query: Any, embedding: Any, top_k: Any, filter: Any,
                knobs: dict[str, Any], space_embeddings: Any = None, space_weights: Any = None) -> dict[str, Any]:
        if embedding is None and self.embedder is not None and isinstance(query, str) and query.strip():
            embedding = self.embedder.embed([calls.check_text(query, "query")])[0]
        if knobs.get("query_language") == "auto":
            # The question's language, detected here (the database has no detector).
            knobs = {**knobs, "query_language": detect(query) if isinstance(query, str) else None}
        return {**calls.search_params(collection, query, embedding, top_k, filter, knobs),
                **calls.space_params(space_embeddings, space_weights)}

    def search(self, collection: str | Sequence[str], query: str = "", *, embedding: Any = None,
                     top_k: int = 10, filter: dict[str, Any] | None = None, context: Any = None,
                     query_tokens: Any = None, space_embeddings: Mapping[str, Any] | None = None,
                     space_weights: Mapping[str, float] | None = None, **knobs: Any) -> SearchResult:
        """Hybrid search: retrieval, fusion and the ranking knobs in one SQL call (sift.search).
        `collection` is a name, or a list of names of this tenant searched as one pool.
        `embedding` is the query vector (the client's embedder computes it when omitted);
        knobs override the collections' settings for this call (see `knobs()`; None = off).

        When the collections use a reranker (the rerank knob and a reranker named) the pool
        widens to rerank_top_n and comes back with its texts instead of the hits (sift.rerank_pool,
        in the search's transaction: the legs run once), the reranker scores it (`context`:
        recent conversation, before the reranker's query only) and sift.finalize applies the
        ranking knobs to its scores. Any reranker fault falls back to the fused ranking of that
        same pool, logged; `result.rerank` says what happened.

        `query_tokens` (the question's token vectors from a late-interaction model, one per
        token): MaxSim reranks the fused top late_interaction_top_n in SQL against the chunks'
        token vectors (`Hit.late_interaction_score`); chunks without them keep their fused
        order behind. That is this search's rerank: no hosted reranker is called.

        `space_embeddings` ({space: query vector}): a dense leg per named vector space of the
        collections beside the active one, weighted by `space_weights` ({space: weight},
        default dense_weight); the `fusion` knob (rrf, dbsf, convex) combines every leg, and
        `Hit.leg_details` says what each gave."""
        params = calls.late_params(self._params(collection, query, embedding, top_k, filter, knobs, space_embeddings,
                                                space_weights), query_tokens)
        if query_tokens is None and query.strip() and top_k > 0:
            # The answer, or, when the search reranks, the pool the reranker scores (with its
            # texts) instead: never both, so the legs run once either way.
            pool, hits = self._search_or_pool(params)
            if pool:
                config, candidates, texts, more = calls.pooled(pool)
                reranked = self._scored(config, candidates, texts, more, query, top_k, context)
                return self._finalized(collection, reranked, top_k, knobs, query)
        else:
            hits = self._rows([(q.SEARCH, params)], Hit)
        if not hits:
            return SearchResult(hits)
        if hits[0].reranker is None:
            outcome = None
            if hits[0].rerank_refused:
                outcome = RerankOutcome.unchanged(len(hits), fault="no_reranker", reason=hits[0].rerank_refused)
                log_fault(outcome)
            return SearchResult(hits, rerank=outcome)
        # Named, but not reranked: a search that reranks took its pool above, so this one has a
        # blank query or top_k <= 0, and no call is made.
        skip, why = ("top_k", "top_k <= 0") if top_k <= 0 else ("blank_query", "blank query")
        return SearchResult(hits, rerank=RerankOutcome.unchanged(
            len(hits), skip=skip, alias=hits[0].reranker, reason=f"{why}: no rerank call"))

    def _search_or_pool(self, params: dict[str, Any]) -> tuple[list[dict[str, Any]], list[Hit]]:
        """The search's hits in one round trip (BEGIN, the tenant or the pinned settings, the
        search and COMMIT sent together); when it reranks, its pool instead (sift.rerank_pool's
        rows), in a transaction of its own: the search statement then runs no leg and gives one
        row of nulls. The legs run once either way. (Waiting inside one transaction for the
        first answer would cost a search that does not rerank a second round trip.)"""
        hits: list[Hit] = self._rows([(q.SEARCH_UNLESS_RERANKED, params)], Hit)
        if not hits or hits[0].chunk_id is not None:
            return [], hits
        pool: list[dict[str, Any]] = self._rows(
            [(q.RERANK_POOL, {**params, "reranker": None, "pool_size": None})], dict)
        return pool, []

    def _finalized(self, collection: Any, reranked: Reranked, top_k: int,
                         knobs: dict[str, Any], query: str | None = None) -> SearchResult:
        """sift.finalize on the rerank's scores (the fused ones after a fallback). Only a complete
        ranking counts as scored by the reranker: a threshold calibrated for it never judges the
        stand-in scores a partial ranking gives the candidates it left out."""
        outcome = reranked.outcome
        if not reranked.pool:
            return SearchResult([], rerank=outcome)
        ids = [c.chunk_id for c in reranked.pool]
        scores = outcome.finalize_scores() or [c.score for c in reranked.pool]
        scored_by = outcome.alias if outcome.complete else None
        final = self.finalize(collection, ids, scores, top_k=top_k, scored_by=scored_by, query=query,
                                    **knobs)
        return SearchResult(calls.with_legs(final.hits, reranked.pool, outcome.rerank_scores(ids), outcome.alias),
                            rerank=outcome)

    def search_page(self, collection: str | Sequence[str], query: str = "", *, embedding: Any = None,
                          page_size: int = 10, cursor: str | None = None, filter: dict[str, Any] | None = None,
                          context: Any = None, **knobs: Any) -> Page:
        """`search` a page at a time (sift.search_page): pages are cut from one ranking of the
        first page_window hits, so the next page (pass `page.cursor`, with the same collections,
        query, embedding, filter and knobs) continues this one: no hit twice, none skipped.
        `page.cursor` is None when no more can be given, and `page.end` says why. With a
        reranker, each page reranks the window (page_window candidates, one call) and
        sift.finalize_page cuts it; a cursor keeps the way its first page was ranked. Pass the
        same `embedding` on every page (an embedder that is not deterministic would change the
        request). A cursor of another request or tenant, or an altered one, raises
        InvalidCursor."""
        for name in ("space_embeddings", "space_weights", "query_tokens"):
            if name in knobs:
                raise InvalidArgument(f"search_page does not take {name} (search does)")
        params = calls.page_params(self._params(collection, query, embedding, page_size, filter, knobs), cursor)
        kind = calls.cursor_kind(cursor)
        config = None
        if kind is None and cursor is None and query.strip():
            config = self._reranker_for(params, None)
        if kind == "search" or (kind is None and (config is None or not config.usable)):
            hits: list[Hit] = self._rows([(q.SEARCH_PAGE, params)], Hit)
            outcome = None
            if config is not None and config.refused:
                outcome = RerankOutcome.unchanged(len(hits), fault="no_reranker", reason=config.refused)
                log_fault(outcome)
            return Page.of(hits, rerank=outcome)
        # A reranked page: the window (the cursor's, else the knob's) reranked, then cut in SQL.
        window = calls.cursor_window(cursor) or self._page_window(params)
        reranked = self._rerank({**params, "match_count": window}, query, window, context, None, size=window,
                                      config=config)
        outcome = reranked.outcome
        ids = [c.chunk_id for c in reranked.pool]
        scores = outcome.finalize_scores() or [c.score for c in reranked.pool]
        page_args = {**params, "chunk_ids": ids, "scores": scores, "more": reranked.more,
                     "scored_by": outcome.alias if outcome.complete else None}
        final: list[Hit] = self._rows([(q.FINALIZE_PAGE, page_args)], Hit)
        return Page.of(calls.with_legs(final, reranked.pool, outcome.rerank_scores(ids), outcome.alias),
                       rerank=outcome)

    def _page_window(self, params: dict[str, Any]) -> int:
        names = [params["collection"]] if params["collection"] is not None else params["collections"]
        with self.transaction() as conn:
            row = (conn.execute(q.PAGE_WINDOW, {"names": names, "knobs": params["knobs"]},
                                            prepare=False)).fetchone()
        return int(row[0]) if row and row[0] is not None else 100

    def rerank(self, collection: str | Sequence[str], query: str, *, embedding: Any = None, top_k: int = 10,
                     filter: dict[str, Any] | None = None, context: Any = None, reranker: str | None = None,
                     space_embeddings: Mapping[str, Any] | None = None,
                     space_weights: Mapping[str, float] | None = None, **knobs: Any) -> Reranked:
        """The rerank half of a search: the reranker (the collections', or the tenant's named
        `reranker`), the pool widened to its rerank_top_n with each candidate's text, the
        provider's scores, the call metered. Never raises for a reranker fault."""
        params = self._params(collection, query, embedding, top_k, filter, knobs, space_embeddings, space_weights)
        return self._rerank(params, query, top_k, context, reranker)

    def _rerank(self, params: dict[str, Any], query: str, top_k: int, context: Any,
                      reranker: str | None, size: int | None = None,
                      config: RerankerConfig | None = None) -> Reranked:
        """The pool (sift.rerank_pool: candidates and texts in one statement, `size` of them, else
        as many as the reranker scores) with the reranker when it is not given (sift.reranker_for,
        in the same round trip), then the rerank call."""
        args = {**params, "reranker": reranker, "pool_size": size or (None if config is None
                                                                      else calls.pool_size(top_k, config))}
        with self._connection() as conn:
            try:
                with self._one_trip(conn):
                    chosen = None
                    if config is None:
                        chosen = conn.cursor(row_factory=dataclass_row(RerankerConfig))
                        chosen.execute(q.RERANKER_FOR, args, prepare=self.prepare)
                    pool = conn.cursor(row_factory=dict_row)
                    pool.execute(q.RERANK_POOL, args, prepare=self.prepare)
                # Read once the block has sent COMMIT with them: one round trip.
                if chosen is not None:
                    config = chosen.fetchone()
                rows = pool.fetchall()
            except psycopg.Error as exc:
                raise translate(exc) from exc
        _, candidates, texts, more = calls.pooled(rows)
        return self._scored(config, candidates, texts, more, query, top_k, context)

    def _scored(self, config: RerankerConfig | None, pool: list[Candidate], texts: list[str], more: bool,
                      query: str, top_k: int, context: Any) -> Reranked:
        """The rerank call on a pool already fetched (never raises for a reranker fault), metered."""
        outcome = rerank_search(config, query=query, pool_texts=texts, top_k=top_k, conversation=context,
                                      resolver=self.secrets)
        return Reranked(config=config, pool=pool, texts=texts, outcome=self._meter(outcome), more=more)

    def _reranker_for(self, params: dict[str, Any], reranker: str | None) -> RerankerConfig | None:
        rows = self._rows([(q.RERANKER_FOR, {**params, "reranker": reranker})], RerankerConfig)
        return rows[0] if rows else None

    def reranker_for(self, collection: str | Sequence[str], *, reranker: str | None = None,
                           **knobs: Any) -> RerankerConfig | None:
        """The reranker a search over these collections would use (None: reranking is off), or
        the tenant's reranker named `reranker`. No network call."""
        named = None if reranker is None else calls.check_text(reranker, "reranker", blank=False)
        return self._reranker_for({**calls.collection_args(collection), "knobs": calls.knobs_json(knobs)},
                                        named)

    def _meter(self, outcome: RerankOutcome) -> RerankOutcome:
        """Record a call that left the process in sift.rerank_usage (on the writer, when the
        source is a standby). Never raises: a call that cannot be recorded is logged and says
        so (usage_recorded False; outcome.usage is the row to record elsewhere)."""
        if not outcome.called:
            return outcome
        try:
            self._rows([(q.RECORD_USAGE, outcome.usage)], source=self.writer)
        except Exception as exc:  # noqa: BLE001 - metering never fails a search
            log.warning("rerank usage not recorded (%s): %s; it is on the result (outcome.usage)",
                        type(exc).__name__, exc)
            return dataclasses.replace(outcome, usage_recorded=False)
        return dataclasses.replace(outcome, usage_recorded=True)

    def reranking_enabled(self, collection: str | Sequence[str], **knobs: Any) -> bool:
        """Whether a search over these collections would call a reranker (no network call): one
        is switched on and named, its endpoint allowed, and its secret_ref (if any) mapped."""
        config = self.reranker_for(collection, **knobs)
        return (config is not None and config.usable
                and (config.secret_ref is None or config.secret_source is not None))

    def candidates(self, collection: str | Sequence[str], query: str = "", *, embedding: Any = None,
                         top_k: int = 10, filter: dict[str, Any] | None = None,
                         space_embeddings: Mapping[str, Any] | None = None,
                         space_weights: Mapping[str, float] | None = None, **knobs: Any) -> list[Candidate]:
        """The fused pool behind a search (sift.candidates), in fused order."""
        params = self._params(collection, query, embedding, top_k, filter, knobs, space_embeddings, space_weights)
        return self._rows([(q.CANDIDATES, params)], Candidate)

    def explain(self, collection: str | Sequence[str], query: str = "", *, embedding: Any = None,
                      top_k: int = 10, filter: dict[str, Any] | None = None,
                      chunk_ids: Sequence[int] | None = None, query_tokens: Any = None,
                      space_embeddings: Mapping[str, Any] | None = None,
                      space_weights: Mapping[str, float] | None = None, context: Any = None,
                      rerank: bool = True, **knobs: Any) -> list[Explanation]:
        """The whole candidate pool behind `search` with the same arguments: each leg's rank and
        score, what every ranking knob did, whether it made the cut and why not; `chunk_ids`
        adds chunks no leg found; `query_tokens` as in `search` (each row's MaxSim).

        When the collections rerank, the pool is reranked as `search` reranks it (one metered
        call) and the view is the search's: each row's fused_rank, rerank_score and
        rerank_rank, and its final place. `rerank=False` (or a reranker fault, which search
        falls back from too) gives the fused view; `rerank_status` says which one it is."""
        params = calls.late_params(self._params(collection, query, embedding, top_k, filter, knobs, space_embeddings,
                                                space_weights), query_tokens)
        params["chunk_ids"] = [int(i) for i in chunk_ids] if chunk_ids else None
        given: dict[str, Any] = {"rerank_ids": None, "rerank_scores": None, "scored_by": None}
        reranked = None
        if rerank and query_tokens is None and query.strip() and top_k > 0:
            config = self._reranker_for(params, None)
            if config is not None and config.usable:
                reranked = self._rerank(params, query, top_k, context, None, config=config)
                scores = reranked.outcome.finalize_scores()
                if scores is not None:
                    given = {"rerank_ids": [c.chunk_id for c in reranked.pool], "rerank_scores": scores,
                             "scored_by": reranked.outcome.alias if reranked.outcome.complete else None}
        rows: list[Explanation] = self._rows([(q.EXPLAIN, {**params, **given})], Explanation)
        return calls.explained(rows, reranked)

    def finalize(self, collection: str | Sequence[str], chunk_ids: Sequence[int],
                       scores: Sequence[float] | None = None, *, top_k: int = 10, scored_by: str | None = None,
                       query: str | None = None, **knobs: Any) -> SearchResult:
        """The ranking knobs on a pool you already have (sift.finalize): `chunk_ids` in pool
        order with optional `scores` (>= 0; without them the order is the ranking); `scored_by`
        names the reranker whose scores they are; `query` marks its words in snippets. Hits
        carry no leg columns."""
        params = calls.finalize_params(collection, chunk_ids, scores, top_k, knobs, scored_by, query)
        return SearchResult(self._rows([(q.FINALIZE, params)], Hit))

    def resolve_sections(self, hits: Hit | Sequence[Hit] | Sequence[int], *,
                               skip_missing: bool = False) -> list[ResolvedSection]:
        """The sections hits come from, with their ancestors (sift.resolve_sections): pass hits
        (their chunk_ids and window_chunk_ids are resolved) or chunk ids. A chunk without a
        section raises SectionNotFound unless `skip_missing`."""
        params = {"chunk_ids": calls.section_chunk_ids(hits), "skip_missing": bool(skip_missing)}
        return self._rows([(q.RESOLVE_SECTIONS, params)], ResolvedSection)

    # -- rerankers --------------------------------------------------------------------------------

    def register_reranker(self, alias: str, provider: str, **settings: Any) -> dict[str, Any]:
        """sift.register_reranker for the tenant: model, base_url, secret_ref, timeout_ms,
        deadline_ms, max_attempts, context_chars, is_default (left out: the database's defaults)."""
        unknown = set(settings) - set(q.REGISTER_RERANKER_ARGS)
        if unknown:
            raise InvalidArgument(f"unknown reranker setting(s): {', '.join(sorted(unknown))}")
        given = {"alias": calls.check_text(alias, "alias", blank=False),
                 "provider": calls.check_text(provider, "provider", blank=False),
                 **{k: calls.check_text(v, k) if isinstance(v, str) else v
                    for k, v in settings.items() if v is not None}}
        with self.transaction() as conn:
            cur = conn.execute(q.register_reranker(list(given)), given, prepare=False)
            names = [d.name for d in cur.description or ()]
            return dict(zip(names, cur.fetchone() or (), strict=False))

    def drop_reranker(self, alias: str) -> bool:
        """Delete a reranker of the tenant (its collections stop reranking); False if there was none."""
        params = {"alias": calls.check_text(alias, "alias", blank=False)}
        return bool((self._rows([(q.DROP_RERANKER, params)]))[0][0])

    def store_calibrated_threshold(self, collection: str, reranker: str, value: float) -> None:
        """Store a score threshold calibrated for a reranker (applied only to its scores)."""
        params = {"collection": calls.check_text(collection, "collection"),
                  "alias": calls.check_text(reranker, "reranker", blank=False), "value": value}
        self._rows([(q.STORE_THRESHOLD, params)])


def _accepts(source: Any) -> bool:
    if isinstance(source, psycopg.Connection):
        return True
    return psycopg_pool is not None and isinstance(source, psycopg_pool.ConnectionPool)
