"""Reranking (pgsift.rerank + sql/80_rerankers.sql): each provider's real client against a
loopback server that speaks its protocol (tests/rerank_servers.py), every fault falling back
without shrinking the pool, the deadline, conversation clipping, the tenant rules, metering,
and the SQL round trip through sift.candidates and sift.finalize."""

from __future__ import annotations

import asyncio
import logging
import math
import threading
import time

import psycopg
import pytest

from pgsift import rerank
from pgsift.errors import InvalidArgument, InvalidKnob
from pgsift.rerank import RerankerConfig, RerankerNotAllowed, RerankOutcome
from rerank_servers import RerankServer, closed_port, keyword_scorer, reverse_scorer

PROVIDERS = ("voyage", "cohere", "tei")
KEY = "test-key-123"
DOCS = [f"passage number {i} about refunds" for i in range(8)]


@pytest.fixture(autouse=True)
def _loopback_only(monkeypatch):
    # Nothing here may go through a proxy: every server is on 127.0.0.1.
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    rerank.clear_reranker_cache()
    yield
    rerank.clear_reranker_cache()


@pytest.fixture
def servers():
    started: list[RerankServer] = []

    def start(**kwargs) -> RerankServer:
        server = RerankServer(**kwargs).start()
        started.append(server)
        return server

    yield start
    for server in started:
        server.stop()


def config(provider: str, base_url: str, **kw) -> RerankerConfig:
    kw.setdefault("tenant", "acme")
    kw.setdefault("alias", f"{provider}-main")
    kw.setdefault("model", {"voyage": "rerank-2", "cohere": "rerank-v3.5", "tei": "bge-reranker"}[provider])
    kw.setdefault("secret_ref", "PGSIFT_TEST_KEY")
    return RerankerConfig(provider=provider, base_url=base_url, **kw)


def reranker_for_server(provider: str, server: RerankServer, **kw):
    return rerank.make_reranker(config(provider, server.base_url(provider), **kw), lambda _ref: KEY)


def assert_fallback(outcome: RerankOutcome, n: int) -> None:
    """Not reranked, says why, and the pool keeps every candidate in its order."""
    assert outcome.reranked is False
    assert outcome.reason
    assert len(outcome.scores) == n
    assert outcome.order() == list(range(n))
    assert outcome.finalize_scores() is None


# -- text helpers ------------------------------------------------------------------------

def test_build_query_keeps_the_tail_of_the_conversation_exactly():
    conversation = "".join(chr(ord("a") + i % 26) for i in range(5000))
    query = "how long do refunds take?"
    built = rerank.build_query(query, conversation, limit=1500)
    assert built == conversation[-1500:] + "\n\n" + query
    assert len(built) == 1500 + 2 + len(query)
    assert rerank.build_query(query, conversation[:100], limit=1500) == conversation[:100] + "\n\n" + query
    # the query itself is never clipped, however long
    long_query = "q" * 4000
    assert rerank.build_query(long_query, conversation, limit=1500).endswith("\n\n" + long_query)
    assert rerank.build_query(long_query, None) == long_query
    assert rerank.build_query(query, "   ") == query
    assert rerank.build_query(query, conversation, limit=0) == query
    turns = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    assert rerank.build_query(query, turns, limit=10) == "assistant: hello"[-10:] + "\n\n" + query


def test_conversation_reaches_only_the_rerankers_query(servers):
    server = servers()
    conversation = "x" * 3000
    outcome = rerank.rerank_pool(reranker_for_server("tei", server), "refund window", conversation,
                                 DOCS, context_chars=1500)
    assert outcome.reranked
    sent = server.requests[0].body
    assert sent["query"] == "x" * 1500 + "\n\nrefund window"
    assert sent["texts"] == DOCS   # the documents are untouched


def test_contextualize_matches_its_sql_twin(db):
    cases = [("Handbook > Refunds", "Five days."), (None, "Five days."), ("  ", "Five days."), ("", "x")]
    for context, text in cases:
        sql = db.execute("select sift.contextualize(%s::text, %s::text)", [context, text]).fetchone()[0]
        assert sql == rerank.contextualize(context, text)
    assert rerank.contextualize("Handbook", "Five days.") == "Handbook\n\nFive days."


# -- validate and the outcome's encoding for finalize ---------------------------------------

@pytest.mark.parametrize("ranking, problem", [
    ([(0, 0.9), (8, 0.1)], "out of range"),
    ([(0, 0.9), (-1, 0.1)], "out of range"),
    ([(0, 0.9), (0, 0.1)], "duplicate index 0"),
    ([(0, float("nan"))], "NaN"),
    ([(0, float("inf"))], "infinite"),
    ([(0, None)], "score missing"),
    ([(True, 0.5)], "not an integer"),
    ([(1.0, 0.5)], "not an integer"),
    ([(0, "0.5")], "not a number"),
    ([(0,)], "not an (index, score) pair"),
    ({"index": 0}, "not a list"),
    (None, "not a list"),
])
def test_validate_rejects_what_does_not_describe_the_pool(ranking, problem):
    with pytest.raises(rerank.InvalidRanking, match=problem.replace("(", r"\(").replace(")", r"\)")):
        rerank.validate(ranking, 8)


def test_validate_accepts_pairs_and_provider_dicts():
    assert rerank.validate([(2, 0.5), (0, 1)], 3) == [(2, 0.5), (0, 1.0)]
    assert rerank.validate([{"index": 1, "relevance_score": 0.3}, {"index": 0, "score": 0.1}], 2) == [
        (1, 0.3), (0, 0.1)]
    assert rerank.validate([], 5) == []


