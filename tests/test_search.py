"""End-to-end behaviour of sift.search, Client.search and explain."""

from __future__ import annotations

import json

import numpy as np
import pgsift
import psycopg
import pytest
from conftest import random_documents, unit
from pgsift import Chunk, Client, Document
from psycopg import sql

DIMS = 8


def f32(v) -> np.ndarray:
    """What pgvector stores: float32, read back as float64."""
    return np.asarray(v, dtype=np.float32).astype(np.float64)


def stored_embeddings(db, collection: str, tenant: str = "default") -> dict[int, np.ndarray]:
    rows = db.execute(
        "select k.chunk_id, k.embedding::text from sift.chunks k"
        " join sift.collections c on c.collection_id = k.collection_id"
        " where c.name = %s and c.tenant = %s", (collection, tenant)).fetchall()
    return {cid: np.array(json.loads(text)) for cid, text in rows}


def chunk_ids(db, collection: str, tenant: str = "default") -> set[int]:
    return set(stored_embeddings(db, collection, tenant))


def exact_cosine_top(embeddings: dict[int, np.ndarray], query: np.ndarray, k: int) -> list[int]:
    """Oracle: exact cosine top-k, ties by chunk id."""
    ids = np.array(sorted(embeddings))
    m = np.stack([embeddings[i] for i in ids])
    dist = 1 - m @ query / (np.linalg.norm(m, axis=1) * np.linalg.norm(query))
    return ids[np.lexsort((ids, dist))][:k].tolist()


def ids(result) -> list[int]:
    return [h.chunk_id for h in result]


@pytest.fixture
def corpus(client):
    """60 random chunks plus three chunks sharing one embedding (an exact distance tie)."""
    client.create_collection("corpus", embedding_dims=DIMS, fetch_k=10)
    rng = np.random.default_rng(21)
    query = f32(rng.normal(size=DIMS))
    twin = unit(query + rng.normal(scale=0.3, size=DIMS))
    docs = random_documents(rng, 30, DIMS)
    docs += [Document(source_uri=f"twin-{i}", chunks=[Chunk(content="golf hotel twin", embedding=twin)])
             for i in range(3)]
    client.upsert_documents("corpus", docs)
    return "corpus", query


# -- hybrid off is plain dense search -------------------------------------------------

def test_hybrid_off_equals_exact_cosine_top_k(client, db, corpus):
    name, query = corpus
    want = exact_cosine_top(stored_embeddings(db, name), query, 12)
    twins = [h.chunk_id for h in client.search(name, "twin", top_k=3)]
    assert set(twins) <= set(want)                                      # the tie is inside the top 12

    result = client.search(name, "alpha bravo twin", embedding=query, top_k=12, hybrid=False)
    assert ids(result) == want
    assert result.legs == ["dense"] and result.lexical_query is None
    assert all(h.found_by == "dense" and h.lexical_rank is None for h in result)
    assert [h.dense_rank for h in result] == list(range(1, 13))
    embeddings = stored_embeddings(db, name)
    for h in result:
        v = embeddings[h.chunk_id]
        assert h.dense_distance == pytest.approx(1 - v @ query / np.linalg.norm(v) / np.linalg.norm(query), abs=1e-5)

    # dense_weight has nothing to weigh when only one leg runs.
    assert ids(client.search(name, "alpha twin", embedding=query, top_k=12, hybrid=False, dense_weight=0)) == want
    # Text-free search is dense-only as well.
    assert ids(client.search(name, embedding=query, top_k=12)) == want


def test_hybrid_off_per_collection(client, db, corpus):
    name, query = corpus
    want = exact_cosine_top(stored_embeddings(db, name), query, 10)
    assert ids(client.search(name, "alpha twin", embedding=query, top_k=10)) != want   # hybrid changes it
    assert client.alter_collection(name, hybrid=False).settings["hybrid"] is False
    result = client.search(name, "alpha twin", embedding=query, top_k=10)
    assert ids(result) == want
    assert result.legs == ["dense"]
    # The per-call knob still wins over the collection's setting.
    assert client.search(name, "alpha twin", embedding=query, top_k=10, hybrid=True).legs == ["dense", "lexical"]


# -- the metadata filter runs inside each leg --------------------------------------------

