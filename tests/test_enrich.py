"""Enrichment at ingest (pgsift.enrich, Client.enrich_documents): the real `openai` client
against a loopback chat server (tests/chat_server.py) that injects faults.

A chunk's text never changes; what the model wrote is kept apart (sift.chunk_enrichments),
reused for unchanged text without a call, and each ingestion's spend and warnings are
recorded per document (sift.enrichment_history). A failed call never fails the ingestion.
"""

from __future__ import annotations

import hashlib

import numpy as np
import psycopg
import pytest
from chat_server import ChatServer
from conftest import unit
from pgsift import Chunk, Client, Document, InvalidArgument, enrich
from pgsift.enrich import OpenAIChatEnricher

DIMS = 8


class FirstWords:
    """A custom enricher: the document's first words as context, one question per chunk."""

    model = "first-words"

    def enrich(self, document, chunk, *, context, questions):
        return enrich.Enrichment(context=" ".join(document.split()[:4]) if context else None,
                                 questions=[f"Which {chunk.split()[0].lower()}?"][:questions])


class Broken:
    """A custom enricher that fails in every way a custom one can."""

    model = "broken"

    def __init__(self):
        self.calls = 0

    def enrich(self, document, chunk, *, context, questions):
        self.calls += 1
        return [lambda: 1 / 0, lambda: "not an Enrichment",
                lambda: enrich.Enrichment("ok\x00 context", ["", " ", "Why?", "Why?", "a?", "b?", "c?", "d?", "e?"]),
                lambda: enrich.Enrichment(None, [])][(self.calls - 1) % 4]()


class HashEmbedder:
    """A deterministic stand-in: a unit vector seeded by the text."""

    def embed(self, texts):
        return np.array([unit(np.random.default_rng(int(hashlib.sha256(t.encode()).hexdigest()[:8], 16))
                              .normal(size=DIMS)) for t in texts], dtype=np.float32)


def documents(n_docs: int = 2, chunks: int = 3, prefix: str = "page") -> list[Document]:
    texts = ["Refunds are paid within 14 days of a return.", "Parcels ship every weekday morning.",
             "Invoices are sent on the first of the month.", "Lunch is served at noon in the canteen."]
    return [Document(source_uri=f"{prefix}-{d}.md", title=f"Page {d}",
                     chunks=[Chunk(content=f"{texts[(d + i) % len(texts)]} (part {i} of page {d})", embedding=None,
                                   context=f"Page {d} > Part {i}")
                             for i in range(chunks)])
            for d in range(n_docs)]


@pytest.fixture
def kb(db):
    client = Client(db, embedder=HashEmbedder())
    client.create_collection("kb", embedding_dims=DIMS)
    return client


def enricher(server: ChatServer, model: str = "gpt-4o-mini", **kw) -> OpenAIChatEnricher:
    e = OpenAIChatEnricher(model, base_url=server.base_url, api_key="test-key", timeout=kw.pop("timeout", 5.0),
                           max_retries=kw.pop("max_retries", 0))
    # Every loopback server of a test is one endpoint (each binds its own port).
    e.fingerprint = "loopback"
    return e


