"""pgsift.Client and AsyncClient: defaults, document writes, hits, typed errors, the async
twin (generated from the same source), pools, an embedder, concurrent writers, and the
one-statement search."""

from __future__ import annotations

import contextlib
import dataclasses
import threading

import numpy as np
import pgsift
import psycopg
import psycopg_pool
import pytest
from conftest import random_documents, unit
from pgsift import AsyncClient, Chunk, Client, Document, Hit
from psycopg import _pipeline_base as psycopg_pipeline

DIMS = 8


@pytest.fixture
async def aclient(dsn):
    conn = await psycopg.AsyncConnection.connect(dsn, autocommit=True)
    try:
        yield AsyncClient(conn)
    finally:
        await conn.close()


def doc(uri: str, texts: list[str], seed: int = 0, **kw) -> Document:
    rng = np.random.default_rng(seed)
    return Document(source_uri=uri, chunks=[Chunk(content=t, embedding=unit(rng.normal(size=DIMS)))
                                            for t in texts], **kw)


def chunks_of(db, uri: str) -> list[tuple]:
    return db.execute("select c.document_id, c.ordinal, c.content from sift.chunks c "
                      "join sift.documents d using (document_id) where d.source_uri = %s "
                      "order by c.ordinal", (uri,)).fetchall()


def comparable(hits) -> list[tuple]:
    """A hit without its ids, to compare results from two collections holding the same data."""
    return [(h.rank, h.source_uri, h.ordinal, h.content, h.found_by, h.dense_rank, h.lexical_rank,
             round(h.score, 12), None if h.dense_distance is None else round(h.dense_distance, 6))
            for h in hits]


def test_rows_become_the_same_dataclasses_as_through_their_init(client, db):
    """The client builds hits without the dataclass's __init__ (pgsift.models.dataclass_row):
    equal, field for field, to what psycopg's class_row builds; defaults fill what is not
    selected; a column the class lacks, or a field without a default left out, is refused."""
    from pgsift import queries
    from pgsift.models import Candidate, dataclass_row
    from psycopg.rows import class_row

    client.create_collection("c", embedding_dims=DIMS)
    rng = np.random.default_rng(4)
    client.upsert_documents("c", random_documents(rng, 8, DIMS))
    params = {"collection": "c", "collections": None, "query_text": "alpha", "query_embedding": None,
              "match_count": 5, "filter": psycopg.types.json.Jsonb({}), "knobs": psycopg.types.json.Jsonb({}),
              "query_tokens": None, "spaces": None, "space_embeddings": None, "space_weights": None}
    fast = db.cursor(row_factory=dataclass_row(Hit)).execute(queries.SEARCH, params).fetchall()
    slow = db.cursor(row_factory=class_row(Hit)).execute(queries.SEARCH, params).fetchall()
    assert len(fast) == 5 and fast == slow
    assert [dataclasses.asdict(h) for h in fast] == [dataclasses.asdict(h) for h in slow]
    assert [repr(h) for h in fast] == [repr(h) for h in slow]
    with pytest.raises(dataclasses.FrozenInstanceError):
        fast[0].rank = 2   # still frozen

    @dataclasses.dataclass(frozen=True)
    class Pair:
        a: int
        b: str = "x"
        c: list[int] = dataclasses.field(default_factory=list)

    rows = db.cursor(row_factory=dataclass_row(Pair)).execute("select 1 as a union all select 2").fetchall()
    assert rows == [Pair(1), Pair(2)] and rows[0].c is not rows[1].c
    # Columns in another order: the instance still holds its fields in the class's order.
    row = db.cursor(row_factory=dataclass_row(Pair)).execute("select 'y' as b, 3 as a").fetchone()
    assert row == Pair(3, "y") and list(vars(row)) == ["a", "b", "c"]
    with pytest.raises(TypeError, match="no field 'nope'"):
        db.cursor(row_factory=dataclass_row(Candidate)).execute("select 1 as nope").fetchall()
    with pytest.raises(TypeError, match="needs"):
        db.cursor(row_factory=dataclass_row(Candidate)).execute("select 1::bigint as chunk_id").fetchall()
    with pytest.raises(TypeError, match="plain dataclass"):
        dataclass_row(int)


# -- collections ------------------------------------------------------------------------------

def test_create_collection_defaults(client):
    c = client.create_collection("c", embedding_dims=DIMS)
    assert isinstance(c, pgsift.Collection)
    # the defaults are the database's (sift.knob_defs), read back, never restated in Python
    defaults = {k.name: k.default_value for k in client.knobs()}
    assert c.settings == {**defaults, "recency_half_life": "30 days"}
    assert c.knobs == {}
    assert (c.settings["dense_weight"], c.settings["rrf_k"], c.settings["fetch_k"]) == (0.5, 3, 40)
    assert (c.tenant, c.name, c.embedding_dims, c.search_language, c.distance, c.description,
            c.reranker) == ("default", "c", DIMS, "english", "cosine", None, None)
    assert client.get_collection("c") == c
    assert client.list_collections() == [c]


def test_create_and_alter_collection_knobs(client):
    c = client.create_collection("c", embedding_dims=DIMS, distance="l2", description="notes",
                                 search_language="simple", hybrid=False, dense_weight=0.5, rrf_k=10,
                                 fetch_k=100, exact_search_limit=0)
    assert c.knobs == {"hybrid": False, "dense_weight": 0.5, "rrf_k": 10, "fetch_k": 100, "exact_search_limit": 0}
    assert (c.distance, c.description, c.search_language) == ("l2", "notes", "simple")
    changed = client.alter_collection("c", dense_weight=0.25, hybrid=True, mmr_lambda=0.7)
    assert changed.knobs == {**c.knobs, "dense_weight": 0.25, "hybrid": True, "mmr_lambda": 0.7}
    off = client.alter_collection("c", mmr_lambda=None, reset=["rrf_k", "description"])
    assert off.knobs["mmr_lambda"] is None and "rrf_k" not in off.knobs
    assert (off.settings["rrf_k"], off.settings["mmr_lambda"], off.description) == (3, None, None)


