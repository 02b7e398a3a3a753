"""Document structure in SQL against plain-Python references: parent_return (child, parent,
auto with merge_threshold), neighbour windows (overlapping ones merged, nothing returned
twice), order after edits, resolve_sections, and the bad input each knob refuses.

The references are written from the issue's definitions, not from the SQL:
  parent  every matched passage is replaced by its section, de-duplicated
  auto    a section replaces its passages when matched / passages >= merge_threshold
  merged  the section's first passage in the pool stands for it, with the best score
  window  n chunks before and after a hit (by ordinal, gaps skipped); windows that overlap
          form one, held by the best-ranked hit of them
"""

from __future__ import annotations

import dataclasses
import random
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pgsift
import psycopg
import pytest
from conftest import unit
from pgsift import Chunk, Document, Section, evaluation, golden
from pgsift.chunking import LocalTokenizer
from pgsift.ingest import documents_from_folder, documents_from_path
from psycopg.types.json import Jsonb

DIMS = 8


@dataclass
class Stored:
    chunk_id: int
    document_id: int
    ordinal: int
    section_id: int | None
    content: str


def structured_documents(rng: random.Random, n_docs: int) -> list[Document]:
    """Documents of 1-4 sections (a heading tree), each of 1-4 passages; passage text ends
    with whitespace, as the hierarchical strategy's slices of a source do."""
    nprng = np.random.default_rng(rng.randrange(1 << 30))
    docs = []
    for d in range(n_docs):
        sections: list[Section] = []
        chunks: list[Chunk] = []
        for s in range(rng.randint(1, 4)):
            level = 1 if s == 0 else rng.randint(1, 3)
            parent = next((i for i in range(s - 1, -1, -1) if sections[i].level < level), None)
            sections.append(Section(f"Heading {d}.{s}", level, parent))
            for p in range(rng.randint(1, 4)):
                chunks.append(Chunk(content=f"doc {d} section {s} passage {p} text\n",
                                    embedding=unit(nprng.normal(size=DIMS)), section=s, token_count=7))
        docs.append(Document(source_uri=f"d{d}", title=f"Document {d}", chunks=chunks, sections=sections))
    return docs


def stored(db: psycopg.Connection) -> dict[int, Stored]:
    rows = db.execute("select chunk_id, document_id, ordinal, section_id, content from sift.chunks").fetchall()
    return {r[0]: Stored(*r) for r in rows}


# -- references ------------------------------------------------------------------------------

@dataclass
class Unit:
    rep: int
    score: float
    matched: list[int]
    covers: list[int]
    merged: bool


def merge_reference(pool: list[tuple[int, float]], chunks: dict[int, Stored], policy: str,
                    threshold: float) -> list[Unit]:
    by_section: dict[int, list[int]] = {}
    for c in sorted(chunks.values(), key=lambda c: (c.document_id, c.ordinal)):
        if c.section_id is not None:
            by_section.setdefault(c.section_id, []).append(c.chunk_id)
    matched: dict[int, list[tuple[int, float]]] = {}
    for cid, score in pool:
        sec = chunks[cid].section_id
        if sec is not None and policy != "child":
            matched.setdefault(sec, []).append((cid, score))
    merging = {sec for sec, got in matched.items()
               if policy == "parent" or len(got) / len(by_section[sec]) >= threshold}
    units = []
    for cid, score in pool:
        sec = chunks[cid].section_id
        if sec in merging:
            got = matched[sec]
            if got[0][0] != cid:
                continue
            units.append(Unit(cid, max(s for _, s in got), [c for c, _ in got], by_section[sec],
                              len(by_section[sec]) > 1))
        else:
            units.append(Unit(cid, score, [cid], [cid], False))
    return units


def rank_reference(units: list[Unit], chunks: dict[int, Stored], cap: int, match_count: int) -> list[Unit]:
    """Score order (ties: smaller id), at most cap per document, then backfill."""
    order = sorted(units, key=lambda u: (-u.score, u.rep))
    seen: dict[int, int] = {}
    first, late = [], []
    for u in order:
        doc = chunks[u.rep].document_id
        seen[doc] = seen.get(doc, 0) + 1
        (late if cap and seen[doc] > cap else first).append(u)
    return (first + late)[:match_count]


