"""Client.search with a reranker: the whole path against loopback endpoints.

SQL builds the pool, the provider scores it (one request), SQL finalizes with those
scores; every fault falls back to the fused ranking without shrinking the result, and
the trust rules (tenant-mapped secrets, operator-allowed endpoints, the deadline from
the call on, metering on a read-only connection) hold through the public API.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections import Counter

import numpy as np
import psycopg
import psycopg_pool
import pytest
from conftest import unit
from pgsift import AsyncClient, Chunk, Client, Document, RerankerNotAllowed, queries, rerankers
from pgsift.rerankers import registry
from psycopg import _pipeline_base as psycopg_pipeline
from rerank_servers import RerankServer, import_providers, keyword_scorer, loopback_only

DIMS = 8
TENANT = "acme"
KEY = "test-key-acme"
QUERY = "refund policy"


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
def kb(db):
    """Tenant acme's collection of 30 documents (3 chunks each; d7's carry "golden"), the
    operator having mapped acme's "voyage" key and allowed loopback endpoints."""
    db.execute("select sift.allow_endpoint(url_prefix => 'http://127.0.0.1:')")
    db.execute("select sift.map_secret(tenant => 'acme', secret_ref => 'voyage', "
               "source => 'env:PGSIFT_TEST_ACME_VOYAGE', provider => 'voyage', "
               "endpoints => array['http://127.0.0.1:'])")
    client = Client(db, tenant=TENANT)
    client.create_collection("kb", embedding_dims=DIMS)
    rng = np.random.default_rng(4)
    docs = [Document(source_uri=f"d{i}", title=f"doc {i}",
                     chunks=[Chunk(content=f"refund policy part {j} of doc {i}" + (" golden" if i == 7 else ""),
                                   embedding=unit(rng.normal(size=DIMS))) for j in range(3)])
            for i in range(30)]
    client.upsert_documents("kb", docs)
    return client


def use_server(client: Client, server: RerankServer, *, alias: str = "voy", **settings) -> None:
    settings.setdefault("timeout_ms", 1000)
    settings.setdefault("deadline_ms", 2000)
    client.register_reranker(alias, "voyage", base_url=server.base_url("voyage"), secret_ref="voyage",
                             **settings)


def enable(client: Client, alias: str = "voy", top_n: int = 50) -> None:
    client.alter_collection("kb", reranker=alias, rerank=True, rerank_top_n=top_n)


def usage_rows(db) -> list[tuple]:
    return db.execute("select tenant, reranker_alias, ok, billed, documents, error from sift.rerank_usage "
                      "order by usage_id").fetchall()


def test_reranked_search_widens_the_pool_and_finalizes_in_sql(kb, db):
    with RerankServer(scorer=keyword_scorer({"golden": 0.99})) as server:
        use_server(kb, server)
        enable(kb, top_n=60)
        assert kb.reranking_enabled("kb")
        result = kb.search("kb", QUERY, embedding=np.ones(DIMS), top_k=5,
                           context="earlier: we talked about refunds")
    assert len(server.requests) == 1                         # one request per search, no N+1
    body = server.requests[0].body
    assert server.requests[0].headers["authorization"] == f"Bearer {KEY}"
    assert len(body["documents"]) == 60                      # pool widened to rerank_top_n
    assert body["query"] == "earlier: we talked about refunds\n\n" + QUERY
    assert result.reranked and result.rerank.alias == "voy" and result.rerank.chosen_by == "collection"
    assert result.rerank.usage_recorded is True
    assert len(result) == 5
    # the reranker's favourite document leads; the per-document cap (5) still applied in SQL
    assert result[0].source_uri == "d7" and result[0].rerank_score == pytest.approx(0.99)
    golden = sum("golden" in d for d in body["documents"])   # d7's chunks in the pool
    assert golden >= 2 and [h.source_uri for h in result[:golden]] == ["d7"] * golden
    assert all(h.found_by in ("dense", "lexical", "both") for h in result)   # legs kept
    assert all(h.fused_score is not None and h.base_score == h.rerank_score for h in result)
    assert all(h.reranker == "voy" for h in result)          # named, as sift.search names it
    with RerankServer(scorer=keyword_scorer({"golden": 0.99})) as server:
        use_server(kb, server)   # re-registered: same alias, the new server
        capped = kb.search("kb", QUERY, embedding=np.ones(DIMS), top_k=5, per_document_cap=1)
    assert capped.reranked and [h.source_uri for h in capped].count("d7") == 1   # cap after rerank
    assert [r[:5] for r in usage_rows(db)] == [("acme", "voy", True, True, 60), ("acme", "voy", True, True, 60)]


