"""`pgsift calibrate`: a score threshold tuned per reranker on a golden set, stored against
that reranker, cleared when the collection's reranker changes, and never applied to
scores from another reranker (or to fused scores after a fallback)."""

from __future__ import annotations

import dataclasses
import json
import random
import re

import numpy as np
import psycopg
import pytest
from conftest import unit
from pgsift import AsyncClient, Chunk, Client, Document, InvalidArgument, RerankerNotAllowed
from pgsift.calibration import (
    QuestionScore,
    calibrate,
    candidate_thresholds,
    choose_threshold,
    objective,
    store_calibration,
    store_threshold,
    summarize,
)
from pgsift.cli import main
from pgsift.golden import Positive, Question, import_golden_set
from pgsift.rerankers import clear_reranker_cache
from rerank_servers import RerankServer

DIMS = 8
TENANT = "acme"
KEY_VAR = "PGSIFT_TEST_VOYAGE_KEY"


# -- the choice -------------------------------------------------------------------------

def brute_force(u: list[float], a: list[float]) -> tuple[float, list[float]]:
    """The best objective over every threshold that can make a difference (each score,
    a hair above each score, far below and far above), and those reaching it."""
    points = sorted({x for s in (*u, *a) for x in (s, s + 1e-9)} | {-1e9, 1e9})
    values = {t: objective(u, a, t) for t in points}
    best = max(values.values())
    return best, [t for t, v in values.items() if abs(v - best) < 1e-12]


@pytest.mark.parametrize("seed", range(200))
def test_choose_threshold_matches_brute_force(seed):
    rng = random.Random(seed)
    grid = rng.choice([5, 20, 1000])          # small grids make ties and shared scores
    u = [rng.randrange(grid) / grid for _ in range(rng.randrange(0, 8))]
    a = [rng.randrange(grid) / grid for _ in range(rng.randrange(0 if u else 1, 8))]
    band, value, best = choose_threshold(u, a)
    want, winners = brute_force(u, a)
    assert best == pytest.approx(want, abs=1e-12)
    assert objective(u, a, value) == pytest.approx(want, abs=1e-12)
    cands = candidate_thresholds([*u, *a])
    assert band[0] in cands and band[1] in cands and band[0] <= value <= band[1]
    inside = [t for t in cands if band[0] <= t <= band[1]]
    assert all(objective(u, a, t) == pytest.approx(want, abs=1e-12) for t in inside)
    below = [t for t in cands if t < band[0]]
    assert all(objective(u, a, t) < want - 1e-12 for t in below)     # the lowest run
    # the lowest winning threshold cuts the same scores as the band's low end
    everything = [*u, *a]
    assert sum(s < min(winners) for s in everything) == sum(s < band[0] for s in everything)


def test_choose_threshold_separates_and_rejects_nothing():
    band, value, best = choose_threshold([0.1, 0.2, 0.15], [0.8, 0.9])
    assert band == (pytest.approx(0.5), pytest.approx(0.5)) and value == pytest.approx(0.5)
    assert best == 1.0
    with pytest.raises(InvalidArgument, match="nothing to calibrate"):
        choose_threshold([], [])


# -- a small collection and golden set -------------------------------------------------------

def topic_scorer(query: str, documents: list[str]) -> list[float]:
    """High for a chunk naming the query's topic token, low otherwise (distinct lows)."""
    topics = set(re.findall(r"topic\d+", query))
    return [0.9 if topics & set(re.findall(r"topic\d+", d)) else 0.1 + 0.001 * (i % 50)
            for i, d in enumerate(documents)]


def operator_setup(db: psycopg.Connection, *tenants: str) -> None:
    """What the operator does once: allow the loopback servers, map each tenant's key."""
    db.execute("select sift.allow_endpoint(url_prefix => 'http://127.0.0.1:')")
    for tenant in tenants:
        db.execute("select sift.map_secret(tenant => %s, secret_ref => 'voyage', source => %s, "
                   "provider => 'voyage', endpoints => array['http://127.0.0.1:'])", (tenant, f"env:{KEY_VAR}"))