def window_reference(kept: list[Unit], chunks: dict[int, Stored], n: int) -> dict[int, tuple]:
    """rep -> (window chunk ids or None, window_of or None)."""
    if n == 0:
        return {u.rep: (None, None) for u in kept}
    ordinals: dict[int, list[tuple[int, int]]] = {}
    for c in chunks.values():
        ordinals.setdefault(c.document_id, []).append((c.ordinal, c.chunk_id))
    for lst in ordinals.values():
        lst.sort()
    spans = []
    for rank, u in enumerate(kept):
        doc = chunks[u.rep].document_id
        ords = [o for o, _ in ordinals[doc]]
        lo = min(chunks[c].ordinal for c in u.covers)
        hi = max(chunks[c].ordinal for c in u.covers)
        i, j = ords.index(lo), ords.index(hi)
        spans.append((doc, ords[max(i - n, 0)], ords[min(j + n, len(ords) - 1)], rank, u.rep))
    out: dict[int, tuple] = {}
    for doc in {s[0] for s in spans}:
        mine = sorted((s for s in spans if s[0] == doc), key=lambda s: (s[1], s[4]))
        groups: list[list[tuple]] = []
        for s in mine:
            if groups and s[1] <= max(g[2] for g in groups[-1]):
                groups[-1].append(s)
            else:
                groups.append([s])
        for g in groups:
            lo, hi = min(s[1] for s in g), max(s[2] for s in g)
            leader = min(g, key=lambda s: s[3])[4]
            ids = [cid for o, cid in ordinals[doc] if lo <= o <= hi]
            for s in g:
                out[s[4]] = (ids, None) if s[4] == leader else (None, leader)
    return out


# -- the oracle ------------------------------------------------------------------------------

FINALIZE = """select * from sift.finalize('s', %(ids)s::bigint[], %(scores)s::float8[], %(k)s, %(knobs)s)"""


@pytest.fixture
def structured(client, db):
    client.create_collection("s", embedding_dims=DIMS)
    client.upsert_documents("s", structured_documents(random.Random(7), 12))
    return stored(db)


def test_finalize_matches_the_references_on_random_pools(client, db, structured, figure):
    chunks = structured
    rng = random.Random(12)
    ids = sorted(chunks)
    cases = merged = shared = 0
    for _ in range(150):
        pool = rng.sample(ids, rng.randint(1, min(30, len(ids))))
        scores = sorted((round(rng.random(), 6) for _ in pool), reverse=True)
        policy = rng.choice(["child", "parent", "auto"])
        threshold = rng.choice([0.1, 0.34, 0.5, 0.75, 1.0])
        cap = rng.choice([0, 1, 2, 5])
        n = rng.choice([0, 0, 1, 2])
        k = rng.randint(1, 12)
        knobs = {"parent_return": policy, "merge_threshold": threshold, "per_document_cap": cap or None,
                 "neighbours": n}
        rows = db.execute(FINALIZE, {"ids": pool, "scores": scores, "k": k, "knobs": Jsonb(knobs)}).fetchall()
        names = [d.name for d in db.execute(FINALIZE, {"ids": pool, "scores": scores, "k": k,
                                                       "knobs": Jsonb(knobs)}).description]
        hits = [dict(zip(names, r, strict=True)) for r in rows]

        units = merge_reference(list(zip(pool, scores, strict=True)), chunks, policy, threshold)
        kept = rank_reference(units, chunks, cap, k)
        windows = window_reference(kept, chunks, n)
        label = (policy, threshold, cap, n, k, pool)
        assert [h["chunk_id"] for h in hits] == [u.rep for u in kept], label
        for h, u in zip(hits, kept, strict=True):
            assert h["score"] == pytest.approx(u.score, rel=1e-12), label
            assert (h["merged"], h["matched_chunk_ids"], h["chunk_ids"]) == (u.merged, u.matched, u.covers), label
            # a merged hit's text is its section's, nothing lost, nothing twice
            assert h["content"] == "".join(chunks[c].content for c in u.covers), label
            assert h["token_count"] == 7 * len(u.covers)
            assert h["section_id"] == chunks[u.rep].section_id
            want_ids, want_of = windows[u.rep]
            assert (h["window_chunk_ids"], h["window_of"]) == (want_ids, want_of), label
            if want_ids is not None:
                assert h["window_text"] == "".join(chunks[c].content for c in want_ids)
        # No chunk's text reaches the model twice: windows and uncovered contents are disjoint.
        sent = [c for h in hits if h["window_of"] is None for c in (h["window_chunk_ids"] or h["chunk_ids"])]
        assert len(sent) == len(set(sent)), label
        cases += 1
        merged += sum(1 for h in hits if h["merged"])
        shared += sum(1 for h in hits if h["window_of"] is not None)
    # The cases exercised what they are about.
    assert merged > 50 and shared > 10, (merged, shared)
    figure("parent_return / neighbours oracle cases", cases)
    figure("merged hits checked against the reference", merged)
    figure("hits whose window another hit holds", shared)