def test_knobs_lists_every_knob_and_what_is_in_force(client):
    client.create_collection("c", embedding_dims=DIMS, fetch_k=60)
    catalog = {k.name: k for k in client.knobs()}
    assert {"dense_weight", "rrf_k", "fetch_k", "mmr_lambda", "per_document_cap"} <= set(catalog)
    assert catalog["dense_weight"].allowed == "(value >= 0) AND (value <= 1)"
    assert catalog["mmr_lambda"].can_be_off and not catalog["dense_weight"].can_be_off
    assert all(k.value is None and k.source is None for k in catalog.values())
    in_force = {k.name: (k.value, k.source) for k in client.knobs("c", rrf_k=30)}
    assert in_force["fetch_k"] == (60, "collection")
    assert in_force["rrf_k"] == (30, "call")
    assert in_force["dense_weight"] == (0.5, "default")


def test_drop_collection_removes_everything(db, client):
    client.create_collection("c", embedding_dims=DIMS)
    client.upsert_documents("c", [doc("a", ["one", "two"])])
    client.drop_collection("c")
    assert client.list_collections() == []
    assert db.execute("select count(*) from sift.chunks").fetchone()[0] == 0


# -- documents --------------------------------------------------------------------------------

def test_upsert_replaces_a_documents_chunks(db, client):
    client.create_collection("c", embedding_dims=DIMS)
    [first] = client.upsert_documents("c", [doc("a", ["one", "two", "three"], title="v1")])
    assert [r[1:] for r in chunks_of(db, "a")] == [(0, "one"), (1, "two"), (2, "three")]

    [second] = client.upsert_documents("c", [doc("a", ["uno", "dos"], seed=1, title="v2")])
    assert second == first
    assert chunks_of(db, "a") == [(first, 0, "uno"), (first, 1, "dos")]
    assert db.execute("select title from sift.documents").fetchall() == [("v2",)]
    assert db.execute("select count(*) from sift.chunks").fetchone()[0] == 2


def test_upsert_returns_ids_in_order_and_reports_progress(client):
    client.create_collection("c", embedding_dims=DIMS)
    seen = []
    ids = client.upsert_documents("c", [doc("a", ["x"]), doc("b", ["y"])], progress=seen.append)
    assert len(ids) == 2 and ids[0] < ids[1]
    assert [d.source_uri for d in seen] == ["a", "b"]


def bad_dims(uri: str) -> Document:
    return Document(source_uri=uri, chunks=[Chunk(content="wrong size", embedding=[1.0, 0.0, 0.0])])


def uris(db) -> list[str]:
    return [r[0] for r in db.execute("select source_uri from sift.documents order by source_uri")]


@pytest.mark.parametrize("batch", [1, 3, 50])
def test_a_failing_document_keeps_its_old_version_and_the_ones_before_it(db, client, batch):
    client.create_collection("c", embedding_dims=DIMS)
    client.upsert_documents("c", [doc("d2", ["old text"], title="old")])
    docs = [doc("d0", ["zero"]), doc("d1", ["one"]), bad_dims("d2"), doc("d3", ["three"])]
    with pytest.raises(pgsift.DimensionMismatch, match="d2|chunk"):
        client.upsert_documents("c", docs, batch_documents=batch)
    assert uris(db) == ["d0", "d1", "d2"]
    assert [r[2] for r in chunks_of(db, "d2")] == ["old text"]
    assert db.execute("select title from sift.documents where source_uri = 'd2'").fetchone()[0] == "old"
    # statistics stayed exact through the rolled-back batch
    assert db.execute("select sum(chunks) from sift.collection_lexical_stats").fetchone()[0] == 3


def test_an_invalid_document_in_a_batch_writes_the_ones_before_it(db, client):
    client.create_collection("c", embedding_dims=DIMS)
    docs = [doc("d0", ["zero"]), Document(source_uri="empty", chunks=[]), doc("d2", ["two"])]
    with pytest.raises(pgsift.InvalidArgument, match="no chunks"):
        client.upsert_documents("c", docs, batch_documents=10)
    assert uris(db) == ["d0"]
    with pytest.raises(pgsift.InvalidArgument, match="batch_documents"):
        client.upsert_documents("c", docs, batch_documents=0)


async def test_async_batches_match_the_sync_ones(db, aclient):
    await aclient.create_collection("c", embedding_dims=DIMS)
    ids = await aclient.upsert_documents("c", [doc(f"d{i}", [f"text {i}"]) for i in range(7)],
                                         batch_documents=3, refresh_every=2)
    assert len(ids) == 7 and ids == sorted(ids)
    with pytest.raises(pgsift.DimensionMismatch):
        await aclient.upsert_documents("c", [doc("e0", ["x"]), bad_dims("e1"), doc("e2", ["y"])],
                                       batch_documents=5)
    assert uris(db) == ["d0", "d1", "d2", "d3", "d4", "d5", "d6", "e0"]
    # A failed call still ends with the refresh when one is due: with refresh_backlog 1, always.
    assert 0 < pending_statements(db) < aclient.refresh_backlog
    eager = AsyncClient(aclient.source, refresh_backlog=1)
    with pytest.raises(pgsift.DimensionMismatch):
        await eager.upsert_documents("c", [doc("f0", ["x"]), bad_dims("f1")], batch_documents=5)
    assert pending_statements(db) == 0
    assert db.execute("select count(*) from sift.term_df_pending").fetchone()[0] == 0


def pending_statements(db) -> int:
    """Write statements whose statistics no refresh has folded yet."""
    return db.execute("select count(*) from sift.collection_lexical_stats where pending").fetchone()[0]


