"""Reranking (pgsift.rerankers + sql/80_rerankers.sql): each provider's real client against a
loopback server that speaks its protocol (tests/rerank_servers.py), every fault falling back
without shrinking the pool, the deadline, conversation clipping, the trust rules (secrets
through the operator's tenant-scoped mapping, operator-allowed endpoints, tenancy by the
database), metering, and the SQL round trip through sift.candidates and sift.finalize."""

from __future__ import annotations

import asyncio
import inspect
import json
import logging
import math
import sys
import threading

import pgsift
import psycopg
import pytest
from pgsift import (
    AsyncClient,
    Chunk,
    Client,
    Document,
    InvalidArgument,
    InvalidKnob,
    PermissionDenied,
    RerankerConfig,
    RerankerNotAllowed,
    TenantError,
    calls,
    rerankers,
)
from pgsift.rerankers import RerankOutcome
from pgsift.schema import migration_files, with_vector_schema
from rerank_servers import RerankServer, closed_port, import_providers, keyword_scorer, loopback_only, reverse_scorer

PROVIDERS = ("voyage", "cohere", "tei")
MODELS = {"voyage": "rerank-2", "cohere": "rerank-v3.5", "tei": "bge-reranker"}
KEY = "test-key-123"
ENV_KEY = "PGSIFT_TEST_KEY"
DOCS = [f"passage number {i} about refunds" for i in range(8)]
# Where the loopback servers listen: the endpoint a test maps a key for.
LOOPBACK = ["http://127.0.0.1:"]


@pytest.fixture(scope="module", autouse=True)
def _providers_imported():
    import_providers()


@pytest.fixture(autouse=True)
def _loopback_only(monkeypatch):
    loopback_only(monkeypatch)
    monkeypatch.setenv(ENV_KEY, KEY)
    rerankers.clear_reranker_cache()
    yield
    rerankers.clear_reranker_cache()


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


def config(provider: str, base_url: str | None, **kw) -> RerankerConfig:
    """A row of sift.reranker_for as the operator would have it: the key mapped to ENV_KEY."""
    kw.setdefault("tenant", "acme")
    kw.setdefault("alias", f"{provider}-main")
    kw.setdefault("model", MODELS[provider])
    kw.setdefault("secret_ref", "key")
    kw.setdefault("secret_source", f"env:{ENV_KEY}" if kw["secret_ref"] else None)
    kw.setdefault("chosen_by", "collection")
    return RerankerConfig(provider=provider, base_url=base_url, **kw)


def reranker_for_server(provider: str, server: RerankServer, **kw):
    """The provider's implementation (its real client library) pointed at the server."""
    return rerankers.IMPLEMENTATIONS[provider](MODELS[provider], api_key=KEY, base_url=server.base_url(provider), **kw)


def assert_fallback(outcome: RerankOutcome, n: int) -> None:
    """Not reranked, says why, and the pool keeps every candidate in its order."""
    assert outcome.reranked is False
    assert outcome.reason
    assert len(outcome.scores) == n
    assert outcome.order() == list(range(n))
    assert outcome.finalize_scores() is None


@pytest.fixture
def operator(db):
    """The operator's side: map a tenant's secret_ref (for a provider, and the loopback
    servers that stand in for its endpoint), allow an endpoint (superuser)."""

    class Operator:
        @staticmethod
        def map_secret(tenant: str, ref: str, source: str, provider: str = "voyage",
                       endpoints: list[str] | None = LOOPBACK) -> None:
            db.execute("select sift.map_secret(tenant => %s, secret_ref => %s, source => %s, provider => %s, "
                       "endpoints => %s::text[])", [tenant, ref, source, provider, endpoints])

        @staticmethod
        def allow(prefix: str = "http://127.0.0.1:", tenant: str | None = None) -> None:
            db.execute("select sift.allow_endpoint(url_prefix => %s, tenant => %s)", [prefix, tenant])

    return Operator()


@pytest.fixture
def acme(db, operator) -> Client:
    return Client(db, tenant="acme")


# -- text helpers ------------------------------------------------------------------------

def test_build_query_keeps_the_tail_of_the_conversation_exactly():
    conversation = "".join(chr(ord("a") + i % 26) for i in range(5000))
    query = "how long do refunds take?"
    built = rerankers.build_query(query, conversation, limit=1500)
    assert built == conversation[-1500:] + "\n\n" + query
    assert len(built) == 1500 + 2 + len(query)
    assert rerankers.build_query(query, conversation[:100], limit=1500) == conversation[:100] + "\n\n" + query
    # the query itself is never clipped, however long
    long_query = "q" * 4000
    assert rerankers.build_query(long_query, conversation, limit=1500).endswith("\n\n" + long_query)
    assert rerankers.build_query(long_query, None) == long_query
    assert rerankers.build_query(query, "   ") == query
    assert rerankers.build_query(query, conversation, limit=0) == query
    turns = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    assert rerankers.build_query(query, turns, limit=10) == "assistant: hello"[-10:] + "\n\n" + query


def test_conversation_reaches_only_the_rerankers_query(servers):
    server = servers()
    conversation = "x" * 3000
    outcome = rerankers.rerank_pool(reranker_for_server("tei", server), "refund window", conversation,
                                    DOCS, context_chars=1500)
    assert outcome.reranked
    sent = server.requests[0].body
    assert sent["query"] == "x" * 1500 + "\n\nrefund window"
    assert sent["texts"] == DOCS   # the documents are untouched


def test_contextualize_matches_its_sql_twin(db):
    cases = [("Handbook > Refunds", "Five days."), (None, "Five days."), ("  ", "Five days."), ("", "x")]
    for context, text in cases:
        sql = db.execute("select sift.contextualize(%s::text, %s::text)", [context, text]).fetchone()[0]
        assert sql == rerankers.contextualize(context, text)
    assert rerankers.contextualize("Handbook", "Five days.") == "Handbook\n\nFive days."


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
    with pytest.raises(rerankers.InvalidRanking, match=problem.replace("(", r"\(").replace(")", r"\)")):
        rerankers.validate(ranking, 8)


def test_validate_accepts_pairs_and_provider_dicts():
    assert rerankers.validate([(2, 0.5), (0, 1)], 3) == [(2, 0.5), (0, 1.0)]
    assert rerankers.validate([{"index": 1, "relevance_score": 0.3}, {"index": 0, "score": 0.1}], 2) == [
        (1, 0.3), (0, 0.1)]
    assert rerankers.validate([], 5) == []


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
    outcome = rerankers.rerank_pool(reranker_for_server("voyage", server), "refund window", None, DOCS)
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
    outcome = rerankers.rerank_pool(reranker_for_server("cohere", server), "refund window", None, DOCS)
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
    outcome = rerankers.rerank_pool(reranker_for_server("tei", server), "refund window", None, DOCS)
    assert outcome.reranked
    (req,) = server.requests
    assert req.path == "/rerank"
    assert req.headers["authorization"] == f"Bearer {KEY}"
    assert req.body == {"query": "refund window", "texts": DOCS, "truncate": True, "raw_scores": False,
                        "return_text": False}
    assert outcome.order() == list(reversed(range(len(DOCS))))
    assert outcome.tokens == 2 + sum(len(d.split()) for d in DOCS)


def test_tei_without_a_secret_sends_no_authorization(servers):
    server = servers()
    reranker = rerankers.build_reranker(config("tei", server.url, secret_ref=None))
    assert rerankers.rerank_pool(reranker, "q", None, DOCS).reranked
    assert "authorization" not in server.requests[0].headers


@pytest.mark.parametrize("provider", PROVIDERS)
def test_one_request_for_the_whole_pool(servers, provider):
    # No N+1: a 40-candidate pool is one HTTP request, whatever the provider.
    server = servers()
    pool = [f"candidate {i}" for i in range(40)]
    outcome = rerankers.rerank_pool(reranker_for_server(provider, server), "q", None, pool)
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
    # Short timeouts for the slow fault only, which must meet them; an answer that comes at
    # once gets seconds, so a loaded machine never turns a 429 into a timeout (it did, at
    # 0.25 s an attempt, beside a benchmark).
    deadline_s, attempt_s = (0.6, 0.25) if fault == "slow" else (8.0, 4.0)
    with caplog.at_level(logging.WARNING, logger="pgsift.rerank"):
        outcome = rerankers.rerank_pool(reranker_for_server(provider, server), "q", None, DOCS,
                                        deadline_s=deadline_s, attempt_timeout_s=attempt_s, max_attempts=2)
    assert_fallback(outcome, len(DOCS))
    assert outcome.fault == EXPECTED_FAULT[fault], outcome.reason
    assert outcome.called and outcome.partial is False
    assert any(EXPECTED_FAULT[fault] in r.getMessage() for r in caplog.records)
    # timeouts, 429 and 5xx are retried within the deadline; nothing else is
    retried = EXPECTED_FAULT[fault] in ("timeout", "rate_limited", "server_error")
    assert len(server.requests) == outcome.attempts
    if fault == "slow":   # the second attempt gets what the first left of the deadline, if enough
        assert outcome.attempts in (1, 2)
        assert server.holding == outcome.attempts   # each cut off while the server still held it
    else:
        assert outcome.attempts == (2 if retried else 1)


# -- redirects: never followed -------------------------------------------------------------------

def redirecting(servers, provider: str, fault: str) -> tuple[RerankServer, RerankServer]:
    """A server on another host name (localhost) that speaks every protocol, and the allowed
    endpoint (127.0.0.1) that answers each request with a redirect to it."""
    target = servers()
    origin = servers(fault=fault, redirect_to=f"http://localhost:{target.port}")
    return origin, target


