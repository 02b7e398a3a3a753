"""The plain search (sift._plain_legs, sift._plain_hits) against the staged pipeline it stands in for.

A search of one collection that uses only the common stages runs each leg once and
one statement after them; every other search runs each stage's own function
(sift._staged_search). The two must agree on every column of every hit, for every
knob the plain path takes: the staged pipeline is the oracle, and a collection with
several chunks a document, translations, page keys, dates and metadata gives each
ranking knob something to do.
"""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import numpy as np
import psycopg
import pytest
from conftest import unit
from pgsift import Chunk, Document
from psycopg.types.json import Jsonb

DIMS = 8
WORDS = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet"]
LANGS = ["en", "de", "fr", None]

SEARCH = """
select to_jsonb(h) from sift.search(collection => 'p', query_text => %(q)s, query_embedding => %(e)s,
                                    match_count => %(n)s, filter => %(f)s, knobs => %(k)s) h
"""
STAGED = """
select to_jsonb(h)
from sift._staged_search(array[sift._collection('p')],
                         sift._resolve_all(array[sift._collection('p')], %(k)s), %(q)s, %(e)s, %(n)s, %(f)s,
                         null, null, null, null) h
"""
PLAIN = """
select count(*)
from sift._plain_plan(sift._collection('p'), (sift._resolve_all(array[sift._collection('p')], %(k)s))[1], true)
"""

# Knobs the plain path takes (each changes what a search returns here) and some it leaves
# to the staged pipeline.
PLAIN_KNOBS = [
    {}, {"hybrid": False}, {"dense_weight": 0.0}, {"dense_weight": 1.0}, {"dense_weight": 0.2, "rrf_k": 60},
    {"fetch_k": 3}, {"per_document_cap": 1}, {"per_document_cap": None}, {"per_document_cap": 2, "fetch_k": 30},
    {"boost": 2.5}, {"score_threshold": 0.12}, {"score_threshold": 0.3, "per_document_cap": 1},
    {"lost_in_the_middle": True}, {"lost_in_the_middle": True, "per_document_cap": 1},
    {"one_translation": False}, {"query_language": "de"}, {"query_language": "fr", "other_language_weight": 0.3},
    {"query_language": "en", "one_translation": False},
    {"recency_field": "created", "recency_weight": 0.4, "recency_half_life": "20 days"},
    {"recency_field": "published", "recency_weight": 0.5, "recency_half_life": "3 days"},
    {"recency_field": "modified", "recency_bias": 0.5},
    {"quoted_text": "require"}, {"bm25_k1": 2.0, "bm25_b": 0.9}, {"lexical_scorer": "ts_rank_cd"},
    {"exact_search_limit": 100000}, {"hnsw_ef_search": 1}, {"max_query_terms": 2},
    {"preset": "pgvector"}, {"dense_weight": 1e-250}, {"dense_weight": 1e-250, "score_threshold": 0.0},
    {"boost": 0.000001, "lost_in_the_middle": True},
]
STAGED_KNOBS = [{"mmr_lambda": 0.5}, {"parent_return": "parent"}, {"neighbours": 1}, {"snippets": "text"},
                {"fusion": "dbsf"}, {"fusion": "convex", "dense_weight": 0.7}]