@pytest.mark.parametrize("fault", ["500", "malformed", "duplicate", "nan", "slow"])
def test_a_fault_falls_back_to_the_fused_ranking(kb, db, fault):
    # The fallback is the fused ranking of the pool that was sent, whose legs ran 50 deep
    # (rerank_top_n): the same as a search with fetch_k 50.
    plain = kb.search("kb", QUERY, embedding=np.ones(DIMS), top_k=8, fetch_k=50)
    with RerankServer(fault=fault, delay=5.0) as server:
        use_server(kb, server, timeout_ms=500, deadline_ms=1000)
        enable(kb)
        result = kb.search("kb", QUERY, embedding=np.ones(DIMS), top_k=8)
        # a slow server: every attempt cut off by the deadline while the server still held it
        assert fault != "slow" or server.holding == len(server.requests) >= 1
    assert not result.reranked and result.rerank.fault and result.rerank.called
    assert [h.chunk_id for h in result] == [h.chunk_id for h in plain]   # same hits, same order
    assert all(h.rerank_score is None and h.reranker == "voy" for h in result)   # went to, fell back
    rows = usage_rows(db)
    assert len(rows) == 1 and rows[0][2:4] == (False, False)            # recorded as failed, never billed
    assert rows[0][5].startswith(result.rerank.fault)


def test_another_tenants_reranker_is_refused_and_search_goes_on(kb, db):
    theirs = Client(db, tenant="other")
    with RerankServer() as server:
        theirs.register_reranker("theirs", "tei", base_url=server.url)
        with pytest.raises(RerankerNotAllowed):
            kb.alter_collection("kb", reranker="theirs", rerank=True)
        result = kb.search("kb", QUERY, embedding=np.ones(DIMS), top_k=5)
    assert len(server.requests) == 0 and len(result) == 5 and not result.reranked and result.rerank is None


def test_no_call_for_a_blank_query_or_without_a_reranker(kb, db):
    with RerankServer() as server:
        use_server(kb, server)
        enable(kb)
        blank = kb.search("kb", "   ", embedding=np.ones(DIMS), top_k=5)
        assert len(blank) == 5 and blank.rerank.skip == "blank_query" and blank.rerank.alias == "voy"
        off = kb.search("kb", "refund", embedding=np.ones(DIMS), top_k=5, rerank=False)
        assert len(off) == 5 and off.rerank is None
    assert server.requests == [] and usage_rows(db) == []


def test_collections_naming_different_rerankers_need_a_default(kb, db):
    other = Client(db, tenant=TENANT)
    other.create_collection("faq", embedding_dims=DIMS)
    other.upsert_documents("faq", [Document(source_uri="f0", chunks=[
        Chunk(content="refund policy golden answer", embedding=unit(np.ones(DIMS)))])])
    with RerankServer(scorer=keyword_scorer({"golden": 0.9})) as server:
        use_server(kb, server, alias="one")
        use_server(kb, server, alias="two")
        enable(kb, alias="one")
        kb.alter_collection("faq", reranker="two", rerank=True)
        refused = kb.search(["kb", "faq"], QUERY, embedding=np.ones(DIMS), top_k=5)
        assert not refused.reranked and refused.rerank.fault == "no_reranker" and len(refused) == 5
        assert server.requests == []
        use_server(kb, server, alias="two", is_default=True)
        both = kb.search(["kb", "faq"], QUERY, embedding=np.ones(DIMS), top_k=5)
    assert both.reranked and (both.rerank.alias, both.rerank.chosen_by) == ("two", "tenant_default")
    assert len(server.requests) == 1 and {h.collection_name for h in both} == {"kb", "faq"}


