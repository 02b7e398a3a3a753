"""explain on a collection that reranks (issue 36 item 1).

explain used to show the fused view: a chunk "kept at rank 3" while search put another
there, with no word of the rerank. Now the Python client's explain reranks its pool as
search does (one metered call) and SQL ranks on those scores, so every kept row's final
place is the search's; each row carries the fused rank, the rerank score and rank, and a
status; SQL alone says it shows the fused ranking and how to get the other, and checks
the scores a caller hands it as it checks any pool.
"""

from __future__ import annotations

import numpy as np
import psycopg
import pytest
from conftest import unit
from pgsift import AsyncClient, Chunk, Client, Document, rerankers
from rerank_servers import RerankServer, import_providers, keyword_scorer, loopback_only

DIMS = 8
QUERY = "refund policy"
KEY = "test-key-acme"


@pytest.fixture(scope="module", autouse=True)
def _providers_imported():
    import_providers()


@pytest.fixture(autouse=True)
def _loopback_only(monkeypatch):
    loopback_only(monkeypatch)
    monkeypatch.setenv("PGSIFT_TEST_ACME_VOYAGE", KEY)
    rerankers.clear_reranker_cache()
    yield
    rerankers.clear_reranker_cache()


@pytest.fixture
def kb(db) -> Client:
    """Tenant acme's collection "kb" (30 documents of 3 chunks; d7's say "golden"), reranked by
    "voy" over its top 40, and tenant globex's collection of the same name."""
    db.execute("select sift.allow_endpoint(url_prefix => 'http://127.0.0.1:')")
    db.execute("select sift.map_secret(tenant => 'acme', secret_ref => 'voyage', "
               "source => 'env:PGSIFT_TEST_ACME_VOYAGE', provider => 'voyage', "
               "endpoints => array['http://127.0.0.1:'])")
    rng = np.random.default_rng(4)
    for tenant in ("acme", "globex"):
        client = Client(db, tenant=tenant)
        client.create_collection("kb", embedding_dims=DIMS)
        client.upsert_documents("kb", [
            Document(source_uri=f"{tenant}/d{i}", title=f"doc {i}",
                     chunks=[Chunk(content=f"refund policy part {j} of doc {i}" + (" golden" if i == 7 else ""),
                                   embedding=unit(rng.normal(size=DIMS))) for j in range(3)])
            for i in range(30)])
    return Client(db, tenant="acme")


def reranked_by(client: Client, server: RerankServer) -> None:
    client.register_reranker("voy", "voyage", base_url=server.base_url("voyage"), secret_ref="voyage",
                             timeout_ms=1000, deadline_ms=2000)
    client.alter_collection("kb", reranker="voy", rerank=True, rerank_top_n=40)


def kept(rows) -> list[int]:
    return [r.chunk_id for r in sorted((r for r in rows if r.kept), key=lambda r: r.final_rank)]


def sql_explain(db: psycopg.Connection, tenant: str = "acme", **given) -> list[tuple]:
    with db.transaction():
        db.execute("select sift.set_tenant(tenant => %s)", [tenant])
        return db.execute(
            "select chunk_id, kept, final_rank, cut_by, reranker, rerank_score, rerank_rank, rerank_status "
            "from sift.explain(collection => 'kb', query_text => %(q)s, query_embedding => %(e)s::vector, "
            "match_count => 5, rerank_ids => %(ids)s::bigint[], rerank_scores => %(scores)s::float8[], "
            "scored_by => %(by)s::text)",
            {"q": QUERY, "e": f"[{','.join(['1'] * DIMS)}]", "ids": given.get("ids"), "scores": given.get("scores"),
             "by": given.get("by")}).fetchall()


def test_explain_shows_the_ranking_search_returns(kb, db):
    with RerankServer(scorer=keyword_scorer({"golden": 0.99})) as server:
        reranked_by(kb, server)
        result = kb.search("kb", QUERY, embedding=np.ones(DIMS), top_k=5)
        rows = kb.explain("kb", QUERY, embedding=np.ones(DIMS), top_k=5)
    assert result.reranked and len(server.requests) == 2           # search's call, explain's call
    assert len(server.requests[1].body["documents"]) == 40         # the same pool, rerank_top_n
    # Every kept row stands where search put its chunk: the rerank decided, not the fusion.
    assert kept(rows) == [h.chunk_id for h in result]
    by_id = {r.chunk_id: r for r in rows}
    for hit in result:
        row = by_id[hit.chunk_id]
        assert row.rerank_score == pytest.approx(hit.rerank_score)  # the provider's score, as on the hit
        assert row.fused_rank is not None and row.reranker == "voy"
    assert by_id[result[0].chunk_id].rerank_rank == 1
    assert by_id[result[0].chunk_id].fused_rank > 1                # the rerank moved it up
    assert all(r.rerank_status.startswith('reranked: the top 40') for r in rows)
    # What the reranker never saw is cut before finalize, and says so.
    past = [r for r in rows if r.rerank_rank is None]
    assert all(not r.kept and r.cut_by == "rerank_pool" and "outside the top 40" in r.reason for r in past)
    assert sorted(r.rerank_rank for r in rows if r.rerank_rank is not None) == list(range(1, 41))
    usage = db.execute("select count(*) from sift.rerank_usage where reranker_alias = 'voy'").fetchone()
    assert usage == (2,)                                            # explain's call is metered too


