"""The finalize stage inside sift.search: several collections in one pool (per-collection
boosts, the strictest setting wins, one embedding size), explain showing every knob, and
one end-to-end search with every knob on, checked against the Python reference."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import numpy as np
import pgsift
import psycopg
import pytest
from conftest import random_documents, unit
from pgsift import Chunk, Client, Document
from pgsift.errors import IncompatibleCollections
from psycopg.types.json import Jsonb
from test_finalize_oracle import NEAR_TIE, Row, recency_factor, reference_finalize

DIMS = 8


def ids(result) -> list[int]:
    return [h.chunk_id for h in result]


@pytest.fixture
def two(client):
    """Collections a and b (same size, different documents), and a query vector."""
    rng = np.random.default_rng(31)
    for name, seed in (("a", 1), ("b", 2)):
        client.create_collection(name, embedding_dims=DIMS, fetch_k=15)
        client.upsert_documents(name, random_documents(np.random.default_rng(seed), 12, DIMS, prefix=name))
    return unit(rng.normal(size=DIMS))


# -- the defaults change nothing ---------------------------------------------------------------

def test_default_knobs_keep_the_fused_order(client, two):
    pool = client.explain("a", "alpha bravo", embedding=two, top_k=10)
    result = client.search("a", "alpha bravo", embedding=two, top_k=10)
    assert len(pool) > 10
    assert ids(result) == [c.chunk_id for c in pool[:10]]            # two chunks a document: cap 5 idle
    for rank, hit in enumerate(result, 1):
        assert hit.rank == hit.position == hit.pool_rank == rank
        assert hit.score == hit.base_score and hit.recency_factor == 1 and hit.boost == 1
        assert hit.collection_name == "a" and hit.threshold_applied is False and hit.below_threshold == 0


# -- several collections ------------------------------------------------------------------------

def test_several_collections_are_one_pool_on_one_scale(client, two):
    # Each collection's own pool is the same at top_k 12 (fetch_k 15 either way).
    one = {name: client.search(name, "alpha bravo", embedding=two, top_k=12, per_document_cap=0)
           for name in ("a", "b")}
    both = client.search(["a", "b"], "alpha bravo", embedding=two, top_k=12, per_document_cap=0)
    merged = sorted([h for r in one.values() for h in r], key=lambda h: (-h.score, h.chunk_id))
    assert [(h.chunk_id, h.score) for h in both] == [(h.chunk_id, h.score) for h in merged[:12]]
    assert {h.collection_name for h in both} == {"a", "b"}
    for h in both:
        assert h.chunk_id in ids(one[h.collection_name])
        mine = next(x for x in one[h.collection_name] if x.chunk_id == h.chunk_id)
        assert (h.dense_rank, h.lexical_rank) == (mine.dense_rank, mine.lexical_rank)   # per-collection legs
    assert both.legs == ["dense", "lexical"]

    # A boost multiplies a collection's scores (per call, or stored).
    boosted = client.search(["a", "b"], "alpha bravo", embedding=two, top_k=12, per_document_cap=0,
                            boost={"b": 3})
    rescored = sorted([(h.score * (3 if n == "b" else 1), h.chunk_id) for n, r in one.items() for h in r],
                      key=lambda t: (-t[0], t[1]))
    assert [(h.chunk_id, pytest.approx(h.score)) for h in boosted] == [(c, s) for s, c in rescored[:12]]
    assert {h.collection_name for h in boosted[:6]} == {"b"}
    client.alter_collection("b", boost=3)
    stored = client.search(["a", "b"], "alpha bravo", embedding=two, top_k=12, per_document_cap=0)
    assert ids(stored) == ids(boosted)
    # The list order does not matter: a per-collection value names its collection.
    assert ids(client.search(["b", "a"], "alpha bravo", embedding=two, top_k=12, per_document_cap=0)) == ids(stored)


def test_the_strictest_setting_wins(client, db, two):
    client.alter_collection("a", per_document_cap=3, mmr_lambda=0.9)
    client.alter_collection("b", per_document_cap=0, mmr_lambda=None, score_threshold=0.001)
    knobs = db.execute(
        "select max(below_threshold), bool_and(threshold_applied), count(mmr_penalty) "
        "from sift.explain(collections => array['a', 'b'], query_text => 'alpha', "
        "query_embedding => %s, match_count => 5)", (str(two.tolist()),)).fetchone()
    assert knobs[1] is True and knobs[2] > 0                 # b's threshold and a's lambda both apply
    # The smallest lambda: b's 0.5 over a's 0.9.
    client.alter_collection("b", mmr_lambda=0.5)
    for penalty, similarity in db.execute(
            "select mmr_penalty, mmr_similarity from sift.explain(collections => array['a', 'b'], "
            "query_text => 'alpha', query_embedding => %s, match_count => 5) where kept",
            (str(two.tolist()),)).fetchall():
        assert penalty == pytest.approx(0.5 * similarity)
    client.alter_collection("b", mmr_lambda=None)
    # Caps: the smallest that is on (3, not b's 0 = off).
    docs = [Document(source_uri="big", chunks=[Chunk(content="zulu zulu", embedding=two) for _ in range(6)])]
    client.upsert_documents("b", docs)
    hits = client.search(["a", "b"], "zulu", embedding=two, top_k=6, mmr_lambda=1, score_threshold=0)
    assert sum(h.source_uri == "big" for h in hits) == 3
    # lost_in_the_middle: on if any collection asks for it.
    client.alter_collection("a", lost_in_the_middle=True)
    shown = client.search(["a", "b"], "alpha", embedding=two, top_k=5)
    assert [h.rank for h in shown] == [1, 3, 5, 4, 2]


def test_collections_of_different_sizes_are_refused(client, db, two):
    client.create_collection("small", embedding_dims=4)
    with pytest.raises(IncompatibleCollections) as info:
        client.search(["a", "small"], "alpha")
    assert '"a" (8)' in str(info.value) and '"small" (4)' in str(info.value)
    assert isinstance(info.value, pgsift.InvalidArgument)
    for fn in ("search", "explain", "candidates"):
        with pytest.raises(psycopg.Error) as err:
            db.execute(f"select * from sift.{fn}(collections => array['a', 'small'], query_text => 'alpha')")
        assert err.value.sqlstate == "SF007"
    with pytest.raises(psycopg.Error) as err:
        db.execute("select * from sift.finalize(collections => array['small', 'a'], chunk_ids => '{1}')")
    assert err.value.sqlstate == "SF007"


def test_collection_arguments_are_checked(client, db, two):
    with pytest.raises(pgsift.InvalidArgument):
        client.search(["a", "a"], "alpha")
    with pytest.raises(pgsift.InvalidArgument):
        client.search([], "alpha")
    with pytest.raises(pgsift.InvalidKnob, match="not among the collections searched"):
        client.search(["a", "b"], "alpha", boost={"c": 2})
    with pytest.raises(pgsift.CollectionNotFound):
        client.search(["a", "nope"], "alpha")
    with pytest.raises(pgsift.CollectionNotFound):                 # another tenant's are not yours
        Client(db, tenant="t2").search(["a", "b"], "alpha")
    for args in ("", "collection => 'a', collections => array['b']", "collections => array['a', null]"):
        with pytest.raises(psycopg.Error) as err:
            db.execute(f"select * from sift.search({args})")
        assert err.value.sqlstate == "SF003", args
    with pytest.raises(psycopg.Error) as err:
        db.execute("""select * from sift.search(collections => array['a', 'b'],
                                                knobs => '{"boost": {"a": 1, "c": 2}}')""")
    assert err.value.sqlstate == "SF009"
    with pytest.raises(psycopg.errors.CheckViolation):
        db.execute("""select * from sift.search(collections => array['a', 'b'], knobs => '{"boost": {"b": 0}}')""")


async def test_asearch_over_several_collections(client, dsn, two):
    want = client.search(["a", "b"], "alpha", embedding=two, top_k=8, mmr_lambda=0.6)
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        got = await pgsift.AsyncClient(conn).search(["a", "b"], "alpha", embedding=two, top_k=8, mmr_lambda=0.6)
        pool = await pgsift.AsyncClient(conn).explain(["a", "b"], "alpha", embedding=two, top_k=8, mmr_lambda=0.6)
    assert got.hits == want.hits
    assert sorted((c.final_rank, c.chunk_id) for c in pool if c.kept) == [(h.rank, h.chunk_id) for h in want]


# -- explain -----------------------------------------------------------------------------------

def test_explain_shows_what_each_knob_did(client, db):
    now = datetime.now(timezone.utc)
    rng = np.random.default_rng(8)
    client.create_collection("k", embedding_dims=DIMS, recency_field="created", recency_weight=0.3)
    query = unit(rng.normal(size=DIMS))
    docs = [Document(source_uri=f"d{i}", created_at=None if i == 0 else now - timedelta(days=10 * i),
                     chunks=[Chunk(content=f"kilo lima {i} {j}",
                                   embedding=unit(query + rng.normal(scale=0.5, size=DIMS)))
                             for j in range(4)]) for i in range(6)]
    client.upsert_documents("k", docs)
    knobs = dict(top_k=6, per_document_cap=1, mmr_lambda=0.7, boost=2.0, lost_in_the_middle=True)
    base = client.explain("k", "kilo", embedding=query, top_k=50, per_document_cap=0)
    threshold = sorted(c.base_score for c in base)[len(base) // 4]
    with db.transaction():   # one now() for both, so recency agrees to the last bit
        result = client.search("k", "kilo", embedding=query, score_threshold=threshold, **knobs)
        pool = client.explain("k", "kilo", embedding=query, score_threshold=threshold, **knobs)

    kept = sorted((c for c in pool if c.kept), key=lambda c: c.position)
    assert [(c.chunk_id, c.final_rank, c.position, c.score) for c in kept] == \
        [(h.chunk_id, h.rank, h.position, h.score) for h in result]
    cut_by = {c.cut_by for c in pool}
    assert {None, "score_threshold", "per_document_cap"} <= cut_by <= {None, "score_threshold",
                                                                       "per_document_cap", "mmr"}
    for c in pool:
        assert c.boost == 2.0
        assert c.score == pytest.approx(c.base_score * c.recency_factor * 2.0)
        if c.source_uri == "d0":
            assert c.recency_date is None and c.recency_factor == pytest.approx(0.7)
        else:
            assert c.recency_date is not None and 0.7 < c.recency_factor < 1
        assert c.threshold_applied and c.below_threshold == sum(x.base_score < threshold for x in pool)
        if c.cut_by == "score_threshold":
            assert c.base_score < threshold and c.cap_status is None and c.mmr_penalty is None
        elif c.cut_by == "per_document_cap":
            assert c.cap_status == "capped" and not c.kept
            assert sum(k.document_id == c.document_id for k in kept) >= 1
        if c.kept:
            assert c.reason.startswith(f"kept: rank {c.final_rank} of 6") and "MMR penalty" in c.reason
            assert c.mmr_penalty == pytest.approx(0.3 * c.mmr_similarity)
            assert "recency x" in c.reason and "boost x2" in c.reason
    assert [c.fused_rank for c in pool] == list(range(1, len(pool) + 1))


# -- everything at once, end to end --------------------------------------------------------------

def test_one_search_call_applies_every_knob(client, db):
    """sift.search with recency, boosts, threshold, cap, MMR and lost-in-the-middle over two
    collections equals the Python reference run on sift.candidates' pool."""
    rng = np.random.default_rng(13)
    now = datetime.now(timezone.utc)
    query = unit(rng.normal(size=DIMS))
    words = ["alpha", "bravo", "charlie", "delta", "echo"]
    for name in ("news", "wiki"):
        client.create_collection(name, embedding_dims=DIMS, fetch_k=20, recency_field="published",
                                 recency_half_life=timedelta(days=30), recency_weight=0.25, recency_ceiling=0.5)
        docs = []
        for d in range(10):
            meta = {} if d % 4 == 3 else {"published": (now - timedelta(days=float(rng.uniform(0, 200)))).isoformat()}
            docs.append(Document(source_uri=f"{name}-{d}", metadata=meta, chunks=[
                Chunk(content=" ".join(rng.choice(words, size=5)),
                      embedding=unit(query + rng.normal(scale=0.8, size=DIMS)))
                for _ in range(int(rng.integers(1, 5)))]))
        client.upsert_documents(name, docs)

    knobs = {"boost": {"news": 1.0, "wiki": 1.5}, "recency_bias": 0.5, "per_document_cap": 2,
             "mmr_lambda": 0.6, "lost_in_the_middle": True}
    vec = "[" + ",".join(map(repr, query.tolist())) + "]"
    args = ("collections => array['news', 'wiki'], query_text => 'alpha delta', query_embedding => %(q)s, "
            "match_count => 8")
    with db.transaction():
        as_of = db.execute("select now()").fetchone()[0]
        pool = db.execute(f"select chunk_id, document_id, score, collection_name from sift.candidates({args})",
                          {"q": vec}).fetchall()
        threshold = sorted(p[2] for p in pool)[len(pool) // 5]
        got = db.execute(f"select chunk_id, rank, position, threshold_applied, below_threshold, legs "
                         f"from sift.search({args}, knobs => %(knobs)s)",
                         {"q": vec, "knobs": Jsonb({**knobs, "score_threshold": threshold})}).fetchall()
        meta = dict(db.execute("select k.chunk_id, d.metadata from sift.chunks k "
                               "join sift.documents d using (document_id)").fetchall())
        vectors = {cid: np.array(json.loads(v)) for cid, v in
                   db.execute("select chunk_id, embedding::text from sift.chunks").fetchall()}

    weight = 0.25 + 0.5 * (0.5 - 0.25)
    rows = []
    for chunk_id, doc, score, name in pool:
        date = meta[chunk_id].get("published")
        factor = recency_factor(datetime.fromisoformat(date) if date else None, as_of, timedelta(days=30), weight)
        rows.append(Row(chunk_id, doc, score, factor, knobs["boost"][name], vectors[chunk_id]))
    want, gap = reference_finalize(rows, 8, cap=2, lam=0.6, threshold=threshold, litm=True)
    assert gap > NEAR_TIE
    assert [g[0] for g in got] == want
    assert [g[2] for g in got] == list(range(1, 9))
    assert all(g[3] and g[4] == sum(p[2] < threshold for p in pool) for g in got)
    assert {tuple(g[5]) for g in got} == {("dense", "lexical")}


def test_search_with_every_knob_runs_read_only(client, db, two):
    client.alter_collection("a", recency_field="created", mmr_lambda=0.5, score_threshold=0.001,
                            lost_in_the_middle=True, per_document_cap=1)
    with db.transaction():
        db.execute("set transaction read only")
        n = db.execute("select count(*) from sift.search(collections => array['a', 'b'], query_text => 'alpha', "
                       "query_embedding => %s, knobs => '{\"boost\": {\"a\": 2}, \"recency_bias\": 1}')",
                       (str(two.tolist()),)).fetchone()[0]
        assert n == 10
        assert db.execute("select count(*) from sift.explain(collection => 'a', query_text => 'alpha')").fetchone()[0]