def test_search_merges_before_the_cap_and_explain_says_what_merged(client, db, structured):
    chunks = structured
    # A document whose every passage matches: parent returns its sections, not its passages.
    target = max({c.document_id for c in chunks.values()},
                 key=lambda d: sum(1 for c in chunks.values() if c.document_id == d))
    words = db.execute("select 'doc ' || split_part(content, ' ', 2) from sift.chunks where document_id = %s "
                       "limit 1", [target]).fetchone()[0]
    query = f'"{words} section"'
    child = client.search("s", query, top_k=20, per_document_cap=None, quoted_text="require")
    parent = client.search("s", query, top_k=20, per_document_cap=None, parent_return="parent",
                           quoted_text="require")
    sections = {chunks[h.chunk_id].section_id for h in child}
    assert len(parent) == len(sections) < len(child)
    assert all(h.section_id in sections for h in parent)
    assert sorted(c for h in parent for c in h.matched_chunk_ids) == sorted(h.chunk_id for h in child)
    # The cap counts merged hits: one per document.
    capped = client.search("s", query, top_k=20, per_document_cap=1, parent_return="parent", quoted_text="require")
    assert len(capped) == len(parent)   # backfill keeps them all, and they are units, not passages
    # psql's path gives the same rows.
    sql_rows = db.execute("select chunk_id, merged, chunk_ids from sift.search('s', %s, match_count => 20, "
                          "knobs => '{\"parent_return\": \"parent\", \"per_document_cap\": null, "
                          "\"quoted_text\": \"require\"}')",
                          [query]).fetchall()
    assert sql_rows == [(h.chunk_id, h.merged, h.chunk_ids) for h in parent]
    # explain: the folded passages, each pointing at its hit.
    rows = client.explain("s", query, top_k=20, per_document_cap=None, parent_return="parent",
                          quoted_text="require")
    folded = [r for r in rows if r.cut_by == "merged"]
    assert len(folded) == len(child) - len(parent)
    for r in folded:
        into = next(x for x in rows if x.chunk_id == r.merged_into)
        assert into.kept and r.chunk_id in (into.matched_chunk_ids or [])
        assert "merged" in r.reason


def test_auto_merges_at_the_threshold(client, db):
    client.create_collection("a", embedding_dims=DIMS)
    rng = np.random.default_rng(1)
    doc = Document(source_uri="x", title="X", sections=[Section("Four", 1), Section("Two", 1)],
                   chunks=[Chunk(content=f"p{i} ", embedding=unit(rng.normal(size=DIMS)), section=0 if i < 4 else 1)
                           for i in range(6)])
    client.upsert_documents("a", [doc])
    ids = [r[0] for r in db.execute("select chunk_id from sift.chunks order by ordinal").fetchall()]
    pool = [ids[0], ids[1], ids[4]]   # 2 of 4 in section one, 1 of 2 in section two
    for threshold, merged in [(0.5, {ids[0], ids[4]}), (0.51, set()), (1.0, set())]:
        result = client.finalize("a", pool, [0.9, 0.8, 0.7], parent_return="auto", merge_threshold=threshold)
        assert {h.chunk_id for h in result if h.merged} == merged, threshold
    whole = client.finalize("a", pool, [0.9, 0.8, 0.7], parent_return="auto", merge_threshold=0.5)
    first = next(h for h in whole if h.chunk_id == ids[0])
    assert first.content == "p0 p1 p2 p3 " and first.matched_chunk_ids == [ids[0], ids[1]]
    assert first.chunk_ids == ids[:4] and first.ordinal == 0
    # child (the default) leaves the pool as it is.
    assert [h.chunk_id for h in client.finalize("a", pool, [0.9, 0.8, 0.7])] == pool