def test_the_rerank_half_can_name_a_reranker_the_collection_does_not_use(kb, db):
    with RerankServer(scorer=keyword_scorer({"golden": 0.9})) as server:
        use_server(kb, server, alias="cal")
        assert not kb.reranking_enabled("kb")
        reranked = kb.rerank("kb", QUERY, embedding=np.ones(DIMS), top_k=5, reranker="cal")
        with pytest.raises(RerankerNotAllowed):
            kb.rerank("kb", QUERY, embedding=np.ones(DIMS), top_k=5, reranker="nowhere")
    assert (reranked.config.alias, reranked.config.chosen_by) == ("cal", "named")
    assert reranked.outcome.reranked and len(reranked.pool) == len(reranked.texts) == 50
    assert server.requests[0].body["documents"] == reranked.texts
    assert [r[:5] for r in usage_rows(db)] == [("acme", "cal", True, True, 50)]


def test_a_threshold_calibrated_for_the_reranker_judges_only_its_complete_rankings(kb, db):
    golden = keyword_scorer({"golden": 0.9}, 0.05)
    with RerankServer(scorer=golden) as server:
        use_server(kb, server)
        enable(kb)
        kb.store_calibrated_threshold("kb", "voy", 0.5)
        knobs = kb.get_collection("kb").knobs
        assert (knobs["score_threshold"], knobs["threshold_reranker"]) == (0.5, "voy")
        result = kb.search("kb", QUERY, embedding=np.ones(DIMS), top_k=8)
    golden_in_pool = sum("golden" in d for d in server.requests[0].body["documents"])
    assert result.reranked and result.threshold_applied and result.threshold_skipped is None
    assert golden_in_pool >= 2 and [h.source_uri for h in result] == ["d7"] * golden_in_pool
    assert result.below_threshold == 50 - golden_in_pool
    # a fallback's fused scores, and a partial ranking's stand-ins, are never judged by it
    for fault in ("500", "partial"):
        with RerankServer(scorer=golden, fault=fault) as server:
            use_server(kb, server)
            other = kb.search("kb", QUERY, embedding=np.ones(DIMS), top_k=8)
        assert not other.rerank.reranked and len(other) == 8 and not other.threshold_applied
        assert 'calibrated for reranker "voy"' in other.threshold_skipped
    assert other.rerank.partial and [h.source_uri for h in other][:golden_in_pool] == ["d7"] * golden_in_pool
    with pytest.raises(RerankerNotAllowed):
        kb.store_calibrated_threshold("kb", "nowhere", 0.5)


# -- secrets and endpoints, through a search -------------------------------------------------------

def test_an_unmapped_secret_ref_gives_no_call_and_the_search_goes_on(kb, db, caplog):
    with RerankServer() as server:
        use_server(kb, server)
        kb.register_reranker("voy", "voyage", base_url=server.base_url("voyage"), secret_ref="unmapped")
        enable(kb)
        with caplog.at_level(logging.WARNING, logger="pgsift.rerank"):
            result = kb.search("kb", QUERY, embedding=np.ones(DIMS), top_k=5)
    assert len(result) == 5 and not result.reranked
    assert result.rerank.fault == "unavailable" and not result.rerank.called
    assert "sift.map_secret('acme', 'unmapped'" in result.rerank.reason
    assert not kb.reranking_enabled("kb")
    assert server.requests == [] and usage_rows(db) == []
    assert "unavailable" in caplog.text and KEY not in caplog.text


def test_a_revoked_endpoint_is_refused_at_search_time(kb, db, caplog):
    with RerankServer() as server:
        use_server(kb, server)
        enable(kb)
        assert kb.search("kb", QUERY, embedding=np.ones(DIMS), top_k=5).reranked
        db.execute("delete from sift.allowed_endpoints")   # the operator revokes it
        assert not kb.reranking_enabled("kb")
        with caplog.at_level(logging.WARNING, logger="pgsift.rerank"):
            result = kb.search("kb", QUERY, embedding=np.ones(DIMS), top_k=5)
    assert len(server.requests) == 1   # the first search's only
    assert len(result) == 5 and not result.reranked
    assert result.rerank.fault == "not_allowed" and "no longer allows" in result.rerank.reason
    assert not result.rerank.called and "not_allowed" in caplog.text
    assert len(usage_rows(db)) == 1