def test_partial_ranking_puts_the_remainder_below_the_lowest_in_pool_order():
    outcome = RerankOutcome(scores=(None, 0.2, None, 0.9, None, 0.5), partial=True)
    assert outcome.order() == [3, 5, 1, 0, 2, 4]
    scores = outcome.finalize_scores()
    assert len(scores) == 6
    assert all(math.isfinite(s) and s > 0 for s in scores)
    assert sorted(range(6), key=lambda i: -scores[i]) == outcome.order()
    assert scores[3] == 0.9 and scores[5] == 0.5 and scores[1] == 0.2   # provider scores kept
    assert max(scores[i] for i in (0, 2, 4)) < 0.2


def test_finalize_scores_for_logits_and_zeros_keep_the_order():
    logits = RerankOutcome(scores=(-3.0, 2.0, -0.5, None))
    s = logits.finalize_scores()
    assert all(0 < x < 1 for x in s)
    assert sorted(range(4), key=lambda i: -s[i]) == logits.order() == [1, 2, 0, 3]
    zeros = RerankOutcome(scores=(0.0, 0.7, None, None))
    z = zeros.finalize_scores()
    assert all(x > 0 for x in z) and z[1] > z[0] > z[2] > z[3]
    assert RerankOutcome.unchanged(4).finalize_scores() is None


# -- each provider's request, through its real client ----------------------------------------

def test_voyage_request_shape(servers):
    server = servers()
    outcome = rerank.rerank_pool(reranker_for_server("voyage", server), "refund window", None, DOCS)
    assert outcome.reranked and not outcome.partial and outcome.fault is None
    (req,) = server.requests
    assert req.path == "/v1/rerank"
    assert req.headers["authorization"] == f"Bearer {KEY}"
    assert req.body == {"model": "rerank-2", "query": "refund window", "documents": DOCS,
                        "top_k": len(DOCS), "truncation": True}
    assert outcome.order() == list(reversed(range(len(DOCS))))   # the server's order
    assert outcome.scores[7] == pytest.approx(8 / 9)
    assert outcome.tokens == 2 + sum(len(d.split()) for d in DOCS)
    assert (outcome.provider, outcome.model) == ("voyage", "rerank-2")


def test_cohere_v2_request_shape(servers):
    server = servers()
    outcome = rerank.rerank_pool(reranker_for_server("cohere", server), "refund window", None, DOCS)
    assert outcome.reranked
    (req,) = server.requests
    assert req.path == "/v2/rerank"
    assert req.headers["authorization"] == f"Bearer {KEY}"
    assert req.body == {"model": "rerank-v3.5", "query": "refund window", "documents": DOCS,
                        "top_n": len(DOCS)}
    assert outcome.order() == list(reversed(range(len(DOCS))))
    assert outcome.search_units == 1
    assert outcome.tokens == 2 + sum(len(d.split()) for d in DOCS)


def test_tei_request_shape(servers):
    server = servers()
    outcome = rerank.rerank_pool(reranker_for_server("tei", server), "refund window", None, DOCS)
    assert outcome.reranked
    (req,) = server.requests
    assert req.path == "/rerank"
    assert req.headers["authorization"] == f"Bearer {KEY}"
    assert req.body["query"] == "refund window" and req.body["texts"] == DOCS
    assert req.body["truncate"] is True and req.body["raw_scores"] is False
    assert outcome.order() == list(reversed(range(len(DOCS))))
    assert outcome.tokens == 2 + sum(len(d.split()) for d in DOCS)


def test_tei_without_a_secret_sends_no_authorization(servers):
    server = servers()
    reranker = rerank.make_reranker(config("tei", server.url, secret_ref=None))
    assert rerank.rerank_pool(reranker, "q", None, DOCS).reranked
    assert "authorization" not in server.requests[0].headers


@pytest.mark.parametrize("provider", PROVIDERS)
def test_one_request_for_the_whole_pool(servers, provider):
    # No N+1: a 40-candidate pool is one HTTP request, whatever the provider.
    server = servers()
    pool = [f"candidate {i}" for i in range(40)]
    outcome = rerank.rerank_pool(reranker_for_server(provider, server), "q", None, pool)
    assert outcome.reranked and len(server.requests) == 1
    body = server.requests[0].body
    assert (body.get("documents") or body.get("texts")) == pool


# -- every fault falls back, says why, and keeps the whole pool ------------------------------

EXPECTED_FAULT = {
    "slow": "timeout", "429": "rate_limited", "500": "server_error", "503": "server_error",
    "400": "client_error", "malformed": "malformed_response", "out_of_range": "invalid_ranking",
    "negative_index": "invalid_ranking", "duplicate": "invalid_ranking", "nan": "invalid_ranking",
    "missing_score": "invalid_ranking",
}