def assert_redirect_refused(outcome: RerankOutcome, target: RerankServer, fault: str) -> None:
    assert_fallback(outcome, len(DOCS))
    assert outcome.fault == "redirected" and outcome.called and outcome.attempts == 1   # not retried
    assert f"HTTP {fault}" in outcome.reason and "localhost" in outcome.reason
    assert target.requests == []   # nothing reached the target: no query, no texts, no key


@pytest.mark.parametrize("fault", ["307", "302", "301", "308"])
@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_redirect_is_never_followed(servers, provider, fault, caplog):
    origin, target = redirecting(servers, provider, fault)
    with caplog.at_level(logging.WARNING, logger="pgsift.rerank"):
        outcome = rerankers.rerank_pool(reranker_for_server(provider, origin), "q", None, DOCS, deadline_s=4.0,
                                        max_attempts=2)
    assert_redirect_refused(outcome, target, fault)
    assert len(origin.requests) == 1 and origin.requests[0].headers["authorization"] == f"Bearer {KEY}"
    assert "redirected" in caplog.text and KEY not in caplog.text


@pytest.mark.parametrize("fault", ["307", "302"])
@pytest.mark.parametrize("provider", PROVIDERS)
async def test_async_a_redirect_is_never_followed(servers, provider, fault):
    origin, target = redirecting(servers, provider, fault)
    outcome = await rerankers.arerank_pool(reranker_for_server(provider, origin), "q", None, DOCS, deadline_s=4.0)
    assert_redirect_refused(outcome, target, fault)
    assert len(origin.requests) == 1


def test_voyage_puts_the_threads_own_session_back(servers):
    # The sync Voyage client sends through voyageai's per-thread requests session: for each
    # call that is one of ours, which follows no redirect, and the thread's own comes back.
    import requests
    from voyageai.api_resources import api_requestor

    context = api_requestor._thread_context
    saved = dict(vars(context))
    mine = context.session = requests.Session()
    try:
        origin, target = redirecting(servers, "voyage", "307")
        with pytest.raises(rerankers.RerankCallError) as refused:
            reranker_for_server("voyage", origin).rerank("q", DOCS)   # in this thread
        assert refused.value.fault == "redirected" and target.requests == []
        assert context.session is mine
        assert len(reranker_for_server("voyage", servers()).rerank("q", DOCS)) == len(DOCS)
        assert context.session is mine
    finally:
        vars(context).clear()
        vars(context).update(saved)


def test_a_search_whose_endpoint_redirects_keeps_its_order(two_tenants, servers, caplog):
    acme = two_tenants["acme"]
    origin, target = redirecting(servers, "voyage", "307")
    use(acme, origin, "voyage")
    plain = acme.search("kb", "refund", embedding=[1, 0, 0], top_k=5, rerank=False)
    with caplog.at_level(logging.WARNING, logger="pgsift.rerank"):
        result = acme.search("kb", "refund", embedding=[1, 0, 0], top_k=5)
    assert [h.chunk_id for h in result] == [h.chunk_id for h in plain]   # the fused order, whole
    assert not result.reranked and result.rerank.fault == "redirected" and "redirected" in caplog.text
    assert len(origin.requests) == 1 and target.requests == []


@pytest.mark.parametrize("provider", PROVIDERS)
def test_connection_refused_falls_back(provider):
    port = closed_port()
    base = f"http://127.0.0.1:{port}" + ("/v1" if provider == "voyage" else "")
    reranker = rerankers.IMPLEMENTATIONS[provider](MODELS[provider], api_key=KEY, base_url=base)
    outcome = rerankers.rerank_pool(reranker, "q", None, DOCS, deadline_s=1.0, attempt_timeout_s=0.4)
    assert_fallback(outcome, len(DOCS))
    assert outcome.fault == "connection_error" and outcome.attempts == 2   # retried once


@pytest.mark.parametrize("provider", PROVIDERS)
def test_partial_ranking_keeps_the_remainder_in_pool_order(servers, provider):
    server = servers(fault="partial")
    outcome = rerankers.rerank_pool(reranker_for_server(provider, server), "q", None, DOCS)
    assert outcome.reranked is False and outcome.partial is True
    assert outcome.fault == "partial_ranking" and "4 of 8" in outcome.reason
    assert len(outcome.scores) == len(DOCS)
    # the ranked half (the server's best: 7, 6, 5, 4) leads, the rest follows in pool order
    assert outcome.order() == [7, 6, 5, 4, 0, 1, 2, 3]


@pytest.mark.parametrize("provider", PROVIDERS)
def test_an_empty_ranking_changes_nothing(servers, provider):
    server = servers(fault="empty")
    outcome = rerankers.rerank_pool(reranker_for_server(provider, server), "q", None, DOCS)
    assert_fallback(outcome, len(DOCS))
    assert outcome.partial and outcome.fault == "partial_ranking" and len(server.requests) == 1


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_retry_that_succeeds_reranks(servers, provider):
    server = servers(fault="503", fail_first=1)
    outcome = rerankers.rerank_pool(reranker_for_server(provider, server), "q", None, DOCS,
                                    deadline_s=2.0, max_attempts=2)
    assert outcome.reranked and outcome.attempts == 2 and len(server.requests) == 2


@pytest.mark.parametrize("provider", PROVIDERS)
def test_a_client_error_is_not_retried(servers, provider):
    server = servers(fault="400")
    outcome = rerankers.rerank_pool(reranker_for_server(provider, server), "q", None, DOCS, max_attempts=5)
    assert outcome.fault == "client_error" and len(server.requests) == 1


@pytest.mark.parametrize("provider", PROVIDERS)
def test_retry_after_beyond_the_deadline_is_not_waited_for(servers, provider):
    # A 429 asking for 30 s: no second attempt fits in the deadline, so none is made, and the
    # search does not sit out the deadline waiting.
    server = servers(fault="429", retry_after=30)
    outcome = rerankers.rerank_pool(reranker_for_server(provider, server), "q", None, DOCS,
                                    deadline_s=1.0, max_attempts=3)
    assert outcome.fault == "rate_limited" and outcome.attempts == 1 and len(server.requests) == 1
    assert "left no time for another" in outcome.reason


# -- the deadline ------------------------------------------------------------------------------

@pytest.mark.parametrize("provider", PROVIDERS)
def test_deadline_bounds_every_retry(servers, provider):
    server = servers(fault="slow", delay=10.0)
    deadline = 0.6
    reranker = reranker_for_server(provider, server)   # built first: the clock is the pool's
    outcome = rerankers.rerank_pool(reranker, "q", None, DOCS,
                                    deadline_s=deadline, attempt_timeout_s=10.0, max_attempts=5)
    assert outcome.fault == "timeout" and len(server.requests) == 1   # the attempt used it all
    assert server.holding == 1    # back while the server still held it: the deadline cut it off


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_async_deadline_bounds_every_retry(servers, provider):
    server = servers(fault="slow", delay=10.0)
    reranker = reranker_for_server(provider, server)   # built first: the clock is the pool's
    outcome = await rerankers.arerank_pool(reranker, "q", None, DOCS,
                                           deadline_s=0.6, attempt_timeout_s=10.0, max_attempts=5)
    # one attempt used it all (none at all when building the loop's HTTP client took it), and
    # came back while the server still held it
    assert outcome.fault == "timeout" and len(server.requests) <= 1 and outcome.attempts <= 1
    assert server.holding == len(server.requests)


class Stubborn:
    """A reranker that ignores timeouts: only the outside cut-off can stop waiting for it."""

    provider = "custom"
    model = "stubborn"

    def __init__(self):
        self.release = threading.Event()
        self.answered = False     # whether a call ever came back (the engine must not wait for it)

    def rerank(self, query, documents, top_n=None):
        self.release.wait(10)
        self.answered = True
        return [(0, 1.0), (1, 0.5)]

    async def arerank(self, query, documents, top_n=None):
        await asyncio.sleep(10)
        self.answered = True
        return [(0, 1.0), (1, 0.5)]


class Swallower:
    """An async client that swallows its cancellation and goes on until told to stop."""

    provider = "custom"
    model = "swallower"

    def __init__(self):
        self.stop = False
        self.cancelled = 0

    def rerank(self, query, documents, top_n=None):
        raise AssertionError("the async engine uses arerank")

    async def arerank(self, query, documents, top_n=None):
        while not self.stop:
            try:
                await asyncio.sleep(0.05)
            except asyncio.CancelledError:
                self.cancelled += 1
        return [(0, 1.0), (1, 0.5)]


def test_deadline_holds_even_when_the_client_ignores_its_timeout():
    stubborn = Stubborn()
    try:
        outcome = rerankers.rerank_pool(stubborn, "q", None, ["a", "b"], deadline_s=0.5, max_attempts=3)
        assert_fallback(outcome, 2)
        assert outcome.fault == "timeout" and not stubborn.answered   # back before the client was
    finally:
        stubborn.release.set()


async def test_async_deadline_holds_even_when_the_client_ignores_its_timeout():
    stubborn = Stubborn()
    outcome = await rerankers.arerank_pool(stubborn, "q", None, ["a", "b"], deadline_s=0.5, max_attempts=3)
    assert_fallback(outcome, 2)
    assert outcome.fault == "timeout" and not stubborn.answered