# -- the deadline covers everything from the call on -------------------------------------------------

@pytest.fixture
def slow_build(monkeypatch):
    """Building a reranker takes `seconds` (a client library's first import, say); `built` is
    set when a build finished."""
    real = registry.make_reranker
    state = {"seconds": 1.5, "built": threading.Event(), "builds": 0}

    def make(config, key):
        state["builds"] += 1
        time.sleep(state["seconds"])
        try:
            return real(config, key)
        finally:
            state["built"].set()

    monkeypatch.setattr(registry, "make_reranker", make)
    return state


def test_a_slow_reranker_build_counts_against_the_deadline(kb, db, slow_build):
    with RerankServer(scorer=keyword_scorer({"golden": 0.9})) as server:
        use_server(kb, server, timeout_ms=300, deadline_ms=600)
        enable(kb)
        result = kb.search("kb", QUERY, embedding=np.ones(DIMS), top_k=5)
        assert not result.reranked and result.rerank.fault == "deadline_exceeded" and len(result) == 5
        assert not slow_build["built"].is_set()    # back before the build was: the deadline counted it
        assert server.requests == [] and usage_rows(db) == []
        # the build goes on in the background; once it is done, searches rerank
        assert slow_build["built"].wait(5)
        later = kb.search("kb", QUERY, embedding=np.ones(DIMS), top_k=5)
    assert later.reranked and later[0].source_uri == "d7" and slow_build["builds"] == 1
    assert len(server.requests) == 1


async def test_async_slow_reranker_build_counts_against_the_deadline(kb, db, dsn, slow_build):
    with RerankServer(scorer=keyword_scorer({"golden": 0.9})) as server:
        use_server(kb, server, timeout_ms=300, deadline_ms=600)
        enable(kb)
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
            client = AsyncClient(conn, tenant=TENANT)
            result = await client.search("kb", QUERY, embedding=np.ones(DIMS), top_k=5)
            assert result.rerank.fault == "deadline_exceeded" and len(result) == 5
            assert not slow_build["built"].is_set()
            assert slow_build["built"].wait(5)
            later = await client.search("kb", QUERY, embedding=np.ones(DIMS), top_k=5)
    assert later.reranked and later[0].source_uri == "d7" and len(server.requests) == 1


# -- metering on a read-only connection -------------------------------------------------------------

def test_metering_goes_through_the_writer(kb, db, dsn):
    with RerankServer() as server:
        use_server(kb, server)
        enable(kb)
        with psycopg.connect(dsn, autocommit=True) as standby, psycopg.connect(dsn, autocommit=True) as primary:
            standby.execute("set default_transaction_read_only = on")
            result = Client(standby, tenant=TENANT, writer=primary).search(
                "kb", QUERY, embedding=np.ones(DIMS), top_k=5)
    assert result.reranked and result.rerank.usage_recorded is True
    assert [r[:5] for r in usage_rows(db)] == [("acme", "voy", True, True, 50)]


def test_metering_never_fails_a_search_on_a_read_only_connection(kb, db, dsn, caplog):
    with RerankServer() as server:
        use_server(kb, server)
        enable(kb)
        with psycopg.connect(dsn, autocommit=True) as standby:
            standby.execute("set default_transaction_read_only = on")
            with caplog.at_level(logging.WARNING, logger="pgsift.rerank"):
                result = Client(standby, tenant=TENANT).search("kb", QUERY, embedding=np.ones(DIMS), top_k=5)
    assert result.reranked and len(result) == 5
    assert result.rerank.usage_recorded is False
    usage = result.rerank.usage
    assert (usage["reranker_alias"], usage["provider"], usage["model"], usage["documents"], usage["ok"]) == (
        "voy", "voyage", "rerank-2", 50, True)
    assert usage["tokens"] > 0 and usage["attempts"] == 1 and usage["error"] is None
    assert "usage not recorded" in caplog.text
    assert usage_rows(db) == []
    # the row it carries is the one to record elsewhere: it goes in as it is
    with Client(db, tenant=TENANT).transaction() as conn:
        conn.execute(queries.RECORD_USAGE, usage)
    assert [r[:5] for r in usage_rows(db)] == [("acme", "voy", True, True, 50)]