def test_writes_refresh_the_statistics_once_enough_statements_wait(db, client):
    """The client's writes end with sift.refresh_lexical_stats once refresh_backlog write
    statements of the collection wait (any writer's); searches are exact meanwhile."""
    client.create_collection("c", embedding_dims=DIMS)
    folded = Client(db, refresh_backlog=1)   # the same writes, each refreshed, for comparison
    folded.create_collection("f", embedding_dims=DIMS)
    assert client.refresh_backlog == pgsift.client.REFRESH_BACKLOG == 10
    texts = [f"alpha word{i} bravo" for i in range(18)]
    for i in range(9):
        for c, name in ((client, "c"), (folded, "f")):
            c.upsert_documents(name, [doc(f"d{i}", texts[2 * i: 2 * i + 2], seed=i)])
    assert pending_statements(db) == 9           # c's nine writes, none folded; f's all folded
    # Another writer's statement counts too: straight through SQL, as a service might write.
    col_id = client.get_collection("c").collection_id
    raw = db.execute("insert into sift.documents (collection_id, source_uri) values (%s, 'raw') "
                     "returning document_id", [col_id]).fetchone()[0]
    db.execute("insert into sift.chunks (document_id, ordinal, content, embedding) "
               "values (%s, 0, 'alpha echo', %s)", [raw, str([1.0] + [0.0] * (DIMS - 1))])
    folded.upsert_documents("f", [doc("raw", ["alpha echo"])])
    assert pending_statements(db) == 10
    # Pending, the statistics are exact: the same ranking and scores as refreshed ones.
    for query in ("alpha", "bravo word3", "word7 alpha", "echo alpha"):
        got = [(h.source_uri, round(h.score, 12)) for h in client.search("c", query, top_k=20)]
        want = [(h.source_uri, round(h.score, 12)) for h in folded.search("f", query, top_k=20)]
        assert got == want and got, query
    # Ten wait: the next write (here a delete) folds them all.
    assert client.delete_document("c", "d0") is True
    assert pending_statements(db) == 0
    assert db.execute("select count(*) from sift.term_df_pending").fetchone()[0] == 0
    # Deletes count as writes: nine more statements, then a replace brings the tenth.
    client.upsert_documents("c", [doc("y", ["yankee"])])
    for i in range(1, 8):
        client.delete_document("c", f"d{i}")
    client.delete_documents("c", source_prefix="raw")
    assert pending_statements(db) == 9
    client.replace_documents("c", [doc("z", ["zulu"])], delete_all=True)
    assert pending_statements(db) == 0
    assert client.refresh_lexical_stats("c")[0] == 0   # nothing left to fold


@pytest.mark.parametrize("bad", [0, -1, True, 2.5, "3", None])
def test_refresh_backlog_must_be_a_positive_integer(db, bad):
    with pytest.raises(pgsift.InvalidArgument, match="refresh_backlog"):
        Client(db, refresh_backlog=bad)


def test_delete_document(db, client):
    client.create_collection("c", embedding_dims=DIMS)
    client.upsert_documents("c", [doc("a", ["one", "two"]), doc("b", ["three"])])
    assert client.delete_document("c", "a") is True
    assert client.delete_document("c", "a") is False
    assert chunks_of(db, "a") == []
    assert [r[2] for r in chunks_of(db, "b")] == ["three"]


# -- search -----------------------------------------------------------------------------------

def test_search_returns_complete_hits(client):
    client.create_collection("c", embedding_dims=DIMS)
    rng = np.random.default_rng(3)
    client.upsert_documents("c", random_documents(rng, 10, DIMS))
    target = unit(rng.normal(size=DIMS))
    client.upsert_documents("c", [Document(
        source_uri="target", title="Target", metadata={"k": "v"},
        chunks=[Chunk(content="zulu refunds", context="billing", embedding=target)])])

    result = client.search("c", "zulu", embedding=target, top_k=5)
    assert isinstance(result, pgsift.SearchResult)
    assert len(result) == 5 and all(isinstance(h, Hit) for h in result)
    assert [h.rank for h in result] == [1, 2, 3, 4, 5]
    assert result.legs == ["dense", "lexical"]
    assert result.lexical_query == "'zulu'"

    top = result[0]
    # every field is filled, but those about a reranker or a skipped threshold
    unset = {"rerank_score", "fused_score", "reranker", "rerank_refused", "threshold_skipped",
             # structure: no section (flat chunks), no token count given, no neighbours asked for
             "section_id", "token_count", "window_chunk_ids", "window_text", "window_of",
             "language",   # a document without a language
             "snippet",    # snippets are off by default
             "cursor", "cursor_end",   # search_page's
             "late_interaction_score"}   # no query_tokens
    assert all(getattr(top, f.name) is not None for f in dataclasses.fields(Hit) if f.name not in unset)
    assert top.rerank_score is None and result.rerank is None and not result.reranked
    assert (top.source_uri, top.title, top.ordinal, top.content, top.context, top.metadata) == (
        "target", "Target", 0, "zulu refunds", "billing", {"k": "v"})
    assert (top.found_by, top.dense_rank, top.lexical_rank) == ("both", 1, 1)
    assert (top.merged, top.chunk_ids, top.matched_chunk_ids) == (False, [top.chunk_id], [top.chunk_id])
    assert top.text == top.content
    assert top.dense_distance == pytest.approx(0, abs=1e-6)
    assert top.lexical_score > 0
    assert top.score == pytest.approx(0.5 / 4 + 0.5 / 4)
    assert isinstance(top.chunk_id, int) and isinstance(top.document_id, int)
    # every other hit came from the dense leg only (no other chunk says "zulu")
    assert {h.found_by for h in result[1:]} == {"dense"}


def test_search_filter_and_knobs(client):
    client.create_collection("c", embedding_dims=DIMS)
    rng = np.random.default_rng(4)
    client.upsert_documents("c", random_documents(rng, 12, DIMS))
    q = unit(rng.normal(size=DIMS))
    hits = client.search("c", embedding=q, top_k=20, filter={"parity": "even"})
    assert len(hits) == 12 and {h.metadata["parity"] for h in hits} == {"even"}
    dense_only = client.search("c", "alpha", embedding=q, top_k=5, hybrid=False)
    assert dense_only.legs == ["dense"]
    assert [h.dense_rank for h in dense_only] == [1, 2, 3, 4, 5]


def test_index_path_gives_the_same_answer_as_the_exact_scan(client):
    # exact_search_limit=0 sends the dense leg through the HNSW branch even for a tiny
    # collection; on data this small it must find exactly what the exact scan finds.
    client.create_collection("c", embedding_dims=DIMS)
    rng = np.random.default_rng(6)
    client.upsert_documents("c", random_documents(rng, 30, DIMS))
    q = unit(rng.normal(size=DIMS))
    exact = client.search("c", embedding=q, top_k=10)
    walked = client.search("c", embedding=q, top_k=10, exact_search_limit=0)
    assert [h.chunk_id for h in walked] == [h.chunk_id for h in exact]
    assert [h.dense_distance for h in walked] == pytest.approx([h.dense_distance for h in exact])


def test_explain_matches_search(client):
    client.create_collection("c", embedding_dims=DIMS)
    rng = np.random.default_rng(5)
    client.upsert_documents("c", random_documents(rng, 10, DIMS))
    q = unit(rng.normal(size=DIMS))
    hits = client.search("c", "alpha", embedding=q, top_k=4)
    pool = client.explain("c", "alpha", embedding=q, top_k=4)
    kept = [c for c in pool if c.kept]
    assert [c.chunk_id for c in kept] == [h.chunk_id for h in hits]
    assert all(isinstance(c, pgsift.Explanation) for c in pool) and len(pool) > len(kept)