def test_windows_follow_the_document_after_edits(client, db):
    client.create_collection("w", embedding_dims=DIMS)
    rng = np.random.default_rng(2)

    def doc(texts: list[str]) -> Document:
        return Document(source_uri="w", chunks=[Chunk(content=t, embedding=unit(rng.normal(size=DIMS)))
                                                for t in texts])

    client.upsert_documents("w", [doc([f"c{i}." for i in range(8)])])
    ids = {r[1]: r[0] for r in db.execute("select chunk_id, ordinal from sift.chunks").fetchall()}
    hit = client.finalize("w", [ids[4]], neighbours=2)[0]
    assert hit.window_chunk_ids == [ids[2], ids[3], ids[4], ids[5], ids[6]]
    # No whitespace at the seams: a blank line between chunks, never glued words.
    assert hit.window_text == "c2.\n\nc3.\n\nc4.\n\nc5.\n\nc6." and hit.text == hit.window_text
    # A deleted neighbour is skipped, not counted: the window reaches one further.
    db.execute("delete from sift.chunks where chunk_id = %s", [ids[3]])
    hit = client.finalize("w", [ids[4]], neighbours=2)[0]
    assert hit.window_chunk_ids == [ids[1], ids[2], ids[4], ids[5], ids[6]]
    # A chunk inserted later, at a higher ordinal, takes its place in order.
    doc_id = db.execute("select document_id from sift.documents").fetchone()[0]
    vec = "[" + ",".join(str(x) for x in unit(rng.normal(size=DIMS))) + "]"
    new = db.execute("select sift.write_chunks(%s, array[20], array['c20.'], array[null], array[null]::integer[], "
                     "array[%s::vector])", [[doc_id], vec]).fetchone()
    assert new == (1,)
    new_id = db.execute("select chunk_id from sift.chunks where ordinal = 20").fetchone()[0]
    hit = client.finalize("w", [ids[7]], neighbours=1)[0]
    assert hit.window_chunk_ids == [ids[6], ids[7], new_id]
    # Re-chunked: the windows are the new chunks'.
    client.upsert_documents("w", [doc(["a.", "b.", "c."])])
    fresh = [r[0] for r in db.execute("select chunk_id from sift.chunks order by ordinal").fetchall()]
    hit = client.finalize("w", [fresh[1]], neighbours=5)[0]
    assert hit.window_chunk_ids == fresh and hit.window_text == "a.\n\nb.\n\nc."


def test_adjacent_hits_share_one_window(client, db):
    client.create_collection("j", embedding_dims=DIMS)
    rng = np.random.default_rng(3)
    client.upsert_documents("j", [Document(source_uri="j", chunks=[
        Chunk(content=f"c{i} ", embedding=unit(rng.normal(size=DIMS))) for i in range(10)])])
    ids = [r[0] for r in db.execute("select chunk_id from sift.chunks order by ordinal").fetchall()]
    hits = client.finalize("j", [ids[5], ids[4], ids[9]], per_document_cap=None, neighbours=1)
    first, second, third = hits
    assert first.chunk_id == ids[5] and first.window_chunk_ids == ids[3:7] and first.window_of is None
    assert second.chunk_id == ids[4] and second.window_of == ids[5] and second.window_text is None
    assert second.text == ""   # its text is in the first hit's window
    assert third.window_chunk_ids == ids[8:10]
    assert "".join(h.text for h in hits) == "c3 c4 c5 c6 c8 c9 "