@pytest.fixture
def plain(client, db):
    """Collection p: 30 documents of 1-4 chunks, in three languages under locale paths (so
    pages have translations), some with a page_key instead, dates of three kinds, and
    metadata to filter on; past exact_search_limit, so the dense leg walks HNSW."""
    rng = np.random.default_rng(11)
    client.create_collection("p", embedding_dims=DIMS, exact_search_limit=20)
    now = datetime.now(timezone.utc)
    docs = []
    for i in range(30):
        lang = LANGS[i % 4]
        page = i // 3
        uri = f"/{lang}/page-{page}" if lang else f"plain-{i}"
        meta = {"n": i, "parity": "even" if i % 2 == 0 else "odd",
                "published": (now - timedelta(days=int(rng.integers(0, 60)))).date().isoformat()}
        if lang is None and i % 8 == 3:
            meta["page_key"] = f"page-{page}"
        chunks = [Chunk(content=" ".join(rng.choice(WORDS, size=int(rng.integers(3, 9)))),
                        embedding=unit(rng.normal(size=DIMS)))
                  for _ in range(int(rng.integers(1, 5)))]
        docs.append(Document(source_uri=uri, title=f"doc {i}", language=lang, metadata=meta, chunks=chunks,
                             created_at=now - timedelta(days=int(rng.integers(0, 90))),
                             modified_at=now - timedelta(days=int(rng.integers(0, 10)))))
    client.upsert_documents("p", docs)
    db.execute("analyze sift.chunks")
    return rng


def _queries(rng: np.random.Generator, n: int) -> list[tuple[str, str | None]]:
    texts = ["", "the of and", "🙂 ?!", "alpha", "bravo charlie", '"delta echo" golf', "hotel -india",
             "juliet alpha bravo charlie delta", '-"alpha bravo"']
    out = []
    for i in range(n):
        vector = None if i % 5 == 4 else "[" + ",".join(f"{x:.6f}" for x in unit(rng.normal(size=DIMS))) + "]"
        out.append((texts[i % len(texts)], vector))
    return out


def _both(db, params: dict[str, object]) -> tuple[list[object], list[object]]:
    # One transaction: recency's now() is the same for both.
    with db.transaction():
        return db.execute(SEARCH, params).fetchall(), db.execute(STAGED, params).fetchall()


def test_plain_search_equals_the_staged_pipeline(db, plain, figure):
    compared = hits = 0
    for knobs in PLAIN_KNOBS:
        assert db.execute(PLAIN, {"k": Jsonb(knobs)}).fetchone()[0] == 1, knobs
        for text, vector in _queries(plain, 9):
            for n in (1, 4, 10, 40):
                for flt in ({}, {"parity": "even"}):
                    if vector is None and text in ("", "the of and", "🙂 ?!"):
                        continue   # nothing to search with: both refuse or return nothing
                    params = {"q": text, "e": vector, "n": n, "f": Jsonb(flt), "k": Jsonb(knobs)}
                    got, want = _both(db, params)
                    assert got == want, (knobs, text, vector is None, n, flt)
                    compared += 1
                    hits += len(got)
    figure("plain searches compared with the staged pipeline", compared)
    figure("hits compared", hits)
    assert hits > 5000


def test_searches_the_plain_path_cannot_take_run_staged(db, plain, client):
    for knobs in STAGED_KNOBS:
        assert db.execute(PLAIN, {"k": Jsonb(knobs)}).fetchone()[0] == 0, knobs
        for text, vector in _queries(plain, 5):
            if vector is None:
                continue
            got, want = _both(db, {"q": text, "e": vector, "n": 5, "f": Jsonb({}), "k": Jsonb(knobs)})
            assert got == want, knobs
    # Question vectors are a dense leg of their own: the staged pipeline searches them.
    vector = "[" + ",".join(f"{x:.6f}" for x in unit(plain.normal(size=DIMS))) + "]"
    db.execute("insert into sift.question_vectors (chunk_id, ordinal, collection_id, embedding) "
               "select k.chunk_id, 0, k.collection_id, %s::vector from sift.chunks k "
               "join sift.collections c using (collection_id) where c.name = 'p' order by k.chunk_id limit 1",
               [vector])
    assert db.execute(PLAIN, {"k": Jsonb({})}).fetchone()[0] == 0
    got, want = _both(db, {"q": "alpha", "e": vector, "n": 5, "f": Jsonb({}), "k": Jsonb({})})
    assert got == want
    # The question (the query vector itself) placed its chunk first in the dense leg.
    assert [h[0]["leg_details"]["dense"].get("question") for h in got if h[0]["dense_rank"] == 1] == [0]