# -- typed errors -----------------------------------------------------------------------------

def test_unknown_collection(client):
    client.create_collection("c", embedding_dims=DIMS)
    client.upsert_documents("c", [doc("a", ["x"])])
    for call in (lambda: client.search("nope", "x"),
                 lambda: client.explain("nope", "x"),
                 lambda: client.get_collection("nope"),
                 lambda: client.alter_collection("nope", hybrid=False),
                 lambda: client.knobs("nope"),
                 lambda: client.finalize("nope", [1]),
                 lambda: client.candidates("nope", "x"),
                 lambda: client.drop_collection("nope"),
                 lambda: client.delete_document("nope", "a"),
                 lambda: client.upsert_documents("nope", [doc("a", ["x"])])):
        with pytest.raises(pgsift.CollectionNotFound, match="nope"):
            call()


def test_collection_of_another_tenant_is_not_found(db, client):
    client.create_collection("c", embedding_dims=DIMS)
    client.upsert_documents("c", [doc("a", ["x"])])
    with pytest.raises(pgsift.CollectionNotFound):
        Client(db, tenant="other").search("c", "x")


def test_query_dimension_mismatch(client):
    client.create_collection("c", embedding_dims=DIMS)
    client.upsert_documents("c", [doc("a", ["x"])])
    with pytest.raises(pgsift.DimensionMismatch) as info:
        client.search("c", "x", embedding=np.ones(5))
    assert (info.value.got, info.value.expected) == (5, DIMS)
    with pytest.raises(pgsift.DimensionMismatch):
        client.explain("c", "x", embedding=np.ones(5))


def test_search_checks_its_arguments_before_any_chunk_exists(client):
    # The checks must not depend on the data: with sift.chunks still empty, a typo'd
    # collection or a wrong-sized query embedding is an error, not an empty answer.
    client.create_collection("c", embedding_dims=DIMS)
    with pytest.raises(pgsift.CollectionNotFound):
        client.search("nope", "x")
    with pytest.raises(pgsift.DimensionMismatch):
        client.search("c", "x", embedding=np.ones(5))
    with pytest.raises(pgsift.CollectionNotFound):
        client.explain("nope", "x")
    with pytest.raises(pgsift.DimensionMismatch):
        client.explain("c", "x", embedding=np.ones(5))


def test_chunk_dimension_mismatch(client):
    client.create_collection("c", embedding_dims=DIMS)
    bad = Document(source_uri="a", chunks=[Chunk(content="x", embedding=np.ones(DIMS + 1))])
    with pytest.raises(pgsift.DimensionMismatch) as info:
        client.upsert_documents("c", [bad])
    assert (info.value.got, info.value.expected) == (DIMS + 1, DIMS)


@pytest.mark.parametrize("bad_filter", [["parity"], "parity", 3], ids=["list", "str", "int"])
def test_filter_must_be_a_dict(client, bad_filter):
    client.create_collection("c", embedding_dims=DIMS)
    with pytest.raises(pgsift.InvalidArgument, match="filter"):
        client.search("c", "x", filter=bad_filter)


def test_unknown_knob_names_suggest_the_nearest(client):
    client.create_collection("c", embedding_dims=DIMS)
    for call in (lambda: client.search("c", "x", dense_wieght=0.5),
                 lambda: client.explain("c", "x", dense_wieght=0.5),
                 lambda: client.candidates("c", "x", dense_wieght=0.5),
                 lambda: client.finalize("c", [1], dense_wieght=0.5),
                 lambda: client.knobs("c", dense_wieght=0.5),
                 lambda: client.alter_collection("c", dense_wieght=0.5),
                 lambda: client.alter_collection("c", reset=["dense_wieght"]),
                 lambda: client.create_collection("d", embedding_dims=DIMS, dense_wieght=0.5)):
        with pytest.raises(pgsift.InvalidKnob, match='did you mean "dense_weight"') as info:
            call()
        assert info.value.knob == "dense_wieght"
    assert [c.name for c in client.list_collections()] == ["c"]


def test_knob_values_that_json_cannot_carry_are_refused_before_sending(client):
    client.create_collection("c", embedding_dims=DIMS)
    with pytest.raises(pgsift.InvalidArgument, match="knobs.dense_weight"):
        client.search("c", "x", dense_weight=float("nan"))
    with pytest.raises(pgsift.InvalidArgument, match="knobs.fetch_k"):
        client.search("c", "x", fetch_k=object())
    with pytest.raises(pgsift.InvalidKnob, match="must be a JSON number"):
        client.search("c", "x", dense_weight="0.5")


def test_a_nul_character_is_an_invalid_argument_naming_it(client):
    client.create_collection("c", embedding_dims=DIMS)
    with pytest.raises(pgsift.InvalidArgument, match="query"):
        client.search("c", "refund\x00s")
    with pytest.raises(pgsift.InvalidArgument, match="filter"):
        client.search("c", "x", filter={"k": "v\x00"})
    with pytest.raises(pgsift.InvalidArgument, match="the text of chunk 0"):
        client.upsert_documents("c", [Document(source_uri="a", chunks=[Chunk("a\x00b", np.ones(DIMS))])])
    with pytest.raises(pgsift.InvalidArgument, match="collection"):
        client.search("c\x00", "x")


def test_out_of_range_search_knob(client):
    client.create_collection("c", embedding_dims=DIMS)
    with pytest.raises(pgsift.InvalidKnob) as info:
        client.search("c", "x", dense_weight=2)
    assert info.value.knob == "dense_weight"


def test_out_of_range_arguments_are_not_knobs(client):
    # top_k, embedding_dims and a reranker's settings are arguments: InvalidArgument, never
    # an InvalidKnob naming something sift.knobs() does not list.
    client.create_collection("c", embedding_dims=DIMS)
    for call in (lambda: client.search("c", "x", top_k=5000),
                 lambda: client.create_collection("d", embedding_dims=5000),
                 lambda: client.finalize("c", [1], top_k=-1)):
        with pytest.raises(pgsift.InvalidArgument) as info:
            call()
        assert type(info.value) is pgsift.InvalidArgument
    with pytest.raises(pgsift.InvalidArgument, match="match_count"):
        client.search("c", "x", top_k=1001)
    with pytest.raises(pgsift.InvalidArgument):
        client.create_collection("e", embedding_dims=DIMS, distance="manhattan")