def test_enriched_chunks_are_written_apart_reused_and_searchable(kb, db):
    docs = documents()
    with ChatServer() as server:
        enriched = kb.enrich_documents("kb", docs, enricher(server), questions=3)
        assert len(server.requests) == 6
        # The document first, the same message for every chunk of it: a cacheable prefix.
        firsts = [r["messages"][1]["content"] for r in server.requests]
        assert firsts[0] == firsts[1] == firsts[2] and firsts[3] == firsts[4] == firsts[5] != firsts[0]
        assert "Refunds are paid" in firsts[0] and server.requests[0]["model"] == "gpt-4o-mini"
    assert docs[0].chunks[0].context == "Page 0 > Part 0" and docs[0].chunks[0].embedding is None   # untouched
    chunk = enriched[0].chunks[0]
    assert chunk.content == docs[0].chunks[0].content   # the text never changes
    assert chunk.context.startswith("Page 0 > Part 0\n\nThis chunk comes from a company page")
    assert "Questions: What does the handbook say about" in chunk.context
    assert chunk.enrichment is not None and len(chunk.enrichment.questions) == 3
    np.testing.assert_allclose(chunk.embedding, HashEmbedder().embed([f"{chunk.context}\n\n{chunk.content}"])[0])
    run = enriched[0].enrichment_run
    assert (run.chunks, run.enriched, run.reused, run.failed, run.skipped) == (3, 3, 0, 0, 0)
    assert run.input_tokens > 0 and run.output_tokens > 0 and run.cost_usd is not None and run.cost_usd > 0
    kb.upsert_documents("kb", enriched)
    stored = db.execute("select e.context, e.questions, e.model, k.content from sift.chunk_enrichments e "
                        "join sift.chunks k using (chunk_id) order by k.chunk_id").fetchall()
    assert len(stored) == 6 and all(len(q) == 3 and m == "gpt-4o-mini" for _, q, m, _ in stored)
    assert stored[0][3] == docs[0].chunks[0].content
    history = kb.enrichment_history("kb")
    assert [(h.source_uri, h.enriched, h.reused) for h in history] == [("page-0.md", 3, 0), ("page-1.md", 3, 0)]
    assert history[0].cost_usd == pytest.approx(run.cost_usd)
    # The lexical leg sees the questions: a word only they hold finds the chunks (lexical alone).
    found = Client(db).search("kb", "handbook", top_k=10)
    assert found.legs == ["lexical"] and {h.chunk_id for h in found} == {r[0] for r in db.execute(
        "select chunk_id from sift.chunk_enrichments").fetchall()}
    # Enriching what was enriched composes its context once, from its header.
    twice = kb.enrich_documents("kb", enriched, FirstWords(), questions=1)
    assert twice[0].chunks[0].context == "Page 0 > Part 0\n\nRefunds are paid within\n\nQuestions: Which refunds?"

    # Again, unchanged: nothing is sent, everything is reused.
    with ChatServer() as server:
        again = kb.enrich_documents("kb", documents(), enricher(server), questions=3)
        assert server.requests == []
    assert [c.context for d in again for c in d.chunks] == [c.context for d in enriched for c in d.chunks]
    assert again[0].enrichment_run.reused == 3 and again[0].enrichment_run.input_tokens == 0
    kb.upsert_documents("kb", again)
    assert db.execute("select count(*) from sift.chunk_enrichments").fetchone()[0] == 6
    # One chunk's text changed: that one is sent, the others reused.
    changed = documents()
    changed[1].chunks[2].content = "Refund requests over 500 euros need a manager's approval."
    with ChatServer() as server:
        third = kb.enrich_documents("kb", changed, enricher(server), questions=3)
        assert len(server.requests) == 3   # the changed document's text changed: its chunks' keys did too
    assert third[0].enrichment_run.reused == 3 and third[1].enrichment_run.enriched == 3
    # Other settings are other keys.
    with ChatServer() as server:
        kb.enrich_documents("kb", documents(), enricher(server), questions=2)
        assert len(server.requests) == 6


def test_faults_are_warnings_and_the_document_still_indexes(kb, db, figure):
    faults = ["429", "500", "malformed", "empty", "too_many", "too_few", "fenced", "long", "slow", "ok"]
    docs = documents(n_docs=1, chunks=len(faults))
    with ChatServer(faults=faults, delay=3.0) as server:
        got = kb.enrich_documents("kb", docs, enricher(server, timeout=1.0), questions=3)
    run = got[0].enrichment_run
    assert (run.enriched, run.failed) == (5, 5)
    text = "\n".join(run.warnings)
    for expected in ("chunk 0: call failed: RateLimitError", "chunk 1: call failed: InternalServerError",
                     "chunk 2: malformed output", "chunk 3: empty output", "chunk 4: 8 questions: kept the first 3",
                     "chunk 5: asked for 3 questions, got 1", "chunk 7: context had 300 words: cut to 100",
                     "chunk 8: call failed: APITimeoutError"):
        assert expected in text, (expected, text)
    assert "chunk 6" not in text and "chunk 9" not in text   # a fenced answer is read as it is
    failed = {0, 1, 2, 3, 8}
    for i, chunk in enumerate(got[0].chunks):
        assert (chunk.enrichment is None) == (i in failed)
        if i in failed:
            assert chunk.context == f"Page 0 > Part {i}"   # the deterministic header only
        else:
            assert chunk.context.startswith(f"Page 0 > Part {i}\n\nThis chunk comes from") or i == 7
    assert len(got[0].chunks[4].enrichment.questions) == 3 and len(got[0].chunks[5].enrichment.questions) == 1
    assert len(got[0].chunks[7].enrichment.context.split()) == 100
    kb.upsert_documents("kb", got)
    assert db.execute("select count(*) from sift.chunks").fetchone()[0] == len(faults)
    assert db.execute("select count(*) from sift.chunk_enrichments").fetchone()[0] == 5
    assert kb.enrichment_history("kb")[0].warnings == run.warnings
    figure("chat faults met by enrichment, each a warning, 0 failed ingestions", len(faults))


