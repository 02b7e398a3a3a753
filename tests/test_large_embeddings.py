"""Embeddings past 2,000 dimensions (issue 16, item 5): a 3,072-dimension collection (the size
of OpenAI's text-embedding-3-large) and an added space of that size are indexed as halfvec,
walked through that index (checked in the plan) and re-scored at full precision; recall@10
against exact numpy cosine, as in tests/test_recall.py."""

from __future__ import annotations

import numpy as np
import psycopg
import pytest
from conftest import unit
from pgsift import Chunk, Client, Document, InvalidArgument
from pgsift.models import vector_text

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


def uses_index(db, name: str, space_id: int | None, collection_id: int, added: bool) -> bool:
    """The dense leg's HNSW statement, planned with its parameters: does it walk this halfvec index?"""
    sql = db.execute("select sift._dense_leg_sql(%s, 'cosine', false, false, %s)", [DIMS, added]).fetchone()[0]
    q = vector_text(unit(np.ones(DIMS)))
    cur = psycopg.ClientCursor(db)
    cur.execute("deallocate all")
    cur.execute("set enable_seqscan = off")   # a few hundred rows: the planner may rather sort them all
    cur.execute("prepare leg(public.vector, bigint[], jsonpath, integer, bigint) as " + sql.replace("%", "%%"))
    plan = "\n".join(r[0] for r in cur.execute(
        "explain (costs off) execute leg(%s::public.vector, %s::bigint[], null, 10, %s::bigint)",
        [q, [collection_id], space_id]).fetchall())
    cur.execute("reset enable_seqscan")
    return name in plan and "halfvec" in plan


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