@pytest.mark.parametrize("value", [float("nan"), float("inf")], ids=["nan", "inf"])
def test_non_finite_embeddings(db, client, value):
    client.create_collection("c", embedding_dims=DIMS)
    vec = np.ones(DIMS)
    vec[3] = value
    with pytest.raises(pgsift.InvalidArgument, match="NaN or infinity"):
        client.search("c", "x", embedding=vec)
    with pytest.raises(pgsift.InvalidArgument, match="NaN or infinity"):
        client.upsert_documents("c", [Document(source_uri="a", chunks=[Chunk("x", vec)])])
    assert db.execute("select count(*) from sift.documents").fetchone()[0] == 0


def test_empty_documents_are_refused(db, client):
    client.create_collection("c", embedding_dims=DIMS)
    with pytest.raises(pgsift.InvalidArgument, match="no chunks"):
        client.upsert_documents("c", [Document(source_uri="a", chunks=[])])
    with pytest.raises(pgsift.InvalidArgument, match="blank"):
        client.upsert_documents("c", [Document(source_uri="a", chunks=[Chunk("  ", np.ones(DIMS))])])
    assert db.execute("select count(*) from sift.documents").fetchone()[0] == 0


def test_malformed_embedding(client):
    client.create_collection("c", embedding_dims=DIMS)
    with pytest.raises(pgsift.InvalidArgument):
        client.search("c", "x", embedding=["a", "b"])
    with pytest.raises(pgsift.InvalidArgument):
        client.search("c", "x", embedding=np.ones((2, 4)))


# -- async twins ------------------------------------------------------------------------------

async def test_async_twins_match_sync(db, client, aclient):
    rng = np.random.default_rng(7)
    docs = random_documents(rng, 15, DIMS)
    q = unit(rng.normal(size=DIMS))

    s = client.create_collection("s", embedding_dims=DIMS, dense_weight=0.6)
    a = await aclient.create_collection("a", embedding_dims=DIMS, dense_weight=0.6)
    assert dataclasses.replace(a, collection_id=s.collection_id, name="s", created_at=s.created_at) == s
    assert await aclient.get_collection("s") == s
    assert await aclient.list_collections() == client.list_collections()
    assert await aclient.knobs("s") == client.knobs("s")

    s_ids = client.upsert_documents("s", docs)
    a_ids = await aclient.upsert_documents("a", docs)
    assert len(s_ids) == len(a_ids) == 15

    for kwargs in ({"query": "alpha bravo", "embedding": q},
                   {"query": "charlie", "embedding": q, "hybrid": False},
                   {"query": "delta", "filter": {"parity": "odd"}},
                   {"query": "echo", "embedding": q, "mmr_lambda": 0.5, "per_document_cap": 1},
                   {"query": "alpha", "embedding": q, "parent_return": "parent", "neighbours": 1}):
        sync_hits = client.search("s", top_k=7, **kwargs)
        assert len(sync_hits) > 0
        # the same collection read both ways: identical hits
        assert (await aclient.search("s", top_k=7, **kwargs)).hits == sync_hits.hits
        # the same data written both ways: the same ranking
        assert comparable(await aclient.search("a", top_k=7, **kwargs)) == comparable(sync_hits)
        assert await aclient.explain("s", top_k=7, **kwargs) == client.explain("s", top_k=7, **kwargs)
        assert await aclient.candidates("s", top_k=7, **kwargs) == client.candidates("s", top_k=7, **kwargs)

    top = client.search("s", "alpha", embedding=q, top_k=3)
    assert await aclient.resolve_sections(top.hits) == client.resolve_sections(top.hits)
    with pytest.raises(pgsift.SectionNotFound):
        await aclient.resolve_sections([-1])

    altered = await aclient.alter_collection("a", fetch_k=10)
    assert altered.settings["fetch_k"] == 10
    assert await aclient.delete_document("a", "doc-0") is True
    assert await aclient.delete_document("a", "doc-0") is False
    assert client.delete_document("s", "doc-0") is True
    assert await aclient.migrate() == []
    await aclient.drop_collection("a")
    assert [c.name for c in client.list_collections()] == ["s"]


async def test_async_typed_errors(aclient):
    await aclient.create_collection("c", embedding_dims=DIMS)
    await aclient.upsert_documents("c", [doc("a", ["x"])])
    with pytest.raises(pgsift.CollectionNotFound):
        await aclient.search("nope", "x")
    with pytest.raises(pgsift.DimensionMismatch) as info:
        await aclient.search("c", "x", embedding=np.ones(3))
    assert (info.value.got, info.value.expected) == (3, DIMS)
    with pytest.raises(pgsift.CollectionExists):
        await aclient.create_collection("c", embedding_dims=DIMS)
    with pytest.raises(pgsift.InvalidKnob) as knob:
        await aclient.create_collection("d", embedding_dims=DIMS, rrf_k=0)
    assert knob.value.knob == "rrf_k"
    with pytest.raises(pgsift.InvalidKnob, match="dense_wieght"):
        await aclient.create_collection("e", embedding_dims=DIMS, dense_wieght=0.5)


def test_each_client_takes_only_its_kind_of_source(db, dsn):
    with pytest.raises(TypeError, match="psycopg AsyncConnection or"):
        AsyncClient(db)
    pool = psycopg_pool.AsyncConnectionPool(dsn, open=False)
    with pytest.raises(TypeError, match="psycopg Connection or"):
        Client(pool)
    with pytest.raises(TypeError, match="writer"):
        Client(db, writer=pool)


