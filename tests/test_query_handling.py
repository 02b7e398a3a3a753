"""What each leg does with each kind of query: docs/queries.md's table, measured.

Every row of the table names a test here that asserts what the row says, and every example
of its Example column must give the tsquery of its Lexical query column
(test_the_table_is_what_sift_lexical_query_returns), so the page cannot drift from the
parser. The dense leg never sees the text: the client embeds it with its embedder; what the
page says of all-MiniLM-L6-v2 (pgsift's local embedder) is measured with NumpyMiniLM, the
same model.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest
from pgsift import Chunk, Client, Document
from pgsift.embed import NumpyMiniLM

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "queries.md"

TEXTS = {
    "phrase": "The quick brown fox jumps over the lazy dog.",
    "apart": "A fox, quick and brown, ran into the woods.",
    "red": "A red fox sleeps under the oak tree.",
    "dog": "A brown dog barks at the postman.",
    "cold": "It was -5 degrees outside in January.",
    "five": "Only 5 people came to the meeting.",
    "snake": "The helper snake_case_name returns the display name.",
    "case": "Pick a name for the case folder.",
    "camel": "Call getUserName on the HttpClient object.",
    "dotted": "Build paths with os.path.join on every platform.",
    "py311": "Python 3.11 adds exception groups.",
    "py3114": "Python 3.11.4 is a bugfix release.",
    "v201": "Release v2.0.1 fixes the query parser.",
    "lr": "Set the learning rate to 1e-5 for fine-tuning.",
    "covid": "COVID-19 vaccines were approved in 2020.",
    "room": "Room 19 is closed for repairs.",
    "vitamin": "Vitamin C helps the immune system.",
    "refunds": "Refunds are paid within 14 days of a return.",
    "parcels": "Parcels ship from Rotterdam every weekday morning.",
    "leave": "Employees get 25 days of paid leave a year.",
}

# A question pasted with its context: 320 words, 165 terms; its last sentence is the only
# one about parcels, long after the first 64 distinct terms.
PARAGRAPH = (
    "How long do refunds take? I ordered a winter coat from your shop in the middle of November and it "
    "arrived almost two weeks later than the confirmation email promised. When I finally opened the box the "
    "sleeves were far too long, the zip was broken and the colour looked nothing like the photographs on the "
    "website. I returned the coat the same afternoon using the prepaid label that came with the order, and the "
    "tracking page says your warehouse received it on the third of December. Since then nobody has answered "
    "my messages. I would like to know whether the original delivery fee is paid back as well, and whether I "
    "have to do anything else to get my money. Your help pages mention a refund window, but they do not say "
    "when that window starts or who decides whether a return is accepted. I also noticed that the invoice "
    "lists a discount code I never used, so the amount I paid does not match the amount on the receipt. "
    "Could someone check that too? I have been a loyal customer for six years and have recommended the shop "
    "to friends and colleagues, which is why this experience is so disappointing. The coat itself was lovely "
    "in the shop window, and I would happily buy it again in the right size if the stock allows. Please also "
    "tell me whether exchanges are possible instead of a second payment, because a coat in a smaller size "
    "would solve the whole problem, and I would rather not start the entire order from the beginning. My "
    "sister works in logistics and says that these things usually take a few days at most, so I am surprised "
    "that it has already been three weeks. Finally, a friend told me that your parcels ship from Rotterdam "
    "every weekday morning, so I would like to know whether a replacement could reach me before the holidays."
)


class Recording:
    """The client's embedder: all-MiniLM-L6-v2, remembering every text it was given."""

    dims = 384
    name = "all-MiniLM-L6-v2"

    def __init__(self, model: NumpyMiniLM):
        self.model = model
        self.texts: list[str] = []

    def embed(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        self.texts.extend(texts)
        out: npt.NDArray[np.float32] = self.model.embed(texts)
        return out


@pytest.fixture(scope="module")
def minilm() -> NumpyMiniLM:
    return NumpyMiniLM()


@pytest.fixture(scope="module")
def vectors(minilm: NumpyMiniLM) -> dict[str, Any]:
    return dict(zip(TEXTS, minilm.embed(list(TEXTS.values())), strict=True))


@pytest.fixture
def recording(minilm: NumpyMiniLM) -> Recording:
    return Recording(minilm)


@pytest.fixture
def notes(db, vectors, recording) -> tuple[Client, Client]:
    """The collection `notes` (TEXTS, one document each, its key the source_uri), a client that
    embeds its queries (`recording`) and one that does not (its searches are lexical only)."""
    plain = Client(db)
    plain.create_collection("notes", embedding_dims=384)
    plain.upsert_documents("notes", [Document(source_uri=key, chunks=[Chunk(content=text, embedding=vectors[key])])
                                     for key, text in TEXTS.items()])
    return Client(db, embedder=recording), plain


def lexical(client: Client, query: str, **knobs: Any) -> list[str]:
    """The lexical leg alone (no embedding), best first, as source keys."""
    result = client.search("notes", query, top_k=50, **knobs)
    assert all(h.found_by == "lexical" for h in result)
    return [h.source_uri for h in result]


def lexical_query(db, text: str, **kwargs: Any) -> str | None:
    args = "".join(f", {k} => %({k})s" for k in kwargs)
    row = db.execute(f"select sift.lexical_query(%(text)s::text{args})::text", {"text": text, **kwargs}).fetchone()
    return row[0] if row else None


def or_terms(tsquery: str | None) -> list[str]:
    return re.findall(r"'((?:[^']|'')*)'", tsquery or "")


def cosine(model: NumpyMiniLM, a: str, b: str) -> float:
    va, vb = model.embed([a, b])
    return round(float(va @ vb), 2)


# -- one test per row of the table ---------------------------------------------------------

def test_quoted_phrase(db, notes, minilm, recording):
    embedding, plain = notes
    # boost (the default): the same words match; the chunk holding the phrase scores x2 and ranks first.
    quoted, bare = lexical(plain, '"brown fox"'), lexical(plain, "brown fox")
    assert set(quoted) == set(bare) == {"phrase", "apart", "red", "dog"}
    assert quoted[0] == "phrase" and bare[0] != "phrase"
    score = {h.source_uri: h.lexical_score for h in plain.search("notes", '"brown fox"')}
    unquoted = {h.source_uri: h.lexical_score for h in plain.search("notes", "brown fox")}
    assert score["phrase"] == pytest.approx(2 * unquoted["phrase"], rel=1e-9)
    assert score["apart"] == pytest.approx(unquoted["apart"], rel=1e-9)
    # require: only the chunk holding the words adjacent and in order.
    assert lexical(plain, '"brown fox"', quoted_text="require") == ["phrase"]
    # The dense leg: the text is embedded as typed, quotes and all; they barely move the vector.
    embedding.search("notes", '"brown fox"')
    assert recording.texts == ['"brown fox"']
    assert cosine(minilm, '"brown fox"', "brown fox") == 0.94


def test_minus_word(db, notes, minilm, recording):
    embedding, plain = notes
    assert lexical_query(db, "fox -brown") == "'fox'"
    assert lexical_query(db, "fox -brown", quoted_text="require") == "'fox' & !'brown'"
    # boost: brown is no term; the chunks holding it stay, at half their score.
    lowered = plain.search("notes", "fox -brown", top_k=10)
    plain_fox = {h.source_uri: h.lexical_score for h in plain.search("notes", "fox", top_k=10)}
    assert lowered[0].source_uri == "red"
    assert {h.source_uri for h in lowered} == {"phrase", "apart", "red"}
    for h in lowered:
        assert h.lexical_score == pytest.approx(plain_fox[h.source_uri] * (1 if h.source_uri == "red" else 0.5),
                                                rel=1e-9)
    # require: excluded.
    assert lexical(plain, "fox -brown", quoted_text="require") == ["red"]
    # The dense leg reads -brown as brown: the vector moves toward it, not away.
    embedding.search("notes", "fox -brown")
    assert recording.texts == ["fox -brown"]
    assert cosine(minilm, "fox -brown", "fox brown") == 0.90
    assert cosine(minilm, "fox -brown", "fox") == 0.72


def test_negative_number(db, notes, recording):
    embedding, plain = notes
    # A minus before a digit is the number's sign, as the chunk was indexed ('-5'), not an exclusion.
    assert lexical_query(db, "-5 degrees") == "'-5' | 'degre'"
    assert lexical(plain, "-5") == ["cold"]
    assert set(lexical(plain, "people -5", quoted_text="require")) == {"cold", "five"}   # none excluded
    assert lexical_query(db, "a -1e-5 b") == "'-1e-5' | 'b'"
    # To exclude a number, quote it.
    assert lexical_query(db, 'people -"5"', quoted_text="require") == "'peopl' & !'5'"
    # The whole-text path and the word-by-word one (taken when a quote appears) agree.
    parse = "select match::text, terms from sift._parse_query(%s, array['english']::regconfig[])"
    for text in ("-5 degrees", "temperature -5", "x -1e-5"):
        assert db.execute(parse, [text]).fetchone() == db.execute(parse, [text + ' "']).fetchone()
    # The dense leg: embedded as typed.
    embedding.search("notes", "-5 degrees")
    assert recording.texts == ["-5 degrees"]


@pytest.mark.parametrize("question", ["who are they", "what is the", "don't"])
def test_stopwords_only(db, notes, question):
    embedding, plain = notes
    assert lexical_query(db, question) is None
    # With a query vector: the dense answer, the lexical leg not run, no error.
    hybrid = embedding.search("notes", question, top_k=5)
    dense = embedding.search("notes", question, top_k=5, hybrid=False)
    assert [h.chunk_id for h in hybrid] == [h.chunk_id for h in dense]
    assert len(hybrid) == 5 and hybrid.legs == ["dense"] and hybrid.lexical_query is None
    assert all(h.found_by == "dense" and h.lexical_rank is None for h in hybrid)
    # Without one: nothing to search, an empty answer (no error).
    assert len(plain.search("notes", question)) == 0


def test_pasted_paragraph(db, notes, minilm, recording):
    embedding, plain = notes
    assert len(PARAGRAPH.split()) == 320
    # The first max_query_terms (64) distinct terms, in text order.
    first = [r[0] for r in db.execute(
        "select lexeme from unnest(to_tsvector('english', %s)) order by positions[1] limit 64", [PARAGRAPH])]
    assert or_terms(lexical_query(db, PARAGRAPH)) == first
    assert "rotterdam" not in first and "parcel" not in first
    found = lexical(plain, PARAGRAPH)
    assert found[0] == "refunds"                 # the leg answers, and its question's chunk is first
    assert "parcels" not in found                # its last sentence came after the 64th term
    assert "parcels" in lexical(plain, PARAGRAPH, max_query_terms=1000)
    # Far past the limit: twenty pastes and 10,000 more distinct words (over 100,000
    # characters, the rest ignored) still answer, from the same first 64 terms.
    huge = " ".join([PARAGRAPH] * 20 + [f"zq{i}x" for i in range(10_000)])
    assert len(huge) > 100_000
    result = plain.search("notes", huge, top_k=50)
    assert result.legs == ["lexical"] and result[0].source_uri == "refunds"
    assert or_terms(result.lexical_query) == first
    # The dense leg: the client embeds the whole paste; all-MiniLM-L6-v2 reads its first 256
    # tokens, the first 231 of these words, so what follows them changes nothing.
    hits = embedding.search("notes", PARAGRAPH, top_k=5)
    assert recording.texts == [PARAGRAPH] and hits.legs == ["dense", "lexical"]
    words = PARAGRAPH.split()
    assert len(minilm.tokenizer.encode(" ".join(words[:230])).ids) == 255
    assert minilm.tokenizer.encode(" ".join(words[:231])).ids == minilm.tokenizer.encode(PARAGRAPH).ids
    head, whole = minilm.embed([" ".join(words[:231]), PARAGRAPH])
    assert float(head @ whole) == pytest.approx(1.0, abs=1e-6)


def test_snake_case(db, notes, minilm):
    _, plain = notes
    # Split at the underscores: any part matches, the chunk holding them all first.
    assert lexical_query(db, "snake_case_name") == "'snake' | 'case' | 'name'"
    found = lexical(plain, "snake_case_name")
    assert found[0] == "snake" and set(found) == {"snake", "case"}
    # Quoted: the parts required in order.
    assert lexical(plain, '"snake_case_name"', quoted_text="require") == ["snake"]
    assert cosine(minilm, "snake_case_name", "snake case name") == 0.91


def test_camel_case(db, notes, minilm):
    _, plain = notes
    # One word, lowercased and stemmed: found in any case, never by its parts.
    assert lexical_query(db, "getUserName") == "'getusernam'"
    assert lexical(plain, "getUserName") == lexical(plain, "GETUSERNAME") == ["camel"]
    assert lexical(plain, "HttpClient") == ["camel"]
    assert "camel" not in lexical(plain, "get user name")
    assert cosine(minilm, "getUserName", "get user name") == 0.90


def test_dotted_name(db, notes, minilm):
    _, plain = notes
    # One term (PostgreSQL's parser reads it as a host name): only the whole name matches.
    assert lexical_query(db, "os.path.join") == "'os.path.join'"
    assert [r[0] for r in db.execute("select alias from ts_debug('english', 'os.path.join config.yaml')")] == \
        ["host", "blank", "host"]
    assert lexical(plain, "os.path.join") == ["dotted"]
    assert lexical(plain, "join") == lexical(plain, "path.join") == []
    assert lexical(plain, "os.path.join join") == ["dotted"]
    assert lexical_query(db, "config.yaml HttpClient.get") == "'config.yaml' | 'httpclient.get'"
    assert cosine(minilm, "os.path.join", "os path join") == 0.86


def test_version(db, notes, vectors):
    embedding, plain = notes
    # One term each, matched whole.
    assert lexical(plain, "3.11") == ["py311"]            # not 3.11.4
    assert lexical(plain, "3.11.4") == ["py3114"]
    assert lexical(plain, "v2.0.1") == ["v201"]
    assert lexical(plain, "2.0.1") == []                  # not v2.0.1
    assert lexical(plain, "1e-5") == ["lr"]
    # The dense leg is near, not exact: 2.0.1 lands nearest the v2.0.1 chunk.
    assert embedding.search("notes", "2.0.1", top_k=1, hybrid=False)[0].source_uri == "v201"


def test_hyphenated_number(db, notes, recording):
    embedding, plain = notes
    # The parser reads -19 as a signed number, in the chunk and in the query alike.
    assert lexical(plain, "COVID-19") == ["covid"]
    assert set(lexical(plain, "covid 19")) == {"covid", "room"}   # 19 is not -19
    assert lexical_query(db, "GPT-4o") == "'gpt-4o' | 'gpt' | '4o'"
    embedding.search("notes", "COVID-19")
    assert recording.texts == ["COVID-19"]                      # the dense leg: embedded as typed


def test_symbols(db, notes, minilm):
    _, plain = notes
    # Symbols are dropped: C++ is the letter c; AT&T is two stopwords.
    assert lexical(plain, "C++") == lexical(plain, "C#") == ["vitamin"]
    assert lexical_query(db, "AT&T") is None
    # The model keeps them as tokens.
    assert minilm.tokenizer.encode("C++").tokens == ["[CLS]", "c", "+", "+", "[SEP]"]
    assert minilm.tokenizer.encode("C#").tokens == ["[CLS]", "c", "#", "[SEP]"]


@pytest.mark.parametrize("text", ["", "   ", "\n\t"])
def test_empty(db, notes, vectors, recording, text):
    embedding, plain = notes
    assert lexical_query(db, text) is None
    # The client embeds nothing: no leg runs, an empty answer, no error.
    assert len(embedding.search("notes", text)) == 0
    assert recording.texts == []
    # An embedding given: the dense leg alone.
    given = plain.search("notes", text, embedding=vectors["refunds"], top_k=3)
    assert given.legs == ["dense"] and given[0].source_uri == "refunds"


@pytest.mark.parametrize("text", ["?!...", "😀🚀", "-", '""'])
def test_punctuation_and_emoji(db, notes, minilm, recording, text):
    embedding, plain = notes
    assert lexical_query(db, text) is None
    assert len(plain.search("notes", text)) == 0
    # The client embeds it anyway; the dense leg returns its nearest chunks.
    result = embedding.search("notes", text, top_k=4)
    assert recording.texts == [text]
    assert len(result) == 4 and result.legs == ["dense"]
    assert minilm.tokenizer.encode("😀🚀").tokens == ["[CLS]", "[UNK]", "[SEP]"]


# -- the table -----------------------------------------------------------------------------

EMPTY = "(empty)"


def table() -> list[dict[str, str]]:
    """docs/queries.md's table: one dict a row, by column header (`\\|` unescaped)."""
    lines = [line for line in PAGE.read_text(encoding="utf-8").splitlines() if line.startswith("| ")]
    split = [[c.strip().replace("\\|", "|") for c in re.split(r"(?<!\\)\|", line)[1:-1]] for line in lines]
    header, rows = split[0], split[2:]
    assert all(len(r) == len(header) for r in rows), "a row has more or fewer cells than the header"
    return [dict(zip(header, r, strict=True)) for r in rows]


def entries(cell: str) -> list[str | None]:
    """The code spans of a cell in order; `null` is None and (empty) the empty text."""
    return [None if m.group(0) == "null" else "" if m.group(0) == EMPTY else m.group(1)
            for m in re.finditer(r"`([^`]*)`|\bnull\b|\(empty\)", cell)]


ROWS = table()


def test_the_table_has_the_columns_and_rows_it_promises():
    assert list(ROWS[0]) == ["Query", "Example", "Lexical query", "Lexical leg", "Dense leg", "What to do", "Test"]
    kinds = [r["Query"] for r in ROWS]
    for kind in ("Quoted phrase", "-word", "Stopwords only", "Pasted paragraph", "snake_case", "CamelCase",
                 "Dotted name", "Version or number", "Empty", "Punctuation or emoji"):
        assert kind in kinds, kind


@pytest.mark.parametrize("row", ROWS, ids=[r["Query"] for r in ROWS])
def test_the_table_is_what_sift_lexical_query_returns(db, row):
    examples = [e for e in entries(row["Example"]) if e is not None]
    expected = entries(row["Lexical query"])
    assert len(examples) == len(expected), f"{row['Query']}: one lexical query per example"
    for example, tsquery in zip(examples, expected, strict=True):
        assert lexical_query(db, example) == tsquery, example


def test_every_row_names_its_test_and_every_test_a_row():
    tree = ast.parse(Path(__file__).read_text(encoding="utf-8"))
    tests = {node.name for node in tree.body if isinstance(node, ast.FunctionDef) and node.name.startswith("test_")}
    named = [name for r in ROWS for name in entries(r["Test"])]
    assert named and all(name in tests for name in named), sorted(set(named) - tests)
    assert len(named) == len(set(named)), "two rows name the same test"
    own = {"test_the_table_has_the_columns_and_rows_it_promises", "test_the_table_is_what_sift_lexical_query_returns",
           "test_every_row_names_its_test_and_every_test_a_row"}
    assert tests - own == set(named), "a test no row names: " + ", ".join(sorted(tests - own - set(named)))