@pytest.mark.parametrize("exact_search_limit", [10_000, 0], ids=["exact", "hnsw"])
def test_filter_is_applied_inside_each_leg(client, db, exact_search_limit):
    client.create_collection("f", embedding_dims=DIMS, fetch_k=5, exact_search_limit=exact_search_limit)
    rng = np.random.default_rng(4)
    query = unit(rng.normal(size=DIMS))
    docs = []
    for i in range(40):
        if i % 2:   # odd: the best match in both legs
            chunk = Chunk(content="zebra zebra zebra", embedding=unit(query + rng.normal(scale=0.01, size=DIMS)))
        else:       # even: far away, and only some mention zebra once
            chunk = Chunk(content="zebra and some filler" if i % 4 == 0 else "plain filler words",
                          embedding=unit(rng.normal(size=DIMS)))
        docs.append(Document(source_uri=f"d{i}", chunks=[chunk],
                             metadata={"parity": "odd" if i % 2 else "even"}))
    client.upsert_documents("f", docs)

    unfiltered = client.search("f", "zebra", embedding=query, top_k=5)
    assert {h.metadata["parity"] for h in unfiltered} == {"odd"}        # odd chunks win without the filter

    result = client.search("f", "zebra", embedding=query, top_k=5, filter={"parity": "even"})
    assert len(result) == 5                                             # not emptied by a post-fusion filter
    assert {h.metadata["parity"] for h in result} == {"even"}
    assert any(h.found_by == "both" for h in result)
    pool = client.explain("f", "zebra", embedding=query, top_k=5, filter={"parity": "even"})
    assert {c.source_uri for c in pool} <= {f"d{i}" for i in range(0, 40, 2)}
    odd = [h.chunk_id for h in unfiltered]
    asked = client.explain("f", "zebra", embedding=query, top_k=5, filter={"parity": "even"}, chunk_ids=odd)
    for c in asked:
        if c.chunk_id in odd:
            assert not c.kept and c.reason.startswith("not retrieved")
            assert "excluded by the metadata filter" in c.reason
    # Lexical-only and dense-only searches filter too.
    assert {h.metadata["parity"] for h in client.search("f", "zebra", top_k=5, filter={"parity": "even"})} == {"even"}
    dense = client.search("f", embedding=query, top_k=5, filter={"parity": "even"})
    assert len(dense) == 5 and {h.metadata["parity"] for h in dense} == {"even"}


# -- isolation between collections and tenants -----------------------------------------

def test_collections_and_tenants_are_isolated(db):
    a, b = Client(db, tenant="a"), Client(db, tenant="b")
    rng = np.random.default_rng(8)
    docs = random_documents(rng, 10, DIMS)   # the very same documents everywhere
    for client, name in ((a, "docs"), (b, "docs"), (a, "other")):
        client.create_collection(name, embedding_dims=DIMS)
        client.upsert_documents(name, docs)
    own, theirs, sibling = chunk_ids(db, "docs", "a"), chunk_ids(db, "docs", "b"), chunk_ids(db, "other", "a")
    assert len(own) == len(theirs) == len(sibling) == 20

    query = rng.normal(size=DIMS)
    for client, name, mine in ((a, "docs", own), (b, "docs", theirs), (a, "other", sibling)):
        for kwargs in ({"embedding": query}, {}, {"embedding": query, "hybrid": False}):
            result = client.search(name, "alpha charlie", top_k=50, **kwargs)
            assert result.hits and set(ids(result)) <= mine
    # explain never reveals another tenant's (or collection's) chunks, even when asked by id.
    asked = sorted(theirs | sibling)[:10]
    pool = a.explain("docs", "alpha", embedding=query, top_k=5, chunk_ids=asked)
    assert {c.chunk_id for c in pool} <= own
    assert not {c.chunk_id for c in pool} & set(asked)
    with pytest.raises(pgsift.CollectionNotFound):
        Client(db, tenant="c").search("docs", "alpha")


# -- found_by, explain and the pool ------------------------------------------------------