def test_the_sync_client_is_generated_from_the_async_one():
    # client.py, migrate.py and rerankers/engine.py are derived from their *_async.py
    # sources; a hand edit or a stale file fails here (`make sync` regenerates them).
    import subprocess
    import sys
    from pathlib import Path
    tool = Path(__file__).resolve().parent.parent / "tools" / "async_to_sync.py"
    result = subprocess.run([sys.executable, str(tool), "--check"], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


class RecordingCursor(psycopg.Cursor):
    """A cursor that notes every statement it sends (the connection's conn.execute uses it too)."""

    sent: list[str] = []

    def execute(self, query, params=None, **kwargs):  # type: ignore[override]
        RecordingCursor.sent.append(query if isinstance(query, str) else query.as_string(self.connection))
        return super().execute(query, params, **kwargs)


def test_a_plain_search_is_one_statement(dsn):
    # What the server receives for a search without a reranker: the tenant binding and
    # sift.search, between BEGIN and COMMIT (one round trip); no reranker or threshold lookups.
    with psycopg.connect(dsn, autocommit=True, cursor_factory=RecordingCursor) as conn:
        client = Client(conn, tenant="default")
        client.create_collection("c", embedding_dims=DIMS)
        client.upsert_documents("c", random_documents(np.random.default_rng(1), 5, DIMS))
        RecordingCursor.sent.clear()
        assert len(client.search("c", "alpha", embedding=np.ones(DIMS), top_k=3)) == 3
    assert RecordingCursor.sent[0] == "begin" and RecordingCursor.sent[-1] == "commit"
    sent = RecordingCursor.sent[1:-1]
    assert len(sent) == 2
    assert "sift.set_tenant" in sent[0] and "sift.search(" in sent[1]


@contextlib.contextmanager
def round_trips(monkeypatch):
    """What waits on the server: a pipeline's Sync, and a statement sent outside a pipeline."""
    trips: list[str] = []
    sync, execute = psycopg_pipeline.BasePipeline._enqueue_sync, psycopg.Cursor.execute

    def spy_sync(self):
        trips.append("Sync")
        return sync(self)

    def spy_execute(self, query, params=None, **kwargs):
        if self.connection.info.pipeline_status == psycopg.pq.PipelineStatus.OFF:
            trips.append(str(query))
        return execute(self, query, params, **kwargs)

    aexecute = psycopg.AsyncCursor.execute

    async def spy_aexecute(self, query, params=None, **kwargs):
        if self.connection.info.pipeline_status == psycopg.pq.PipelineStatus.OFF:
            trips.append(str(query))
        return await aexecute(self, query, params, **kwargs)

    with monkeypatch.context() as m:
        m.setattr(psycopg_pipeline.BasePipeline, "_enqueue_sync", spy_sync)
        m.setattr(psycopg.Cursor, "execute", spy_execute)
        m.setattr(psycopg.AsyncCursor, "execute", spy_aexecute)
        yield trips


def binding_left(conn) -> tuple:
    """The session's own settings and tenant binding, as the next statement would see them."""
    return conn.execute("select current_setting('extra_float_digits'), current_setting('IntervalStyle'), "
                        "coalesce(current_setting('pgsift.tenant', true), '')").fetchone()


@pytest.mark.parametrize("autocommit", [True, False])
def test_a_search_is_one_round_trip_that_leaves_the_connection_as_it_was(dsn, monkeypatch, autocommit):
    """BEGIN, the binding, the search and COMMIT go together (the protocol's implicit
    transaction up to the Sync; it took 3 round trips in psycopg's transaction): the binding
    holds for the search and for nothing after it, and the connection keeps its autocommit
    and the session's own settings, found or not, failed or not."""
    with psycopg.connect(dsn, autocommit=autocommit) as conn:
        client = Client(conn, tenant="acme")
        client.create_collection("c", embedding_dims=DIMS)
        client.upsert_documents("c", random_documents(np.random.default_rng(4), 5, DIMS))
        conn.execute("set extra_float_digits = -15")
        conn.execute("set IntervalStyle = iso_8601")
        if not autocommit:
            conn.commit()
        before = binding_left(conn)
        if not autocommit:
            conn.commit()
        for query in ("alpha", "zyzzyva"):
            with round_trips(monkeypatch) as trips:
                hits = client.search("c", query, embedding=np.ones(DIMS), top_k=3)
            assert trips == ["Sync"] and len(hits) == 3
            # extra_float_digits pinned for the search: floats arrive whole, not cut to a digit
            assert any(h.dense_distance != round(h.dense_distance, 3) for h in hits)
            assert conn.autocommit is autocommit
            assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
            assert binding_left(conn) == before == ("-15", "iso_8601", "")
            if not autocommit:
                conn.commit()
        with pytest.raises(pgsift.CollectionNotFound):
            client.search("nope", "alpha")
        assert conn.autocommit is autocommit
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
        assert len(client.search("c", "alpha", embedding=np.ones(DIMS), top_k=3)) == 3


@pytest.mark.parametrize("autocommit", [True, False])
def test_a_failure_inside_a_one_round_trip_transaction_commits_nothing(dsn, autocommit):
    """A statement that cannot be sent (here a parameter psycopg cannot adapt) after one that
    was: the block is rolled back before the Sync that would commit what it sent."""
    with psycopg.connect(dsn, autocommit=autocommit) as conn:
        client = Client(conn, tenant="acme")
        with pytest.raises(psycopg.ProgrammingError, match="cannot adapt"):
            client._rows([(pgsift.queries.create_collection(["collection", "embedding_dims"]),
                           {"collection": "half", "embedding_dims": DIMS}),
                          (pgsift.queries.COLLECTION_INFO, {"collection": object()})])
        assert conn.autocommit is autocommit
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
        assert client.list_collections() == []


@pytest.mark.parametrize("autocommit", [True, False])
def test_an_error_at_commit_comes_back_as_itself_and_leaves_the_connection_usable(dsn, autocommit):
    """COMMIT is a statement of the round trip, so an error raised at commit (here a deferred
    constraint trigger; a serialization failure under a server-side serializable default
    alike) is its result: the error itself, nothing committed, the connection idle."""
    with psycopg.connect(dsn, autocommit=True) as setup:
        setup.execute("""
            create table public.deferred_check (x integer);
            create function public.refuse_negative() returns trigger language plpgsql as $$
            begin if new.x < 0 then raise exception 'deferred check failed'; end if; return null; end $$;
            create constraint trigger deferred_check after insert on public.deferred_check
                deferrable initially deferred for each row execute function public.refuse_negative()""")
    with psycopg.connect(dsn, autocommit=autocommit) as conn:
        client = Client(conn, tenant="acme")
        client.create_collection("c", embedding_dims=DIMS)
        client.upsert_documents("c", random_documents(np.random.default_rng(4), 5, DIMS))
        if not autocommit:
            conn.commit()
        with pytest.raises(psycopg.errors.RaiseException, match="deferred check failed"):
            client._rows([("insert into public.deferred_check values (-1)", {})])
        assert conn.autocommit is autocommit
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
        assert conn.info.pipeline_status == psycopg.pq.PipelineStatus.OFF
        assert len(client.search("c", "alpha", embedding=np.ones(DIMS), top_k=3)) == 3
        assert conn.execute("select count(*) from public.deferred_check").fetchone() == (0,)


def test_a_search_in_the_applications_transaction_stays_in_it(dsn, monkeypatch):
    """In a transaction the application holds open, the search runs in a savepoint of it (round
    trips and all: nothing of the application's may be committed), which it leaves open."""
    with psycopg.connect(dsn) as conn:
        client = Client(conn, tenant="acme")
        client.create_collection("c", embedding_dims=DIMS)
        client.upsert_documents("c", random_documents(np.random.default_rng(4), 5, DIMS))
        conn.commit()
        conn.execute("create temp table mine (x integer)")
        hits = client.search("c", "alpha", embedding=np.ones(DIMS), top_k=3)
        assert len(hits) == 3 and conn.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS
        conn.rollback()
        assert conn.execute("select to_regclass('pg_temp.mine')").fetchone() == (None,)


@pytest.mark.parametrize("autocommit", [True, False])
def test_a_read_only_connection_keeps_its_read_only_transactions(dsn, autocommit):
    """Transaction characteristics the application set on the connection (read_only,
    isolation_level, deferrable) travel on psycopg's BEGIN, so the client keeps psycopg's
    transaction there: a write is refused as before, a search still answers."""
    with psycopg.connect(dsn, autocommit=True) as setup:
        Client(setup).create_collection("c", embedding_dims=DIMS)
        Client(setup).upsert_documents("c", random_documents(np.random.default_rng(4), 5, DIMS))
    with psycopg.connect(dsn, autocommit=autocommit) as conn:
        conn.read_only = True
        client = Client(conn)
        with pytest.raises(pgsift.ReadOnlyDatabase):
            client.create_collection("d", embedding_dims=DIMS)
        assert len(client.search("c", "alpha", embedding=np.ones(DIMS), top_k=3)) == 3
        assert conn.read_only is True and conn.autocommit is autocommit


def test_prepared_statements_answer_as_the_plain_ones(dsn):
    """prepare=True: the binding and the search are prepared on the server once a connection
    (a direct one: PgBouncer before 1.21 cannot carry them), with the same answers, through a
    failed statement, the application's transaction and the functions re-applied."""
    with psycopg.connect(dsn, autocommit=True) as plain_conn, psycopg.connect(dsn) as conn:
        plain, prepared = Client(plain_conn, tenant="acme"), Client(conn, tenant="acme", prepare=True)
        plain.create_collection("c", embedding_dims=DIMS)
        plain.upsert_documents("c", random_documents(np.random.default_rng(4), 30, DIMS))
        rng = np.random.default_rng(9)
        for i in range(8):
            query, vector = ["alpha", "beta gamma", "", "zyzzyva"][i % 4], unit(rng.normal(size=DIMS))
            knobs = [{}, {"hybrid": False}][i % 2]
            want = [(h.chunk_id, h.score) for h in plain.search("c", query, embedding=vector, top_k=5, **knobs)]
            assert [(h.chunk_id, h.score) for h in prepared.search("c", query, embedding=vector, top_k=5,
                                                                    **knobs)] == want
            if i == 3:
                with pytest.raises(pgsift.CollectionNotFound):
                    prepared.search("nope", "alpha")
            if i == 5:
                Client(plain_conn).migrate()
        names = [r[0] for r in conn.execute("select statement from pg_prepared_statements").fetchall()]
        assert any("sift.search(" in n for n in names) and any("sift.set_tenant" in n for n in names)
        conn.rollback()
        assert plain_conn.execute("select array_agg(statement) from pg_prepared_statements").fetchone() == (None,)
        conn.execute("select 1")                                   # the application's transaction
        assert len(prepared.search("c", "alpha", embedding=np.ones(DIMS), top_k=3)) == 3
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS
        with pytest.raises(pgsift.InvalidArgument, match="prepare"):
            Client(conn, prepare="yes")  # type: ignore[arg-type]


async def test_an_async_search_is_one_round_trip_too(dsn, monkeypatch):
    conn = await psycopg.AsyncConnection.connect(dsn)
    try:
        client = AsyncClient(conn, tenant="acme")
        await client.create_collection("c", embedding_dims=DIMS)
        await client.upsert_documents("c", random_documents(np.random.default_rng(4), 5, DIMS))
        await conn.commit()
        with round_trips(monkeypatch) as trips:
            hits = await client.search("c", "alpha", embedding=np.ones(DIMS), top_k=3)
        assert trips == ["Sync"] and len(hits) == 3
        assert conn.autocommit is False and conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
    finally:
        await conn.close()


# -- pools ------------------------------------------------------------------------------------

def test_connection_pool_source(dsn):
    with psycopg_pool.ConnectionPool(dsn, min_size=1, max_size=2, open=True) as pool:
        client = Client(pool)
        client.create_collection("c", embedding_dims=DIMS)
        client.upsert_documents("c", random_documents(np.random.default_rng(8), 5, DIMS))
        hits = client.search("c", "alpha", embedding=np.ones(DIMS), top_k=3)
        assert len(hits) == 3
        assert client.delete_document("c", "doc-0") is True
        with pytest.raises(pgsift.CollectionNotFound):
            client.search("nope")
        # errors leave no connection stuck in a transaction
        with pool.connection() as conn:
            assert conn.execute("select count(*) from sift.chunks").fetchone()[0] == 8


async def test_async_connection_pool_source(dsn):
    async with psycopg_pool.AsyncConnectionPool(dsn, min_size=1, max_size=2, open=False) as pool:
        client = AsyncClient(pool)
        await client.create_collection("c", embedding_dims=DIMS)
        await client.upsert_documents("c", random_documents(np.random.default_rng(8), 5, DIMS))
        hits = await client.search("c", "alpha", embedding=np.ones(DIMS), top_k=3)
        assert len(hits) == 3
        assert await client.delete_document("c", "doc-0") is True
        async with pool.connection() as conn:
            cur = await conn.execute("select count(*) from sift.chunks")
            assert (await cur.fetchone())[0] == 8


# -- embedder ---------------------------------------------------------------------------------

class FakeEmbedder:
    """Stands in for the local embedder: deterministic unit vectors from the text."""

    dims = DIMS

    def __init__(self):
        self.calls: list[list[str]] = []

    def embed(self, texts):
        self.calls.append(list(texts))
        out = [unit(np.random.default_rng(abs(hash(t)) % 2**32).normal(size=self.dims)) for t in texts]
        return np.asarray(out, dtype=np.float32)


def test_embedder_embeds_the_query(db):
    embedder = FakeEmbedder()
    client = Client(db, embedder=embedder)
    client.create_collection("c", embedding_dims=DIMS)
    client.upsert_documents("c", random_documents(np.random.default_rng(9), 10, DIMS))

    implicit = client.search("c", "alpha bravo", top_k=5)
    assert embedder.calls == [["alpha bravo"]]
    assert implicit.legs == ["dense", "lexical"]
    explicit = Client(db).search("c", "alpha bravo", embedding=embedder.embed(["alpha bravo"])[0], top_k=5)
    assert implicit.hits == explicit.hits

    # a given embedding wins, and a blank query is not embedded
    embedder.calls.clear()
    client.search("c", "alpha", embedding=np.ones(DIMS))
    client.search("c", "   ")
    assert embedder.calls == []


async def test_embedder_embeds_the_async_query(dsn):
    embedder = FakeEmbedder()
    async with await psycopg.AsyncConnection.connect(dsn, autocommit=True) as conn:
        client = AsyncClient(conn, embedder=embedder)
        await client.create_collection("c", embedding_dims=DIMS)
        await client.upsert_documents("c", random_documents(np.random.default_rng(9), 10, DIMS))
        hits = await client.search("c", "golf", top_k=3)
    assert embedder.calls == [["golf"]]
    assert hits.legs == ["dense", "lexical"] and len(hits) == 3


# -- concurrent writers -----------------------------------------------------------------------

def test_concurrent_upserts_all_land(db, dsn, client):
    client.create_collection("c", embedding_dims=DIMS)
    workers, per_worker, chunks_per_doc = 4, 20, 3
    barrier = threading.Barrier(workers)
    errors: list[BaseException] = []

    def write(w: int):
        try:
            with psycopg.connect(dsn, autocommit=True) as conn:
                docs = random_documents(np.random.default_rng(w), per_worker, DIMS,
                                        chunks_per_doc=chunks_per_doc, prefix=f"w{w}")
                barrier.wait(timeout=30)
                Client(conn).upsert_documents("c", docs)
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(w,)) for w in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert errors == []
    assert db.execute("select count(*) from sift.documents").fetchone()[0] == workers * per_worker
    assert db.execute("select count(*) from sift.chunks").fetchone()[0] == workers * per_worker * chunks_per_doc
    bad = db.execute("select document_id from sift.chunks group by 1 "
                     "having array_agg(ordinal order by ordinal) <> array[0, 1, 2]").fetchall()
    assert bad == []


