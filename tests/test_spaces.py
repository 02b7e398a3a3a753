"""Vector spaces and re-embedding without downtime (sql/35_spaces.sql, Client.reembed).

A collection moves from its built-in space to an added one: searches keep using the old
space while the new one fills (one that names the filling space says how many chunks it
lacks), the switch is refused with the count while any is missing, writes after the switch
land in the new space, and dropping the old one leaves BM25 untouched. The oracle: a
moved collection ranks exactly like one built with the new vectors from the start, for
every knob set, on the exact and the HNSW path. Searches run throughout with 0 failures
and 0 empty answers.
"""

from __future__ import annotations

import hashlib
import threading
import time

import numpy as np
import psycopg
import pytest
from conftest import unit
from pgsift import (
    Chunk,
    Client,
    DimensionMismatch,
    Document,
    InvalidArgument,
    InvalidCursor,
    SpaceIncomplete,
    SpaceNotFound,
)
from pgsift.vectors import vector_text

OLD, NEW = 8, 5
WORDS = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel"]


def corpus(seed: int, n_docs: int, dims: int, chunks: int = 3) -> list[Document]:
    rng = np.random.default_rng(seed)
    return [Document(source_uri=f"doc-{i}", title=f"doc {i}", metadata={"n": i},
                     chunks=[Chunk(content=" ".join(rng.choice(WORDS, size=6)),
                                   embedding=unit(rng.normal(size=dims))) for _ in range(chunks)])
            for i in range(n_docs)]


def new_vector(text: str, chunk_key: tuple[str, int]) -> np.ndarray:
    """The "new model": a deterministic vector of NEW dimensions per (document, ordinal)."""
    seed = int(hashlib.sha256(repr(chunk_key).encode()).hexdigest()[:8], 16)   # the same in every process
    return unit(np.random.default_rng(seed).normal(size=NEW)).astype(np.float32)


@pytest.fixture
def kb(db):
    client = Client(db)
    client.create_collection("kb", embedding_dims=OLD)
    client.upsert_documents("kb", corpus(1, 30, OLD))
    return client


def chunk_keys(db, collection: str) -> dict[int, tuple[str, int]]:
    return {cid: (uri, o) for cid, uri, o in db.execute(
        "select k.chunk_id, d.source_uri, k.ordinal from sift.chunks k join sift.documents d using (document_id) "
        "join sift.collections c on c.collection_id = k.collection_id where c.name = %s", [collection]).fetchall()}


def fill(client: Client, db, collection: str, space: str, limit: int = 10_000) -> int:
    keys = chunk_keys(db, collection)
    todo = client.missing_space_vectors(collection, space, limit=limit)
    return client.write_space_vectors(collection, space, [t[0] for t in todo],
                                      [new_vector(t[1], keys[t[0]]) for t in todo])


def lexical_state(db, collection: str):
    return db.execute(
        "select s.chunks, s.tokens, (select count(*) from sift.term_lists l where l.collection_id = c.collection_id), "
        "(select coalesce(sum(array_length(p.lexemes, 1)), 0) from sift.term_df_pending p "
        " where p.collection_id = c.collection_id) "
        "from sift.collections c cross join lateral (select sum(chunks) as chunks, sum(tokens) as tokens "
        "from sift.collection_lexical_stats x where x.collection_id = c.collection_id) s where c.name = %s",
        [collection]).fetchone()