async def test_async_metering_on_a_read_only_connection(kb, db, dsn, caplog):
    with RerankServer() as server:
        use_server(kb, server)
        enable(kb)
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as standby, \
                await psycopg.AsyncConnection.connect(dsn, autocommit=True) as primary:
            await standby.execute("set default_transaction_read_only = on")
            with caplog.at_level(logging.WARNING, logger="pgsift.rerank"):
                alone = await AsyncClient(standby, tenant=TENANT).search("kb", QUERY, embedding=np.ones(DIMS))
            written = await AsyncClient(standby, tenant=TENANT, writer=primary).search(
                "kb", QUERY, embedding=np.ones(DIMS))
    assert alone.reranked and alone.rerank.usage_recorded is False and "usage not recorded" in caplog.text
    assert written.reranked and written.rerank.usage_recorded is True
    assert [r[:4] for r in usage_rows(db)] == [("acme", "voy", True, True)]


def test_a_pool_as_source_and_as_writer(kb, db, dsn):
    with RerankServer(scorer=keyword_scorer({"golden": 0.9})) as server:
        use_server(kb, server)
        enable(kb)
        with psycopg_pool.ConnectionPool(dsn, min_size=1, max_size=2, open=True,
                                         kwargs={"autocommit": True}) as pool, \
                psycopg_pool.ConnectionPool(dsn, min_size=1, max_size=1, open=True,
                                            kwargs={"autocommit": True,
                                                    "options": "-c default_transaction_read_only=on"}) as standby:
            pooled = Client(pool, tenant=TENANT).search("kb", QUERY, embedding=np.ones(DIMS), top_k=4)
            replica = Client(standby, tenant=TENANT, writer=pool).search("kb", QUERY, embedding=np.ones(DIMS),
                                                                          top_k=4)
            alone = Client(standby, tenant=TENANT).search("kb", QUERY, embedding=np.ones(DIMS), top_k=4)
    assert pooled.reranked and pooled[0].source_uri == "d7" and pooled.rerank.usage_recorded
    assert replica.reranked and replica.rerank.usage_recorded
    assert alone.reranked and alone.rerank.usage_recorded is False   # the standby pool is read-only
    assert [h.chunk_id for h in replica] == [h.chunk_id for h in pooled] == [h.chunk_id for h in alone]
    assert len(usage_rows(db)) == 2


# -- async ------------------------------------------------------------------------------------------

async def test_async_search_reranks_too(kb, db, dsn):
    with RerankServer(scorer=keyword_scorer({"golden": 0.9})) as server:
        use_server(kb, server)
        enable(kb)
        async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
            client = AsyncClient(conn, tenant=TENANT)
            assert await client.reranking_enabled("kb")
            result = await client.search("kb", QUERY, embedding=np.ones(DIMS), top_k=4)
    assert result.reranked and result[0].source_uri == "d7" and len(result) == 4
    assert result.rerank.usage_recorded is True and len(usage_rows(db)) == 1


# -- one retrieval: the pool is fetched once -------------------------------------------------------

RETRIEVAL = ("search", "rerank_pool", "candidates", "_candidates", "_pool", "_plain_legs", "_staged_search")


def function_calls(db) -> Counter:
    """Calls of sift's functions so far (track_functions, flushed for this backend)."""
    db.execute("select pg_stat_force_next_flush()")
    db.execute("select pg_stat_clear_snapshot()")
    return Counter(dict(db.execute("select funcname, calls from pg_stat_user_functions "
                                   "where schemaname = 'sift'").fetchall()))


