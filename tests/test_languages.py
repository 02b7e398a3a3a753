"""Languages against plain-Python references: CJK and Thai text cut into character bigrams
(sift._segment), BM25 over those bigrams per language, a document's language picking its
text search configuration, the query parsed per configuration, and finalize keeping one
translation of a page and weighing other languages.

The references are written from the issue's definitions, not from the SQL:
  segment      every run of Thai, kana, CJK ideographs or Hangul -> its overlapping
               character bigrams (a lone character stays), other text untouched
  BM25         Lucene idf, k1 1.2, b 0.4, over the bigrams (and lower-cased words)
  page         source_uri without a leading locale segment naming the document's language
  translation  per page keep the document in the question's language if retrieved,
               else the best-scored; other languages' scores x other_language_weight
"""

from __future__ import annotations

import math
import random
import re
import zlib
from collections import Counter

import numpy as np
import pgsift
import psycopg
import pytest
from conftest import unit
from pgsift import Chunk, Client, Document, Section
from pgsift.ingest import documents_from_folder
from pgsift.languages import detect
from psycopg.types.json import Jsonb

DIMS = 8
RUNS = "\u0e00-\u0e7f\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
RUN = re.compile(f"([{RUNS}]+)|([^{RUNS}]+)")

# Characters each language's synthetic text is drawn from (no dataset text in the project).
ALPHABETS = {
    "zh": ("的一是不了人我在有他这中大来上国个到说们为子和你地出道也时年得就那要下以生会自着去之过家学对可她里后"
          "小么心多天而能好都然没日于起还发成事只作当想看文无开手十用主行方又如前所本见经头面公同三已老从动两长"
          "知民样现分将外但身些与高意进把法此实回二理美点月明其种声全工己话"),
    "ja": ("あいうえおかきくけこさしすせそたちつてとなにぬねのはひふへほまみむめもやゆよらりるれろわをんアイウエ"
          "オカキクケコ日本語学生先時間東京"),
    "ko": ("가나다라마바사아자차카타파하고노도로모보소오조호구누두루무부수우주후기니디리미비시이지치한국어서울대"
          "학교"),
    "th": ("กขคงจฉชซญดตถทธนบปผพฟภมยรลวศษสหอฮะาำิีึืุูเแโใไ่้๊๋"
          "็์"),
}


def segment(text: str) -> str:
    return "".join((" " + (run if len(run) < 2 else " ".join(run[i:i + 2] for i in range(len(run) - 1))) + " ")
                   if run else other for run, other in RUN.findall(text))


def tokens(text: str) -> list[str]:
    """What the simple configuration keeps of segmented text: words, lower-cased."""
    # Thai vowel signs and tone marks are marks, not \w, but PostgreSQL's parser keeps them in words.
    return [t.lower() for t in re.findall(r"[\w\u0e00-\u0e7f]+", segment(text))]


def bm25_reference(docs: dict[int, str], query: str, k1: float = 1.2, b: float = 0.4) -> dict[int, float]:
    tf = {i: Counter(tokens(t)) for i, t in docs.items()}
    n = len(tf)
    avgdl = sum(sum(c.values()) for c in tf.values()) / n
    df = Counter(t for c in tf.values() for t in c)
    scores = {}
    for i, counts in tf.items():
        dl = sum(counts.values())
        s = sum(math.log(1 + (n - df[t] + 0.5) / (df[t] + 0.5))
                * counts[t] * (k1 + 1) / (counts[t] + k1 * (1 - b + b * dl / avgdl))
                for t in set(tokens(query)) if counts.get(t))
        if s > 0:
            scores[i] = s
    return scores


def sentence(rng: random.Random, alphabet: str) -> str:
    words = ["".join(rng.choice(alphabet[:40]) for _ in range(rng.randint(2, 6))) for _ in range(rng.randint(3, 9))]
    glue = " " if rng.random() < 0.5 else ""
    return glue.join(words) + rng.choice(["。", "！", ".", ""])