@pytest.mark.parametrize("fault", sorted(EXPECTED_FAULT))
@pytest.mark.parametrize("provider", PROVIDERS)
def test_fault_falls_back_to_the_pool_order(servers, provider, fault, caplog):
    server = servers(fault=fault, delay=3.0)
    with caplog.at_level(logging.WARNING, logger="pgsift.rerank"):
        outcome = rerank.rerank_pool(reranker_for_server(provider, server), "q", None, DOCS,
                                     deadline_s=1.0, attempt_timeout_s=0.4, max_attempts=2)
    assert_fallback(outcome, len(DOCS))
    assert outcome.fault == EXPECTED_FAULT[fault], outcome.reason
    assert outcome.called and outcome.partial is False
    assert any(EXPECTED_FAULT[fault] in r.getMessage() for r in caplog.records)
    if fault == "slow":   # the second attempt gets what the first left of the deadline
        assert len(server.requests) in (1, 2)
    else:
        assert len(server.requests) == (2 if fault in ("429", "500", "503") else 1)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_connection_refused_falls_back(provider):
    port = closed_port()
    base = f"http://127.0.0.1:{port}" + ("/v1" if provider == "voyage" else "")
    reranker = rerank.make_reranker(config(provider, base), lambda _ref: KEY)
    started = time.monotonic()
    outcome = rerank.rerank_pool(reranker, "q", None, DOCS, deadline_s=1.0, attempt_timeout_s=0.4)
    assert time.monotonic() - started < 1.0 + 2
    assert_fallback(outcome, len(DOCS))
    assert outcome.fault == "connection_error"


@pytest.mark.parametrize("provider", PROVIDERS)
def test_partial_ranking_keeps_the_remainder_in_pool_order(servers, provider):
    server = servers(fault="partial")
    outcome = rerank.rerank_pool(reranker_for_server(provider, server), "q", None, DOCS)
    assert outcome.reranked is False and outcome.partial is True
    assert outcome.fault == "partial_ranking" and "4 of 8" in outcome.reason
    assert len(outcome.scores) == len(DOCS)
    # the ranked half (the server's best: 7, 6, 5, 4) leads, the rest follows in pool order
    assert outcome.order() == [7, 6, 5, 4, 0, 1, 2, 3]


@pytest.mark.parametrize("provider", PROVIDERS)
def test_an_empty_ranking_changes_nothing(servers, provider):
    server = servers(fault="empty")
    outcome = rerank.rerank_pool(reranker_for_server(provider, server), "q", None, DOCS)
    assert_fallback(outcome, len(DOCS))
    assert outcome.partial and outcome.fault == "partial_ranking"


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_retry_that_succeeds_reranks(servers, provider):
    server = servers(fault="503", fail_first=1)
    outcome = rerank.rerank_pool(reranker_for_server(provider, server), "q", None, DOCS,
                                 deadline_s=2.0, max_attempts=2)
    assert outcome.reranked and outcome.attempts == 2 and len(server.requests) == 2


def test_a_client_error_is_not_retried(servers):
    server = servers(fault="400")
    outcome = rerank.rerank_pool(reranker_for_server("voyage", server), "q", None, DOCS, max_attempts=5)
    assert outcome.fault == "client_error" and len(server.requests) == 1


# -- the deadline ------------------------------------------------------------------------------

@pytest.mark.parametrize("provider", PROVIDERS)
def test_deadline_bounds_every_retry(servers, provider):
    server = servers(fault="slow", delay=10.0)
    deadline = 1.2
    started = time.monotonic()
    outcome = rerank.rerank_pool(reranker_for_server(provider, server), "q", None, DOCS,
                                 deadline_s=deadline, attempt_timeout_s=10.0, max_attempts=5)
    elapsed = time.monotonic() - started
    assert elapsed < deadline + 2     # a bound, not a benchmark
    assert outcome.fault == "timeout" and len(server.requests) == 1   # the attempt used it all


class Stubborn:
    """A reranker that ignores timeouts: only the outside cut-off can stop waiting for it."""

    provider = "custom"
    model = "stubborn"

    def __init__(self):
        self.release = threading.Event()

    def rerank(self, query, documents, top_n=None):
        self.release.wait(10)
        return [(0, 1.0), (1, 0.5)]

    async def arerank(self, query, documents, top_n=None):
        await asyncio.sleep(10)
        return [(0, 1.0), (1, 0.5)]


def test_deadline_holds_even_when_the_client_ignores_its_timeout():
    stubborn = Stubborn()
    try:
        started = time.monotonic()
        outcome = rerank.rerank_pool(stubborn, "q", None, ["a", "b"], deadline_s=0.5, max_attempts=3)
        assert time.monotonic() - started < 0.5 + 1
        assert_fallback(outcome, 2)
        assert outcome.fault == "timeout"
    finally:
        stubborn.release.set()


async def test_async_deadline_holds_even_when_the_client_ignores_its_timeout():
    started = time.monotonic()
    outcome = await rerank.arerank_pool(Stubborn(), "q", None, ["a", "b"], deadline_s=0.5, max_attempts=3)
    assert time.monotonic() - started < 0.5 + 1
    assert_fallback(outcome, 2)
    assert outcome.fault == "timeout"


# -- no call at all ----------------------------------------------------------------------------

@pytest.mark.parametrize("query, pool, top_n, skip", [
    ("", DOCS, None, "blank_query"),
    ("   ", DOCS, None, "blank_query"),
    ("q", DOCS, 0, "top_k"),
    ("q", DOCS[:1], None, "too_few_candidates"),
    ("q", [], None, "too_few_candidates"),
])
def test_no_call_for_blank_query_zero_top_k_or_fewer_than_two(servers, query, pool, top_n, skip):
    server = servers()
    outcome = rerank.rerank_pool(reranker_for_server("voyage", server), query, None, pool, top_n)
    assert outcome.skip == skip and outcome.fault is None and not outcome.called
    assert len(outcome.scores) == len(pool) and outcome.order() == list(range(len(pool)))
    assert server.requests == []