async def test_async_deadline_holds_even_when_the_client_swallows_its_cancellation():
    swallower = Swallower()
    try:
        outcome = await rerankers.arerank_pool(swallower, "q", None, ["a", "b"], deadline_s=0.5, max_attempts=1)
        assert_fallback(outcome, 2)
        assert outcome.fault == "timeout" and not swallower.stop   # back while it was still going
        await asyncio.sleep(0.1)
        assert swallower.cancelled >= 1   # it was asked to stop, and not waited for
    finally:
        swallower.stop = True
        await asyncio.sleep(0.1)


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
    outcome = rerankers.rerank_pool(reranker_for_server("voyage", server), query, None, pool, top_n)
    assert outcome.skip == skip and outcome.fault is None and not outcome.called
    assert len(outcome.scores) == len(pool) and outcome.order() == list(range(len(pool)))
    assert server.requests == []


@pytest.mark.parametrize("top_k, query, skip", [(0, "q", "top_k"), (5, " ", "blank_query")])
def test_rerank_search_makes_no_call_when_nothing_is_asked(servers, top_k, query, skip):
    server = servers()
    outcome = rerankers.rerank_search(config("tei", server.url), query=query, pool_texts=DOCS, top_k=top_k)
    assert outcome.skip == skip and not outcome.called and server.requests == []
    assert (outcome.alias, outcome.chosen_by, outcome.provider) == ("tei-main", "collection", "tei")


# -- async ------------------------------------------------------------------------------------

@pytest.mark.parametrize("provider", PROVIDERS)
async def test_async_path_reranks(servers, provider):
    server = servers()
    reranker = reranker_for_server(provider, server)
    outcome = await rerankers.arerank_pool(reranker, "refund window", "earlier turn", DOCS)
    assert outcome.reranked and outcome.order() == list(reversed(range(len(DOCS))))
    body = server.requests[0].body
    assert body["query"] == "earlier turn\n\nrefund window"
    # the same reranker serves a second search (clients are built once)
    again = await rerankers.arerank_pool(reranker, "q", None, DOCS)
    assert again.reranked and len(server.requests) == 2


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("fault", ["500", "nan", "partial", "slow", "400", "malformed"])
async def test_async_faults_fall_back(servers, provider, fault):
    server = servers(fault=fault, delay=3.0)
    # Short timeouts only where the fault is the delay: a loaded machine may take longer than
    # 0.25 s to answer the first async request, which would read as a timeout.
    deadline, attempt = (0.6, 0.25) if fault == "slow" else (4.0, 2.0)
    outcome = await rerankers.arerank_pool(reranker_for_server(provider, server), "q", None, DOCS,
                                           deadline_s=deadline, attempt_timeout_s=attempt)
    assert outcome.reranked is False and len(outcome.scores) == len(DOCS)
    assert outcome.fault == {"500": "server_error", "nan": "invalid_ranking", "partial": "partial_ranking",
                             "slow": "timeout", "400": "client_error", "malformed": "malformed_response"}[fault]


@pytest.mark.parametrize("provider", PROVIDERS)
async def test_async_connection_refused(provider):
    base = f"http://127.0.0.1:{closed_port()}" + ("/v1" if provider == "voyage" else "")
    reranker = rerankers.IMPLEMENTATIONS[provider](MODELS[provider], api_key=KEY, base_url=base)
    outcome = await rerankers.arerank_pool(reranker, "q", None, DOCS, deadline_s=1.0, attempt_timeout_s=0.3)
    assert_fallback(outcome, len(DOCS))
    assert outcome.fault == "connection_error"


async def test_async_rerank_search_and_retry(servers):
    server = servers(fault="500", fail_first=1)
    outcome = await rerankers.arerank_search(config("cohere", server.url), query="q", pool_texts=DOCS, top_k=3,
                                             conversation="before")
    assert outcome.reranked and outcome.attempts == 2 and outcome.alias == "cohere-main"
    assert server.requests[-1].body["query"] == "before\n\nq"


# -- building rerankers: keys through the operator's mapping, once per setting -----------------

def test_the_key_comes_from_the_mapped_environment_variable(servers, monkeypatch):
    server = servers()
    monkeypatch.setenv("PGSIFT_TEST_VOYAGE_KEY", "pa-from-env")
    cfg = config("voyage", server.base_url("voyage"), secret_source="env:PGSIFT_TEST_VOYAGE_KEY")
    outcome = rerankers.rerank_search(cfg, query="q", pool_texts=DOCS, top_k=5)
    assert outcome.reranked
    assert server.requests[0].headers["authorization"] == "Bearer pa-from-env"


@pytest.mark.parametrize("provider", PROVIDERS)
def test_an_unmapped_secret_ref_falls_back_without_a_call(servers, provider, caplog):
    server = servers()
    cfg = config(provider, server.base_url(provider), secret_ref="voyage-key", secret_source=None)
    with caplog.at_level(logging.WARNING, logger="pgsift.rerank"):
        outcome = rerankers.rerank_search(cfg, query="q", pool_texts=DOCS, top_k=5)
    assert_fallback(outcome, len(DOCS))
    assert outcome.fault == "unavailable" and "sift.map_secret('acme', 'voyage-key'" in outcome.reason
    assert not outcome.called and server.requests == []
    assert KEY not in caplog.text and "unavailable" in caplog.text


def test_a_mapped_variable_that_is_unset_falls_back(servers, monkeypatch, caplog):
    server = servers()
    monkeypatch.delenv("PGSIFT_TEST_UNSET_KEY", raising=False)
    cfg = config("cohere", server.url, secret_source="env:PGSIFT_TEST_UNSET_KEY")
    outcome = rerankers.rerank_search(cfg, query="q", pool_texts=DOCS, top_k=5)
    assert_fallback(outcome, len(DOCS))
    assert outcome.fault == "unavailable" and "env:PGSIFT_TEST_UNSET_KEY" in outcome.reason
    assert server.requests == []


@pytest.mark.parametrize("provider, module", [("voyage", "voyageai"), ("cohere", "cohere"), ("tei", "httpx")])
def test_a_missing_client_package_falls_back(servers, monkeypatch, provider, module):
    server = servers()
    monkeypatch.setitem(sys.modules, module, None)   # import fails as if not installed
    outcome = rerankers.rerank_search(config(provider, server.base_url(provider)), query="q", pool_texts=DOCS,
                                      top_k=3)
    assert_fallback(outcome, len(DOCS))
    assert outcome.fault == "unavailable" and "pip install 'pgsift[rerank]'" in outcome.reason
    assert server.requests == []


def test_reranker_is_built_once_per_setting_and_key(servers, monkeypatch):
    server = servers()
    cfg = config("voyage", server.base_url("voyage"))
    first = rerankers.build_reranker(cfg)
    assert rerankers.build_reranker(cfg) is first
    assert rerankers.build_reranker(config("voyage", server.base_url("voyage"), alias="same-settings")) is first
    assert rerankers.build_reranker(config("voyage", server.base_url("voyage"), timeout_ms=900)) is not first
    monkeypatch.setenv(ENV_KEY, "rotated")   # a rotated key builds a new client
    rotated = rerankers.build_reranker(cfg)
    assert rotated is not first
    assert rerankers.rerank_pool(rotated, "q", None, DOCS).reranked
    assert server.requests[0].headers["authorization"] == "Bearer rotated"


def test_other_schemes_go_to_the_applications_resolver_with_the_source_only(servers):
    server = servers()
    cfg = config("tei", server.url, secret_ref="tei", secret_source="vault:kv/acme/tei")
    seen = []
    outcome = rerankers.rerank_search(cfg, query="q", pool_texts=DOCS, top_k=3,
                                      resolver=lambda source: seen.append(source) or "from-vault")
    assert outcome.reranked and seen == ["vault:kv/acme/tei"]
    assert server.requests[0].headers["authorization"] == "Bearer from-vault"


@pytest.mark.parametrize("resolver, why", [
    (None, "pass a resolver"),
    (lambda source: None, "is not set"),
    (lambda source: 42, "is not a string"),
    (lambda source: (_ for _ in ()).throw(RuntimeError("vault says: token s3cr3t expired")), "RuntimeError"),
])
def test_a_resolver_that_gives_no_key_falls_back(servers, resolver, why):
    server = servers()
    cfg = config("tei", server.url, secret_ref="tei", secret_source="vault:kv/acme/tei")
    outcome = rerankers.rerank_search(cfg, query="q", pool_texts=DOCS, top_k=3, resolver=resolver)
    assert_fallback(outcome, len(DOCS))
    assert outcome.fault == "unavailable" and why in outcome.reason and "s3cr3t" not in outcome.reason
    assert server.requests == []


def test_a_base_url_with_credentials_in_it_is_never_called(servers):
    # http://127.0.0.1:1@host/ sends to host (1 is a password): whatever an allow-list said
    # about "http://127.0.0.1:", such a URL is refused before any request.
    server = servers()
    cfg = config("tei", f"http://127.0.0.1:1@127.0.0.1:{server.port}")
    outcome = rerankers.rerank_search(cfg, query="q", pool_texts=DOCS, top_k=3)
    assert_fallback(outcome, len(DOCS))
    assert outcome.fault == "not_allowed" and "credentials" in outcome.reason
    assert server.requests == []


# -- test_connection ----------------------------------------------------------------------------

@pytest.mark.parametrize("provider", PROVIDERS)
def test_connection_reports_order_latency_and_range(servers, provider):
    server = servers(scorer=keyword_scorer({"Refunds reach": 0.93, "return an item": 0.41}, 0.02))
    check = rerankers.test_connection(reranker_for_server(provider, server))
    assert check.ok and check.order_ok
    assert check.order == ("relevant", "near_miss", "irrelevant")
    assert (check.min_score, check.max_score) == (pytest.approx(0.02), pytest.approx(0.93))
    assert check.latency_ms > 0 and check.error is None
    assert len(server.requests) == 1


