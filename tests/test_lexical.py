"""The lexical leg: query parsing (OR, "phrases", -exclusions), languages, robustness."""

from __future__ import annotations

import itertools
import re

import numpy as np
import pytest
from conftest import random_documents, unit
from pgsift import Chunk, Document

DIMS = 8

# Text with no searchable term at all: the lexical leg must not run.
NO_TERMS = [
    "", "   ", "\t\n", "!!!???...", "😀🚀", "and or not -", "-", '""', "the of and a",
    '-"" - -- ---',
]
# Text with terms that match nothing in the collection: the leg runs, finds nothing.
ODD_WITH_TERMS = {
    '"unbalanced': "'unbalanc'",
    "a & b | !c <-> (d": "'b' | 'c' | 'd'",
    "O'Reilly's \\ back\\slash": "'o' | 'reilli' | 'back' | 'slash'",
}


def lexical_query(db, text: str, language: str = "english", quoted_text: str = "require") -> str | None:
    return db.execute("select sift.lexical_query(%s::text, %s::regconfig, quoted_text => %s)::text",
                      (text, language, quoted_text)).fetchone()[0]


def or_terms(tsquery_text: str) -> list[str]:
    return re.findall(r"'((?:[^']|'')*)'", tsquery_text)


def one_chunk_docs(texts: list[str], rng: np.random.Generator, prefix: str = "t") -> list[Document]:
    return [Document(source_uri=f"{prefix}-{i}", chunks=[Chunk(content=t, embedding=unit(rng.normal(size=DIMS)))])
            for i, t in enumerate(texts)]


@pytest.fixture
def words_collection(client):
    client.create_collection("words", embedding_dims=DIMS)
    rng = np.random.default_rng(3)
    client.upsert_documents("words", random_documents(rng, 20, DIMS))
    return "words", unit(rng.normal(size=DIMS))


FOX_TEXTS = [
    "the brown fox jumps",       # 0: phrase "brown fox"
    "a fox brown and quick",     # 1: both words, wrong order
    "a red fox sleeps",          # 2: fox, no brown
    "a brown dog barks",         # 3: brown, no fox
    "nothing relevant here",     # 4
]


@pytest.fixture
def fox(client):
    client.create_collection("fox", embedding_dims=DIMS)
    client.upsert_documents("fox", one_chunk_docs(FOX_TEXTS, np.random.default_rng(5)))
    by_text = {h.content: h.chunk_id for h in client.search("fox", embedding=np.ones(DIMS), top_k=10)}
    return [by_text[t] for t in FOX_TEXTS]


def lexical_ids(client, collection: str, query: str, quoted_text: str = "require") -> set[int]:
    result = client.search(collection, query, top_k=50, quoted_text=quoted_text)
    assert all(h.found_by == "lexical" and h.dense_rank is None for h in result)
    return {h.chunk_id for h in result}


# -- never raises, falls back to dense -------------------------------------------

@pytest.mark.parametrize("text", NO_TERMS)
def test_text_without_terms_gives_the_dense_answer(client, db, words_collection, text):
    name, emb = words_collection
    assert lexical_query(db, text) is None  # no terms: no lexical query at all
    hybrid = client.search(name, text, embedding=emb, top_k=8)
    dense = client.search(name, text, embedding=emb, top_k=8, hybrid=False)
    assert [h.chunk_id for h in hybrid] == [h.chunk_id for h in dense]
    assert len(hybrid) == 8
    assert hybrid.legs == ["dense"]
    assert hybrid.lexical_query is None


@pytest.mark.parametrize("text", sorted(ODD_WITH_TERMS))
def test_odd_text_with_unmatched_terms_keeps_the_dense_order(client, db, words_collection, text):
    name, emb = words_collection
    assert lexical_query(db, text) == ODD_WITH_TERMS[text]
    hybrid = client.search(name, text, embedding=emb, top_k=8)
    dense = client.search(name, text, embedding=emb, top_k=8, hybrid=False)
    assert [h.chunk_id for h in hybrid] == [h.chunk_id for h in dense]
    assert hybrid.legs == ["dense", "lexical"]
    assert hybrid.lexical_query == ODD_WITH_TERMS[text]
    assert all(h.lexical_rank is None for h in hybrid)