# -- vectors over the wire ----------------------------------------------------------------------

def test_vectors_travel_in_binary_and_arrive_exact(dsn):
    """Chunk and query vectors go in pgvector's binary form (pgsift.vectors), every float32 bit
    kept, on autocommit and transactional connections alike; the client's catalog read never
    leaves a transaction open, and the application's own arrays are not touched."""
    from pgsift import vectors

    odd = np.array([1 / 3, -1e-30, 123456.789, -2.5, 0.1, 7e-45, 1.0, -1 / 7], dtype=np.float32)
    for autocommit in (True, False):
        with psycopg.connect(dsn, autocommit=autocommit) as conn:
            client = Client(conn)
            client.create_collection(f"exact{autocommit}", embedding_dims=DIMS)
            assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
            assert vectors.adapted(conn)
            # What a Vec parameter is sent as on this connection: binary, as the vector type.
            dumper = conn.adapters.get_dumper(vectors.Vec, psycopg.adapt.PyFormat.AUTO)
            assert dumper.format == psycopg.pq.Format.BINARY
            assert dumper.oid == conn.execute("select 'vector'::regtype::oid").fetchone()[0]
            # The write path never falls back to text (a list goes as text unless asked: %b).
            text_dump = vectors._Text.dump
            vectors._Text.dump = lambda self, obj: pytest.fail("a vector went as text")  # type: ignore[method-assign]
            try:
                client.upsert_documents(f"exact{autocommit}", [Document(
                    source_uri="d", chunks=[Chunk(content="odd floats", embedding=odd)])])
                client.search(f"exact{autocommit}", embedding=odd, top_k=1)
            finally:
                vectors._Text.dump = text_dump  # type: ignore[method-assign]
            stored = conn.execute("select embedding::float4[] from sift.chunks").fetchone()[0]
            conn.commit()
            assert np.array_equal(np.array(stored, dtype=np.float32), odd)
            hit = client.search(f"exact{autocommit}", embedding=odd, top_k=1)[0]
            assert hit.dense_distance == pytest.approx(0, abs=1e-6)
            # An application's numpy array still goes the way psycopg sends it by default.
            with pytest.raises(psycopg.ProgrammingError, match="cannot adapt"):
                conn.execute("select %s", [np.ones(3)])
            conn.rollback()


