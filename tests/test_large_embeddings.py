"""Embeddings past 2,000 dimensions and HNSW options (issue 16, item 5): a 3,072-dimension
collection (the size of OpenAI's text-embedding-3-large) and an added space of that size are
indexed as halfvec, walked through that index (checked in the plan) and re-scored at full
precision; a collection or space with its own options (half precision below 2,000, m,
ef_construction) gets an index of its own, walked in the plan, dropped with it. Recall@10
against exact numpy cosine, as in tests/test_recall.py."""

from __future__ import annotations

import numpy as np
import psycopg
import pytest
from conftest import unit
from pgsift import Chunk, Client, Document, InvalidArgument, PermissionDenied
from pgsift.vectors import vector_text

DIMS = 3072
N = 600


def clustered(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    centres = unit(rng.normal(size=(12, DIMS)))
    picks = rng.integers(len(centres), size=n)
    return unit(centres[picks] + rng.normal(scale=0.02, size=(n, DIMS))).astype(np.float32), centres


def recall(client: Client, collection: str, ids: list[int], vecs: np.ndarray, centres: np.ndarray,
           rng: np.random.Generator, **knobs) -> float:
    found = 0
    for _ in range(20):
        q = unit(centres[rng.integers(len(centres))] + rng.normal(scale=0.02, size=DIMS))
        truth = {ids[i] for i in np.argsort(-(vecs @ q))[:10]}
        hits = client.search(collection, embedding=q, top_k=10, hybrid=False, **knobs)
        found += len(truth & {h.chunk_id for h in hits})
    return found / 200


def uses_index(db, name: str, space_id: int | None, collection_id: int, added: bool, dims: int = DIMS,
               own: int | None = None, half: bool = True) -> bool:
    """The dense leg's HNSW statement, planned with its parameters: does it walk this index (in
    halfvec when `half`)?"""
    sql = db.execute("select sift._dense_leg_sql(%s, 'cosine', false, false, %s, %s, %s)",
                     [dims, added, half, own]).fetchone()[0]
    q = vector_text(unit(np.ones(dims)))
    cur = psycopg.ClientCursor(db)
    cur.execute("deallocate all")
    # A few hundred rows: the planner may rather sort them all; off, the index the statement
    # can walk (its expression and predicate) is what is left.
    for setting in ("enable_seqscan", "enable_bitmapscan", "enable_sort"):
        cur.execute(f"set {setting} = off")
    cur.execute("prepare leg(public.vector, bigint[], jsonpath, integer, bigint) as " + sql.replace("%", "%%"))
    plan = "\n".join(r[0] for r in cur.execute(
        "explain (costs off) execute leg(%s::public.vector, %s::bigint[], null, 10, %s::bigint)",
        [q, [collection_id], space_id]).fetchall())
    cur.execute("reset all")
    return name in plan and ("halfvec" in plan) == half


def test_a_3072_dimension_collection_is_indexed_as_halfvec(db, figure):
    client = Client(db)
    rng = np.random.default_rng(30)
    vecs, centres = clustered(rng, N)
    client.create_collection("large", embedding_dims=DIMS)
    client.upsert_documents("large", [Document(source_uri=f"d{i}", chunks=[Chunk(content=f"chunk {i}",
                                                                               embedding=vecs[i])])
                                      for i in range(N)])
    ids = [r[0] for r in db.execute("select k.chunk_id from sift.chunks k join sift.documents d using "
                                    "(document_id) order by (substr(d.source_uri, 2))::int").fetchall()]
    db.execute("analyze sift.chunks")
    cid = db.execute("select collection_id from sift.collections where name = 'large'").fetchone()[0]
    assert uses_index(db, "chunks_hnsw_cosine_3072", None, cid, False)
    exact = recall(client, "large", ids, vecs, centres, np.random.default_rng(1))
    walked = recall(client, "large", ids, vecs, centres, np.random.default_rng(1), exact_search_limit=0)
    assert exact == 1.0 and walked >= 0.95, (exact, walked)
    hit = client.search("large", embedding=vecs[7], top_k=1, hybrid=False, exact_search_limit=0)[0]
    assert hit.chunk_id == ids[7] and hit.dense_distance == pytest.approx(0.0, abs=1e-6)   # full precision
    figure("3072-d recall@10 through the halfvec HNSW index, per mille", round(walked * 1000))


def test_an_added_space_of_3072_dimensions(db):
    client = Client(db)
    rng = np.random.default_rng(31)
    vecs, centres = clustered(rng, 300)
    client.create_collection("small", embedding_dims=8)
    client.upsert_documents("small", [Document(source_uri=f"d{i}", chunks=[Chunk(
        content=f"chunk {i}", embedding=unit(rng.normal(size=8)))]) for i in range(300)])
    ids = [r[0] for r in db.execute("select k.chunk_id from sift.chunks k join sift.documents d using "
                                    "(document_id) order by (substr(d.source_uri, 2))::int").fetchall()]
    row = {cid: i for i, cid in enumerate(ids)}
    report = client.reembed("small", "large", dimensions=DIMS, vectors=lambda cids, _t: [vecs[row[c]] for c in cids])
    assert report.switched and client.get_collection("small").embedding_dims == DIMS
    sid, cid = db.execute("select s.space_id, s.collection_id from sift.vector_spaces s join sift.collections c "
                          "using (collection_id) where c.name = 'small' and s.active").fetchone()
    db.execute("analyze sift.chunk_vectors")
    assert uses_index(db, "chunk_vectors_hnsw_cosine_3072", sid, cid, True)
    assert recall(client, "small", ids, vecs, centres, np.random.default_rng(2), exact_search_limit=0) >= 0.95


def test_past_4000_dimensions_is_refused(db):
    client = Client(db)
    with pytest.raises((InvalidArgument, psycopg.errors.CheckViolation)):
        client.create_collection("huge", embedding_dims=4001)
    client.create_collection("ok", embedding_dims=8)
    with pytest.raises(InvalidArgument, match="between 1 and 4000"):
        client.add_vector_space("ok", "huge", dimensions=4001)


SMALL = 64


def small_clustered(rng: np.random.Generator, n: int) -> tuple[np.ndarray, np.ndarray]:
    centres = unit(rng.normal(size=(12, SMALL)))
    picks = rng.integers(len(centres), size=n)
    return unit(centres[picks] + rng.normal(scale=0.05, size=(n, SMALL))).astype(np.float32), centres


def write(client: Client, collection: str, vecs: np.ndarray) -> list[int]:
    client.upsert_documents(collection, [Document(source_uri=f"d{i}", chunks=[Chunk(content=f"chunk {i}",
                                                                                    embedding=vecs[i])])
                                         for i in range(len(vecs))])
    return [r[0] for r in client.source.execute(
        "select k.chunk_id from sift.chunks k join sift.documents d using (document_id) join sift.collections c "
        "on c.collection_id = d.collection_id where c.name = %s order by (substr(d.source_uri, 2))::int",
        [collection]).fetchall()]


def small_recall(client: Client, collection: str, ids: list[int], vecs: np.ndarray, centres: np.ndarray,
                 seed: int) -> float:
    rng, found = np.random.default_rng(seed), 0
    for _ in range(20):
        q = unit(centres[rng.integers(len(centres))] + rng.normal(scale=0.05, size=SMALL))
        truth = {ids[i] for i in np.argsort(-(vecs @ q))[:10]}
        hits = client.search(collection, embedding=q, top_k=10, hybrid=False, exact_search_limit=0)
        found += len(truth & {h.chunk_id for h in hits})
    return found / 200


def index_def(db, name: str) -> str | None:
    row = db.execute("select indexdef from pg_indexes where schemaname = 'sift' and indexname = %s", [name]).fetchone()
    return None if row is None else row[0]


def test_a_collection_with_index_options_of_its_own(db, figure):
    """Half precision at 64 dimensions with m 8 and ef_construction 40: its own partial index,
    walked by its leg (plan), recall as good as the shared index's, distances at full precision;
    a collection of the same size with defaults keeps the shared index, and both search together."""
    client = Client(db)
    rng = np.random.default_rng(40)
    vecs, centres = small_clustered(rng, N)
    client.create_collection("own", embedding_dims=SMALL, dense_precision="half", hnsw_m=8, hnsw_ef_construction=40)
    client.create_collection("shared", embedding_dims=SMALL)
    own_ids, shared_ids = write(client, "own", vecs), write(client, "shared", vecs)
    db.execute("analyze sift.chunks")
    cid = client.get_collection("own").collection_id
    [space] = client.vector_spaces("own")
    assert (space.dense_precision, space.hnsw_m, space.hnsw_ef_construction, space.index_name) == \
        ("half", 8, 40, f"chunks_hnsw_collection_{cid}")
    assert client.vector_spaces("shared")[0].index_name == f"chunks_hnsw_cosine_{SMALL}"
    definition = index_def(db, space.index_name)
    assert definition is not None and "halfvec" in definition and "m='8'" in definition \
        and "ef_construction='40'" in definition and f"collection_id = {cid}" in definition
    assert uses_index(db, space.index_name, None, cid, False, dims=SMALL, own=cid, half=True)
    assert uses_index(db, f"chunks_hnsw_cosine_{SMALL}", None, client.get_collection("shared").collection_id,
                      False, dims=SMALL, half=False)
    own = small_recall(client, "own", own_ids, vecs, centres, 5)
    shared = small_recall(client, "shared", shared_ids, vecs, centres, 5)
    assert own >= 0.95 and shared >= 0.95, (own, shared)
    hit = client.search("own", embedding=vecs[3], top_k=1, hybrid=False, exact_search_limit=0)[0]
    assert hit.chunk_id == own_ids[3] and hit.dense_distance == pytest.approx(0.0, abs=1e-6)
    both = client.search(["own", "shared"], embedding=vecs[3], top_k=2, hybrid=False, exact_search_limit=0)
    assert {h.chunk_id for h in both} == {own_ids[3], shared_ids[3]}
    figure("recall@10 through a collection's own half-precision HNSW index (m 8), per mille", round(own * 1000))

    client.drop_collection("own")
    assert index_def(db, space.index_name) is None   # its index went with it


def test_an_added_space_with_its_own_index(db):
    client = Client(db)
    rng = np.random.default_rng(41)
    vecs, centres = small_clustered(rng, 300)
    client.create_collection("kb", embedding_dims=8)
    ids = write(client, "kb", unit(rng.normal(size=(300, 8))).astype(np.float32))
    row = {c: i for i, c in enumerate(ids)}
    client.add_vector_space("kb", "tuned", dimensions=SMALL, hnsw_m=12, hnsw_ef_construction=48)
    report = client.reembed("kb", "tuned", vectors=lambda cids, _t: [vecs[row[c]] for c in cids])
    assert report.switched
    sid, cid = db.execute("select s.space_id, s.collection_id from sift.vector_spaces s where s.name = 'tuned'"
                          ).fetchone()
    tuned = next(s for s in client.vector_spaces("kb") if s.name == "tuned")
    assert (tuned.dense_precision, tuned.hnsw_m, tuned.hnsw_ef_construction, tuned.index_name) == \
        ("full", 12, 48, f"chunk_vectors_hnsw_space_{sid}")
    assert f"space_id = {sid}" in (index_def(db, tuned.index_name) or "")
    db.execute("analyze sift.chunk_vectors")
    assert uses_index(db, tuned.index_name, sid, cid, True, dims=SMALL, own=sid, half=False)
    assert small_recall(client, "kb", ids, vecs, centres, 6) >= 0.95
    # Back to the built-in space, then the tuned one dropped: its index goes too.
    client.reembed("kb", "default", vectors=lambda cids, _t: [unit(np.ones(8))] * len(cids))
    client.drop_vector_space("kb", "tuned")
    assert index_def(db, tuned.index_name) is None


def test_index_options_are_checked_and_kept(db, connect_as):
    client = Client(db)
    for bad, match in (({"hnsw_m": 1}, "vector_space_hnsw_m"), ({"hnsw_m": 101}, "vector_space_hnsw_m"),
                       ({"hnsw_ef_construction": 1001}, "vector_space_hnsw_ef_construction"),
                       ({"hnsw_m": 32, "hnsw_ef_construction": 40}, "vector_space_ef_construction_vs_m"),
                       ({"dense_precision": "quarter"}, "vector_space_precision")):
        with pytest.raises(InvalidArgument, match=match):
            client.create_collection("bad", embedding_dims=8, **bad)
        with pytest.raises(InvalidArgument):
            client.create_collection("bad", embedding_dims=8, hnsw_m=True)   # not an integer: refused here
    with pytest.raises(InvalidArgument, match="vector_space_half_past_2000"):
        client.create_collection("bad", embedding_dims=3000, dense_precision="full")
    assert [c.name for c in client.list_collections()] == []              # nothing half-made
    client.create_collection("kb", embedding_dims=8, hnsw_m=6)
    with pytest.raises(psycopg.Error, match="keeps the index options") as err:
        db.execute("update sift.vector_spaces set hnsw_m = 30")   # it has its index now
    assert err.value.sqlstate == "SF003"
    # An index of its own is built on the table every tenant writes to: the operator's call.
    # A tenant's admin can neither ask for one nor set options some other way.
    db.execute("select sift.map_role('t_admin', 'acme')")
    admin = Client(connect_as("t_admin"))
    with pytest.raises(PermissionDenied, match="operator"):
        admin.create_collection("mine", embedding_dims=8, hnsw_m=6)
    with pytest.raises(PermissionDenied, match="operator"):
        admin.create_collection("mine", embedding_dims=8, dense_precision="half")
    admin.create_collection("mine", embedding_dims=8)
    with pytest.raises(PermissionDenied, match="operator"):
        admin.add_vector_space("mine", "tuned", dimensions=8, hnsw_m=6)
    raw = connect_as("t_admin")
    raw.execute("select set_config('pgsift.space_options', space_id::text, false) from sift.vector_spaces")
    with pytest.raises(psycopg.errors.InsufficientPrivilege, match="operator"):
        raw.execute("update sift.vector_spaces set hnsw_m = 30")
    with pytest.raises(psycopg.errors.InsufficientPrivilege, match="operator"):
        raw.execute("select sift._ensure_space_index(space_id) from sift.vector_spaces")
    with pytest.raises(psycopg.errors.InsufficientPrivilege, match="act as"):
        raw.execute("select sift._ensure_space_index(space_id, 'postgres') from sift.vector_spaces")
    with pytest.raises(psycopg.errors.InsufficientPrivilege, match="operator"):
        raw.execute("select sift._drop_orphan_indexes()")
    # A role under row-level security may not build or drop indexes as the owner directly.
    reader = connect_as("t_reader")
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        reader.execute("select sift._drop_orphan_indexes()")


def test_an_own_index_in_use_is_dropped_later(db, dsn):
    """Dropping an index waits for its table at most 100 ms: a collection dropped while a search
    holds the table keeps its index until the next drop or sift.ensure_dense_indexes."""
    client = Client(db)
    client.create_collection("busy", embedding_dims=8, hnsw_m=6)
    name = client.vector_spaces("busy")[0].index_name
    with psycopg.connect(dsn) as other:
        other.execute("select count(*) from sift.chunks")          # holds the table, transaction open
        client.drop_collection("busy")
        assert index_def(db, name) is not None
    assert db.execute("select * from sift.ensure_dense_indexes()").fetchall() == []
    assert index_def(db, name) is None


def test_ensure_dense_indexes_names_what_it_ensured(db):
    client = Client(db)
    client.create_collection("kb", embedding_dims=8)
    client.add_vector_space("kb", "wider", dimensions=16)            # a size only an added space has
    client.add_vector_space("kb", "tuned", dimensions=16, hnsw_m=4)  # and one with its own index
    sid = db.execute("select space_id from sift.vector_spaces where name = 'tuned'").fetchone()[0]
    names = [r[0] for r in db.execute("select * from sift.ensure_dense_indexes()").fetchall()]
    assert names == sorted(["chunks_hnsw_cosine_8", "chunk_vectors_hnsw_cosine_16", f"chunk_vectors_hnsw_space_{sid}"])
    assert all(index_def(db, name) is not None for name in names)