def test_the_client_retries_what_it_retries(kb):
    with ChatServer(faults=["429", "500", "ok"]) as server:
        got = kb.enrich_documents("kb", documents(n_docs=1, chunks=1), enricher(server, max_retries=2))
        assert len(server.requests) == 3
    assert got[0].enrichment_run.enriched == 1 and got[0].enrichment_run.warnings == []


def test_a_token_budget_stops_a_document_not_the_ingestion(kb, db):
    with ChatServer() as server:
        got = kb.enrich_documents("kb", documents(n_docs=2, chunks=4), enricher(server), budget_tokens=500)
        assert len(server.requests) == 2   # one call per document: a second would pass its budget
    for doc in got:
        run = doc.enrichment_run
        assert (run.enriched, run.skipped) == (1, 3) and run.input_tokens + run.output_tokens <= 500
        assert any("token budget of 500 reached: 3 chunk(s) keep the deterministic header" in w for w in run.warnings)
        assert [c.context for c in doc.chunks[1:]] == [f"{doc.title} > Part {i}" for i in range(1, 4)]
    kb.upsert_documents("kb", got)
    assert db.execute("select count(*) from sift.chunks").fetchone()[0] == 8


def test_a_long_document_sends_its_outline_and_the_chunks_section(kb):
    doc = Document(source_uri="long.md", title="The long page", chunks=[
        Chunk(content=f"Paragraph {i}: " + "refunds and parcels " * 40, embedding=None) for i in range(12)])
    with ChatServer() as server:
        kb.enrich_documents("kb", [doc], enricher(server), max_document_tokens=300)
        documents_shown = {r["messages"][1]["content"] for r in server.requests}
        chunk_shown = server.requests[5]["messages"][2]["content"]
    # The outline alone is the document part, the same for every chunk (a cacheable prefix) ...
    assert len(documents_shown) == 1 and next(iter(documents_shown)).startswith("<document>\nOutline:\nThe long page")
    # ... and the chunk's neighbours go with the chunk.
    assert "Its section:\nParagraph 4:" in chunk_shown and "Paragraph 6:" in chunk_shown
    assert "The chunk:\nParagraph 5:" in chunk_shown and "Paragraph 8:" not in chunk_shown


def test_another_endpoint_is_another_cache_key():
    settings = enrich.Settings()
    a = OpenAIChatEnricher("m", base_url="http://127.0.0.1:1/v1", client=object())
    b = OpenAIChatEnricher("m", base_url="http://127.0.0.1:2/v1", client=object())
    assert enrich.enrichment_key("doc", "chunk", a, settings) != enrich.enrichment_key("doc", "chunk", b, settings)
    assert enrich.enrichment_key("doc", "chunk", a, settings) == enrich.enrichment_key(
        "doc", "chunk", a, enrich.Settings(questions_as="vectors"))   # how answers are used is not asked


def test_estimate_prices_or_says_it_cannot():
    docs = documents(n_docs=3, chunks=4)
    priced = enrich.estimate(docs, "gpt-4o-mini")
    assert priced.chunks == 12 and priced.input_tokens > 12 * 50 and priced.cost_usd is not None
    assert priced.cost_usd == pytest.approx((priced.input_tokens * 0.15 + priced.output_tokens * 0.60) / 1e6)
    unknown = enrich.estimate(docs, "my-local-llama")
    assert unknown.cost_usd is None and unknown.note.startswith("cannot price")
    assert enrich.estimate(docs, "my-local-llama", rates={"my-local-llama": (0, 0)}).cost_usd == 0


def test_bad_arguments_are_refused_before_any_call(kb, db):
    with ChatServer() as server:
        e = enricher(server)
        for kwargs, match in (({"questions": 6}, "questions must be 0 to 5"),
                              ({"context": False, "questions": 0}, "asks for nothing"),
                              ({"questions_as": "elsewhere"}, "questions_as must be one of"),
                              ({"budget_tokens": -1}, "budget_tokens")):
            with pytest.raises(InvalidArgument, match=match):
                kb.enrich_documents("kb", documents(), e, **kwargs)
        with pytest.raises(InvalidArgument, match="embedder"):
            Client(db).enrich_documents("kb", documents(), e)
        assert server.requests == []
    with pytest.raises(InvalidArgument, match="model"):
        OpenAIChatEnricher("", base_url="http://127.0.0.1:9/v1")


