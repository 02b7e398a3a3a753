"""Per-collection dense recall when many collections share one HNSW index.

One table holds a big collection (99% of the chunks) and a small one (1%), all
drawn around the same cluster centres, so near any query of the small collection
the index is crowded with the big one's chunks. recall@10 of the dense-only
search against exact numpy cosine top-10 over the same collection is a count
(how many of the true ten came back), never a timing.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

import numpy as np
import psycopg
import pytest
from conftest import SOCKET_DIR, unit
from pgsift import Chunk, Client, Document, migrate
from pgsift.vectors import vector_text

DIMS = 64
N_BIG = 19_800          # 99 %
N_SMALL = 200           # 1 %
N_CENTRES = 100         # the big collection spreads over all of them ...
SMALL_CENTRES = 10      # ... the small one sits on 10 of the same centres
SPREAD = 0.1            # per-coordinate noise around a unit centre (noise norm ~0.8)
N_QUERIES = 50
K = 10


@dataclass
class Loaded:
    client: Client
    conn: psycopg.Connection
    vectors: dict[str, np.ndarray]        # collection -> its vectors, row i = source_uri f"{name}-{i}"
    small_centres: np.ndarray
    big_centres: np.ndarray


def _cluster(rng: np.random.Generator, centres: np.ndarray, n: int) -> np.ndarray:
    picks = rng.integers(len(centres), size=n)
    return unit(centres[picks] + rng.normal(scale=SPREAD, size=(n, DIMS))).astype(np.float32)


def _copy_collection(conn: psycopg.Connection, collection_id: int, name: str, vectors: np.ndarray) -> None:
    """The bulk path: documents by one INSERT, chunks by COPY (what upsert_documents does, batched)."""
    with conn.transaction():
        ids = dict(conn.execute(
            "insert into sift.documents (collection_id, source_uri) "
            "select %s, %s || '-' || g from generate_series(0, %s - 1) g returning source_uri, document_id",
            (collection_id, name, len(vectors))).fetchall())
        with conn.cursor().copy("copy sift.chunks (document_id, ordinal, content, embedding) from stdin") as copy:
            for i, v in enumerate(vectors):
                copy.write_row((ids[f"{name}-{i}"], 0, f"chunk {i} of {name}", vector_text(v)))


@pytest.fixture(scope="module")
def loaded(postgresql_noproc):
    name = f"pgsift_recall_{uuid.uuid4().hex[:12]}"
    admin_url = f"postgresql://{postgresql_noproc.user}@/postgres?host={SOCKET_DIR}&port={postgresql_noproc.port}"
    with psycopg.connect(admin_url, autocommit=True) as admin:
        admin.execute(f'create database "{name}"')
    url = f"postgresql://{postgresql_noproc.user}@/{name}?host={SOCKET_DIR}&port={postgresql_noproc.port}"
    conn = psycopg.connect(url, autocommit=True)
    try:
        migrate(conn)
        client = Client(conn)
        rng = np.random.default_rng(20240611)
        centres = unit(rng.normal(size=(N_CENTRES, DIMS)))
        small_centres = centres[rng.choice(N_CENTRES, size=SMALL_CENTRES, replace=False)]
        big = _cluster(rng, centres, N_BIG)
        small = _cluster(rng, small_centres, N_SMALL)

        big_col = client.create_collection("big", embedding_dims=DIMS)
        client.create_collection("small", embedding_dims=DIMS, exact_search_limit=0)   # forces HNSW
        client.create_collection("small_default", embedding_dims=DIMS)                 # default limit
        # Load without the shared HNSW index, then build it once with the project's own
        # helper (the same index; a bulk build takes seconds, 20,000 inserts a minute).
        conn.execute("drop index sift.chunks_hnsw_cosine_64")
        for small_name in ("small", "small_default"):
            client.upsert_documents(small_name, [
                Document(source_uri=f"{small_name}-{i}", chunks=[Chunk(f"chunk {i} of {small_name}", v)])
                for i, v in enumerate(small)])
        _copy_collection(conn, big_col.collection_id, "big", big)
        conn.execute("set maintenance_work_mem = '256MB'")
        assert conn.execute("select sift._ensure_dense_index(%s, 'cosine')", (DIMS,)).fetchone()[0] \
            == "chunks_hnsw_cosine_64"
        conn.execute("reset maintenance_work_mem")
        conn.execute("analyze sift.chunks, sift.documents")

        yield Loaded(client, conn, {"big": big, "small": small, "small_default": small},
                     small_centres, centres)
    finally:
        conn.close()
        with psycopg.connect(admin_url, autocommit=True) as admin:
            admin.execute(f'drop database if exists "{name}" with (force)')


def _queries(rng: np.random.Generator, centres: np.ndarray) -> np.ndarray:
    return _cluster(rng, centres, N_QUERIES)


def recall_at_k(loaded: Loaded, collection: str, queries: np.ndarray) -> float:
    vectors = loaded.vectors[collection].astype(np.float64)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    found = 0
    for q in queries:
        qn = q / np.linalg.norm(q)
        truth = {f"{collection}-{i}" for i in np.argsort(1 - vectors @ qn, kind="stable")[:K]}
        hits = loaded.client.search(collection, embedding=q, top_k=K, hybrid=False)
        assert len(hits) == K and hits.legs == ["dense"]
        found += len(truth & {h.source_uri for h in hits})
    return found / (K * len(queries))


def test_data_shape(loaded):
    counts = dict(loaded.conn.execute(
        "select c.name, count(k.*) from sift.collections c left join sift.chunks k using (collection_id) "
        "group by 1").fetchall())
    assert counts == {"big": N_BIG, "small": N_SMALL, "small_default": N_SMALL}
    total = N_BIG + 2 * N_SMALL
    assert counts["small"] / total <= 0.01
    assert loaded.client.get_collection("small").settings["exact_search_limit"] == 0
    assert loaded.client.get_collection("small_default").settings["exact_search_limit"] == 5000


def test_small_collection_recall_through_hnsw(loaded):
    recall = recall_at_k(loaded, "small", _queries(np.random.default_rng(1), loaded.small_centres))
    print(f"\nrecall@{K} small collection (1%, exact_search_limit=0, HNSW): {recall:.3f}")
    assert recall >= 0.95


def test_big_collection_recall_through_hnsw(loaded):
    recall = recall_at_k(loaded, "big", _queries(np.random.default_rng(2), loaded.big_centres))
    print(f"\nrecall@{K} big collection (99%, {N_BIG} > exact_search_limit, HNSW): {recall:.3f}")
    assert recall >= 0.95


def test_small_collection_recall_with_default_exact_limit(loaded):
    recall = recall_at_k(loaded, "small_default", _queries(np.random.default_rng(1), loaded.small_centres))
    print(f"\nrecall@{K} small collection (default exact_search_limit, exact scan): {recall:.3f}")
    assert recall == 1.0


def _leg_with_values(conn: psycopg.Connection, collection_id: int, q: np.ndarray, n: int) -> str:
    """The dense leg's HNSW statement with its $1..$4 in place. The leg runs it through
    EXECUTE ... USING, planned with the values known, so EXPLAIN sees the same plan."""
    leg_sql = conn.execute("select sift._dense_leg_sql(%s, 'cosine', false, false)", (DIMS,)).fetchone()[0]
    args = {"$1": f"'{vector_text(q)}'::vector", "$2": f"array[{collection_id}]::bigint[]",
            "$3": "'{}'::jsonb", "$4": str(n)}
    for param, literal in args.items():
        leg_sql = leg_sql.replace(param, literal)
    return leg_sql


def test_big_collection_dense_leg_walks_the_hnsw_index(loaded):
    col = loaded.client.get_collection("big")
    q = _queries(np.random.default_rng(3), loaded.big_centres)[0]
    plan = "\n".join(r[0] for r in loaded.conn.execute(
        "explain " + _leg_with_values(loaded.conn, col.collection_id, q, 40)).fetchall())
    assert "Index Scan using chunks_hnsw_cosine_64" in plan, plan


def test_small_collection_filtered_hnsw_walk_fills_its_top_n(loaded):
    """Made to walk the shared index (for 1% of the table the planner would rather sort
    the collection's 200 rows), the filtered iterative scan still returns the leg's full
    top n for every query, and its top 10 match the exact ones."""
    conn = loaded.conn
    col = loaded.client.get_collection("small")
    uri = dict(conn.execute("select c.chunk_id, d.source_uri from sift.chunks c join sift.documents d "
                            "using (document_id) where c.collection_id = %s", (col.collection_id,)).fetchall())
    vectors = loaded.vectors["small"].astype(np.float64)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    n, found = 40, 0
    queries = _queries(np.random.default_rng(1), loaded.small_centres)
    for i, q in enumerate(queries):
        leg = _leg_with_values(conn, col.collection_id, q, n)
        with conn.transaction():
            # the settings the leg itself uses (sift._dense_ids), plus one that rules out the sort plan
            conn.execute("set local enable_sort = off")
            conn.execute("set local hnsw.ef_search = 100")
            conn.execute("set local hnsw.iterative_scan = relaxed_order")
            if i == 0:
                plan = "\n".join(r[0] for r in conn.execute("explain " + leg).fetchall())
                assert "Index Scan using chunks_hnsw_cosine_64" in plan, plan
            rows = conn.execute(leg).fetchall()
        assert len(rows) == n
        truth = {f"small-{j}" for j in np.argsort(1 - vectors @ (q / np.linalg.norm(q)), kind="stable")[:K]}
        found += len(truth & {uri[chunk_id] for chunk_id, _rank, _dist in rows[:K]})
    recall = found / (K * len(queries))
    print(f"\nrecall@{K} small collection, filtered HNSW walk of the shared index: {recall:.3f}")
    assert recall >= 0.95