def test_segment_equals_the_reference(db):
    rng = random.Random(1)
    samples = ["", "plain English only", "北京大学在哪里？", "a 東京タワー b", "서울 특별시", "สวัสดีครับ",
               "😀 emoji", "x北y"]
    for _ in range(200):
        alphabet = rng.choice([*ALPHABETS.values(), "abc def ", "😀é ", "0123 -"])
        samples.append("".join(rng.choice(alphabet) for _ in range(rng.randint(0, 30))))
    got = db.execute("select array_agg(sift._segment(s) order by o) from unnest(%s::text[]) "
                     "with ordinality as u(s, o)", [samples]).fetchone()[0]
    assert got == [segment(s) for s in samples]


@pytest.mark.parametrize("language", sorted(ALPHABETS))
def test_lexical_leg_on_cjk_and_thai_equals_bm25_over_bigrams(client, db, language):
    rng = random.Random(zlib.crc32(language.encode()))   # str hash() differs per process
    texts = [sentence(rng, ALPHABETS[language]) for _ in range(60)]
    client.create_collection("t", embedding_dims=DIMS, search_language="simple")
    vecs = np.random.default_rng(2)
    client.upsert_documents("t", [Document(source_uri=f"d{i}", language=language,
                                           chunks=[Chunk(content=t, embedding=unit(vecs.normal(size=DIMS)))])
                                  for i, t in enumerate(texts)])
    ids = dict(db.execute("select d.source_uri, c.chunk_id from sift.chunks c join sift.documents d "
                          "using (document_id)").fetchall())
    docs = {ids[f"d{i}"]: t for i, t in enumerate(texts)}
    checked = tried = 0
    while checked < 8 and tried < 100:   # queries until 8 match something (each is checked either way)
        tried += 1
        source = rng.choice(texts)
        start = rng.randrange(max(1, len(source) - 4))
        query = source[start:start + rng.randint(2, 6)]
        want = bm25_reference(docs, query)
        got = {h.chunk_id: h.lexical_score for h in client.search("t", query, top_k=100)}
        assert set(got) == set(want), query
        for chunk_id, score in want.items():
            assert got[chunk_id] == pytest.approx(score, rel=1e-9), query
        checked += bool(want)
    assert checked == 8


def test_a_documents_language_picks_its_configuration(client, db):
    client.create_collection("l", embedding_dims=DIMS)   # english
    rng = np.random.default_rng(3)

    def doc(uri: str, text: str, language: str | None) -> Document:
        return Document(source_uri=uri, language=language,
                        chunks=[Chunk(content=text, embedding=unit(rng.normal(size=DIMS)))])

    client.upsert_documents("l", [doc("de", "Die Häuser sind groß", "de"), doc("en", "The houses are big", "en"),
                                  doc("xx", "the houses of the unknown", "xx-YY"), doc("none", "running dogs", None)])
    vectors = {uri: set(lexemes) for uri, lexemes in db.execute(
        "select d.source_uri, tsvector_to_array(c.search_vector) from sift.chunks c "
        "join sift.documents d using (document_id)").fetchall()}
    assert vectors["de"] == {"gross", "haus"}            # german: stemmed, stopwords gone
    assert vectors["en"] == {"big", "hous"}
    assert "the" in vectors["xx"]                         # an unknown language: simple
    assert vectors["none"] == {"dog", "run"}             # no language: the collection's english
    configs = {r[0] for r in db.execute("select config::text from sift.collection_configs").fetchall()}
    assert configs == {"english", "german", "simple"}   # english too: search_language may change
    # The query is parsed with every configuration present, or in the question's language.
    assert [h.source_uri for h in client.search("l", "Häuser", top_k=10)] == ["de"]
    assert [h.source_uri for h in client.search("l", "Häuser", top_k=10, query_language="de")] == ["de"]
    assert [h.source_uri for h in client.search("l", "Häuser", top_k=10, query_language="en")] == []
    assert {h.source_uri for h in client.search("l", "houses", top_k=10)} == {"en", "xx"}
    # Each row says what the query was parsed with: every configuration present, or the question's.
    assert client.search("l", "Häuser", top_k=1).hits[0].lexical_configs == ["english", "german", "simple"]
    assert client.search("l", "Häuser", top_k=1, query_language="de").hits[0].lexical_configs == ["german"]
    unknown = client.explain("l", "houses", top_k=1, query_language="qq")
    assert unknown and all(r.lexical_configs == ["simple"] for r in unknown)   # an unknown code: simple, said
    # Changing the collection's language keeps documents in the old one findable by their words.
    client.alter_collection("l", search_language="german")
    assert {h.source_uri for h in client.search("l", "houses", top_k=10)} == {"en", "xx"}
    assert client.search("l", "houses", top_k=1)[0].lexical_configs == ["german", "english", "simple"]
    client.alter_collection("l", search_language="english")
    # Every hit says its language (the primary subtag).
    assert {h.source_uri: h.language for h in client.search("l", "houses", top_k=10)} == {"en": "en", "xx": "xx"}