def test_connection_notices_a_wrong_order_and_a_failure(servers):
    wrong = rerankers.test_connection(reranker_for_server("tei", servers(scorer=reverse_scorer)))
    assert wrong.ok and not wrong.order_ok
    broken = rerankers.test_connection(reranker_for_server("tei", servers(fault="500")), timeout_s=1.0)
    assert not broken.ok and not broken.order_ok and "server_error" in broken.error


async def test_async_connection_check(servers):
    server = servers(scorer=keyword_scorer({"Refunds reach": 0.9, "return an item": 0.5}, 0.1))
    check = await rerankers.atest_connection(reranker_for_server("cohere", server))
    assert check.ok and check.order_ok


# -- SQL: the provider list, registering, choosing, refusing -------------------------------------

def test_the_provider_registry_is_defined_once(db):
    rows = db.execute("select provider, default_model, needs_secret, needs_base_url "
                      "from sift.reranker_providers").fetchall()
    assert {r[0] for r in rows} == set(rerankers.IMPLEMENTATIONS)
    for provider, default_model, needs_secret, needs_base_url in rows:
        implementation = rerankers.IMPLEMENTATIONS[provider]
        assert implementation.provider == provider
        params = inspect.signature(implementation).parameters
        assert params["model"].default == default_model
        # what SQL requires at registration is what the implementation cannot do without
        assert (params["base_url"].default is inspect.Parameter.empty) == needs_base_url
        assert (params["api_key"].default is inspect.Parameter.empty) == needs_secret


def test_reranker_for_a_collection(acme, operator):
    acme.create_collection("kb", embedding_dims=3)
    assert acme.reranker_for("kb") is None   # off by default
    acme.register_reranker("voy", "voyage", secret_ref="voyage")
    assert acme.reranker_for(["kb"]) is None   # named nowhere yet
    acme.alter_collection("kb", reranker="voy")
    assert acme.reranker_for(["kb"]) is None   # named but not switched on
    assert not acme.reranking_enabled(["kb"])
    col = acme.alter_collection("kb", rerank=True, rerank_top_n=30)
    assert (col.reranker, col.knobs["rerank"], col.knobs["rerank_top_n"]) == ("voy", True, 30)
    cfg = acme.reranker_for(["kb"])
    assert cfg.usable and cfg.alias == "voy" and cfg.provider == "voyage" and cfg.model == "rerank-2"
    assert (cfg.tenant, cfg.secret_ref, cfg.chosen_by, cfg.rerank_top_n) == ("acme", "voyage", "collection", 30)
    assert (cfg.timeout_ms, cfg.deadline_ms, cfg.max_attempts, cfg.context_chars) == (2000, 3000, 2, 1500)
    assert cfg.secret_source is None   # not mapped yet
    operator.map_secret("acme", "voyage", "env:PGSIFT_ACME_VOYAGE")
    assert acme.reranker_for("kb").secret_source == "env:PGSIFT_ACME_VOYAGE"
    assert acme.reranking_enabled("kb")
    assert calls.pool_size(10, cfg) == 30 and calls.pool_size(80, cfg) == 80 and calls.pool_size(10, None) == 10
    # per call: switched off, or another pool size
    assert acme.reranker_for("kb", rerank=False) is None and not acme.reranking_enabled("kb", rerank=False)
    assert acme.reranker_for("kb", rerank_top_n=70).rerank_top_n == 70
    # named (calibration): whether or not the collection switched it on
    named = acme.reranker_for("kb", reranker="voy", rerank=False)
    assert (named.alias, named.chosen_by) == ("voy", "named")
    # switched on without a reranker named: off
    acme.alter_collection("kb", reset=["reranker"])
    assert acme.reranker_for(["kb"]) is None


def test_one_reranker_scores_several_collections(acme, operator):
    for name in ("a", "b", "c"):
        acme.create_collection(name, embedding_dims=3)
    acme.register_reranker("voy", "voyage", secret_ref="k1")
    acme.register_reranker("coh", "cohere", secret_ref="k2")
    acme.alter_collection("a", reranker="voy", rerank=True, rerank_top_n=30)
    acme.alter_collection("b", reranker="coh", rerank=True, rerank_top_n=80)
    acme.alter_collection("c", reranker="coh", rerank=False)
    # the same reranker, or only one collection switched on: that one
    assert acme.reranker_for(["a", "c"]).alias == "voy"
    acme.alter_collection("c", rerank=True)
    cfg = acme.reranker_for(["b", "c"])
    assert (cfg.alias, cfg.chosen_by, cfg.rerank_top_n) == ("coh", "collection", 80)
    # different rerankers and no default: refused, says why, no reranker runs
    cfg = acme.reranker_for(["a", "b"])
    assert not cfg.usable and cfg.provider is None and "no default reranker" in cfg.refused
    assert not acme.reranking_enabled(["a", "b"])
    outcome = rerankers.rerank_search(cfg, query="q", pool_texts=DOCS, top_k=5)
    assert outcome.fault == "no_reranker" and not outcome.called
    # with a default: the default scores the whole pool, and the result says which one
    acme.register_reranker("coh", "cohere", secret_ref="k2", is_default=True)
    cfg = acme.reranker_for(["a", "b"])
    assert (cfg.alias, cfg.chosen_by, cfg.rerank_top_n) == ("coh", "tenant_default", 80)
    said = rerankers.rerank_search(cfg, query="", pool_texts=DOCS, top_k=5)
    assert (said.skip, said.alias, said.chosen_by, said.provider) == ("blank_query", "coh", "tenant_default", "cohere")


def test_at_most_one_default_per_tenant(db, acme):
    acme.register_reranker("one", "voyage", secret_ref="k", is_default=True)
    acme.register_reranker("two", "cohere", secret_ref="k", is_default=True)
    Client(db, tenant="other").register_reranker("theirs", "voyage", secret_ref="k", is_default=True)
    defaults = db.execute("select tenant, alias from sift.rerankers where is_default order by 1").fetchall()
    assert defaults == [("acme", "two"), ("other", "theirs")]
    with pytest.raises(psycopg.errors.UniqueViolation):
        db.execute("update sift.rerankers set is_default = true where alias = 'one'")


def test_register_replaces_every_setting(acme):
    first = acme.register_reranker("voy", "voyage", secret_ref="k", timeout_ms=500, deadline_ms=900, is_default=True)
    assert (first["tenant"], first["model"], first["timeout_ms"], first["is_default"]) == (
        "acme", "rerank-2", 500, True)
    again = acme.register_reranker("voy", "cohere", secret_ref="k2")
    assert again["reranker_id"] == first["reranker_id"]
    assert (again["provider"], again["model"], again["secret_ref"], again["timeout_ms"], again["deadline_ms"],
            again["is_default"]) == ("cohere", "rerank-v3.5", "k2", 2000, 3000, False)
    with pytest.raises(InvalidArgument, match="unknown reranker setting"):
        acme.register_reranker("x", "voyage", secret_ref="k", api_key="pa-123")


def test_another_tenants_reranker_is_refused_when_set(db, acme):
    acme.create_collection("kb", embedding_dims=3)
    Client(db, tenant="other").register_reranker("theirs", "voyage", secret_ref="k")
    with pytest.raises(RerankerNotAllowed) as info:
        acme.alter_collection("kb", reranker="theirs", rerank=True)
    assert '"theirs"' in str(info.value) and '"acme"' in str(info.value)
    with pytest.raises(RerankerNotAllowed, match="nowhere"):
        acme.alter_collection("kb", reranker="nowhere")
    with pytest.raises(RerankerNotAllowed):
        acme.reranker_for("kb", reranker="theirs")
    # and the table itself refuses it (the key includes the tenant)
    with pytest.raises(psycopg.errors.ForeignKeyViolation):
        db.execute("update sift.collections set reranker_alias = 'theirs' where name = 'kb'")


def test_another_tenants_reranker_is_refused_at_run_time(db, acme, operator, servers, caplog):
    # A row that got past the write-time checks (here: with foreign keys switched off,
    # as a bulk restore might do) still cannot make a search call another tenant's reranker.
    server = servers()
    operator.allow()
    acme.create_collection("kb", embedding_dims=3)
    Client(db, tenant="other").register_reranker("theirs", "tei", base_url=server.url)
    db.execute("set session_replication_role = replica")
    try:
        db.execute("update sift.collections set reranker_alias = 'theirs', knobs = knobs || '{\"rerank\": true}' "
                   "where name = 'kb'")
    finally:
        db.execute("set session_replication_role = origin")
    cfg = acme.reranker_for(["kb"])
    assert cfg.chosen_by == "refused" and cfg.provider is None and cfg.secret_ref is None and cfg.base_url is None
    assert '"theirs"' in cfg.refused and '"acme"' in cfg.refused
    with caplog.at_level(logging.WARNING, logger="pgsift.rerank"):
        outcome = rerankers.rerank_search(cfg, query="q", pool_texts=DOCS, top_k=5)
    assert_fallback(outcome, len(DOCS))
    assert outcome.fault == "not_allowed" and not outcome.called
    assert server.requests == []
    assert "not_allowed" in caplog.text


