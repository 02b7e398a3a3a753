"""The schema guards itself: knob CHECKs, unique names per tenant, immutable chunk
text, write-time lexical analysis, dimension checks that leave nothing half-written."""

from __future__ import annotations

import re

import numpy as np
import psycopg
import pytest
from psycopg import errors as pgerrors

import pgsift
from conftest import random_documents, unit
from pgsift import Chunk, Client, Document

# (knob, bad value, what the refusal must name)
BAD_KNOBS = [
    ("dense_weight", -0.1, "dense_weight"),
    ("dense_weight", 1.1, "dense_weight"),
    ("rrf_k", 0, "rrf_k"),
    ("rrf_k", -5, "rrf_k"),
    ("fetch_k", 0, "fetch_k"),
    ("fetch_k", 1001, "fetch_k"),
    ("exact_search_limit", -1, "exact_search_limit"),
    ("distance", "manhattan", "distance"),
    ("embedding_dims", 0, "embedding_dims"),
    ("embedding_dims", 2001, "embedding_dims"),
    ("tenant", "   ", "tenant"),
    ("name", "", "name"),
]
ALTERABLE = {"dense_weight", "rrf_k", "fetch_k", "exact_search_limit"}


def _names_knob(exc: psycopg.Error, knob: str) -> bool:
    return knob in (exc.diag.message_primary or "") or knob in (exc.diag.constraint_name or "")


def _insert(db, **row):
    row = {"name": "c", "embedding_dims": 8, **row}
    cols = ", ".join(row)
    marks = ", ".join(f"%({k})s" for k in row)
    return db.execute(f"insert into sift.collections ({cols}) values ({marks}) returning collection_id",
                      row).fetchone()[0]


# -- knob CHECKs, in SQL ------------------------------------------------------------------

@pytest.mark.parametrize("knob, value, named", BAD_KNOBS, ids=lambda v: str(v))
def test_check_refuses_bad_knob_on_insert(db, knob, value, named):
    with pytest.raises(pgerrors.CheckViolation) as info:
        _insert(db, **{knob: value})
    assert _names_knob(info.value, named), info.value.diag.message_primary
    assert db.execute("select count(*) from sift.collections").fetchone()[0] == 0


@pytest.mark.parametrize("knob, value, named", BAD_KNOBS, ids=lambda v: str(v))
def test_check_refuses_bad_knob_on_update(db, knob, value, named):
    _insert(db)
    with pytest.raises(pgerrors.CheckViolation) as info:
        db.execute(f"update sift.collections set {knob} = %s", (value,))
    assert _names_knob(info.value, named), info.value.diag.message_primary


def test_boundary_values_are_accepted(db):
    _insert(db, name="low", dense_weight=0, rrf_k=0.001, fetch_k=1, exact_search_limit=0,
            embedding_dims=1, distance="l2")
    _insert(db, name="high", dense_weight=1, rrf_k=100000, fetch_k=1000, exact_search_limit=1000000,
            embedding_dims=2000, distance="inner_product")
    assert db.execute("select count(*) from sift.collections").fetchone()[0] == 2


# -- knob CHECKs, through the client --------------------------------------------------------

@pytest.mark.parametrize("knob, value, named",
                         [k for k in BAD_KNOBS if k[0] not in ("tenant", "name")], ids=lambda v: str(v))
def test_create_collection_raises_invalid_knob(client, knob, value, named):
    args = {"embedding_dims": 8, knob: value}
    with pytest.raises(pgsift.InvalidKnob) as info:
        client.create_collection("c", **args)
    assert info.value.knob == named
    assert client.list_collections() == []


@pytest.mark.parametrize("knob, value, named",
                         [k for k in BAD_KNOBS if k[0] in ALTERABLE], ids=lambda v: str(v))
def test_alter_collection_raises_invalid_knob(client, knob, value, named):
    before = client.create_collection("c", embedding_dims=8)
    with pytest.raises(pgsift.InvalidKnob) as info:
        client.alter_collection("c", **{knob: value})
    assert info.value.knob == named
    assert client.get_collection("c") == before


