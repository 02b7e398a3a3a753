"""Golden rebind across re-chunking (issue 36): a positive whose text still exists stays bound,
whatever the new chunks are (smaller, larger, structured, overlapping, re-joined whitespace):
a document given by source_uri follows its document, a text the new chunks split binds to the
chunk where it starts, a text inside one chunk to that chunk; only a text that is gone is
reported not_found. The oracle for "where it starts" locates each chunk in the source file."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import psycopg
from pgsift import Chunk, Client, Document, evaluation, golden
from pgsift.cli import main
from pgsift.ingest import documents_from_folder

DIMS = 8

VOLCANOES = """# Volcanoes

Volcanoes form where magma reaches the surface. Most sit on plate boundaries.
Some rise over hot spots far from any boundary.

## Eruptions

An eruption starts when pressure in the magma chamber exceeds the strength of the rock above.
Gas dissolved in the magma expands as it rises. Explosive eruptions throw ash high into the air.

## Monitoring

Seismometers record the small earthquakes that come before an eruption.
Satellites measure how the ground swells as magma collects below.
Gas sensors track sulphur dioxide at the vent.
"""

GLACIERS = """# Glaciers

Glaciers are rivers of ice that flow slowly downhill under their own weight.
They carve deep valleys and leave moraines of rock where they melt.

## Retreat

Most glaciers are shrinking as summers grow warmer.
Meltwater from retreating glaciers raises the level of the sea.
"""

DESERTS = """# Deserts

Deserts receive less than 250 millimetres of rain a year.
Dunes move as the wind carries sand from one face to the other.
"""

SPLIT = ("the small earthquakes that come before an eruption.\n"
         "Satellites measure how the ground swells")
INSIDE = "Gas dissolved in the magma expands"
GONE = "Gas sensors track sulphur dioxide at the vent."

QUESTIONS = [
    {"id": "doc", "question": "glaciers flow downhill", "positives": [{"source_uri": "glaciers.md"}]},
    {"id": "split", "question": "small earthquakes before an eruption", "positives": [SPLIT]},
    {"id": "inside", "question": "gas dissolved in magma", "positives": [INSIDE]},
    {"id": "gone", "question": "sulphur dioxide sensors", "positives": [GONE]},
]


class WordEmbedder:
    """A stand-in embedder: a hashed bag of words (the searches here run lexical only)."""

    dims = DIMS

    def embed(self, texts):
        out = np.zeros((len(texts), DIMS), dtype=np.float32)
        for i, text in enumerate(texts):
            for word in text.lower().split():
                out[i, sum(map(ord, word)) % DIMS] += 1
            out[i] = (out[i] + 1e-3) / np.linalg.norm(out[i] + 1e-3)
        return out


class Words:
    name = "words"

    def count(self, text: str) -> int:
        return len(text.split())


def squeeze(text: str) -> str:
    return re.sub(r"\s+", "", text)


def write_kb(folder: Path, volcanoes: str = VOLCANOES) -> Path:
    folder.mkdir(exist_ok=True)
    for name, text in (("volcanoes.md", volcanoes), ("glaciers.md", GLACIERS), ("deserts.md", DESERTS)):
        (folder / name).write_text(text, encoding="utf-8")
    return folder


def chunks_of(db: psycopg.Connection, source_uri: str) -> list[tuple[int, str]]:
    return db.execute("select c.chunk_id, c.content from sift.chunks c join sift.documents d using (document_id) "
                      "where d.source_uri = %s order by c.ordinal", [source_uri]).fetchall()


def starts_in(chunks: list[tuple[int, str]], source: str, text: str) -> int:
    """The chunk whose part of the source holds the text's first character: each chunk is found
    in the source (whitespace aside), after the start of the one before it."""
    flat = squeeze(source)
    at = flat.index(squeeze(text))
    owner, begin = None, 0
    for chunk_id, content in chunks:
        start = flat.index(squeeze(content), begin)
        if start <= at < start + len(squeeze(content)):
            owner = chunk_id
        begin = start + 1
    assert owner is not None
    return owner


def bindings(db: psycopg.Connection, name: str) -> dict[str, list[tuple[int | None, int]]]:
    """question key -> its positives' (chunk_id, grade), sorted."""
    rows = db.execute("select q.question_key, p.chunk_id, p.grade from sift.golden_positives p "
                      "join sift.golden_questions q using (question_id) join sift.golden_sets s using (golden_set_id) "
                      "where s.name = %s", [name]).fetchall()
    out: dict[str, list[tuple[int | None, int]]] = {}
    for key, chunk_id, grade in rows:
        out.setdefault(key, []).append((chunk_id, grade))
    return {key: sorted(v, key=lambda x: (x[0] is None, x[0] or 0)) for key, v in sorted(out.items())}


def ndcg_by_question(client: Client, name: str) -> dict[str, float]:
    run = evaluation.evaluate(client, "geo", golden_set=name, top_k=5, store=False, mode="lexical")
    return {r.key: round(r.scores["ndcg"], 6) for r in run.questions if r.answerable}


