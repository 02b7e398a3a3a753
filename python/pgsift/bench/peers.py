"""The peers' SQL beside pgsift, on the same database and the same chunks.

``install`` copies one collection's chunks into a plain table (schema
``pgsift_peers``, made anew each time) as the peers index them: a stored
english tsvector with GIN, and pgvector HNSW indexes for cosine and for inner
product (or, for a large collection, makes a view of them over sift.chunks and
pgsift's own indexes). ``search`` then runs one peer's query:

* ``pgvector_hnsw``: ``order by embedding <=> q limit k`` through HNSW, with
  ``hnsw.ef_search`` at least k so it returns k rows (the baseline the latency
  targets are ratios of);
* ``fts_ts_rank_cd``: PostgreSQL full-text search ranked by ``ts_rank_cd``,
  over the OR of the question's lexemes that pgsift's lexical leg matches;
* ``supabase_hybrid``: Supabase's documented ``hybrid_search`` (websearch
  full text and inner product, each its top ``least(k, 30) * 2``, RRF k 50),
  which returns at most 30 rows.

None of it is part of pgsift; the schema holds a copy, so the peers read their
own table and indexes as they would in their own deployments.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import psycopg

from ..queries import VECTOR_SCHEMA
from ..schema import with_vector_schema
from ..vectors import vector_text
from . import queries as q

MODES = ("pgvector_hnsw", "fts_ts_rank_cd", "supabase_hybrid")
_SQL = {"pgvector_hnsw": q.PEERS_PGVECTOR, "fts_ts_rank_cd": q.PEERS_TS_RANK_CD, "supabase_hybrid": q.PEERS_SUPABASE}
# pgvector indexes vector of at most 2,000 dimensions.
MAX_DIMS = 2000


class PeersUnavailable(RuntimeError):
    """The peers cannot run here (a schema pgsift_peers that is not the benchmark's, too many
    dimensions for their indexes, no pgvector)."""


def vector_schema(conn: psycopg.Connection[Any]) -> str:
    """pgvector's schema, quoted (PeersUnavailable without pgvector)."""
    row = conn.execute(VECTOR_SCHEMA, prepare=False).fetchone()
    if row is None:
        raise PeersUnavailable("pgvector is not installed in this database")
    return str(row[0])


def _ours(conn: psycopg.Connection[Any]) -> bool:
    """Whether schema pgsift_peers is absent or the one this module made (its comment says so)."""
    exists = conn.execute(q.PEERS_EXISTS).fetchone()
    if not exists or not exists[0]:
        return True
    mark = conn.execute(q.PEERS_OWNED).fetchone()
    return bool(mark and mark[0] == q.PEERS_MARK)


def render(statement: str, schema: str, dims: int) -> bytes:
    """A benchmark statement with pgvector's schema and the vector size written in."""
    return with_vector_schema(statement.replace("{dims}", str(int(dims))), schema).encode()


def _check_ours(conn: psycopg.Connection[Any]) -> None:
    if not _ours(conn):
        raise PeersUnavailable("a schema pgsift_peers exists that the benchmark did not make; left alone")


def reset(conn: psycopg.Connection[Any]) -> None:
    """Make schema pgsift_peers anew, empty (PeersUnavailable if one exists that this module
    did not make)."""
    _check_ours(conn)
    with conn.transaction():
        conn.execute(q.PEERS_RESET)
        conn.execute(q.PEERS_SCHEMA)
        conn.execute(q.PEERS_COMMENT)


