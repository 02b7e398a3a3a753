"""Snippets: a passage of each hit with the query's words marked (ts_headline in the chunk's
own configuration), whichever leg found it; dense-only hits get their first words; html
escapes the text; a pool finalized with the question's text gets them too."""

from __future__ import annotations

import re

import numpy as np
import pgsift
import pytest
from conftest import unit
from pgsift import Chunk, Document

DIMS = 8
TEXTS = {
    "fox": "The quick brown fox jumps over the lazy dog near the <b>river</b> & the old mill by the bridge.",
    "far": "Completely unrelated text about accounting rules, invoices and quarterly reports for finance teams.",
    "de": "Die Häuser am Fluss sind alt und die Brücke ist neu.",
}


@pytest.fixture
def snippets(client):
    client.create_collection("s", embedding_dims=DIMS)
    rng = np.random.default_rng(1)
    client.upsert_documents("s", [
        Document(source_uri=name, language="de" if name == "de" else None,
                 chunks=[Chunk(content=text, embedding=unit(rng.normal(size=DIMS)))])
        for name, text in TEXTS.items()])
    return client


def by_uri(result) -> dict[str, str | None]:
    return {h.source_uri: h.snippet for h in result}


def test_off_by_default_and_marked_when_asked(snippets):
    assert all(h.snippet is None for h in snippets.search("s", "brown fox", top_k=3))
    text = by_uri(snippets.search("s", "brown fox river", top_k=3, snippets="text"))
    assert "**brown** **fox**" in text["fox"] and "**river**" in text["fox"]
    html = by_uri(snippets.search("s", "brown fox river", top_k=3, snippets="html"))
    assert "<mark>brown</mark> <mark>fox</mark>" in html["fox"]
    # The text escaped (ts_headline drops markup tags itself), the marks not.
    assert "<mark>river</mark>" in html["fox"] and "&amp;" in html["fox"] and "<b>" not in html["fox"]


def test_a_hit_the_query_does_not_match_shows_its_first_words(snippets):
    query = unit(np.ones(DIMS))
    result = snippets.search("s", "brown fox", embedding=query, top_k=3, snippets="text", snippet_words=5)
    far = next(h for h in result if h.source_uri == "far")
    assert far.found_by == "dense" and far.snippet == "Completely unrelated text about accounting"
    fox = next(h for h in result if h.source_uri == "fox")
    assert len(re.sub(r"\*\*", "", fox.snippet).split()) <= 5


def test_each_chunk_in_its_own_language(snippets):
    hits = snippets.search("s", "Häuser Brücke", top_k=3, snippets="text", query_language="de")
    assert "**Häuser**" in hits[0].snippet and "**Brücke**" in hits[0].snippet   # german stemming


def test_a_finalized_pool_gets_snippets_from_the_question(snippets, db):
    ids = [r[0] for r in db.execute("select chunk_id from sift.chunks order by chunk_id").fetchall()]
    with_query = snippets.finalize("s", ids, top_k=3, query="lazy dog", snippets="text")
    assert "**lazy** **dog**" in by_uri(with_query)["fox"]
    without = snippets.finalize("s", ids, top_k=3, snippets="text", snippet_words=5)
    assert by_uri(without)["fox"] == "The quick brown fox jumps"
    rows = db.execute("select source_uri, snippet from sift.finalize('s', %s, query_text => 'lazy dog', "
                      "knobs => '{\"snippets\": \"html\"}')", [ids]).fetchall()
    assert "<mark>lazy</mark>" in dict(rows)["fox"]


@pytest.mark.parametrize(("knobs", "knob"), [({"snippets": "markdown"}, "snippets"),
                                             ({"snippet_words": 2}, "snippet_words"),
                                             ({"snippet_words": 500}, "snippet_words")])
def test_bad_snippet_knobs_name_the_knob(snippets, knobs, knob):
    with pytest.raises(pgsift.InvalidKnob) as err:
        snippets.search("s", "fox", **knobs)
    assert err.value.knob == knob