# -- translations in finalize ------------------------------------------------------------

LANGS = ["en", "de", "fr", "zh"]


def translations_reference(pool, meta, qlang, weight, one, cap, k, threshold=None):
    """pool: [(chunk_id, score)]; meta: chunk_id -> (document_id, language, page or None)."""
    rows = []
    for cid, score in pool:
        doc, lang, page = meta[cid]
        factor = 1.0 if qlang is None or lang is None or lang == qlang else weight
        ok = threshold is None or score >= threshold
        rows.append((cid, doc, lang, page, score * factor, factor, ok))
    keep = {}
    for _cid, doc, _lang, page, *_ in sorted(rows, key=lambda r: (not r[6], r[2] != qlang, -r[4], r[0])):
        if page is not None and one:
            keep.setdefault(page, doc)
    eligible = [r for r in rows if r[6] and (r[3] is None or not one or keep[r[3]] == r[1])]
    order = sorted(eligible, key=lambda r: (-r[4], r[0]))
    seen: Counter = Counter()
    first, late = [], []
    for r in order:
        seen[r[1]] += 1
        (late if cap and seen[r[1]] > cap else first).append(r)
    return (first + late)[:k]


def test_finalize_keeps_one_translation_per_page_like_the_reference(client, db, figure):
    client.create_collection("p", embedding_dims=DIMS)
    rng = random.Random(4)
    vecs = np.random.default_rng(4)
    docs = []
    for page in range(12):
        style = rng.choice(["/{lang}/page{page}", "{lang}-XX/page{page}", "https://site.example/{lang}/page{page}"])
        for lang in rng.sample(LANGS, rng.randint(1, 4)):
            uri = style.format(lang=lang, page=page)
            docs.append(Document(source_uri=uri, language=lang, chunks=[
                Chunk(content=f"page {page} {lang} part {j}", embedding=unit(vecs.normal(size=DIMS)))
                for j in range(rng.randint(1, 3))]))
    docs.append(Document(source_uri="/en/alone", language=None, metadata={}, chunks=[
        Chunk(content="no language", embedding=unit(vecs.normal(size=DIMS)))]))
    docs.append(Document(source_uri="a", language="de", metadata={"page_key": "shared"}, chunks=[
        Chunk(content="keyed de", embedding=unit(vecs.normal(size=DIMS)))]))
    docs.append(Document(source_uri="b", language="en", metadata={"page_key": "shared"}, chunks=[
        Chunk(content="keyed en", embedding=unit(vecs.normal(size=DIMS)))]))
    client.upsert_documents("p", docs)
    meta = {}
    for cid, doc_id, uri, lang, page_key in db.execute(
            "select c.chunk_id, d.document_id, d.source_uri, d.language, d.metadata ->> 'page_key' "
            "from sift.chunks c join sift.documents d using (document_id)").fetchall():
        page = page_key or (re.sub(r"^.*?(page\d+)$", r"\1", uri) if lang is not None else None)
        meta[cid] = (doc_id, lang, page)
    ids = sorted(meta)
    dropped = 0
    for case in range(120):
        pool = rng.sample(ids, rng.randint(1, len(ids)))
        scores = sorted((round(rng.random(), 6) for _ in pool), reverse=True)
        qlang = rng.choice([None, *LANGS])
        weight = rng.choice([0.0, 0.5, 0.8, 1.0])
        one = rng.random() < 0.8
        cap = rng.choice([0, 1, 5])
        k = rng.randint(1, 15)
        threshold = rng.choice([None, None, 0.3, 0.6])
        knobs = {"query_language": qlang, "other_language_weight": weight, "one_translation": one,
                 "per_document_cap": cap or None, "score_threshold": threshold}
        hits = client.finalize("p", pool, scores, top_k=k, **knobs)
        want = translations_reference(list(zip(pool, scores, strict=True)), meta, qlang, weight, one, cap, k,
                                      threshold)
        label = (case, knobs)
        assert [h.chunk_id for h in hits] == [r[0] for r in want], label
        assert [h.language_factor for h in hits] == [r[5] for r in want], label
        assert [h.language for h in hits] == [r[2] for r in want], label
        explained = db.execute(
            "select count(*) from sift.explain('p', 'page', null, %s, knobs => %s) where cut_by = 'translation'",
            [k, Jsonb(knobs)]).fetchone()[0]
        dropped += explained
    assert dropped > 0
    figure("one_translation / other_language_weight oracle cases", 120)