def test_explain_is_the_pool_behind_search(client, corpus):
    name, query = corpus
    text, top_k, fetch_k = "alpha bravo twin", 4, 10
    result = client.search(name, text, embedding=query, top_k=top_k)
    pool = client.explain(name, text, embedding=query, top_k=top_k)

    for row in [*result, *pool]:
        want = {(True, True): "both", (True, False): "dense", (False, True): "lexical"}[
            (row.dense_rank is not None, row.lexical_rank is not None)]
        assert row.found_by == want
    dense = ids(client.search(name, text, embedding=query, top_k=fetch_k, hybrid=False))
    lexical = ids(client.search(name, text, top_k=fetch_k))
    assert len(lexical) == fetch_k
    assert {c.chunk_id for c in pool} == set(dense) | set(lexical)
    assert len(pool) <= 2 * fetch_k
    assert [c.fused_rank for c in pool] == list(range(1, len(pool) + 1))
    assert all(c.kept == (c.fused_rank <= top_k) for c in pool)
    kept = [c for c in pool if c.kept]
    assert [(c.chunk_id, c.score) for c in kept] == [(h.chunk_id, h.score) for h in result]
    assert len(result) == top_k


def test_explain_says_why_a_chunk_was_not_retrieved(client, db, corpus):
    name, query = corpus
    pool = client.explain(name, "twin", embedding=query, top_k=3)
    outside = sorted(chunk_ids(db, name) - {c.chunk_id for c in pool})[:3]
    assert outside
    asked = client.explain(name, "twin", embedding=query, top_k=3, chunk_ids=outside)
    assert [c.chunk_id for c in asked[:len(pool)]] == [c.chunk_id for c in pool]
    extra = asked[len(pool):]
    assert [c.chunk_id for c in extra] == outside
    for c in extra:
        assert c.kept is False and c.fused_rank is None and c.score is None
        assert c.reason.startswith("not retrieved")
        assert c.dense_distance is not None


def test_explain_reason_when_the_pool_is_empty(client, db, corpus):
    # Lexical-only search for a word no chunk has: the leg ran and matched nothing.
    name, _ = corpus
    asked = sorted(chunk_ids(db, name))[:2]
    assert len(client.search(name, "zebra", top_k=5)) == 0
    rows = client.explain(name, "zebra", top_k=5, chunk_ids=asked)
    assert [c.chunk_id for c in rows] == asked
    for c in rows:
        assert c.kept is False and c.reason.startswith("not retrieved")
        assert c.reason.endswith("does not match the lexical query")
        assert c.legs == ["lexical"] and c.lexical_query == "'zebra'"


# -- per-call knobs ----------------------------------------------------------------------

def test_per_call_knobs_change_the_result(client, corpus):
    name, query = corpus
    text = "alpha bravo twin"
    lexical = ids(client.search(name, text, top_k=10))
    dense = ids(client.search(name, text, embedding=query, top_k=10, hybrid=False))
    hybrid = ids(client.search(name, text, embedding=query, top_k=10))
    lexical_first = client.search(name, text, embedding=query, top_k=10, dense_weight=0)
    assert ids(lexical_first) == lexical
    assert [h.lexical_rank for h in lexical_first] == list(range(1, 11))
    dense_first = client.search(name, text, embedding=query, top_k=10, dense_weight=1)
    assert ids(dense_first) == dense
    assert hybrid not in (lexical, dense)

    assert len(client.search(name, text, embedding=query, top_k=0)) == 0
    small_fetch = client.search(name, text, embedding=query, top_k=8, fetch_k=2)
    assert len(small_fetch) == 8
    sharp = client.search(name, text, embedding=query, top_k=10, rrf_k=1)
    for hit in sharp:  # the override, not the collection's k = 60, is what fused them
        expected = (0.5 / (1 + hit.dense_rank) if hit.dense_rank else 0) + \
                   (0.5 / (1 + hit.lexical_rank) if hit.lexical_rank else 0)
        assert hit.score == pytest.approx(expected, rel=1e-12)


# -- errors ------------------------------------------------------------------------------

def test_errors_are_typed(client, corpus):
    name, query = corpus
    with pytest.raises(pgsift.CollectionNotFound):
        client.search("nope", "alpha")
    with pytest.raises(pgsift.DimensionMismatch) as err:
        client.search(name, "alpha", embedding=np.ones(DIMS + 3))
    assert (err.value.got, err.value.expected) == (DIMS + 3, DIMS)
    for knob, value in (("dense_weight", 1.5), ("rrf_k", 0), ("fetch_k", 0), ("fetch_k", 1001)):
        with pytest.raises(pgsift.InvalidKnob) as err:
            client.search(name, "alpha", embedding=query, **{knob: value})
        assert err.value.knob == knob
        assert knob in str(err.value)