@pytest.fixture
def kb(db, monkeypatch):
    monkeypatch.setenv(KEY_VAR, "test-key")
    clear_reranker_cache()
    operator_setup(db, TENANT, "other")
    client = Client(db, tenant=TENANT)
    client.create_collection("kb", embedding_dims=DIMS)
    rng = np.random.default_rng(7)
    docs = [Document(source_uri=f"d{i}", chunks=[
        Chunk(content=f"item topic{i} answer about item {i}", embedding=unit(rng.normal(size=DIMS))),
        Chunk(content=f"item filler text for item {i}", embedding=unit(rng.normal(size=DIMS)))])
        for i in range(10)]
    client.upsert_documents("kb", docs)
    questions = [Question(f"a{i}", f"item topic{i}", positives=[Positive(text=f"item topic{i} answer")],
                          embedding=unit(rng.normal(size=DIMS))) for i in range(5)]
    questions += [Question(f"u{i}", f"item topic9{i}", answerable=False,
                           embedding=unit(rng.normal(size=DIMS))) for i in range(3)]
    import_golden_set(client, "kb", "gold", questions)
    return client


def register(client: Client, server: RerankServer, alias: str) -> None:
    """A voyage reranker of the client's tenant calling the loopback server (registering an
    alias again points it at another server)."""
    client.register_reranker(alias, "voyage", base_url=server.base_url("voyage"), secret_ref="voyage",
                             timeout_ms=5000, deadline_ms=10000, max_attempts=1)   # roomy: a busy CI machine


def stored(db) -> tuple:
    """(score_threshold, threshold_reranker) as stored for the collection."""
    return db.execute("select (knobs ->> 'score_threshold')::float8, knobs ->> 'threshold_reranker' "
                      "from sift.collections where name = 'kb' and tenant = %s", [TENANT]).fetchone()