def test_100kb_of_random_words(client, db, words_collection):
    name, emb = words_collection
    rng = np.random.default_rng(11)
    vocab = ["alpha", "bravo", "zulu", "kilo", "lima", "the", "of", "x-ray", "don't", "42"]
    text = " ".join(rng.choice(vocab, size=25_000))[:100_000]
    assert len(text) == 100_000
    result = client.search(name, text, embedding=emb, top_k=7)
    assert len(result) == 7
    assert 0 < len(or_terms(result.lexical_query)) <= 64
    assert "alpha" in or_terms(result.lexical_query)


def test_10000_distinct_terms_are_bounded_to_the_first_64(client, db, words_collection):
    name, emb = words_collection
    consonants = "bcdfghjklmnpqrtvwxz"   # no vowels: no stopword, nothing to stem
    words = ["q" + "".join(p) for p in itertools.islice(itertools.product(consonants, repeat=4), 10_000)]
    text = " ".join(words)
    assert lexical_query(db, text) == " | ".join(f"'{w}'" for w in words[:64])
    result = client.search(name, text, embedding=emb, top_k=5)
    assert len(result) == 5
    assert or_terms(result.lexical_query) == words[:64]


# -- parser semantics ---------------------------------------------------------------

def test_lexical_query_normalises_terms(db):
    assert lexical_query(db, "running dogs") == "'run' | 'dog'"
    assert lexical_query(db, "the running of the dogs") == "'run' | 'dog'"   # stopwords vanish
    assert lexical_query(db, "Dogs DOGS dogs running") == "'dog' | 'run'"   # distinct, query order
    assert lexical_query(db, "fox -brown") == "'fox' & !'brown'"
    assert lexical_query(db, "-brown") is None                              # exclusions only
    assert lexical_query(db, "corriendo", "spanish") == "'corr'"
    assert lexical_query(db, "running", "simple") == "'running'"
    # boost, the default: phrases and exclusions steer the ranking, the tsquery is the OR alone
    assert lexical_query(db, "fox -brown", quoted_text="boost") == "'fox'"
    assert lexical_query(db, 'dog "brown fox"', quoted_text="boost") == "'brown' <-> 'fox' | 'brown' | 'fox' | 'dog'"


@pytest.mark.parametrize("text", ["running dogs", "  tabs\tand\nnew lines  ", "COVID-19 anti-inflammatory",
                                  "e-mail - spam", "北京大学 東京タワー", "สวัสดีครับ world", "the of and",
                                  "🙂 fox 🙂", "", "   ", "-"])
def test_bare_words_parse_whole_as_they_do_word_by_word(db, text):
    """Text without a quote or a -word is segmented whole, not word by word; a lone quote (skipped
    as a token) sends the same words down the word-by-word path, which must agree."""
    parse = ("select match::text, terms, lift::text, sink::text "
             "from sift._parse_query(%s, array['english', 'simple']::regconfig[])")
    assert db.execute(parse, [text]).fetchone() == db.execute(parse, [text + ' "']).fetchone()


def test_or_semantics_one_matching_word_is_enough(client, fox):
    assert lexical_ids(client, "fox", "fox zebra") == {fox[0], fox[1], fox[2]}
    assert lexical_ids(client, "fox", "zebra") == set()


def test_quoted_phrase_is_required_and_ordered(client, fox):
    assert lexical_ids(client, "fox", '"brown fox"') == {fox[0]}
    assert lexical_ids(client, "fox", 'dog "brown fox"') == {fox[0]}   # phrase required, dog alone is not enough


def test_a_quoted_aside_lifts_without_emptying_the_leg(client, fox):
    # A question quoting a title or a word: the phrase ranks first, the other matches stay.
    result = client.search("fox", 'which animal is the "brown fox" in', top_k=10)
    assert result[0].chunk_id == fox[0]
    assert {h.chunk_id for h in result} == {fox[0], fox[1], fox[2], fox[3]}
    assert result[0].lexical_score == pytest.approx(2 * client.search(
        "fox", "which animal is the brown fox in", top_k=10, quoted_text="require")[0].lexical_score, rel=1e-9)
    # A phrase no chunk holds no longer empties the lexical leg.
    assert lexical_ids(client, "fox", '"purple fox" habits', quoted_text="boost") == {fox[0], fox[1], fox[2]}
    assert lexical_ids(client, "fox", '"purple fox" habits') == set()
    # -word in boost mode lowers the chunks that hold it (x0.5), never drops them.
    lowered = client.search("fox", "fox -brown", top_k=10)
    assert lowered[0].chunk_id == fox[2] and len(lowered) == 3