def test_raw_sql_knob_out_of_range_is_a_check_violation_naming_it(db):
    db.execute("select sift.create_collection('x', 3)")
    with pytest.raises(psycopg.errors.CheckViolation) as info:
        db.execute("""select * from sift.search(collection => 'x', knobs => '{"dense_weight": 2}')""")
    assert "sift.dense_weight" in info.value.diag.message_primary


# -- presets ------------------------------------------------------------------------------

def test_the_pgvector_preset_is_exactly_pgvectors_order(client, db):
    # Documents of eight chunks each: the default per-document cap (5) reorders a dense-only
    # answer, so hybrid => false alone is not pgvector's order; the preset is, by exact scan.
    client.create_collection("p", embedding_dims=DIMS)
    rng = np.random.default_rng(31)
    query = f32(rng.normal(size=DIMS))
    docs = [Document(source_uri=f"d{i}", chunks=[
        Chunk(content="alpha", embedding=unit(query + rng.normal(scale=0.2 if i == 0 else 1.0, size=DIMS)))
        for _ in range(8)]) for i in range(6)]
    client.upsert_documents("p", docs)
    want = exact_cosine_top(stored_embeddings(db, "p"), query, 12)
    assert ids(client.search("p", "alpha", embedding=query, top_k=12, preset="pgvector")) == want
    assert ids(client.search("p", "alpha", embedding=query, top_k=12, hybrid=False)) != want
    raw = db.execute("select chunk_id from sift.search('p', 'alpha', %s, 12, knobs => '{\"preset\": \"pgvector\"}')",
                     ["[" + ",".join(map(repr, query.tolist())) + "]"]).fetchall()
    assert [r[0] for r in raw] == want
    # The same ids pgvector's own operator gives on the table, ordered by distance.
    direct = db.execute("select chunk_id from sift.chunks order by embedding <=> %s::vector, chunk_id limit 12",
                        ["[" + ",".join(map(repr, query.tolist())) + "]"]).fetchall()
    assert [r[0] for r in direct] == want


def test_the_seeds_preset_and_keys_beside_a_preset(client, corpus):
    name, query = corpus
    seeds = client.search(name, "alpha bravo twin", embedding=query, top_k=5, preset="seeds")
    for hit in seeds:
        expected = (0.7 / (60 + hit.dense_rank) if hit.dense_rank else 0) + \
                   (0.3 / (60 + hit.lexical_rank) if hit.lexical_rank else 0)
        assert hit.base_score == pytest.approx(expected, rel=1e-12)
    tuned = client.search(name, "alpha bravo twin", embedding=query, top_k=5, preset="seeds", rrf_k=10)
    for hit in tuned:   # a key beside the preset wins over it
        expected = (0.7 / (10 + hit.dense_rank) if hit.dense_rank else 0) + \
                   (0.3 / (10 + hit.lexical_rank) if hit.lexical_rank else 0)
        assert hit.base_score == pytest.approx(expected, rel=1e-12)
    with pytest.raises(pgsift.InvalidKnob, match="unknown preset"):
        client.search(name, "alpha", preset="nope")
    client.alter_collection(name, preset="seeds")   # a preset stores as its values
    assert client.get_collection(name).knobs == {"fetch_k": 40, "dense_weight": 0.7, "rrf_k": 60}


# -- the plan (a fact about the statement, not a timing) ----------------------------------

def _plan_nodes(node: dict):
    yield node
    for child in node.get("Plans", []):
        yield from _plan_nodes(child)


def _dense_leg_plan(db, collection_id: int, query: np.ndarray, exact: bool) -> list[dict]:
    statement = db.execute("select sift._dense_leg_sql(%s, 'cosine', %s, false)", (DIMS, exact)).fetchone()[0]
    db.execute(sql.SQL("prepare dense_leg(vector, bigint[], jsonb, integer) as {}").format(sql.SQL(statement)))
    try:
        explain = sql.SQL("explain (format json) execute dense_leg({}, {}, '{{}}', 10)").format(
            sql.Literal("[" + ",".join(map(repr, query.tolist())) + "]"), sql.Literal([collection_id]))
        plan = db.execute(explain).fetchone()[0]
    finally:
        db.execute("deallocate dense_leg")
    return list(_plan_nodes(plan[0]["Plan"]))