@pytest.mark.parametrize("tenant, name", [("default", "  "), (" ", "c")], ids=["name", "tenant"])
def test_blank_name_or_tenant_is_an_invalid_argument(db, tenant, name):
    # errors.InvalidArgument documents "a blank name" as one of its cases; it is not a knob.
    with pytest.raises(pgsift.InvalidArgument):
        Client(db, tenant=tenant).create_collection(name, embedding_dims=8)
    assert db.execute("select count(*) from sift.collections").fetchone()[0] == 0


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
    # other columns may change (this is how a language change re-analyses)
    db.execute("update sift.chunks set context = 'header'")
    assert db.execute("select context from sift.chunks").fetchone()[0] == "header"


def test_search_vector_uses_the_collections_language(db):
    Client(db).create_collection("es", embedding_dims=8, search_language="spanish")
    Client(db).create_collection("en", embedding_dims=8)
    Client(db).upsert_documents("es", [_doc("a", ["los gatos corriendo por las montañas"])])
    Client(db).upsert_documents("en", [_doc("a", ["los gatos corriendo por las montañas"])])
    es = _lexemes(db, "collection_id = (select collection_id from sift.collections where name = 'es')")
    en = _lexemes(db, "collection_id = (select collection_id from sift.collections where name = 'en')")
    assert {"gat", "corr", "montañ"} <= es          # spanish stems
    assert "los" not in es and "las" not in es       # spanish stopwords
    assert {"gato", "corriendo", "montaña"} <= en    # english leaves them alone


def test_title_and_context_are_analysed_too(db, client):
    client.create_collection("c", embedding_dims=8)
    rng = np.random.default_rng(0)
    client.upsert_documents("c", [Document(source_uri="a", title="Refund policy", chunks=[
        Chunk(content="money back", context="billing handbook", embedding=unit(rng.normal(size=8)))])])
    sv = db.execute("select search_vector::text from sift.chunks").fetchone()[0]
    # title is weight A, context weight B, text the default D (printed without a letter)
    assert re.search(r"'refund':\d+A", sv) and re.search(r"'bill':\d+B", sv), sv
    assert re.search(r"'money':\d+( |$)", sv), sv


def test_wrong_dimension_is_refused_and_leaves_the_previous_version(db, client):
    client.create_collection("c", embedding_dims=8)
    client.upsert_documents("c", [_doc("a", ["one", "two"], title="v1")])
    before = db.execute("select d.document_id, d.title, c.ordinal, c.content, c.embedding::text "
                        "from sift.documents d join sift.chunks c using (document_id) order by 3").fetchall()

    rng = np.random.default_rng(1)
    bad = Document(source_uri="a", title="v2", chunks=[
        Chunk(content="three", embedding=unit(rng.normal(size=8))),
        Chunk(content="four", embedding=unit(rng.normal(size=5)))])   # second chunk is wrong
    with pytest.raises(pgsift.DimensionMismatch) as info:
        client.upsert_documents("c", [bad])
    assert (info.value.got, info.value.expected) == (5, 8)

    after = db.execute("select d.document_id, d.title, c.ordinal, c.content, c.embedding::text "
                       "from sift.documents d join sift.chunks c using (document_id) order by 3").fetchall()
    assert after == before
    assert [r[1] for r in after] == ["v1", "v1"]


def test_wrong_dimension_on_a_new_document_leaves_no_row(db, client):
    client.create_collection("c", embedding_dims=8)
    with pytest.raises(pgsift.DimensionMismatch) as info:
        client.upsert_documents("c", [_doc("new", ["text"], dims=9)])
    assert (info.value.got, info.value.expected) == (9, 8)
    assert db.execute("select count(*) from sift.documents").fetchone()[0] == 0
    assert db.execute("select count(*) from sift.chunks").fetchone()[0] == 0
    # the connection is still good for the next write
    client.upsert_documents("c", [_doc("new", ["text"])])
    assert db.execute("select count(*) from sift.chunks").fetchone()[0] == 1


def test_wrong_dimension_in_sql_is_sf002(db, client):
    client.create_collection("c", embedding_dims=3)
    client.upsert_documents("c", [Document(source_uri="a", chunks=[Chunk("x", [1, 0, 0])])])
    with pytest.raises(psycopg.Error) as info:
        db.execute("update sift.chunks set embedding = '[1,0]'")
    assert info.value.sqlstate == "SF002"
    assert "2 dimensions" in info.value.diag.message_primary
    assert "expects 3" in info.value.diag.message_primary


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
    # and the lexical leg now matches spanish forms of the words
    hits = client.search("c", "gato")
    assert {h.source_uri for h in hits} == {"doc-0", "doc-1", "doc-2"}