def test_resolve_sections_walks_up_the_heading_tree(client, db):
    client.create_collection("r", embedding_dims=DIMS)
    rng = np.random.default_rng(4)
    sections = [Section(None, 0), Section("Guide", 1), Section("Install", 2, 1), Section("Linux", 3, 2),
                Section("Use", 2, 1)]
    chunks = [Chunk(content=f"t{i} ", embedding=unit(rng.normal(size=DIMS)), section=s)
              for i, s in enumerate([0, 1, 2, 3, 3, 4])]
    client.upsert_documents("r", [Document(source_uri="guide.md", title="G", chunks=chunks, sections=sections)])
    ids = [r[0] for r in db.execute("select chunk_id from sift.chunks order by ordinal").fetchall()]
    rows = client.resolve_sections([ids[3]])
    assert [(r.heading, r.depth, r.level) for r in rows] == [("Guide", 2, 1), ("Install", 1, 2), ("Linux", 0, 3)]
    linux = rows[-1]
    assert linux.path == ["Guide", "Install", "Linux"] and linux.section_chunk_ids == [ids[3], ids[4]]
    assert linux.content == "t3 t4 " and linux.source_uri == "guide.md" and linux.for_chunk_ids == [ids[3]]
    assert rows[1].parent_section_id == rows[0].section_id
    # A hit covering two sections resolves to both, ancestors once.
    hit = client.finalize("r", [ids[4]], neighbours=1)[0]
    both = client.resolve_sections(hit)
    assert [r.heading for r in both] == ["Guide", "Install", "Linux", "Use"]
    assert [r.heading for r in client.resolve_sections([ids[0]])] == [None]
    # Missing: a flat chunk, or one that is gone.
    client.upsert_documents("r", [Document(source_uri="flat", chunks=[Chunk(content="f", embedding=unit(
        rng.normal(size=DIMS)))])])
    flat = db.execute("select chunk_id from sift.chunks where section_id is null").fetchone()[0]
    with pytest.raises(pgsift.SectionNotFound, match="has no section"):
        client.resolve_sections([ids[3], flat])
    with pytest.raises(pgsift.SectionNotFound, match="is not a chunk"):
        client.resolve_sections([10**12])
    assert [r.heading for r in client.resolve_sections([flat, ids[5], 10**12], skip_missing=True)] == ["Guide", "Use"]


@pytest.mark.parametrize(("knobs", "knob"), [
    ({"parent_return": "sideways"}, "parent_return"),
    ({"merge_threshold": 0}, "merge_threshold"),
    ({"merge_threshold": 1.5}, "merge_threshold"),
    ({"neighbours": -1}, "neighbours"),
    ({"neighbours": 21}, "neighbours"),
])
def test_bad_structure_knobs_name_the_knob(client, db, knobs, knob):
    client.create_collection("b", embedding_dims=DIMS)
    with pytest.raises(pgsift.InvalidKnob) as err:
        client.search("b", "x", **knobs)
    assert err.value.knob == knob
    with pytest.raises(psycopg.errors.CheckViolation, match=knob):
        db.execute("select * from sift.search('b', 'x', knobs => %s)", [Jsonb(knobs)])
    with pytest.raises(pgsift.InvalidKnob):
        client.alter_collection("b", **knobs)


def test_bad_sections_are_refused_before_anything_is_written(client, db):
    client.create_collection("v", embedding_dims=DIMS)
    vec = unit(np.random.default_rng(5).normal(size=DIMS))
    bad = [
        Document(source_uri="v", sections=[Section("A", 7)], chunks=[Chunk(content="x", embedding=vec)]),
        Document(source_uri="v", sections=[Section("A", 1, parent=0)], chunks=[Chunk(content="x", embedding=vec)]),
        Document(source_uri="v", sections=[Section("A", 1)], chunks=[Chunk(content="x", embedding=vec, section=1)]),
    ]
    for doc in bad:
        with pytest.raises(pgsift.InvalidArgument):
            client.upsert_documents("v", [doc])
    assert db.execute("select count(*) from sift.documents").fetchone() == (0,)
    doc_id = db.execute("insert into sift.documents (collection_id, source_uri) select collection_id, 'raw' "
                        "from sift.collections returning document_id").fetchone()[0]
    with pytest.raises(psycopg.Error) as err:
        db.execute("select sift.write_chunks(%s, array[0], array['x'], array[null], array[null]::integer[], "
                   "array[%s::vector], array[3])", [[doc_id], "[" + ",".join(map(str, vec)) + "]"])
    assert err.value.sqlstate == "SF003"
    # Parallel arrays of different lengths: refused, naming the function.
    for call in ("select sift.write_sections(%s, array[0, 1], array[null]::integer[], array[1], array['A'])",
                 "select sift.write_chunks(%s, array[0], array['x'], array[null], array[null]::integer[], "
                 "array['[1,0,0,0,0,0,0,0]'::vector], array[0, 1])"):
        with pytest.raises(psycopg.Error, match="needs arrays of one length") as err:
            db.execute(call, [[doc_id]])
        assert err.value.sqlstate == "SF003"