def test_a_client_inside_the_applications_transaction_writes_within_it(dsn):
    """The vector type is read inside an open transaction without ending it: a rollback by
    the application takes the client's writes back."""
    with psycopg.connect(dsn) as conn:
        Client(conn).migrate()
        conn.commit()
        conn.execute("select 1")                      # the application's transaction is open
        client = Client(conn)
        client.create_collection("inside", embedding_dims=DIMS)
        client.upsert_documents("inside", [doc("a", ["one"])])
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.INTRANS
        conn.rollback()
        assert conn.execute("select count(*) from sift.collections where name = 'inside'").fetchone() == (0,)


async def test_async_vectors_travel_in_binary(aclient):
    from pgsift import vectors

    await aclient.create_collection("abin", embedding_dims=DIMS)
    assert vectors.adapted(aclient.source)
    await aclient.upsert_documents("abin", [doc("a", ["alpha beta"], seed=3)])
    v = doc("a", ["alpha beta"], seed=3).chunks[0].embedding
    hits = await aclient.search("abin", embedding=v, top_k=1)
    assert hits[0].dense_distance == pytest.approx(0, abs=1e-6)


def test_a_vector_on_a_connection_not_adapted_goes_as_text(dsn):
    from pgsift import vectors

    with psycopg.connect(dsn, autocommit=True) as conn:
        assert not vectors.adapted(conn)
        value = conn.execute("select (%s::vector)::text", [vectors.vec([1 / 3, -2.0])]).fetchone()[0]
        assert value == "[0.33333334,-2]"
