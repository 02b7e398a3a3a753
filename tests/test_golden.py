"""Golden sets: import (JSONL, BEIR), export, rebind after a re-ingest, and the guards
(tenant, collection, unanswerable questions) the tables and trigger enforce."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import psycopg
import pytest
from pgsift import (
    Chunk,
    Client,
    CollectionNotFound,
    DimensionMismatch,
    Document,
    GoldenSetExists,
    GoldenSetNotFound,
    InvalidArgument,
)
from pgsift.cli import main
from pgsift.golden import (
    Positive,
    Question,
    beir_questions,
    export_golden_set,
    get_golden_set,
    import_golden_set,
    list_golden_sets,
    read_jsonl,
    rebind,
    write_jsonl,
)

DIMS = 8

# source_uri -> title, [(text, token_count)]; chunk i of the whole corpus has embedding e(i).
CORPUS = {
    "refunds.md": ("Refunds", [("Refunds are paid within 14 days of the request.", 10),
                               ("Refunds over 500 euros need approval by the finance team.", 12)]),
    "shipping.md": ("Shipping", [("Parcels ship from Rotterdam every weekday morning.", 9),
                                 ("Returns travel back to Rotterdam at the customer's cost.", 11)]),
    "holidays.md": ("Holidays", [("Staff get 25 days of paid leave a year.", 9)]),
    "security.md": ("Security", [("Laptops must use full disk encryption.", 7)]),
}


def e(i: int) -> list[float]:
    v = [0.0] * DIMS
    v[i] = 1.0
    return v


def corpus_documents(corpus: dict = CORPUS) -> list[Document]:
    docs: list[Document] = []
    i = 0
    for uri, (title, chunks) in corpus.items():
        doc_chunks = []
        for text, tokens in chunks:
            doc_chunks.append(Chunk(content=text, embedding=e(i), token_count=tokens))
            i += 1
        docs.append(Document(source_uri=uri, title=title, chunks=doc_chunks))
    return docs


def chunk_ids(db: psycopg.Connection, collection: str = "kb", tenant: str | None = None) -> dict:
    """(source_uri, ordinal) -> chunk_id (db is the superuser: it sees every tenant's rows)."""
    tenant = tenant or "default"
    rows = db.execute(
        "select d.source_uri, c.ordinal, c.chunk_id from sift.chunks c "
        "join sift.documents d using (document_id) join sift.collections k on k.collection_id = d.collection_id "
        "where k.name = %s and k.tenant = %s", (collection, tenant)).fetchall()
    return {(uri, ordinal): cid for uri, ordinal, cid in rows}


def build_kb(client: Client, db: psycopg.Connection, name: str = "kb") -> dict:
    client.create_collection(name, embedding_dims=DIMS)
    client.upsert_documents(name, corpus_documents())
    return chunk_ids(db, name, client.tenant)


def kb_questions(ids: dict) -> list[dict]:
    """The test's golden set as JSONL objects (chunk level)."""
    return [
        {"id": "refund-time", "question": "how many days until refunds are paid",
         "positives": ["paid within 14 days"], "embedding": e(0)},
        {"id": "approval", "question": "who approves large refunds",
         "positives": [{"chunk_id": ids[("refunds.md", 1)], "grade": 2}], "embedding": e(1)},
        {"id": "returns", "question": "where do returns go",
         "positives": [{"source_uri": "shipping.md"}], "embedding": e(3)},
        # deliberately the wrong vector: the dense leg ranks a shipping chunk first
        {"id": "leave", "question": "how much paid leave do staff get",
         "positives": ["25 days of paid leave"], "embedding": e(2)},
        {"id": "shoe", "question": "what is the CEO's shoe size", "answerable": False,
         "embedding": e(6)},
    ]


def write_questions(path: Path, lines: list[dict]) -> Path:
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    return path


@pytest.fixture
def kb(client, db) -> dict:
    return build_kb(client, db)


def positives_of(db, set_name: str = "gold") -> dict:
    rows = db.execute(
        "select q.question_key, p.chunk_id, p.source_uri, p.content, p.grade "
        "from sift.golden_positives p join sift.golden_questions q using (question_id) "
        "join sift.golden_sets s using (golden_set_id) where s.name = %s order by p.positive_id",
        (set_name,)).fetchall()
    out: dict = {}
    for key, cid, uri, content, grade in rows:
        out.setdefault(key, []).append((cid, uri, content, grade))
    return out


# -- JSONL import ---------------------------------------------------------------------

def test_jsonl_import_binds_each_kind_of_positive(client, db, kb, tmp_path):
    header, questions = read_jsonl(write_questions(tmp_path / "gold.jsonl", kb_questions(kb)))
    assert header == {} and [q.key for q in questions] == ["refund-time", "approval", "returns", "leave",
                                                            "shoe"]
    report = import_golden_set(client, "kb", "gold", questions)

    gs = report.golden_set
    assert (gs.name, gs.judged_at, gs.questions, gs.unanswerable) == ("gold", "chunk", 5, 1)
    assert gs.positives == 5 and gs.unbound == 0 and gs.without_embedding == 0
    assert report.rebind.unbound == []
    pos = positives_of(db)
    # text: bound to the chunk that holds it, the text kept as given
    assert pos["refund-time"] == [(kb[("refunds.md", 0)], "refunds.md", "paid within 14 days", 1)]
    # chunk id: the chunk's own text and document
    assert pos["approval"] == [(kb[("refunds.md", 1)], "refunds.md",
                                CORPUS["refunds.md"][1][1][0], 2)]
    # a document alone: every chunk of it
    assert pos["returns"] == [(kb[("shipping.md", i)], "shipping.md", CORPUS["shipping.md"][1][i][0], 1)
                              for i in (0, 1)]
    assert "shoe" not in pos
    # the query vectors came along
    vec = db.execute("select q.embedding::float4[] from sift.golden_questions q "
                     "where q.question_key = 'approval'").fetchone()[0]
    assert vec == e(1)


def test_jsonl_errors_name_the_line(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"question": "fine", "positives": ["x"]}\n\n{"question": "oops"\n')
    with pytest.raises(InvalidArgument, match=r"bad.jsonl:3: not JSON"):
        read_jsonl(bad)
    bad.write_text('{"question": "q", "positives": [{"txt": "typo"}]}\n')
    with pytest.raises(InvalidArgument, match=r"bad.jsonl:1: unknown positive field\(s\) txt"):
        read_jsonl(bad)
    bad.write_text('{"question": "q", "answerable": "no"}\n')
    with pytest.raises(InvalidArgument, match="answerable"):
        read_jsonl(bad)


@pytest.mark.parametrize("question, error, message", [
    (Question("a", "no positives"), InvalidArgument, "has no positive"),
    (Question("a", "both", answerable=False, positives=[Positive(text="x")]), InvalidArgument, "has positives"),
    (Question("a", "   ", positives=[Positive(text="x")]), InvalidArgument, "has no text"),
    (Question("a", "empty positive", positives=[Positive()]), InvalidArgument,
     "needs a text, a chunk_id or a source_uri"),
    (Question("a", "bad grade", positives=[Positive(text="x", grade=0)]), InvalidArgument, "grade"),
    (Question("a", "unknown doc", positives=[Positive(source_uri="nope.md")]), InvalidArgument,
     '"nope.md" is not in'),
    (Question("a", "unknown chunk", positives=[Positive(chunk_id=10**9)]), InvalidArgument,
     "is not in collection"),
    (Question("a", "short vector", positives=[Positive(text="x")], embedding=[1.0, 0.0]), DimensionMismatch,
     "2 dimensions"),
])
def test_import_refuses_bad_questions_and_writes_nothing(client, db, kb, question, error, message):
    with pytest.raises(error, match=message):
        import_golden_set(client, "kb", "gold", [question])
    assert db.execute("select count(*) from sift.golden_sets").fetchone()[0] == 0


def test_duplicate_keys_and_names(client, kb):
    q = Question("a", "refunds", positives=[Positive(text="Refunds")])
    with pytest.raises(InvalidArgument, match="appears twice"):
        import_golden_set(client, "kb", "gold", [q, q])
    import_golden_set(client, "kb", "gold", [q])
    with pytest.raises(GoldenSetExists, match="replace"):
        import_golden_set(client, "kb", "gold", [q])
    report = import_golden_set(client, "kb", "gold", [q, Question("b", "leave", positives=[Positive(text="leave")])],
                               replace=True)
    assert report.golden_set.questions == 2
    assert [s.name for s in list_golden_sets(client, "kb")] == ["gold"]


def test_text_in_several_documents_is_left_unbound(client, db, kb):
    # "Rotterdam" is in two chunks of one document: bound to the first. "days" is in two
    # documents (refunds and holidays): ambiguous, left unbound.
    report = import_golden_set(client, "kb", "gold", [
        Question("a", "where", positives=[Positive(text="Rotterdam")]),
        Question("b", "when", positives=[Positive(text="days")]),
    ])
    by_key = {b.question_key: b for b in report.rebind.bindings}
    assert by_key["a"].chunk_id == kb[("shipping.md", 0)] and by_key["a"].status == "rebound"
    assert by_key["b"].chunk_id is None and by_key["b"].status == "ambiguous"
    assert report.golden_set.unbound == 1
    # The same text with its document named is bound there.
    report = import_golden_set(client, "kb", "gold2", [
        Question("b", "when", positives=[Positive(text="days", source_uri="holidays.md")])])
    assert report.rebind.bindings[0].chunk_id == kb[("holidays.md", 0)]


# -- the database's guards ---------------------------------------------------------------

def test_positive_must_be_a_chunk_of_the_sets_collection(client, db, kb):
    import_golden_set(client, "kb", "gold", [Question("a", "refunds", positives=[Positive(text="Refunds are")])])
    other = build_kb(client, db, "other")
    question_id = db.execute("select question_id from sift.golden_questions").fetchone()[0]
    with pytest.raises(psycopg.Error, match="is not a chunk of the golden set.s collection") as info:
        db.execute("insert into sift.golden_positives (question_id, chunk_id) values (%s, %s)",
                   (question_id, other[("refunds.md", 0)]))
    assert info.value.sqlstate == "SF003"
    # A chunk of the right collection given alone takes its text and document.
    db.execute("insert into sift.golden_positives (question_id, chunk_id) values (%s, %s)",
               (question_id, kb[("security.md", 0)]))
    row = db.execute("select content, source_uri from sift.golden_positives where chunk_id = %s",
                     (kb[("security.md", 0)],)).fetchone()
    assert row == (CORPUS["security.md"][1][0][0], "security.md")


def test_unanswerable_question_cannot_get_a_positive(client, db, kb):
    import_golden_set(client, "kb", "gold", [Question("shoe", "shoe size?", answerable=False)])
    question_id = db.execute("select question_id from sift.golden_questions").fetchone()[0]
    with pytest.raises(psycopg.Error, match="no answer"):
        db.execute("insert into sift.golden_positives (question_id, content) values (%s, 'x')", (question_id,))


def test_sets_and_questions_stay_where_their_positives_were_checked(client, db, kb):
    """A positive is checked against its set's collection when written: a question moved to
    another set, or a set to another collection, would carry positives naming another
    collection's chunks. Both are refused; deep metadata and run figures are refused as a
    document's metadata is."""
    import_golden_set(client, "kb", "gold", [Question("a", "refunds", positives=[Positive(text="Refunds are")])])
    build_kb(client, db, "other")
    import_golden_set(client, "other", "silver", [Question("b", "security", answerable=False)])
    other_id = db.execute("select collection_id from sift.collections where name = 'other'").fetchone()[0]
    silver_id = db.execute("select golden_set_id from sift.golden_sets where name = 'silver'").fetchone()[0]
    for statement, params, message in (
            ("update sift.golden_sets set collection_id = %s where name = 'gold'", [other_id],
             'golden set "gold" cannot move to another collection'),
            ("update sift.golden_questions set golden_set_id = %s where question_key = 'a'", [silver_id],
             'question "a" cannot move to another golden set')):
        with pytest.raises(psycopg.Error, match=message) as info, db.transaction():
            db.execute(statement, params)
        assert info.value.sqlstate == "SF003"
    deep = '{"a": ' * 100 + "1" + "}" * 100
    gold_id = db.execute("select golden_set_id, collection_id from sift.golden_sets where name = 'gold'").fetchone()
    for statement, params, message in (
            ("insert into sift.golden_questions (golden_set_id, question_key, question, metadata) "
             "values (%s, 'deep', 'q', %s::jsonb)", [gold_id[0], deep], 'the metadata of question "deep"'),
            ("update sift.golden_questions set metadata = %s::jsonb where question_key = 'a'", [deep],
             'the metadata of question "a"'),
            ("insert into sift.eval_runs (collection_id, golden_set_id, golden_set, label, k, metrics) "
             "values (%s, %s, 'gold', 'pipeline', 10, %s::jsonb)", [gold_id[1], gold_id[0], deep],
             "a run's metrics")):
        with pytest.raises(psycopg.Error, match=message + " nests more than 64 levels") as info, db.transaction():
            db.execute(statement, params)
        assert info.value.sqlstate == "SF003"
    # the deepest allowed, and unrelated updates, still pass
    db.execute("update sift.golden_questions set metadata = %s::jsonb, answerable = answerable "
               "where question_key = 'a'", ['{"a": ' * 63 + "1" + "}" * 63])


def test_golden_sets_are_per_tenant_and_go_with_the_collection(client, db, kb):
    import_golden_set(client, "kb", "gold", [Question("a", "refunds", positives=[Positive(text="Refunds are")])])
    acme = Client(db, tenant="acme")
    build_kb(acme, db)
    assert list_golden_sets(acme, "kb") == []
    with pytest.raises(GoldenSetNotFound, match='unknown golden set "gold"'):
        get_golden_set(acme, "kb", "gold")
    with pytest.raises(GoldenSetNotFound, match="has no golden set"):
        get_golden_set(acme, "kb")
    with pytest.raises(CollectionNotFound):
        list_golden_sets(Client(db, tenant="nobody"), "kb")
    client.drop_collection("kb")
    assert db.execute("select count(*) from sift.golden_questions").fetchone()[0] == 0


# -- export ------------------------------------------------------------------------

def test_export_then_import_gives_the_same_set(client, db, kb, tmp_path):
    import_golden_set(client, "kb", "gold", read_jsonl(write_questions(tmp_path / "g.jsonl", kb_questions(kb)))[1],
                      description="handbook questions")
    out = tmp_path / "export.jsonl"
    with out.open("w") as f:
        n = write_jsonl(export_golden_set(client, "kb", "gold", with_embeddings=True), f)
    assert n == 1 + 5
    header, questions = read_jsonl(out)
    assert header["name"] == "gold" and header["judged_at"] == "chunk"
    assert header["description"] == "handbook questions"
    import_golden_set(client, "kb", "copy", questions, judged_at=header["judged_at"])
    assert positives_of(db, "copy") == positives_of(db, "gold")
    same = db.execute("""
        select count(*) from sift.golden_questions a join sift.golden_questions b using (question_key)
        where a.golden_set_id <> b.golden_set_id and a.question = b.question
          and a.answerable = b.answerable and a.embedding = b.embedding""").fetchone()[0]
    assert same == 2 * 5


# -- rebind ------------------------------------------------------------------------

def test_rebind_after_reingest_edit_move_and_delete(client, db, kb, tmp_path):
    import_golden_set(client, "kb", "gold", read_jsonl(write_questions(tmp_path / "g.jsonl", kb_questions(kb)))[1])
    assert {b.status for b in rebind(client, "kb").bindings} == {"kept"}

    # Re-ingest: the same texts, new chunk ids (the old chunks are deleted: positives go unbound).
    changed = dict(CORPUS)
    # refunds.md is re-chunked: the approval sentence now shares a chunk with a new one
    changed["refunds.md"] = ("Refunds", [
        ("Refunds are paid within 14 days of the request.", 10),
        ("New policy. Refunds over 500 euros need approval by the finance team. Ask first.", 16)])
    # the leave sentence moved from holidays.md into security.md
    changed["holidays.md"] = ("Holidays", [("Holidays are announced in January.", 6)])
    changed["security.md"] = ("Security", [("Laptops must use full disk encryption. "
                                            "Staff get 25 days of paid leave a year.", 16)])
    client.upsert_documents("kb", corpus_documents(changed))
    client.delete_document("kb", "shipping.md")
    unbound = db.execute("select count(*) from sift.golden_positives where chunk_id is null").fetchone()[0]
    assert unbound == 5        # every positive lost its chunk

    report = rebind(client, "kb", "gold")
    new = chunk_ids(db)
    by_key: dict = {}
    for b in report.bindings:
        by_key.setdefault(b.question_key, []).append(b)
    assert [(b.chunk_id, b.status) for b in by_key["refund-time"]] == [(new[("refunds.md", 0)], "rebound")]
    assert [(b.chunk_id, b.status) for b in by_key["approval"]] == [(new[("refunds.md", 1)], "rebound")]
    assert [(b.chunk_id, b.source_uri, b.status) for b in by_key["leave"]] == [
        (new[("security.md", 0)], "security.md", "moved")]
    assert [(b.chunk_id, b.status) for b in by_key["returns"]] == [(None, "not_found")] * 2
    assert report.counts == {"kept": 0, "rebound": 2, "moved": 1, "ambiguous": 0, "not_found": 2}
    assert [b.question_key for b in report.unbound] == ["returns", "returns"]
    assert {b.old_chunk_id for b in report.bindings} == {None}
    # Run again: everything bound stays where it is.
    again = rebind(client, "kb", "gold")
    assert again.counts == {"kept": 3, "rebound": 0, "moved": 0, "ambiguous": 0, "not_found": 2}


def test_rebind_from_sql(client, db, kb):
    import_golden_set(client, "kb", "gold", [Question("a", "refunds", positives=[Positive(text="Refunds are")])])
    client.upsert_documents("kb", corpus_documents())          # same texts, new ids
    rows = db.execute("select question_key, status, chunk_id from sift.rebind_golden_set("
                      "collection => 'kb', golden_set => 'gold')").fetchall()
    assert rows == [("a", "rebound", chunk_ids(db)[("refunds.md", 0)])]
    with pytest.raises(psycopg.Error) as info:
        db.execute("select * from sift.rebind_golden_set(collection => 'kb', golden_set => 'nope')")
    assert info.value.sqlstate == "SFG01"


# -- BEIR ----------------------------------------------------------------------------

def write_beir(root: Path, with_embeddings: bool = True) -> Path:
    """Corpus p1..p3; p1 and p2 are the test's relevant documents. Queries:
    c1 -> p1 (2), c2 -> p2 (1) and p9 (1, not in the corpus), c3 only a 0 judgment."""
    root.mkdir()
    corpus = [{"_id": "p1", "title": "Alpha", "text": "Alpha particles ionise air."},
              {"_id": "p2", "title": "Beta", "text": "Beta decay emits electrons."},
              {"_id": "p3", "title": "Gamma", "text": "Gamma rays pass through lead."}]
    (root / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in corpus))
    queries = [{"_id": "c1", "text": "alpha ionisation"}, {"_id": "c2", "text": "beta electrons"},
               {"_id": "c3", "text": "gamma shielding"}]
    (root / "queries.jsonl").write_text("".join(json.dumps(q) + "\n" for q in queries))
    (root / "qrels").mkdir()
    (root / "qrels" / "test.tsv").write_text(
        "query-id\tcorpus-id\tscore\nc1\tp1\t2\nc2\tp2\t1\nc2\tp9\t1\nc3\tp3\t0\n")
    if with_embeddings:
        emb = root / "embeddings" / "toy"
        emb.mkdir(parents=True)
        np.save(emb / "corpus.npy", np.array([e(0), e(1), e(2)], dtype=np.float32))
        np.save(emb / "queries.npy", np.array([e(0), e(1), e(2)], dtype=np.float32))
    return root


def test_beir_questions_with_and_without_vectors(tmp_path):
    questions, fallback, source = beir_questions(write_beir(tmp_path / "toy"))
    assert [(q.key, q.text) for q in questions] == [("c1", "alpha ionisation"), ("c2", "beta electrons")]
    assert [[(p.source_uri, p.grade) for p in q.positives] for q in questions] == [
        [("p1", 2)], [("p2", 1), ("p9", 1)]]
    assert list(questions[1].embedding) == e(1)
    assert fallback == {"p1": "Alpha particles ionise air.", "p2": "Beta decay emits electrons."}
    assert source == "beir toy split=test model=toy"
    bare, _, source = beir_questions(write_beir(tmp_path / "bare", with_embeddings=False))
    assert [q.key for q in bare] == ["c1", "c2"] and bare[0].embedding is None
    assert "no query vectors" in source


def test_beir_import_maps_documents_to_all_their_chunks(client, db, tmp_path):
    client.create_collection("phys", embedding_dims=DIMS)
    # p1 was chunked in two; p2 is not in the collection; p9 is nowhere.
    client.upsert_documents("phys", [
        Document(source_uri="p1", title="Alpha", chunks=[Chunk(content="Alpha particles", embedding=e(0)),
                                                         Chunk(content="ionise air.", embedding=e(3))]),
        Document(source_uri="p3", title="Gamma", chunks=[Chunk(content="Gamma rays pass through lead.",
                                                               embedding=e(2))])])
    questions, fallback, source = beir_questions(write_beir(tmp_path / "toy"))
    with pytest.raises(InvalidArgument, match='"p9" is not in collection'):
        import_golden_set(client, "phys", "toy-test", questions, fallback_text=fallback)
    report = import_golden_set(client, "phys", "toy-test", questions, judged_at="document", source=source,
                               fallback_text=fallback, skip_missing=True)
    assert report.skipped == [("c2", "p9")] and report.skipped_questions == []
    gs = report.golden_set
    assert (gs.judged_at, gs.questions, gs.positives, gs.unbound) == ("document", 2, 3, 1)
    pos = positives_of(db, "toy-test")
    ids = chunk_ids(db, "phys")
    assert pos["c1"] == [(ids[("p1", 0)], "p1", "Alpha particles", 2), (ids[("p1", 1)], "p1", "ionise air.", 2)]
    # p2 is not in the collection: kept unbound with the corpus text, reported; p9 has no text at all.
    assert pos["c2"] == [(None, "p2", "Beta decay emits electrons.", 1)]
    assert [(b.question_key, b.source_uri, b.status) for b in report.rebind.unbound] == [("c2", "p2", "not_found")]


def test_cli_golden_beir_ingest_list_export_rebind(dsn, db, tmp_path, capsys):
    root = write_beir(tmp_path / "toy")
    assert main(["--dsn", dsn, "golden", "import", "phys", "--beir", str(root), "--ingest"]) == 0
    out = capsys.readouterr().out
    assert "golden set toy-test of phys (document-level): 2 questions (0 without an answer), 2 positives " \
           "(2 bound, 0 unbound)" in out
    assert "skipped 1 judgment(s)" in out and "c2 -> p9" in out   # judged, but in no corpus
    assert main(["--dsn", dsn, "golden", "list", "phys", "--json"]) == 0
    [listed] = json.loads(capsys.readouterr().out)
    assert listed["name"] == "toy-test" and listed["source"] == "beir toy split=test model=toy"
    assert listed["without_embedding"] == 0
    export = tmp_path / "out.jsonl"
    assert main(["--dsn", dsn, "golden", "export", "phys", "--out", str(export)]) == 0
    header, questions = read_jsonl(export)
    assert header["judged_at"] == "document" and [q.key for q in questions] == ["c1", "c2"]
    assert main(["--dsn", dsn, "golden", "rebind", "phys"]) == 0
    assert "golden set toy-test: 2 kept, 0 rebound" in capsys.readouterr().out
    # rebind exits 1 while a positive stays unbound, and lists it
    Client(db).delete_document("phys", "p2")
    assert main(["--dsn", dsn, "golden", "rebind", "phys", "--json"]) == 1
    report = json.loads(capsys.readouterr().out)
    assert report["counts"]["kept"] == 1 and [u["source_uri"] for u in report["unbound"]] == ["p2"]
    assert main(["--dsn", dsn, "golden", "delete", "phys", "--name", "toy-test"]) == 0
    assert main(["--dsn", dsn, "golden", "rebind", "phys"]) == 2     # no golden set left: an error
    assert "has no golden set" in capsys.readouterr().err


def test_cli_jsonl_import_uses_header_and_file_name(dsn, client, db, kb, tmp_path, capsys):
    path = write_questions(tmp_path / "handbook.jsonl", kb_questions(kb))
    assert main(["--dsn", dsn, "golden", "import", "kb", "--jsonl", str(path)]) == 0
    assert "golden set handbook of kb (chunk-level): 5 questions (1 without an answer), 5 positives " \
           "(5 bound, 0 unbound)" in capsys.readouterr().out
    with_header = write_questions(tmp_path / "x.jsonl", [{"pgsift_golden_set": {"name": "named",
                                                                               "judged_at": "document"}},
                                                        *kb_questions(kb)])
    assert main(["--dsn", dsn, "golden", "import", "kb", "--jsonl", str(with_header)]) == 0
    assert get_golden_set(client, "kb", "named").judged_at == "document"
    assert main(["--dsn", dsn, "golden", "import", "kb", "--jsonl", str(path)]) == 2
    assert "already exists" in capsys.readouterr().err


# -- from SQL -------------------------------------------------------------------------

def test_a_golden_set_from_sql_alone(client, db, kb):
    """create, add questions with every kind of positive, list, rebind and drop: what the Python
    import does, as a psql user does it."""
    set_id = db.execute("select sift.create_golden_set('kb', 'sql', description => 'typed in psql')").fetchone()[0]
    add = ("select question_id, positives_added, skipped from sift.add_golden_question(collection => 'kb', "
           "golden_set => 'sql', question_key => %s, question => %s, positives => %s, answerable => %s, "
           "embedding => %s::vector, skip_missing => %s)")
    rows = [db.execute(add, args).fetchone() for args in (
        ("time", "how long do refunds take", json.dumps(["paid within 14 days", {"text": "paid within 14 days",
                                                                                  "grade": 3}]),
         True, str(e(0)), False),
        ("approval", "who approves", json.dumps([{"chunk_id": kb[("refunds.md", 1)], "grade": 2}]), True, None, False),
        ("returns", "where do returns go", json.dumps([{"source_uri": "shipping.md"}, {"source_uri": "gone.md"}]),
         True, None, True),
        ("lost", "a document nobody has", json.dumps([{"source_uri": "gone.md"}]), True, None, True),
        ("kept", "kept unbound", json.dumps([{"source_uri": "gone.md", "fallback_text": "Once upon a time."}]),
         True, None, False),
        ("shoe", "shoe size", "[]", False, None, False))]
    assert [r[1:] for r in rows] == [(1, []), (1, []), (2, ["gone.md"]), (0, ["gone.md"]), (1, []), (0, [])]
    assert rows[3][0] is None                       # every positive skipped: the question is left out
    pos = positives_of(db, "sql")
    # given twice: kept once, with the higher grade; bound at once (bind defaults to true)
    assert pos["time"] == [(kb[("refunds.md", 0)], "refunds.md", "paid within 14 days", 3)]
    assert pos["approval"] == [(kb[("refunds.md", 1)], "refunds.md", CORPUS["refunds.md"][1][1][0], 2)]
    assert [p[0] for p in pos["returns"]] == [kb[("shipping.md", 0)], kb[("shipping.md", 1)]]
    assert pos["kept"] == [(None, "gone.md", "Once upon a time.", 1)]
    [listed] = [s for s in list_golden_sets(client, "kb") if s.name == "sql"]
    assert (listed.golden_set_id, listed.description, listed.questions, listed.unanswerable, listed.positives,
            listed.unbound, listed.without_embedding) == (set_id, "typed in psql", 5, 1, 5, 1, 4)
    assert db.execute("select name, questions from sift.list_golden_sets('kb')").fetchall() == [("sql", 5)]
    statuses = db.execute("select status, count(*) from sift.rebind_golden_set('kb', null) group by status "
                          "order by status").fetchall()   # null: the collection's only set
    assert statuses == [("kept", 4), ("not_found", 1)]
    # the errors a psql user meets, each named
    for args, state, message in (
            (("time", "again", '["x"]', True, None, False), "SF003", 'question "time" is already in golden set'),
            (("q", "no answer", "[]", True, None, False), "SF003", "has no positive"),
            (("q", "both", '["x"]', False, None, False), "SF003", "as having no answer but has positives"),
            (("q", "bad", '[{"txt": "x"}]', True, None, False), "SF003", "unknown positive field(s) txt"),
            (("q", "bad", '[{"text": "x", "grade": 0}]', True, None, False), "SF003", "grade must be an integer"),
            (("q", "bad", '[{"grade": 2}]', True, None, False), "SF003", "needs a text, a chunk_id or a source_uri"),
            (("q", "bad", '[{"chunk_id": 999999}]', True, None, False), "SF003", "chunk 999999 is not in collection"),
            (("q", "bad", '[{"source_uri": "gone.md"}]', True, None, False), "SF003",
             'document "gone.md" is not in collection "kb"'),
            (("q", "bad", '["x"]', True, "[1,0]", False), "SF002", "has 2 dimensions; collection \"kb\" expects 8"),
            (("  ", "bad", '["x"]', True, None, False), "SF003", "blank key")):
        with pytest.raises(psycopg.Error, match=re.escape(message)) as info:
            db.execute(add, args)
        assert info.value.sqlstate == state, args
    with pytest.raises(psycopg.Error) as info:
        db.execute("select sift.create_golden_set('kb', 'sql')")
    assert info.value.sqlstate == "23505" and "replace => true" in info.value.diag.message_hint
    with pytest.raises(GoldenSetExists):
        import_golden_set(client, "kb", "sql", [Question("a", "refunds", positives=[Positive(text="Refunds")])])
    db.execute("select sift.create_golden_set('kb', 'other', judged_at => 'document')")
    with pytest.raises(psycopg.Error, match="has 2 golden sets") as info:
        db.execute("select * from sift.rebind_golden_set('kb', null)")
    assert info.value.sqlstate == "SF003"
    replaced = db.execute("select sift.create_golden_set('kb', 'sql', replace => true)").fetchone()[0]
    assert replaced != set_id and "time" not in positives_of(db, "sql")
    assert db.execute("select sift.drop_golden_set('kb', 'sql'), sift.drop_golden_set('kb', 'sql')").fetchone() == (
        True, False)
    assert [s.name for s in list_golden_sets(client, "kb")] == ["other"]


def test_python_import_goes_through_the_sql_functions(client, db, kb, monkeypatch):
    """The Python import writes nothing itself: every row comes from sift.create_golden_set and
    sift.add_golden_question (one statement a question, pipelined), then one rebind."""
    sent: list[str] = []
    execute = psycopg.Cursor.execute

    def spy(self, query, params=None, **kwargs):
        sent.append(str(query))
        return execute(self, query, params, **kwargs)

    monkeypatch.setattr(psycopg.Cursor, "execute", spy)
    import_golden_set(client, "kb", "gold", [Question(k, "q", positives=[Positive(text="Refunds")]) for k in "abc"])
    monkeypatch.undo()
    writes = [s for s in sent if re.search(r"\b(insert|update|delete)\b", s, re.I)]
    assert writes == []
    called = [m for s in sent for m in re.findall(r"sift\.(\w+)\(", s)]
    assert called.count("create_golden_set") == 1 and called.count("add_golden_question") == 3
    assert called.count("rebind_golden_set") == 1
