"""Late interaction (sql/38_late_interaction.sql): token vectors per chunk and MaxSim in SQL.

The oracle is numpy: score = sum over query tokens of the best inner product over the chunk's
tokens, both rounded to half precision as the database stores them. A search given
query_tokens reranks its fused top late_interaction_top_n by it; chunks without token
vectors, and the rest of the pool, keep their fused order behind, never dropped.
"""

from __future__ import annotations

import numpy as np
import psycopg
import pytest
from conftest import unit
from pgsift import (
    AsyncClient,
    Chunk,
    Client,
    CollectionNotFound,
    DimensionMismatch,
    Document,
    DocumentNotFound,
    InvalidArgument,
)

DIMS, TOKEN_DIMS = 8, 16
WORDS = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel"]
# Finalize changes nothing: the order is the rerank's.
PLAIN = {"per_document_cap": None, "mmr_lambda": None}


def tokens(rng: np.random.Generator, n: int) -> np.ndarray:
    return unit(rng.normal(size=(n, TOKEN_DIMS))).astype(np.float32)


def corpus(seed: int, n_docs: int = 20, chunks: int = 3) -> list[Document]:
    """Documents whose chunks mostly carry token vectors (1 to 40 each); every fourth has none."""
    rng = np.random.default_rng(seed)
    docs = []
    for i in range(n_docs):
        docs.append(Document(source_uri=f"doc-{i}", chunks=[
            Chunk(content=" ".join(rng.choice(WORDS, size=6)), embedding=unit(rng.normal(size=DIMS)),
                  token_vectors=None if (i * chunks + j) % 4 == 0 else tokens(rng, int(rng.integers(1, 41))))
            for j in range(chunks)]))
    return docs


def stored(db) -> dict[int, np.ndarray]:
    """The token vectors as the database holds them (half precision), by chunk."""
    rows = db.execute("select chunk_id, tokens::text from sift.chunk_tokens").fetchall()
    return {cid: np.array([np.array(t.strip('"[]').split(","), dtype=np.float32)
                           for t in text.strip("{}").split('","')]) for cid, text in rows}


def oracle(chunk_tokens: dict[int, np.ndarray], ids: list[int], query: np.ndarray) -> dict[int, float]:
    q = query.astype(np.float16).astype(np.float32)
    return {cid: float((q @ chunk_tokens[cid].T).max(axis=1).sum()) for cid in ids if cid in chunk_tokens}


def expected_order(pool: list[int], scores: dict[int, float], top_n: int) -> list[int]:
    """The rerank's order: the scored among the first top_n best first (ties: smaller id), then
    every other chunk in pool order."""
    scored = sorted((c for c in pool[:top_n] if c in scores), key=lambda c: (-scores[c], c))
    return scored + [c for c in pool if c not in scored]


def assert_order(got: list[int], want: list[int], scores: dict[int, float]) -> None:
    """Equal, but for neighbours whose scores differ by less than the summation's rounding."""
    assert sorted(got) == sorted(want)
    for a, b in zip(got, want, strict=True):
        if a != b:   # only two scored chunks may trade places, and only on a near tie
            assert a in scores and b in scores and abs(scores[a] - scores[b]) < 1e-4, (got, want)


@pytest.fixture
def kb(db):
    client = Client(db)
    client.create_collection("kb", embedding_dims=DIMS)
    client.upsert_documents("kb", corpus(1))
    return client