class WordEmbedder:
    """A stand-in embedder: a hashed bag of words (no model needed to test the write path)."""

    dims = DIMS

    def embed(self, texts):
        out = np.zeros((len(texts), DIMS), dtype=np.float32)
        for i, text in enumerate(texts):
            for word in text.lower().split():
                out[i, hash(word) % DIMS] += 1
            out[i] = unit(out[i] + 1e-3)
        return out


def test_hierarchical_ingest_keeps_the_source_and_its_sections(client, db, tmp_path):
    root = Path(__file__).resolve().parents[1]
    (tmp_path / "docs").mkdir()
    for name in ("sql.md", "python.md"):
        (tmp_path / "docs" / name).write_text((root / "docs" / name).read_text(encoding="utf-8"), encoding="utf-8")
    client.create_collection("h", embedding_dims=DIMS)
    docs = documents_from_folder(tmp_path / "docs", WordEmbedder(), strategy="hierarchical", target_tokens=64)
    client.upsert_documents("h", docs)
    tokenizer = LocalTokenizer()
    comment = re.compile(r"<!--.*?-->", re.DOTALL)
    for doc in docs:
        source = comment.sub("", (tmp_path / "docs" / doc.source_uri).read_text(encoding="utf-8"))
        rows = db.execute("select k.content, k.token_count, s.heading, s.level from sift.chunks k "
                          "join sift.documents d using (document_id) left join sift.sections s using (section_id) "
                          "where d.source_uri = %s order by k.ordinal", [doc.source_uri]).fetchall()
        # Every chunk has its section; the text comes back whole; sizes are the tokenizer's.
        assert all(r[2] is not None or r[3] == 0 for r in rows)
        assert "".join(r[0] for r in rows).strip() == source.strip()
        assert all(r[1] == tokenizer.count(r[0]) for r in rows)
        assert max(r[1] for r in rows) <= 256
        n_sections = db.execute("select count(*) from sift.sections s join sift.documents d using (document_id) "
                                "where d.source_uri = %s", [doc.source_uri]).fetchone()[0]
        assert n_sections == len(doc.sections) > 5
    # parent_return over real sections: every merged hit's text is its section's, whole.
    parent = client.search("h", "knobs per call", top_k=5, parent_return="parent")
    assert parent and all(h.section_id is not None for h in parent)
    for h in parent:
        section = client.resolve_sections([h.chunk_id])[-1]
        assert h.content == section.content and h.chunk_ids == section.section_chunk_ids


class Words:
    """A whitespace token counter: exact sizes without a model."""

    name = "words"

    def count(self, text: str) -> int:
        return len(text.split())


ARTICLE = """# Volcanoes

Volcanoes form where magma reaches the surface. Most sit on plate boundaries.
Some rise over hot spots far from any boundary.

## Eruptions

An eruption starts when pressure in the magma chamber exceeds the strength of the rock above.
Gas dissolved in the magma expands as it rises. Explosive eruptions throw ash high into the air.
Effusive eruptions pour lava that flows downhill for kilometres.

## Monitoring

Seismometers record the small earthquakes that come before an eruption.
Satellites measure how the ground swells as magma collects below.
Gas sensors track sulphur dioxide at the vent.
"""