def test_plain_search_in_an_added_active_space(db, plain, client):
    """switch_vector_space: the plain path walks the active space's own vectors."""
    ids = [r[0] for r in db.execute("select k.chunk_id from sift.chunks k join sift.collections c "
                                    "using (collection_id) where c.name = 'p' order by 1").fetchall()]
    client.add_vector_space("p", "small", dimensions=4)
    client.write_space_vectors("p", "small", ids, [unit(plain.normal(size=4)) for _ in ids])
    client.switch_vector_space("p", "small")
    assert db.execute(PLAIN, {"k": Jsonb({})}).fetchone()[0] == 1
    for text, _ in _queries(plain, 6):
        vector = "[" + ",".join(f"{x:.6f}" for x in unit(plain.normal(size=4))) + "]"
        got, want = _both(db, {"q": text, "e": vector, "n": 7, "f": Jsonb({}), "k": Jsonb({})})
        assert got == want
        assert all(h[0]["dense_space"] == "small" for h in got if h[0]["dense_rank"] is not None)


def test_a_sessions_float_digits_never_cut_what_a_search_computes(db, plain):
    """leg_details turns floats into JSON inside the search: a session's extra_float_digits
    (one a pooler left behind) does not cut them, on the plain path or the staged one. (The
    row's own float columns are written by the session's setting as they leave the server:
    docs/trust.md says how to guard those.)"""
    vector = "[" + ",".join(f"{x:.6f}" for x in unit(plain.normal(size=DIMS))) + "]"
    details = """select (leg_details)::text from sift.search(collection => 'p', query_text => 'alpha bravo',
                   query_embedding => %(e)s, match_count => 8, knobs => %(k)s) order by rank"""
    for knobs in ({}, {"fusion": "dbsf"}):
        params = {"e": vector, "k": Jsonb(knobs)}
        want = db.execute(details, params).fetchall()
        db.execute("set extra_float_digits = -15")
        try:
            assert db.execute(details, params).fetchall() == want, knobs
        finally:
            db.execute("reset extra_float_digits")
        assert any(len(str(w)) > 120 for w in want)   # full digits there to cut


READY = "select count(*) from sift._plain_ready(%(c)s, %(e)s, %(n)s)"
READY_WITH = "select count(*) from sift._plain_ready(%(c)s, %(e)s, %(n)s, %(k)s)"
# A knob that changes nothing (dense_weight at its default) and is no switch: the call takes the
# full path (sift._collections, sift._resolve_all, sift._check_query, sift._plain_plan).
FULL = {"dense_weight": 0.5}
BY_NAME = """
select to_jsonb(h) from sift.search(collection => %(c)s, query_text => %(q)s, query_embedding => %(e)s,
                                    match_count => %(n)s, filter => %(f)s, knobs => %(k)s) h
"""


def _outcome(db, params: dict[str, object]) -> tuple[str, object]:
    """What a search gives: its rows, or its error's SQLSTATE and message."""
    try:
        with db.transaction():
            return "rows", db.execute(BY_NAME, params).fetchall()
    except psycopg.Error as e:
        return e.sqlstate or "", str(e.diag.message_primary)