@pytest.mark.parametrize("policy", ["vectors", "both"])
def test_questions_as_vectors_of_their_own(kb, db, policy):
    """Each question gets its vector; the dense leg finds a chunk by its best question and says
    which; the chunk's own vector has the questions in it only with "both"; the lexical leg
    sees them either way."""
    with ChatServer() as server:
        got = kb.enrich_documents("kb", documents(n_docs=3, chunks=2), enricher(server), questions=2,
                                  questions_as=policy)
    kb.upsert_documents("kb", got)
    rows = db.execute("select v.chunk_id, v.ordinal, e.questions[v.ordinal + 1] from sift.question_vectors v "
                      "join sift.chunk_enrichments e using (chunk_id) order by 1, 2").fetchall()
    assert len(rows) == 12
    chunk = got[1].chunks[1]
    embedded = HashEmbedder().embed([f"{chunk.context}\n\n{chunk.content}"])[0]
    without = chunk.context.split("\n\nQuestions: ")[0]
    assert "Questions: " in chunk.context   # what the lexical leg indexes
    np.testing.assert_allclose(chunk.embedding, embedded if policy == "both" else
                               HashEmbedder().embed([f"{without}\n\n{chunk.content}"])[0])
    # A question asked as written: its chunk comes first, placed by that question.
    counts = {}
    for _, _, q in rows:
        counts[q] = counts.get(q, 0) + 1
    target, ordinal, question = next(r for r in rows if counts[r[2]] == 1 and r[1] == 1)
    hits = kb.search("kb", question, embedding=HashEmbedder().embed([question])[0], top_k=3, hybrid=False)
    assert hits[0].chunk_id == target and hits[0].leg_details["dense"]["question"] == ordinal
    assert hits[0].dense_distance == pytest.approx(0, abs=1e-6)
    # Its chunk's own vector does not bring it up: without question vectors it ranks lower.
    # Past exact_search_limit question vectors, the leg walks their HNSW index: the same answer.
    walked = kb.search("kb", question, embedding=HashEmbedder().embed([question])[0], top_k=3, hybrid=False,
                       exact_search_limit=0)
    assert walked[0].chunk_id == target and walked[0].leg_details["dense"]["question"] == ordinal
    with db.transaction():
        db.execute("set local enable_seqscan = off")
        db.execute("set local enable_sort = off")
        plan = "\n".join(r[0] for r in db.execute(
            "explain select q.chunk_id from sift.question_vectors q where q.collection_id = "
            "(select collection_id from sift.collections where name = 'kb') "
            "and vector_dims(q.embedding) = 8 order by (q.embedding::vector(8)) <=> %s::vector(8) limit 10",
            [str(HashEmbedder().embed([question])[0].tolist())]).fetchall())
    assert "question_vectors_hnsw_cosine_8" in plan
    # The N-leg path says so too; a metadata filter applies to question vectors as to chunks.
    fused = kb.search("kb", question, embedding=HashEmbedder().embed([question])[0], top_k=3, hybrid=False,
                      fusion="dbsf")
    assert fused[0].chunk_id == target and fused[0].leg_details["dense"]["question"] == ordinal
    uri = db.execute("select d.source_uri from sift.chunks k join sift.documents d using (document_id) "
                     "where k.chunk_id = %s", [target]).fetchone()[0]
    db.execute("update sift.documents set metadata = jsonb_build_object('uri', source_uri)")
    inside = kb.search("kb", question, embedding=HashEmbedder().embed([question])[0], top_k=3, hybrid=False,
                       filter={"uri": uri})
    outside = kb.search("kb", question, embedding=HashEmbedder().embed([question])[0], top_k=6, hybrid=False,
                        filter={"uri": {"$ne": uri}})
    assert inside[0].chunk_id == target and target not in {h.chunk_id for h in outside}
    assert all("question" not in h.leg_details["dense"] or h.leg_details["dense"]["question"] is not None
               for h in outside)
    # Without its question vectors, the chunk is only as near as its own vector.
    db.execute("delete from sift.question_vectors")
    again = kb.search("kb", question, embedding=HashEmbedder().embed([question])[0], top_k=6, hybrid=False)
    mine = next(h for h in again if h.chunk_id == target)
    assert mine.dense_distance > 0.05 and "question" not in mine.leg_details["dense"]
    # The lexical leg alone finds every chunk by a word only its questions hold.
    lexical = Client(db).search("kb", "handbook", top_k=20)
    assert lexical.legs == ["lexical"] and {h.chunk_id for h in lexical} == {r[0] for r in rows}