def reingest(client: Client, folder: Path, **chunking) -> None:
    client.upsert_documents("geo", documents_from_folder(folder, WordEmbedder(), **chunking))


def check_rechunked(client: Client, db: psycopg.Connection, report_statuses: dict[str, list[str]],
                    volcanoes: str = VOLCANOES) -> None:
    """Every positive whose text exists is bound where the oracle says; the set binds as a fresh
    import of the same questions would (so it scores the same)."""
    volcano_chunks = chunks_of(db, "volcanoes.md")
    got = bindings(db, "gold")
    assert got["split"] == [(starts_in(volcano_chunks, volcanoes, SPLIT), 1)]
    assert "the small earthquakes" in dict(volcano_chunks)[got["split"][0][0]]
    assert got["inside"] == [(starts_in(volcano_chunks, volcanoes, INSIDE), 1)]
    inside = dict(volcano_chunks)[got["inside"][0][0]]
    assert squeeze(INSIDE) in squeeze(inside)
    assert got["doc"] == sorted((chunk_id, 1) for chunk_id, _ in chunks_of(db, "glaciers.md"))
    assert got["gone"] == [(None, 1)]
    assert report_statuses == {"doc": ["rebound"] * len(got["doc"]), "split": ["rebound"],
                               "inside": ["rebound"], "gone": ["not_found"]}
    golden.import_golden_set(client, "geo", "fresh", [golden.question_from_json(q, q["id"], "q") for q in QUESTIONS],
                             replace=True)
    assert bindings(db, "fresh") == got
    assert ndcg_by_question(client, "gold") == ndcg_by_question(client, "fresh")


