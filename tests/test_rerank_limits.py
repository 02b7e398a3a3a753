"""Rerank requests within each provider's limits (sift.reranker_limits, pgsift.rerankers.limits).

The planner is checked as a property on random pools and limits; then each provider's real
client runs against a loopback server that enforces the limits as the real service does
(400, or 413 for TEI, on a violation): the same pool that is refused whole goes through
split or clipped, and the outcome says what was done. Last, the SQL half: the limits are
data the operator edits, sift.reranker_for returns the model's row (else the provider's),
and Client.search splits a pool past TEI's batch size.
"""

from __future__ import annotations

import asyncio
import math
import random
import re
import uuid

import numpy as np
import psycopg
import pytest
from conftest import unit
from pgsift import Chunk, Client, Document, rerankers
from pgsift.rerankers import RerankLimits, estimate_tokens, plan_batches
from rerank_servers import SERVER_CHARS_PER_TOKEN, RerankServer, import_providers, loopback_only

KEY = "test-key-limits"
MODELS = {"voyage": "rerank-2", "cohere": "rerank-v3.5", "tei": "bge-reranker"}


@pytest.fixture(scope="module", autouse=True)
def _providers_imported():
    import_providers()


@pytest.fixture(autouse=True)
def _loopback(monkeypatch):
    loopback_only(monkeypatch)
    rerankers.clear_reranker_cache()
    yield
    rerankers.clear_reranker_cache()


def scored_docs(n: int, seed: int = 0, words: int = 8) -> list[str]:
    """Documents that carry their own relevance ("score=0.xxx"), distinct, shuffled."""
    rng = random.Random(seed)
    scores = rng.sample(range(1, 100_000), n)
    return [f"score={s / 100_000:.5f} " + " ".join(f"w{rng.randrange(100)}" for _ in range(words)) for s in scores]


def text_scorer(query: str, documents) -> list[float]:
    out = []
    for d in documents:
        m = re.match(r"score=([0-9.]+)", d)
        out.append(float(m.group(1)) if m else 0.0)
    return out


def by_text_score(docs: list[str]) -> list[int]:
    scores = text_scorer("", docs)
    return sorted(range(len(docs)), key=lambda i: (-scores[i], i))


# Splitting, not the deadline, is under test here: room for a saturated machine (the
# loopback server's three answers once took past the 3 s default under a full test run).
ROOMY = 30.0


def reranker_for(provider: str, server: RerankServer):
    return rerankers.IMPLEMENTATIONS[provider](MODELS[provider], api_key=KEY, base_url=server.base_url(provider))


# -- the planner ----------------------------------------------------------------------------

def test_without_limits_the_pool_goes_whole():
    b = plan_batches("q", ["a", "b", "c"], None)
    assert b.requests == [[0, 1, 2]] and b.docs == ["a", "b", "c"] and not b.clipped and not b.not_sent
    assert plan_batches("q", [], None).requests == []


def test_estimates_err_high_and_count_cjk_characters_one_each():
    assert estimate_tokens("abcdef", 3) == 2 and estimate_tokens("abcdefg", 3) == 3
    assert estimate_tokens("退款政策", 3) == 4 and estimate_tokens("退款 ok", 3) == 3
    text = "refund policy for damaged goods " * 20
    # the stand-in server counts 4 characters a token: the client's 3 never counts fewer
    assert estimate_tokens(text, 3) >= math.ceil(len(text) / SERVER_CHARS_PER_TOKEN)


def test_a_long_query_loses_its_oldest_conversation_first():
    query = "user: " + "earlier talk " * 200 + "\n\nhow long do refunds take?"
    b = plan_batches(query, ["doc one", "doc two"], RerankLimits(max_documents=10, max_query_tokens=30,
                                                                 max_pair_tokens=100))
    assert b.query_clipped and b.query.endswith("how long do refunds take?")
    assert estimate_tokens(b.query, 3) <= 30 and query.endswith(b.query)


