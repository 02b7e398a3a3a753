"""Client.search with a reranker: the whole path against a loopback Voyage endpoint.

SQL builds the pool, the provider scores it (one request), SQL finalizes with those
scores; every fault falls back to the fused ranking without shrinking the result.
"""

from __future__ import annotations

import numpy as np
import psycopg
import pytest

from pgsift import Chunk, Client, Document, rerank
from conftest import unit
from rerank_servers import RerankServer, keyword_scorer

DIMS = 8
TENANT = "acme"


@pytest.fixture
def kb(db, monkeypatch):
    monkeypatch.setenv("PGSIFT_TEST_VOYAGE_KEY", "test-key")
    rerank.clear_reranker_cache()
    client = Client(db, tenant=TENANT)
    client.create_collection("kb", embedding_dims=DIMS)
    rng = np.random.default_rng(4)
    docs = [Document(source_uri=f"d{i}", title=f"doc {i}",
                     chunks=[Chunk(content=f"refund policy part {j} of doc {i}" + (" golden" if i == 7 else ""),
                                   embedding=unit(rng.normal(size=DIMS))) for j in range(3)])
            for i in range(30)]
    client.upsert_documents("kb", docs)
    return client


def use_server(db, server: RerankServer, *, top_n: int = 50, alias: str = "voy", tenant: str = TENANT) -> None:
    rerank.register_reranker(db, alias, "voyage", tenant=tenant, base_url=server.base_url("voyage"),
                             secret_ref="PGSIFT_TEST_VOYAGE_KEY", timeout_ms=1000, deadline_ms=2000)


def enable(db, alias: str = "voy", top_n: int = 50) -> None:
    rerank.set_collection_reranker(db, "kb", tenant=TENANT, alias=alias, enabled=True, rerank_top_n=top_n)


def test_reranked_search_widens_the_pool_and_finalizes_in_sql(kb, db):
    with RerankServer(scorer=keyword_scorer({"golden": 0.99})) as server:
        use_server(db, server)
        enable(db, top_n=60)
        assert kb.reranking_enabled("kb")
        result = kb.search("kb", "refund policy", embedding=np.ones(DIMS), top_k=5,
                           context="earlier: we talked about refunds")
    assert len(server.requests) == 1                         # one request per search, no N+1
    body = server.requests[0].body
    assert len(body["documents"]) == 60                      # pool widened to rerank_top_n
    assert body["query"].endswith("refund policy")
    assert result.reranked and result.rerank.alias == "voy"
    assert len(result) == 5
    # the reranker's favourite document leads; the per-document cap (5) still applied in SQL
    assert result[0].source_uri == "d7" and result[0].rerank_score == pytest.approx(0.99)
    golden = sum("golden" in d for d in body["documents"])   # d7's chunks in the pool
    assert golden >= 2 and [h.source_uri for h in result[:golden]] == ["d7"] * golden
    with RerankServer(scorer=keyword_scorer({"golden": 0.99})) as server:
        db.execute("update sift.rerankers set base_url = %s", [server.base_url("voyage")])
        capped = kb.search("kb", "refund policy", embedding=np.ones(DIMS), top_k=5, per_document_cap=1)
    assert capped.reranked and [h.source_uri for h in capped].count("d7") == 1   # cap after rerank
    assert all(h.found_by in ("dense", "lexical", "both") for h in result)   # legs kept
    assert all(h.fused_score is not None and h.base_score == h.rerank_score for h in result)
    usage = db.execute("select ok, billed, documents from sift.rerank_usage").fetchall()
    assert usage[0] == (True, True, 60)


@pytest.mark.parametrize("fault", ["500", "malformed", "duplicate", "nan", "slow"])
def test_a_fault_falls_back_to_the_fused_ranking(kb, db, fault):
    # The fallback is the fused ranking of the pool that was sent, whose legs ran 50 deep
    # (rerank_top_n): the same as a search with fetch_k 50.
    plain = kb.search("kb", "refund policy", embedding=np.ones(DIMS), top_k=8, fetch_k=50)
    with RerankServer(fault=fault, delay=5.0) as server:
        use_server(db, server)
        enable(db)
        result = kb.search("kb", "refund policy", embedding=np.ones(DIMS), top_k=8)
    assert not result.reranked and result.rerank.fault
    assert [h.chunk_id for h in result] == [h.chunk_id for h in plain]   # same hits, same order
    assert all(h.rerank_score is None for h in result)
    billed = db.execute("select bool_or(billed), bool_and(not ok) from sift.rerank_usage").fetchone()
    assert billed == (False, True)                            # recorded as failed, never billed


def test_another_tenants_reranker_is_refused_and_search_goes_on(kb, db):
    with RerankServer() as server:
        use_server(db, server, alias="theirs", tenant="other")
        with pytest.raises(rerank.RerankerNotAllowed):
            rerank.set_collection_reranker(db, "kb", tenant=TENANT, alias="theirs", enabled=True)
        result = kb.search("kb", "refund policy", embedding=np.ones(DIMS), top_k=5)
    assert len(server.requests) == 0 and len(result) == 5 and not result.reranked


def test_no_call_for_a_blank_query_or_without_a_reranker(kb, db):
    with RerankServer() as server:
        use_server(db, server)
        enable(db)
        assert len(kb.search("kb", "   ", embedding=np.ones(DIMS), top_k=5)) == 5
        assert len(kb.search("kb", "refund", embedding=np.ones(DIMS), top_k=5, rerank=False)) == 5
    assert server.requests == []


async def test_async_search_reranks_too(kb, db, dsn):
    with RerankServer(scorer=keyword_scorer({"golden": 0.9})) as server:
        use_server(db, server)
        enable(db)
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
            result = await Client(conn, tenant=TENANT).asearch("kb", "refund policy",
                                                               embedding=np.ones(DIMS), top_k=4)
    assert result.reranked and result[0].source_uri == "d7" and len(result) == 4
