"""The schema guards itself: knob values cast to their domains before they store (the CHECK
names the knob), names bounded and unique per tenant, immutable chunk text, write-time
lexical analysis, and writes that leave nothing half-done."""

from __future__ import annotations

import re

import numpy as np
import pgsift
import psycopg
import pytest
from conftest import random_documents, unit
from pgsift import Chunk, Client, Document
from psycopg import errors as pgerrors
from psycopg.types.json import Jsonb

# (knob, bad value): each refused by the knob's own domain
BAD_KNOBS = [
    ("dense_weight", -0.1), ("dense_weight", 1.1), ("rrf_k", 0), ("rrf_k", -5), ("fetch_k", 0),
    ("fetch_k", 1001), ("exact_search_limit", -1), ("bm25_k1", 11), ("bm25_b", 2),
    ("lexical_budget", 10), ("recency_weight", 2), ("per_document_cap", -1), ("mmr_lambda", 1.5),
    ("boost", 0), ("rerank_top_n", 0), ("max_chunk_bytes", 0), ("lexical_scorer", "tfidf"),
    ("recency_half_life", "-1 day"),
]


def _names_knob(exc: psycopg.Error, knob: str) -> bool:
    return knob in (exc.diag.message_primary or "") or knob in (exc.diag.constraint_name or "")


# -- knobs, in SQL ------------------------------------------------------------------------------

@pytest.mark.parametrize("knob, value", BAD_KNOBS, ids=lambda v: str(v))
def test_a_bad_stored_knob_is_refused_by_its_domain(db, knob, value):
    with pytest.raises(pgerrors.CheckViolation) as info:
        db.execute("select sift.create_collection('c', 8, knobs => %s)", [Jsonb({knob: value})])
    assert _names_knob(info.value, knob), info.value.diag.message_primary
    assert db.execute("select count(*) from sift.collections").fetchone()[0] == 0
    db.execute("select sift.create_collection('c', 8)")
    # Written past the functions, straight into the table: the trigger still casts it.
    with pytest.raises(pgerrors.CheckViolation) as info:
        db.execute("update sift.collections set knobs = %s", [Jsonb({knob: value})])
    assert _names_knob(info.value, knob)
    assert db.execute("select knobs from sift.collections").fetchone()[0] == {}


def test_stored_knobs_are_checked_for_name_type_and_scope(db):
    db.execute("select sift.create_collection('c', 8)")
    cases = [({"dense_wieght": 0.3}, 'unknown knob "dense_wieght"', 'did you mean "dense_weight"'),
             ({"dense_weight": "0.3"}, "must be a JSON number", None),
             ({"recency_bias": 0.5}, "cannot be set in the collection", "per call"),
             ({"hybrid": None}, "cannot be switched off", None),
             ({"boost": {"c": 2}}, "not allowed here", None)]
    for knobs, message, hint in cases:
        with pytest.raises(psycopg.Error) as info:
            db.execute("update sift.collections set knobs = %s", [Jsonb(knobs)])
        assert info.value.sqlstate == "SF009", knobs
        assert message in info.value.diag.message_primary, knobs
        if hint:
            assert hint in (info.value.diag.message_hint or ""), knobs


def test_the_recency_ceiling_bounds_the_weight_everywhere(db):
    db.execute("select sift.create_collection('c', 8, knobs => '{\"recency_ceiling\": 0.3}')")
    with pytest.raises(pgerrors.CheckViolation) as info:
        db.execute("select sift.alter_collection('c', '{\"recency_weight\": 0.4}')")
    assert info.value.diag.constraint_name == "recency_weight_within_ceiling"
    with pytest.raises(pgerrors.CheckViolation):
        db.execute("select * from sift.search('c', 'x', knobs => '{\"recency_weight\": 0.4}')")
    db.execute("select sift.alter_collection('c', '{\"recency_weight\": 0.3}')")


def test_boundary_values_are_accepted(db):
    low = {"dense_weight": 0, "rrf_k": 0.001, "fetch_k": 1, "exact_search_limit": 0, "bm25_b": 0,
           "recency_weight": 0, "per_document_cap": 0, "mmr_lambda": 0, "boost": 0.000001}
    high = {"dense_weight": 1, "rrf_k": 100000, "fetch_k": 1000, "exact_search_limit": 1000000, "bm25_b": 1,
            "recency_ceiling": 1, "recency_weight": 1, "per_document_cap": 1000, "mmr_lambda": 1, "boost": 1000000}
    db.execute("select sift.create_collection('low', 1, distance => 'l2', knobs => %s)", [Jsonb(low)])
    db.execute("select sift.create_collection('high', 2000, distance => 'inner_product', knobs => %s)",
               [Jsonb(high)])
    rows = dict(db.execute("select name, knobs from sift.collection_info()").fetchall())
    assert rows == {"low": low, "high": high}


@pytest.mark.parametrize("column, value, constraint", [
    ("embedding_dims", 0, "embedding_dims_valid"), ("embedding_dims", 4001, "embedding_dims_valid"),
    ("distance", "manhattan", "distance_valid"), ("name", "   ", "name_shape"), ("name", "x" * 129, "name_shape"),
    ("tenant", " ", "name_shape")])