def test_language_knobs_refuse_bad_values(client, db):
    client.create_collection("b", embedding_dims=DIMS)
    for knobs, knob in [({"query_language": "english!"}, "query_language"),
                        ({"other_language_weight": 1.5}, "other_language_weight"),
                        ({"quoted_text": "maybe"}, "quoted_text")]:
        with pytest.raises(pgsift.InvalidKnob) as err:
            client.search("b", "x", **knobs)
        assert err.value.knob == knob
    with pytest.raises(psycopg.errors.CheckViolation):
        db.execute("insert into sift.language_configs values ('Deutsch', 'german')")
    # Odd but valid: an unknown code, mixed scripts, no letters at all.
    client.upsert_documents("b", [Document(source_uri="m", language="qq", chunks=[
        Chunk(content="mixed 中文 text ไทย 123 😀", embedding=unit(np.ones(DIMS)))])])
    assert [h.source_uri for h in client.search("b", "中文", top_k=3, query_language="qq")] == ["m"]
    assert client.search("b", "😀 !!", top_k=3).legs == []


def test_detection_is_offline_and_feeds_query_language_and_ingest(client, db, tmp_path):
    texts = ["Wer gewann den Super Bowl?", "超级碗的冠军是谁", "ใครชนะซูเปอร์โบวล์", "who won the super bowl"]
    assert [detect(t) for t in texts] == ["de", "zh", "th", "en"]
    assert detect("😀 123 !!") is None
    with pytest.raises(pgsift.InvalidArgument):
        detect(42)  # type: ignore[arg-type]
    (tmp_path / "de.md").write_text("# Häuser\n\nDie Häuser in der Stadt sind sehr groß und alt.\n", encoding="utf-8")
    (tmp_path / "en.md").write_text("# Houses\n\nThe houses in the city are very big and old.\n", encoding="utf-8")

    class Bag:
        dims = DIMS

        def embed(self, texts):
            return np.stack([unit(np.ones(DIMS) + 0.01 * i) for i in range(len(texts))]).astype(np.float32)

    docs = documents_from_folder(tmp_path, Bag(), detect_language=True)
    assert {d.source_uri: d.language for d in docs} == {"de.md": "de", "en.md": "en"}
    client.create_collection("d", embedding_dims=DIMS)
    client.upsert_documents("d", docs)
    # "auto": the client detects the question's language and the search prefers that translation.
    auto = client.search("d", "Wie alt sind die Häuser der Stadt?", top_k=5, query_language="auto")
    assert auto[0].source_uri == "de.md" and auto[0].language == "de"
    assert all(h.language_factor == (1.0 if h.language == "de" else 0.8) for h in auto)