def test_ingest_writes_token_vectors_with_their_chunks(kb, db):
    counts = db.execute("select count(*), min(token_count), max(token_count), min(dimensions), max(dimensions) "
                        "from sift.chunk_tokens").fetchone()
    assert counts[0] == 45 and counts[1] >= 1 and counts[2] <= 40 and counts[3] == counts[4] == TOKEN_DIMS
    want = {(c.content, len(c.token_vectors)) for d in corpus(1) for c in d.chunks if c.token_vectors is not None}
    got = set(db.execute("select k.content, t.token_count from sift.chunk_tokens t join sift.chunks k "
                         "using (chunk_id)").fetchall())
    assert got == want
    # Stored in half precision, in token order.
    first = corpus(1)[0].chunks[1]
    chunk_id = db.execute("select chunk_id from sift.chunks where content = %s", [first.content]).fetchone()[0]
    np.testing.assert_allclose(stored(db)[chunk_id], first.token_vectors.astype(np.float16), rtol=1e-3)
    # Writing a document again replaces its chunks, and their tokens with them.
    doc = corpus(1)[0]
    for chunk in doc.chunks:
        chunk.token_vectors = None
    kb.upsert_documents("kb", [doc])
    assert db.execute("select count(*) from sift.chunk_tokens").fetchone()[0] == 43


def test_maxsim_matches_the_numpy_oracle(kb, db, figure):
    rng = np.random.default_rng(7)
    ids = [r[0] for r in db.execute("select chunk_id from sift.chunks order by chunk_id").fetchall()]
    held = stored(db)
    checked = 0
    for _ in range(25):
        pool = [int(i) for i in rng.choice(ids, size=int(rng.integers(1, 30)), replace=False)]
        query = tokens(rng, int(rng.integers(1, 33)))
        scores = oracle(held, pool, query)
        rows = kb.maxsim("kb", pool, query)
        assert [r.rank for r in rows] == list(range(1, len(pool) + 1))
        for r in rows:
            if r.chunk_id in scores:
                assert r.score == pytest.approx(scores[r.chunk_id], abs=1e-4)
                assert r.token_count == len(held[r.chunk_id])
            else:
                assert r.score is None and r.token_count == 0
        assert_order([r.chunk_id for r in rows], expected_order(pool, scores, len(pool)), scores)
        checked += len(rows)
    figure("chunks scored by sift.maxsim against numpy", checked)


@pytest.mark.parametrize("top_n", [5, 50])
def test_search_reranks_the_fused_top_n_by_maxsim(kb, db, top_n):
    rng = np.random.default_rng(top_n)
    held = stored(db)
    knobs = {**PLAIN, "late_interaction_top_n": top_n}
    for _ in range(6):
        query_vec, query = unit(rng.normal(size=DIMS)), tokens(rng, 12)
        for top_k in (5, 60):
            # The pool a search with query tokens reranks: each leg's top max(top_k, top_n, fetch_k).
            pool = [c.chunk_id for c in kb.candidates("kb", "alpha echo", embedding=query_vec,
                                                      top_k=max(top_k, top_n), **knobs)]
            scores = oracle(held, pool[:top_n], query)
            want = expected_order(pool, scores, top_n)[:top_k]
            result = kb.search("kb", "alpha echo", embedding=query_vec, top_k=top_k, query_tokens=query, **knobs)
            assert_order([h.chunk_id for h in result], want, scores)
            assert [h.rank for h in result] == list(range(1, len(want) + 1))
            for hit in result:
                if hit.chunk_id in scores:
                    assert hit.late_interaction_score == pytest.approx(scores[hit.chunk_id], abs=1e-4)
                else:
                    assert hit.late_interaction_score is None
                assert hit.reranker is None and hit.rerank_refused is None
            # explain ranks the same pool the same way.
            rows = kb.explain("kb", "alpha echo", embedding=query_vec, top_k=top_k, query_tokens=query, **knobs)
            kept = sorted((r for r in rows if r.kept), key=lambda r: r.final_rank)
            assert [r.chunk_id for r in kept] == [h.chunk_id for h in result]
            assert {r.chunk_id for r in rows} == set(pool)
            for r in rows:
                if r.chunk_id in scores:
                    assert r.late_interaction_score == pytest.approx(scores[r.chunk_id], abs=1e-4)
                else:
                    assert r.late_interaction_score is None
        # Nothing dropped: the whole pool comes back when asked for.
        pool = [c.chunk_id for c in kb.candidates("kb", "alpha echo", embedding=query_vec, top_k=60, **knobs)]
        everything = kb.search("kb", "alpha echo", embedding=query_vec, top_k=60, query_tokens=query, **knobs)
        assert sorted(h.chunk_id for h in everything) == sorted(pool)