def test_calibrate_proposes_a_value_that_separates_and_stores_it(kb, db, dsn, capsys):
    with RerankServer(scorer=topic_scorer) as server:
        register(kb, server, "voy")
        result = calibrate(kb, "kb", "voy", top_k=5)
        assert len(server.requests) == 8                      # one scored pool per question
    assert 0.2 < result.value < 0.9 and result.band[0] <= result.value <= result.band[1]
    assert result.objective == 1.0 and result.declined_share == 1.0 and result.pushed_below_share == 0.0
    c = result.counts
    assert (c["unanswerable"], c["answerable"], c["working_today"], c["failed"]) == (3, 5, 5, 0)
    assert (c["scored_unanswerable"], c["scored_working"], c["declined"], c["pushed_below"]) == (3, 5, 3, 0)
    assert all(q.top_score is not None for q in result.questions)
    usage = db.execute("select count(*), bool_and(ok), min(tenant), max(tenant) from sift.rerank_usage").fetchone()
    assert usage == (8, True, TENANT, TENANT)                # metered, for the tenant
    assert stored(db) == (None, None)                         # nothing stored without --store

    with RerankServer(scorer=topic_scorer) as server:
        register(kb, server, "voy")
        rc = main(["--dsn", dsn, "calibrate", "kb", "--reranker", "voy", "--tenant", TENANT,
                   "--top-k", "5", "--store", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert rc == 0 and out["stored"] and out["value"] == pytest.approx(result.value)
    assert stored(db) == (pytest.approx(result.value), "voy")

    # the calibrated threshold works with that reranker: unanswerable declined, answerable kept
    kb.alter_collection("kb", reranker="voy", rerank=True)
    assert stored(db) == (pytest.approx(result.value), "voy")   # the reranker it was calibrated for
    with RerankServer(scorer=topic_scorer) as server:
        register(kb, server, "voy")
        declined = kb.search("kb", "item topic91", top_k=5)
        answered = kb.search("kb", "item topic2", top_k=5)
    assert declined.reranked and len(declined) == 0 and declined.threshold_skipped is None
    assert answered.reranked and [h.source_uri for h in answered] == ["d2"]
    assert answered.threshold_applied and answered.threshold_skipped is None


def test_failed_calls_are_left_out_and_counted(kb, db, dsn, capsys):
    with RerankServer(fault="500") as server:
        register(kb, server, "voy")
        result = calibrate(kb, "kb", "voy", top_k=5)
        rc = main(["--dsn", dsn, "--tenant", TENANT, "calibrate", "kb", "--reranker", "voy", "--store"])
    assert result.value is None and result.counts["failed"] == 8
    assert all("server_error" in reason for _key, reason in result.failures)
    text = capsys.readouterr().out
    assert rc == 1 and "nothing to calibrate" in text and "8 question(s) left out" in text
    assert stored(db) == (None, None)
    failed = db.execute("select count(*) from sift.rerank_usage where not ok").fetchone()[0]
    assert failed == 16                                       # every failed call metered, never billed


def test_cli_prints_a_table(kb, db, dsn, capsys):
    with RerankServer(scorer=topic_scorer) as server:
        register(kb, server, "voy")
        assert main(["--dsn", dsn, "--tenant", TENANT, "calibrate", "kb", "--reranker", "voy",
                     "--top-k", "5", "--golden-set", "gold"]) == 0
    text = capsys.readouterr().out
    assert "band low" in text and "pushed below" in text and "3/3" in text and "0/5" in text
    assert "not stored" in text


def test_changing_the_reranker_clears_a_calibrated_threshold(kb, db):
    with RerankServer() as server:
        register(kb, server, "voy-a")
        register(kb, server, "voy-b")
    kb.alter_collection("kb", reranker="voy-a", rerank=True)
    assert store_threshold(kb, "kb", "voy-a", 0.4) == (0.4, "voy-a")
    kb.alter_collection("kb", reranker="voy-a", rerank_top_n=20)
    assert stored(db) == (0.4, "voy-a")                        # same reranker: kept
    kb.alter_collection("kb", reranker="voy-b")
    assert stored(db) == (None, None)                          # another reranker: cleared
    # calibrated ahead for the reranker it is switched to: kept
    store_threshold(kb, "kb", "voy-a", 0.3)
    kb.alter_collection("kb", reranker="voy-a")
    assert stored(db) == (0.3, "voy-a")
    # a threshold set by hand is no longer the calibrated one; an uncalibrated one stays put
    kb.alter_collection("kb", score_threshold=0.2)
    assert stored(db) == (0.2, None)
    kb.alter_collection("kb", reranker="voy-b")
    assert stored(db) == (0.2, None)
    # dropping the reranker a threshold was calibrated for clears it too
    store_threshold(kb, "kb", "voy-b", 0.5)
    kb.drop_reranker("voy-b")
    assert stored(db) == (None, None)


def test_a_threshold_for_another_reranker_is_reported_never_applied(kb, db):
    with RerankServer() as server:
        register(kb, server, "voy-a")
        register(kb, server, "voy-b")
    kb.alter_collection("kb", reranker="voy-a", rerank=True)
    store_threshold(kb, "kb", "voy-a", 0.5)

    # the rerank falls back: fused scores (all far below 0.5) are not cut by it
    with RerankServer(fault="500") as server:
        register(kb, server, "voy-a")
        fallback = kb.search("kb", "item topic3", top_k=5)
    assert not fallback.reranked and len(fallback) == 5
    assert fallback.rerank.fault == "server_error" and fallback.rerank.alias == "voy-a"
    assert "calibrated for reranker \"voy-a\"" in fallback.threshold_skipped
    assert "no reranker scored this pool" in fallback.threshold_skipped   # the fused scores, after the fallback
    assert not fallback.threshold_applied and fallback.below_threshold == 0

    # no reranker at all (rerank=False): reported, not applied
    plain = kb.search("kb", "item topic3", top_k=5, rerank=False)
    assert len(plain) == 5 and "no reranker scored" in plain.threshold_skipped

    # scored by another reranker than the one it was calibrated for
    # (a state the trigger never leaves behind when the reranker changes, but one search
    # meets whenever another reranker scores its pool, e.g. the tenant's default)
    db.execute("update sift.collections set reranker_alias = 'voy-b' where name = 'kb'")
    db.execute("""update sift.collections
                  set knobs = knobs || '{"score_threshold": 0.5, "threshold_reranker": "voy-a"}'
                  where name = 'kb'""")
    assert stored(db) == (0.5, "voy-a")
    with RerankServer(scorer=topic_scorer) as server:
        register(kb, server, "voy-b")
        by_b = kb.search("kb", "item topic3", top_k=5)
    assert by_b.reranked and by_b.rerank.alias == "voy-b" and len(by_b) == 5
    assert 'reranker "voy-b" scored this pool' in by_b.threshold_skipped

    # a per-call threshold is the caller's: applied as given, nothing reported
    explicit = kb.search("kb", "item topic3", top_k=5, rerank=False, score_threshold=1.0)
    assert len(explicit) == 0 and explicit.threshold_skipped is None

    # an uncalibrated threshold applies as before
    kb.alter_collection("kb", score_threshold=1.0)
    assert len(kb.search("kb", "item topic3", top_k=5, rerank=False)) == 0


async def test_async_search_skips_it_too(kb, db, dsn):
    with RerankServer() as server:
        register(kb, server, "voy-a")
    store_threshold(kb, "kb", "voy-a", 0.5)
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        result = await AsyncClient(conn, tenant=TENANT).search("kb", "item topic3", top_k=5)
    assert len(result) == 5 and "no reranker scored" in result.threshold_skipped


def test_another_tenants_reranker_is_refused(kb, db, dsn, capsys):
    with RerankServer(scorer=topic_scorer) as server:
        register(Client(db, tenant="other"), server, "theirs")
        with pytest.raises(RerankerNotAllowed, match='no reranker "theirs" is registered for tenant "acme"'):
            calibrate(kb, "kb", "theirs")
        with pytest.raises(RerankerNotAllowed, match='no reranker "theirs"'):
            store_threshold(kb, "kb", "theirs", 0.5)
        with pytest.raises(RerankerNotAllowed, match='no reranker "missing"'):
            calibrate(kb, "kb", "missing")
        assert main(["--dsn", dsn, "--tenant", TENANT, "calibrate", "kb", "--reranker", "theirs"]) == 2
        err = capsys.readouterr().err
        # its own reranker, at an endpoint the operator no longer allows: refused before any call
        register(kb, server, "mine")
        db.execute("delete from sift.allowed_endpoints")
        with pytest.raises(RerankerNotAllowed, match="no longer allows"):
            calibrate(kb, "kb", "mine")
    assert server.requests == [] and stored(db) == (None, None)
    assert err.startswith('error: no reranker "theirs"') and len(err.splitlines()) == 1
    assert db.execute("select count(*) from sift.rerank_usage").fetchone()[0] == 0


# -- when no threshold helps (issue 36, item 3) ------------------------------------------------

def scored(key: str, answerable: bool, score: float) -> QuestionScore:
    """A question as calibrate records it: an unanswerable one's top score, or a working
    answerable one's best relevant score."""
    if answerable:
        return QuestionScore(key, True, score, True, score)
    return QuestionScore(key, False, score, None, None)


def summary(results: list[QuestionScore]):
    return summarize(results, collection="kb", golden_set="gold", reranker="voy", k=5)


@pytest.mark.parametrize(("u", "a", "why"), [
    ([], [0.4, 0.7, 0.9], "no unanswerable question"),            # nothing to decline
    ([0.9, 0.95], [], "no working answerable question"),          # nothing says what it costs
    ([0.2, 0.6], [0.1, 0.5], "no threshold declines more"),       # interleaved: best objective 0
    ([0.8, 0.9], [0.1, 0.2], "no threshold declines more"),       # reversed: every cut costs more
])
def test_no_threshold_helps_proposes_none(u, a, why):
    _band, value, best = choose_threshold(u, a)
    assert best <= 0 or not u or not a
    if best <= 0:
        assert value < min([*u, *a])                              # the lowest run: admits everything
    result = summary([scored(f"u{i}", False, s) for i, s in enumerate(u)]
                     + [scored(f"a{i}", True, s) for i, s in enumerate(a)])
    assert not result.helps and result.value is None and why in result.why
    assert result.band is not None and result.objective == pytest.approx(best)   # kept, for information
    assert result.declined_share is None and result.pushed_below_share is None
    out = result.to_json()
    assert out["helps"] is False and out["value"] is None and why in out["why"] and out["stored"] is False
    with pytest.raises(InvalidArgument, match="no threshold helps"):
        store_calibration(None, result)        # refused before the database is touched


def test_a_threshold_that_separates_helps():
    result = summary([scored("u0", False, 0.1), scored("u1", False, 0.2), scored("a0", True, 0.8)])
    assert result.helps and result.why is None and result.value == pytest.approx(0.5)
    assert result.objective == 1.0 and result.to_json()["helps"] is True
    # a value below every scored question admits everything: never stored from a result
    below = dataclasses.replace(result, value=0.05)
    with pytest.raises(InvalidArgument, match="below every scored question"):
        store_calibration(None, below)
    assert summary([]).helps is False and "no question was scored" in summary([]).why


def separating_nothing(query: str, documents: list[str]) -> list[float]:
    """The unanswerable questions' pools score above every answer: any threshold that declines
    one of them pushes every working answerable question below the line."""
    if re.search(r"topic9\d", query):
        return [0.95 - 0.001 * i for i in range(len(documents))]
    return topic_scorer(query, documents)


@pytest.mark.parametrize(("scorer", "golden", "why"), [
    (separating_nothing, "gold", "no threshold declines more"),
    (topic_scorer, "answers", "no unanswerable question"),
])
def test_calibrate_stores_nothing_when_no_threshold_helps(kb, db, dsn, capsys, scorer, golden, why):
    rng = np.random.default_rng(11)
    import_golden_set(kb, "kb", "answers", [Question(f"a{i}", f"item topic{i}",
                                                     positives=[Positive(text=f"item topic{i} answer")],
                                                     embedding=unit(rng.normal(size=DIMS)))
                                            for i in range(5)])
    with RerankServer(scorer=scorer) as server:
        register(kb, server, "voy")
        rc = main(["--dsn", dsn, "--tenant", TENANT, "calibrate", "kb", "--reranker", "voy", "--top-k", "5",
                   "--golden", golden, "--store"])
        text = capsys.readouterr().out
        assert stored(db) == (None, None)                      # nothing stored, even with --store
        assert rc == 1 and "no threshold helps" in text and why in text
        assert "nothing stored" in text and "no score_threshold is set" in text

        # a threshold stored before is left as it was, and the output says so
        store_threshold(kb, "kb", "voy", 0.4)
        rc = main(["--dsn", dsn, "--tenant", TENANT, "calibrate", "kb", "--reranker", "voy", "--top-k", "5",
                   "--golden", golden, "--store", "--json"])
        out = json.loads(capsys.readouterr().out)
    assert rc == 1 and out["helps"] is False and out["value"] is None and not out["stored"]
    assert why in out["why"] and out["objective"] is not None and out["band"] is not None
    assert out["threshold_in_force"] == {"score_threshold": 0.4, "threshold_reranker": "voy"}
    assert stored(db) == (0.4, "voy")