def test_table_checks_guard_what_the_functions_pass_through(db, column, value, constraint):
    row = {"tenant": "default", "name": "c", "embedding_dims": 8, column: value}
    with pytest.raises(pgerrors.CheckViolation) as info:
        db.execute("insert into sift.collections (tenant, name, embedding_dims, distance) "
                   "values (%(tenant)s, %(name)s, %(embedding_dims)s, %(distance)s)",
                   {"distance": "cosine", **row})
    assert info.value.diag.constraint_name == constraint


# -- knobs, through the client --------------------------------------------------------------------

@pytest.mark.parametrize("knob, value", BAD_KNOBS, ids=lambda v: str(v))
def test_create_and_alter_raise_invalid_knob(client, knob, value):
    with pytest.raises(pgsift.InvalidKnob) as info:
        client.create_collection("c", embedding_dims=8, **{knob: value})
    assert info.value.knob == knob
    assert client.list_collections() == []
    before = client.create_collection("c", embedding_dims=8)
    with pytest.raises(pgsift.InvalidKnob) as info:
        client.alter_collection("c", **{knob: value})
    assert info.value.knob == knob
    assert client.get_collection("c") == before


@pytest.mark.parametrize("name", ["  ", "x" * 129], ids=["blank", "long"])
def test_a_bad_name_is_an_invalid_argument(client, name):
    with pytest.raises(pgsift.InvalidArgument, match="1 to 128"):
        client.create_collection(name, embedding_dims=8)
    assert client.list_collections() == []


def test_a_long_source_uri_is_an_invalid_argument_naming_it(client):
    client.create_collection("c", embedding_dims=3)
    with pytest.raises(pgsift.InvalidArgument, match="source_uri"):
        client.upsert_documents("c", [Document(source_uri="u" * 10_000, chunks=[Chunk("x", [1, 0, 0])])])
    assert client.search("c", "x").hits == []


def test_unknown_search_language_lists_the_choices(client):
    with pytest.raises(pgsift.UnknownLanguage) as info:
        client.create_collection("c", embedding_dims=8, search_language="klingon")
    assert "klingon" in str(info.value)
    assert "english" in str(info.value) and "spanish" in str(info.value)
    assert isinstance(info.value, pgsift.InvalidArgument)
    client.create_collection("c", embedding_dims=8)
    with pytest.raises(pgsift.UnknownLanguage, match="english"):
        client.alter_collection("c", search_language="klingon")
    assert client.get_collection("c").search_language == "english"


def test_collection_names_are_unique_per_tenant(db):
    acme, globex = Client(db, tenant="acme"), Client(db, tenant="globex")
    acme.create_collection("docs", embedding_dims=8)
    with pytest.raises(pgsift.CollectionExists):
        acme.create_collection("docs", embedding_dims=16)
    other = globex.create_collection("docs", embedding_dims=16)   # another tenant: fine
    assert (other.tenant, other.name, other.embedding_dims) == ("globex", "docs", 16)
    assert [c.embedding_dims for c in acme.list_collections()] == [8]


# -- chunks -----------------------------------------------------------------------------------

def _doc(uri: str, texts: list[str], dims: int = 8, seed: int = 0, title: str | None = None) -> Document:
    rng = np.random.default_rng(seed)
    return Document(source_uri=uri, title=title,
                    chunks=[Chunk(content=t, embedding=unit(rng.normal(size=dims))) for t in texts])


def _lexemes(db, chunk_filter: str = "true") -> set[str]:
    rows = db.execute(f"select unnest(tsvector_to_array(search_vector)) from sift.chunks where {chunk_filter}")
    return {r[0] for r in rows.fetchall()}


def test_chunk_text_is_never_rewritten(db, client):
    client.create_collection("c", embedding_dims=8)
    client.upsert_documents("c", [_doc("a", ["original text"])])
    with pytest.raises(psycopg.Error) as info:
        db.execute("update sift.chunks set content = 'rewritten'")
    assert info.value.sqlstate == "SF005"
    assert db.execute("select content from sift.chunks").fetchall() == [("original text",)]
    db.execute("update sift.chunks set context = 'header'")   # other columns may change
    assert db.execute("select context from sift.chunks").fetchone()[0] == "header"


def test_search_vector_uses_the_collections_language(db, client):
    client.create_collection("es", embedding_dims=8, search_language="spanish")
    client.create_collection("en", embedding_dims=8)
    client.upsert_documents("es", [_doc("a", ["los gatos corriendo por las montañas"])])
    client.upsert_documents("en", [_doc("a", ["los gatos corriendo por las montañas"])])
    es = _lexemes(db, "collection_id = (select collection_id from sift.collections where name = 'es')")
    en = _lexemes(db, "collection_id = (select collection_id from sift.collections where name = 'en')")
    assert {"gat", "corr", "montañ"} <= es
    assert "los" not in es and "las" not in es
    assert {"gato", "corriendo", "montaña"} <= en