def test_without_token_vectors_or_query_tokens_nothing_changes(kb, db):
    query_vec = unit(np.random.default_rng(3).normal(size=DIMS))
    plain = kb.search("kb", "alpha", embedding=query_vec, top_k=20)
    assert all(h.late_interaction_score is None for h in plain)
    # A collection with no token vectors at all: the fused order, unscored.
    kb.create_collection("bare", embedding_dims=DIMS)
    docs = corpus(2, n_docs=5)
    for d in docs:
        for c in d.chunks:
            c.token_vectors = None
    kb.upsert_documents("bare", docs)
    before = kb.search("bare", "alpha", embedding=query_vec, top_k=15)
    after = kb.search("bare", "alpha", embedding=query_vec, top_k=15, query_tokens=tokens(np.random.default_rng(1), 4))
    assert [h.chunk_id for h in after] == [h.chunk_id for h in before]
    assert all(h.late_interaction_score is None for h in after)


def test_the_pool_counts_as_scored_by_maxsim_only_when_it_scored_all_of_it(kb, db):
    """Stand-in scores of chunks MaxSim did not score are not MaxSim's: finalize is told the
    pool was scored by maxsim only when it scored every chunk (as a hosted reranker's partial
    ranking counts as the fused one). A threshold calibrated for a hosted reranker says which."""
    db.execute("select sift.allow_endpoint('http://127.0.0.1:')")
    db.execute("select sift.register_reranker('rr', 'tei', base_url => 'http://127.0.0.1:9/')")
    kb.alter_collection("kb", score_threshold=0.9, threshold_reranker="rr")
    rng = np.random.default_rng(9)
    query_vec, query = unit(rng.normal(size=DIMS)), tokens(rng, 8)
    partial = kb.search("kb", "alpha", embedding=query_vec, top_k=20, query_tokens=query,
                        **{**PLAIN, "late_interaction_top_n": 5})
    assert len(partial) == 20 and partial.threshold_applied is False
    assert "no reranker scored this pool" in str(partial.threshold_skipped)
    kb.delete_documents("kb", delete_all=True)
    kb.upsert_documents("kb", [Document(source_uri=f"t-{i}", chunks=[Chunk(
        content="alpha bravo", embedding=unit(rng.normal(size=DIMS)), token_vectors=tokens(rng, 4))])
        for i in range(6)])
    full = kb.search("kb", "alpha", embedding=query_vec, top_k=6, query_tokens=query, **PLAIN)
    assert len(full) == 6 and all(h.late_interaction_score is not None for h in full)
    assert 'reranker "maxsim" scored this pool' in str(full.threshold_skipped)


def test_query_tokens_never_call_a_hosted_reranker(kb, db):
    """With query_tokens, MaxSim is the search's rerank even when nothing it saw has tokens."""
    db.execute("select sift.allow_endpoint('http://127.0.0.1:')")
    db.execute("select sift.register_reranker('rr', 'tei', base_url => 'http://127.0.0.1:9/')")
    kb.alter_collection("kb", reranker="rr", rerank=True)
    kb.delete_token_vectors("kb")
    query_vec = unit(np.random.default_rng(4).normal(size=DIMS))
    fused = kb.candidates("kb", "alpha", embedding=query_vec, top_k=50)
    result = kb.search("kb", "alpha", embedding=query_vec, top_k=10, query_tokens=tokens(np.random.default_rng(4), 3),
                       **PLAIN)
    assert result.rerank is None and all(h.reranker is None for h in result)
    assert [h.chunk_id for h in result] == [c.chunk_id for c in fused][:10]