def test_register_reranker_refuses_a_key_in_secret_ref(db, acme):
    key = "pa-Zx81kLmQ0pR7sT2vW9yB"
    with pytest.raises(InvalidArgument) as info:
        acme.register_reranker("voy", "voyage", secret_ref=key)
    assert key not in str(info.value)
    mixed = "AbCdEfGhIjKlMnOpQrStUvWxYz0123456789abcd"   # Cohere-shaped
    for ref in (mixed, "env:PGSIFT_KEY", "PGSIFT_KEY", "DATABASE_URL", "a" * 65, "vault:kv/acme"):
        with pytest.raises(InvalidArgument):
            acme.register_reranker("coh", "cohere", secret_ref=ref)
    with pytest.raises(psycopg.errors.CheckViolation):
        db.execute("insert into sift.rerankers (tenant, alias, provider, model, secret_ref, timeout_ms, "
                   "deadline_ms, max_attempts, context_chars) "
                   "values ('acme', 'x', 'voyage', 'rerank-2', %s, 2000, 3000, 2, 1500)", [key])
    assert acme.register_reranker("ok", "voyage", secret_ref="voyage.prod-1")["secret_ref"] == "voyage.prod-1"


@pytest.mark.parametrize("kwargs, setting", [
    ({"timeout_ms": 10}, "rerank_timeout_ms"),
    ({"deadline_ms": 120000}, "rerank_deadline_ms"),
    ({"max_attempts": 0}, "rerank_attempts"),
    ({"context_chars": -1}, "rerank_context_chars"),
])
def test_reranker_settings_are_range_checked(acme, kwargs, setting):
    # A reranker's settings are not knobs: a plain InvalidArgument naming the setting.
    with pytest.raises(InvalidArgument, match=f"invalid {setting}") as info:
        acme.register_reranker("voy", "voyage", secret_ref="k", **kwargs)
    assert type(info.value) is InvalidArgument


def test_reranker_rows_are_checked(acme):
    with pytest.raises(InvalidArgument, match="unknown reranker provider"):
        acme.register_reranker("x", "openai", secret_ref="k")
    with pytest.raises(InvalidArgument):   # timeout longer than the deadline
        acme.register_reranker("x", "voyage", secret_ref="k", timeout_ms=5000, deadline_ms=1000)
    with pytest.raises(InvalidArgument, match="secret_ref"):   # a hosted provider needs a key
        acme.register_reranker("x", "cohere")
    with pytest.raises(InvalidArgument, match="base_url"):   # TEI needs its address
        acme.register_reranker("x", "tei")
    with pytest.raises(InvalidArgument):
        acme.register_reranker("", "voyage", secret_ref="k")


@pytest.mark.parametrize("top_n", [0, 1001])
def test_rerank_top_n_is_range_checked(acme, top_n):
    acme.create_collection("kb", embedding_dims=3)
    with pytest.raises(InvalidKnob) as info:
        acme.alter_collection("kb", rerank_top_n=top_n)
    assert info.value.knob == "rerank_top_n"
    with pytest.raises(InvalidKnob):
        acme.reranker_for("kb", rerank_top_n=top_n)


def test_drop_reranker_detaches_its_collections(db, acme):
    acme.create_collection("kb", embedding_dims=3)
    acme.register_reranker("voy", "voyage", secret_ref="k")
    acme.alter_collection("kb", reranker="voy", rerank=True)
    with pytest.raises(psycopg.errors.ForeignKeyViolation):
        db.execute("delete from sift.rerankers where alias = 'voy'")
    assert acme.drop_reranker("voy") is True
    assert acme.drop_reranker("voy") is False
    col = acme.get_collection("kb")
    assert col.reranker is None and "rerank" not in col.knobs
    assert acme.reranker_for("kb") is None


def test_no_table_readable_by_search_holds_a_secret(db, acme, operator, monkeypatch):
    monkeypatch.setenv("PGSIFT_ACME_VOYAGE", "pa-very-secret-value")
    acme.register_reranker("voy", "voyage", secret_ref="voyage")
    operator.map_secret("acme", "voyage", "env:PGSIFT_ACME_VOYAGE")
    acme.create_collection("kb", embedding_dims=3)
    acme.alter_collection("kb", reranker="voy", rerank=True)
    dump = json.dumps([db.execute(f"select row_to_json(t)::text from sift.{table} t").fetchall()
                       for table in ("rerankers", "secret_mappings", "collections")])
    assert "pa-very-secret-value" not in dump and "PGSIFT_ACME_VOYAGE" in dump
    assert "pa-very-secret-value" not in repr(acme.reranker_for("kb"))


# -- secrets: only through the operator's tenant-scoped mapping ------------------------------------

@pytest.fixture
def two_tenants(db, operator, monkeypatch):
    """acme and other, each with a collection "kb" of 12 chunks; loopback allowed; each
    tenant's "voyage" key mapped to its own variable (for Voyage at the loopback servers), and
    acme's "cohere" and "tei" keys (for those providers)."""
    monkeypatch.setenv("PGSIFT_ACME_VOYAGE", "acme-key")
    monkeypatch.setenv("PGSIFT_OTHER_VOYAGE", "other-key")
    monkeypatch.setenv("PGSIFT_ACME_COHERE", "acme-cohere-key")
    monkeypatch.setenv("PGSIFT_ACME_TEI", "acme-tei-key")
    operator.allow()
    operator.map_secret("acme", "voyage", "env:PGSIFT_ACME_VOYAGE")
    operator.map_secret("other", "voyage", "env:PGSIFT_OTHER_VOYAGE")
    operator.map_secret("other", "other-voyage", "env:PGSIFT_OTHER_VOYAGE")
    operator.map_secret("acme", "cohere", "env:PGSIFT_ACME_COHERE", provider="cohere")
    operator.map_secret("acme", "tei", "env:PGSIFT_ACME_TEI", provider="tei")
    clients = {t: Client(db, tenant=t) for t in ("acme", "other")}
    for tenant, client in clients.items():
        client.create_collection("kb", embedding_dims=3)
        client.upsert_documents("kb", [
            Document(source_uri=f"{tenant}-{i}", chunks=[Chunk(content=f"{tenant} refund policy paragraph {i}",
                                                               embedding=[1, 0.1 * i, 0])])
            for i in range(12)])
    return clients


def use(client: Client, server: RerankServer, secret_ref: str, provider: str = "voyage", alias: str = "r") -> None:
    client.register_reranker(alias, provider, base_url=server.base_url(provider), secret_ref=secret_ref)
    client.alter_collection("kb", reranker=alias, rerank=True)


def test_each_tenant_gets_its_own_key_and_never_anothers(two_tenants, servers):
    server = servers()
    acme, other = two_tenants["acme"], two_tenants["other"]
    use(acme, server, "voyage")
    use(other, server, "voyage")
    assert acme.search("kb", "refund", embedding=[1, 0, 0]).reranked
    assert other.search("kb", "refund", embedding=[1, 0, 0]).reranked
    assert [r.headers["authorization"] for r in server.requests] == ["Bearer acme-key", "Bearer other-key"]
    # acme naming other's ref: acme has no such mapping, so no key, no call; the search goes on
    use(acme, server, "other-voyage")
    result = acme.search("kb", "refund", embedding=[1, 0, 0], top_k=5)
    assert len(result) == 5 and not result.reranked
    assert result.rerank.fault == "unavailable" and not result.rerank.called
    assert acme.reranker_for("kb").secret_source is None
    assert len(server.requests) == 2


def test_no_secret_ref_reaches_a_variable_no_mapping_names(db, two_tenants, servers, connect_as, monkeypatch):
    monkeypatch.setenv("DATABASE_URL", "postgresql://app:db-sekrit@db.internal/app")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "aws-sekrit")
    server = servers()
    acme = two_tenants["acme"]
    for ref in ("DATABASE_URL", "env:DATABASE_URL", "AWS_SECRET_ACCESS_KEY", "env:AWS_SECRET_ACCESS_KEY"):
        with pytest.raises(InvalidArgument):
            acme.register_reranker("r", "voyage", base_url=server.base_url("voyage"), secret_ref=ref)
    for ref in ("database_url", "aws_secret_access_key"):
        use(acme, server, ref, provider="tei")
        result = acme.search("kb", "refund", embedding=[1, 0, 0], top_k=5)
        assert len(result) == 5 and result.rerank.fault == "unavailable" and not result.rerank.called
    # a tenant cannot map a variable for itself: the mapping is the operator's
    db.execute("select sift.map_role('t_admin', 'acme')")
    tenant_admin = connect_as("t_admin")
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        tenant_admin.execute("select sift.map_secret('acme', 'database_url', 'env:DATABASE_URL', 'any')")
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        tenant_admin.execute("insert into sift.secret_mappings values ('acme', 'database_url', 'env:DATABASE_URL')")
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        tenant_admin.execute("update sift.secret_mappings set source = 'env:DATABASE_URL'")
    assert server.requests == []
    assert db.execute("select count(*) from sift.secret_mappings where source ~* 'database_url|aws'").fetchone()[0] == 0


def test_the_resolver_gets_the_operators_source_and_nothing_else(db, two_tenants, operator, servers):
    server = servers()
    operator.map_secret("acme", "tei", "vault:kv/acme/tei", provider="tei")
    seen: list[str] = []
    acme = Client(db, tenant="acme", secrets=lambda source: seen.append(source) or "from-vault")
    use(acme, server, "tei", provider="tei")
    result = acme.search("kb", "refund", embedding=[1, 0, 0])
    assert result.reranked and seen == ["vault:kv/acme/tei"]
    assert server.requests[0].headers["authorization"] == "Bearer from-vault"
    # env: sources never reach the resolver; without one, other schemes are unavailable
    use(acme, server, "voyage")
    assert acme.search("kb", "refund", embedding=[1, 0, 0]).reranked and seen == ["vault:kv/acme/tei"]
    use(two_tenants["acme"], server, "tei", provider="tei")
    without = two_tenants["acme"].search("kb", "refund", embedding=[1, 0, 0])
    assert without.rerank.fault == "unavailable" and "resolver" in without.rerank.reason