def test_a_collection_moves_to_a_new_space(kb, db):
    q_old, q_new = unit(np.ones(OLD)), unit(np.arange(1, NEW + 1, dtype=float))
    before = kb.search("kb", "alpha bravo", embedding=q_old, top_k=10)
    kb.add_vector_space("kb", "mini5", dimensions=NEW, model="mini-5")
    spaces = {s.name: s for s in kb.vector_spaces("kb")}
    assert spaces["default"].active and spaces["default"].builtin and spaces["default"].missing == 0
    assert not spaces["mini5"].active and spaces["mini5"].missing == 90 and spaces["mini5"].model == "mini-5"

    fill(kb, db, "kb", "mini5", limit=40)                           # half-way
    during = kb.search("kb", "alpha bravo", embedding=q_old, top_k=10)
    assert [h.chunk_id for h in during] == [h.chunk_id for h in before]   # searches keep the old space
    assert {h.dense_space for h in during} == {"default"} and {h.dense_space_missing for h in during} == {0}
    partial = kb.search("kb", "alpha bravo", embedding=q_new, top_k=10, dense_space="mini5")
    assert {h.dense_space_missing for h in partial} == {50}       # a half-filled space says so
    filled = {r[0] for r in db.execute("select chunk_id from sift.chunk_vectors").fetchall()}
    assert len(filled) == 40 and all(h.chunk_id in filled for h in partial if h.dense_rank is not None)
    with pytest.raises(SpaceIncomplete, match="lacks vectors for 50 chunk"):
        kb.switch_vector_space("kb", "mini5")
    with pytest.raises(DimensionMismatch):                        # the active space is still the old one
        kb.search("kb", "alpha", embedding=q_new, top_k=3)

    fill(kb, db, "kb", "mini5")
    stats = lexical_state(db, "kb")
    kb.switch_vector_space("kb", "mini5")
    assert kb.get_collection("kb").embedding_dims == NEW
    after = kb.search("kb", "alpha bravo", embedding=q_new, top_k=10)
    assert {h.dense_space for h in after} == {"mini5"} and {h.dense_space_missing for h in after} == {0}
    with pytest.raises(DimensionMismatch):
        kb.search("kb", "alpha", embedding=q_old, top_k=3)
    pinned = kb.search("kb", "alpha bravo", embedding=q_old, top_k=10, dense_space="default")
    assert [h.chunk_id for h in pinned] == [h.chunk_id for h in before]   # the old space until dropped

    # Writes now give the new space's vectors: stored in it, not with the chunks.
    kb.upsert_documents("kb", [Document(source_uri="late", chunks=[Chunk(content="alpha late", embedding=q_new)])])
    with pytest.raises(DimensionMismatch):
        kb.upsert_documents("kb", [Document(source_uri="wrong", chunks=[Chunk(content="x", embedding=q_old)])])
    late = db.execute("select k.embedding is null, v.embedding is not null from sift.chunks k "
                      "join sift.documents d using (document_id) left join sift.chunk_vectors v using (chunk_id) "
                      "where d.source_uri = 'late'").fetchall()
    assert late == [(True, True)]
    assert kb.search("kb", "alpha", embedding=q_new, top_k=1, hybrid=False)[0].source_uri == "late"
    assert {s.name: s.missing for s in kb.vector_spaces("kb")} == {"mini5": 0, "default": 1}

    kb.drop_vector_space("kb", "default")
    assert [s.name for s in kb.vector_spaces("kb")] == ["mini5"]
    assert db.execute("select count(*) from sift.chunks k join sift.collections c using (collection_id) "
                      "where c.name = 'kb' and k.embedding is not null").fetchone()[0] == 0
    assert lexical_state(db, "kb")[:3] == (stats[0] + 1, stats[1] + 2, stats[2])   # only the late chunk
    with pytest.raises(SpaceNotFound):
        kb.search("kb", "alpha", embedding=q_old, top_k=3, dense_space="default")


def _same_ranking(a, b):
    return [(h.source_uri, h.ordinal) for h in a] == [(h.source_uri, h.ordinal) for h in b] and \
        [h.score for h in a] == pytest.approx([h.score for h in b], rel=1e-9)


KNOB_SETS = [{}, {"hybrid": False}, {"mmr_lambda": 0.5}, {"per_document_cap": 1, "mmr_lambda": 0.3},
             {"exact_search_limit": 0}, {"exact_search_limit": 0, "hybrid": False, "mmr_lambda": 0.7},
             {"dense_weight": 0.9, "fetch_k": 60}, {"filter": {"n": 3}}]


def test_a_moved_collection_ranks_as_if_built_with_the_new_vectors(kb, db, figure):
    keys = chunk_keys(db, "kb")
    kb.reembed("kb", "mini5", dimensions=NEW, vectors=lambda ids, texts: [new_vector(t, keys[i])
                                                                         for i, t in zip(ids, texts, strict=True)],
               batch_size=17, drop_old=True)
    fresh = corpus(1, 30, OLD)
    for d in fresh:
        for o, c in enumerate(d.chunks):
            c.embedding = new_vector(c.content, (d.source_uri, o))
    kb.create_collection("fresh", embedding_dims=NEW)
    kb.upsert_documents("fresh", fresh)
    rng = np.random.default_rng(9)
    cases = 0
    for knobs in KNOB_SETS:
        filt = knobs.get("filter")
        rest = {k: v for k, v in knobs.items() if k != "filter"}
        for _ in range(5):
            q = unit(rng.normal(size=NEW))
            text = " ".join(rng.choice(WORDS, size=2))
            moved = kb.search("kb", text, embedding=q, top_k=15, filter=filt, **rest)
            built = kb.search("fresh", text, embedding=q, top_k=15, filter=filt, **rest)
            assert _same_ranking(moved, built), knobs
            cases += 1
    figure("moved-vs-built oracle cases, rankings identical", cases)