def test_sql_alone_says_it_shows_the_fused_ranking_and_takes_the_scores(kb, db):
    with RerankServer(scorer=keyword_scorer({"golden": 0.99})) as server:
        reranked_by(kb, server)
        rows = kb.explain("kb", QUERY, embedding=np.ones(DIMS), top_k=5)
        pool = kb.rerank("kb", QUERY, embedding=np.ones(DIMS), top_k=5)
    fused = sql_explain(db)
    assert {r[4] for r in fused} == {"voy"} and all(r[6] is None for r in fused)
    assert all(r[7].startswith("not reranked: this is the fused ranking") and '"voy"' in r[7]
               and "rerank_ids" in r[7] for r in fused)
    # The scores the client got, handed to SQL: the same view the client's explain shows.
    ids = [c.chunk_id for c in pool.pool]
    scores = pool.outcome.finalize_scores()
    given = sql_explain(db, ids=ids, scores=scores, by="voy")
    assert [(r[0], r[1], r[2], r[3], r[6]) for r in given] == \
        [(r.chunk_id, r.kept, r.final_rank, r.cut_by, r.rerank_rank) for r in rows]
    assert given[0][7] == 'reranked: the top 40 of the fused pool ranked on the rerank scores given (scored by "voy")'


@pytest.mark.parametrize(("given", "message"), [
    ({"ids": [1, 2]}, "rerank_ids and rerank_scores go together"),
    ({"scores": [0.5]}, "rerank_ids and rerank_scores go together"),
    ({"by": "voy"}, "scored_by names the reranker"),
    ({"ids": [1, 2], "scores": [0.5]}, "scores has 1 values for 2 chunk_ids"),
    ({"ids": [1, 2], "scores": [0.5, -1.0]}, "scores must be numbers"),
    ({"ids": list(range(1, 1002)), "scores": [0.5] * 1001}, "at most 1,000"),
])
def test_scores_handed_to_sql_are_checked(kb, db, given, message):
    with pytest.raises(psycopg.Error, match=message) as err:
        sql_explain(db, **given)
    assert err.value.sqlstate == "SF003"


def test_another_tenants_chunks_are_refused_as_rerank_ids(kb, db):
    with db.transaction():
        db.execute("select sift.set_tenant(tenant => 'globex')")
        theirs = [r[0] for r in db.execute("select chunk_id from sift.candidates(collection => 'kb', "
                                           "query_text => 'refund policy', match_count => 40)").fetchall()]
    with pytest.raises(psycopg.Error, match="rerank_ids must be chunks of the pool") as err:
        sql_explain(db, ids=theirs, scores=[0.5] * len(theirs))
    assert err.value.sqlstate == "SF003"


@pytest.mark.parametrize("fault", ["500", "malformed"])
def test_a_fault_gives_the_fused_view_search_falls_back_to(kb, db, fault, caplog):
    with RerankServer(fault=fault) as server:
        reranked_by(kb, server)
        result = kb.search("kb", QUERY, embedding=np.ones(DIMS), top_k=5)
        rows = kb.explain("kb", QUERY, embedding=np.ones(DIMS), top_k=5)
    assert not result.reranked
    assert kept(rows) == [h.chunk_id for h in result]
    assert all(r.rerank_score is None and r.rerank_rank is None for r in rows)
    assert all(r.rerank_status.startswith('not reranked: the rerank by "voy" fell back') for r in rows)
    assert "rerank fell back" in caplog.text


def test_rerank_false_makes_no_call(kb, db):
    with RerankServer(scorer=keyword_scorer({"golden": 0.99})) as server:
        reranked_by(kb, server)
        rows = kb.explain("kb", QUERY, embedding=np.ones(DIMS), top_k=5, rerank=False)
    assert server.requests == []
    assert all(r.rerank_status.startswith("not reranked: this is the fused ranking") for r in rows)


def test_without_a_reranker_nothing_changes(kb, db):
    rows = kb.explain("kb", QUERY, embedding=np.ones(DIMS), top_k=5)
    assert kept(rows) == [h.chunk_id for h in kb.search("kb", QUERY, embedding=np.ones(DIMS), top_k=5)]
    assert all(r.reranker is None and r.rerank_status is None and r.rerank_rank is None for r in rows)


async def test_async_explain_reranks_too(kb, db, dsn):
    with RerankServer(scorer=keyword_scorer({"golden": 0.99})) as server:
        reranked_by(kb, server)
        async with await psycopg.AsyncConnection.connect(dsn) as conn:
            client = AsyncClient(conn, tenant="acme")
            result = await client.search("kb", QUERY, embedding=np.ones(DIMS), top_k=5)
            rows = await client.explain("kb", QUERY, embedding=np.ones(DIMS), top_k=5)
    assert result.reranked and kept(rows) == [h.chunk_id for h in result]
    assert all(r.rerank_status.startswith("reranked") for r in rows)


def test_the_cli_explains_the_reranked_view(kb, db, dsn, capsys):
    from pgsift.cli import main

    with RerankServer(scorer=keyword_scorer({"golden": 0.99})) as server:
        reranked_by(kb, server)
        assert main(["--dsn", dsn, "--tenant", "acme", "explain", "kb", QUERY, "--top-k", "3", "--no-embed"]) == 0
        out = capsys.readouterr().out
        assert main(["--dsn", dsn, "--tenant", "acme", "explain", "kb", QUERY, "--top-k", "3", "--no-embed",
                     "--no-rerank"]) == 0
        fused = capsys.readouterr().out
    assert len(server.requests) == 1                                 # --no-rerank makes no call
    assert out.splitlines()[0].split()[8:11] == ["rerank", "rerank", "score"]
    assert "reranked: the top 40 of the fused pool" in out
    assert "rerank" not in fused.splitlines()[0] and "not reranked: this is the fused ranking" in fused