def test_rerank_search_skips_top_k_zero(servers):
    server = servers()
    cfg = config("tei", server.url)
    outcome = rerank.rerank_search(cfg, tenant="acme", query="q", pool_texts=DOCS, top_k=0,
                                   resolver=lambda _r: KEY)
    assert outcome.skip == "top_k" and server.requests == []


# -- async ------------------------------------------------------------------------------------

@pytest.mark.parametrize("provider", PROVIDERS)
async def test_async_path_reranks(servers, provider):
    server = servers()
    reranker = reranker_for_server(provider, server)
    outcome = await rerank.arerank_pool(reranker, "refund window", "earlier turn", DOCS)
    assert outcome.reranked and outcome.order() == list(reversed(range(len(DOCS))))
    body = server.requests[0].body
    assert body["query"] == "earlier turn\n\nrefund window"
    # the same reranker serves a second search (clients are built once)
    again = await rerank.arerank_pool(reranker, "q", None, DOCS)
    assert again.reranked and len(server.requests) == 2


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("fault", ["500", "nan", "partial", "slow"])
async def test_async_faults_fall_back(servers, provider, fault):
    server = servers(fault=fault, delay=3.0)
    outcome = await rerank.arerank_pool(reranker_for_server(provider, server), "q", None, DOCS,
                                        deadline_s=1.0, attempt_timeout_s=0.4)
    assert outcome.reranked is False and len(outcome.scores) == len(DOCS)
    assert outcome.fault == {"500": "server_error", "nan": "invalid_ranking",
                             "partial": "partial_ranking", "slow": "timeout"}[fault]


async def test_async_connection_refused():
    reranker = rerank.make_reranker(config("tei", f"http://127.0.0.1:{closed_port()}"), lambda _r: KEY)
    outcome = await rerank.arerank_pool(reranker, "q", None, DOCS, deadline_s=1.0, attempt_timeout_s=0.3)
    assert_fallback(outcome, len(DOCS))
    assert outcome.fault == "connection_error"


# -- building rerankers: secrets from the environment, once per reranker ----------------------

def test_secret_comes_from_the_named_environment_variable(servers, monkeypatch):
    server = servers()
    monkeypatch.setenv("PGSIFT_TEST_VOYAGE_KEY", "pa-from-env")
    cfg = config("voyage", server.base_url("voyage"), secret_ref="PGSIFT_TEST_VOYAGE_KEY")
    outcome = rerank.rerank_search(cfg, tenant="acme", query="q", pool_texts=DOCS, top_k=5)
    assert outcome.reranked
    assert server.requests[0].headers["authorization"] == "Bearer pa-from-env"


def test_missing_secret_falls_back_without_a_call(servers, monkeypatch, caplog):
    server = servers()
    monkeypatch.delenv("PGSIFT_TEST_UNSET_KEY", raising=False)
    cfg = config("cohere", server.url, secret_ref="PGSIFT_TEST_UNSET_KEY")
    with caplog.at_level(logging.WARNING, logger="pgsift.rerank"):
        outcome = rerank.rerank_search(cfg, tenant="acme", query="q", pool_texts=DOCS, top_k=5)
    assert_fallback(outcome, len(DOCS))
    assert outcome.fault == "unavailable" and "PGSIFT_TEST_UNSET_KEY" in outcome.reason
    assert not outcome.called and server.requests == []
    assert "pa-" not in caplog.text and "unavailable" in caplog.text


def test_reranker_is_built_once_per_reranker(servers, monkeypatch):
    server = servers()
    monkeypatch.setenv("PGSIFT_TEST_KEY", "k1")
    cfg = config("voyage", server.base_url("voyage"))
    first = rerank.get_reranker(cfg)
    assert rerank.get_reranker(cfg) is first
    assert rerank.get_reranker(config("voyage", server.base_url("voyage"), alias="same-settings")) is first
    monkeypatch.setenv("PGSIFT_TEST_KEY", "k2")   # a rotated key builds a new client
    assert rerank.get_reranker(cfg) is not first


def test_custom_resolver(servers):
    server = servers()
    cfg = config("tei", server.url, secret_ref="vault:rerank/tei")
    seen = []
    outcome = rerank.rerank_search(cfg, tenant="acme", query="q", pool_texts=DOCS, top_k=3,
                                   resolver=lambda ref: seen.append(ref) or "from-vault")
    assert outcome.reranked and seen == ["vault:rerank/tei"]
    assert server.requests[0].headers["authorization"] == "Bearer from-vault"
    assert rerank.env_secret("vault:rerank/tei") is None


# -- test_connection ----------------------------------------------------------------------------

@pytest.mark.parametrize("provider", PROVIDERS)
def test_connection_reports_order_latency_and_range(servers, provider):
    server = servers(scorer=keyword_scorer({"Refunds reach": 0.93, "return an item": 0.41}, 0.02))
    check = rerank.test_connection(reranker_for_server(provider, server))
    assert check.ok and check.order_ok
    assert check.order == ("relevant", "near_miss", "irrelevant")
    assert (check.min_score, check.max_score) == (pytest.approx(0.02), pytest.approx(0.93))
    assert check.latency_ms > 0 and check.error is None
    assert len(server.requests) == 1


def test_connection_notices_a_wrong_order_and_a_failure(servers):
    wrong = rerank.test_connection(reranker_for_server("tei", servers(scorer=reverse_scorer)))
    assert wrong.ok and not wrong.order_ok
    broken = rerank.test_connection(reranker_for_server("tei", servers(fault="500")), timeout_s=1.0)
    assert not broken.ok and not broken.order_ok and "server_error" in broken.error