def test_exact_or_walk_is_decided_by_size_and_share_of_the_index(db, connect_as):
    """Exact up to exact_search_limit chunks; up to twice that only while the collection
    holds under a tenth of the shared index the walk would use (of its size: not the table);
    past either, or with an index of its own, the walk; exact while the shared index is not
    built. Counted from the statistics, not the rows, and the same for a tenant's role under
    row-level security."""
    client = Client(db, tenant="acme")
    small = client.create_collection("small", embedding_dims=DIMS)
    big = client.create_collection("big", embedding_dims=DIMS)
    wide = client.create_collection("wide", embedding_dims=2 * DIMS)
    rng = np.random.default_rng(5)
    client.upsert_documents("small", random_documents(rng, 30, DIMS))          # 60 chunks
    client.upsert_documents("big", random_documents(rng, 330, DIMS))           # 660 chunks
    client.upsert_documents("wide", random_documents(rng, 30, 2 * DIMS))       # 60 chunks, its own size

    def exact(conn, collection_ids: list[int], limit: int, index: str | None) -> bool:
        return conn.execute("select sift._dense_exact(%s, %s, %s)", [collection_ids, limit, index]).fetchone()[0]

    shared, wide_index = f"chunks_hnsw_cosine_{DIMS}", f"chunks_hnsw_cosine_{2 * DIMS}"
    # Never analyzed or built since the rows came: the index's count is unknown or stale low,
    # which reads as no share (the walk past the limit).
    db.execute(f"update pg_class set reltuples = -1 where relname = '{shared}'")
    assert not exact(db, [small.collection_id], 30, shared)
    db.execute("analyze sift.chunks")
    db.execute("select sift.map_role('t_reader', 'acme')")
    reader = connect_as("t_reader")
    for conn in (db, reader):
        assert exact(conn, [small.collection_id], 60, shared)          # at the limit
        assert exact(conn, [small.collection_id], 30, shared)          # twice the limit, 8% of the index
        assert not exact(conn, [small.collection_id], 30, None)        # an index of its own: the walk
        assert not exact(conn, [small.collection_id], 29, shared)      # past twice the limit
        assert not exact(conn, [small.collection_id], 0, shared)       # 0 always walks
        assert not exact(conn, [big.collection_id], 330, shared)       # twice the limit, 92% of the index
        assert exact(conn, [big.collection_id], 660, shared)
        assert not exact(conn, [small.collection_id, big.collection_id], 360, shared)   # the whole index
        # 60 chunks are 8% of the table but all of their size's index: the walk.
        assert not exact(conn, [wide.collection_id], 30, wide_index)
        # a size whose shared index waits for the operator's build: exact meanwhile, at any size
        assert exact(conn, [big.collection_id], 0, "no_such_index")

    # An added space's vectors: the share of the added spaces' index of that size.
    for name in ("small", "big"):
        client.add_vector_space(name, "v2", dimensions=4)
        ids_ = [r[0] for r in db.execute("select k.chunk_id from sift.chunks k join sift.collections c "
                                         "using (collection_id) where c.name = %s order by 1", [name])]
        client.write_space_vectors(name, "v2", ids_, [unit(rng.normal(size=4)) for _ in ids_])
    db.execute("analyze sift.chunk_vectors")
    assert exact(reader, [small.collection_id], 30, "chunk_vectors_hnsw_cosine_4")
    assert not exact(reader, [big.collection_id], 330, "chunk_vectors_hnsw_cosine_4")
    assert len(client.search("small", embedding=unit(rng.normal(size=4)), top_k=10,
                             dense_space="v2", exact_search_limit=30)) == 10

    # Either way the answer is the exact one here.
    query = unit(rng.normal(size=DIMS))
    want = exact_cosine_top(stored_embeddings(db, "small", "acme"), f32(query), 10)
    for limit in (30, 0):
        assert ids(client.search("small", embedding=query, top_k=10, exact_search_limit=limit)) == want