def test_phrase_does_not_span_the_title_and_the_text(client):
    # "brown" ends the document title, "fox" starts the chunk: the words are not a phrase.
    client.create_collection("span", embedding_dims=DIMS)
    rng = np.random.default_rng(6)
    client.upsert_documents("span", [
        Document(source_uri="s", title="Notes on brown",
                 chunks=[Chunk(content="fox habitats in winter", embedding=unit(rng.normal(size=DIMS)))]),
        Document(source_uri="c", title="Notes",
                 chunks=[Chunk(content="a quick brown fox", embedding=unit(rng.normal(size=DIMS)))]),
    ])
    assert [h.source_uri for h in client.search("span", '"brown fox"', top_k=5, quoted_text="require")] == ["c"]
    # boost: the phrase ranks first, the chunk holding both words apart stays below it
    assert [h.source_uri for h in client.search("span", '"brown fox"', top_k=5)] == ["c", "s"]
    assert {h.source_uri for h in client.search("span", "brown", top_k=5)} == {"s", "c"}  # the title still counts


def test_exclusions(client, fox):
    assert lexical_ids(client, "fox", "fox -brown") == {fox[2]}
    assert lexical_ids(client, "fox", 'fox -"brown fox"') == {fox[1], fox[2]}
    # In a hybrid search excluded chunks may still come from the dense leg, never lexically.
    result = client.search("fox", "fox -brown", embedding=np.ones(DIMS), top_k=10, quoted_text="require")
    brown = {fox[0], fox[1], fox[3]}
    assert {h.chunk_id for h in result if h.lexical_rank is not None} == {fox[2]}
    assert all(h.found_by == "dense" for h in result if h.chunk_id in brown)


def test_lexical_only_search(client, fox):
    result = client.search("fox", "brown", top_k=10)
    assert result.legs == ["lexical"]
    assert {h.chunk_id for h in result} == {fox[0], fox[1], fox[3]}
    assert [h.lexical_rank for h in result] == [1, 2, 3]
    assert all(h.dense_rank is None and h.found_by == "lexical" for h in result)


# -- languages ----------------------------------------------------------------------

SPANISH = ["los niños corrieron al parque", "el gato duerme en la casa", "la lluvia cae sobre la ciudad"]
ENGLISH = ["the children were running to the park", "the cat sleeps in the house", "rain falls on the city"]


def _language_collection(client, name: str, language: str, texts: list[str]) -> int:
    client.create_collection(name, embedding_dims=DIMS, search_language=language)
    client.upsert_documents(name, one_chunk_docs(texts, np.random.default_rng(9), prefix=name))
    hits = client.search(name, embedding=np.ones(DIMS), top_k=10, hybrid=False)
    return next(h.chunk_id for h in hits if h.content == texts[0])


def test_spanish_collection_stems_spanish(client):
    target = _language_collection(client, "es", "spanish", SPANISH)
    result = client.search("es", "corriendo", top_k=5)
    assert result.lexical_query == "'corr'"
    assert [h.chunk_id for h in result] == [target]
    hybrid = client.search("es", "corriendo", embedding=np.ones(DIMS), top_k=5)
    hit = next(h for h in hybrid if h.chunk_id == target)
    assert hit.lexical_rank == 1 and hit.found_by == "both"


def test_language_mismatch_finds_nothing_lexically(client):
    target = _language_collection(client, "es_as_en", "english", SPANISH)
    assert len(client.search("es_as_en", "corriendo", top_k=5)) == 0
    pool = client.explain("es_as_en", "corriendo", embedding=np.ones(DIMS), top_k=5)
    assert pool[0].legs == ["dense", "lexical"]
    assert pool[0].lexical_query == "'corriendo'"
    assert all(c.lexical_rank is None for c in pool)
    assert next(c for c in pool if c.chunk_id == target).found_by == "dense"


def test_english_round_trip(client):
    target = _language_collection(client, "en", "english", ENGLISH)
    result = client.search("en", "runs", top_k=5)
    assert result.lexical_query == "'run'"
    assert [h.chunk_id for h in result] == [target]
