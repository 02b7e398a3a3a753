"""The plain table beside pgsift's ingest (``pgsift bench scale``): the same chunks,
written the same way, into the table anyone would make without pgsift.

The table (``pgsift_peers.plain_chunks``, in the peers' schema, made anew and
dropped after) holds what the peers index: the text, a stored english tsvector
with GIN, the vector with pgvector HNSW for cosine (default build options, as
pgsift's), and the document each row belongs to. ``bulk`` loads it as bench
scale loads pgsift's collection: COPY in batches with the text index live, HNSW
built once at the end, each timed. ``live`` then writes documents into it as
``Client.upsert_documents`` writes them: a batch of documents a transaction,
their old rows deleted and the new inserted, with every index live. The ratio
of the two live rates is the cost of pgsift's write path (statistics, impact
list deltas, its checks) over a plain table's.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import psycopg

from .. import vectors
from ..models import Document
from . import peers as bench_peers
from . import queries as q

# COPY binary of rows [start, start + count) as (document_id, ordinal, content, embedding): the
# same rows pgsift's load wrote, in the same format (scale.copy_rows).
Source = Callable[[int, int], bytes]


def bulk(conn: psycopg.Connection[Any], source: Source, chunks: int, *, dims: int, batch: int) -> dict[str, Any]:
    """Make the plain table and COPY ``chunks`` rows into it, ``batch`` a transaction,
    then build its HNSW index; return both times."""
    bench_peers.reset(conn)
    schema = bench_peers.vector_schema(conn)
    conn.execute(bench_peers.render(q.PLAIN_TABLE, schema, dims))
    for statement in q.PLAIN_INDEXES:
        conn.execute(statement)
    t0 = time.perf_counter()
    for start in range(0, chunks, batch):
        data = source(start, min(batch, chunks - start))
        with conn.transaction(), conn.cursor().copy(q.PLAIN_COPY) as copy:
            copy.write(data)
    load_s = time.perf_counter() - t0
    conn.execute(q.BENCH_MAINTENANCE_WORK_MEM)
    t0 = time.perf_counter()
    conn.execute(bench_peers.render(q.PLAIN_HNSW, schema, dims))
    index_s = time.perf_counter() - t0
    conn.execute(q.PLAIN_ANALYZE)
    return {"plain_load_chunks_per_s": round(chunks / load_s, 1), "plain_load_s": round(load_s, 2),
            "plain_hnsw_build_s": round(index_s, 2)}


def live(conn: psycopg.Connection[Any], documents: Sequence[Document], *, first_id: int,
         batch_documents: int) -> dict[str, Any]:
    """Write ``documents`` into the loaded plain table as upsert_documents writes pgsift's
    (ids from ``first_id``): ``batch_documents`` a transaction, their old rows deleted, the
    new inserted by one statement of arrays with the vectors in binary (so a second call
    replaces them); return chunks per second."""
    if not vectors.adapt(conn):   # vectors in binary, as the client sends them
        raise bench_peers.PeersUnavailable("pgvector is not installed in this database")
    t0 = time.perf_counter()
    chunks = 0
    for start in range(0, len(documents), batch_documents):
        part = documents[start:start + batch_documents]
        ids = list(range(first_id + start, first_id + start + len(part)))
        rows = [(d, i, c.content, vectors.vec(c.embedding))
                for d, doc in zip(ids, part, strict=True) for i, c in enumerate(doc.chunks)]
        chunks += len(rows)
        with conn.transaction():
            conn.execute(q.PLAIN_DELETE, {"ids": ids})
            conn.execute(q.PLAIN_INSERT, {
                "doc": [r[0] for r in rows], "ordinal": [r[1] for r in rows],
                "content": [r[2] for r in rows], "embedding": [r[3] for r in rows]})
    seconds = time.perf_counter() - t0
    return {"plain_live_chunks_per_s": round(chunks / seconds, 1)}