def test_one_collection_per_language_searched_together(client):
    rng = np.random.default_rng(9)
    query = unit(rng.normal(size=DIMS))
    for lang in ("en", "de", "fr"):
        client.create_collection(f"site-{lang}", embedding_dims=DIMS)
        # every collection's rank 1 is page 0: equal fused scores when merged
        client.upsert_documents(f"site-{lang}", [
            Document(source_uri=f"/{lang}/page{p}", language=lang, chunks=[
                Chunk(content=f"page {p}", embedding=unit(query + 0.3 * p * unit(rng.normal(size=DIMS))))])
            for p in range(4)])
    names = ["site-en", "site-de", "site-fr"]
    plain = client.search(names, embedding=query, top_k=6, one_translation=False)
    assert len({h.source_uri.split("/")[2] for h in plain}) < len(plain)   # translations repeat
    aware = client.search(names, embedding=query, top_k=6, query_language="de")
    pages = [h.source_uri.split("/")[2] for h in aware]
    assert len(pages) == len(set(pages)) == 4                               # one translation each
    assert all(h.language == "de" and h.collection_name == "site-de" for h in aware)


def test_a_writer_under_row_level_security_writes_languages_and_sections(db, connect_as):
    db.execute("select sift.map_role('t_writer', 'default')")
    Client(db).create_collection("rls", embedding_dims=DIMS)
    writer = Client(connect_as("t_writer"))
    writer.upsert_documents("rls", [Document(
        source_uri="/de/x", language="de", sections=[Section("Kopf", 1)],
        chunks=[Chunk(content="Die Häuser", embedding=unit(np.ones(DIMS)), section=0)])])
    assert db.execute("select config::text from sift.collection_configs").fetchall() == [("german",)]
    hit = writer.search("rls", "Haus", top_k=1, query_language="de")[0]
    assert hit.language == "de" and hit.section_id is not None
    assert [s.heading for s in writer.resolve_sections(hit)] == ["Kopf"]


def test_a_translation_below_the_threshold_gives_way_to_one_above_it(client, db):
    client.create_collection("t2", embedding_dims=DIMS)
    vec = unit(np.ones(DIMS))
    client.upsert_documents("t2", [Document(source_uri=f"/{lang}/p", language=lang,
                                            chunks=[Chunk(content=lang, embedding=vec)]) for lang in ("en", "de")])
    ids = dict(db.execute("select d.language, c.chunk_id from sift.chunks c join sift.documents d "
                          "using (document_id)").fetchall())
    hits = client.finalize("t2", [ids["en"], ids["de"]], [0.9, 0.1], query_language="de", score_threshold=0.5)
    assert [h.language for h in hits] == ["en"]   # the page is not lost with its preferred translation


def test_cjk_exclusions_and_phrases_keep_their_sign(db):
    def parse(text: str, strict: bool) -> tuple:
        return db.execute("select match::text, lift::text, sink::text from sift._parse_query(%s, "
                          "array['simple']::regconfig[], 64, %s)", [text, strict]).fetchone()

    assert parse("東京 -北京大学", True) == ("'東京' & !( '北京' <-> '京大' <-> '大学' )", None, None)
    assert parse("東京 -北京大学", False) == ("'東京'", None, "'北京' <-> '京大' <-> '大学'")
    assert parse('"北京大学" 東京', False)[1] == "'北京' <-> '京大' <-> '大学'"
    # A phrase that is stopwords in one configuration is required nowhere in strict mode.
    match = db.execute("select (sift._parse_query('\"to be\" house', array['english', 'simple']::regconfig[], "
                       "64, true)).match::text").fetchone()[0]
    assert "&" not in match