def test_eval_scores_every_policy_from_one_index_and_rebinds_across_a_rechunk(client, db, tmp_path):
    (tmp_path / "kb").mkdir()
    (tmp_path / "kb" / "volcanoes.md").write_text(ARTICLE, encoding="utf-8")
    (tmp_path / "kb" / "other.md").write_text("# Other\n\nNothing about mountains here at all.\n", encoding="utf-8")
    client.create_collection("e", embedding_dims=DIMS)
    client.upsert_documents("e", documents_from_folder(tmp_path / "kb", WordEmbedder(), max_words=400))
    answer = ("Seismometers record the small earthquakes that come before an eruption.\n"
              "Satellites measure how the ground swells")
    golden.import_golden_set(client, "e", "gs", [
        golden.Question("q1", "how is a volcano monitored before it erupts", positives=[golden.Positive(text=answer)]),
    ])
    # Re-chunked with structure: the answer now spans two passages; rebind binds it where it starts.
    client.upsert_documents("e", documents_from_folder(tmp_path / "kb", WordEmbedder(), strategy="hierarchical",
                                                       target_tokens=12, counter=Words()))
    report = golden.rebind(client, "e", "gs")
    start = db.execute("select chunk_id from sift.chunks where content like '%Seismometers%'").fetchone()[0]
    assert [(b.status, b.chunk_id) for b in report.bindings] == [("rebound", start)]

    runs = {policy: evaluation.evaluate(client, "e", top_k=3, store=False, knobs={"parent_return": policy})
            for policy in ("child", "parent", "auto")}
    child, parent = runs["child"], runs["parent"]
    assert child.metrics["merge_rate"] is None and parent.metrics["merge_rate"] > 0
    # A section is more text than its passages, and holds all of the answer.
    assert parent.metrics["mean_tokens"] > child.metrics["mean_tokens"]
    assert parent.metrics["coverage"] == 1.0
    assert all(r.settings["effective"]["parent_return"] == p for p, r in runs.items())
    tokens = dict(db.execute("select chunk_id, token_count from sift.chunks").fetchall())
    hits = client.search("e", "how is a volcano monitored before it erupts", top_k=3, parent_return="parent")
    assert parent.questions[0].tokens == sum(tokens[c] for h in hits for c in evaluation.returned_chunks(h))
    windows = evaluation.evaluate(client, "e", top_k=3, store=False, knobs={"neighbours": 1})
    assert windows.metrics["mean_tokens"] > child.metrics["mean_tokens"]


def test_ranked_units_credit_each_positive_once():
    def hit(chunk_id: int, chunk_ids: list[int], window: list[int] | None = None) -> pgsift.Hit:
        base = dict.fromkeys(f.name for f in dataclasses.fields(pgsift.Hit))
        base.update(chunk_id=chunk_id, chunk_ids=chunk_ids, window_chunk_ids=window, source_uri="d", merged=False)
        return pgsift.Hit(**base)

    hits = [hit(1, [1, 2, 3]), hit(2, [2]), hit(9, [9], window=[8, 9, 3])]
    # the section credits positive 2 first; the later hit on 2 counts as itself; the window reaches 3
    assert evaluation.ranked_units("chunk", hits, {2, 3}) == ["chunk:2", "chunk:2", "chunk:3"]
    assert evaluation.ranked_units("document", hits, {2}) == ["doc:d", "doc:d", "doc:d"]
    assert evaluation.returned_chunks(hits[2]) == [8, 9, 3]


def test_ingest_refuses_what_it_cannot_do(tmp_path):
    (tmp_path / "c.jsonl").write_text('{"source_uri": "a", "content": "x"}\n', encoding="utf-8")
    with pytest.raises(pgsift.InvalidArgument, match="carries its own chunks"):
        documents_from_path(tmp_path / "c.jsonl", None, strategy="hierarchical")
    (tmp_path / "a.md").write_text("# A\n\ntext\n", encoding="utf-8")
    with pytest.raises(pgsift.InvalidArgument, match="chunking strategy"):
        documents_from_folder(tmp_path, WordEmbedder(), strategy="semantic")
    with pytest.raises(pgsift.InvalidArgument):
        documents_from_folder(tmp_path, WordEmbedder(), strategy="hierarchical", target_tokens=0, counter=Words())