def test_a_long_conversation_leaves_documents_room_in_a_small_pair():
    """TEI's shipped row has no query limit and a 512-token pair: the query takes at most half."""
    query = "user: " + "we talked about many things " * 60 + "\n\nhow long do refunds take?"
    docs = ["refund policy: " + "details " * 300 for _ in range(5)]
    b = plan_batches(query, docs, RerankLimits(max_documents=32, max_pair_tokens=512))
    assert b.query_clipped and estimate_tokens(b.query, 3) <= 256 and b.query.endswith("refunds take?")
    assert all(estimate_tokens(d, 3) >= 200 for d in b.docs)


def test_candidates_left_unsent_keep_a_calibrated_threshold_off():
    docs = scored_docs(100)
    with RerankServer(scorer=text_scorer) as server:
        outcome = rerankers.rerank_pool(reranker_for("tei", server), "refunds", None, docs, deadline_s=ROOMY,
                                        limits=RerankLimits(max_documents=10, max_requests=2))
    assert outcome.reranked and outcome.not_sent == 80 and not outcome.complete


@pytest.mark.parametrize("seed", range(300))
def test_requests_fit_the_limits_and_cover_a_prefix_of_the_pool(seed):
    rng = random.Random(seed)
    n = rng.randrange(0, 120)
    docs = ["".join(rng.choice("abcd efgh 退款") for _ in range(rng.choice([0, 5, 40, 400, 3000])))
            for _ in range(n)]
    query = "q " * rng.randrange(1, 80)
    limits = RerankLimits(
        max_documents=rng.choice([1, 3, 10, 32, 1000]),
        max_query_tokens=rng.choice([None, 5, 50]),
        max_pair_tokens=rng.choice([None, 60, 512, 4000]),
        max_request_tokens=rng.choice([None, 200, 2000, 600000]),
        chars_per_token=rng.choice([2.0, 3.0, 4.0]),
        max_requests=rng.choice([1, 2, 4, 8]))
    if limits.max_query_tokens and limits.max_pair_tokens and limits.max_query_tokens >= limits.max_pair_tokens:
        return
    b = plan_batches(query, docs, limits)
    cpt = limits.chars_per_token
    sent = [i for r in b.requests for i in r]
    assert sent == list(range(len(sent)))                       # pool order, each once
    assert list(b.not_sent) == list(range(len(sent), n))        # what is left out is the tail
    assert len(b.requests) <= limits.max_requests and all(b.requests)
    q = estimate_tokens(b.query, cpt)
    if limits.max_query_tokens:
        assert q <= limits.max_query_tokens
    for r in b.requests:
        assert len(r) <= limits.max_documents
        tokens = [estimate_tokens(b.docs[i], cpt) for i in r]
        if limits.max_request_tokens and len(r) > 1:
            assert q * len(r) + sum(tokens) <= limits.max_request_tokens
        if limits.max_pair_tokens:
            assert all(q + t <= max(limits.max_pair_tokens, q + 1) for t in tokens)
    for i in range(n):
        if i in b.clipped:
            assert docs[i].startswith(b.docs[i]) and len(b.docs[i]) < len(docs[i])
        elif i in sent:
            assert b.docs[i] == docs[i]
    assert set(b.clipped) <= set(sent)


# -- the real clients against servers that enforce the limits ---------------------------------

def test_tei_past_its_batch_size_is_refused_whole_and_goes_through_split():
    docs = scored_docs(70)
    with RerankServer(scorer=text_scorer, limits={"max_documents": 32}) as server:
        whole = rerankers.rerank_pool(reranker_for("tei", server), "refunds", None, docs, deadline_s=ROOMY)
        assert whole.fault == "client_error" and "413" in whole.reason and server.violations
        server.violations.clear()
        split = rerankers.rerank_pool(reranker_for("tei", server), "refunds", None, docs, deadline_s=ROOMY,
                                      limits=RerankLimits(max_documents=32))
    assert not server.violations
    assert [len(r.body["texts"]) for r in server.requests[1:]] == [32, 32, 6]
    assert split.reranked and split.requests == 3 and split.documents == 70 and split.not_sent == 0
    assert split.order() == by_text_score(docs)        # one ranking across the three requests
    assert "split into 3 requests" in split.reason