def test_searches_run_throughout_a_move_with_no_failure(kb, db, dsn, figure):
    """A reader pins the space it embeds for (dense_space), moves to the new model once the
    switch is made, and the old space is dropped only after it moved: 0 failures, 0 empty."""
    keys = chunk_keys(db, "kb")
    stop = threading.Event()
    failures: list[str] = []
    empty = searched = 0
    uses = {"space": "default"}

    def reader() -> None:
        nonlocal empty, searched
        with psycopg.connect(dsn, autocommit=True) as conn:
            client = Client(conn)
            rng = np.random.default_rng(3)
            while not stop.is_set():
                space = uses["space"]
                q = unit(rng.normal(size=OLD if space == "default" else NEW))
                try:
                    hits = client.search("kb", "alpha", embedding=q, top_k=5, dense_space=space)
                    searched += 1
                    empty += not hits.hits
                except Exception as exc:   # counted, then asserted
                    failures.append(f"{type(exc).__name__}: {exc}")
                time.sleep(0.002)

    def searches(n: int) -> None:
        # Let the reader search n more times in this phase (bounded: a stuck reader fails the test).
        target, deadline = searched + n, time.monotonic() + 30
        while searched < target and time.monotonic() < deadline and thread.is_alive():
            time.sleep(0.005)

    thread = threading.Thread(target=reader)
    thread.start()
    try:
        searches(10)
        writer = threading.Thread(target=lambda: kb_writer(dsn))
        writer.start()
        report = kb.reembed("kb", "mini5", dimensions=NEW, batch_size=10,
                            vectors=lambda ids, texts: [new_vector(t, keys.get(i) or chunk_keys(db, "kb")[i])
                                                        for i, t in zip(ids, texts, strict=True)],
                            progress=lambda _written, _left: searches(3))
        writer.join()
        assert report.switched and report.previous == "default" and report.batches >= 9
        searches(10)                    # switched; the reader still names the old space
        uses["space"] = "mini5"
        searches(10)                    # the reader moved to the new model
        kb.drop_vector_space("kb", "default")
        searches(10)
    finally:
        stop.set()
        thread.join()
    assert failures == [] and empty == 0 and searched >= 60
    figure("searches during a move (backfill, concurrent writes, switch, drop), 0 failed, 0 empty", searched)


