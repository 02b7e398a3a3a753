"""The plans of every statement a search runs, nested ones included (auto_explain logs
each to the client): searching a small collection in a large shared table reads that
collection only. A full scan of sift.chunks or sift.documents costs time in proportion to
every tenant's data; it slipped in once through one function whose row estimate the
planner could not see (sift.rrf: 1,000 guessed, a hash join over every chunk).
"""

from __future__ import annotations

import numpy as np
import psycopg
import pytest
from conftest import random_documents, unit
from pgsift import Client

DIMS = 8
BIG_TABLES = ("Seq Scan on chunks", "Seq Scan on documents", "Seq Scan on sections")


@pytest.fixture
def shared_table(db):
    """A collection of 40 chunks beside another tenant's 400 that share its words, the
    statistics those of a table of a million chunks."""
    rng = np.random.default_rng(0)
    Client(db, tenant="other").create_collection("big", embedding_dims=DIMS)
    Client(db, tenant="other").upsert_documents("big", random_documents(rng, 100, DIMS, chunks_per_doc=4))
    small = Client(db)
    small.create_collection("small", embedding_dims=DIMS)
    # four chunks a document: one under "Intro", three under "Part" (sections to merge)
    small.upsert_documents("small", random_documents(rng, 20, DIMS, chunks_per_doc=4))
    db.execute("vacuum analyze sift.chunks, sift.documents, sift.sections")
    # The planner then sees what a large shared table looks like: a million chunks (the same
    # pages, denser), so a plan that is fine for 4,000 rows but not for a million shows.
    for table, rows in (("chunks", 1_000_000), ("documents", 250_000), ("sections", 500_000)):
        db.execute("select pg_restore_relation_stats('schemaname', 'sift', 'relname', %s::text, "
                   "'reltuples', %s::real)", [table, float(rows)])
    return small


def plans_of(db: psycopg.Connection, call) -> list[str]:
    logged: list[str] = []
    db.add_notice_handler(lambda d: logged.append(d.message_primary or ""))
    db.execute("load 'auto_explain'")
    for setting, value in (("auto_explain.log_min_duration", "0"), ("auto_explain.log_nested_statements", "on"),
                           ("client_min_messages", "log")):
        db.execute(f"set {setting} = '{value}'")
    try:
        call()
    finally:
        db.execute("reset client_min_messages")
        db.execute("set auto_explain.log_min_duration = -1")
    return [m for m in logged if "Query Text" in m or "Plan" in m or "Scan" in m]


def reader_plans(db: psycopg.Connection, connect_as, call_with) -> list[str]:
    """The plans of call_with(client) as t_reader mapped to tenant "default": every policy
    applies. auto_explain loads at its session start (its settings are the superuser's to
    give, here for this test's database only)."""
    db.execute("select sift.map_role('t_reader', 'default')")
    for setting, value in (("session_preload_libraries", "auto_explain"), ("auto_explain.log_min_duration", "0"),
                           ("auto_explain.log_nested_statements", "on"), ("client_min_messages", "log")):
        db.execute(f'alter role t_reader in database "{db.info.dbname}" set {setting} = \'{value}\'')
    logged: list[str] = []
    reader = connect_as("t_reader")
    reader.add_notice_handler(lambda d: logged.append(d.message_primary or ""))
    call_with(Client(reader))
    return [m for m in logged if "Query Text" in m or "Plan" in m or "Scan" in m]


SEARCHES = [
    {"query": "alpha bravo", "embedding": True},
    {"query": "alpha bravo", "embedding": True, "per_document_cap": 1, "mmr_lambda": 0.5},
    {"query": "", "embedding": True},
    {"query": "charlie", "embedding": False},
    {"query": "charlie", "embedding": False, "lexical_scorer": "ts_rank_cd"},
    # structure: sections merged, and windows read around the hits
    {"query": "alpha bravo", "embedding": True, "parent_return": "auto", "neighbours": 2},
    {"query": "alpha bravo", "embedding": True, "parent_return": "parent", "per_document_cap": 1},
]
SEARCH_IDS = ["hybrid", "hybrid-knobs", "dense", "lexical", "lexical-ts_rank_cd", "auto-neighbours", "parent-cap"]


@pytest.mark.parametrize("kwargs", SEARCHES, ids=SEARCH_IDS)
@pytest.mark.parametrize("role", ["operator", "reader"])
def test_a_search_reads_its_collection_only(db, connect_as, shared_table, kwargs, role):
    kwargs = dict(kwargs)
    vec = unit(np.ones(DIMS)) if kwargs.pop("embedding") else None
    query = kwargs.pop("query")

    def search(client: Client) -> None:
        hits = client.search("small", query, embedding=vec, top_k=5, **kwargs)
        assert len(hits) > 0
        if kwargs.get("parent_return") == "parent":
            assert any(h.merged for h in hits)   # the plans include a section's text read
        if kwargs.get("neighbours"):
            assert all(h.window_chunk_ids or h.window_of for h in hits)

    plans = (plans_of(db, lambda: search(shared_table)) if role == "operator"
             else reader_plans(db, connect_as, search))
    assert plans, "auto_explain logged nothing"
    full_scans = [p for p in plans if any(s in p for s in BIG_TABLES)]
    assert full_scans == [], "\n\n".join(full_scans)


def test_explain_and_finalize_read_their_collection_only(db, shared_table):
    vec = unit(np.ones(DIMS))
    ids = [h.chunk_id for h in shared_table.search("small", "alpha", embedding=vec, top_k=10).hits]
    for call in (lambda: shared_table.explain("small", "alpha", embedding=vec),
                 lambda: shared_table.finalize("small", ids, top_k=5, per_document_cap=1),
                 lambda: shared_table.explain("small", "alpha", embedding=vec, parent_return="parent"),
                 lambda: shared_table.finalize("small", ids, top_k=5, parent_return="auto", neighbours=3),
                 lambda: shared_table.resolve_sections(ids)):
        plans = plans_of(db, call)
        assert plans and [p for p in plans if any(s in p for s in BIG_TABLES)] == []


def test_a_readers_search_looks_its_pool_up_by_key(db, connect_as):
    """Under row-level security a join condition the policy cannot prove leakproof is no index
    condition: the pool's chunks, joined through the fusion's coalesce, were hashed against a
    scan of every chunk of the tenant (2x a search's time on SciFact). A table of realistic
    statistics (no million faked), a collection past exact_search_limit: nothing scans."""
    client = Client(db)
    client.create_collection("mid", embedding_dims=DIMS, exact_search_limit=100)
    client.upsert_documents("mid", random_documents(np.random.default_rng(4), 600, DIMS, chunks_per_doc=2))
    db.execute("vacuum analyze sift.chunks, sift.documents, sift.sections")
    vec = unit(np.ones(DIMS))

    def search(reader: Client) -> None:
        for query, embedding in (("alpha bravo", vec), ("", vec), ("charlie", None)):
            for _ in range(7):   # past the custom plans: the generic one is what a session keeps
                assert len(reader.search("mid", query, embedding=embedding, top_k=10)) == 10

    plans = reader_plans(db, connect_as, search)
    assert plans, "auto_explain logged nothing"
    full_scans = [p for p in plans if any(s in p for s in BIG_TABLES)]
    assert full_scans == [], "\n\n".join(full_scans[:2])