@pytest.mark.parametrize("provider", ["voyage", "cohere"])
def test_a_huge_document_is_clipped_rather_than_failing_the_request(provider):
    docs = scored_docs(20)
    docs[4] = docs[4] + " padding" * 100_000            # 800k characters
    limits = {"max_request_tokens": 100_000}
    with RerankServer(scorer=text_scorer, limits=limits) as server:
        whole = rerankers.rerank_pool(reranker_for(provider, server), "refunds", None, docs, deadline_s=ROOMY)
        assert whole.fault == "client_error" and not whole.reranked
        server.violations.clear()
        clipped = rerankers.rerank_pool(reranker_for(provider, server), "refunds", None, docs, deadline_s=ROOMY,
                                        limits=RerankLimits(max_documents=1000, max_pair_tokens=16_000,
                                                            max_request_tokens=100_000))
    assert not server.violations
    assert clipped.reranked and clipped.requests == 1 and clipped.clipped == (4,)
    assert clipped.order() == by_text_score(docs)
    key = "documents"
    sent = server.requests[-1].body[key][4]
    assert docs[4].startswith(sent) and estimate_tokens(sent, 3) <= 16_000
    assert "clipped 1 document(s)" in clipped.reason and "pool places 5" in clipped.reason


def test_cohere_past_its_document_count_and_a_long_conversation():
    docs = scored_docs(1500, words=2)
    conversation = "we talked " * 2000
    limits = RerankLimits(max_documents=1000, max_query_tokens=200, max_pair_tokens=4096)
    with RerankServer(scorer=text_scorer, limits={"max_documents": 1000, "max_query_tokens": 200}) as server:
        outcome = rerankers.rerank_pool(reranker_for("cohere", server), "how long do refunds take?",
                                        conversation, docs, context_chars=20_000, limits=limits,
                                        deadline_s=ROOMY)
    assert not server.violations
    assert [len(r.body["documents"]) for r in server.requests] == [1000, 500]
    assert all(r.body["query"].endswith("how long do refunds take?") for r in server.requests)
    assert outcome.reranked and outcome.query_clipped and outcome.requests == 2
    assert outcome.order() == by_text_score(docs)


def test_past_the_request_budget_the_rest_keeps_the_fused_order():
    docs = scored_docs(100)
    with RerankServer(scorer=text_scorer, limits={"max_documents": 10}) as server:
        outcome = rerankers.rerank_pool(reranker_for("tei", server), "refunds", None, docs, deadline_s=ROOMY,
                                        limits=RerankLimits(max_documents=10, max_requests=4))
    assert len(server.requests) == 4 and not server.violations
    assert outcome.reranked and outcome.not_sent == 60 and outcome.documents == 40
    assert outcome.order() == by_text_score(docs[:40]) + list(range(40, 100))
    scores = outcome.finalize_scores()
    assert scores is not None and len(scores) == 100 and min(scores[:40]) > max(scores[40:])
    assert "60 candidate(s) past the last request kept the fused order" in outcome.reason


def test_a_failed_later_request_keeps_what_the_earlier_ones_ranked():
    docs = scored_docs(70)
    with RerankServer(scorer=text_scorer, fault="500", fail_after=1) as server:
        outcome = rerankers.rerank_pool(reranker_for("tei", server), "refunds", None, docs, deadline_s=ROOMY,
                                        limits=RerankLimits(max_documents=32), max_attempts=1)
    assert len(server.requests) == 2                       # the third request is not made
    assert outcome.partial and outcome.fault == "partial_ranking" and not outcome.reranked
    assert "request 2 of 3" in outcome.reason and "HTTP 500" in outcome.reason
    assert outcome.order() == by_text_score(docs[:32]) + list(range(32, 70))
    assert outcome.requests == 1 and outcome.documents == 32
    with RerankServer(scorer=text_scorer, fault="500") as server:
        first = rerankers.rerank_pool(reranker_for("tei", server), "refunds", None, docs, deadline_s=ROOMY,
                                      limits=RerankLimits(max_documents=32), max_attempts=1)
    assert first.fault == "server_error" and first.order() == list(range(70)) and len(server.requests) == 1


def test_async_splits_the_same_way():
    docs = scored_docs(70)
    with RerankServer(scorer=text_scorer, limits={"max_documents": 32}) as server:
        outcome = asyncio.run(rerankers.arerank_pool(reranker_for("tei", server), "refunds", None, docs,
                                                     deadline_s=ROOMY, limits=RerankLimits(max_documents=32)))
    assert not server.violations and outcome.reranked and outcome.requests == 3
    assert outcome.order() == by_text_score(docs)


