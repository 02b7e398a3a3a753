"""The finalize stage knob by knob, on hand-built pools: recency, per-document cap with
backfill, MMR, score threshold, lost-in-the-middle order, and sift.finalize itself
(external scores, pool order, ids it must ignore, argument errors)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import numpy as np
import pgsift
import psycopg
import pytest
from conftest import unit
from pgsift import Chunk, Client, Document

DIMS = 4
E = np.eye(DIMS)


def build(client: Client, name: str, docs: dict[str, int | list], **settings) -> dict[str, list[int]]:
    """Create a collection; docs maps a source_uri to its number of chunks (random vectors) or to
    a list of chunk embeddings. Document options go in settings["meta"][uri] as a dict of
    Document fields. Returns source_uri -> chunk ids by ordinal."""
    meta = settings.pop("meta", {})
    client.create_collection(name, embedding_dims=DIMS, **settings)
    rng = np.random.default_rng(len(docs))
    documents = []
    for uri, chunks in docs.items():
        vectors = chunks if isinstance(chunks, list) else [unit(rng.normal(size=DIMS)) for _ in range(chunks)]
        documents.append(Document(source_uri=uri, chunks=[Chunk(content=f"{uri} chunk {i}", embedding=v)
                                                          for i, v in enumerate(vectors)], **meta.get(uri, {})))
    client.upsert_documents(name, documents)
    with client.transaction() as conn:
        rows = conn.execute("select d.source_uri, k.chunk_id from sift.chunks k join sift.documents d "
                            "using (document_id) where d.collection_id = "
                            "(select collection_id from sift.collections where name = %s "
                            "and tenant = sift.current_tenant()) order by k.ordinal", [name]).fetchall()
    ids: dict[str, list[int]] = {}
    for uri, chunk_id in rows:
        ids.setdefault(uri, []).append(chunk_id)
    return ids


def ids_of(result) -> list[int]:
    return [h.chunk_id for h in result]


NOW = datetime.now(timezone.utc)


# -- recency -----------------------------------------------------------------------------------

def test_newer_document_wins_at_equal_scores(client, db):
    ids = build(client, "c", {"old": 1, "new": 1}, recency_field="created", recency_weight=0.5,
                meta={"old": {"created_at": NOW - timedelta(days=365)},
                      "new": {"created_at": NOW - timedelta(days=1)}})
    pool = [ids["old"][0], ids["new"][0]]
    with db.transaction():   # now() is the transaction's start: the same inside finalize
        now = db.execute("select now()").fetchone()[0]
        result = client.finalize("c", pool, [1.0, 1.0])
    assert ids_of(result) == [ids["new"][0], ids["old"][0]]
    new, old = result
    for hit, age in ((new, timedelta(days=1)), (old, timedelta(days=365))):
        age_in_half_lives = (now - NOW + age) / timedelta(days=30)
        assert hit.recency_factor == pytest.approx(1 - 0.5 * (1 - 0.5 ** age_in_half_lives), rel=1e-9)
    assert new.score == pytest.approx(new.base_score * new.recency_factor)
    # Without the field recency is off: pool order, untouched scores.
    plain = client.finalize("c", pool, [1.0, 1.0], recency_field="nothing_here", recency_weight=0)
    assert ids_of(plain) == pool and [h.score for h in plain] == [1.0, 1.0]


def test_recency_is_multiplicative_and_the_weight_is_a_hard_ceiling(client):
    ids = build(client, "c", {"old": 1, "new": 1}, recency_field="created", recency_weight=0.2,
                meta={"old": {"created_at": datetime(1990, 1, 1, tzinfo=timezone.utc)},
                      "new": {"created_at": NOW}})
    pool = [ids["old"][0], ids["new"][0]]
    # A strong ancient document keeps its place over a weaker brand-new one: 1.0 x 0.8 > 0.75.
    assert ids_of(client.finalize("c", pool, [1.0, 0.75])) == pool
    # ... but not over one within the weight: 1.0 x 0.8 < 0.85.
    assert ids_of(client.finalize("c", pool, [1.0, 0.85])) == pool[::-1]


def test_no_usable_date_gets_the_full_penalty(client, db):
    dates = {"iso": "2020-05-17", "stamp": "2020-05-17T10:00:00+02:00", "missing": None, "words": "now",
             "today": "today", "garbage": "soon", "overflow": "2024-13-45", "number": 20200517,
             "infinity": "infinity", "object": {"y": 2020}}
    meta = {uri: {"metadata": {} if v is None else {"published": v}} for uri, v in dates.items()}
    ids = build(client, "c", dict.fromkeys(dates, 1), recency_field="published", recency_weight=0.3,
                recency_half_life=timedelta(days=3650), meta=meta)
    rows = db.execute("select chunk_id, recency_factor from sift.finalize("
                      "collection => 'c', chunk_ids => %s, match_count => 20)",
                      ([v[0] for v in ids.values()],)).fetchall()
    assert len(rows) == len(dates)
    factors = dict(rows)
    for uri, (cid,) in ids.items():
        if uri in ("iso", "stamp"):
            assert 0.75 < factors[cid] < 0.95                  # dated: about half a half-life old
        else:
            assert factors[cid] == pytest.approx(0.7), uri     # no usable date: exactly the full weight
    explained = {r[0]: r[1] for r in db.execute(
        "select chunk_id, recency_date from sift.explain(collection => 'c', query_text => 'chunk', "
        "match_count => 20)").fetchall()}
    assert explained[ids["iso"][0]] is not None
    assert explained[ids["stamp"][0]] == datetime(2020, 5, 17, 8, tzinfo=timezone.utc)
    assert all(explained[ids[u][0]] is None for u in dates if u not in ("iso", "stamp"))


def test_recency_changes_nothing_when_no_document_has_the_field(client):
    rng = np.random.default_rng(4)
    build(client, "c", {f"d{i}": 3 for i in range(10)})
    query = unit(rng.normal(size=DIMS))
    plain = client.search("c", "chunk", embedding=query, top_k=12)
    aged = client.search("c", "chunk", embedding=query, top_k=12, recency_field="published",
                         recency_weight=0.4)
    assert ids_of(aged) == ids_of(plain) and len(plain) == 12
    for a, p in zip(aged, plain):
        assert a.recency_factor == pytest.approx(0.6) and a.score == pytest.approx(p.score * 0.6)


def test_reserved_date_fields(client, db):
    ids = build(client, "c", {"a": 1, "b": 1}, recency_weight=0.5,
                meta={"a": {"created_at": NOW - timedelta(days=300), "modified_at": NOW - timedelta(days=1)},
                      "b": {"created_at": NOW - timedelta(days=100), "modified_at": NOW - timedelta(days=200)}})
    pool = [ids["a"][0], ids["b"][0]]
    assert ids_of(client.finalize("c", pool, [1, 1], recency_field="created")) == [ids["b"][0], ids["a"][0]]
    assert ids_of(client.finalize("c", pool, [1, 1], recency_field="modified")) == pool
    db.execute("update sift.documents set uploaded_at = now() - interval '400 days' where source_uri = 'a'")
    assert ids_of(client.finalize("c", pool, [1, 1], recency_field="uploaded")) == [ids["b"][0], ids["a"][0]]
    # A metadata key may still be called anything else.
    assert client.finalize("c", pool, [1, 1], recency_field="uploaded_at")[0].recency_factor == \
        pytest.approx(0.5)


def test_recency_bias_moves_the_weight_toward_the_ceiling(client, db):
    undated = build(client, "dated", {"x": 1}, recency_field="published", recency_weight=0.2,
                    recency_ceiling=0.6)["x"]

    def factor(collection, ids, **knobs):
        return client.finalize(collection, ids, **knobs)[0].recency_factor

    assert factor("dated", undated) == pytest.approx(0.8)
    assert factor("dated", undated, recency_bias=0.5) == pytest.approx(1 - 0.4)
    assert factor("dated", undated, recency_bias=1) == pytest.approx(1 - 0.6)   # the ceiling, no further
    assert factor("dated", undated, recency_bias=1, recency_weight=0.6) == pytest.approx(0.4)
    # It cannot create recency where there is none: no field, or a weight of 0.
    none = build(client, "none", {"x": 1}, recency_ceiling=1)["x"]
    assert factor("none", none, recency_bias=1) == 1
    zero = build(client, "zero", {"x": 1}, recency_field="published", recency_weight=0,
                 recency_ceiling=1)["x"]
    assert factor("zero", zero, recency_bias=1) == 1


def test_recency_weight_above_the_ceiling_is_refused(client, db):
    ids = build(client, "c", {"x": 1}, recency_field="created", recency_ceiling=0.5)["x"]
    with pytest.raises(pgsift.InvalidKnob) as info:
        client.finalize("c", ids, recency_weight=0.7)
    assert info.value.knob == "recency_weight" and "ceiling" in str(info.value)
    with pytest.raises(pgsift.InvalidKnob) as info:
        client.search("c", "chunk", recency_weight=0.7)
    assert info.value.knob == "recency_weight"
    with pytest.raises(pgsift.InvalidKnob) as info:
        client.alter_collection("c", recency_weight=0.7)
    assert info.value.knob == "recency_weight"
    with pytest.raises(psycopg.errors.CheckViolation):
        db.execute("""select * from sift.search(collection => 'c', knobs => '{"recency_weight": 0.7}')""")
    assert client.alter_collection("c", recency_ceiling=0.8, recency_weight=0.7).settings["recency_weight"] == 0.7


# -- per-document cap ------------------------------------------------------------------------------

def test_cap_skips_then_backfills(client, db):
    ids = build(client, "c", {"a": 5, "b": 1, "c": 1})
    a, b, c = ids["a"], ids["b"], ids["c"]
    pool = [*a, *b, *c]                                      # a's five chunks score highest
    scores = [1.0, 0.9, 0.8, 0.7, 0.6, 0.5, 0.4]
    assert ids_of(client.finalize("c", pool, scores, top_k=4, per_document_cap=2)) == [a[0], a[1], b[0], c[0]]
    # Not enough other documents: the skipped chunks fill the rest, in score order.
    result = client.finalize("c", pool, scores, top_k=6, per_document_cap=2)
    assert ids_of(result) == [a[0], a[1], b[0], c[0], a[2], a[3]]
    assert [h.rank for h in result] == [1, 2, 3, 4, 5, 6]
    # It never reduces the count returned.
    assert len(client.finalize("c", pool, scores, top_k=7, per_document_cap=1)) == 7
    # 0 is off; the default is 5.
    assert ids_of(client.finalize("c", pool, scores, top_k=6, per_document_cap=0)) == pool[:6]
    assert ids_of(client.finalize("c", pool, scores, top_k=6)) == [*a, b[0]]
    assert client.get_collection("c").settings["per_document_cap"] == 5

    # What happened to each chunk (the stage that explain shows).
    rows = {r[0]: r[1:] for r in db.execute(
        "select f.chunk_id, f.cap_status, f.cut_by, f.kept, f.reason "
        "from (select array[c] as cols from sift.collections c where name = 'c') x, "
        "sift._finalize(x.cols, sift._resolve_all(x.cols, '{\"per_document_cap\": 2}'), "
        "%s::bigint[], %s::float8[], 5, null, true) f", (pool, scores)).fetchall()}
    assert rows[a[0]][:3] == ("kept", None, True)
    assert rows[a[2]][:3] == ("backfilled", None, True) and "backfilled" in rows[a[2]][3]
    assert rows[a[3]][:3] == ("capped", "per_document_cap", False)
    assert "per_document_cap" in rows[a[3]][3]


# -- MMR -----------------------------------------------------------------------------------------

def test_mmr_pushes_down_a_near_duplicate(client, db):
    ids = build(client, "c", {"x": [E[0], E[0] + 0.01 * E[1]], "y": [E[2]]}, per_document_cap=0)
    x1, x2, y = *ids["x"], ids["y"][0]
    pool, scores = [x1, x2, y], [1.0, 0.99, 0.5]
    assert ids_of(client.finalize("c", pool, scores, top_k=2)) == [x1, x2]
    assert ids_of(client.finalize("c", pool, scores, top_k=2, mmr_lambda=1)) == [x1, x2]
    assert ids_of(client.finalize("c", pool, scores, top_k=2, mmr_lambda=0.5)) == [x1, y]
    assert ids_of(client.finalize("c", pool, scores, top_k=3, mmr_lambda=0.5)) == [x1, y, x2]
    # Spread only: after the best, the least similar.
    assert ids_of(client.finalize("c", pool, scores, top_k=2, mmr_lambda=0)) == [x1, y]

    rows = {r[0]: r[1:] for r in db.execute(
        "select chunk_id, mmr_similarity, mmr_penalty, cut_by, final_rank from sift.explain("
        "collection => 'c', query_embedding => '[1,0,0,0]', match_count => 2, "
        "knobs => '{\"mmr_lambda\": 0.5}')").fetchall()}
    assert rows[x1] == (0, 0, None, 1)                            # first pick: nothing to resemble
    assert rows[y][0] == pytest.approx(0, abs=1e-6) and rows[y][2:] == (None, 2)
    assert rows[x2][0] == pytest.approx(1, abs=1e-3)              # cut: near-identical to x1
    assert rows[x2][1] == pytest.approx(0.5, abs=1e-3) and rows[x2][2:] == ("mmr", None)


# -- score threshold -------------------------------------------------------------------------------

def test_threshold_drops_and_says_how_many(client):
    ids = build(client, "c", {f"d{i}": 1 for i in range(4)}, recency_field="published", recency_weight=0.9,
                recency_ceiling=0.9)
    pool = [v[0] for v in ids.values()]
    scores = [0.9, 0.5, 0.2, 0.1]
    result = client.finalize("c", pool, scores, score_threshold=0.3)
    assert ids_of(result) == pool[:2]
    assert result.threshold_applied is True and result.below_threshold == 2
    assert all(h.threshold_applied and h.below_threshold == 2 for h in result)
    # The threshold is on relevance, before recency (0.5 x 0.1 = 0.05 stays), and counts the
    # whole pool, not just what match_count would show.
    assert result[1].score == pytest.approx(0.05)
    one = client.finalize("c", pool, scores, score_threshold=0.3, top_k=1)
    assert len(one) == 1 and one.below_threshold == 2
    # Equal to the threshold is kept; no threshold: nothing applied, nothing below.
    assert len(client.finalize("c", pool, scores, score_threshold=0.2)) == 3
    off = client.finalize("c", pool, scores)
    assert len(off) == 4 and off.threshold_applied is False and off.below_threshold == 0
    # Everything below: an empty answer says nothing, explain says why.
    assert len(client.finalize("c", pool, scores, score_threshold=0.95)) == 0
    assert client.finalize("c", pool, scores, score_threshold=0.95).threshold_applied is None


def test_collection_threshold_applies_to_search(client):
    build(client, "c", {f"d{i}": 1 for i in range(6)})
    everything = client.search("c", "chunk", top_k=6)
    cut = everything[2].score
    client.alter_collection("c", score_threshold=cut)
    result = client.search("c", "chunk", top_k=6)
    assert ids_of(result) == ids_of(everything)[:3]
    assert result.threshold_applied and result.below_threshold == 3
    pool = client.explain("c", "chunk", top_k=6)
    assert [c.cut_by for c in pool] == [None] * 3 + ["score_threshold"] * 3
    assert all("below the score threshold" in c.reason for c in pool[3:])
    assert client.alter_collection("c", score_threshold=None).settings["score_threshold"] is None
    assert len(client.search("c", "chunk", top_k=6)) == 6


# -- lost in the middle ----------------------------------------------------------------------------

def test_lost_in_the_middle_puts_the_strongest_at_both_ends(client):
    ids = build(client, "c", {f"d{i}": 1 for i in range(7)}, lost_in_the_middle=True)
    pool = [v[0] for v in ids.values()]
    scores = [0.9, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3]
    result = client.finalize("c", pool, scores, top_k=6)
    assert ids_of(result) == [pool[i] for i in (0, 2, 4, 5, 3, 1)]
    assert [h.rank for h in result] == [1, 3, 5, 6, 4, 2]      # rank is the strength ...
    assert [h.position for h in result] == [1, 2, 3, 4, 5, 6]  # ... position the order shown
    plain = client.finalize("c", pool, scores, top_k=6, lost_in_the_middle=False)
    assert ids_of(plain) == pool[:6] and set(ids_of(plain)) == set(ids_of(result))


# -- sift.finalize itself --------------------------------------------------------------------------

def test_finalize_without_scores_keeps_the_pool_order(client):
    ids = build(client, "c", {f"d{i}": 1 for i in range(5)})
    pool = [v[0] for v in ids.values()][::-1]
    result = client.finalize("c", pool, top_k=3)
    assert ids_of(result) == pool[:3]
    assert [h.base_score for h in result] == pytest.approx([1 / 4, 1 / 5, 1 / 6])  # 1/(rrf_k + i), k = 3
    assert [h.pool_rank for h in result] == [1, 2, 3]
    assert result[0].found_by is None and result[0].legs == []    # finalize knows no legs


def test_finalize_ignores_ids_of_other_collections_and_tenants(client, db):
    mine = build(client, "c", {"a": 2})["a"]
    sibling = build(client, "other", {"a": 2})["a"]
    theirs = build(Client(db, tenant="t2"), "c", {"a": 2})["a"]
    pool = [theirs[0], mine[1], sibling[0], mine[0], mine[1], 10 ** 12]
    result = client.finalize("c", pool, [5, 4, 3, 2, 1, 0])
    assert ids_of(result) == [mine[1], mine[0]]                   # a duplicate counts once, first place
    assert [h.pool_rank for h in result] == [2, 4]


def test_finalize_argument_errors(client, db):
    ids = build(client, "c", {"a": 2})["a"]
    for scores in ([1.0], [1.0, -0.5], [1.0, float("nan")], [1.0, float("inf")], ["x", 1]):
        with pytest.raises(pgsift.InvalidArgument):
            client.finalize("c", ids, scores)
    with pytest.raises(pgsift.InvalidKnob, match="not among the collections"):
        client.finalize("c", ids, boost={"elsewhere": 2})         # a boost for a collection not searched
    # The same knobs object as the search it finalizes: retrieval knobs are accepted, and unused.
    assert ids_of(client.finalize("c", ids, hybrid=False, fetch_k=3)) == ids_of(client.finalize("c", ids))
    with pytest.raises(pgsift.InvalidKnob) as info:
        client.finalize("c", ids, mmr_lambda=1.5)
    assert info.value.knob == "mmr_lambda"
    # The same checks in SQL, for callers that are not this client.
    for scores in ("{1}", "{1,-1}", "{1,NaN}", "{1,NULL}", "{1,Infinity}"):
        with pytest.raises(psycopg.Error) as err:
            db.execute("select * from sift.finalize(collection => 'c', chunk_ids => %s, scores => %s)",
                       (ids, scores))
        assert err.value.sqlstate == "SF003"
    assert db.execute("select count(*) from sift.finalize(collection => 'c', chunk_ids => '{}')").fetchone()[0] == 0
    assert db.execute("select count(*) from sift.finalize(collection => 'c')").fetchone()[0] == 0


async def test_afinalize_matches_finalize(client, dsn):
    ids = build(client, "c", {"a": 3, "b": 2})
    pool = [*ids["b"], *ids["a"]]
    want = client.finalize("c", pool, [0.1, 0.9, 0.5, 0.4, 0.3], top_k=4, per_document_cap=1)
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        got = await pgsift.AsyncClient(conn).finalize("c", pool, [0.1, 0.9, 0.5, 0.4, 0.3], top_k=4,
                                                      per_document_cap=1)
    assert got.hits == want.hits