def test_write_and_delete_token_vectors(kb, db):
    no_tokens = [r[0] for r in db.execute("select chunk_id from sift.chunks k where not exists "
                                          "(select 1 from sift.chunk_tokens t where t.chunk_id = k.chunk_id) "
                                          "order by chunk_id").fetchall()]
    rng = np.random.default_rng(5)
    assert kb.write_token_vectors("kb", {c: tokens(rng, 3) for c in no_tokens}) == len(no_tokens)
    assert db.execute("select count(*) from sift.chunk_tokens").fetchone()[0] == 60
    # Replacing: the same chunk, other tokens.
    assert kb.write_token_vectors("kb", {no_tokens[0]: tokens(rng, 7)}) == 1
    assert db.execute("select token_count from sift.chunk_tokens where chunk_id = %s",
                      [no_tokens[0]]).fetchone()[0] == 7
    assert kb.delete_token_vectors("kb", no_tokens[:2]) == 2
    assert kb.delete_token_vectors("kb") == 58
    # With none left, another size may be written.
    assert kb.write_token_vectors("kb", {no_tokens[0]: np.ones((2, 4))}) == 1


async def test_async_client_writes_and_reranks(dsn, kb):
    conn = await psycopg.AsyncConnection.connect(dsn, autocommit=True)
    try:
        aclient = AsyncClient(conn)
        rng = np.random.default_rng(11)
        query_vec, query = unit(rng.normal(size=DIMS)), tokens(rng, 6)
        sync = kb.search("kb", "alpha", embedding=query_vec, query_tokens=query, **PLAIN)
        got = await aclient.search("kb", "alpha", embedding=query_vec, query_tokens=query, **PLAIN)
        assert [h.chunk_id for h in got] == [h.chunk_id for h in sync]
        chunk = got[0].chunk_id
        assert await aclient.write_token_vectors("kb", {chunk: tokens(rng, 2)}) == 1
        rows = await aclient.maxsim("kb", [chunk], query)
        assert rows[0].token_count == 2
        assert await aclient.delete_token_vectors("kb", [chunk]) == 1
    finally:
        await conn.close()


def test_bad_input_is_typed_and_writes_nothing(kb, db):
    chunk = db.execute("select min(chunk_id) from sift.chunks").fetchone()[0]
    snapshot = "select chunk_id, token_count, md5(tokens::text) from sift.chunk_tokens order by chunk_id"
    before = db.execute(snapshot).fetchall()
    bad_nan = tokens(np.random.default_rng(1), 3)
    bad_nan[1, 2] = np.nan
    with pytest.raises(InvalidArgument, match="token 1 of query_tokens contains NaN"):
        kb.search("kb", "alpha", query_tokens=bad_nan)
    with pytest.raises(InvalidArgument, match="token 1 of the token vectors of chunk"):
        kb.write_token_vectors("kb", {chunk: bad_nan})
    with pytest.raises(InvalidArgument, match="1 to 256"):
        kb.search("kb", "alpha", query_tokens=np.ones((257, TOKEN_DIMS)))
    with pytest.raises(InvalidArgument, match="1 to 2,048"):
        kb.write_token_vectors("kb", {chunk: np.ones((2049, TOKEN_DIMS))})
    with pytest.raises(InvalidArgument, match="1 to 256"):
        kb.maxsim("kb", [chunk], [])
    with pytest.raises(InvalidArgument, match="differ in size"):
        kb.write_token_vectors("kb", {chunk: [np.ones(TOKEN_DIMS), np.ones(3)]})
    with pytest.raises(InvalidArgument, match="half precision"):
        kb.write_token_vectors("kb", {chunk: np.full((1, TOKEN_DIMS), 1e6)})
    # The database's checks: sizes name the collection, ids that are not its chunks are SF006.
    with pytest.raises(DimensionMismatch, match='collection "kb" holds token vectors of 16'):
        kb.search("kb", "alpha", query_tokens=np.ones((2, 4)))
    with pytest.raises(DimensionMismatch, match='collection "kb" holds token vectors of 16'):
        kb.write_token_vectors("kb", {chunk: np.ones((2, 4))})
    assert db.execute(snapshot).fetchall() == before
    kb.create_collection("other", embedding_dims=DIMS)
    kb.upsert_documents("other", corpus(3, n_docs=2))
    foreign = db.execute("select min(chunk_id) from sift.chunks k join sift.collections c using (collection_id) "
                         "where c.name = 'other'").fetchone()[0]
    with pytest.raises(DocumentNotFound):
        kb.write_token_vectors("kb", {foreign: np.ones((2, TOKEN_DIMS))})
    with pytest.raises(DocumentNotFound):
        kb.maxsim("kb", [chunk, foreign], np.ones((2, TOKEN_DIMS)))
    with pytest.raises(CollectionNotFound):
        kb.maxsim("nope", [chunk], np.ones((2, TOKEN_DIMS)))
    # A document whose tokens do not fit is not written at all (its old version stays).
    before = db.execute(snapshot).fetchall()
    chunks = "select chunk_id, content from sift.chunks order by chunk_id"
    before_chunks = db.execute(chunks).fetchall()
    doc = corpus(1)[0]
    doc.chunks[1].token_vectors = np.ones((3, 5))
    with pytest.raises(DimensionMismatch):
        kb.upsert_documents("kb", [doc])
    assert db.execute(snapshot).fetchall() == before
    assert db.execute(chunks).fetchall() == before_chunks