async def test_async_connection_check(servers):
    server = servers(scorer=keyword_scorer({"Refunds reach": 0.9, "return an item": 0.5}, 0.1))
    check = await rerank.atest_connection(reranker_for_server("cohere", server))
    assert check.ok and check.order_ok


# -- SQL: registering, choosing, refusing ----------------------------------------------------------

def make_collection(db, name: str, tenant: str = "acme", dims: int = 3) -> None:
    db.execute("select sift.create_collection(collection => %s::text, embedding_dims => %s::int, "
               "tenant => %s::text)", [name, dims, tenant])


def test_reranker_for_a_collection(db):
    make_collection(db, "kb")
    assert rerank.reranker_for(db, "acme", "kb") is None   # off by default
    rerank.register_reranker(db, "voy", "voyage", tenant="acme", secret_ref="PGSIFT_VOYAGE_KEY")
    assert rerank.reranker_for(db, "acme", ["kb"]) is None   # named nowhere yet
    rerank.set_collection_reranker(db, "kb", tenant="acme", alias="voy")
    assert rerank.reranker_for(db, "acme", ["kb"]) is None   # named but not switched on
    assert not rerank.reranking_enabled(db, "acme", ["kb"])
    row = rerank.set_collection_reranker(db, "kb", tenant="acme", enabled=True, rerank_top_n=30)
    assert row == {"reranker_alias": "voy", "rerank_enabled": True, "rerank_top_n": 30}
    cfg = rerank.reranker_for(db, "acme", ["kb"])
    assert cfg.usable and cfg.alias == "voy" and cfg.provider == "voyage" and cfg.model == "rerank-2"
    assert (cfg.secret_ref, cfg.chosen_by, cfg.rerank_top_n) == ("PGSIFT_VOYAGE_KEY", "collection", 30)
    assert (cfg.timeout_ms, cfg.deadline_ms, cfg.max_attempts, cfg.context_chars) == (2000, 3000, 2, 1500)
    assert rerank.reranking_enabled(db, "acme", "kb")
    assert rerank.pool_size(10, cfg) == 30 and rerank.pool_size(80, cfg) == 80
    assert rerank.pool_size(10, None) == 10
    # enabled without a reranker named: off
    rerank.set_collection_reranker(db, "kb", tenant="acme", reset=["reranker_alias"])
    assert rerank.reranker_for(db, "acme", ["kb"]) is None


def test_one_reranker_scores_several_collections(db):
    for name in ("a", "b", "c"):
        make_collection(db, name)
    rerank.register_reranker(db, "voy", "voyage", tenant="acme", secret_ref="K1")
    rerank.register_reranker(db, "coh", "cohere", tenant="acme", secret_ref="K2")
    rerank.set_collection_reranker(db, "a", tenant="acme", alias="voy", enabled=True, rerank_top_n=30)
    rerank.set_collection_reranker(db, "b", tenant="acme", alias="coh", enabled=True, rerank_top_n=80)
    rerank.set_collection_reranker(db, "c", tenant="acme", alias="coh", enabled=False)
    # the same reranker, or only one collection switched on: that one
    assert rerank.reranker_for(db, "acme", ["a", "c"]).alias == "voy"
    both = rerank.set_collection_reranker(db, "c", tenant="acme", alias="coh", enabled=True)
    assert both["rerank_top_n"] == 50
    cfg = rerank.reranker_for(db, "acme", ["b", "c"])
    assert (cfg.alias, cfg.chosen_by, cfg.rerank_top_n) == ("coh", "collection", 80)
    # different rerankers and no default: refused, says why, no reranker runs
    cfg = rerank.reranker_for(db, "acme", ["a", "b"])
    assert not cfg.usable and cfg.provider is None and "no default reranker" in cfg.refused
    assert not rerank.reranking_enabled(db, "acme", ["a", "b"])
    outcome = rerank.rerank_search(cfg, tenant="acme", query="q", pool_texts=DOCS, top_k=5)
    assert outcome.fault == "no_reranker" and not outcome.called
    # with a default: the default scores the whole pool, and the result says which one
    rerank.register_reranker(db, "coh", "cohere", tenant="acme", secret_ref="K2", is_default=True)
    cfg = rerank.reranker_for(db, "acme", ["a", "b"])
    assert (cfg.alias, cfg.chosen_by, cfg.rerank_top_n) == ("coh", "tenant_default", 80)
    said = rerank.rerank_search(cfg, tenant="acme", query="", pool_texts=DOCS, top_k=5)
    assert (said.skip, said.alias, said.chosen_by, said.provider) == (
        "blank_query", "coh", "tenant_default", "cohere")


def test_at_most_one_default_per_tenant(db):
    rerank.register_reranker(db, "one", "voyage", tenant="acme", secret_ref="K", is_default=True)
    rerank.register_reranker(db, "two", "cohere", tenant="acme", secret_ref="K", is_default=True)
    rerank.register_reranker(db, "theirs", "voyage", tenant="other", secret_ref="K", is_default=True)
    defaults = db.execute("select tenant, alias from sift.rerankers where is_default order by 1").fetchall()
    assert defaults == [("acme", "two"), ("other", "theirs")]
    with pytest.raises(psycopg.errors.UniqueViolation):
        db.execute("update sift.rerankers set is_default = true where alias = 'one'")