def test_question_vectors_must_fit_the_active_space(kb, db):
    kb.upsert_documents("kb", kb.enrich_documents("kb", documents(n_docs=1, chunks=1), FirstWords()))
    cid = db.execute("select min(chunk_id) from sift.chunks").fetchone()[0]
    with pytest.raises(psycopg.Error) as err:
        db.execute("insert into sift.question_vectors (chunk_id, ordinal, collection_id, embedding) "
                   "values (%s, 0, 0, '[1,2,3]')", [cid])
    assert err.value.sqlstate == "SF002"


def test_custom_enrichers_are_held_to_the_contract(kb, db):
    broken = Broken()
    got = kb.enrich_documents("kb", documents(n_docs=1, chunks=4), broken, questions=5)
    run = got[0].enrichment_run
    assert broken.calls == 4 and (run.enriched, run.failed) == (1, 3)
    text = "\n".join(run.warnings)
    assert "chunk 0: call failed: ZeroDivisionError" in text and "chunk 1: the enricher returned str" in text
    assert "chunk 3: asked for 5 questions, got 0; nothing usable" in text
    kept = got[0].chunks[2].enrichment
    assert kept.context == "ok context" and kept.questions == ["Why?", "a?", "b?", "c?", "d?"]
    kb.upsert_documents("kb", got)   # nothing the database refuses
    assert db.execute("select count(*) from sift.chunk_enrichments").fetchone()[0] == 1
    # Each half switchable; tokens a custom enricher does not report are estimated.
    only_questions = kb.enrich_documents("kb", documents(n_docs=1, chunks=1, prefix="q"), FirstWords(),
                                         context=False, questions=1)
    assert only_questions[0].chunks[0].enrichment.context is None
    assert only_questions[0].chunks[0].context == "Page 0 > Part 0\n\nQuestions: Which refunds?"
    only_context = kb.enrich_documents("kb", documents(n_docs=1, chunks=1, prefix="c"), FirstWords(), questions=0)
    assert only_context[0].chunks[0].enrichment.questions == [] and "Questions" not in only_context[0].chunks[0].context
    assert only_context[0].enrichment_run.input_tokens > 0


def test_a_failing_endpoint_stops_being_called(kb):
    with ChatServer(faults=["500"]) as server:
        got = kb.enrich_documents("kb", documents(n_docs=2, chunks=4), enricher(server))
        assert len(server.requests) == enrich.MAX_FAILURES_IN_A_ROW
    assert sum(d.enrichment_run.skipped for d in got) == 8 - enrich.MAX_FAILURES_IN_A_ROW
    assert any("calls in a row failed" in w for w in got[1].enrichment_run.warnings)


async def test_the_async_client_enriches_and_writes(dsn, kb, db):
    import psycopg
    from pgsift import AsyncClient

    conn = await psycopg.AsyncConnection.connect(dsn, autocommit=True)
    try:
        aclient = AsyncClient(conn, embedder=HashEmbedder())
        got = await aclient.enrich_documents("kb", documents(n_docs=1, chunks=2), FirstWords(), questions=1)
        await aclient.upsert_documents("kb", got)
        assert [(r.enriched, r.reused) for r in await aclient.enrichment_history("kb")] == [(2, 0)]
    finally:
        await conn.close()


def test_a_space_switch_drops_the_old_models_question_vectors(kb, db):
    with ChatServer() as server:
        kb.upsert_documents("kb", kb.enrich_documents("kb", documents(n_docs=2, chunks=2), enricher(server),
                                                      questions=2, questions_as="vectors"))
    assert db.execute("select count(*) from sift.question_vectors").fetchone()[0] == 8
    ids = [r[0] for r in db.execute("select chunk_id from sift.chunks order by 1").fetchall()]
    kb.add_vector_space("kb", "small", dimensions=4)
    kb.write_space_vectors("kb", "small", ids, [np.ones(4)] * len(ids))
    kb.switch_vector_space("kb", "small")
    assert db.execute("select count(*) from sift.question_vectors").fetchone()[0] == 0
    assert len(kb.search("kb", "refunds", embedding=np.ones(4), top_k=3)) == 3