def test_title_and_context_are_analysed_too(db, client):
    client.create_collection("c", embedding_dims=8)
    rng = np.random.default_rng(0)
    client.upsert_documents("c", [Document(source_uri="a", title="Refund policy", chunks=[
        Chunk(content="money back", context="billing handbook", embedding=unit(rng.normal(size=8)))])])
    sv = db.execute("select search_vector::text from sift.chunks").fetchone()[0]
    assert re.search(r"'refund':\d+A", sv) and re.search(r"'bill':\d+B", sv), sv
    assert re.search(r"'money':\d+( |$)", sv), sv


def test_wrong_dimension_is_refused_and_leaves_the_previous_version(db, client):
    client.create_collection("c", embedding_dims=8)
    client.upsert_documents("c", [_doc("a", ["one", "two"], title="v1")])
    query = ("select d.document_id, d.title, c.ordinal, c.content, c.embedding::text "
             "from sift.documents d join sift.chunks c using (document_id) order by 3")
    before = db.execute(query).fetchall()
    rng = np.random.default_rng(1)
    bad = Document(source_uri="a", title="v2", chunks=[
        Chunk(content="three", embedding=unit(rng.normal(size=8))),
        Chunk(content="four", embedding=unit(rng.normal(size=5)))])
    with pytest.raises(pgsift.DimensionMismatch) as info:
        client.upsert_documents("c", [bad])
    assert (info.value.got, info.value.expected) == (5, 8)
    assert db.execute(query).fetchall() == before


def test_wrong_dimension_on_a_new_document_leaves_no_row(db, client):
    client.create_collection("c", embedding_dims=8)
    with pytest.raises(pgsift.DimensionMismatch) as info:
        client.upsert_documents("c", [_doc("new", ["text"], dims=9)])
    assert (info.value.got, info.value.expected) == (9, 8)
    assert db.execute("select count(*) from sift.documents").fetchone()[0] == 0
    client.upsert_documents("c", [_doc("new", ["text"])])   # the connection is still good
    assert db.execute("select count(*) from sift.chunks").fetchone()[0] == 1


def test_wrong_dimension_in_sql_is_sf002(db, client):
    client.create_collection("c", embedding_dims=3)
    client.upsert_documents("c", [Document(source_uri="a", chunks=[Chunk("x", [1, 0, 0])])])
    with pytest.raises(psycopg.Error) as info:
        db.execute("update sift.chunks set embedding = '[1,0]'")
    assert info.value.sqlstate == "SF002"
    assert "2 dimensions" in info.value.diag.message_primary
    assert "expects 3" in info.value.diag.message_primary


def test_a_zero_vector_chunk_is_refused_in_a_cosine_collection_only(db, client):
    client.create_collection("cos", embedding_dims=3)
    client.create_collection("l2", embedding_dims=3, distance="l2")
    zero = Document(source_uri="z", chunks=[Chunk("nothing", [0, 0, 0])])
    with pytest.raises(pgsift.InvalidArgument, match="zero vector"):
        client.upsert_documents("cos", [zero])
    assert db.execute("select count(*) from sift.documents").fetchone()[0] == 0
    client.upsert_documents("l2", [zero])   # an l2 distance to the origin is well defined
    assert len(client.search("l2", embedding=[1, 0, 0])) == 1


def test_chunk_text_is_bounded_by_max_chunk_bytes(db, client):
    client.create_collection("c", embedding_dims=3, max_chunk_bytes=1000)
    with pytest.raises(pgsift.InvalidArgument, match="1000"):
        client.upsert_documents("c", [Document(source_uri="big", chunks=[Chunk("é" * 600, [1, 0, 0])])])
    assert db.execute("select count(*) from sift.chunks").fetchone()[0] == 0
    client.upsert_documents("c", [Document(source_uri="ok", chunks=[Chunk("é" * 500, [1, 0, 0])])])
    # the default holds a megabyte: a 100 MB chunk never reaches the table
    client.create_collection("d", embedding_dims=3)
    with pytest.raises(pgsift.InvalidArgument, match="max_chunk_bytes"):
        client.upsert_documents("d", [Document(source_uri="huge", chunks=[Chunk("x" * 2_000_000, [1, 0, 0])])])


def test_alter_collection_language_reanalyses_existing_chunks(db, client):
    client.create_collection("c", embedding_dims=8)
    client.upsert_documents("c", random_documents(np.random.default_rng(0), 3, 8, words=["gatos"]))
    client.upsert_documents("c", [_doc("m", ["las montañas"])])
    assert {"gato", "montaña"} <= _lexemes(db)
    changed = client.alter_collection("c", search_language="spanish")
    assert changed.search_language == "spanish"
    lexemes = _lexemes(db)
    assert {"gat", "montañ"} <= lexemes
    assert not {"gato", "montaña"} & lexemes
    assert {h.source_uri for h in client.search("c", "gato")} == {"doc-0", "doc-1", "doc-2"}