def test_another_tenants_reranker_is_refused_when_set(db):
    make_collection(db, "kb", tenant="acme")
    rerank.register_reranker(db, "theirs", "voyage", tenant="other", secret_ref="OTHER_KEY")
    with pytest.raises(RerankerNotAllowed) as info:
        rerank.set_collection_reranker(db, "kb", tenant="acme", alias="theirs", enabled=True)
    assert '"other"' in str(info.value) and '"acme"' in str(info.value)
    with pytest.raises(psycopg.Error) as raw:
        db.execute("select sift.set_collection_reranker(collection => 'kb', tenant => 'acme', "
                   "alias => 'theirs')")
    assert raw.value.sqlstate == "SF008"
    with pytest.raises(RerankerNotAllowed, match="no reranker"):
        rerank.set_collection_reranker(db, "kb", tenant="acme", alias="nowhere")
    # and the table itself refuses it (the key includes the tenant)
    with pytest.raises(psycopg.errors.ForeignKeyViolation):
        db.execute("update sift.collections set reranker_alias = 'theirs' where name = 'kb'")


def test_another_tenants_reranker_is_refused_at_run_time(db, servers, caplog):
    # A row that got past the write-time checks (here: with foreign keys switched off,
    # as a bulk restore might do) still cannot make a search bill another tenant.
    server = servers()
    make_collection(db, "kb", tenant="acme")
    rerank.register_reranker(db, "theirs", "tei", tenant="other", base_url=server.url)
    db.execute("set session_replication_role = replica")
    try:
        db.execute("update sift.collections set reranker_alias = 'theirs', rerank_enabled = true "
                   "where name = 'kb'")
    finally:
        db.execute("set session_replication_role = origin")
    cfg = rerank.reranker_for(db, "acme", ["kb"])
    assert cfg.chosen_by == "refused" and cfg.provider is None and cfg.secret_ref is None
    assert '"other"' in cfg.refused and '"acme"' in cfg.refused
    with caplog.at_level(logging.WARNING, logger="pgsift.rerank"):
        outcome = rerank.rerank_search(cfg, tenant="acme", query="q", pool_texts=DOCS, top_k=5)
    assert_fallback(outcome, len(DOCS))
    assert outcome.fault == "not_allowed" and not outcome.called
    assert server.requests == []
    assert "not_allowed" in caplog.text and "other" in caplog.text


def test_a_config_of_another_tenant_is_refused_in_python(servers, caplog):
    server = servers()
    theirs = config("tei", server.url, tenant="other", secret_ref=None)
    with caplog.at_level(logging.WARNING, logger="pgsift.rerank"):
        outcome = rerank.rerank_search(theirs, tenant="acme", query="q", pool_texts=DOCS, top_k=5)
    assert_fallback(outcome, len(DOCS))
    assert outcome.fault == "not_allowed" and server.requests == []
    assert "bill tenant 'other'" in caplog.text


def test_register_reranker_refuses_a_key_in_secret_ref(db):
    key = "pa-Zx81kLmQ0pR7sT2vW9yB"
    with pytest.raises(InvalidArgument) as info:
        rerank.register_reranker(db, "voy", "voyage", tenant="acme", secret_ref=key)
    assert key not in str(info.value)
    mixed = "AbCdEfGhIjKlMnOpQrStUvWxYz0123456789abcd"   # Cohere-shaped
    with pytest.raises(InvalidArgument):
        rerank.register_reranker(db, "coh", "cohere", tenant="acme", secret_ref=mixed)
    with pytest.raises(psycopg.errors.CheckViolation):
        db.execute("insert into sift.rerankers (tenant, alias, provider, model, secret_ref) "
                   "values ('acme', 'x', 'voyage', 'rerank-2', %s)", [key])
    assert rerank.register_reranker(db, "ok", "voyage", tenant="acme", secret_ref="env:PGSIFT_KEY")["alias"] == "ok"


@pytest.mark.parametrize("kwargs, knob", [
    ({"timeout_ms": 10}, "rerank_timeout_ms"),
    ({"deadline_ms": 120000}, "rerank_deadline_ms"),
    ({"max_attempts": 0}, "rerank_attempts"),
    ({"context_chars": -1}, "rerank_context_chars"),
])
def test_reranker_settings_are_range_checked(db, kwargs, knob):
    with pytest.raises(InvalidKnob) as info:
        rerank.register_reranker(db, "voy", "voyage", tenant="acme", secret_ref="K", **kwargs)
    assert info.value.knob == knob


def test_reranker_rows_are_checked(db):
    with pytest.raises(InvalidArgument, match="unknown reranker provider"):
        rerank.register_reranker(db, "x", "openai", tenant="acme", secret_ref="K")
    with pytest.raises(InvalidArgument):   # timeout longer than the deadline
        rerank.register_reranker(db, "x", "voyage", tenant="acme", secret_ref="K",
                                 timeout_ms=5000, deadline_ms=1000)
    with pytest.raises(InvalidArgument):   # a hosted provider needs a key
        rerank.register_reranker(db, "x", "cohere", tenant="acme")
    with pytest.raises(InvalidArgument):   # TEI needs its address
        rerank.register_reranker(db, "x", "tei", tenant="acme")


@pytest.mark.parametrize("top_n", [0, 1001])
def test_rerank_top_n_is_range_checked(db, top_n):
    make_collection(db, "kb")
    with pytest.raises(InvalidKnob) as info:
        rerank.set_collection_reranker(db, "kb", tenant="acme", rerank_top_n=top_n)
    assert info.value.knob == "rerank_top_n"
    with pytest.raises(psycopg.errors.CheckViolation):
        db.execute("update sift.collections set rerank_top_n = %s", [top_n])