def test_hnsw_ef_search_is_the_walks_candidate_list(client, db):
    """The knob (stored or per call) reaches every index walk of a search, the main space's
    and an added one's, at least the rows the leg asks for and at most 1,000; a session's
    own hnsw.ef_search is neither read nor changed; an exact scan needs none."""
    assert db.execute("select sift._hnsw_ef_search(null, 40), sift._hnsw_ef_search(64, 40), "
                      "sift._hnsw_ef_search(10, 40), sift._hnsw_ef_search(100, 300), "
                      "sift._hnsw_ef_search(1000, 2000)").fetchone() == (100, 64, 40, 300, 1000)
    client.create_collection("walk", embedding_dims=DIMS, exact_search_limit=0, fetch_k=20)
    rng = np.random.default_rng(8)
    client.upsert_documents("walk", random_documents(rng, 40, DIMS))
    client.add_vector_space("walk", "alt", dimensions=4)
    ids_ = sorted(chunk_ids(db, "walk"))
    client.write_space_vectors("walk", "alt", ids_, [unit(rng.normal(size=4)) for _ in ids_])
    db.execute("analyze sift.chunks")
    # A spy in place of the helper: which value each walk asked for, for how many rows.
    db.execute("""
        create or replace function sift._hnsw_ef_search(requested integer, wanted integer)
        returns integer language plpgsql as $$
        begin
            raise notice 'walk %/%', requested, wanted;
            return least(greatest(coalesce(requested, 100), wanted), 1000);
        end $$""")
    seen: list[str] = []
    db.add_notice_handler(lambda d: seen.append(d.message_primary or ""))
    db.execute("set hnsw.ef_search = 7")
    query = unit(rng.normal(size=DIMS))

    def walks(top_k: int = 10, **knobs) -> list[str]:
        seen.clear()
        hits = client.search("walk", embedding=query, top_k=top_k, hybrid=False, **knobs)
        assert len(hits) == top_k
        return list(seen)

    assert walks() == ["walk 100/20"]
    assert walks(hnsw_ef_search=64) == ["walk 64/20"]
    assert walks(top_k=30, hnsw_ef_search=1, per_document_cap=None) == ["walk 1/30"]
    assert client.alter_collection("walk", hnsw_ef_search=300).settings["hnsw_ef_search"] == 300
    assert walks() == ["walk 300/20"]
    # Questions as vectors: their walk takes at least 5n of them.
    db.execute("insert into sift.question_vectors (chunk_id, ordinal, collection_id, embedding) "
               "select k.chunk_id, 0, k.collection_id, k.embedding from sift.chunks k "
               "join sift.collections c using (collection_id) where c.name = 'walk' order by k.chunk_id limit 10")
    assert walks() == ["walk 300/20", "walk 300/100"]
    seen.clear()
    client.search("walk", embedding=query, top_k=10, space_embeddings={"alt": unit(rng.normal(size=4))})
    assert seen == ["walk 300/20", "walk 300/100", "walk 300/20"]
    assert walks(exact_search_limit=10_000) == []
    assert db.execute("show hnsw.ef_search").fetchone() == ("7",)


def test_the_walk_is_sorted_again_whatever_order_the_index_gave(client, db):
    """An iterative scan in relaxed order may return a nearer chunk after a farther one
    (pgvector issue 862): the leg sorts the walk's rows itself, by an expression no index
    path provides, so the planner never takes the walk's order as given (no incremental
    sort on it, which sorts in batches and keeps a late nearer chunk late)."""
    col = client.create_collection("walked", embedding_dims=DIMS, exact_search_limit=10)
    rng = np.random.default_rng(12)
    client.upsert_documents("walked", random_documents(rng, 60, DIMS))
    db.execute("analyze sift.chunks")
    query = "[" + ",".join(map(repr, unit(rng.normal(size=DIMS)).tolist())) + "]"
    # (A collection this small would be scanned: the walk's plan is what is looked at.)
    db.execute("set hnsw.iterative_scan = relaxed_order; set enable_seqscan = off")
    statements = {
        "rows": db.execute("select sift._dense_leg_sql(%s, 'cosine', false, false)", [DIMS]).fetchone()[0],
        "arrays": db.execute("select pg_catalog.format(sift._dense_ids_sql(), "
                             "sift._dense_rows_sql(%s, 'cosine', false, false))", [DIMS]).fetchone()[0],
    }
    for name, statement in statements.items():
        db.execute(sql.SQL("prepare walk(vector, bigint[], jsonpath, integer, bigint) as {}").format(
            sql.SQL(statement)))
        try:
            plan = db.execute(sql.SQL("explain (format json) execute walk({}, {}, null, 20, null)").format(
                sql.Literal(query), sql.Literal([col.collection_id]))).fetchone()[0]
        finally:
            db.execute("deallocate walk")
        nodes = list(_plan_nodes(plan[0]["Plan"]))
        assert any(n.get("Index Name") == f"chunks_hnsw_cosine_{DIMS}" for n in nodes), name
        assert not [n for n in nodes if n["Node Type"] == "Incremental Sort"], name
        sorts = [n for n in nodes if n["Node Type"] == "Sort"]
        assert sorts and "m.distance + '0'" in sorts[0]["Sort Key"][0], (name, sorts)


