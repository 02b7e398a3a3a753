"""The knobs contract: one resolver over the defaults (sift.knob_defs), a collection's
stored values and a call's `knobs`, checked by each knob's domain; sift.knobs() describes
them all; one setter stores them. Absent = the collection's value, JSON null = off, an
unknown name = an error naming the nearest; a new knob needs no change in Python."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal

import numpy as np
import pgsift
import psycopg
import pytest
from conftest import random_documents
from pgsift.schema import function_files, with_vector_schema
from psycopg.types.json import Jsonb

# (knob, bad value): refused stored, per call, and in finalize alike.
BAD = [
    ("recency_field", "  "),
    ("recency_half_life", "0 days"),
    ("recency_half_life", "-1 days"),
    ("recency_weight", -0.1),
    ("recency_weight", 1.5),
    ("per_document_cap", -1),
    ("per_document_cap", 1001),
    ("mmr_lambda", -0.01),
    ("mmr_lambda", 1.01),
    ("boost", 0),
    ("boost", -1),
    ("dense_weight", 1.01),
    ("fetch_k", 1001),
    ("lexical_budget", 99),
    ("lexical_list_limit", -1),
    ("hnsw_ef_search", 0),
    ("hnsw_ef_search", 1001),
]


def test_the_catalog_describes_every_knob(db):
    rows = db.execute("select name, type, default_value, allowed, can_be_off, off_value, scope, stage, meaning "
                      "from sift.knobs()").fetchall()
    by_name = {r[0]: r for r in rows}
    assert len(by_name) == len(rows) >= 24
    assert by_name["dense_weight"][1:4] == ("double precision", 0.5, "(value >= 0) AND (value <= 1)")
    assert by_name["fetch_k"][1:3] == ("integer", 40)
    assert by_name["recency_half_life"][1:3] == ("interval", "30 days")
    assert by_name["lexical_scorer"][3] == "value = ANY (ARRAY['bm25', 'ts_rank_cd'])"
    assert by_name["lost_in_the_middle"][1:4] == ("boolean", False, "true or false")
    assert by_name["per_document_cap"][4:6] == (True, 0)       # null is off, and off is 0
    assert by_name["mmr_lambda"][4:6] == (True, None)
    assert by_name["recency_ceiling"][6] == "collection" and by_name["recency_bias"][6] == "call"
    assert all(r[8].strip() for r in rows)
    # Every knob is an attribute of the typed record the stages read, with the knob's type ...
    attrs = dict(db.execute("select a.attname::text, format_type(a.atttypid, a.atttypmod) from pg_attribute a "
                            "where a.attrelid = 'sift.knob_set'::regclass and a.attnum > 0 "
                            "and not a.attisdropped").fetchall())
    types = dict(db.execute("select name, type::text from sift.knob_defs").fetchall())
    assert attrs == types
    # ... and a domain (its CHECK names the knob), but for plain booleans.
    assert {n for n, t in types.items() if t != "boolean"} == {t.removeprefix("sift.") for t in types.values()
                                                               if t != "boolean"}


def test_absent_takes_the_collections_value_null_switches_off(client):
    client.create_collection("c", embedding_dims=8, mmr_lambda=0.5, recency_field="created",
                             score_threshold=0.02, per_document_cap=1)
    client.upsert_documents("c", random_documents(np.random.default_rng(3), 6, 8, chunks_per_doc=3))
    query = np.ones(8)
    stored = client.explain("c", "alpha", embedding=query, top_k=6)
    assert any(c.mmr_penalty is not None for c in stored)
    assert all(c.recency_factor is not None and c.recency_factor < 1 for c in stored)
    assert stored[0].threshold_applied
    # One call switches each of them off, without touching the collection.
    off = client.explain("c", "alpha", embedding=query, top_k=6, mmr_lambda=None, recency_field=None,
                         score_threshold=None, per_document_cap=None)
    assert all(c.mmr_penalty is None and c.recency_factor == 1 and c.cap_status is None for c in off)
    assert not off[0].threshold_applied
    assert len(client.search("c", "alpha", embedding=query, top_k=6, mmr_lambda=None, recency_field=None,
                             score_threshold=None, per_document_cap=None)) == 6
    assert client.get_collection("c").knobs == {"mmr_lambda": 0.5, "recency_field": "created",
                                                "score_threshold": 0.02, "per_document_cap": 1}


@pytest.mark.parametrize("knob, value", BAD, ids=lambda v: str(v))
def test_a_bad_value_is_refused_everywhere_naming_the_knob(client, db, knob, value):
    client.create_collection("c", embedding_dims=4)
    before = client.get_collection("c")
    for call in (lambda: client.create_collection("d", embedding_dims=4, **{knob: value}),
                 lambda: client.alter_collection("c", **{knob: value}),
                 lambda: client.search("c", "x", **{knob: value}),
                 lambda: client.explain("c", "x", **{knob: value}),
                 lambda: client.finalize("c", [1], **{knob: value}),
                 lambda: client.knobs("c", **{knob: value})):
        with pytest.raises(pgsift.InvalidKnob) as info:
            call()
        assert info.value.knob == knob
    assert client.get_collection("c") == before
    assert [c.name for c in client.list_collections()] == ["c"]
    with pytest.raises(psycopg.Error) as raw:
        db.execute("update sift.collections set knobs = %s", [Jsonb({knob: value})])
    assert raw.value.sqlstate in ("23514", "SF009")


def test_who_may_set_what(client, db):
    client.create_collection("c", embedding_dims=4)
    with pytest.raises(pgsift.InvalidKnob, match="collection owner's setting"):
        client.search("c", "x", recency_ceiling=0.9)               # an owner's limit, not a call's
    with pytest.raises(pgsift.InvalidKnob, match="given per call"):
        client.alter_collection("c", recency_bias=0.5)             # a call's nudge, never stored
    with pytest.raises(pgsift.InvalidKnob, match="cannot be switched off"):
        client.search("c", "x", dense_weight=None)
    with pytest.raises(pgsift.InvalidKnob, match="must be a JSON boolean"):
        client.search("c", "x", hybrid="no")
    with pytest.raises(pgsift.InvalidKnob, match="must be a JSON string"):
        client.search("c", "x", recency_field=3)
    with pytest.raises(psycopg.Error) as info:
        db.execute("select * from sift.search('c', 'x', knobs => '[1, 2]')")
    assert info.value.sqlstate == "SF009"


def test_the_one_setter_sets_and_resets_knobs_and_properties(client, db):
    client.create_collection("c", embedding_dims=4)
    row = db.execute("""select search_language::text, description, knobs from sift.alter_collection('c',
        '{"dense_weight": 0.3, "mmr_lambda": 0.7, "search_language": "simple", "description": "notes"}')""").fetchone()
    assert row == ("simple", "notes", {"dense_weight": 0.3, "mmr_lambda": 0.7})
    row = db.execute("""select search_language::text, description, knobs from sift.alter_collection('c',
        '{"mmr_lambda": null}', reset => array['dense_weight', 'search_language', 'description'])""").fetchone()
    assert row == ("english", None, {"mmr_lambda": None})
    info = db.execute("select knobs, settings from sift.collection_info('c')").fetchone()
    assert info[0] == {"mmr_lambda": None}
    assert info[1]["mmr_lambda"] is None and info[1]["dense_weight"] == 0.5
    with pytest.raises(psycopg.Error) as err:
        db.execute("select sift.alter_collection('c', '{\"reranker\": \"missing\"}')")
    assert err.value.sqlstate == "SF008"
    comment = db.execute("select obj_description('sift.alter_collection'::regproc, 'pg_proc')").fetchone()[0]
    assert "The one setter" in comment and "Writes." in comment


def test_python_values_travel_as_json(client):
    c = client.create_collection("c", embedding_dims=4, recency_half_life=timedelta(days=14),
                                 dense_weight=np.float32(0.25), fetch_k=np.int64(20))
    assert c.knobs == {"recency_half_life": "14 days 0 seconds", "dense_weight": 0.25, "fetch_k": 20}
    assert c.settings["recency_half_life"] == "14 days"
    # Decimals, as psycopg reads a numeric column: numbers (whole ones as integers).
    d = client.create_collection("d", embedding_dims=4, dense_weight=Decimal("0.30"), fetch_k=Decimal("20"),
                                 per_document_cap=Decimal("3.000"))
    assert d.knobs == {"dense_weight": 0.3, "fetch_k": 20, "per_document_cap": 3}
    assert len(client.search("d", "x", dense_weight=Decimal("0.7"), filter={"year": Decimal("2024")})) == 0
    for bad in ("NaN", "Infinity", "-Infinity", "1" + "0" * 400 + ".5"):
        with pytest.raises(pgsift.InvalidArgument, match="finite"):
            client.search("d", "x", dense_weight=Decimal(bad))


def test_boundary_values_are_accepted(client):
    low = client.create_collection("low", embedding_dims=4, recency_half_life="0.000001 seconds",
                                   recency_weight=0, recency_ceiling=0, per_document_cap=0, mmr_lambda=0,
                                   boost=0.000001, score_threshold=-1e300)
    high = client.create_collection("high", embedding_dims=4, recency_half_life="1000 years", recency_weight=1,
                                    recency_ceiling=1, per_document_cap=1000, mmr_lambda=1, boost=1e6,
                                    score_threshold=1e300)
    assert (low.settings["boost"], high.settings["boost"], high.settings["recency_weight"]) == (0.000001, 1e6, 1)
    for name in ("low", "high"):
        assert len(client.search(name, "x", recency_bias=1, recency_weight=0)) == 0


def test_a_new_knob_needs_no_change_in_python(client, db):
    """What a migration adding a knob does (its domain, its knob_defs row, its knob_set
    attribute): the client, knobs(), the setter and every entry point take it at once."""
    db.execute("create domain sift.demo_knob as integer constraint demo_knob_range check (value between 1 and 9)")
    db.execute("insert into sift.knob_defs (position, name, type, default_value, can_be_off, scope, stage, meaning) "
               "values (1000, 'demo_knob', 'sift.demo_knob', '3', true, 'both', 'finalize', 'A demonstration.')")
    db.execute("alter type sift.knob_set add attribute demo_knob sift.demo_knob")
    catalog = {k.name: k for k in client.knobs()}
    assert catalog["demo_knob"].default_value == 3
    assert catalog["demo_knob"].allowed == "(value >= 1) AND (value <= 9)"
    c = client.create_collection("c", embedding_dims=4, demo_knob=5)
    assert (c.knobs, c.settings["demo_knob"]) == ({"demo_knob": 5}, 5)
    assert {k.name: k.value for k in client.knobs("c", demo_knob=7)}["demo_knob"] == 7
    with pytest.raises(pgsift.InvalidKnob) as info:
        client.search("c", "x", demo_knob=10)
    assert info.value.knob == "demo_knob"
    assert client.search("c", "x", demo_knob=None).hits == []


def test_max_query_terms_bounds_the_lexical_query(client, db):
    """The knob added by migration 0004 (domain, knob_defs row, knob_set attribute) and read
    by the lexical leg: only the first max_query_terms distinct words of a query are ORed."""
    words = ["amber", "basalt", "cobalt", "dolomite", "emerald", "feldspar"]
    client.create_collection("rocks", embedding_dims=4)
    client.upsert_documents("rocks", [
        pgsift.Document(source_uri=w, chunks=[pgsift.Chunk(content=f"a note on {w}", embedding=[1, 0, 0, i + 1])])
        for i, w in enumerate(words)])
    question = " ".join(words)

    def found(**knobs):
        return sorted(h.source_uri for h in client.search("rocks", question, top_k=10, **knobs).hits)

    assert found() == sorted(words)                                  # default 64: every word
    assert found(max_query_terms=2) == ["amber", "basalt"]           # the first two, in query order
    client.alter_collection("rocks", max_query_terms=3)
    assert found() == ["amber", "basalt", "cobalt"]
    assert {k.name: k.value for k in client.knobs("rocks")}["max_query_terms"] == 3
    explained = client.explain("rocks", question, max_query_terms=1)
    assert {e.source_uri for e in explained} == {"amber"}
    for bad in (0, 1001, "many"):
        with pytest.raises(pgsift.InvalidKnob) as info:
            client.search("rocks", question, max_query_terms=bad)
        assert info.value.knob == "max_query_terms"


def test_the_set_kept_on_the_row_resolves_as_a_full_merge(client, db):
    """A call's knobs are cast onto the set kept on the collection's row (and a call with none
    takes it as it is): the same set as merging the defaults, the stored values and the call's
    from scratch, whatever the collection stores (a preset, nulls) and the call sets (a preset,
    nulls, a value per collection); and a row written past its trigger is merged afresh."""
    stored = [{}, {"preset": "pgvector"}, {"per_document_cap": None, "dense_weight": 0.2, "fetch_k": 12},
              {"recency_field": "created", "recency_ceiling": 0.9, "boost": 3}]
    calls = [{}, {"hybrid": False}, {"per_document_cap": None, "mmr_lambda": 0.4}, {"preset": "seeds"},
             {"preset": "pgvector", "rrf_k": 7}, {"fetch_k": {"k0": 5, "k2": 9}}, {"recency_weight": 0.45},
             {"score_threshold": 0.1}, {"one_translation": None, "snippets": "html", "neighbours": 2}]
    for i, settings in enumerate(stored):
        client.create_collection(f"k{i}", embedding_dims=4, **settings)
    compare = """
        select sift._resolve_knobs(c, %(call)s)::text, sift._merge_knobs(c.knobs, c.name, %(call)s)::text
        from sift.collections c where c.name = %(name)s"""
    checked = 0
    for i in range(len(stored)):
        for call in calls:
            kept, merged = db.execute(compare, {"call": Jsonb(call), "name": f"k{i}"}).fetchone()
            assert kept == merged, (stored[i], call)
            checked += 1
    assert checked == len(stored) * len(calls)
    # Past the trigger (a restore, a replica): the kept set is not the row's any more.
    db.execute("set session_replication_role = replica")
    try:
        db.execute("update sift.collections set knobs = '{\"fetch_k\": 77}' where name = 'k0'")
    finally:
        db.execute("set session_replication_role = origin")
    assert {k.name: k.value for k in client.knobs("k0")}["fetch_k"] == 77
    assert db.execute("select sift._refresh_resolved_knobs()").fetchone()[0] == 1
    assert db.execute("select (resolved_knobs).fetch_k from sift.collections where name = 'k0'").fetchone()[0] == 77
    # A changed default reaches every kept set at once (knob_defs' trigger).
    db.execute("update sift.knob_defs set default_value = '33' where name = 'fetch_k'")
    assert db.execute("select (resolved_knobs).fetch_k from sift.collections where name = 'k1'").fetchone()[0] == 33


# -- the knob table (sql/04_knob_table.sql) ---------------------------------------------------

KNOB_ROWS = "select d.*, d.xmin::text from sift.knob_defs d order by d.position"
PRESET_ROWS = "select p.*, p.xmin::text from sift.knob_presets p order by p.name"


def apply_knob_table(db: psycopg.Connection) -> None:
    (table,) = [f for f in function_files() if f.version == "04_knob_table"]
    db.execute(with_vector_schema(table.text, "public"))


def test_the_knob_table_file_makes_every_row(db):
    """sql/04_knob_table.sql alone writes every knob's row and every preset as a migrated
    database has them; re-applied over rows as declared, it writes nothing (no row version
    changes, so the definitions' trigger never locks sift.collections)."""
    rows = db.execute(KNOB_ROWS).fetchall()
    presets = db.execute(PRESET_ROWS).fetchall()
    assert len(rows) >= 40 and len(presets) >= 2
    apply_knob_table(db)
    assert db.execute(KNOB_ROWS).fetchall() == rows
    assert db.execute(PRESET_ROWS).fetchall() == presets
    with db.transaction(force_rollback=True):
        db.execute("delete from sift.knob_presets")
        db.execute("delete from sift.knob_defs")
        apply_knob_table(db)
        assert [r[:-1] for r in db.execute(KNOB_ROWS).fetchall()] == [r[:-1] for r in rows]
        assert [r[:-1] for r in db.execute(PRESET_ROWS).fetchall()] == [r[:-1] for r in presets]


def test_the_knob_table_file_puts_back_what_changed_and_keeps_other_presets(db):
    rows = db.execute(KNOB_ROWS).fetchall()
    db.execute("update sift.knob_defs set default_value = '7', meaning = 'edited', position = 9999 "
               "where name = 'rrf_k'")
    db.execute("comment on column sift.knob_set.rrf_k is 'edited'")
    db.execute("""update sift.knob_presets set knobs = '{"rrf_k": 1}' where name = 'seeds'""")
    db.execute("""insert into sift.knob_presets (name, knobs, meaning) values ('mine', '{"rrf_k": 9}', 'ours')""")
    apply_knob_table(db)
    assert [r[:-1] for r in db.execute(KNOB_ROWS).fetchall()] == [r[:-1] for r in rows]
    assert db.execute("select knobs from sift.knob_presets where name = 'seeds'").fetchone()[0]["rrf_k"] == 60
    assert db.execute("select knobs from sift.knob_presets where name = 'mine'").fetchone()[0] == {"rrf_k": 9}
    assert db.execute("select col_description('sift.knob_set'::regclass, a.attnum) from pg_attribute a "
                      "where a.attrelid = 'sift.knob_set'::regclass and a.attname = 'rrf_k'").fetchone()[0] \
        == db.execute("select meaning from sift.knob_defs where name = 'rrf_k'").fetchone()[0]


def test_a_knob_the_file_does_not_declare_is_refused_or_deleted(db):
    """A row of sift.knob_defs that sql/04_knob_table.sql does not declare: refused while
    sift.knob_set has its attribute (its row belongs in the file), deleted once a migration
    dropped the attribute (nothing reads it); a knob the file declares without its attribute is
    refused (its migration is missing)."""
    with db.transaction(force_rollback=True):
        db.execute("alter type sift.knob_set add attribute undeclared integer")
        db.execute("insert into sift.knob_defs (position, name, type, default_value, can_be_off, scope, stage, "
                   "meaning) values (9999, 'undeclared', 'integer', '1', false, 'both', 'fusion', 'x')")
        with pytest.raises(psycopg.errors.RaiseException, match="does not declare: undeclared"):
            apply_knob_table(db)
    db.execute("insert into sift.knob_defs (position, name, type, default_value, can_be_off, scope, stage, "
               "meaning) values (9999, 'dropped', 'integer', '1', false, 'both', 'fusion', 'x')")
    apply_knob_table(db)
    assert db.execute("select count(*) from sift.knob_defs where name = 'dropped'").fetchone()[0] == 0
    with db.transaction(force_rollback=True):
        db.execute("alter type sift.knob_set drop attribute rrf_k")
        with pytest.raises(psycopg.errors.RaiseException, match="sift.knob_set lacks: rrf_k"):
            apply_knob_table(db)