# -- endpoints: the providers', or what the operator allowed --------------------------------------

def test_endpoints_must_be_allowed_by_the_operator(db, acme, operator, servers):
    server = servers()
    other = Client(db, tenant="other")
    with pytest.raises(RerankerNotAllowed) as info:
        acme.register_reranker("tei", "tei", base_url=server.url)
    assert info.value.__class__ is RerankerNotAllowed and "sift.allow_endpoint" in str(info.value)
    with pytest.raises(psycopg.Error) as raw:
        db.execute("select sift.register_reranker(alias => 'tei', provider => 'tei', base_url => %s)", [server.url])
    assert raw.value.sqlstate == "SF008"
    # the provider's own endpoint needs no allowance
    assert acme.register_reranker("voy", "voyage", secret_ref="voyage")["base_url"] is None
    # allowed for one tenant: that tenant only
    operator.allow(server.url, tenant="acme")
    assert acme.register_reranker("tei", "tei", base_url=server.url)["base_url"] == server.url
    with pytest.raises(RerankerNotAllowed):
        other.register_reranker("tei", "tei", base_url=server.url)
    # a prefix ends at a boundary: another port, or another host that begins alike, is not allowed
    for url in (server.url + "0", server.url.replace("127.0.0.1", "127.0.0.10"), "https://127.0.0.1:1"):
        with pytest.raises(RerankerNotAllowed):
            acme.register_reranker("tei", "tei", base_url=url)
    assert acme.register_reranker("tei", "tei", base_url=server.url + "/tei")["base_url"] == server.url + "/tei"


def test_a_prefix_never_admits_another_host_through_credentials(db, acme, operator, servers):
    # "http://127.0.0.1:" must not admit http://127.0.0.1:1@elsewhere/ (the request goes to
    # elsewhere): either the database refuses it, or the client never calls it.
    server = servers()
    operator.allow("http://127.0.0.1:")
    acme.create_collection("kb", embedding_dims=3)
    acme.upsert_documents("kb", [Document(source_uri=f"d{i}", chunks=[Chunk(content=f"refund {i}",
                                                                            embedding=[1, i, 0])]) for i in range(3)])
    sneaky = f"http://127.0.0.1:1@localhost:{server.port}"
    try:
        acme.register_reranker("tei", "tei", base_url=sneaky)
    except RerankerNotAllowed:
        return
    acme.alter_collection("kb", reranker="tei", rerank=True)
    result = acme.search("kb", "refund", embedding=[1, 0, 0])
    assert result.rerank.fault == "not_allowed" and not result.rerank.called
    assert server.requests == []


def test_a_revoked_endpoint_is_refused(db, acme, operator, servers):
    server = servers()
    operator.allow()
    acme.create_collection("kb", embedding_dims=3)
    acme.register_reranker("tei", "tei", base_url=server.url)
    acme.alter_collection("kb", reranker="tei", rerank=True)
    assert acme.reranker_for("kb").usable
    db.execute("delete from sift.allowed_endpoints")
    cfg = acme.reranker_for("kb")
    assert not cfg.usable and cfg.chosen_by == "refused" and cfg.base_url is None
    assert "no longer allows" in cfg.refused
    outcome = rerankers.rerank_search(cfg, query="q", pool_texts=DOCS, top_k=3)
    assert outcome.fault == "not_allowed" and server.requests == []


# -- keys: to the provider and the hosts they are mapped for, only ---------------------------------

def test_a_key_is_refused_to_a_reranker_of_another_provider(db, two_tenants, operator, servers, caplog):
    """The attack of issue 37: acme's Voyage key, named by a TEI reranker at a host the operator
    allowed for acme, went there as a bearer token. Now refused when registered, and refused at
    search time for a row that got past registration (the key mapped later, a direct insert):
    the search goes on in fused order, no request is made."""
    acme = two_tenants["acme"]
    tei_host = servers()
    with pytest.raises(RerankerNotAllowed) as refused:
        acme.register_reranker("x", "tei", base_url=tei_host.url, secret_ref="voyage")
    assert "mapped for voyage, not for tei" in str(refused.value) and "acme-key" not in str(refused.value)
    with pytest.raises(psycopg.Error) as raw, db.transaction():
        db.execute("select sift.set_tenant('acme')")
        db.execute("select sift.register_reranker('x', 'tei', base_url => %s, secret_ref => 'voyage')", [tei_host.url])
    assert raw.value.sqlstate == "SF008"
    assert acme.drop_reranker("x") is False   # nothing was registered
    # registered before the key was mapped (or written past sift.register_reranker)
    acme.register_reranker("x", "tei", base_url=tei_host.url, secret_ref="unmapped-yet")
    operator.map_secret("acme", "unmapped-yet", "env:PGSIFT_ACME_VOYAGE", provider="voyage")
    acme.alter_collection("kb", reranker="x", rerank=True)
    cfg = acme.reranker_for("kb")
    assert not cfg.usable and cfg.chosen_by == "refused" and cfg.secret_source is None
    assert 'reranker "x": the key of secret_ref "unmapped-yet" is mapped for voyage, not for tei' in cfg.refused
    plain = acme.search("kb", "refund", embedding=[1, 0, 0], top_k=5, rerank=False)
    with caplog.at_level(logging.WARNING, logger="pgsift.rerank"):
        result = acme.search("kb", "refund", embedding=[1, 0, 0], top_k=5)
    assert [h.chunk_id for h in result] == [h.chunk_id for h in plain]
    assert result.rerank.fault == "not_allowed" and not result.rerank.called and "not_allowed" in caplog.text
    assert tei_host.requests == []
    # the other way round: a TEI key is no Voyage key either
    with pytest.raises(RerankerNotAllowed, match="mapped for tei, not for voyage"):
        acme.register_reranker("y", "voyage", base_url=tei_host.base_url("voyage"), secret_ref="tei")


def test_a_key_goes_to_the_hosts_it_is_mapped_for_only(db, two_tenants, operator, servers, caplog):
    """Its provider's own endpoint (base_url null) and the mapping's endpoints, even where the
    operator allows the tenant more hosts."""
    acme = two_tenants["acme"]
    elsewhere = servers()
    operator.allow("http://localhost:", tenant="acme")   # a host acme may call, keyless
    operator.map_secret("acme", "voyage", "env:PGSIFT_ACME_VOYAGE", endpoints=None)   # Voyage's own endpoint
    assert acme.register_reranker("own", "voyage", secret_ref="voyage")["base_url"] is None
    for url in (elsewhere.base_url("voyage"), f"http://localhost:{elsewhere.port}/v1"):
        with pytest.raises(RerankerNotAllowed, match="may not be sent to .*voyage's own endpoint"):
            acme.register_reranker("proxy", "voyage", base_url=url, secret_ref="voyage")
    operator.map_secret("acme", "voyage", "env:PGSIFT_ACME_VOYAGE", endpoints=[elsewhere.url + "/v1"])
    acme.register_reranker("proxy", "voyage", base_url=elsewhere.base_url("voyage"), secret_ref="voyage")
    with pytest.raises(RerankerNotAllowed, match="may not be sent to"):
        acme.register_reranker("other", "voyage", base_url=f"http://localhost:{elsewhere.port}/v1",
                               secret_ref="voyage")
    # a keyless reranker may still call what the operator allows
    assert acme.register_reranker("free", "tei", base_url=f"http://localhost:{elsewhere.port}")["secret_ref"] is None
    acme.alter_collection("kb", reranker="proxy", rerank=True)
    assert acme.search("kb", "refund", embedding=[1, 0, 0]).reranked
    assert [r.headers["authorization"] for r in elsewhere.requests] == ["Bearer acme-key"]
    # the operator narrows the mapping: the next search is refused, and sends nothing
    operator.map_secret("acme", "voyage", "env:PGSIFT_ACME_VOYAGE", endpoints=None)
    with caplog.at_level(logging.WARNING, logger="pgsift.rerank"):
        result = acme.search("kb", "refund", embedding=[1, 0, 0], top_k=5)
    assert len(result) == 5 and result.rerank.fault == "not_allowed" and "may not be sent to" in result.rerank.reason
    assert len(elsewhere.requests) == 1


def test_any_provider_is_the_operators_explicit_choice(db, two_tenants, operator, servers):
    acme = two_tenants["acme"]
    server = servers()
    operator.map_secret("acme", "shared", "env:PGSIFT_ACME_TEI", provider="any")
    for provider in ("voyage", "cohere", "tei"):
        acme.register_reranker(provider, provider, base_url=server.base_url(provider), secret_ref="shared")
    acme.alter_collection("kb", reranker="tei", rerank=True)
    assert acme.search("kb", "refund", embedding=[1, 0, 0]).reranked
    assert server.requests[-1].headers["authorization"] == "Bearer acme-tei-key"
    assert db.execute("select provider, endpoints from sift.secret_mappings where secret_ref = 'shared'"
                      ).fetchone() == ("any", LOOPBACK)


