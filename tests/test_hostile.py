"""Hostile input at every public entry point: odd but valid input gets an answer, invalid
input a typed pgsift error naming what is wrong; never a raw database error, a stack
trace from deep inside, or a half-written document.

Each value below goes into each argument it could be passed as, through the Python
client (which adds its own checks) and straight into the SQL functions (which must hold
without them). An outcome is either a result or a PgsiftError (SQL: a SQLSTATE that
pgsift raises on purpose); anything else fails the test, naming the call.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pgsift
import psycopg
import pytest
from pgsift import Chunk, Client, Document
from pgsift.errors import SQLSTATES
from psycopg.types.json import Jsonb

DIMS = 4

TEXTS = [
    "", " ", "\t\n", "!!!???...", "😀🚀", "the of and a", "a & b | !c", "a:* <-> (((", "'; drop table sift.chunks; --",
    "\\", '"unterminated', "x" * 10_000, "refund\x00s", "null", "NaN", "-1", "\u202eمرحبا", "ø" * 200, "%s %(x)s",
]
NUMBERS: list[Any] = [-1, 0, 1001, 10**12, 1.5, "10", None, True, float("nan")]
EMBEDDINGS: list[Any] = [[], [float("nan")] * DIMS, [0.0] * DIMS, [1.0] * (DIMS + 1), ["a"] * DIMS, [1e40] * DIMS,
                         [[1.0] * DIMS], "[1,2,3,4]", 7]
KNOB_VALUES: list[Any] = ["abc", -1, 10**12, None, [], {"x": 1}, True, 1e308, ""]
KNOBS = ["dense_weight", "rrf_k", "fetch_k", "per_document_cap", "mmr_lambda", "recency_half_life",
         "recency_field", "lexical_budget", "max_query_terms", "score_threshold", "boost", "preset"]


@pytest.fixture
def hostile(db):
    client = Client(db)
    client.create_collection("c", embedding_dims=DIMS)
    rng = np.random.default_rng(0)
    client.upsert_documents("c", [
        Document(source_uri=f"d{i}", title="refund policy", chunks=[
            Chunk(content=f"refunds take {i} days, the of and a", embedding=rng.normal(size=DIMS) + 0.1)])
        for i in range(5)])
    return client


def _typed_or_answer(call: Callable[[], Any], label: str, wrong: list[str]) -> None:
    try:
        call()
    except pgsift.PgsiftError:
        pass
    except Exception as exc:   # exactly what the test looks for
        wrong.append(f"{label}: {type(exc).__module__}.{type(exc).__name__}: {str(exc)[:200]}")


def test_hostile_input_through_the_client(db, hostile, figure):
    client = hostile
    calls: list[tuple[str, Callable[[], Any]]] = []
    vec = [1.0, 0.5, 0.2, 0.1]
    for t in TEXTS:
        calls += [
            (f"search(collection={t[:20]!r})", lambda t=t: client.search(t, "refund", embedding=vec)),
            (f"search(query={t[:20]!r})", lambda t=t: client.search("c", t, embedding=vec)),
            (f"search lexical only (query={t[:20]!r})", lambda t=t: client.search("c", t)),
            (f"search(filter key/value {t[:20]!r})", lambda t=t: client.search("c", "refund", filter={t: t})),
            (f"explain(query={t[:20]!r})", lambda t=t: client.explain("c", t, embedding=vec)),
            (f"candidates(query={t[:20]!r})", lambda t=t: client.candidates("c", t)),
            (f"knobs(knob named {t[:20]!r})", lambda t=t: client.knobs("c", **{t: 1})),
            (f"search(knob named {t[:20]!r})", lambda t=t: client.search("c", "x", **{t: 1})),
            (f"get_collection({t[:20]!r})", lambda t=t: client.get_collection(t)),
            (f"delete_document(uri={t[:20]!r})", lambda t=t: client.delete_document("c", t)),
            (f"create/drop collection {t[:20]!r}",
             lambda t=t: (client.create_collection(t, embedding_dims=DIMS), client.drop_collection(t))),
            (f"create_collection(search_language={t[:20]!r})",
             lambda t=t: client.create_collection("lang", embedding_dims=DIMS, search_language=t)),
            (f"alter_collection(description={t[:20]!r})", lambda t=t: client.alter_collection("c", description=t)),
            (f"upsert(uri, title, text = {t[:20]!r})", lambda t=t: client.upsert_documents(
                "c", [Document(source_uri=t, title=t, chunks=[Chunk(content=t, embedding=vec, context=t)])])),
            (f"register_reranker(alias={t[:20]!r})",
             lambda t=t: client.register_reranker(t, "voyage", secret_ref="voyage")),
            (f"register_reranker(secret_ref={t[:20]!r})",
             lambda t=t: client.register_reranker("r", "voyage", secret_ref=t)),
            (f"register_reranker(base_url={t[:20]!r})",
             lambda t=t: client.register_reranker("r", "tei", base_url=t)),
        ]
    for n in NUMBERS:
        calls += [
            (f"search(top_k={n!r})", lambda n=n: client.search("c", "refund", embedding=vec, top_k=n)),
            (f"finalize(top_k={n!r})", lambda n=n: client.finalize("c", [1, 2], top_k=n)),
            (f"finalize(scores=[{n!r}])", lambda n=n: client.finalize("c", [1], [n])),
            (f"finalize(chunk_ids=[{n!r}])", lambda n=n: client.finalize("c", [n])),
            (f"create_collection(embedding_dims={n!r})", lambda n=n: client.create_collection("n", embedding_dims=n)),
        ]
    for e in EMBEDDINGS:
        calls += [
            (f"search(embedding={str(e)[:30]})", lambda e=e: client.search("c", "refund", embedding=e)),
            (f"upsert(embedding={str(e)[:30]})", lambda e=e: client.upsert_documents(
                "c", [Document(source_uri="e", chunks=[Chunk(content="x", embedding=e)])])),
        ]
    for k in KNOBS:
        for v in KNOB_VALUES:
            calls += [
                (f"search({k}={v!r})", lambda k=k, v=v: client.search("c", "refund", embedding=vec, **{k: v})),
                (f"alter_collection({k}={v!r})", lambda k=k, v=v: client.alter_collection("c", **{k: v})),
            ]
    wrong: list[str] = []
    for label, call in calls:
        _typed_or_answer(call, label, wrong)
    assert wrong == [], "\n".join(wrong)
    # Nothing half-written: every document has its chunks, every chunk its document.
    assert db.execute("select count(*) from sift.documents d where not exists "
                      "(select 1 from sift.chunks k where k.document_id = d.document_id)").fetchone() == (0,)
    # The collection still answers, once the valid but odd knob values stored above are reset.
    client.alter_collection("c", reset=[k for k in KNOBS if k != "preset"])
    assert len(client.search("c", "refund", embedding=vec)) > 0
    figure("hostile inputs tried through the Python client, each typed or answered", len(calls))


SQL_CALLS = [
    ("sift.search(collection => %(t)s, query_text => 'refund')", "text"),
    ("sift.search(collection => 'c', query_text => %(t)s)", "text"),
    ("sift.search(collection => 'c', query_text => 'refund', filter => %(j)s)", "json"),
    ("sift.search(collection => 'c', query_text => 'refund', knobs => %(j)s)", "json"),
    ("sift.explain(collection => 'c', query_text => %(t)s)", "text"),
    ("sift.candidates(collection => 'c', query_text => %(t)s)", "text"),
    ("sift.knobs(collection => %(t)s)", "text"),
    ("sift.knobs(collection => 'c', knobs => %(j)s)", "json"),
    ("sift.lexical_query(query_text => %(t)s)", "text"),
    ("sift.lexical_query(query_text => 'a b c', max_terms => %(n)s)", "number"),
    ("sift.search(collection => 'c', query_text => 'refund', match_count => %(n)s)", "number"),
    ("sift.finalize(collection => 'c', chunk_ids => array[1, 2], match_count => %(n)s)", "number"),
    ("sift.collection_info(collection => %(t)s)", "text"),
    ("sift.delete_document(collection => 'c', source_uri => %(t)s)", "text"),
    ("sift.alter_collection(collection => 'c', settings => %(j)s)", "json"),
    ("sift.create_collection(collection => %(t)s, embedding_dims => 4)", "text"),
    ("sift.create_collection(collection => 'x', embedding_dims => %(n)s)", "number"),
    ("sift.set_tenant(tenant => %(t)s)", "text"),
]
JSONS: list[Any] = [{}, [], "x", 1, None, {"": 1}, {"dense_weight": "abc"}, {"preset": "nope"}, {"k": "\\u0000"},
                    {"$": {"$": [1, {"a": None}]}}, {"fetch_k": 10**20}, {"x" * 5000: 1}]
SQL_NUMBERS = [-1, 0, 1001, 2**31 - 1]


def test_hostile_input_straight_into_sql(db, hostile, figure):
    tried = 0
    wrong = []
    for statement, kind in SQL_CALLS:
        values: list[Any] = {"text": TEXTS, "json": JSONS, "number": SQL_NUMBERS}[kind]
        for v in values:
            if kind == "text" and "\x00" in v:
                continue   # a NUL cannot be sent in a text parameter at all (libpq refuses it first)
            params = {"t": v, "j": Jsonb(v), "n": v}
            tried += 1
            try:
                with db.transaction():
                    db.execute(f"select * from {statement}", params).fetchall()
                    raise psycopg.Rollback()
            except psycopg.Error as exc:
                if exc.sqlstate not in SQLSTATES:
                    wrong.append(f"{statement} with {str(v)[:30]!r}: {exc.sqlstate} {str(exc)[:200]}")
    assert wrong == [], "\n".join(wrong)
    figure("hostile inputs tried straight into the SQL functions, each typed or answered", tried)