@contextlib.contextmanager
def sent(monkeypatch):
    """The statements a client sends, the tenant's binding and BEGIN/COMMIT aside, and the round
    trips they take: a pipeline's Sync (what it sent before is answered together), a statement
    sent outside a pipeline, and the BEGIN and COMMIT of a psycopg transaction opened outside
    one."""
    seen: dict[str, list] = {"statements": [], "round_trips": []}
    execute, transaction = psycopg.Cursor.execute, psycopg.Connection.transaction
    sync = psycopg_pipeline.BasePipeline._enqueue_sync

    def piped(conn) -> bool:
        return conn.info.pipeline_status != psycopg.pq.PipelineStatus.OFF

    def spy_execute(self, query, params=None, **kwargs):
        if query not in (queries.SET_TENANT, queries.PIN_SETTINGS, queries.BEGIN, queries.COMMIT, queries.ROLLBACK):
            seen["statements"].append(query)
        if not piped(self.connection):
            seen["round_trips"].append(query)
        return execute(self, query, params, **kwargs)

    def spy_transaction(self, *args, **kwargs):
        if not piped(self):
            seen["round_trips"] += ["BEGIN", "COMMIT"]
        return transaction(self, *args, **kwargs)

    def spy_sync(self):
        seen["round_trips"].append("Sync")
        return sync(self)

    with monkeypatch.context() as m:
        m.setattr(psycopg.Cursor, "execute", spy_execute)
        m.setattr(psycopg.Connection, "transaction", spy_transaction)
        m.setattr(psycopg_pipeline.BasePipeline, "_enqueue_sync", spy_sync)
        yield seen


@pytest.mark.parametrize("fault", [None, "500"])
def test_a_reranked_search_fetches_its_pool_once(kb, db, monkeypatch, figure, fault):
    """A reranked search sends 4 statements, each in a round trip of its own with its
    transaction (it sent 6 in 5 transactions, and ran the legs twice: sift.search, then
    sift.candidates for the pool; then 4 in 11 round trips): the search statement, which runs
    no leg when the search reranks; the pool with its texts (sift.rerank_pool, the one
    retrieval); the metering; sift.finalize on the scores. A fault falls back on that same
    pool, fused: no second retrieval either."""
    db.execute("set track_functions = 'all'")
    with RerankServer(scorer=keyword_scorer({"golden": 0.99}), fault=fault) as server:
        use_server(kb, server, timeout_ms=500, deadline_ms=1000)
        enable(kb)
        kb.search("kb", QUERY, embedding=np.ones(DIMS), top_k=5)    # the connection adapted, the reranker built
        before = function_calls(db)
        with sent(monkeypatch) as seen:
            result = kb.search("kb", QUERY, embedding=np.ones(DIMS), top_k=5)
        called = function_calls(db) - before
    assert result.reranked == (fault is None) and len(result) == 5 and result.rerank.called
    assert seen["statements"] == [queries.SEARCH_UNLESS_RERANKED, queries.RERANK_POOL, queries.RECORD_USAGE,
                                  queries.FINALIZE]
    assert seen["round_trips"] == ["Sync"] * 4
    # one retrieval, of the pool the reranker scored (50: rerank_top_n); sift.search never ran
    assert {f: called[f] for f in RETRIEVAL if called[f]} == {"rerank_pool": 1, "_candidates": 1, "_pool": 1}
    assert called["finalize"] == 1 and called["_reranks"] == 1
    assert len(server.requests[-1].body["documents"]) == 50
    figure("statements of a reranked search", len(seen["statements"]))
    figure("round trips of a reranked search", len(seen["round_trips"]))
    figure("retrievals of a reranked search", called["_candidates"])


def test_a_plain_search_is_still_one_statement(kb, db, monkeypatch):
    """A search that does not rerank sends the one statement it always sent, found or not, in
    one round trip with its transaction and the binding (it took 3)."""
    db.execute("set track_functions = 'all'")
    kb.search("kb", QUERY, embedding=np.ones(DIMS), top_k=5)
    for query in (QUERY, "zyzzyva"):
        before = function_calls(db)
        with sent(monkeypatch) as seen:
            result = kb.search("kb", query, top_k=5)
        called = function_calls(db) - before
        assert (len(result) > 0) == (query == QUERY) and result.rerank is None
        assert seen["statements"] == [queries.SEARCH_UNLESS_RERANKED] and seen["round_trips"] == ["Sync"]
        assert {f: called[f] for f in RETRIEVAL if called[f]} == {"search": 1, "_plain_legs": 1}