def kb_writer(dsn: str) -> None:
    """Documents written while the space fills (each with the old space's vector, as the active
    space is the old one until the switch; the backfill picks them up)."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        client = Client(conn)
        rng = np.random.default_rng(4)
        for i in range(5):
            dims = client.get_collection("kb").embedding_dims
            try:
                client.upsert_documents("kb", [Document(source_uri=f"meanwhile-{i}", chunks=[
                    Chunk(content="alpha meanwhile", embedding=unit(rng.normal(size=dims)))])])
            except DimensionMismatch:   # the switch landed between reading the size and writing
                continue


def test_an_interrupted_backfill_resumes_where_it_stopped(kb, db):
    keys = chunk_keys(db, "kb")
    calls: list[int] = []

    def flaky(ids, texts):
        calls.append(len(ids))
        if len(calls) == 3:
            raise RuntimeError("the embedding service went away")
        return [new_vector(t, keys[i]) for i, t in zip(ids, texts, strict=True)]

    with pytest.raises(RuntimeError):
        kb.reembed("kb", "mini5", dimensions=NEW, vectors=flaky, batch_size=20)
    status = {s.name: s for s in kb.vector_spaces("kb")}
    assert status["default"].active and status["mini5"].missing == 50       # two batches landed
    report = kb.reembed("kb", "mini5", vectors=flaky, batch_size=20)
    assert report.written == 50 and report.batches == 3 and report.switched
    assert db.execute("select count(*), count(distinct chunk_id) from sift.chunk_vectors").fetchone() == (90, 90)


def test_bad_space_requests_are_typed(kb, db):
    with pytest.raises(SpaceNotFound):
        kb.search("kb", "alpha", embedding=np.ones(OLD), top_k=3, dense_space="nope")
    with pytest.raises(SpaceNotFound):
        kb.switch_vector_space("kb", "nope")
    with pytest.raises(InvalidArgument):
        kb.add_vector_space("kb", "big", dimensions=4001)
    kb.add_vector_space("kb", "mini5", dimensions=NEW)
    with pytest.raises(InvalidArgument, match="already has"):
        kb.add_vector_space("kb", "mini5", dimensions=NEW)
    with pytest.raises(InvalidArgument):
        kb.add_vector_space("kb", "bad name!", dimensions=NEW)
    ids = [t[0] for t in kb.missing_space_vectors("kb", "mini5", limit=2)]
    with pytest.raises(DimensionMismatch):
        kb.write_space_vectors("kb", "mini5", ids, [np.ones(OLD), np.ones(OLD)])
    with pytest.raises(InvalidArgument, match="zero vector"):
        kb.write_space_vectors("kb", "mini5", ids[:1], [np.zeros(NEW)])
    with pytest.raises(DimensionMismatch):                            # the built-in space is the chunks' column
        kb.write_space_vectors("kb", "default", ids[:1], [np.ones(NEW)])
    with pytest.raises(InvalidArgument, match="searches"):
        kb.drop_vector_space("kb", "default")
    kb.create_collection("other", embedding_dims=NEW)
    kb.upsert_documents("other", corpus(2, 2, NEW))
    other_chunk = db.execute("select min(chunk_id) from sift.chunks k join sift.collections c using "
                             "(collection_id) where c.name = 'other'").fetchone()[0]
    with pytest.raises(Exception, match="not a chunk of collection"):
        kb.write_space_vectors("kb", "mini5", [other_chunk], [np.ones(NEW)])
    assert kb.write_space_vectors("kb", "mini5", ids, [np.ones(NEW), np.ones(NEW)]) == 2
    assert kb.write_space_vectors("kb", "mini5", ids, [np.ones(NEW), -np.ones(NEW)]) == 2   # replaced
    assert kb.missing_space_vectors("kb", "mini5", limit=0) == []
    fill(kb, db, "kb", "mini5")
    kb.switch_vector_space("kb", "mini5")
    # A chunk written straight into the table with a built-in vector, past write_chunks: refused.
    doc = db.execute("select min(document_id) from sift.documents d join sift.collections c using (collection_id) "
                     "where c.name = 'kb'").fetchone()[0]
    with pytest.raises(psycopg.Error, match="added vector space"):
        db.execute("insert into sift.chunks (document_id, ordinal, content, embedding) values (%s, 99, 'x', %s)",
                   [doc, vector_text(np.ones(NEW))])
    with pytest.raises(InvalidArgument):
        kb.reembed("kb", "x", dimensions=NEW)   # neither an embedder nor vectors


def test_recall_of_an_added_space_through_its_hnsw_index(db, figure):
    """Two collections' added spaces share one partial HNSW index (same size): the small one's
    dense top 10 through the index (exact_search_limit 0) against exact numpy cosine."""
    client = Client(db)
    rng = np.random.default_rng(12)
    dims = 32
    centres = unit(rng.normal(size=(20, dims)))
    vectors = {}
    for name, n in (("big", 3000), ("small", 150)):
        client.create_collection(name, embedding_dims=4)
        client.upsert_documents(name, [Document(source_uri=f"{name}-{i}", chunks=[
            Chunk(content=f"chunk {i}", embedding=unit(rng.normal(size=4)))]) for i in range(n)])
        client.add_vector_space(name, "wide", dimensions=dims)
        picks = rng.integers(len(centres), size=n)
        vecs = unit(centres[picks] + rng.normal(scale=0.15, size=(n, dims))).astype(np.float32)
        ids = dict(db.execute("select d.source_uri, k.chunk_id from sift.chunks k join sift.documents d "
                              "using (document_id) join sift.collections c on c.collection_id = k.collection_id "
                              "where c.name = %s", [name]).fetchall())
        order = [ids[f"{name}-{i}"] for i in range(n)]
        for start in range(0, n, 2000):
            client.write_space_vectors(name, "wide", order[start:start + 2000], list(vecs[start:start + 2000]))
        client.switch_vector_space(name, "wide")
        vectors[name] = (order, vecs)
    db.execute("analyze sift.chunk_vectors")
    order, vecs = vectors["small"]
    found = 0
    for _ in range(30):
        q = unit(centres[rng.integers(len(centres))] + rng.normal(scale=0.15, size=dims))
        truth = {order[i] for i in np.argsort(-(vecs @ q))[:10]}
        hits = client.search("small", embedding=q, top_k=10, hybrid=False, exact_search_limit=0)
        found += len(truth & {h.chunk_id for h in hits})
    recall = found / 300
    assert recall >= 0.95, recall
    figure("added-space recall@10 through the shared HNSW index, per mille", round(recall * 1000))


def test_back_to_the_built_in_space_after_filling_it_again(kb, db):
    keys = chunk_keys(db, "kb")
    kb.reembed("kb", "mini5", dimensions=NEW, vectors=lambda ids, texts: [new_vector(t, keys[i])
                                                                         for i, t in zip(ids, texts, strict=True)])
    kb.upsert_documents("kb", [Document(source_uri="late", chunks=[Chunk(content="alpha late",
                                                                         embedding=unit(np.ones(NEW)))])])
    assert {s.name: s.missing for s in kb.vector_spaces("kb")} == {"mini5": 0, "default": 1}
    with pytest.raises(SpaceIncomplete, match="1 chunk"):
        kb.switch_vector_space("kb", "default")
    stats = lexical_state(db, "kb")
    report = kb.reembed("kb", "default", vectors=lambda ids, texts: [unit(np.ones(OLD)) for _ in ids])
    assert report.written == 1 and report.switched and kb.get_collection("kb").embedding_dims == OLD
    assert lexical_state(db, "kb") == stats                       # a vector-only update re-analyses nothing
    assert kb.search("kb", "alpha", embedding=np.ones(OLD), top_k=1, hybrid=False)[0].source_uri == "late"
    kb.switch_vector_space("kb", "mini5")                          # and forth again: the one-active index holds
    kb.switch_vector_space("kb", "default")


def test_a_drop_waiting_on_a_switch_never_drops_the_active_space(kb, db, dsn):
    kb.add_vector_space("kb", "mini5", dimensions=NEW)
    fill(kb, db, "kb", "mini5")
    switching = psycopg.connect(dsn)
    try:
        switching.execute("select sift.switch_vector_space('kb', 'mini5')")   # holds the collection's lock
        outcome: list[object] = []

        def drop() -> None:
            with psycopg.connect(dsn, autocommit=True) as other:
                try:
                    outcome.append(other.execute("select sift.drop_vector_space('kb', 'mini5')").fetchone())
                except psycopg.Error as exc:
                    outcome.append(exc.sqlstate)

        thread = threading.Thread(target=drop)
        thread.start()
        time.sleep(0.3)
        assert thread.is_alive()                                   # waits for the switch
        switching.commit()
        thread.join(timeout=10)
    finally:
        switching.close()
    assert outcome == ["SF003"]
    assert [s.name for s in kb.vector_spaces("kb") if s.active] == ["mini5"]


def test_a_backfill_survives_documents_rewritten_meanwhile(kb, db):
    keys = chunk_keys(db, "kb")
    rewritten: list[str] = []

    def vectors(ids, texts):
        if not rewritten:   # a re-crawl replaces a document whose chunk is in this very batch
            uri = keys[ids[0]][0]
            kb.upsert_documents("kb", [Document(source_uri=uri, chunks=[Chunk(content="alpha recrawled",
                                                                              embedding=unit(np.ones(OLD)))])])
            rewritten.append(uri)
        return [new_vector(t, keys.get(i, ("new", 0))) for i, t in zip(ids, texts, strict=True)]

    report = kb.reembed("kb", "mini5", dimensions=NEW, vectors=vectors, batch_size=20)
    assert report.switched and rewritten
    assert {s.name: s.missing for s in kb.vector_spaces("kb")}["mini5"] == 0


def test_the_chunk_trigger_keeps_what_a_vector_update_cannot_change(kb, db):
    kb.reembed("kb", "mini5", dimensions=NEW, vectors=lambda ids, texts: [unit(np.ones(NEW)) for _ in ids])
    kb.create_collection("other", embedding_dims=OLD)
    other = db.execute("select collection_id from sift.collections where name = 'other'").fetchone()[0]
    chunk, before = db.execute("select chunk_id, (collection_id, search_vector, lexical_length)::text "
                               "from sift.chunks order by chunk_id limit 1").fetchone()
    db.execute("update sift.chunks set embedding = null, collection_id = %s, search_vector = 'forged:1', "
               "lexical_length = 1 where chunk_id = %s", [other, chunk])
    db.execute("update sift.chunks set embedding = %s::text::public.vector, search_vector = 'forged:1' "
               "where chunk_id = %s", [vector_text(np.ones(OLD)), chunk])
    assert db.execute("select (collection_id, search_vector, lexical_length)::text from sift.chunks "
                      "where chunk_id = %s", [chunk]).fetchone()[0] == before


def test_mmr_with_a_chunk_missing_from_the_active_space(kb, db):
    kb.reembed("kb", "mini5", dimensions=NEW, vectors=lambda ids, texts: [unit(np.arange(1, NEW + 1.0) + i % 7)
                                                                         for i in ids])
    db.execute("delete from sift.chunk_vectors where chunk_id = (select min(chunk_id) from sift.chunks)")
    hits = kb.search("kb", "alpha bravo", embedding=unit(np.ones(NEW)), top_k=10, mmr_lambda=0.5)
    assert len(hits) == 10


def test_switches_and_writers_at_repeatable_read(kb, db, dsn):
    kb.add_vector_space("kb", "mini5", dimensions=NEW)
    fill(kb, db, "kb", "mini5")
    with psycopg.connect(dsn) as rr:
        rr.execute("set transaction isolation level repeatable read")
        with pytest.raises(psycopg.Error) as err:
            rr.execute("select sift.switch_vector_space('kb', 'mini5')")
        assert err.value.sqlstate == "SF003"
        rr.rollback()
        writer = psycopg.connect(dsn)
        try:
            writer.execute("set transaction isolation level repeatable read")
            writer.execute("select count(*) from sift.documents")          # its snapshot is taken
            kb.switch_vector_space("kb", "mini5")                           # committed meanwhile
            doc = Client(writer)
            with pytest.raises(Exception) as late:
                doc.upsert_documents("kb", [Document(source_uri="rr", chunks=[Chunk(content="alpha",
                                                                                embedding=unit(np.ones(OLD)))])])
            assert "could not serialize" in str(late.value) or "SF002" in str(late.value) \
                or "dimensions" in str(late.value)
        finally:
            writer.close()
    assert {s.name: s.missing for s in kb.vector_spaces("kb")}["mini5"] == 0


def test_spaces_are_changed_through_their_functions_only(kb, db, dsn):
    kb.add_vector_space("kb", "mini5", dimensions=NEW)
    assert db.execute("select count(*) from pg_indexes where indexname = 'chunks_hnsw_cosine_5'").fetchone() == (0,)
    for sql in ("update sift.vector_spaces set dimensions = 6 where name = 'mini5'",
                "update sift.vector_spaces set active = true where name = 'mini5'",
                "delete from sift.vector_spaces where name = 'default'",
                "insert into sift.vector_spaces (collection_id, name, dimensions, builtin) "
                "select collection_id, 'x', 3, true from sift.collections where name = 'kb'"):
        with pytest.raises(psycopg.Error) as err, db.transaction():
            db.execute(sql)
        assert err.value.sqlstate in ("SF003", "23505"), sql
    db.execute("update sift.vector_spaces set model = 'renamed' where name = 'mini5'")   # allowed
    with pytest.raises(SpaceNotFound):
        kb.search("kb", "alpha", top_k=3, dense_space="nope")           # checked without a vector too
    fill(kb, db, "kb", "mini5")
    cursor = kb.search_page("kb", "alpha", page_size=3).cursor          # lexical pages of the old space
    kb.switch_vector_space("kb", "mini5")
    with pytest.raises(InvalidCursor):                                   # the space searched is the request's
        kb.search_page("kb", "alpha", page_size=3, cursor=cursor)
    with pytest.raises(InvalidArgument, match="has 5 dimensions"):
        kb.reembed("kb", "mini5", dimensions=7, vectors=lambda ids, texts: [])