def install(conn: psycopg.Connection[Any], collection: str, dims: int, *, copy: bool = True) -> int:
    """Build schema pgsift_peers from ``collection``'s chunks; return how many rows it holds.
    copy: a plain table with the peers' own indexes; else a view over sift.chunks on
    pgsift's indexes (for a large collection, whose copy would need an HNSW build)."""
    if copy and dims > MAX_DIMS:
        raise PeersUnavailable(f"{dims} dimensions: pgvector's HNSW index takes at most {MAX_DIMS}")
    schema = vector_schema(conn)
    _check_ours(conn)
    collection_id = (conn.execute(q.COLLECTION_ID, {"collection": collection}).fetchone() or (None,))[0]
    if collection_id is None:
        raise PeersUnavailable(f"no collection {collection!r}")

    def text(statement: str) -> bytes:
        return render(statement.replace("{collection_id}", str(int(collection_id)))
                      .replace("{semantic}", "<#>" if copy else "<=>"), schema, dims)

    with conn.transaction():
        reset(conn)
        if copy:
            conn.execute(text(q.PEERS_TABLE))
            conn.execute(text(q.PEERS_FILL), {"collection": collection})
        else:
            conn.execute(text(q.PEERS_VIEW))
        conn.execute(text(q.PEERS_HYBRID_FUNCTION))
    if copy:
        for statement in q.PEERS_INDEXES:
            conn.execute(text(statement))
    row = conn.execute(q.PEERS_COUNT).fetchone()
    return int(row[0]) if row else 0


class Peers:
    """One connection's peer searches (their SQL with pgvector's schema written in)."""

    def __init__(self, conn: psycopg.Connection[Any]):
        self.conn = conn
        schema = vector_schema(conn)
        self.sql = {mode: with_vector_schema(text, schema).encode() for mode, text in _SQL.items()}
        self._saved_ef: str | None = None

    def begin(self, mode: str, k: int, ef: int | None = None) -> None:
        """Before a mode's searches: pgvector's ef_search at least k (so HNSW returns k rows),
        or ef when given (pgsift's dense leg's, to compare the same walk)."""
        row = self.conn.execute(q.PEERS_GET_EF_SEARCH).fetchone()
        self._saved_ef = row[0] if row else None
        if mode == "pgvector_hnsw":
            self.conn.execute(q.PEERS_EF_SEARCH, {"ef": ef if ef is not None else max(k, 40)})

    def end(self) -> None:
        """After a mode's searches: the session's own ef_search again."""
        if self._saved_ef is not None:
            self.conn.execute(q.PEERS_EF_SEARCH, {"ef": self._saved_ef})

    def search(self, mode: str, text: str, embedding: Any, k: int) -> list[str]:
        """The source_uri of each row the peer returns, best first (embedding: a vector, or
        its pgvector text made beforehand, so a timed search does not make it)."""
        vector = embedding if isinstance(embedding, str) else vector_text(embedding)
        rows = self.conn.execute(self.sql[mode], {"q": text, "e": vector, "k": k}).fetchall()
        return [r[0] for r in rows]


class RawWalk:
    """The comparable raw query's walk (issue 33's decision 1), for bench profile's raw_ids and
    raw_hits and bench scale's raw_hits alike: ``begin`` sets hnsw.ef_search to the dense leg's
    and, where pgvector has iterative scans, a relaxed-order one, as the leg walks; ``end`` puts
    back the session's own (as they were when made), so what runs next walks with those:
    Supabase's function at its defaults (sift.search sets and restores its own). ``hooks``:
    both, for turns.in_turn's ``around``."""

    def __init__(self, conn: psycopg.Connection[Any], ef: int):
        self.conn = conn
        self.ef = ef
        row = conn.execute(q.PROFILE_WALK_SAVED).fetchone()
        self._saved: tuple[str | None, str | None] = (row[0], row[1]) if row else (None, None)
        self.hooks: tuple[Callable[[], None], Callable[[], None]] = (self.begin, self.end)

    def begin(self) -> None:
        self.conn.execute(q.PROFILE_WALK_SETTINGS, {"ef": str(self.ef), "iterative": "relaxed_order"})

    def end(self) -> None:
        self.conn.execute(q.PROFILE_WALK_SETTINGS, {"ef": self._saved[0], "iterative": self._saved[1]})


def drop(conn: psycopg.Connection[Any]) -> None:
    """Remove schema pgsift_peers if it is the one this module made."""
    if _ours(conn):
        conn.execute(q.PEERS_RESET)