def test_the_common_call_takes_one_statement_and_the_full_paths_answer(db, plain):
    """A call with one collection and no knob is found, checked and planned by sift._plain_ready;
    the same call with a knob that changes nothing (FULL) takes the full path
    (sift._collections, sift._resolve_all, sift._check_query, sift._plain_plan). Both give the
    same rows, and every argument the one statement cannot vouch for leaves it to the full path,
    which raises the same error either way."""
    good = "[" + ",".join(f"{x:.6f}" for x in unit(plain.normal(size=DIMS))) + "]"
    base = {"c": "p", "q": "alpha bravo", "e": good, "n": 10, "f": Jsonb({})}
    assert db.execute(READY, base).fetchone()[0] == 1
    for text, vector in _queries(plain, 9):
        for flt in ({}, {"parity": "even"}):
            params = {**base, "q": text, "e": vector, "f": Jsonb(flt)}
            fast = _outcome(db, {**params, "k": Jsonb({})})
            full = _outcome(db, {**params, "k": Jsonb(FULL)})
            assert fast == full, (text, vector is None, flt)
    # Each bad argument: no row from the one statement, the same error on both paths.
    zero = "[" + ",".join("0" for _ in range(DIMS)) + "]"
    bad = [({"e": "[1,2,3]"}, "SF002"), ({"e": zero}, "SF003"), ({"n": -1}, "23514"), ({"n": 1001}, "23514"),
           ({"n": None}, "23514"), ({"c": "nope"}, "SF001"), ({"c": "p" * 200}, "SF003"), ({"c": None}, "SF003"),
           ({"q": "alpha " * 200_001}, "SF003")]
    for change, state in bad:
        params = {**base, **change}
        if "q" not in change:   # the text is checked by sift.search before the one statement
            assert db.execute(READY, params).fetchone()[0] == 0, change
        fast = _outcome(db, {**params, "k": Jsonb({})})
        assert fast[0] == state, (change, fast)
        assert fast == _outcome(db, {**params, "k": Jsonb(FULL)}), change
    # The text's limit at its edge: both paths hold the same one (sift.search checks it before the
    # one statement, sift._check_query on the full path).
    for size, state in ((1_000_000, "rows"), (1_000_001, "SF003")):
        params = {**base, "q": ("alpha " * size)[:size]}
        fast = _outcome(db, {**params, "k": Jsonb({})})
        assert fast[0] == state and fast == _outcome(db, {**params, "k": Jsonb(FULL)}), size
    # A malformed filter passes the one statement and is refused right after it, as the full
    # path refuses it, with or without anything to search with.
    for params in ({**base, "f": Jsonb({"$bogus": 1})}, {**base, "q": "", "e": None, "f": Jsonb({"$bogus": 1})}):
        fast = _outcome(db, {**params, "k": Jsonb({})})
        assert fast[0] == "SF003" and fast == _outcome(db, {**params, "k": Jsonb(FULL)})
    # The tenant's max_match_count: the one statement declines past it, the full path says why.
    db.execute("insert into sift.tenant_limits (tenant, max_match_count) values (null, 5)")
    try:
        assert db.execute(READY, {**base, "n": 6}).fetchone()[0] == 0
        assert db.execute(READY, {**base, "n": 5}).fetchone()[0] == 1
        fast = _outcome(db, {**base, "n": 6, "k": Jsonb({})})
        assert fast[0] == "SF015" and fast == _outcome(db, {**base, "n": 6, "k": Jsonb(FULL)})
    finally:
        db.execute("delete from sift.tenant_limits where tenant is null")
    # A time limit is armed by the full path only: the one statement leaves it that way.
    db.execute("insert into sift.tenant_limits (tenant, call_time_limit) values (null, '30 s')")
    try:
        assert db.execute(READY, base).fetchone()[0] == 0
        assert _outcome(db, {**base, "k": Jsonb({})})[0] == "rows"
    finally:
        db.execute("delete from sift.tenant_limits where tenant is null")
    # A deadline a session left set (a pooler's previous client, or garbage): the full path
    # clears it for this search, so the one statement declines while it is there.
    db.execute("set pgsift.deadline = 'garbage'")
    try:
        assert db.execute(READY, base).fetchone()[0] == 0
        assert _outcome(db, {**base, "k": Jsonb({})}) == _outcome(db, {**base, "k": Jsonb(FULL)})
        assert _outcome(db, {**base, "k": Jsonb({})})[0] == "rows"
    finally:
        db.execute("reset pgsift.deadline")
    assert db.execute(READY, base).fetchone()[0] == 1