@pytest.mark.parametrize("args, problem", [
    ({"provider": None}, "say which provider"),
    ({"provider": "openai"}, "say which provider"),
    ({"provider": "tei", "endpoints": None}, "tei has no endpoint of its own"),
    ({"endpoints": []}, "endpoints must be"),
    ({"endpoints": ["http://127.0.0.1:1@evil.example/"]}, "endpoints must be"),
    ({"endpoints": ["ftp://files.example/"]}, "endpoints must be"),
    ({"endpoints": [None]}, "endpoints must be"),
])
def test_map_secret_says_what_a_key_is_for(db, args, problem):
    given = {"provider": "voyage", "endpoints": None} | args
    with pytest.raises(psycopg.Error) as refused:
        db.execute("select sift.map_secret('acme', 'k', 'env:K', provider => %s, endpoints => %s::text[])",
                   [given["provider"], given["endpoints"]])
    assert refused.value.sqlstate == "SF003" and problem in str(refused.value)
    # and the table keeps what a direct write would slip in
    with pytest.raises(psycopg.errors.CheckViolation):
        db.execute("insert into sift.secret_mappings values ('acme', 'k', 'env:K', 'voyage', "
                   "array['http://a.example:1@evil.example/'])")
    with pytest.raises(psycopg.errors.UndefinedFunction):   # the old signature, which said no provider
        db.execute("select sift.map_secret('acme', 'k', 'env:K')")


def test_a_tenant_admin_cannot_send_its_key_elsewhere_by_any_way_in(db, two_tenants, servers, connect_as):
    """As the attacker of issue 37 is: a role of tenant acme with sift_admin. Neither
    registering, nor writing the row directly (admins may), nor the operator's later allowance
    of more hosts gets acme's Voyage key to a host it is not mapped for."""
    db.execute("select sift.map_role('t_admin', 'acme')")
    conn = connect_as("t_admin")
    admin = Client(conn)
    theirs = servers()   # hosts the operator allows acme to call: acme's own TEI, say
    db.execute("select sift.allow_endpoint('http://localhost:', tenant => 'acme')")
    with pytest.raises(RerankerNotAllowed, match="mapped for voyage, not for tei"):
        admin.register_reranker("exfil", "tei", base_url=theirs.url, secret_ref="voyage")
    with pytest.raises(RerankerNotAllowed, match="may not be sent to"):   # the right provider, another host
        admin.register_reranker("exfil", "voyage", base_url=f"http://localhost:{theirs.port}/v1", secret_ref="voyage")
    conn.execute("insert into sift.rerankers (tenant, alias, provider, model, base_url, secret_ref, timeout_ms, "
                 "deadline_ms, max_attempts, context_chars) values ('acme', 'exfil', 'tei', 'tei', %s, 'voyage', "
                 "1000, 2000, 1, 100)", [theirs.url])
    admin.alter_collection("kb", reranker="exfil", rerank=True)
    result = admin.search("kb", "refund", embedding=[1, 0, 0], top_k=5)
    assert len(result) == 5 and result.rerank.fault == "not_allowed" and not result.rerank.called
    assert "mapped for voyage, not for tei" in result.rerank.reason
    with pytest.raises(psycopg.errors.InsufficientPrivilege):   # nor may it say what its key is for
        conn.execute("update sift.secret_mappings set provider = 'any', endpoints = null")
    assert theirs.requests == []


def test_an_upgrade_maps_old_keys_for_what_they_were_for_or_for_nothing(db, acme, operator, monkeypatch):
    """Migration 0022 on mappings an older version wrote (no provider, no endpoints): the provider
    its own words name, else the one provider (with an endpoint of its own) of the rerankers that
    name it, else none (refused until mapped again); TEI keys keep the hosts they were used at,
    those the operator still allows."""
    operator.allow()
    acme.create_collection("kb", embedding_dims=3)
    rows = [  # secret_ref, source, the providers (and base_urls) of the rerankers naming it
        ("voyage", "env:PGSIFT_ACME_VOYAGE", [("voyage", None), ("tei", "http://127.0.0.1:7/")]),  # an attack
        ("main", "vault:kv/acme/main", [("cohere", None)]),
        ("mixed", "env:KEY_X", [("voyage", None), ("tei", "http://127.0.0.1:8")]),
        ("tei-key", "env:PGSIFT_ACME_TEI", [("tei", "http://127.0.0.1:9/"), ("tei", "http://127.0.0.1:9/x")]),
        ("onlytei", "env:KEY_Y", [("tei", "http://127.0.0.1:6")]),
        ("lonely", "env:KEY_Z", []),
        ("gone-tei", "env:PGSIFT_ACME_TEI2", [("tei", "http://127.0.0.1:5/")]),  # its host taken back below
    ]
    for ref, _source, used in rows:
        for i, (provider, url) in enumerate(used):
            acme.register_reranker(f"{ref}-{i}", provider, base_url=url, secret_ref=ref)
    with db.transaction():
        db.execute("alter table sift.secret_mappings drop column provider, drop column endpoints")
        # a host the operator no longer allows (a base_url an older version stored): not seeded
        db.execute("update sift.rerankers set base_url = 'http://10.9.9.9/' where alias = 'gone-tei-0'")
        for ref, source, _ in rows:
            db.execute("insert into sift.secret_mappings values ('acme', %s, %s)", [ref, source])
        (migration,) = [m for m in migration_files() if m.version == "0022_secret_providers"]
        db.execute(with_vector_schema(migration.text, "public"))
    pgsift.migrate(db, force=True)
    placed = {r[0]: r[1:] for r in db.execute(
        "select secret_ref, provider, endpoints from sift.secret_mappings order by 1").fetchall()}
    assert placed == {"voyage": ("voyage", None), "main": ("cohere", None), "mixed": (None, None),
                      "tei-key": ("tei", ["http://127.0.0.1:9/", "http://127.0.0.1:9/x"]),
                      "onlytei": (None, None), "lonely": (None, None), "gone-tei": ("tei", None)}
    usable = {alias: acme.reranker_for("kb", reranker=alias) for alias in
              [f"{ref}-{i}" for ref, _, used in rows for i in range(len(used))]}
    assert {alias for alias, cfg in usable.items() if cfg.usable} == {"voyage-0", "main-0", "tei-key-0", "tei-key-1"}
    assert "mapped for voyage, not for tei" in usable["voyage-1"].refused
    assert "has not said which provider" in usable["mixed-0"].refused


# -- tenancy: the database keeps tenants apart --------------------------------------------------

def test_a_tenant_admin_cannot_see_use_drop_or_bill_another_tenants_rerankers(db, two_tenants, servers,
                                                                            connect_as):
    server = servers()
    other = two_tenants["other"]
    use(other, server, "voyage", alias="theirs")
    assert other.search("kb", "refund", embedding=[1, 0, 0]).reranked   # a usage row of other's
    db.execute("select sift.map_role('t_admin', 'acme')")
    conn = connect_as("t_admin")
    acme = Client(conn)   # the role's tenant, bound by the database
    mine = acme.register_reranker("mine", "tei", base_url=server.url)
    assert mine["tenant"] == "acme"
    # see
    assert conn.execute("select alias from sift.rerankers").fetchall() == [("mine",)]
    assert conn.execute("select count(*) from sift.rerank_usage").fetchone()[0] == 0
    # use
    with pytest.raises(RerankerNotAllowed):
        acme.alter_collection("kb", reranker="theirs", rerank=True)
    with pytest.raises(RerankerNotAllowed):
        acme.reranker_for("kb", reranker="theirs")
    with pytest.raises(RerankerNotAllowed):
        acme.rerank("kb", "refund", embedding=[1, 0, 0], reranker="theirs")
    with pytest.raises(RerankerNotAllowed):
        acme.store_calibrated_threshold("kb", "theirs", 0.5)
    with pytest.raises(TenantError):
        Client(conn, tenant="other").reranker_for("kb")
    # drop (and overwrite: the same alias is acme's own row)
    assert acme.drop_reranker("theirs") is False
    acme.register_reranker("theirs", "tei", base_url=server.url + "/x")
    assert conn.execute("update sift.rerankers set base_url = 'http://127.0.0.1:9' where tenant = 'other'"
                        ).rowcount == 0
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        conn.execute("delete from sift.rerank_usage")
    # bill
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        conn.execute("insert into sift.rerank_usage (tenant, provider, model, documents, latency_ms, ok, billed) "
                     "values ('other', 'voyage', 'rerank-2', 3, 1, true, true)")
    acme.alter_collection("kb", reranker="mine", rerank=True)
    assert acme.search("kb", "refund", embedding=[1, 0, 0]).rerank.usage_recorded
    assert conn.execute("select tenant, reranker_alias from sift.rerank_usage").fetchall() == [("acme", "mine")]
    # what other has is untouched
    theirs = db.execute("select tenant, provider, base_url from sift.rerankers where alias = 'theirs' "
                        "order by tenant").fetchall()
    assert theirs == [("acme", "tei", server.url + "/x"), ("other", "voyage", server.base_url("voyage"))]
    assert db.execute("select tenant, reranker_alias, billed from sift.rerank_usage order by usage_id").fetchall() == [
        ("other", "theirs", True), ("acme", "mine", True)]


def test_a_reader_meters_its_own_reranks_but_registers_nothing(db, two_tenants, servers, connect_as):
    server = servers()
    use(two_tenants["acme"], server, "voyage", alias="voy")
    db.execute("select sift.map_role('t_reader', 'acme')")
    reader = Client(connect_as("t_reader"))
    result = reader.search("kb", "refund", embedding=[1, 0, 0], top_k=3)
    assert result.reranked and result.rerank.usage_recorded is True
    assert reader.reranker_for("kb").alias == "voy" and reader.reranking_enabled("kb")
    with pytest.raises(PermissionDenied):
        reader.register_reranker("mine", "tei", base_url=server.url)
    with pytest.raises(PermissionDenied):
        reader.drop_reranker("voy")
    assert [r[:2] for r in usage_rows(db)] == [("acme", "voy")]