def statuses(bindings_: list[golden.Binding]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for b in bindings_:
        out.setdefault(b.question_key, []).append(b.status)
    return dict(sorted(out.items()))


def test_rebind_keeps_every_positive_whose_text_exists_whatever_the_chunking(client, db, dsn, tmp_path, capsys):
    kb = write_kb(tmp_path / "kb")
    client.create_collection("geo", embedding_dims=DIMS)
    reingest(client, kb)                                   # flat, one chunk per section
    questions = [golden.question_from_json(q, q["id"], "q") for q in QUESTIONS]
    report = golden.import_golden_set(client, "geo", "gold", questions)
    assert report.rebind.unbound == []
    golden.import_golden_set(client, "geo", "docs", questions, judged_at="document")
    before = ndcg_by_question(client, "docs")
    assert before == {"doc": 1.0, "split": 1.0, "inside": 1.0, "gone": 1.0}

    # Smaller chunks, and the monitoring paragraph loses its last sentence: chunk_markdown splits
    # long paragraphs by words and re-joins them with single spaces (the line breaks go).
    edited = VOLCANOES.replace(GONE + "\n", "")
    write_kb(kb, edited)
    reingest(client, kb, max_words=8)
    assert db.execute("select count(*) from sift.golden_positives where chunk_id is not null").fetchone()[0] == 0
    report = golden.rebind(client, "geo", "gold")
    check_rechunked(client, db, statuses(report.bindings), edited)
    # The SQL function (what psql users call) does the same for the document-level set.
    rows = db.execute("select question_key, status from sift.rebind_golden_set('geo', 'docs') "
                      "order by positive_id").fetchall()
    assert {k: s for k, s in rows if k != "doc"} == {"split": "rebound", "inside": "rebound", "gone": "not_found"}
    assert ndcg_by_question(client, "docs") == {**before, "gone": 0.0}
    # Run again: everything bound stays where it is.
    again = golden.rebind(client, "geo", "gold")
    assert again.counts == {"kept": len(again.bindings) - 1, "rebound": 0, "moved": 0, "ambiguous": 0,
                            "not_found": 1}

    # Larger, structured chunks: exact slices of the file, headings included.
    reingest(client, kb, strategy="hierarchical", target_tokens=12, counter=Words())
    check_rechunked(client, db, statuses(golden.rebind(client, "geo", "gold").bindings), edited)
    db.execute("select * from sift.rebind_golden_set('geo', 'docs')")
    assert ndcg_by_question(client, "docs") == {**before, "gone": 0.0}
    # The command line: everything kept, and it exits 1 while "gone" stays unbound.
    assert main(["--dsn", dsn, "golden", "rebind", "geo", "--name", "gold", "--json"]) == 1
    out = json.loads(capsys.readouterr().out)
    total = sum(len(v) for v in bindings(db, "gold").values())
    assert out["counts"] == {"kept": total - 1, "rebound": 0, "moved": 0, "ambiguous": 0, "not_found": 1}
    assert [u["question_key"] for u in out["unbound"]] == ["gone"]


def test_rebind_reads_overlapping_chunks_once(client, db):
    """Chunks brought by the user (a JSONL, another splitter) may overlap: text across a boundary
    is found in the document read once, and bound to the chunk it starts in."""
    words = VOLCANOES.split()
    windows = [(start, " ".join(words[start:start + 10])) for start in range(0, len(words), 6)]
    client.create_collection("geo", embedding_dims=DIMS)
    vectors = WordEmbedder().embed([w for _, w in windows])
    client.upsert_documents("geo", [Document(source_uri="volcanoes.md", chunks=[
        Chunk(content=text, embedding=vec) for (_, text), vec in zip(windows, vectors, strict=True)])])
    # 14 words: no 10-word window holds them; read without the overlaps they are there.
    text = " ".join(words[32:46])
    report = golden.import_golden_set(client, "geo", "gold", [
        golden.Question("q", "earthquakes", positives=[golden.Positive(text=text)])])
    ids = [cid for cid, _ in chunks_of(db, "volcanoes.md")]
    starts = [start for start, _ in windows]
    expected = ids[max(i for i, s in enumerate(starts) if s <= 32)]
    assert [(b.chunk_id, b.status) for b in report.rebind.bindings] == [(expected, "rebound")]


def test_document_positive_follows_its_document(client, db):
    """A positive given by source_uri alone is every chunk its document has now, however many."""
    client.create_collection("geo", embedding_dims=DIMS)
    emb = WordEmbedder()

    def doc(parts: list[str]) -> Document:
        return Document(source_uri="glaciers.md", chunks=[Chunk(content=p, embedding=v)
                                                           for p, v in zip(parts, emb.embed(parts), strict=True)])

    client.upsert_documents("geo", [doc(["# Glaciers", GLACIERS.split("## Retreat")[0], "## Retreat"])])
    golden.import_golden_set(client, "geo", "gold", [
        golden.Question("q", "glaciers", positives=[golden.Positive(source_uri="glaciers.md", grade=2)])])
    for parts in (["Glaciers are rivers of ice.", "They melt."], ["One chunk now, other words entirely."],
                  ["a", "b", "c", "d"]):
        client.upsert_documents("geo", [doc(parts)])
        report = golden.rebind(client, "geo", "gold")
        assert [(b.status, b.source_uri) for b in report.bindings] == [("rebound", "glaciers.md")] * len(parts)
        assert bindings(db, "gold") == {"q": sorted((cid, 2) for cid, _ in chunks_of(db, "glaciers.md"))}
        assert {b.status for b in golden.rebind(client, "geo", "gold").bindings} == {"kept"}
    # Exported once, by its document: imported again, it is the document's chunks then.
    [line] = list(golden.export_golden_set(client, "geo", "gold"))[1:]
    assert line["positives"] == [{"source_uri": "glaciers.md", "grade": 2}]
    golden.import_golden_set(client, "geo", "copy", [golden.question_from_json(line, "q", "q")])
    assert bindings(db, "copy") == bindings(db, "gold")
    client.delete_document("geo", "glaciers.md")
    report = golden.rebind(client, "geo", "gold")
    assert {(b.status, b.chunk_id, b.source_uri) for b in report.bindings} == {("not_found", None, "glaciers.md")}
    client.upsert_documents("geo", [doc(["back again"])])
    assert [b.status for b in golden.rebind(client, "geo", "gold").bindings] == ["rebound"]


def test_split_text_in_several_documents_is_ambiguous_and_verbatim_comes_first(client, db):
    client.create_collection("geo", embedding_dims=DIMS)
    emb = WordEmbedder()

    def doc(uri: str, parts: list[str]) -> Document:
        return Document(source_uri=uri, chunks=[Chunk(content=p, embedding=v)
                                                for p, v in zip(parts, emb.embed(parts), strict=True)])

    client.upsert_documents("geo", [doc("a.md", ["lava cools into basalt", "columns along the coast"]),
                                    doc("b.md", ["lava cools fast into basalt", "columns along the coast"]),
                                    doc("c.md", ["basalt columns along the ridge"])])
    a, b, c = (chunks_of(db, uri) for uri in ("a.md", "b.md", "c.md"))
    report = golden.import_golden_set(client, "geo", "gold", [
        # verbatim in c, split in a and b: c's chunk (a verbatim hit outranks a split one)
        golden.Question("verbatim", "x", positives=[golden.Positive(text="basalt columns")]),
        # split in a and in b, in no chunk: ambiguous, left unbound
        golden.Question("split", "x", positives=[golden.Positive(text="into basalt columns along the")]),
        # in one chunk of a with other whitespace: that chunk
        golden.Question("spaces", "x", positives=[golden.Positive(text="cools   into\nbasalt")]),
        # split in b, its document named: the chunk of b it starts in
        golden.Question("named", "x", positives=[golden.Positive(text="fast into basalt columns",
                                                                 source_uri="b.md")]),
    ])
    got = {r.question_key: (r.chunk_id, r.source_uri, r.status) for r in report.rebind.bindings}
    assert got == {"verbatim": (c[0][0], "c.md", "rebound"), "split": (None, None, "ambiguous"),
                   "spaces": (a[0][0], "a.md", "rebound"), "named": (b[0][0], "b.md", "rebound")}