def test_sql_checks_of_its_own(kb, db):
    chunk = db.execute("select min(chunk_id) from sift.chunks").fetchone()[0]
    vec = "[" + ",".join(["0.5"] * TOKEN_DIMS) + "]"
    cases = [
        ("select sift.write_token_vectors('kb', %s, %s::vector[])", [[chunk, chunk], [vec]], "SF003"),
        ("select sift.write_token_vectors('kb', %s, %s::vector[])", [[None], [vec]], "SF003"),
        ("select * from sift.maxsim('kb', %s, null)", [[chunk]], "SF003"),
        ("select * from sift.maxsim('kb', %s, %s::vector[])", [[None], [vec]], "SF006"),
        ("select * from sift.search('kb', 'alpha', query_tokens => %s::vector[])", [[vec, None]], "SF003"),
        ("select * from sift.search('kb', 'alpha', query_tokens => %s::vector[])",
         [[vec, "[1,2]"]], "SF002"),
        ("select * from sift.search('kb', 'alpha', knobs => '{\"late_interaction_top_n\": 500}')", None, "23514"),
        ("insert into sift.chunk_tokens (chunk_id, collection_id, tokens, dimensions, token_count) "
         "values (%s, 0, '{}', 0, 0)", [chunk], "SF003"),
        ("select * from sift.search('kb', 'alpha', query_tokens => %s::vector[])", [[vec] * 300], "SF003"),
    ]
    for sql, params, state in cases:
        with pytest.raises(psycopg.Error) as err:
            db.execute(sql, params)
        assert err.value.sqlstate == state, (sql, err.value)
    # Beyond half precision's range: typed, naming the argument.
    big = "[" + ",".join(["70000"] * TOKEN_DIMS) + "]"
    for sql in ("select sift.write_token_vectors('kb', %s, %s::vector[])",
                "select * from sift.maxsim('kb', %s, %s::vector[])"):
        with pytest.raises(psycopg.Error) as err:
            db.execute(sql, [[chunk], [big]])
        assert err.value.sqlstate == "SF003" and "65,504" in str(err.value)
    # A NaN never gets into a vector: pgvector refuses it when the argument is read.
    with pytest.raises(psycopg.errors.DataException):
        db.execute("select sift.write_token_vectors('kb', %s, array['[NaN,1]'::vector])", [[chunk]])