def test_reranking_switched_off_between_the_two_statements_still_answers(kb, db, dsn, monkeypatch):
    """The pool is taken as the database has it then: were reranking switched off after the
    search statement said it reranks, the search answers from that pool, fused, never empty."""
    with RerankServer(scorer=keyword_scorer({"golden": 0.99})) as server:
        use_server(kb, server)
        enable(kb)
        execute = psycopg.Cursor.execute

        def switch_off_first(self, query, params=None, **kwargs):
            if query == queries.RERANK_POOL:   # (committed by another session, before the pool is read)
                kb.alter_collection("kb", rerank=False)
            return execute(self, query, params, **kwargs)

        with psycopg.connect(dsn, autocommit=True) as conn:
            monkeypatch.setattr(psycopg.Cursor, "execute", switch_off_first)
            result = Client(conn, tenant=TENANT).search("kb", QUERY, embedding=np.ones(DIMS), top_k=5)
            monkeypatch.undo()
    assert len(result) == 5 and not result.reranked and result.rerank.skip == "off"
    assert server.requests == [] and usage_rows(db) == []


def test_rerank_pool_from_sql(kb, db):
    """sift.rerank_pool: the pool a search reranks, with the texts the reranker scores and the
    reranker, in one statement; what sift.candidates and sift.rerank_texts give in two."""
    with RerankServer() as server:
        use_server(kb, server)
        enable(kb, top_n=20)
        db.execute("update sift.chunks set context = 'Handbook' where ordinal = 1")
        with kb.transaction() as conn:
            args = {"q": QUERY, "v": "[" + ",".join(["1"] * DIMS) + "]"}
            pool = conn.execute("select ord, chunk_id, fused_rank, document, more, reranker_config "
                                "from sift.rerank_pool('kb', %(q)s, %(v)s::vector, match_count => 5)", args).fetchall()
            fused = conn.execute("select chunk_id from sift.candidates('kb', %(q)s, %(v)s::vector, match_count => 20) "
                                 "order by fused_rank", args).fetchall()
            texts = conn.execute("select document from sift.rerank_texts(%s)", [[r[1] for r in pool]]).fetchall()
            config = conn.execute("select to_jsonb(r) from sift.reranker_for('kb') r").fetchone()[0]
            sized = conn.execute("select count(*), bool_and(more) from sift.rerank_pool('kb', %(q)s, %(v)s::vector, "
                                 "pool_size => 3)", args).fetchone()
            off = conn.execute("select count(*), bool_and(reranker_config is null) from sift.rerank_pool('kb', %(q)s, "
                               "%(v)s::vector, match_count => 4, knobs => '{\"rerank\": false}')", args).fetchone()
            named = conn.execute("select reranker_config ->> 'chosen_by' from sift.rerank_pool('kb', %(q)s, "
                                 "%(v)s::vector, knobs => '{\"rerank\": false}', reranker => 'voy') limit 1",
                                 args).fetchone()[0]
            with pytest.raises(psycopg.Error) as info, conn.transaction():
                conn.execute("select * from sift.rerank_pool('kb', %(q)s, reranker => 'nowhere')", args)
            assert info.value.sqlstate == "SF008"
    assert [r[0] for r in pool] == list(range(1, 21))              # widened to rerank_top_n
    assert [r[1] for r in pool] == [r[0] for r in fused][:20] and all(r[4] for r in pool)   # the pool goes on
    assert [r[3] for r in pool] == [t[0] for t in texts] and any(t.startswith("Handbook\n\n") for t, in texts)
    assert all(r[5] == config for r in pool) and config["alias"] == "voy"
    assert sized == (3, True) and off == (4, True) and named == "named"