def test_drop_reranker_detaches_its_collections(db):
    make_collection(db, "kb")
    rerank.register_reranker(db, "voy", "voyage", tenant="acme", secret_ref="K")
    rerank.set_collection_reranker(db, "kb", tenant="acme", alias="voy", enabled=True)
    with pytest.raises(psycopg.errors.ForeignKeyViolation):
        db.execute("delete from sift.rerankers where alias = 'voy'")
    assert rerank.drop_reranker(db, "voy", tenant="acme") is True
    assert rerank.drop_reranker(db, "voy", tenant="acme") is False
    row = db.execute("select reranker_alias, rerank_enabled from sift.collections where name = 'kb'").fetchone()
    assert row == (None, False)
    assert rerank.reranker_for(db, "acme", "kb") is None


def test_no_table_readable_by_search_holds_a_secret(db, monkeypatch):
    monkeypatch.setenv("PGSIFT_VOYAGE_KEY", "pa-very-secret-value")
    rerank.register_reranker(db, "voy", "voyage", tenant="acme", secret_ref="PGSIFT_VOYAGE_KEY")
    dump = db.execute("select row_to_json(r)::text from sift.rerankers r").fetchall()
    assert "pa-very-secret-value" not in str(dump) and "PGSIFT_VOYAGE_KEY" in str(dump)


# -- the pool's texts: one statement, in pool order, this tenant only --------------------------------

def add_chunks(db, collection: str, tenant: str, rows: list[tuple[str | None, str, list[float]]]) -> list[int]:
    cid = db.execute("select collection_id from sift.collections where name = %s and tenant = %s",
                     [collection, tenant]).fetchone()[0]
    ids = []
    for i, (context, content, vec) in enumerate(rows):
        doc = db.execute("insert into sift.documents (collection_id, source_uri, title) "
                         "values (%s, %s, %s) returning document_id",
                         [cid, f"{collection}-{i}", f"doc {i}"]).fetchone()[0]
        ids.append(db.execute("insert into sift.chunks (document_id, ordinal, content, context, embedding) "
                              "values (%s, 0, %s, %s, %s::vector) returning chunk_id",
                              [doc, content, context, str(vec)]).fetchone()[0])
    db.execute("select sift.refresh_lexical_stats(collection => %s, tenant => %s)", [collection, tenant])
    return ids


def test_pool_texts_in_one_statement(db):
    make_collection(db, "kb")
    make_collection(db, "theirs", tenant="other")
    ids = add_chunks(db, "kb", "acme", [("Refunds", f"text {i}", [1, 0, i]) for i in range(30)])
    (foreign,) = add_chunks(db, "theirs", "other", [(None, "secret text", [1, 0, 0])])
    statements = []
    original = psycopg.Connection.execute

    def counting(self, query, *args, **kwargs):
        statements.append(query)
        return original(self, query, *args, **kwargs)

    pool = list(reversed(ids)) + [foreign]
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(psycopg.Connection, "execute", counting)
        texts = rerank.fetch_pool_texts(db, "acme", pool)
    assert len(statements) == 1
    assert texts[:30] == [f"Refunds\n\ntext {i}" for i in reversed(range(30))]
    assert texts[30] == ""   # another tenant's chunk is never sent


async def test_async_pool_texts_and_reranker_for(db, dsn):
    make_collection(db, "kb")
    ids = add_chunks(db, "kb", "acme", [(None, "alpha", [1, 0, 0]), ("Ctx", "beta", [0, 1, 0])])
    rerank.register_reranker(db, "voy", "voyage", tenant="acme", secret_ref="K")
    rerank.set_collection_reranker(db, "kb", tenant="acme", alias="voy", enabled=True)
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        assert await rerank.afetch_pool_texts(conn, "acme", ids) == ["alpha", "Ctx\n\nbeta"]
        cfg = await rerank.areranker_for(conn, "acme", ["kb"])
        assert cfg.alias == "voy" and await rerank.areranking_enabled(conn, "acme", "kb")


# -- metering ------------------------------------------------------------------------------------

def usage_rows(db):
    return db.execute("select tenant, reranker_alias, provider, model, documents, tokens, search_units, "
                      "latency_ms, attempts, ok, billed, error from sift.rerank_usage order by usage_id").fetchall()


def test_usage_success_is_billed_failure_is_not(db, servers):
    good = servers()
    cfg = config("voyage", good.base_url("voyage"))
    outcome = rerank.rerank_search(cfg, tenant="acme", query="q", pool_texts=DOCS, top_k=5,
                                   resolver=lambda _r: KEY)
    assert rerank.record_usage(db, "acme", outcome) is not None
    bad = servers(fault="500")
    failed = rerank.rerank_search(config("cohere", bad.url), tenant="acme", query="q", pool_texts=DOCS,
                                  top_k=5, resolver=lambda _r: KEY, deadline_s=1.0)
    assert rerank.record_usage(db, "acme", failed) is not None
    skipped = rerank.rerank_search(cfg, tenant="acme", query=" ", pool_texts=DOCS, top_k=5)
    assert rerank.record_usage(db, "acme", skipped) is None   # no call, nothing metered
    (ok_row, failed_row) = usage_rows(db)
    tenant, alias, provider, model, documents, tokens, units, latency, attempts, ok, billed, error = ok_row
    assert (tenant, alias, provider, model, documents) == ("acme", "voyage-main", "voyage", "rerank-2", 8)
    assert tokens == 1 + sum(len(d.split()) for d in DOCS) and units is None
    assert latency > 0 and attempts == 1 and ok and billed and error is None
    tenant, alias, provider, model, documents, tokens, units, latency, attempts, ok, billed, error = failed_row
    assert (provider, ok, billed, tokens, attempts) == ("cohere", False, False, None, 2)
    assert error.startswith("server_error")


