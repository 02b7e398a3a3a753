"""Hostile input at every public entry point: odd but valid input gets an answer, invalid
input a typed pgsift error naming what is wrong; never a raw database error, a stack
trace from deep inside, or a half-written document.

Each value below goes into each argument it could be passed as, through the Python
client (which adds its own checks) and straight into the SQL functions (which must hold
without them). An outcome is either a result or a PgsiftError (SQL: a SQLSTATE that
pgsift raises on purpose); anything else fails the test, naming the call.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import numpy as np
import pgsift
import pgsift.calls
import pgsift.errors
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


# -- sizes past the limits: typed errors naming the limit, the largest allowed still working --------

MOST_ITEMS = 10_000   # a list in a filter (sift.filter_path)
MOST_DEPTH = 64       # nesting of a filter or metadata (sift._check_nesting; pgsift.calls.MAX_JSON_DEPTH)


def _nested(depth: int, leaf: Any, key: str = "k") -> Any:
    """A value `depth` levels deep ({key: {key: ... leaf}}), built without recursion."""
    for _ in range(depth):
        leaf = {key: leaf}
    return leaf


def _nested_text(depth: int, kind: str) -> str:
    """The same as JSON text, for SQL: a value inside `depth` containers (fields, $or lists, $not)."""
    if kind == "field":
        return '{"k": ' * (depth - 1) + '{"a": 1}' + "}" * (depth - 1)
    if kind == "or":       # each $or is two levels: the object and its list
        return '{"$or": [' * ((depth - 1) // 2) + '{"a": 1}' + "]}" * ((depth - 1) // 2)
    return '{"$not": ' * (depth - 1) + '{"a": 1}' + "}" * (depth - 1)


def _sql_error(db: psycopg.Connection, statement: str, params: list[Any]) -> psycopg.Error:
    with pytest.raises(psycopg.Error) as info, db.transaction():
        db.execute(statement, params).fetchall()
    return info.value


def test_a_long_in_list_is_a_typed_error_naming_the_limit(db, hostile):
    client = hostile
    big = {"year": {"$in": list(range(15_000))}}
    assert 90_000 < len(json.dumps(big)) < 100_000   # the 94 KB of issue 37, as the client sends it
    with pytest.raises(pgsift.InvalidArgument, match="list of 15,000 items.* at most 10,000"):
        client.search("c", "refund", filter=big)
    with pytest.raises(pgsift.InvalidArgument, match="at most 10,000"):
        client.delete_documents("c", filter=big)
    for statement in ("select sift.filter_path(%s)",
                      "select * from sift.search(collection => 'c', query_text => 'refund', filter => %s)"):
        err = _sql_error(db, statement, [Jsonb(big)])
        assert err.sqlstate == "SF003" and "at most 10,000" in str(err), (statement, err)
    for flt in ({"year": {"$nin": list(range(MOST_ITEMS + 1))}}, {"year": list(range(MOST_ITEMS + 1))},
                {"$or": [{} for _ in range(MOST_ITEMS + 1)]}, {"$and": [{"$and": [{}] * (MOST_ITEMS + 1)}]}):
        err = _sql_error(db, "select sift.filter_path(%s)", [Jsonb(flt)])
        assert err.sqlstate == "SF003" and "list of 10,001 items" in str(err), list(flt)
    # The largest list allowed compiles to a shallow path and matches its last value.
    most = {"n": {"$in": list(range(MOST_ITEMS))}}
    assert db.execute("select jsonb_path_match(%s, sift.filter_path(%s))",
                      [Jsonb({"n": MOST_ITEMS - 1}), Jsonb(most)]).fetchone() == (True,)
    assert client.search("c", "refund", filter=most).hits == []
    assert len(client.search("c", "refund", filter={"$or": [{"n": i} for i in range(2_000)] + [{}]})) > 0


@pytest.mark.parametrize("depth", [500, 900])
def test_deep_filters_and_metadata_are_typed_errors_naming_the_limit(db, hostile, depth):
    client = hostile
    vec = [1.0, 0.5, 0.2, 0.1]
    flt = {"$or": [_nested(depth, 1)]}
    with pytest.raises(pgsift.InvalidArgument, match="nests more than 64 levels.*at most 64 levels"):
        client.search("c", "refund", embedding=vec, filter=flt)
    with pytest.raises(pgsift.InvalidArgument, match="at most 64 levels"):
        client.delete_documents("c", filter=_nested(depth, 1))
    with pytest.raises(pgsift.InvalidArgument, match="the metadata of 'deep' nests more than 64 levels"):
        client.upsert_documents("c", [Document(source_uri="deep", metadata=_nested(depth, 1),
                                               chunks=[Chunk(content="x", embedding=vec)])])
    with pytest.raises(pgsift.InvalidArgument, match="at most 64 levels"):
        client.search("c", "refund", **{"boost": _nested(depth, 1)})
    for kind in ("field", "or", "not"):
        text = _nested_text(depth, kind)
        for statement in ("select sift.filter_path(%s::jsonb)",
                          "select * from sift.search(collection => 'c', query_text => 'refund', filter => %s::jsonb)"):
            err = _sql_error(db, statement, [text])
            assert err.sqlstate == "SF003" and "nests more than 64 levels" in str(err), (kind, statement, err)
    err = _sql_error(db, "insert into sift.documents (collection_id, source_uri, metadata) "
                         "select collection_id, 'deep', %s::jsonb from sift.collections where name = 'c' "
                         "returning document_id", ['{"a": ' * depth + "1" + "}" * depth])
    assert err.sqlstate == "SF003" and 'the metadata of document "deep" nests more than 64 levels' in str(err)
    assert db.execute("select count(*) from sift.documents where source_uri = 'deep'").fetchone() == (0,)


def test_the_deepest_filter_and_metadata_allowed_still_work(db, hostile):
    client = hostile
    vec = [1.0, 0.5, 0.2, 0.1]
    # 64 levels: a value inside 64 containers; one more is refused, on both sides alike.
    meta = {"m": _nested(MOST_DEPTH - 1, "leaf")}
    client.upsert_documents("c", [Document(source_uri="deepest", metadata=meta,
                                           chunks=[Chunk(content="refunds deepest", embedding=vec)])])
    path = ".".join(["m"] + ["k"] * (MOST_DEPTH - 1))
    hits = client.search("c", "refund", embedding=vec, filter={path: "leaf"})
    assert [h.source_uri for h in hits] == ["deepest"] and hits[0].metadata == meta
    assert client.search("c", "refund", filter=_nested(MOST_DEPTH - 1, {"a": 1})).hits == []
    with pytest.raises(pgsift.InvalidArgument, match="at most 64 levels"):
        client.search("c", "refund", filter=_nested(MOST_DEPTH, {"a": 1}))
    with pytest.raises(pgsift.InvalidArgument, match="at most 64 levels"):
        client.upsert_documents("c", [Document(source_uri="deeper", metadata={"m": _nested(MOST_DEPTH, "leaf")},
                                               chunks=[Chunk(content="x", embedding=vec)])])
    # Compiling the deepest filters of each kind takes well under a quarter of PostgreSQL's
    # default max_stack_depth (2 MB), called from a search.
    with db.transaction():
        db.execute("set local max_stack_depth = '512kB'")
        for kind in ("field", "or", "not"):
            text = _nested_text(MOST_DEPTH, kind)
            assert db.execute("select sift.filter_path(%s::jsonb) is not null", [text]).fetchone() == (True,)
            db.execute("select * from sift.search(collection => 'c', query_text => 'refund', filter => %s::jsonb)",
                       [text]).fetchall()
            err = _sql_error(db, "select sift.filter_path(%s::jsonb)", [_nested_text(MOST_DEPTH + 2, kind)])
            assert err.sqlstate == "SF003", kind
        db.execute("select * from sift.search(collection => 'c', query_text => 'refund', filter => %s)",
                   [Jsonb({"n": {"$in": list(range(MOST_ITEMS))}})]).fetchall()
    assert pgsift.calls.MAX_JSON_DEPTH == MOST_DEPTH


def test_a_nan_vector_is_a_typed_error(db, hostile):
    client = hostile
    nan = np.array([np.nan, 0.5, 0.2, 0.1])
    for bad in (nan, np.array([np.inf, 0.5, 0.2, 0.1], dtype=np.float32)):
        with pytest.raises(pgsift.InvalidArgument, match="NaN or infinity"):
            client.search("c", "refund", embedding=bad)
        with pytest.raises(pgsift.InvalidArgument, match="NaN or infinity"):
            client.upsert_documents("c", [Document(source_uri="nan", chunks=[Chunk(content="x", embedding=bad)])])
    # Past the client's own check, pgvector refuses it as text and as binary, before pgsift runs: 22000,
    # documented, and typed by the client's translation.
    from pgvector import Vector
    from pgvector.psycopg import register_vector
    register_vector(db)
    for form in ("%s::text::vector", "%b", "%t"):
        param: Any = "[NaN,1,2,3]" if "text" in form else Vector(nan.astype(np.float32))
        err = _sql_error(db, f"select * from sift.search(collection => 'c', query_text => 'refund', "
                             f"query_embedding => {form})", [param])
        assert err.sqlstate == "22000" and "NaN not allowed in vector" in str(err), form
        assert isinstance(pgsift.errors.translate(err), pgsift.InvalidArgument)
    assert "22000" in SQLSTATES
    err = _sql_error(db, "select '[1,Infinity]'::vector", [])
    assert err.sqlstate == "22000" and isinstance(pgsift.errors.translate(err), pgsift.InvalidArgument)