# -- the SQL half ----------------------------------------------------------------------------------

def test_limits_are_data_beside_the_providers(db):
    rows = db.execute("select provider, model, max_documents from sift.reranker_limits "
                      "order by provider, model").fetchall()
    providers = {p for (p,) in db.execute("select provider from sift.reranker_providers").fetchall()}
    assert {p for p, m, _ in rows if m == "*"} == providers      # every provider has a default row
    assert ("voyage", "rerank-2", 1000) in rows and ("tei", "*", 32) in rows
    with pytest.raises(psycopg.errors.CheckViolation):
        db.execute("insert into sift.reranker_limits (provider, model, max_documents, source) "
                   "values ('tei', 'x', 0, 'test')")
    with pytest.raises(psycopg.errors.CheckViolation):
        db.execute("insert into sift.reranker_limits (provider, model, max_documents, max_query_tokens, "
                   "max_pair_tokens, source) values ('tei', 'x', 8, 600, 512, 'test')")


def test_a_tenant_reads_the_limits_but_only_the_operator_edits_them(db):
    role = f"limits_admin_{uuid.uuid4().hex[:8]}"
    db.execute(f"create role {role} login in role sift_admin")
    try:
        with db.transaction():
            db.execute(f"set local role {role}")
            assert db.execute("select count(*) from sift.reranker_limits").fetchone()[0] >= 9
            with pytest.raises(psycopg.errors.InsufficientPrivilege):
                db.execute("update sift.reranker_limits set max_documents = 100000")
    finally:
        db.execute(f"drop role {role}")


@pytest.fixture
def kb(db):
    db.execute("select sift.allow_endpoint(url_prefix => 'http://127.0.0.1:')")
    client = Client(db, tenant="acme")
    client.create_collection("kb", embedding_dims=8)
    rng = np.random.default_rng(5)
    client.upsert_documents("kb", [
        Document(source_uri=f"d{i}", chunks=[Chunk(content=f"score=0.{i:03d} refund policy part {j}",
                                                   embedding=unit(rng.normal(size=8))) for j in range(2)])
        for i in range(40)])
    return client


def test_search_splits_a_pool_past_tei_batch_size(kb, db):
    with RerankServer(scorer=text_scorer, limits={"max_documents": 32}) as server:
        kb.register_reranker("tei", "tei", model="bge-reranker", base_url=server.base_url("tei"))
        kb.alter_collection("kb", reranker="tei", rerank=True, rerank_top_n=60)
        config = kb.reranker_for("kb")
        assert config is not None and config.limits is not None and config.limits["model"] == "*"
        result = kb.search("kb", "refund policy", embedding=np.ones(8), top_k=5)
    assert not server.violations and [len(r.body["texts"]) for r in server.requests] == [32, 28]
    assert result.reranked and result.rerank.requests == 2 and "split into 2 requests" in result.rerank.reason
    assert [h.source_uri for h in result][:1] == ["d39"]
    assert db.execute("select documents, ok from sift.rerank_usage").fetchall() == [(60, True)]


def test_an_operator_row_for_the_model_wins_over_the_provider_default(kb, db):
    db.execute("insert into sift.reranker_limits (provider, model, max_documents, max_pair_tokens, source) "
               "values ('tei', 'bge-small-8', 8, 256, 'our TEI: --max-client-batch-size 8')")
    with RerankServer(scorer=text_scorer, limits={"max_documents": 8}) as server:
        kb.register_reranker("tei8", "tei", model="bge-small-8", base_url=server.base_url("tei"))
        kb.alter_collection("kb", reranker="tei8", rerank=True, rerank_top_n=20)
        config = kb.reranker_for("kb")
        assert config is not None and config.limits is not None and config.limits["max_documents"] == 8
        result = kb.search("kb", "refund policy", embedding=np.ones(8), top_k=5)
    assert not server.violations and [len(r.body["texts"]) for r in server.requests] == [8, 8, 4]
    assert result.reranked and result.rerank.requests == 3