def test_partial_and_invalid_calls_are_not_billed(db, servers):
    for fault in ("partial", "nan"):
        server = servers(fault=fault)
        outcome = rerank.rerank_search(config("tei", server.url), tenant="acme", query="q",
                                       pool_texts=DOCS, top_k=5, resolver=lambda _r: KEY)
        rerank.record_usage(db, "acme", outcome)
    rows = usage_rows(db)
    assert [(r[9], r[10]) for r in rows] == [(False, False), (False, False)]
    assert rows[0][11].startswith("partial_ranking") and rows[1][11].startswith("invalid_ranking")


def test_a_failed_call_can_never_be_billed(db):
    with pytest.raises(psycopg.errors.CheckViolation):
        db.execute("insert into sift.rerank_usage (tenant, provider, model, documents, latency_ms, ok, "
                   "billed, error) values ('acme', 'voyage', 'rerank-2', 3, 10, false, true, 'x')")


def test_metering_never_fails_the_search(db, servers, caplog):
    server = servers()
    outcome = rerank.rerank_pool(reranker_for_server("tei", server), "q", None, DOCS)
    db.execute("set default_transaction_read_only = on")   # a hot standby, say
    try:
        with caplog.at_level(logging.WARNING, logger="pgsift.rerank"):
            assert rerank.record_usage(db, "acme", outcome) is None
    finally:
        db.execute("set default_transaction_read_only = off")
    assert "usage not recorded" in caplog.text


async def test_async_metering(db, dsn, servers):
    server = servers()
    cfg = config("cohere", server.url)
    outcome = await rerank.arerank_search(cfg, tenant="acme", query="q", pool_texts=DOCS, top_k=3,
                                          conversation="before", resolver=lambda _r: KEY)
    assert outcome.reranked and outcome.alias == "cohere-main"
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        assert await rerank.arecord_usage(conn, "acme", outcome) is not None
    (row,) = usage_rows(db)
    assert row[2] == "cohere" and row[6] == 1 and row[9] and row[10]


# -- the whole round trip: SQL pool -> rerank -> SQL finalize --------------------------------------

def sql_pool(db, n: int) -> list[int]:
    rows = db.execute("select chunk_id from sift.candidates(collection => 'kb', query_text => 'refund', "
                      "query_embedding => '[1,0,0]'::vector, match_count => %s, tenant => 'acme') "
                      "order by fused_rank", [n]).fetchall()
    return [r[0] for r in rows][:n]


def sql_finalize(db, ids: list[int], scores: list[float] | None, k: int) -> list[tuple[int, float]]:
    return db.execute("select chunk_id, base_score from sift.finalize(collection => 'kb', "
                      "chunk_ids => %s::bigint[], scores => %s::float8[], match_count => %s, "
                      "tenant => 'acme') order by position", [ids, scores, k]).fetchall()


@pytest.fixture
def kb(db):
    make_collection(db, "kb")
    rows = [(f"Section {i}" if i % 2 else None, f"refund policy paragraph {i}", [1, 0.1 * i, 0])
            for i in range(12)]
    return add_chunks(db, "kb", "acme", rows)


@pytest.mark.parametrize("fault", [None, "partial", "500"])
def test_round_trip_through_candidates_and_finalize(db, kb, servers, fault):
    server = servers(fault=fault)
    rerank.register_reranker(db, "tei", "tei", tenant="acme", base_url=server.url, deadline_ms=1000,
                             timeout_ms=500)
    rerank.set_collection_reranker(db, "kb", tenant="acme", alias="tei", enabled=True, rerank_top_n=10)
    cfg = rerank.reranker_for(db, "acme", ["kb"])
    top_k = 4
    ids = sql_pool(db, rerank.pool_size(top_k, cfg))
    assert len(ids) == 10
    texts = rerank.fetch_pool_texts(db, "acme", ids)
    outcome = rerank.rerank_search(cfg, tenant="acme", query="refund", pool_texts=texts, top_k=top_k,
                                   conversation="we talked about returns")
    assert len(server.requests) == (2 if fault == "500" else 1)
    assert server.requests[0].body["texts"] == texts
    assert (outcome.alias, outcome.chosen_by) == ("tei", "collection")
    scores = outcome.finalize_scores()
    hits = sql_finalize(db, ids, scores, top_k)
    assert len(hits) == top_k   # never shrinks
    expected = [ids[i] for i in outcome.order()][:top_k]
    assert [h[0] for h in hits] == expected
    if fault is None:
        assert outcome.reranked and expected == list(reversed(ids))[:top_k]
        by_chunk = outcome.rerank_scores(ids)
        assert [h[1] for h in hits] == pytest.approx([by_chunk[c] for c in expected])
    elif fault == "partial":
        assert outcome.partial and expected == list(reversed(ids))[:top_k]
        # all ten come back, the ranked half first then the remainder in pool order
        everything = sql_finalize(db, ids, scores, 10)
        assert [h[0] for h in everything] == [ids[i] for i in (9, 8, 7, 6, 5, 0, 1, 2, 3, 4)]
    else:
        assert scores is None and expected == ids[:top_k]   # the fused order