def test_switches_in_the_call_take_the_one_statement_too(db, plain):
    """Knobs that are only switches (true or false for a boolean knob a call may set, such as
    {"hybrid": false} for the dense leg alone) are cast onto the collection's set in the one
    statement, with the rows the full path gives for the same switches. Anything else in knobs
    (a null, a string, a value per collection, a preset, an unknown name, a knob that is not a
    switch, knobs that are not an object) is left to the full path, which checks it."""
    good = "[" + ",".join(f"{x:.6f}" for x in unit(plain.normal(size=DIMS))) + "]"
    base = {"c": "p", "q": "alpha bravo", "e": good, "n": 10, "f": Jsonb({})}
    switches = ({"hybrid": False}, {"hybrid": True}, {"lost_in_the_middle": True}, {"one_translation": False},
                {"rerank": True}, {"hybrid": False, "lost_in_the_middle": True, "rerank": False})
    dense_alone = []
    for switch in switches:
        assert db.execute(READY_WITH, {**base, "k": Jsonb(switch)}).fetchone()[0] == 1, switch
        for text, vector in _queries(plain, 5):
            params = {**base, "q": text, "e": vector}
            fast = _outcome(db, {**params, "k": Jsonb(switch)})
            assert fast[0] == "rows" and fast == _outcome(db, {**params, "k": Jsonb({**switch, **FULL})}), switch
            if switch == {"hybrid": False} and text and vector is not None:
                dense_alone.append(fast[1] != _outcome(db, {**params, "k": Jsonb({})})[1])
    assert any(dense_alone)   # the switch is cast onto the set: the dense leg alone ranks otherwise
    left = ((Jsonb({"hybrid": None}), "SF009"), (Jsonb({"hybrid": "false"}), "SF009"),
            (Jsonb({"hybrid": {"p": False}}), "rows"), (Jsonb({"preset": "pgvector"}), "rows"),
            (Jsonb({"nope": True}), "SF009"), (Jsonb({"mmr_lambda": 0.5}), "rows"), (Jsonb([]), "SF009"),
            (Jsonb("hybrid"), "SF009"))
    for knobs, state in left:
        assert db.execute(READY_WITH, {**base, "k": knobs}).fetchone()[0] == 0, knobs.obj
        assert _outcome(db, {**base, "k": knobs})[0] == state, knobs.obj


def test_the_common_call_under_row_level_security(db, plain, connect_as):
    """As a gateway: bound to the collection's tenant, the one statement and the full path give
    the same rows under row-level security; unbound, both refuse alike (no tenant), and a call
    naming no collection is refused for that first, as it always was."""
    gateway = connect_as("t_gateway")
    vector = "[" + ",".join(f"{x:.6f}" for x in unit(plain.normal(size=DIMS))) + "]"
    base = {"c": "p", "q": "alpha bravo", "e": vector, "n": 10, "f": Jsonb({})}

    def bound(params: dict[str, object]) -> tuple[str, object]:
        try:
            with gateway.transaction():
                gateway.execute("select sift.set_tenant('default')")
                return "rows", gateway.execute(BY_NAME, params).fetchall()
        except psycopg.Error as e:
            return e.sqlstate or "", str(e.diag.message_primary)

    fast = bound({**base, "k": Jsonb({})})
    assert fast[0] == "rows" and len(fast[1]) == 10
    assert fast == bound({**base, "k": Jsonb(FULL)})
    assert fast == _outcome(db, {**base, "k": Jsonb({})})   # the operator's, tenant "default"
    dense = bound({**base, "k": Jsonb({"hybrid": False})})   # a switch: the one statement too
    assert dense[0] == "rows" and dense == bound({**base, "k": Jsonb({"hybrid": False, **FULL})}) != fast
    for change, state in (({}, "SF010"), ({"c": None}, "SF003")):
        unbound = _outcome(gateway, {**base, **change, "k": Jsonb({})})
        assert unbound[0] == state, (change, unbound)
        assert unbound == _outcome(gateway, {**base, **change, "k": Jsonb(FULL)})