def test_large_collection_walks_the_hnsw_index(client, db):
    col = client.create_collection("big", embedding_dims=DIMS, exact_search_limit=50)
    rng = np.random.default_rng(2)
    client.upsert_documents("big", random_documents(rng, 100, DIMS))
    assert len(chunk_ids(db, "big")) > col.settings["exact_search_limit"]
    db.execute("analyze sift.chunks")
    query = unit(rng.normal(size=DIMS))

    hnsw = [n for n in _dense_leg_plan(db, col.collection_id, query, exact=False)
            if n["Node Type"] == "Index Scan" and n.get("Index Name", "").startswith("chunks_hnsw_cosine_")]
    assert hnsw and hnsw[0]["Index Name"] == f"chunks_hnsw_cosine_{DIMS}"
    exact = _dense_leg_plan(db, col.collection_id, query, exact=True)
    assert not [n for n in exact if n.get("Index Name", "").startswith("chunks_hnsw_")]

    # And the search over the index still answers like the exact oracle here.
    want = exact_cosine_top(stored_embeddings(db, "big"), f32(query), 10)
    assert ids(client.search("big", embedding=query, top_k=10)) == want


def test_a_walk_runs_through_its_walk_function_planned_once(client, db):
    """Each HNSW walk a vector space makes has a SQL function of its own (sift._ensure_walks,
    made with the index and on every migrate): the leg calls it by name, so the walk's plan is
    kept for the session rather than made on every search. A missing one is walked by the
    statement itself, with the same answer; one whose index goes goes with it."""
    client.create_collection("w", embedding_dims=DIMS, exact_search_limit=10)
    own = client.create_collection("own", embedding_dims=DIMS, exact_search_limit=10, dense_precision="half")
    rng = np.random.default_rng(21)
    for name in ("w", "own"):
        client.upsert_documents(name, random_documents(rng, 40, DIMS))
    db.execute("analyze sift.chunks")
    walks = dict(db.execute("select proname, proacl::text from pg_proc where proname like '\\_walk\\_%%' "
                            "and proname <> '_walk_name'").fetchall())
    shared, dedicated = f"_walk_chunks_cosine_{DIMS}_full", f"_walk_chunks_cosine_{DIMS}_half_{own.collection_id}"
    assert set(walks) == {shared, dedicated}
    # sift's grants (sql/90_trust.sql): readers and gateways, not PUBLIC (an entry "=X/...").
    for acl in walks.values():
        assert "sift_reader=X/" in acl and "sift_gateway=X/" in acl and "{=X" not in acl and ",=X" not in acl
    query = unit(rng.normal(size=DIMS))
    db.execute("set track_functions = 'all'")

    def calls(fn: str) -> int:
        db.execute("select pg_stat_force_next_flush()")
        db.execute("select pg_stat_clear_snapshot()")
        row = db.execute("select calls from pg_stat_user_functions where funcname = %s", [fn]).fetchone()
        return row[0] if row else 0

    before = calls(shared), calls(dedicated)
    through = [ids(client.search(name, embedding=query, top_k=10)) for name in ("w", "own")]
    assert (calls(shared), calls(dedicated)) == (before[0] + 1, before[1] + 1)
    # Without them: the statement itself, the same answer.
    db.execute(f"drop function sift.{shared}, sift.{dedicated}")
    assert [ids(client.search(name, embedding=query, top_k=10)) for name in ("w", "own")] == through
    # Made again by the next index build or migrate; an edited one is made again too.
    assert db.execute("select sift._ensure_walks()").fetchone() == (2,)
    db.execute(f"create or replace function sift.{shared}(query vector, collection_ids bigint[], fpath jsonpath, "
               "n integer, space_id bigint, out ids bigint[], out dists double precision[]) "
               "language sql stable as $$ select null::bigint[], null::double precision[] $$")
    pgsift.migrate(db, force=True)
    assert [ids(client.search(name, embedding=query, top_k=10)) for name in ("w", "own")] == through
    # A dropped collection's own index goes with its walk function (the shared one stays).
    client.drop_collection("own")
    db.execute("select sift.ensure_dense_indexes()")
    assert {r[0] for r in db.execute("select proname from pg_proc where proname like '\\_walk\\_%%' "
                                     "and proname <> '_walk_name'")} == {shared}