async def test_async_tenant_admin_keeps_to_its_own_rerankers(db, dsn, two_tenants, servers):
    server = servers()
    use(two_tenants["other"], server, "voyage", alias="theirs")
    db.execute("select sift.map_role('t_admin', 'acme')")
    as_admin = dsn.replace("postgresql://postgres@", "postgresql://t_admin@")
    async with await psycopg.AsyncConnection.connect(as_admin, autocommit=True) as conn:
        assert (await (await conn.execute("select current_user")).fetchone())[0] == "t_admin"
        acme = AsyncClient(conn)
        mine = await acme.register_reranker("mine", "tei", base_url=server.url)
        assert mine["tenant"] == "acme"
        assert await acme.drop_reranker("theirs") is False
        with pytest.raises(RerankerNotAllowed):
            await acme.store_calibrated_threshold("kb", "theirs", 0.5)
        with pytest.raises(RerankerNotAllowed):
            await acme.reranker_for("kb", reranker="theirs")
        await acme.store_calibrated_threshold("kb", "mine", 0.25)
        await acme.alter_collection("kb", reranker="mine", rerank=True)
        result = await acme.search("kb", "refund", embedding=[1, 0, 0], top_k=4)
        assert await acme.drop_reranker("mine") is True
    assert result.reranked and result.rerank.usage_recorded and result.threshold_applied
    assert db.execute("select tenant, alias from sift.rerankers order by 1").fetchall() == [("other", "theirs")]
    assert db.execute("select tenant, reranker_alias, billed from sift.rerank_usage").fetchall() == [
        ("acme", "mine", True)]


# -- the pool's texts: one statement, in pool order, this tenant only --------------------------------

def test_pool_texts_in_one_statement_in_pool_order(db, two_tenants):
    acme = two_tenants["acme"]
    chunks = ("select k.chunk_id from sift.chunks k join sift.collections c using (collection_id) "
              "where c.tenant = %s order by k.chunk_id")
    ids = [r[0] for r in db.execute(chunks, ["acme"])]
    foreign = db.execute(chunks, ["other"]).fetchone()[0]
    db.execute("update sift.chunks set context = 'Refunds' where chunk_id = %s", [ids[3]])
    pool = [*reversed(ids), foreign]
    with acme.transaction() as conn:
        rows = conn.execute("select ord, chunk_id, document from sift.rerank_texts(chunk_ids => %s::bigint[])",
                            [pool]).fetchall()
    assert [r[:2] for r in rows] == [(i + 1, c) for i, c in enumerate(reversed(ids))]   # other's left out
    texts = {c: t for _, c, t in rows}
    assert texts[ids[3]] == "Refunds\n\nacme refund policy paragraph 3"
    assert texts[ids[0]] == "acme refund policy paragraph 0"
    assert calls.aligned_texts(rows, len(pool))[-1] == ""   # never another tenant's text


# -- metering ------------------------------------------------------------------------------------

def usage_rows(db):
    return db.execute("select tenant, reranker_alias, provider, model, documents, tokens, search_units, "
                      "latency_ms, attempts, ok, billed, error from sift.rerank_usage order by usage_id").fetchall()


def test_usage_success_is_billed_failure_is_not(db, two_tenants, servers):
    acme = two_tenants["acme"]
    good = servers()
    use(acme, good, "voyage", alias="voy")
    reranked = acme.rerank("kb", "refund policy", embedding=[1, 0, 0], top_k=5)
    assert reranked.outcome.reranked and reranked.outcome.usage_recorded is True
    bad = servers(fault="500")
    use(acme, bad, "cohere", provider="cohere", alias="coh")
    failed = acme.rerank("kb", "refund policy", embedding=[1, 0, 0], top_k=5)
    assert failed.outcome.fault == "server_error" and failed.outcome.usage_recorded is True
    skipped = acme.rerank("kb", " ", embedding=[1, 0, 0], top_k=5)
    assert skipped.outcome.skip == "blank_query" and skipped.outcome.usage_recorded is None
    (ok_row, failed_row) = usage_rows(db)   # no call, nothing metered
    tenant, alias, provider, model, documents, tokens, units, latency, attempts, ok, billed, error = ok_row
    assert (tenant, alias, provider, model, documents) == ("acme", "voy", "voyage", "rerank-2", 12)
    texts = good.requests[0].body["documents"]
    assert tokens == 2 + sum(len(t.split()) for t in texts) and units is None
    assert latency > 0 and attempts == 1 and ok and billed and error is None
    tenant, alias, provider, model, documents, tokens, units, latency, attempts, ok, billed, error = failed_row
    assert (alias, provider, ok, billed, tokens, units, attempts) == ("coh", "cohere", False, False, None, None, 2)
    assert error.startswith("server_error")


def test_partial_and_invalid_calls_are_not_billed(db, two_tenants, servers):
    acme = two_tenants["acme"]
    for fault in ("partial", "nan"):
        use(acme, servers(fault=fault), "tei", provider="tei")
        assert acme.rerank("kb", "refund", embedding=[1, 0, 0]).outcome.called
    rows = usage_rows(db)
    assert [(r[9], r[10]) for r in rows] == [(False, False), (False, False)]
    assert rows[0][11].startswith("partial_ranking") and rows[1][11].startswith("invalid_ranking")


def test_a_failed_call_can_never_be_billed(db):
    with pytest.raises(psycopg.errors.CheckViolation):
        db.execute("insert into sift.rerank_usage (tenant, provider, model, documents, latency_ms, ok, "
                   "billed, error) values ('acme', 'voyage', 'rerank-2', 3, 10, false, true, 'x')")
    # and the function never bills one, whatever it is told
    with Client(db, tenant="acme").transaction() as conn:
        conn.execute("select sift.record_rerank_usage(reranker_alias => 'r', provider => 'voyage', "
                     "model => 'rerank-2', documents => 3, latency_ms => 10, ok => false)")
    assert [(r[0], r[9], r[10], r[11]) for r in usage_rows(db)] == [("acme", False, False, "failed")]


async def test_async_rerank_is_metered(db, dsn, two_tenants, servers):
    server = servers()
    use(two_tenants["acme"], server, "cohere", provider="cohere", alias="coh")
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        client = AsyncClient(conn, tenant="acme")
        cfg = await client.reranker_for("kb")
        assert cfg.alias == "coh" and await client.reranking_enabled("kb")
        reranked = await client.rerank("kb", "refund", embedding=[1, 0, 0], top_k=3, context="before")
        assert await client.drop_reranker("coh") is True
    assert reranked.outcome.reranked and reranked.outcome.alias == "coh" and reranked.outcome.usage_recorded
    assert server.requests[0].body["query"] == "before\n\nrefund"
    (row,) = usage_rows(db)
    assert row[2] == "cohere" and row[6] == 1 and row[9] and row[10]


# -- the whole round trip: SQL pool -> rerank -> SQL finalize --------------------------------------

@pytest.mark.parametrize("fault", [None, "partial", "500"])
def test_round_trip_through_candidates_and_finalize(db, two_tenants, servers, fault):
    acme = two_tenants["acme"]
    server = servers(fault=fault)
    acme.register_reranker("tei", "tei", base_url=server.url, deadline_ms=1000, timeout_ms=500)
    acme.alter_collection("kb", reranker="tei", rerank=True, rerank_top_n=10)
    top_k = 4
    reranked = acme.rerank("kb", "refund", embedding=[1, 0, 0], top_k=top_k, context="we talked about returns")
    ids = [c.chunk_id for c in reranked.pool]
    assert len(ids) == 10 == len(reranked.texts)   # the pool widened to rerank_top_n, and no further
    assert ids == [c.chunk_id for c in acme.candidates("kb", "refund", embedding=[1, 0, 0], top_k=10)][:10]
    outcome = reranked.outcome
    assert len(server.requests) == (2 if fault == "500" else 1)
    assert server.requests[0].body["texts"] == reranked.texts
    assert server.requests[0].body["query"] == "we talked about returns\n\nrefund"
    assert (outcome.alias, outcome.chosen_by) == ("tei", "collection")
    scores = outcome.finalize_scores()
    hits = acme.finalize("kb", ids, scores, top_k=top_k, scored_by="tei" if outcome.applied else None).hits
    assert len(hits) == top_k   # never shrinks
    expected = [ids[i] for i in outcome.order()][:top_k]
    assert [h.chunk_id for h in hits] == expected
    # search is exactly this round trip
    searched = acme.search("kb", "refund", embedding=[1, 0, 0], top_k=top_k, context="we talked about returns")
    assert [h.chunk_id for h in searched] == expected
    if fault is None:
        assert outcome.reranked and expected == list(reversed(ids))[:top_k]
        by_chunk = outcome.rerank_scores(ids)
        assert [h.base_score for h in hits] == pytest.approx([by_chunk[c] for c in expected])
    elif fault == "partial":
        assert outcome.partial and expected == list(reversed(ids))[:top_k]
        # all ten come back, the ranked half first then the remainder in pool order
        everything = acme.finalize("kb", ids, scores, top_k=10, scored_by="tei").hits
        assert [h.chunk_id for h in everything] == [ids[i] for i in (9, 8, 7, 6, 5, 0, 1, 2, 3, 4)]
    else:
        assert scores is None and expected == ids[:top_k]   # the fused order
